//! Events: everything a run reports, in order, to its caller and to the session.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use toolbelt_model::{Message, Response, ToolCall};

/// What kind of thing an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectType {
    /// The caller's input: a user message (or role=tool results when resuming).
    UserInput,
    /// A streamed delta of the model's answer (`response.partial`); not stored.
    ChatChunk,
    /// The model's complete message (text and/or tool calls).
    ChatCompletion,
    /// Results of tool calls, in the model's call order.
    ToolResponse,
    /// Something went wrong; see [`Event::error`].
    Error,
    /// The last event of a run.
    RunnerCompletion,
}

impl ObjectType {
    /// The dotted name used in logs and the SQLite store.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::UserInput => "user.input",
            ObjectType::ChatChunk => "chat.completion.chunk",
            ObjectType::ChatCompletion => "chat.completion",
            ObjectType::ToolResponse => "tool.response",
            ObjectType::Error => "error",
            ObjectType::RunnerCompletion => "runner.completion",
        }
    }
}

/// The result of one tool call, as reported in a [`ObjectType::ToolResponse`] event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
            is_error: false,
            duration_ms: 0,
            repaired_arguments: None,
        }
    }

    /// The role=tool message sent to the model.
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
    /// The session store failed.
    Session,
    /// The run was misconfigured (an unknown agent, for example).
    Config,
    /// The run was cancelled.
    Cancelled,
}

/// The error of an [`ObjectType::Error`] event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventError {
    /// What failed.
    pub kind: ErrorKind,
    /// A message for people.
    pub message: String,
}

/// One event of a run.
///
/// A run yields, in order: the caller's input, then for every model turn its chunks (when
/// streaming), its complete message and, if it called tools, one tool response; then, after
/// the last turn (or an error), a runner completion. Every event but chunks is stored in the
/// session before the caller sees it.
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
    /// The agent's name, or `user` for the caller's input.
    pub author: String,
    /// What the event reports.
    pub object: ObjectType,
    /// The model's response: a delta for chunks, the full message for completions, the
    /// input message for user input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    /// Tool results (tool responses, and role=tool input).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolResult>,
    /// Tool calls the execution filter handed back to the caller: run them and resume the
    /// session with role=tool messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_tool_calls: Vec<ToolCall>,
    /// The error of an error event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<EventError>,
    /// Whether the event is complete (everything but chunks).
    pub done: bool,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
}

impl Event {
    /// A new event with a fresh id and the current time.
    pub fn new(
        invocation_id: impl Into<String>,
        parent_invocation_id: Option<String>,
        author: impl Into<String>,
        object: ObjectType,
    ) -> Self {
        Self {
            id: crate::id::new_id(),
            invocation_id: invocation_id.into(),
            parent_invocation_id,
            author: author.into(),
            object,
            response: None,
            tool_results: Vec::new(),
            pending_tool_calls: Vec::new(),
            error: None,
            done: object != ObjectType::ChatChunk,
            timestamp_ms: now_ms(),
        }
    }

    /// The text delta of a chunk (empty for other events).
    pub fn delta_text(&self) -> &str {
        match (&self.response, self.object) {
            (Some(response), ObjectType::ChatChunk) => &response.delta.content,
            _ => "",
        }
    }

    /// The complete message of a completion or of user input.
    pub fn message(&self) -> Option<&Message> {
        self.response.as_ref().and_then(|r| r.message.as_ref())
    }

    /// The tool calls of a completion.
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self.object {
            ObjectType::ChatCompletion => self.message().map_or(&[], |m| &m.tool_calls),
            _ => &[],
        }
    }

    /// Whether this is an error event.
    pub fn is_error(&self) -> bool {
        self.object == ObjectType::Error
    }

    /// Whether this is the last event of a run.
    pub fn is_runner_completion(&self) -> bool {
        self.object == ObjectType::RunnerCompletion
    }

    /// Whether the event goes into the session (everything but chunks).
    pub fn is_persistent(&self) -> bool {
        self.object != ObjectType::ChatChunk
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
