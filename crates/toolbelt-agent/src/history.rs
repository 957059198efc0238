//! Turning stored events into the messages of a model request, and repairing them so that
//! providers accept them.
//!
//! Providers reject a conversation where a `tool` message answers no preceding call, where
//! an assistant's tool call has no answer before the next turn, where two calls of one turn
//! share an id, or (vLLM, and proxies in front of it) where a call's `arguments` is not JSON.
//! All of these happen in real sessions: a run cancelled between the model's call and the
//! tool's result, a caller that resumes with the wrong id, a model that writes broken JSON or
//! numbers every call `call_0`, a session stored by an older version. [`sanitize`] therefore,
//! before every model call:
//!
//! - makes the ids of each assistant message's calls unique and non-empty (`call_1`,
//!   `call_1_2`, ...), pairing each `tool` message with the first unanswered call that had its
//!   id, so a duplicate id keeps both results;
//! - replaces arguments that are not a JSON object with valid JSON saying so
//!   (`{"_malformed_arguments": "<the first 200 characters>"}`; see
//!   [`toolbelt_exec::record_calls`], which the agent applies to every response before it is
//!   stored and run);
//! - puts each turn's `tool` messages in the assistant's call order (results are stored as
//!   each call ends, which is completion order);
//! - drops `tool` messages that answer no call of the assistant message right before them
//!   (or answer one that was already answered);
//! - moves a user or system message that came while a turn's calls were still unanswered
//!   (a run paused for approval, calls handed back to the caller) after that turn's results,
//!   which may be stored after it;
//! - adds, for every call left without an answer, a `tool` message saying that no result was
//!   recorded.
//!
//! [`conversation`] adds what a tool returned beyond text: images go to a model that accepts
//! them as a user message with image parts right after that turn's `tool` messages (OpenAI's
//! `tool` role takes text only); other blocks, and images for a model that does not accept
//! them, are summarised in the tool message's text.

use toolbelt_core::ContentBlock;
use toolbelt_exec::record_calls;
use toolbelt_model::{Message, Role};

use crate::{Event, EventKind};

/// The text sent in place of a tool result that was never recorded.
pub const MISSING_RESULT: &str = "Error: no result was recorded for this tool call (the run was interrupted); call it again if you still need it";

/// The key of the object recorded in place of arguments that were not valid JSON.
pub use toolbelt_exec::MALFORMED_ARGUMENTS_KEY;

/// A message and the content blocks of the tool result it carries (if any).
struct Entry {
    message: Message,
    blocks: Vec<ContentBlock>,
}

impl Entry {
    fn text(message: Message) -> Self {
        Self {
            message,
            blocks: Vec::new(),
        }
    }
}

fn entries_from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<Entry> {
    let mut entries = Vec::new();
    for event in events {
        match &event.kind {
            EventKind::UserInput { message } | EventKind::ModelResponse { message, .. } => {
                entries.push(Entry::text(message.clone()));
            }
            EventKind::ToolInput { results } => {
                entries.extend(results.iter().map(|r| Entry::text(r.to_message())));
            }
            EventKind::ToolResult { result } => entries.push(Entry {
                message: result.to_message(),
                blocks: result.blocks.clone(),
            }),
            EventKind::ModelDelta { .. }
            | EventKind::ToolChunk { .. }
            | EventKind::ToolProgress { .. }
            | EventKind::PendingToolCalls { .. }
            | EventKind::ToolPending { .. }
            | EventKind::ApprovalRequested { .. }
            | EventKind::ApprovalDecided { .. }
            | EventKind::Warning { .. }
            | EventKind::Error { .. }
            | EventKind::NodeStarted { .. }
            | EventKind::NodeEnded { .. }
            | EventKind::Checkpoint { .. }
            | EventKind::Interrupted { .. }
            | EventKind::RunCompleted => {}
        }
    }
    entries
}

/// The conversation stored in `events`, as messages (text only, not yet sanitised).
pub fn messages_from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<Message> {
    entries_from_events(events)
        .into_iter()
        .map(|e| e.message)
        .collect()
}

/// The messages a model is sent for the conversation in `events`: sanitised (see the module
/// docs), with tool results' images as image parts when `images` is true (the model accepts
/// them), summarised as text otherwise.
pub fn conversation<'a>(events: impl IntoIterator<Item = &'a Event>, images: bool) -> Vec<Message> {
    render_blocks(sanitize_entries(entries_from_events(events)), images)
}

