//! Events: everything a run reports, in order, to its caller and to the session.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use toolbelt_core::{ContentBlock, ProgressUpdate, StreamChunk};
use toolbelt_model::{Delta, FinishReason, Message, ToolCall, Usage};

/// The result of one tool call, as reported in an [`EventKind::ToolResult`] event (and in
/// [`EventKind::ToolInput`] for results the caller supplied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The `tool_call_id` it answers.
    pub call_id: String,
    /// The tool's name as the model called it.
    pub name: String,
    /// What the model is sent (an error reads `Error: ...`).
    pub content: String,
    /// What a user is shown, when it differs from `content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_text: Option<String>,
    /// Multimodal blocks the tool returned (images go to models that accept them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ContentBlock>,
    /// The tool asked that the result be given to the model but not shown to the user.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub silent: bool,
    /// Whether the call failed (unknown tool, bad arguments, the tool's own error).
    #[serde(default)]
    pub is_error: bool,
    /// How long the call took, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
    /// The repaired arguments, when JSON repair changed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repaired_arguments: Option<String>,
}

impl ToolResult {
    /// A result supplied by the caller (for example from a role=tool message).
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            user_text: None,
            blocks: Vec::new(),
            silent: false,
            is_error: false,
            duration_ms: 0,
            repaired_arguments: None,
        }
    }

    /// The result the executor returned for one call, as events and histories record it.
    pub fn from_call(result: toolbelt_exec::CallResult) -> Self {
        let user_text = result.user_text();
        let content = result.model_text();
        let (blocks, silent) = match &result.result {
            Ok(output) => (output.blocks.clone(), output.silent),
            Err(_) => (Vec::new(), false),
        };
        Self {
            user_text: (user_text != content).then_some(user_text),
            blocks,
            silent,
            is_error: !result.is_success(),
            duration_ms: result.duration.as_millis() as u64,
            repaired_arguments: result.repaired_arguments,
            call_id: result.call_id,
            name: result.tool_name,
            content,
        }
    }

    /// What a user is shown: `user_text`, else the model's text.
    pub fn text_for_user(&self) -> &str {
        self.user_text.as_deref().unwrap_or(&self.content)
    }

    /// The role=tool message sent to the model (text only: OpenAI's `tool` role takes no
    /// images; see [`crate::history`] for where images go).
    pub fn to_message(&self) -> Message {
        Message::tool(&self.call_id, &self.name, &self.content)
    }
}

/// Why an error event was emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The model call failed.
    Model,
    /// The agent asked for tools more times than its limit allows.
    MaxIterations,
    /// The session store failed (the error event itself may not be stored).
    Session,
    /// The run was misconfigured (an unknown agent, for example).
    Config,
    /// The run was cancelled.
    Cancelled,
    /// An agent or tool panicked: a bug, contained so that the run still completes.
    Panic,
    /// A callback of the agent or of a plugin failed (see [`crate::callbacks`]).
    Callback,
    /// A node of a graph workflow failed, or the graph could not go on (`toolbelt-graph`).
    Node,
}

