//! Asking the user before a tool call runs (`--approval`, `--yes`).
//!
//! The policies follow codex's approval modes, reduced to what a tool declaration can tell:
//! `never` runs every call, `on-write` (the default) asks before every tool not declared
//! read-only (Write, Edit, NotebookEdit, Bash, TaskStop, and any MCP tool without a
//! `readOnlyHint`), `always` asks before every call. The question goes to stderr and the
//! answer is read from stdin, and only from a terminal: a pipe may carry a chat's messages
//! or a script's data, and a line that happens to read `y` must not approve a command. When
//! stdin is not a terminal, a call that needs approval is refused, the refusal is said on
//! stderr, and the model is told.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::ValueEnum;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use toolbelt::exec::{BeforeAction, BeforeHook, HookCall};
use toolbelt::{ToolContext, ToolMeta};

use super::render::{Spinner, short_args};

/// Which tool calls need the user's approval before they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ApprovalPolicy {
    /// Never ask: every call runs.
    Never,
    /// Ask before tools that may write files or run commands: every tool not declared
    /// read-only.
    #[default]
    OnWrite,
    /// Ask before every call.
    Always,
}

impl ApprovalPolicy {
    /// Whether a call of a tool declared with `meta` needs approval. A tool that declares
    /// nothing may do anything, so `on-write` asks before it.
    pub fn needs_approval(self, meta: &ToolMeta) -> bool {
        match self {
            ApprovalPolicy::Never => false,
            ApprovalPolicy::OnWrite => !meta.is_read_only(),
            ApprovalPolicy::Always => true,
        }
    }
}

/// Lines of standard input, shared by the chat prompt and approval questions so neither
/// loses what the other buffered.
pub type SharedStdin = Arc<tokio::sync::Mutex<Lines<BufReader<Stdin>>>>;

/// Standard input, line by line.
pub fn shared_stdin() -> SharedStdin {
    Arc::new(tokio::sync::Mutex::new(
        BufReader::new(tokio::io::stdin()).lines(),
    ))
}

/// What the model is told when the user said no.
const REFUSED: &str = "the user did not allow this call";

/// Characters of one argument shown before the question cuts it with a marker; answering
/// `s` shows every argument in full.
const SHOWN_CHARS: usize = 2_000;
/// Lines of one argument shown before the question cuts it.
const SHOWN_LINES: usize = 40;

/// The call as a person is asked about it: the tool's name, then each argument on a line
/// of its own (`  key: value`; a value of several lines under a `  │ ` gutter), every
/// control character and escape sequence written out ([`toolbelt::visible`]), so no
/// argument can erase, move or hide a line of the question. With `full` false a value
/// longer than [`SHOWN_CHARS`] or [`SHOWN_LINES`] is cut, and the cut says so and how
/// much is missing; nothing is ever cut silently. The web UI and the MCP elicitation
/// form show the same text.
pub fn describe_call(tool: &str, arguments: &str, full: bool) -> String {
    let mut out = format!("{}\n", toolbelt::visible(tool));
    let mut hidden = toolbelt::has_hidden(tool);
    let mut cut = false;
    let mut line = |out: &mut String, key: Option<&str>, value: &str| {
        hidden |= toolbelt::has_hidden(value);
        let (value, rest) = if full { (value, 0) } else { shown_part(value) };
        let value = toolbelt::visible(value);
        let label = key
            .map(|k| format!("{}:", toolbelt::visible(k)))
            .unwrap_or_default();
        if value.contains('\n') {
            out.push_str(&format!("  {label}\n"));
            for l in value.split('\n') {
                out.push_str(&format!("  │ {l}\n"));
            }
        } else {
            let sep = if label.is_empty() { "" } else { " " };
            out.push_str(&format!("  {label}{sep}{value}\n"));
        }
        if rest > 0 {
            cut = true;
            out.push_str(&format!("  … {rest} more characters not shown\n"));
        }
    };
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(map)) => {
            for (k, v) in &map {
                let v = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                line(&mut out, Some(k), &v);
            }
            if map.is_empty() {
                out.push_str("  (no arguments)\n");
            }
        }
        _ => line(&mut out, None, arguments),
    }
    if hidden {
        out.push_str(
            "  (the call holds control characters or invisible formatting, written out above \
             as \\xNN and \\u{NNNN})\n",
        );
    }
    if cut {
        out.push_str("  (answer s to show every argument in full)\n");
    }
    out
}

/// The part of `value` a question shows, and how many characters it leaves out.
fn shown_part(value: &str) -> (&str, usize) {
    let mut lines = 1;
    let mut end = value.len();
    for (count, (i, c)) in value.char_indices().enumerate() {
        if c == '\n' {
            lines += 1;
        }
        if count >= SHOWN_CHARS || lines > SHOWN_LINES {
            end = i;
            break;
        }
    }
    (&value[..end], value[end..].chars().count())
}

/// Resets a terminal's text attributes and character set before the question, so an
/// attribute an earlier line left on (concealed, invisible colours, line-drawing glyphs)
/// cannot hide it.
const RESET: &str = "\x1b[0m\x1b(B";

