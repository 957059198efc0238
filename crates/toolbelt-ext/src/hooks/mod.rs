//! Command hooks from settings files: programs that see each tool call before and after it
//! runs, with Claude Code's protocol.
//!
//! A settings file's `hooks` hold, per event, matchers (a regular expression over the tool
//! name, whole-name: `Write`, `Edit|Write`, `Notebook.*`, and for an MCP server's tool also
//! over Claude Code's `mcp__server__tool`, so `mcp__github__.*` takes all of one server's
//! tools; empty or `*` for every tool) and
//! the commands to run:
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Edit|Write",
//!                            "hooks": [{"type": "command", "command": "./check.sh", "timeout": 10}]}]}}
//! ```
//!
//! Each command runs with `sh -c` in the project directory, gets the call as JSON on stdin
//! (`hook_event_name`, `tool_name`, `tool_input`, `tool_call_id`, `cwd`, and for
//! `PostToolUse` `tool_response`), the scrubbed environment of Bash
//! ([`EnvPolicy`]) plus `TOOLBELT_PROJECT_DIR` and `CLAUDE_PROJECT_DIR`, and the same
//! process containment: when it ends or its timeout (default 60 s) passes, every process it
//! started is ended.
//!
//! What it answers:
//! - exit 0 with nothing on stdout: the call goes on;
//! - exit 0 with a JSON object: `hookSpecificOutput.permissionDecision` `allow`, `deny`
//!   (with `permissionDecisionReason`, which the model reads) or `ask` (the approver
//!   decides; without one the call is refused), `hookSpecificOutput.updatedInput` (the call
//!   goes on with these arguments), the older `decision: "block" | "approve"` with
//!   `reason`, and `continue: false` with `stopReason`;
//! - exit 2: the call is blocked and the model reads the hook's stderr;
//! - anything else (another exit code, a signal, the timeout, stdout that is not such an
//!   object): the call fails with the hook's message. Claude Code lets a failed hook's call
//!   go on; here a hook that cannot answer never allows silently.
//!
//! After the call (`PostToolUse`), exit 2 or `decision: "block"` turn the result into an
//! error the model reads with the reason; `hookSpecificOutput.additionalContext` is added to
//! the result. The tool has run either way.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolbelt_core::{EnvPolicy, ToolContext, ToolError, ToolOutput};
use toolbelt_exec::{
    AfterAction, AfterHook, ApprovalDecision, ApprovalRequest, Approver, BeforeAction, BeforeHook,
    HookCall,
};
use toolbelt_process::{Contain, Containment, Grace};

mod conversation;
pub use conversation::{PromptCheck, StopCheck};

/// How long a hook may run unless its entry says otherwise (Claude Code's default).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a hook's stdout and of its stderr that is read; the rest is dropped.
const MAX_OUTPUT: usize = 64 * 1024;
/// The longest timeout an entry may set.
const MAX_TIMEOUT_SECS: u64 = 3600;

/// Why a settings file's hooks were refused.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: hooks: {message}")]
pub struct HooksError {
    source_name: String,
    message: String,
}

