//! Approvals that pause a run and resume it later, in any process.
//!
//! When the permission rules ask about a call and nobody can be asked now (no approver, as
//! for a run started by a script, a web page or a server), a root run does not fail the call:
//! it stores an [`EventKind::ApprovalRequested`] with the call, why it asks and what a person
//! should see (the command, the file's diff), runs the turn's other calls, and ends. The
//! session now holds everything needed to decide, so the answer can come from anywhere
//! (`toolbelt run --resume`, the web UI, another service) and much later.
//!
//! The next run of the session carries the [`Decision`]s ([`RunOptions::decide`]). Before it
//! asks the model anything, the agent that asked settles each open approval:
//!
//! - **deny**: the call gets an error result saying the user refused it (with their words);
//! - **approve** / **edit**: an [`EventKind::ApprovalDecided`] is stored first, then the call
//!   runs through the executor with its id approved (a deny rule still refuses it), with the
//!   person's arguments for an edit;
//! - **no decision**: an error result saying it was not approved.
//!
//! The decision is stored *before* an approved call runs: if the process dies while the call
//! runs, the next resume finds a decided call without a result and records its outcome as
//! unknown; it never runs the call a second time (the same promise an MCP client gives for a
//! connection lost mid-call).
//!
//! [`RunOptions::decide`]: crate::RunOptions::decide

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::{Event, EventKind, ToolResult};

/// A person's answer to an [`EventKind::ApprovalRequested`].
///
/// JSON: `{"decision": "approve"}`, `{"decision": "edit", "arguments": {...}}`,
/// `{"decision": "deny", "message": "use git mv instead"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run the call as the model wrote it.
    Approve,
    /// Run the call with these arguments instead (the model is told they were changed).
    Edit {
        /// The arguments to run it with (a JSON object).
        arguments: serde_json::Value,
    },
    /// Do not run it; the model reads that the user refused, and `message` if given.
    Deny {
        /// What the user wants the model to know.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

/// A requested approval no decision has settled yet: what a person is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    /// The agent that asked (the one a resume runs).
    pub author: String,
    /// The call's recorded id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// Why it needs approval.
    pub reason: String,
    /// The command or diff to show, when the rules made one.
    pub preview: Option<String>,
}

/// The approvals of a session's last turn that wait for a decision, in the order they were
/// asked. Empty when the session did not pause for one.
pub fn pending_approvals(events: &[Event]) -> Vec<PendingApproval> {
    open_approvals(events).pending
}

/// What a resume has to settle: approvals without a decision, and approved calls that have
/// no result (the process ended while they ran).
#[derive(Debug, Default)]
pub(crate) struct OpenApprovals {
    pub(crate) pending: Vec<PendingApproval>,
    /// `(author, call id, tool name)` of decided calls without a result.
    pub(crate) interrupted: Vec<(String, String, String)>,
}

impl OpenApprovals {
    /// Only what `agent` asked about (an agent settles its own calls with its own tools).
    pub(crate) fn of(mut self, agent: &str) -> Self {
        self.pending.retain(|p| p.author == agent);
        self.interrupted.retain(|(author, ..)| author == agent);
        self
    }

    /// The agent that asked last: the one a resume runs.
    pub(crate) fn asker(&self) -> Option<&str> {
        let pending = self.pending.last().map(|p| p.author.as_str());
        pending.or_else(|| self.interrupted.last().map(|(author, ..)| author.as_str()))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.interrupted.is_empty()
    }
}

/// Reads the open approvals out of a session's events. Only the last turn counts: a model
/// response after a request means the conversation went on (the history gives the call a
/// "no result" answer), and call ids repeat across turns.
pub(crate) fn open_approvals(events: &[Event]) -> OpenApprovals {
    let mut pending: Vec<PendingApproval> = Vec::new();
    let mut decided: HashMap<String, (String, String)> = HashMap::new();
    let mut decided_order: Vec<String> = Vec::new();
    for event in events {
        match &event.kind {
            EventKind::ModelResponse { .. } => {
                pending.clear();
                decided.clear();
                decided_order.clear();
            }
            EventKind::ApprovalRequested {
                call_id,
                name,
                arguments,
                reason,
                preview,
            } => pending.push(PendingApproval {
                author: event.author.clone(),
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                reason: reason.clone(),
                preview: preview.clone(),
            }),
            EventKind::ApprovalDecided {
                call_id,
                name,
                decision,
            } => {
                pending.retain(|p| &p.call_id != call_id);
                if !matches!(decision, Decision::Deny { .. }) {
                    decided.insert(call_id.clone(), (event.author.clone(), name.clone()));
                    decided_order.push(call_id.clone());
                }
            }
            EventKind::ToolResult { result } => settle(&mut pending, &mut decided, &result.call_id),
            EventKind::ToolInput { results } => {
                for result in results {
                    settle(&mut pending, &mut decided, &result.call_id);
                }
            }
            _ => {}
        }
    }
    let mut seen = HashSet::new();
    let interrupted = decided_order
        .into_iter()
        .filter(|id| seen.insert(id.clone()))
        .filter_map(|id| {
            let (author, name) = decided.remove(&id)?;
            Some((author, id, name))
        })
        .collect();
    OpenApprovals {
        pending,
        interrupted,
    }
}

