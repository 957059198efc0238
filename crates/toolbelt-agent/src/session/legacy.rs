//! Reading events stored by versions before [`EventKind`] (one struct with an `object` field
//! and optional parts), so a session written by an older toolbelt keeps its conversation.

use serde::Deserialize;
use toolbelt_model::{Response, ToolCall};

use crate::{ErrorKind, Event, EventKind, ToolResult};

/// The stored shape of an event before the enum.
#[derive(Deserialize)]
struct LegacyEvent {
    id: String,
    invocation_id: String,
    #[serde(default)]
    parent_invocation_id: Option<String>,
    author: String,
    object: String,
    #[serde(default)]
    response: Option<Response>,
    #[serde(default)]
    tool_results: Vec<ToolResult>,
    #[serde(default)]
    pending_tool_calls: Vec<ToolCall>,
    #[serde(default)]
    error: Option<LegacyError>,
    #[serde(default)]
    timestamp_ms: u64,
}

#[derive(Deserialize)]
struct LegacyError {
    kind: ErrorKind,
    message: String,
}

/// The events an old-format stored event stands for (an old tool response holds several
/// results; a chunk none), or `None` when `body` is not an old-format event either.
pub(crate) fn read_legacy(body: &str) -> Option<Vec<Event>> {
    let old: LegacyEvent = serde_json::from_str(body).ok()?;
    let mut kinds = Vec::new();
    let message = old.response.as_ref().and_then(|r| r.message.clone());
    match old.object.as_str() {
        "user_input" => {
            kinds.extend(message.map(|message| EventKind::UserInput { message }));
            if !old.tool_results.is_empty() {
                kinds.push(EventKind::ToolInput {
                    results: old.tool_results,
                });
            }
        }
        "chat_completion" => {
            let response = old.response.unwrap_or_default();
            kinds.extend(message.map(|message| EventKind::ModelResponse {
                message,
                finish_reason: response.finish_reason,
                usage: response.usage,
            }));
        }
        "tool_response" => {
            kinds.extend(
                old.tool_results
                    .into_iter()
                    .map(|result| EventKind::ToolResult { result }),
            );
            if !old.pending_tool_calls.is_empty() {
                kinds.push(EventKind::PendingToolCalls {
                    calls: old.pending_tool_calls,
                });
            }
        }
        "error" => {
            let error = old.error?;
            kinds.push(EventKind::Error {
                kind: error.kind,
                message: error.message,
            });
        }
        "runner_completion" => kinds.push(EventKind::RunCompleted),
        "chat_chunk" => {}
        _ => return None,
    }
    Some(
        kinds
            .into_iter()
            .enumerate()
            .map(|(n, kind)| Event {
                // The first keeps the stored id; the others get a derived one.
                id: if n == 0 {
                    old.id.clone()
                } else {
                    format!("{}-{n}", old.id)
                },
                invocation_id: old.invocation_id.clone(),
                parent_invocation_id: old.parent_invocation_id.clone(),
                tool_call_id: None,
                author: old.author.clone(),
                timestamp_ms: old.timestamp_ms,
                kind,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_tool_response_becomes_one_result_event_per_call_and_the_pending_calls() {
        let body = r#"{"id":"e","invocation_id":"i","author":"a","object":"tool_response",
            "tool_results":[{"call_id":"c1","name":"t","content":"ok","is_error":false,"duration_ms":3},
                            {"call_id":"c2","name":"t","content":"no","is_error":true,"duration_ms":1}],
            "pending_tool_calls":[{"id":"c3","type":"function","function":{"name":"t","arguments":"{}"}}],
            "done":true,"timestamp_ms":5}"#;
        let events = read_legacy(body).unwrap();
        let types: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
        assert_eq!(types, ["tool_result", "tool_result", "pending_tool_calls"]);
        assert_eq!(events[1].tool_result().unwrap().call_id, "c2");
        assert_eq!((events[0].id.as_str(), events[1].id.as_str()), ("e", "e-1"));
    }

    #[test]
    fn something_else_is_not_read_as_an_old_event() {
        assert!(
            read_legacy(
                r#"{"id":"e","invocation_id":"i","author":"a","object":"mystery","timestamp_ms":1}"#
            )
            .is_none()
        );
        assert!(read_legacy("not json").is_none());
    }
}
