//! Sampling: a server asks the client's model for a completion (`sampling/createMessage`).
//!
//! The client declares the `sampling` capability only when a handler is set
//! ([`McpToolSetBuilder::on_sampling`](super::McpToolSetBuilder::on_sampling)). The handler
//! receives the conversation as text ([`SamplingRequest`]) and answers with the model's
//! text, or refuses ([`SamplingError`]), which the server sees as a JSON-RPC error.
//!
//! Sampling with tools (MCP 2025-11-25, SEP-1577) is declared (`sampling.tools`) only when
//! the handler says it can offer tools to its model
//! ([`McpToolSetBuilder::sampling_tools`](super::McpToolSetBuilder::sampling_tools)). Then a
//! request may carry [`SamplingRequest::tools`] and a [`SamplingToolChoice`]; the answer may
//! hold the model's [`SamplingToolUse`]s (sent as `tool_use` content with stop reason
//! `toolUse`), which the server runs itself and answers in a later request's user message as
//! [`SamplingToolResult`]s. The client never runs the server's tools.

use std::sync::Arc;

use futures::future::BoxFuture;
use toolbelt_core::JsonObject;

/// Answers a server's request for a completion; set with
/// [`McpToolSetBuilder::on_sampling`](super::McpToolSetBuilder::on_sampling).
pub type SamplingHandler = Arc<
    dyn Fn(SamplingRequest) -> BoxFuture<'static, Result<SamplingResponse, SamplingError>>
        + Send
        + Sync,
>;

/// Who said a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingRole {
    /// The user (the server's prompt).
    User,
    /// The model.
    Assistant,
}

/// One message of the conversation to complete.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplingMessage {
    /// Who said it.
    pub role: SamplingRole,
    /// Its text; a block that is not text, a tool use or a tool result (an image, audio)
    /// appears as a short bracketed note such as `[image/png omitted]`.
    pub text: String,
    /// The model's tool calls of an earlier answer (assistant messages only).
    pub tool_uses: Vec<SamplingToolUse>,
    /// What the server's tools gave for those calls (user messages only).
    pub tool_results: Vec<SamplingToolResult>,
}

impl SamplingMessage {
    /// A message of `role` with `text` only.
    pub fn text(role: SamplingRole, text: impl Into<String>) -> Self {
        Self {
            role,
            text: text.into(),
            tool_uses: Vec::new(),
            tool_results: Vec::new(),
        }
    }
}

/// A tool of the server's that the model may call while answering.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplingTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, if the server says.
    pub description: Option<String>,
    /// A JSON Schema object of its arguments.
    pub input_schema: JsonObject,
}

/// Whether the model may, must or must not call the request's tools (`toolChoice.mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SamplingToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call tools (a server's last round, to get a final answer).
    None,
}

/// A call of one of the request's tools by the model (`tool_use` content).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingToolUse {
    /// The call's id, which the server's result names (`toolUseId`).
    pub id: String,
    /// The tool called.
    pub name: String,
    /// Its arguments.
    pub input: JsonObject,
}

/// What the server's tool gave for one [`SamplingToolUse`] (`tool_result` content).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplingToolResult {
    /// The id of the call this answers.
    pub tool_use_id: String,
    /// The result's text (blocks that are not text as bracketed notes).
    pub text: String,
    /// Whether the tool reported a failure.
    pub is_error: bool,
}

/// One `sampling/createMessage` request from a server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SamplingRequest {
    /// The tool set's name (which server asks).
    pub server: String,
    /// The conversation, oldest first.
    pub messages: Vec<SamplingMessage>,
    /// The system prompt the server asks for, if any.
    pub system_prompt: Option<String>,
    /// The most tokens the answer may take.
    pub max_tokens: u32,
    /// The sampling temperature the server asks for, if any.
    pub temperature: Option<f32>,
    /// Sequences that end the answer.
    pub stop_sequences: Vec<String>,
    /// Model names the server prefers, best first (hints: the client chooses).
    pub model_hints: Vec<String>,
    /// The tools the model may call (empty: none; only when the client declared
    /// `sampling.tools`).
    pub tools: Vec<SamplingTool>,
    /// Whether the model may, must or must not call them.
    pub tool_choice: SamplingToolChoice,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingResponse {
    /// The model that answered.
    pub model: String,
    /// The answer's text (may be empty beside tool calls).
    pub text: String,
    /// The model's calls of the request's tools, for the server to run.
    pub tool_uses: Vec<SamplingToolUse>,
    /// Why the model stopped (`endTurn`, `maxTokens`, `stopSequence`, `toolUse`), when known.
    pub stop_reason: Option<String>,
}

impl SamplingResponse {
    /// An answer `text` from `model` that ended its turn.
    pub fn new(model: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            text: text.into(),
            tool_uses: Vec::new(),
            stop_reason: Some("endTurn".into()),
        }
    }

    /// An answer from `model` that calls tools (stop reason `toolUse`), with `text` said
    /// beside the calls (may be empty).
    pub fn tool_uses(
        model: impl Into<String>,
        text: impl Into<String>,
        tool_uses: Vec<SamplingToolUse>,
    ) -> Self {
        Self {
            model: model.into(),
            text: text.into(),
            tool_uses,
            stop_reason: Some("toolUse".into()),
        }
    }
}

/// A refused or failed completion; the server receives it as a JSON-RPC error with this
/// message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SamplingError {
    /// What the server is told.
    pub message: String,
    declined: bool,
}

impl SamplingError {
    /// The user (or the client's policy) refused the request.
    pub fn declined(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            declined: true,
        }
    }

    /// The completion was attempted and failed (the model was unreachable, …).
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            declined: false,
        }
    }

    /// Whether the request was refused rather than failed.
    pub fn is_declined(&self) -> bool {
        self.declined
    }
}