#[derive(Deserialize, Default)]
struct SettingsFile {
    #[serde(default)]
    hooks: Option<HookLists>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct HookLists {
    #[serde(default)]
    pre_tool_use: Vec<MatcherEntry>,
    #[serde(default)]
    post_tool_use: Vec<MatcherEntry>,
    #[serde(default)]
    user_prompt_submit: Vec<MatcherEntry>,
    #[serde(default)]
    stop: Vec<MatcherEntry>,
    /// Events this module does not run yet are read, so a file written for Claude Code
    /// loads, and said (see [`CommandHooks::unsupported`]).
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

#[derive(Deserialize)]
struct MatcherEntry {
    #[serde(default)]
    matcher: String,
    hooks: Vec<CommandEntry>,
}

#[derive(Deserialize)]
struct CommandEntry {
    #[serde(rename = "type")]
    kind: String,
    command: String,
    #[serde(default)]
    timeout: Option<u64>,
}

/// One matcher and its commands.
#[derive(Debug)]
struct Matcher {
    /// `None` matches every tool.
    pattern: Option<regex::Regex>,
    pub(crate) commands: Vec<Command>,
}

#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub(crate) line: String,
    timeout: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    pre: Vec<Matcher>,
    post: Vec<Matcher>,
    /// `UserPromptSubmit` and `Stop` (their matchers are not used).
    prompt: Vec<Matcher>,
    stop: Vec<Matcher>,
    unsupported: Vec<String>,
    project: PathBuf,
}

/// The command hooks of a run: a [`BeforeHook`] running the `PreToolUse` commands and an
/// [`AfterHook`] running the `PostToolUse` ones. Cheap to clone. See the [module docs](self).
#[derive(Clone)]
pub struct CommandHooks {
    inner: Arc<Inner>,
    env: Arc<EnvPolicy>,
    approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for CommandHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandHooks")
            .field("pre", &self.inner.pre.len())
            .field("post", &self.inner.post.len())
            .finish()
    }
}

/// Builds [`CommandHooks`] from settings files.
#[derive(Debug, Default)]
pub struct CommandHooksBuilder {
    inner: Inner,
    env: EnvPolicy,
}

impl CommandHooksBuilder {
    /// No hooks yet; commands run in `project_dir`.
    pub fn new(project_dir: impl Into<PathBuf>) -> Self {
        Self {
            inner: Inner {
                project: project_dir.into(),
                ..Inner::default()
            },
            env: EnvPolicy::default(),
        }
    }

    /// The environment policy of the hooks' commands (default: [`EnvPolicy::default`], the
    /// one Bash uses).
    pub fn env(mut self, env: EnvPolicy) -> Self {
        self.env = env;
        self
    }

    /// Adds the `hooks` of a settings file's text; `source` names it in errors.
    pub fn add_settings(&mut self, text: &str, source: &Path) -> Result<(), HooksError> {
        let error = |message: String| HooksError {
            source_name: source.display().to_string(),
            message,
        };
        let file: SettingsFile = serde_json::from_str(text).map_err(|e| error(e.to_string()))?;
        let Some(lists) = file.hooks else {
            return Ok(());
        };
        for (entries, into) in [
            (lists.pre_tool_use, &mut self.inner.pre),
            (lists.post_tool_use, &mut self.inner.post),
            (lists.user_prompt_submit, &mut self.inner.prompt),
            (lists.stop, &mut self.inner.stop),
        ] {
            for entry in entries {
                into.push(matcher(entry).map_err(error)?);
            }
        }
        self.inner.unsupported.extend(
            lists
                .other
                .keys()
                .map(|k| format!("{k} ({})", source.display())),
        );
        Ok(())
    }

    /// Whether any hook was added.
    pub fn is_empty(&self) -> bool {
        self.inner.pre.is_empty()
            && self.inner.post.is_empty()
            && self.inner.prompt.is_empty()
            && self.inner.stop.is_empty()
    }

    /// The hooks; a `PreToolUse` answer of `ask` goes to `approver` (refused without one).
    pub fn build(self, approver: Option<Arc<dyn Approver>>) -> CommandHooks {
        CommandHooks {
            inner: Arc::new(self.inner),
            env: Arc::new(self.env),
            approver,
        }
    }
}

fn matcher(entry: MatcherEntry) -> Result<Matcher, String> {
    let text = entry.matcher.trim();
    let pattern = if text.is_empty() || text == "*" {
        None
    } else {
        Some(
            regex::RegexBuilder::new(&format!("^(?:{text})$"))
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("matcher {text:?}: {e}"))?,
        )
    };
    let mut commands = Vec::new();
    for hook in entry.hooks {
        if hook.kind != "command" {
            return Err(format!(
                "hook type {:?} is not supported (only \"command\")",
                hook.kind
            ));
        }
        if hook.command.trim().is_empty() {
            return Err("a hook's command is empty".into());
        }
        let secs = hook.timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT.as_secs());
        if secs == 0 || secs > MAX_TIMEOUT_SECS {
            return Err(format!(
                "timeout {secs} is not between 1 and {MAX_TIMEOUT_SECS} seconds"
            ));
        }
        commands.push(Command {
            line: hook.command,
            timeout: Duration::from_secs(secs),
        });
    }
    Ok(Matcher { pattern, commands })
}

