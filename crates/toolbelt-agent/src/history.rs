//! Turning stored events into the messages of a model request, and repairing them so that
//! providers accept them.
//!
//! Providers reject a conversation where a `tool` message answers no preceding call, or
//! where an assistant's tool call has no answer before the next turn. Both happen in real
//! sessions: a run cancelled between the model's call and the tool's result, a caller that
//! resumes with the wrong id, a session edited by hand. [`sanitize`] therefore, before every
//! model call:
//!
//! - drops `tool` messages that answer no call of the assistant message right before them
//!   (or answer one that was already answered);
//! - adds, for every call left without an answer, a `tool` message saying that no result was
//!   recorded, placed right after the other answers of that turn.

use std::collections::HashSet;

use toolbelt_model::{Message, Role};

use crate::{Event, ObjectType};

/// The text sent in place of a tool result that was never recorded.
pub const MISSING_RESULT: &str = "Error: no result was recorded for this tool call (the run was interrupted); call it again if you still need it";

/// The conversation stored in `events`, as messages.
pub fn messages_from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<Message> {
    let mut messages = Vec::new();
    for event in events {
        match event.object {
            ObjectType::UserInput | ObjectType::ChatCompletion => {
                if let Some(message) = event.message() {
                    messages.push(message.clone());
                }
                messages.extend(event.tool_results.iter().map(|r| r.to_message()));
            }
            ObjectType::ToolResponse => {
                messages.extend(event.tool_results.iter().map(|r| r.to_message()));
            }
            ObjectType::ChatChunk | ObjectType::Error | ObjectType::RunnerCompletion => {}
        }
    }
    messages
}

/// Repairs tool-call pairing (see the module docs). Other messages are kept as they are.
pub fn sanitize(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // The calls of the latest assistant turn still waiting for an answer, in call order.
    let mut open: Vec<(String, String)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut in_tool_block = false;

    let close = |out: &mut Vec<Message>, open: &mut Vec<(String, String)>| {
        for (id, name) in open.drain(..) {
            out.push(Message::tool(id, name, MISSING_RESULT));
        }
    };

    for message in messages {
        match message.role {
            Role::Tool => {
                let id = message.tool_call_id.clone().unwrap_or_default();
                let position = open.iter().position(|(open_id, _)| *open_id == id);
                match position {
                    Some(position) if in_tool_block && !answered.contains(&id) => {
                        open.remove(position);
                        answered.insert(id);
                        out.push(message);
                    }
                    _ => tracing::debug!(tool_call_id = %id, "dropping an orphan tool result"),
                }
            }
            _ => {
                close(&mut out, &mut open);
                answered.clear();
                in_tool_block = message.has_tool_calls();
                if in_tool_block {
                    open = message
                        .tool_calls
                        .iter()
                        .map(|c| (c.id.clone(), c.function.name.clone()))
                        .collect();
                }
                out.push(message);
            }
        }
    }
    close(&mut out, &mut open);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbelt_model::ToolCall;

    fn calls(ids: &[&str]) -> Message {
        Message::assistant_tool_calls(
            "",
            ids.iter().map(|id| ToolCall::new(*id, "t", "{}")).collect(),
        )
    }

    #[test]
    fn orphan_results_are_dropped() {
        let out = sanitize(vec![
            Message::user("q"),
            Message::tool("ghost", "t", "?"),
            calls(&["a"]),
            Message::tool("a", "t", "ok"),
            Message::tool("a", "t", "again"),
            Message::tool("b", "t", "unknown id"),
        ]);
        let roles: Vec<Role> = out.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![Role::User, Role::Assistant, Role::Tool]);
        assert_eq!(out[2].content, "ok");
    }

    #[test]
    fn calls_without_results_get_a_placeholder_before_the_next_turn() {
        let out = sanitize(vec![
            calls(&["a", "b"]),
            Message::tool("b", "t", "ok"),
            Message::user("next"),
            calls(&["c"]),
        ]);
        assert_eq!(out[1].tool_call_id.as_deref(), Some("b"));
        assert_eq!(out[2].tool_call_id.as_deref(), Some("a"));
        assert_eq!(out[2].content, MISSING_RESULT);
        assert_eq!(out[3].role, Role::User);
        assert_eq!(out[5].tool_call_id.as_deref(), Some("c"));
        assert_eq!(out.len(), 6);
    }

    #[test]
    fn results_after_another_turn_are_orphans() {
        let out = sanitize(vec![
            calls(&["a"]),
            Message::user("interrupting"),
            Message::tool("a", "t", "late"),
        ]);
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].content, MISSING_RESULT);
        assert_eq!(out[2].role, Role::User);
    }
}