fn settle(
    pending: &mut Vec<PendingApproval>,
    decided: &mut HashMap<String, (String, String)>,
    call_id: &str,
) {
    pending.retain(|p| p.call_id != call_id);
    decided.remove(call_id);
}

/// The result of a call the user refused.
pub(crate) fn denied(call: &PendingApproval, message: Option<&str>) -> ToolResult {
    let mut text = format!(
        "Error: the user denied this {} call; it did not run",
        call.name
    );
    if let Some(message) = message.map(str::trim).filter(|m| !m.is_empty()) {
        text.push_str(". The user says: ");
        text.push_str(message);
    }
    error_result(&call.call_id, &call.name, text)
}

/// The result of a call the run resumed past without a decision for it.
pub(crate) fn undecided(call: &PendingApproval) -> ToolResult {
    let text = format!(
        "Error: this {} call needed the user's approval and was not approved; it did not run",
        call.name
    );
    error_result(&call.call_id, &call.name, text)
}

/// The result of an approved call whose run ended before its result was stored.
pub(crate) fn unknown_outcome(call_id: &str, name: &str) -> ToolResult {
    let text = format!(
        "Error: the run stopped while this approved {name} call was running; whether it took \
         effect is unknown, and it was not run again. Check its effect before calling it again"
    );
    error_result(call_id, name, text)
}

/// What the model reads first in the result of a call a person changed before it ran.
pub(crate) fn edited_note(arguments: &str) -> String {
    format!("(The user changed this call's arguments before it ran, to: {arguments})\n")
}

fn error_result(call_id: &str, name: &str, text: String) -> ToolResult {
    let mut result = ToolResult::new(call_id, name, text);
    result.is_error = true;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind) -> Event {
        Event::new("inv", None, "coder", kind)
    }

    fn requested(id: &str) -> Event {
        event(EventKind::ApprovalRequested {
            call_id: id.into(),
            name: "Bash".into(),
            arguments: r#"{"command":"rm -r build"}"#.into(),
            reason: "rule Bash(rm:*) asks".into(),
            preview: Some("$ rm -r build".into()),
        })
    }

    fn decided(id: &str, decision: Decision) -> Event {
        event(EventKind::ApprovalDecided {
            call_id: id.into(),
            name: "Bash".into(),
            decision,
        })
    }

    fn result(id: &str) -> Event {
        event(EventKind::ToolResult {
            result: ToolResult::new(id, "Bash", "ok"),
        })
    }

    #[test]
    fn a_request_is_pending_until_decided_or_answered() {
        let events = vec![requested("a"), requested("b"), requested("c")];
        let ids: Vec<_> = pending_approvals(&events)
            .into_iter()
            .map(|p| p.call_id)
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);

        let mut later = events.clone();
        later.push(decided("a", Decision::Deny { message: None }));
        later.push(result("a"));
        later.push(decided("b", Decision::Approve));
        later.push(event(EventKind::ToolInput {
            results: vec![ToolResult::new("c", "Bash", "done by hand")],
        }));
        let open = open_approvals(&later);
        assert!(open.pending.is_empty());
        // b was approved and has no result: its run ended mid-call.
        assert_eq!(
            open.interrupted,
            [("coder".to_string(), "b".to_string(), "Bash".to_string())]
        );
        later.push(result("b"));
        assert!(open_approvals(&later).is_empty());
    }

    #[test]
    fn a_later_model_turn_closes_the_requests_of_the_turn_before() {
        let mut events = vec![requested("a")];
        events.push(event(EventKind::ModelResponse {
            message: toolbelt_model::Message::assistant("moving on"),
            finish_reason: None,
            usage: None,
        }));
        assert!(pending_approvals(&events).is_empty());
    }

    #[test]
    fn decisions_read_and_write_the_documented_json() {
        let edit: Decision =
            serde_json::from_str(r#"{"decision":"edit","arguments":{"command":"ls"}}"#).unwrap();
        assert_eq!(
            edit,
            Decision::Edit {
                arguments: serde_json::json!({"command": "ls"})
            }
        );
        let deny = Decision::Deny {
            message: Some("no".into()),
        };
        assert_eq!(
            serde_json::to_string(&deny).unwrap(),
            r#"{"decision":"deny","message":"no"}"#
        );
        assert!(serde_json::from_str::<Decision>(r#"{"decision":"maybe"}"#).is_err());
    }

    #[test]
    fn a_denial_carries_the_users_words_and_is_an_error() {
        let call = pending_approvals(&[requested("a")]).remove(0);
        let result = denied(&call, Some(" use make clean "));
        assert!(result.is_error);
        assert!(result.content.ends_with("The user says: use make clean"));
        assert!(!denied(&call, Some("  ")).content.contains("says"));
    }
}
