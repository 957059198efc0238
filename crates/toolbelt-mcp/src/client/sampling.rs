//! Sampling: a server asks the client's model for a completion (`sampling/createMessage`).
//!
//! The client declares the `sampling` capability only when a handler is set
//! ([`McpToolSetBuilder::on_sampling`](super::McpToolSetBuilder::on_sampling)). The handler
//! receives the conversation as text ([`SamplingRequest`]) and answers with the model's
//! text, or refuses ([`SamplingError`]), which the server sees as a JSON-RPC error.

use std::sync::Arc;

use futures::future::BoxFuture;

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
    /// Its text; a block that is not text (an image, audio, a tool call) appears as a short
    /// bracketed note such as `[image/png omitted]`.
    pub text: String,
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
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingResponse {
    /// The model that answered.
    pub model: String,
    /// The answer's text.
    pub text: String,
    /// Why the model stopped (`endTurn`, `maxTokens`, `stopSequence`), when known.
    pub stop_reason: Option<String>,
}

impl SamplingResponse {
    /// An answer `text` from `model` that ended its turn.
    pub fn new(model: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            text: text.into(),
            stop_reason: Some("endTurn".into()),
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