/// Repairs tool calls and their pairing (see the module docs). Other messages are kept as
/// they are.
pub fn sanitize(messages: Vec<Message>) -> Vec<Message> {
    sanitize_entries(messages.into_iter().map(Entry::text).collect())
        .into_iter()
        .map(|e| e.message)
        .collect()
}

/// One call of an assistant turn waiting for its answer.
struct OpenCall {
    /// The id the model gave it (what stored results quote).
    original_id: String,
    /// The recorded, unique id.
    id: String,
    name: String,
    answer: Option<Entry>,
}

fn sanitize_entries(entries: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    // The calls of the latest assistant turn, in call order, while its tool block lasts.
    let mut open: Vec<OpenCall> = Vec::new();
    // User and system messages that arrived while calls of the open turn were still
    // unanswered (a run paused for approval, calls handed back): they follow the turn's
    // results, which may be stored after them.
    let mut held: Vec<Entry> = Vec::new();

    let close =
        |out: &mut Vec<Entry>, open: &mut Vec<OpenCall>, held: &mut Vec<Entry>| {
            for call in open.drain(..) {
                out.push(call.answer.unwrap_or_else(|| {
                    Entry::text(Message::tool(call.id, call.name, MISSING_RESULT))
                }));
            }
            out.append(held);
        };

    for mut entry in entries {
        if entry.message.role == Role::Tool {
            let id = entry.message.tool_call_id.clone().unwrap_or_default();
            // The first unanswered call with this id as the model wrote it, else as
            // recorded (results of this version quote the recorded id).
            let position = open
                .iter()
                .position(|c| c.answer.is_none() && c.original_id == id)
                .or_else(|| open.iter().position(|c| c.answer.is_none() && c.id == id));
            let slot = position.map(|p| &mut open[p]);
            match slot {
                Some(call) => {
                    entry.message.tool_call_id = Some(call.id.clone());
                    call.answer = Some(entry);
                }
                None => tracing::debug!(tool_call_id = %id, "dropping an orphan tool result"),
            }
            continue;
        }
        let waits = open.iter().any(|c| c.answer.is_none());
        if waits && matches!(entry.message.role, Role::User | Role::System) {
            held.push(entry);
            continue;
        }
        close(&mut out, &mut open, &mut held);
        if entry.message.has_tool_calls() {
            let original_ids: Vec<String> = entry
                .message
                .tool_calls
                .iter()
                .map(|c| c.id.clone())
                .collect();
            record_calls(&mut entry.message.tool_calls, false);
            open = original_ids
                .into_iter()
                .zip(&entry.message.tool_calls)
                .map(|(original_id, r)| OpenCall {
                    original_id,
                    id: r.id.clone(),
                    name: r.name.clone(),
                    answer: None,
                })
                .collect();
        }
        out.push(entry);
    }
    close(&mut out, &mut open, &mut held);
    out
}

/// Puts tool results' blocks where the model can read them (see the module docs).
fn render_blocks(entries: Vec<Entry>, images: bool) -> Vec<Message> {
    let mut out = Vec::with_capacity(entries.len());
    // The image blocks of the current run of tool messages: (call id, tool name, block).
    let mut pending_images: Vec<(String, String, ContentBlock)> = Vec::new();
    for Entry {
        mut message,
        blocks,
    } in entries
    {
        if message.role != Role::Tool {
            flush_images(&mut out, &mut pending_images);
        }
        for block in blocks {
            if images && matches!(block, ContentBlock::Image { .. }) {
                let id = message.tool_call_id.clone().unwrap_or_default();
                let name = message.name.clone().unwrap_or_default();
                pending_images.push((id, name, block));
            } else if !matches!(block, ContentBlock::Text { ref text } if message.content.contains(text.as_str()))
            {
                if !message.content.is_empty() {
                    message.content.push('\n');
                }
                message.content.push_str(&block.summary());
            }
        }
        out.push(message);
    }
    flush_images(&mut out, &mut pending_images);
    out
}