impl CommandHooks {
    /// The events named in the settings that are read but not run (everything but
    /// `PreToolUse`, `PostToolUse`, `UserPromptSubmit` and `Stop`), with the file each
    /// came from.
    pub fn unsupported(&self) -> &[String] {
        &self.inner.unsupported
    }

    /// The commands of `list` whose matcher takes the call: by the tool's name, or for a
    /// tool of a set (an MCP server) also by Claude Code's `mcp__server__tool` name.
    fn commands<'a>(
        &'a self,
        list: &'a [Matcher],
        call: &HookCall<'_>,
    ) -> impl Iterator<Item = &'a Command> + use<'a> {
        let tool = call.tool_name().to_string();
        let qualified = call.set.map(|set| {
            let own = tool.strip_prefix(&format!("{set}_")).unwrap_or(&tool);
            format!("mcp__{set}__{own}")
        });
        list.iter()
            .filter(move |m| {
                m.pattern.as_ref().is_none_or(|p| {
                    p.is_match(&tool) || qualified.as_deref().is_some_and(|q| p.is_match(q))
                })
            })
            .flat_map(|m| m.commands.iter())
    }

    /// Runs one command with `input` on stdin.
    pub(crate) async fn run(&self, command: &Command, input: &Value) -> Ran {
        let project = self.inner.project.display().to_string();
        let mut child = tokio::process::Command::new("sh");
        child
            .arg("-c")
            .arg(&command.line)
            .current_dir(&self.inner.project)
            .env_clear()
            .envs(self.env.resolve())
            .env("TOOLBELT_PROJECT_DIR", &project)
            .env("CLAUDE_PROJECT_DIR", &project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match Contain::new(Containment::Auto).spawn(child) {
            Ok(child) => child,
            Err(e) => return Ran::Failed(format!("could not start: {e}")),
        };
        let stdin = child.take_stdin();
        let stdout = child.take_stdout();
        let stderr = child.take_stderr();
        let body = input.to_string();
        let talk = async {
            let write = async {
                if let Some(mut stdin) = stdin {
                    // A hook that does not read its input is fine: a broken pipe is ignored.
                    let _ = stdin.write_all(body.as_bytes()).await;
                }
            };
            let (_, out, err) = tokio::join!(write, bounded(stdout), bounded(stderr));
            let status = child.wait().await;
            (status, out, err)
        };
        let outcome = tokio::time::timeout(command.timeout, talk).await;
        match outcome {
            Err(_) => {
                child
                    .close(Grace {
                        eof: Duration::ZERO,
                        term: Duration::from_millis(200),
                    })
                    .await;
                Ran::Failed(format!("timed out after {} s", command.timeout.as_secs()))
            }
            Ok((Err(e), _, _)) => Ran::Failed(format!("could not be waited for: {e}")),
            Ok((Ok(status), stdout, stderr)) => {
                // The hook is done; whatever it left running is ended now.
                child.kill_leftovers(Duration::from_millis(200)).await;
                Ran::Exited {
                    code: status.code,
                    stdout,
                    stderr,
                }
            }
        }
    }
}

/// What running one hook gave.
pub(crate) enum Ran {
    Exited {
        code: Option<i32>,
        stdout: String,
        stderr: String,
    },
    Failed(String),
}

