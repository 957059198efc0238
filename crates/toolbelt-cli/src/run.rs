//! `toolbelt run PROMPT`: one question to the agent, with the built-in tools in `--dir` and
//! the MCP servers of `--mcp-config`. Only the final answer goes to stdout; the text the
//! model writes between tool calls, one line per tool call, warnings and errors go to stderr.
//! With `--json`, stdout carries every event of the run instead, one JSON object per line
//! (the `toolbelt::agent::Event` serde form, a stable format).
//!
//! Approvals: on a terminal, a call the permission rules ask about is asked there. Without
//! one (a script, CI) and with `--session`, the run pauses instead: the calls wait in the
//! session with what a person needs to decide (the command, the diff), the run ends with
//! exit code 3, and `toolbelt run --session F --session-id ID --approve CALL` (or `--reject`,
//! `--edit`) resumes it, from any process, later. Without `--session` there is nothing to
//! resume, so such a call is refused and the model is told.
//!
//! Exit codes: 0 the run completed, 1 it ended with an error event (the model or the session
//! store failed, too many tool rounds), 2 bad flags or no model configured, 3 it paused for
//! approval, 130 after SIGINT and 143 after SIGTERM (the run is cancelled and its tools
//! stopped first).

use std::collections::HashMap;
use std::io::IsTerminal;

use clap::Args;
use toolbelt::agent::{Decision, RunInput};
use toolbelt::model::Message;

use crate::agent_cli::{
    AgentArgs, AgentSession, Format, MAX_STOP_ROUNDS, Renderer, RunEnd, RunSummary, Spinner,
    approval_from, model_from, resolve_continue, shared_stdin, stored_events, watch_run,
};
use crate::common::{CliError, EXIT_AWAITING_APPROVAL, EXIT_OK, EXIT_TOOL_FAILED, Outcome};

/// The largest `--edit` arguments or `--tool-result` file read, in bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Flags of `toolbelt run`.
#[derive(Args, Debug)]
// A decision or result resumes a stored session: named by --session-id, or the latest one
// with --continue.
#[command(group(clap::ArgGroup::new("resumed_session").args(["session_id", "continue_last"])))]
pub struct RunArgs {
    /// What to ask the agent (`-` reads it from stdin). Leave it out to resume a paused
    /// session with decisions only.
    prompt: Option<String>,
    /// Print every event of the run on stdout as one JSON object per line (a stable format:
    /// see the README) instead of the answer.
    #[arg(long)]
    json: bool,
    /// Approve the paused call CALL (its id, as the pause printed it) and resume the session.
    #[arg(long, value_name = "CALL", requires = "resumed_session")]
    approve: Vec<String>,
    /// Refuse the paused call CALL; `CALL=MESSAGE` tells the model why. (`--deny` is a
    /// permission rule.)
    #[arg(long, value_name = "CALL[=MESSAGE]", requires = "resumed_session")]
    reject: Vec<String>,
    /// Approve the paused call CALL and allow calls like it from now on: the allow rules
    /// for it (`Bash(git push:*)`, `Edit(./src/lib.rs)`, the tool) are added to
    /// `.toolbelt/settings.json` in --dir. An ask rule still asks.
    #[arg(long, value_name = "CALL", requires = "resumed_session")]
    approve_always: Vec<String>,
    /// The result of the long-running call CALL (its text in FILE): resumes the session
    /// that paused on it.
    #[arg(long, value_name = "CALL=FILE", requires = "resumed_session")]
    tool_result: Vec<String>,
    /// Run the paused call CALL with the JSON arguments in FILE instead of the model's.
    #[arg(long, value_name = "CALL=FILE", requires = "resumed_session")]
    edit: Vec<String>,
    #[command(flatten)]
    agent: AgentArgs,
}

impl RunArgs {
    /// The decisions the flags give, by call id; a call decided twice is a usage error.
    fn decisions(&self) -> Result<HashMap<String, Decision>, CliError> {
        let mut decisions = HashMap::new();
        let mut add = |id: &str, decision: Decision| {
            if id.is_empty() {
                return Err(CliError::usage("a decision needs the call's id"));
            }
            if decisions.insert(id.to_string(), decision).is_some() {
                return Err(CliError::usage(format!("call {id} is decided twice")));
            }
            Ok(())
        };
        for id in self.approve.iter().chain(&self.approve_always) {
            add(id, Decision::Approve)?;
        }
        for flag in &self.reject {
            let (id, message) = match flag.split_once('=') {
                Some((id, message)) => (id, Some(message.to_string())),
                None => (flag.as_str(), None),
            };
            add(id, Decision::Deny { message })?;
        }
        for flag in &self.edit {
            let Some((id, file)) = flag.split_once('=') else {
                return Err(CliError::usage(format!(
                    "--edit {flag}: expected CALL=FILE (a file holding the JSON arguments)"
                )));
            };
            add(
                id,
                Decision::Edit {
                    arguments: edited_arguments(file)?,
                },
            )?;
        }
        Ok(decisions)
    }
}

