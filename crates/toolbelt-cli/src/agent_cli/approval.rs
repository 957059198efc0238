//! Asking the user before a tool call runs (`--approval`, `--yes`).
//!
//! Which calls are asked about is the permission rules' decision ([`super::permissions`]);
//! the policies are what they fall back to for a call no rule matches, after codex's
//! approval modes: `never` runs it, `on-write` (the default) asks unless its tool is declared
//! read-only (so Write, Edit, NotebookEdit, Bash, TaskStop, and any MCP tool without a
//! `readOnlyHint` are asked about), `always` asks. The question goes to stderr and the
//! answer is read from stdin, and only from a terminal: a pipe may carry a chat's messages
//! or a script's data, and a line that happens to read `y` must not approve a command. When
//! stdin is not a terminal, a call that needs approval is refused, the refusal is said on
//! stderr, and the model is told.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::ValueEnum;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use toolbelt::ToolContext;
use toolbelt::builtin::permission::Fallback;
use toolbelt::exec::{ApprovalDecision, ApprovalRequest, Approver};

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
    /// What the permission rules do with a call no rule matches. A tool that declares
    /// nothing may do anything, so `on-write` asks before it.
    pub fn fallback(self) -> Fallback {
        match self {
            ApprovalPolicy::Never => Fallback::Allow,
            ApprovalPolicy::OnWrite => Fallback::AskUnlessReadOnly,
            ApprovalPolicy::Always => Fallback::Ask,
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

/// The approver of a terminal: asks on stderr and reads the answer from stdin when stdin is
/// a terminal; refuses (saying so) when it is not. Anything but `y`/`yes`, or the end of
/// input, refuses the call, and the model is told so; `s` shows the arguments in full and
/// asks again.
pub struct Approval {
    stdin: SharedStdin,
    spinner: Spinner,
    terminal: bool,
}

impl Approval {
    /// Asks on `stdin` (when it is a terminal) with the spinner paused.
    pub fn new(stdin: SharedStdin, spinner: Spinner) -> Self {
        Self {
            stdin,
            spinner,
            terminal: std::io::stdin().is_terminal(),
        }
    }
}

#[toolbelt::async_trait]
impl Approver for Approval {
    async fn decide(&self, _ctx: &ToolContext, call: &ApprovalRequest<'_>) -> ApprovalDecision {
        let name = toolbelt::visible(call.tool_name());
        if !self.terminal {
            self.spinner.println(&format!(
                "toolbelt: refused {name}({}): it needs approval and stdin is not a terminal \
                 to ask on (allow it with --yes or --approval never)",
                short_args(call.arguments)
            ));
            return ApprovalDecision::Deny(format!(
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
            let mut described = describe_call(call.tool_name(), call.arguments, full);
            if let Some(preview) = call.preview {
                described.push_str(&describe_preview(preview, full));
            }
            let why = toolbelt::visible(call.reason);
            eprint!("{reset}{described}  (asked because {why})\nallow {name}? [y/N/s] ");
            let _ = std::io::stderr().flush();
            let answer = stdin.next_line().await.ok().flatten().unwrap_or_default();
            if !std::io::stderr().is_terminal() {
                // The terminal echoed the answer, but not into this log: end the line here.
                eprintln!("{}", toolbelt::visible(answer.trim()));
            }
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return ApprovalDecision::Approve,
                "s" | "show" if !full => full = true,
                _ => return ApprovalDecision::Deny(REFUSED.to_string()),
            }
        }
    }
}

/// The permission check's preview of a call (the diff an Edit or Write makes, the command)
/// under a `│` gutter, escapes written out like the arguments', and cut like an argument
/// ([`SHOWN_CHARS`], [`SHOWN_LINES`]) unless `full`, the cut saying how much is left.
pub(crate) fn describe_preview(preview: &str, full: bool) -> String {
    let (shown, rest) = if full {
        (preview, 0)
    } else {
        shown_part(preview)
    };
    let mut out = String::from("  change:\n");
    for line in shown.lines() {
        out.push_str(&format!("  │ {}\n", toolbelt::visible(line)));
    }
    if rest > 0 {
        out.push_str(&format!(
            "  … {rest} more characters of the change not shown\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_is_shown_under_a_gutter_escaped_and_cut_with_a_count() {
        let diff = "--- a/f\n+++ b/f\n-old\n+new\u{1b}[2J\n";
        assert_eq!(
            describe_preview(diff, false),
            "  change:\n  │ --- a/f\n  │ +++ b/f\n  │ -old\n  │ +new\\x1b[2J\n"
        );
        let long: String = (0..100).map(|i| format!("+{i}\n")).collect();
        let cut = describe_preview(&long, false);
        assert!(
            cut.contains("more characters of the change not shown"),
            "{cut}"
        );
        assert!(!cut.contains("+99"), "{cut}");
        assert!(describe_preview(&long, true).contains("│ +99"));
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
}