async fn bounded<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let Some(pipe) = pipe else {
        return String::new();
    };
    let mut bytes = Vec::new();
    let mut limited = pipe.take(MAX_OUTPUT as u64);
    let _ = limited.read_to_end(&mut bytes).await;
    // Drain the rest so the hook is never stopped by a full pipe.
    let mut rest = limited.into_inner();
    let _ = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A hook's JSON answer (the fields this module acts on).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Answer {
    #[serde(rename = "continue")]
    pub(crate) keep_going: Option<bool>,
    pub(crate) stop_reason: Option<String>,
    pub(crate) decision: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) hook_specific_output: Option<Specific>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Specific {
    pub(crate) permission_decision: Option<String>,
    pub(crate) permission_decision_reason: Option<String>,
    pub(crate) updated_input: Option<Value>,
    pub(crate) additional_context: Option<String>,
}

/// What one hook decided.
enum Verdict {
    Continue(Option<Answer>),
    Block(String),
    Fail(String),
}

fn verdict(command: &Command, ran: Ran) -> Verdict {
    let name = &command.line;
    match ran {
        Ran::Failed(why) => Verdict::Fail(format!("the hook `{name}` {why}")),
        Ran::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            let text = stdout.trim();
            if text.is_empty() {
                return Verdict::Continue(None);
            }
            match serde_json::from_str::<Value>(text) {
                Ok(value @ Value::Object(_)) => match serde_json::from_value::<Answer>(value) {
                    Ok(answer) => Verdict::Continue(Some(answer)),
                    Err(e) => Verdict::Fail(format!("the hook `{name}` answered badly: {e}")),
                },
                _ => Verdict::Fail(format!(
                    "the hook `{name}` printed something that is not a JSON object: {}",
                    cut(text)
                )),
            }
        }
        Ran::Exited {
            code: Some(2),
            stderr,
            ..
        } => Verdict::Block(if stderr.trim().is_empty() {
            format!("blocked by the hook `{name}`")
        } else {
            stderr.trim().to_string()
        }),
        Ran::Exited { code, stderr, .. } => {
            let how = code.map_or("was killed by a signal".to_string(), |c| {
                format!("exited with {c}")
            });
            Verdict::Fail(format!("the hook `{name}` {how}: {}", cut(stderr.trim())))
        }
    }
}

pub(crate) fn cut(text: &str) -> String {
    const SHOWN: usize = 500;
    toolbelt_core::text::shorten(text, SHOWN).into_owned()
}

fn arguments_value(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or(Value::String(arguments.to_string()))
}