/// The before hook that applies an [`ApprovalPolicy`]: asks on stderr and reads the answer
/// from stdin when stdin is a terminal; refuses (saying so) when it is not. Anything but
/// `y`/`yes`, or the end of input, refuses the call, and the model is told so; `s` shows
/// the arguments in full and asks again.
pub struct Approval {
    policy: ApprovalPolicy,
    stdin: SharedStdin,
    spinner: Spinner,
    terminal: bool,
    /// Tools that only hand work to other agents (agent tools, the transfer tool): their
    /// agents' own calls are approved one by one, so asking for the hand-over too would
    /// only ask twice (and refuse every delegation without a terminal).
    delegations: HashSet<String>,
}

impl Approval {
    /// Applies `policy`, asking on `stdin` (when it is a terminal) with the spinner paused.
    pub fn new(policy: ApprovalPolicy, stdin: SharedStdin, spinner: Spinner) -> Self {
        Self {
            policy,
            stdin,
            spinner,
            terminal: std::io::stdin().is_terminal(),
            delegations: HashSet::new(),
        }
    }

    /// Does not ask for these tools (see `delegations`), except under `--approval always`.
    pub fn with_delegations(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.delegations.extend(names);
        self
    }
}

#[toolbelt::async_trait]
impl BeforeHook for Approval {
    async fn before(&self, _ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction {
        if !self.policy.needs_approval(&call.declaration.meta)
            || (self.policy != ApprovalPolicy::Always
                && self.delegations.contains(call.tool_name()))
        {
            return BeforeAction::Continue;
        }
        let name = toolbelt::visible(call.tool_name());
        if !self.terminal {
            self.spinner.println(&format!(
                "toolbelt: refused {name}({}): it needs approval and stdin is not a terminal \
                 to ask on (allow it with --yes or --approval never)",
                short_args(call.arguments)
            ));
            return BeforeAction::Reject(format!(
                "{REFUSED}: it needs the user's approval and nobody could be asked"
            ));
        }
        // One question at a time, even when parallel calls ask together.
        let mut stdin = self.stdin.lock().await;
        let _paused = self.spinner.pause();
        let reset = if std::io::stderr().is_terminal() {
            RESET
        } else {
            ""
        };
        let mut full = false;
        loop {
            let described = describe_call(call.tool_name(), call.arguments, full);
            eprint!("{reset}{described}allow {name}? [y/N/s] ");
            let _ = std::io::stderr().flush();
            let answer = stdin.next_line().await.ok().flatten().unwrap_or_default();
            if !std::io::stderr().is_terminal() {
                // The terminal echoed the answer, but not into this log: end the line here.
                eprintln!("{}", toolbelt::visible(answer.trim()));
            }
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return BeforeAction::Continue,
                "s" | "show" if !full => full = true,
                _ => return BeforeAction::Reject(REFUSED.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(read_only: Option<bool>, destructive: Option<bool>) -> ToolMeta {
        ToolMeta {
            read_only,
            destructive,
            ..ToolMeta::default()
        }
    }

    #[test]
    fn on_write_asks_for_every_tool_not_declared_read_only() {
        let policy = ApprovalPolicy::OnWrite;
        assert!(!policy.needs_approval(&meta(Some(true), Some(false))));
        assert!(policy.needs_approval(&meta(Some(false), Some(true))));
        // Writes that destroy nothing are still writes.
        assert!(policy.needs_approval(&meta(Some(false), Some(false))));
        // Nothing declared: it may do anything.
        assert!(policy.needs_approval(&meta(None, None)));
    }

    #[test]
    fn a_call_is_described_one_argument_a_line_with_escapes_written_out() {
        let described = describe_call(
            "Edit",
            r#"{"file_path":"notes.txt","old_string":"bye, tidied","new_string":"a\nb\u001b[8m"}"#,
            false,
        );
        assert_eq!(
            described,
            // Sorted by key, as the arguments' map keeps them.
            "Edit\n  file_path: notes.txt\n  new_string:\n  │ a\n  │ b\\x1b[8m\n  \
             old_string: bye, tidied\n  (the call holds control characters or invisible \
             formatting, written out above as \\xNN and \\u{NNNN})\n"
        );
    }

    #[test]
    fn a_long_value_is_cut_with_a_count_unless_shown_in_full() {
        let long = format!(r#"{{"command":"{}; touch x"}}"#, "a".repeat(SHOWN_CHARS));
        let cut = describe_call("Bash", &long, false);
        assert!(cut.contains("… 9 more characters not shown"), "{cut}");
        assert!(cut.contains("answer s to show"), "{cut}");
        assert!(!cut.contains("touch x"));
        assert!(describe_call("Bash", &long, true).contains("; touch x"));
    }

    #[test]
    fn never_and_always_ignore_the_declaration() {
        for m in [meta(Some(true), None), meta(None, Some(true))] {
            assert!(!ApprovalPolicy::Never.needs_approval(&m));
            assert!(ApprovalPolicy::Always.needs_approval(&m));
        }
    }
}