/// What an event reports. The JSON tag is `"type"`, the variant's name in snake_case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// One user or system message of the caller's input.
    UserInput {
        /// The message.
        message: Message,
    },
    /// Role=tool results the caller supplied when resuming after
    /// [`EventKind::PendingToolCalls`].
    ToolInput {
        /// The results, in the order given.
        results: Vec<ToolResult>,
    },
    /// A streamed piece of the model's answer. Not stored.
    ModelDelta {
        /// What arrived.
        delta: Delta,
    },
    /// The model's complete message. Its tool calls are the recorded ones: ids unique within
    /// the turn, arguments valid JSON (repaired when repair is on, else an object saying the
    /// original was malformed), so the history replays to any provider.
    ModelResponse {
        /// The assistant message.
        message: Message,
        /// Why the model stopped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<FinishReason>,
        /// Tokens used, when the provider reported them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A piece of a streaming tool's output, as it arrives. Not stored.
    ToolChunk {
        /// The call it belongs to.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The chunk.
        chunk: StreamChunk,
    },
    /// A progress report of a running tool call. Not stored.
    ToolProgress {
        /// The call it belongs to.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The report.
        update: ProgressUpdate,
    },
    /// One call's result, emitted as the call ends (so in completion order; the history
    /// puts a turn's results in the assistant's call order).
    ToolResult {
        /// The result.
        result: ToolResult,
    },
    /// Calls the execution filter handed back: run them and resume the session with
    /// role=tool messages. The run ends after this event.
    PendingToolCalls {
        /// The calls, as recorded in the model's response.
        calls: Vec<ToolCall>,
    },
    /// A call the permission rules ask about, in a run nobody could be asked in: it has not
    /// run, and the run ends after this turn's other calls. Resume the session with a
    /// [`Decision`](crate::Decision) for it ([`RunOptions::decide`](crate::RunOptions::decide));
    /// [`pending_approvals`](crate::pending_approvals) lists the undecided ones.
    ApprovalRequested {
        /// The call's recorded id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments as the model wrote them (a JSON object's text).
        arguments: String,
        /// Why it needs approval (the rule that asked, or the default).
        reason: String,
        /// What a person should see to decide: the command, the file's diff.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<String>,
    },
    /// A long-running call answered with its status ([`ToolOutput::pending`]): its work goes
    /// on outside the run, which ends after this turn's other calls. Resume the session with
    /// the result as a role=tool message for `call_id`
    /// ([`awaiting_results`](crate::awaiting_results) lists those not supplied yet).
    ///
    /// [`ToolOutput::pending`]: toolbelt_core::ToolOutput::pending
    ToolPending {
        /// The call's recorded id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the tool said about the work (a ticket, a job id, how long it takes).
        status: String,
    },
    /// A person's decision on a requested approval, stored as the resumed run applies it
    /// (before an approved call runs, so a run that dies while the call runs never runs it
    /// again: the next resume records its outcome as unknown).
    ApprovalDecided {
        /// The call's recorded id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The decision.
        decision: crate::Decision,
    },
    /// Something the user should know that does not stop the run (the answer was cut at the
    /// token limit, a tool set failed to list).
    Warning {
        /// A message for people.
        message: String,
    },
    /// Something went wrong; the run ends.
    Error {
        /// What failed.
        kind: ErrorKind,
        /// A message for people.
        message: String,
    },
    /// A node of a graph workflow (`toolbelt-graph`) started, in super-step `step`.
    NodeStarted {
        /// The node's name.
        node: String,
        /// The super-step (0 for the first of a run's graph).
        step: u64,
    },
    /// A node of a graph workflow ended; `update` is the state delta it returned, as JSON.
    NodeEnded {
        /// The node's name.
        node: String,
        /// The super-step.
        step: u64,
        /// The node's state update (null when it changed nothing).
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        update: serde_json::Value,
    },
    /// A graph workflow's state after a super-step: what a later run (in any process)
    /// resumes from. Its body belongs to the graph crate.
    Checkpoint {
        /// The checkpoint.
        checkpoint: serde_json::Value,
    },
    /// A graph node asked a person: the run ends here, and the next run of the session
    /// resumes the node with the answer.
    Interrupted {
        /// The node that asked.
        node: String,
        /// The question (any JSON; text for people).
        question: serde_json::Value,
    },
    /// The last event of every run (root or child), always.
    RunCompleted,
}