#[async_trait]
impl BeforeHook for CommandHooks {
    async fn before(&self, ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction {
        let tool = call.tool_name();
        let mut arguments = call.arguments.to_string();
        let mut replaced = false;
        for command in self.commands(&self.inner.pre, call) {
            let input = json!({
                "hook_event_name": "PreToolUse",
                "cwd": self.inner.project,
                "tool_name": tool,
                "tool_input": arguments_value(&arguments),
                "tool_call_id": call.call_id,
            });
            let answer = match verdict(command, self.run(command, &input).await) {
                Verdict::Continue(None) => continue,
                Verdict::Continue(Some(answer)) => answer,
                Verdict::Block(reason) | Verdict::Fail(reason) => {
                    return BeforeAction::Reject(reason);
                }
            };
            if answer.keep_going == Some(false) {
                return BeforeAction::Reject(
                    answer
                        .stop_reason
                        .unwrap_or_else(|| format!("stopped by the hook `{}`", command.line)),
                );
            }
            let specific = answer.hook_specific_output.unwrap_or_default();
            let reason = specific
                .permission_decision_reason
                .or(answer.reason)
                .unwrap_or_else(|| format!("the hook `{}` decided", command.line));
            let decision =
                specific
                    .permission_decision
                    .or(answer.decision.map(|d| match d.as_str() {
                        "block" => "deny".to_string(),
                        "approve" => "allow".to_string(),
                        other => other.to_string(),
                    }));
            if let Some(input) = specific.updated_input {
                if !input.is_object() {
                    return BeforeAction::Reject(format!(
                        "the hook `{}` gave an updatedInput that is not an object",
                        command.line
                    ));
                }
                arguments = input.to_string();
                replaced = true;
            }
            match decision.as_deref() {
                None | Some("allow") => {}
                Some("deny") => return BeforeAction::Reject(reason),
                Some("ask") => {
                    let Some(approver) = &self.approver else {
                        return BeforeAction::Reject(format!(
                            "{reason}; the hook asks for the user's approval and nobody could be asked"
                        ));
                    };
                    let request = ApprovalRequest {
                        declaration: call.declaration,
                        call_id: call.call_id,
                        arguments: &arguments,
                        reason: &reason,
                        preview: None,
                    };
                    match approver.decide(ctx, &request).await {
                        ApprovalDecision::Approve => {}
                        ApprovalDecision::ApproveWith(edited) => {
                            arguments = edited;
                            replaced = true;
                        }
                        ApprovalDecision::Deny(message) => return BeforeAction::Reject(message),
                    }
                }
                Some(other) => {
                    return BeforeAction::Reject(format!(
                        "the hook `{}` answered the unknown decision {other:?}",
                        command.line
                    ));
                }
            }
        }
        if replaced {
            BeforeAction::ReplaceArguments(arguments)
        } else {
            BeforeAction::Continue
        }
    }
}

#[async_trait]
impl AfterHook for CommandHooks {
    async fn after(
        &self,
        _ctx: &ToolContext,
        call: &HookCall<'_>,
        result: &Result<ToolOutput, ToolError>,
    ) -> AfterAction {
        let tool = call.tool_name();
        let mut commands = self.commands(&self.inner.post, call).peekable();
        if commands.peek().is_none() {
            return AfterAction::Keep;
        }
        let response = match result {
            Ok(output) => json!({"content": output.llm_text(), "is_error": output.is_error}),
            Err(error) => json!({"error": error.to_string(), "is_error": true}),
        };
        let mut context = Vec::new();
        for command in commands {
            let input = json!({
                "hook_event_name": "PostToolUse",
                "cwd": self.inner.project,
                "tool_name": tool,
                "tool_input": arguments_value(call.arguments),
                "tool_call_id": call.call_id,
                "tool_response": response,
            });
            match verdict(command, self.run(command, &input).await) {
                Verdict::Continue(None) => {}
                Verdict::Continue(Some(answer)) => {
                    if answer.decision.as_deref() == Some("block")
                        || answer.keep_going == Some(false)
                    {
                        let reason = answer
                            .reason
                            .or(answer.stop_reason)
                            .unwrap_or_else(|| format!("blocked by the hook `{}`", command.line));
                        return AfterAction::Replace(Ok(blocked(result, &reason)));
                    }
                    if let Some(more) = answer
                        .hook_specific_output
                        .and_then(|s| s.additional_context)
                    {
                        context.push(more);
                    }
                }
                Verdict::Block(reason) => {
                    return AfterAction::Replace(Ok(blocked(result, &reason)));
                }
                Verdict::Fail(reason) => {
                    return AfterAction::Replace(Err(ToolError::failed(reason)));
                }
            }
        }
        match result {
            Ok(output) if !context.is_empty() => {
                let text = format!("{}\n\n{}", output.llm_text(), context.join("\n"));
                let mut output = output.clone();
                output.for_llm = text.into();
                AfterAction::Replace(Ok(output))
            }
            _ => AfterAction::Keep,
        }
    }
}

/// The result the model reads when a `PostToolUse` hook blocks: what the tool said, then
/// the hook's reason, as an error.
fn blocked(result: &Result<ToolOutput, ToolError>, reason: &str) -> ToolOutput {
    let said = match result {
        Ok(output) => output.llm_text(),
        Err(error) => error.to_string(),
    };
    ToolOutput::error(format!(
        "{said}\n\nA hook objected after the call ran: {reason}"
    ))
}
