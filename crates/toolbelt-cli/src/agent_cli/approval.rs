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

/// The before hook that applies an [`ApprovalPolicy`]: asks on stderr and reads the answer
/// from stdin when stdin is a terminal; refuses (saying so) when it is not. Anything but
/// `y`/`yes`, or the end of input, refuses the call, and the model is told so.
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
        let what = format!("{}({})", call.tool_name(), short_args(call.arguments));
        if !self.terminal {
            self.spinner.println(&format!(
                "toolbelt: refused {what}: it needs approval and stdin is not a terminal to \
                 ask on (allow it with --yes or --approval never)"
            ));
            return BeforeAction::Reject(format!(
                "{REFUSED}: it needs the user's approval and nobody could be asked"
            ));
        }
        // One question at a time, even when parallel calls ask together.
        let mut stdin = self.stdin.lock().await;
        let answer = {
            let _paused = self.spinner.pause();
            eprint!("allow {what}? [y/N] ");
            let _ = std::io::stderr().flush();
            let answer = stdin.next_line().await.ok().flatten().unwrap_or_default();
            if !std::io::stderr().is_terminal() {
                // The terminal echoed the answer, but not into this log: end the line here.
                eprintln!("{}", answer.trim());
            }
            answer
        };
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => BeforeAction::Continue,
            _ => BeforeAction::Reject(REFUSED.to_string()),
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
    fn never_and_always_ignore_the_declaration() {
        for m in [meta(Some(true), None), meta(None, Some(true))] {
            assert!(!ApprovalPolicy::Never.needs_approval(&m));
            assert!(ApprovalPolicy::Always.needs_approval(&m));
        }
    }
}