/// The `--session` file's name, as the resume hint prints it.
fn session_file(args: &RunArgs) -> String {
    args.agent
        .session
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// The role=tool messages `--tool-result CALL=FILE` gives, for calls the session awaits.
async fn tool_results(args: &RunArgs) -> Result<Vec<Message>, CliError> {
    if args.tool_result.is_empty() {
        return Ok(Vec::new());
    }
    let awaited = toolbelt::agent::awaiting_results(&stored_events(&args.agent).await?);
    let mut messages = Vec::new();
    for flag in &args.tool_result {
        let Some((id, file)) = flag.split_once('=') else {
            return Err(CliError::usage(format!(
                "--tool-result {flag}: expected CALL=FILE (a file holding the result's text)"
            )));
        };
        let Some(call) = awaited.iter().find(|a| a.call_id == id) else {
            return Err(CliError::usage(format!(
                "--tool-result {id}: the session awaits no result of that call"
            )));
        };
        let text = bounded_text(file, "--tool-result")?;
        messages.push(Message::tool(&call.call_id, &call.name, text));
    }
    Ok(messages)
}

/// Adds the allow rules of the `--approve-always` calls to the settings, saying which.
async fn remember_always(args: &RunArgs) -> Result<(), CliError> {
    let pending = toolbelt::agent::pending_approvals(&stored_events(&args.agent).await?);
    let dir = crate::common::canonical_dir(&args.agent.sources.dir)?;
    let rules = toolbelt::builtin::permission::PermissionRules::new(&dir);
    let mut allow = Vec::new();
    for id in &args.approve_always {
        let Some(call) = pending.iter().find(|p| &p.call_id == id) else {
            return Err(CliError::usage(format!(
                "--approve-always {id}: the session waits for no approval of that call"
            )));
        };
        let for_call = rules.allow_rules_for(&call.name, &call.arguments);
        if for_call.is_empty() {
            eprintln!(
                "toolbelt: no allow rule can be written for call {}; it is approved this once",
                toolbelt::visible(id)
            );
        }
        allow.extend(for_call);
    }
    if allow.is_empty() {
        return Ok(());
    }
    let file = crate::agent_cli::permissions::remember_allow(&dir, &allow)?;
    eprintln!(
        "toolbelt: allowed from now on ({}): {}",
        file.display(),
        toolbelt::visible(&allow.join(", "))
    );
    Ok(())
}

/// The text of `file` (UTF-8, at most [`MAX_FILE_BYTES`]), for `flag`.
fn bounded_text(file: &str, flag: &str) -> Result<String, CliError> {
    use std::io::Read;
    let refuse = |why: String| CliError::usage(format!("{flag} {file}: {why}"));
    let opened = std::fs::File::open(file).map_err(|e| refuse(e.to_string()))?;
    let mut text = String::new();
    opened
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| refuse(e.to_string()))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(refuse(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    Ok(text)
}

/// The JSON object in `file` (bounded), for `--edit`.
fn edited_arguments(file: &str) -> Result<serde_json::Value, CliError> {
    let refuse = |why: String| CliError::usage(format!("--edit {file}: {why}"));
    let text = bounded_text(file, "--edit")?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(refuse("the arguments must be a JSON object".into())),
        Err(e) => Err(refuse(format!("not JSON: {e}"))),
    }
}

/// Runs `toolbelt run`.
pub async fn run(mut args: RunArgs) -> Outcome {
    let decisions = args.decisions()?;
    // The model first: without one there is nothing to do, and nothing should be opened.
    let _script = crate::agent_cli::scripted::start_if_named(&mut args.agent).await?;
    let model = model_from(&args.agent)?;
    resolve_continue(&mut args.agent, false).await?;
    if !args.approve_always.is_empty() {
        // Written before the agent starts, so this run's rules have them too.
        remember_always(&args).await?;
    }
    let input = match args.prompt.as_deref() {
        Some("-") => Some(
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| CliError::usage(format!("cannot read the prompt from stdin: {e}")))?,
        ),
        other => other.map(str::to_string),
    };
    let mut messages = tool_results(&args).await?;
    match &input {
        Some(prompt) if prompt.trim().is_empty() => {
            return Err(CliError::usage("the prompt is empty"));
        }
        Some(_) => {}
        None if decisions.is_empty() && messages.is_empty() => {
            return Err(CliError::usage(
                "give a prompt, or decisions (--approve, --reject, --edit) or results \
                 (--tool-result) to resume a paused session with",
            ));
        }
        None => {}
    }
    let format = if args.json {
        Format::Json
    } else {
        Format::Human
    };
    let spinner = Spinner::new(format);
    let model = model.with_retry_observer(spinner.retry_observer());
    // A stored session can pause for a person who is not at this terminal; the terminal's
    // approver would only refuse.
    let pauses = args.agent.session.is_some() && !std::io::stdin().is_terminal();
    let approval = approval_from(&shared_stdin(), &spinner).filter(|_| !pauses);
    let session = AgentSession::open(&args.agent, model, approval, &spinner).await?;
    if let Some(prompt) = input {
        match session.prompt_hooks(&session.session_id, &prompt).await {
            Ok(sent) => messages.extend(sent),
            Err(why) => {
                // A hook's own words (its stderr) may hold anything: escaped.
                eprintln!(
                    "toolbelt: error: the prompt was not sent: {}",
                    toolbelt::visible(&why)
                );
                session.close(&args.agent).await;
                return Ok(EXIT_TOOL_FAILED);
            }
        }
    }
    let mut renderer = Renderer::new(spinner, format);
    let input = RunInput::from(messages);
    let mut end = watch_run(
        &mut renderer,
        session.start_with(&session.session_id, input, decisions),
    )
    .await;
    // A Stop hook may send the agent on (a check that failed, a task not done), a bounded
    // number of times; the hook is told when it already did.
    for round in 0..MAX_STOP_ROUNDS {
        let RunEnd::Completed(summary) = &end else {
            break;
        };
        if summary.failed || summary.paused() {
            break;
        }
        let Some(reason) = session.stop_hooks(&session.session_id, round > 0).await else {
            break;
        };
        let input = RunInput::from(reason);
        end = watch_run(
            &mut renderer,
            session.start_with(&session.session_id, input, Default::default()),
        )
        .await;
    }
    let session_id = session.session_id.clone();
    session.close(&args.agent).await;
    match end {
        RunEnd::Stopped(signal) => {
            eprintln!("toolbelt: interrupted");
            Ok(signal.exit_code())
        }
        RunEnd::Completed(summary) if summary.failed => Ok(EXIT_TOOL_FAILED),
        RunEnd::Completed(summary) if !summary.running_long.is_empty() => {
            eprintln!(
                "toolbelt: paused until the result of {} long-running call(s) comes; resume \
                 with\n  toolbelt run --session {} --session-id {} --tool-result CALL=FILE, \
                 for CALL in: {}",
                summary.running_long.len(),
                toolbelt::visible(&session_file(&args)),
                toolbelt::visible(&session_id),
                toolbelt::visible(&summary.running_long.join(" | ")),
            );
            Ok(EXIT_AWAITING_APPROVAL)
        }
        RunEnd::Completed(summary) if !summary.awaiting.is_empty() => {
            let file = session_file(&args);
            let ids = summary.awaiting.join(" | ");
            eprintln!(
                "toolbelt: paused for approval of {} call(s); resume with\n  toolbelt run \
                 --session {} --session-id {} --approve CALL (or --reject CALL[=WHY], --edit \
                 CALL=FILE), for CALL in: {}",
                summary.awaiting.len(),
                toolbelt::visible(&file),
                toolbelt::visible(&session_id),
                toolbelt::visible(&ids),
            );
            Ok(EXIT_AWAITING_APPROVAL)
        }
        RunEnd::Completed(RunSummary {
            interrupted: Some((node, _)),
            ..
        }) => {
            if args.agent.session.is_some() {
                eprintln!(
                    "toolbelt: paused: {} waits for an answer; give it with\n  toolbelt run \
                     --session {} --session-id {} \"ANSWER\"",
                    toolbelt::visible(&node),
                    toolbelt::visible(&session_file(&args)),
                    toolbelt::visible(&session_id),
                );
            } else {
                eprintln!(
                    "toolbelt: {} waits for an answer, but this run keeps no session; run it \
                     with --session FILE to answer in a later run",
                    toolbelt::visible(&node),
                );
            }
            Ok(EXIT_AWAITING_APPROVAL)
        }
        RunEnd::Completed(_) => Ok(EXIT_OK),
    }
}