impl EventKind {
    /// The variant's name, as in the JSON `"type"` field.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::UserInput { .. } => "user_input",
            EventKind::ToolInput { .. } => "tool_input",
            EventKind::ModelDelta { .. } => "model_delta",
            EventKind::ModelResponse { .. } => "model_response",
            EventKind::ToolChunk { .. } => "tool_chunk",
            EventKind::ToolProgress { .. } => "tool_progress",
            EventKind::ToolResult { .. } => "tool_result",
            EventKind::PendingToolCalls { .. } => "pending_tool_calls",
            EventKind::ToolPending { .. } => "tool_pending",
            EventKind::ApprovalRequested { .. } => "approval_requested",
            EventKind::ApprovalDecided { .. } => "approval_decided",
            EventKind::Warning { .. } => "warning",
            EventKind::Error { .. } => "error",
            EventKind::NodeStarted { .. } => "node_started",
            EventKind::NodeEnded { .. } => "node_ended",
            EventKind::Checkpoint { .. } => "checkpoint",
            EventKind::Interrupted { .. } => "interrupted",
            EventKind::RunCompleted => "run_completed",
        }
    }
}

/// One event of a run: a header (ids, author, time) plus an [`EventKind`] whose variants
/// carry exactly their data.
///
/// A run yields, in order: the caller's input, then for every model turn its deltas (when
/// streaming), its complete response and, if it called tools, their chunks, progress and
/// results as they come; then, after the last turn (or an error), [`EventKind::RunCompleted`].
/// Every event but deltas, chunks and progress is stored in the session before the caller
/// sees it.
///
/// # JSON form
///
/// A stable format (`toolbelt run --json` prints one event per line, sessions store it): the
/// header fields, then `"type"` naming the variant in snake_case
/// ([`EventKind::type_name`]), then the variant's fields. Optional fields that are unset are
/// left out. For example:
///
/// ```json
/// {"id":"…","invocation_id":"…","author":"calculator","timestamp_ms":1764756000000,
///  "type":"tool_result","result":{"call_id":"call_1","name":"multiply","content":"100.0",
///  "is_error":false,"duration_ms":0}}
/// {"id":"…","invocation_id":"…","author":"calculator","timestamp_ms":1764756000001,
///  "type":"error","kind":"session","message":"session store: database is locked"}
/// {"id":"…","invocation_id":"…","author":"calculator","timestamp_ms":1764756000002,
///  "type":"run_completed"}
/// ```
///
/// New variants and new optional fields may be added; existing names do not change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unique id.
    pub id: String,
    /// The invocation that produced it.
    pub invocation_id: String,
    /// The invocation that started that invocation (a transfer, or a tool running a child
    /// agent), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_invocation_id: Option<String>,
    /// For an event forwarded from a child agent run by a tool (an
    /// [`AgentTool`](crate::AgentTool) with `stream_inner`): the id of the tool call that
    /// runs the child, so a caller can show the child's progress under that call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The agent's name, or `user` for the caller's input.
    pub author: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// What the event reports.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// A new event with a fresh id and the current time.
    pub fn new(
        invocation_id: impl Into<String>,
        parent_invocation_id: Option<String>,
        author: impl Into<String>,
        kind: EventKind,
    ) -> Self {
        Self {
            id: crate::id::new_id(),
            invocation_id: invocation_id.into(),
            parent_invocation_id,
            tool_call_id: None,
            author: author.into(),
            timestamp_ms: now_ms(),
            kind,
        }
    }

    /// The text of a model delta (empty for other events).
    pub fn delta_text(&self) -> &str {
        match &self.kind {
            EventKind::ModelDelta { delta } => &delta.content,
            _ => "",
        }
    }

    /// The message of a model response or of user input.
    pub fn message(&self) -> Option<&Message> {
        match &self.kind {
            EventKind::UserInput { message } | EventKind::ModelResponse { message, .. } => {
                Some(message)
            }
            _ => None,
        }
    }

    /// The (recorded) tool calls of a model response.
    pub fn tool_calls(&self) -> &[ToolCall] {
        match &self.kind {
            EventKind::ModelResponse { message, .. } => &message.tool_calls,
            _ => &[],
        }
    }

    /// The tool result of a [`EventKind::ToolResult`] event.
    pub fn tool_result(&self) -> Option<&ToolResult> {
        match &self.kind {
            EventKind::ToolResult { result } => Some(result),
            _ => None,
        }
    }

    /// The kind and message of an error event.
    pub fn error(&self) -> Option<(ErrorKind, &str)> {
        match &self.kind {
            EventKind::Error { kind, message } => Some((*kind, message)),
            _ => None,
        }
    }

    /// Whether this is an error event.
    pub fn is_error(&self) -> bool {
        matches!(self.kind, EventKind::Error { .. })
    }

    /// Whether this is the last event of a run.
    pub fn is_run_completed(&self) -> bool {
        matches!(self.kind, EventKind::RunCompleted)
    }

    /// Whether the event goes into the session (everything but deltas, tool chunks and
    /// progress, which the complete response and results repeat).
    pub fn is_persistent(&self) -> bool {
        !matches!(
            self.kind,
            EventKind::ModelDelta { .. }
                | EventKind::ToolChunk { .. }
                | EventKind::ToolProgress { .. }
        )
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: EventKind) -> Event {
        Event {
            id: "e1".into(),
            invocation_id: "i1".into(),
            parent_invocation_id: None,
            tool_call_id: None,
            author: "agent".into(),
            timestamp_ms: 7,
            kind,
        }
    }

    #[test]
    fn the_json_form_is_the_header_plus_a_type_tag_and_the_variants_fields() {
        let mut result = ToolResult::new("call_1", "multiply", "100.0");
        result.silent = true;
        let value = serde_json::to_value(event(EventKind::ToolResult { result })).unwrap();
        assert_eq!(
            value,
            json!({
                "id": "e1", "invocation_id": "i1", "author": "agent", "timestamp_ms": 7,
                "type": "tool_result",
                "result": {"call_id": "call_1", "name": "multiply", "content": "100.0",
                           "silent": true, "is_error": false, "duration_ms": 0}
            })
        );
        let value = serde_json::to_value(event(EventKind::RunCompleted)).unwrap();
        assert_eq!(value["type"], "run_completed");
        let value = serde_json::to_value(event(EventKind::Error {
            kind: ErrorKind::Panic,
            message: "boom".into(),
        }))
        .unwrap();
        assert_eq!(
            (&value["type"], &value["kind"]),
            (&json!("error"), &json!("panic"))
        );
    }

    #[test]
    fn every_variant_reads_back_as_written() {
        let kinds = vec![
            EventKind::UserInput {
                message: Message::user("hi"),
            },
            EventKind::ToolInput {
                results: vec![ToolResult::new("a", "t", "ok")],
            },
            EventKind::ModelDelta {
                delta: Delta {
                    content: "he".into(),
                    ..Delta::default()
                },
            },
            EventKind::ModelResponse {
                message: Message::assistant_tool_calls("", vec![ToolCall::new("a", "t", "{}")]),
                finish_reason: Some(FinishReason::Length),
                usage: Some(Usage::default()),
            },
            EventKind::ToolChunk {
                call_id: "a".into(),
                name: "t".into(),
                chunk: StreamChunk::new("part"),
            },
            EventKind::ToolProgress {
                call_id: "a".into(),
                name: "t".into(),
                update: ProgressUpdate::new(1.0).with_message("half"),
            },
            EventKind::PendingToolCalls {
                calls: vec![ToolCall::new("b", "t", "{}")],
            },
            EventKind::Warning {
                message: "cut".into(),
            },
            EventKind::Error {
                kind: ErrorKind::Session,
                message: "database is locked".into(),
            },
            EventKind::NodeStarted {
                node: "tools".into(),
                step: 1,
            },
            EventKind::NodeEnded {
                node: "tools".into(),
                step: 1,
                update: json!({"turns": 1}),
            },
            EventKind::Checkpoint {
                checkpoint: json!({"step": 2}),
            },
            EventKind::Interrupted {
                node: "approve".into(),
                question: json!("Ship it?"),
            },
            EventKind::RunCompleted,
        ];
        for kind in kinds {
            let written = event(kind);
            let text = serde_json::to_string(&written).unwrap();
            let read: Event = serde_json::from_str(&text).unwrap();
            assert_eq!(read, written, "{text}");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&text).unwrap()["type"],
                written.kind.type_name()
            );
        }
    }
}
