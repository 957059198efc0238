//! What a model answers: partial deltas while streaming, then one complete message.

use serde::{Deserialize, Serialize};

use crate::{Message, ToolCall};

/// Tokens used by one model call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Tokens of the request.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
}

impl Usage {
    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// A fragment of a tool call as it streams in: the parts arrive by `index`, the id and name
/// usually first, the arguments in pieces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the turn this fragment belongs to.
    pub index: usize,
    /// The call's id, when this fragment carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name, when this fragment carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A piece of the arguments' JSON text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub arguments: String,
}

/// What arrived since the previous partial response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delta {
    /// New answer text.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// New reasoning text (providers that stream `reasoning_content`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// New tool-call fragments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
}

impl Delta {
    /// Whether nothing arrived.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty() && self.reasoning.is_empty() && self.tool_calls.is_empty()
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The token limit.
    Length,
    /// The model wants tools run.
    ToolCalls,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else the provider said, verbatim.
    Other(String),
}

impl FinishReason {
    /// Parses a provider's `finish_reason` string.
    pub fn parse(reason: &str) -> Self {
        match reason {
            "stop" | "eos" | "end_turn" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            // "function_call" is the pre-tools name some older servers still send.
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        }
    }

    /// The wire name (`stop`, `length`, `tool_calls`, `content_filter`, or the provider's
    /// own word).
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }
}

/// One item of a model's response stream.
///
/// A streaming call yields partial responses (`partial: true`, [`Response::delta`] set) and
/// then exactly one final response (`partial: false`) whose [`Response::message`] is the whole
/// assistant message, tool calls assembled, so a consumer that ignores deltas still sees
/// everything. A non-streaming call yields only the final response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The provider's response id.
    #[serde(default)]
    pub id: String,
    /// The model that answered, as the provider named it.
    #[serde(default)]
    pub model: String,
    /// Whether this is a delta (more follows) rather than the final response.
    #[serde(default)]
    pub partial: bool,
    /// What arrived in this chunk (partial responses).
    #[serde(default, skip_serializing_if = "Delta::is_empty")]
    pub delta: Delta,
    /// The complete assistant message (final response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// Why the model stopped (final response).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Tokens used (final response, when the provider reports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// What the client changed to get this answer, one line each (final response): a tool
    /// renamed or left out for the provider, a turn moved on to the next model of
    /// a [`FallbackModel`](crate::FallbackModel). The agent shows each as a warning event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Response {
    /// The tool calls of the final message (empty for partial responses).
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.message.as_ref().map_or(&[], |m| &m.tool_calls)
    }
}