/// Sends the images of a turn's tool results as one user message with image parts.
fn flush_images(out: &mut Vec<Message>, pending: &mut Vec<(String, String, ContentBlock)>) {
    if pending.is_empty() {
        return;
    }
    let mut text = String::from("Images returned by the tool calls above:");
    let mut parts = Vec::new();
    for (id, name, block) in pending.drain(..) {
        if let ContentBlock::Image { mime_type, data } = block {
            text.push_str(&format!("\n- {name} ({id}): {mime_type}"));
            parts.push(toolbelt_model::ContentPart::ImageUrl {
                url: format!("data:{mime_type};base64,{data}"),
            });
        }
    }
    out.push(Message::user_with_parts(text, parts));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use toolbelt_model::ToolCall;

    fn calls(ids: &[&str]) -> Message {
        Message::assistant_tool_calls(
            "",
            ids.iter().map(|id| ToolCall::new(*id, "t", "{}")).collect(),
        )
    }

    fn ids(message: &Message) -> Vec<&str> {
        message.tool_calls.iter().map(|c| c.id.as_str()).collect()
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
    fn calls_without_results_get_a_placeholder_and_results_follow_call_order() {
        let out = sanitize(vec![
            calls(&["a", "b"]),
            Message::tool("b", "t", "ok"),
            Message::user("next"),
            calls(&["c"]),
        ]);
        assert_eq!(out[1].tool_call_id.as_deref(), Some("a"));
        assert_eq!(out[1].content, MISSING_RESULT);
        assert_eq!(out[2].tool_call_id.as_deref(), Some("b"));
        assert_eq!(out[2].content, "ok");
        assert_eq!(out[3].role, Role::User);
        assert_eq!(out[5].tool_call_id.as_deref(), Some("c"));
        assert_eq!(out.len(), 6);
    }

    #[test]
    fn results_stored_in_completion_order_are_sent_in_call_order() {
        let out = sanitize(vec![
            calls(&["a", "b", "c"]),
            Message::tool("c", "t", "third"),
            Message::tool("a", "t", "first"),
            Message::tool("b", "t", "second"),
        ]);
        let texts: Vec<&str> = out[1..].iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["first", "second", "third"]);
    }

    #[test]
    fn a_user_message_while_calls_wait_follows_their_late_results() {
        // A run paused for approval: the user writes, and the decided call's result is
        // stored after the message.
        let out = sanitize(vec![
            calls(&["a", "b"]),
            Message::tool("a", "t", "early"),
            Message::user("go on"),
            Message::tool("b", "t", "late"),
        ]);
        let texts: Vec<&str> = out[1..].iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["early", "late", "go on"]);
        assert_eq!(out[3].role, Role::User);
    }

    #[test]
    fn results_after_another_turn_are_orphans() {
        let out = sanitize(vec![
            calls(&["a"]),
            Message::user("interrupting"),
            Message::assistant("a new turn"),
            Message::tool("a", "t", "late"),
        ]);
        assert_eq!(out.len(), 4);
        assert_eq!(out[1].content, MISSING_RESULT);
        assert_eq!(out[2].role, Role::User);
        assert_eq!(out[3].role, Role::Assistant);
    }

    #[test]
    fn duplicate_and_empty_ids_are_made_unique_and_keep_both_results() {
        // As stored before ids were made unique at recording: two calls `x`, one without id.
        let out = sanitize(vec![
            calls(&["x", "x", ""]),
            Message::tool("x", "t", "one"),
            Message::tool("x", "t", "two"),
        ]);
        assert_eq!(ids(&out[0]), ["x", "x_2", "call_3"]);
        let answers: Vec<(Option<&str>, &str)> = out[1..]
            .iter()
            .map(|m| (m.tool_call_id.as_deref(), m.content.as_str()))
            .collect();
        assert_eq!(
            answers,
            [
                (Some("x"), "one"),
                (Some("x_2"), "two"),
                (Some("call_3"), MISSING_RESULT)
            ]
        );
    }

    #[test]
    fn stored_malformed_arguments_are_replayed_as_valid_json() {
        let mut turn = calls(&["a", "b", "c"]);
        turn.tool_calls[0].arguments = r#"{"path": "x"#.into();
        turn.tool_calls[1].arguments = String::new();
        turn.tool_calls[2].arguments = "[1, 2]".into();
        let out = sanitize(vec![turn]);
        let args: Vec<Value> = out[0]
            .tool_calls
            .iter()
            .map(|c| serde_json::from_str(&c.arguments).expect("valid JSON"))
            .collect();
        assert_eq!(args[0][MALFORMED_ARGUMENTS_KEY], r#"{"path": "x"#);
        assert_eq!(args[1], serde_json::json!({}));
        assert_eq!(args[2][MALFORMED_ARGUMENTS_KEY], "[1, 2]");
    }
}
