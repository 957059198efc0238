//! Long-running calls: a tool that answers with its status ([`ToolOutput::pending`]) leaves
//! its call open; the run stores an [`EventKind::ToolPending`] and ends, and a later run of
//! the session, in any process, supplies the result as a role=tool message for the call
//! (routed to the agent that made it). The model is asked again only once it can read the
//! result.
//!
//! [`ToolOutput::pending`]: toolbelt_core::ToolOutput::pending

use crate::{Event, EventKind};

/// A call whose result the session waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwaitedResult {
    /// The agent that made the call.
    pub author: String,
    /// The call's recorded id: the `tool_call_id` of the result to supply.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the tool said about the work.
    pub status: String,
}

/// The long-running calls of the session's last turn whose result was not supplied yet.
pub fn awaiting_results(events: &[Event]) -> Vec<AwaitedResult> {
    let mut awaited: Vec<AwaitedResult> = Vec::new();
    for event in events {
        match &event.kind {
            // A later model turn: the conversation went on without them.
            EventKind::ModelResponse { .. } => awaited.clear(),
            EventKind::ToolPending {
                call_id,
                name,
                status,
            } => awaited.push(AwaitedResult {
                author: event.author.clone(),
                call_id: call_id.clone(),
                name: name.clone(),
                status: status.clone(),
            }),
            EventKind::ToolInput { results } => {
                awaited.retain(|a| !results.iter().any(|r| r.call_id == a.call_id));
            }
            EventKind::ToolResult { result } => awaited.retain(|a| a.call_id != result.call_id),
            _ => {}
        }
    }
    awaited
}
