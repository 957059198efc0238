//! The errors of a model call.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// No model is configured; the message names the variables to set.
    #[error(
        "no model configured: set {} (or pass them as options)",
        missing.join(" and ")
    )]
    NotConfigured {
        /// The settings that are missing, by their environment variable names.
        missing: Vec<&'static str>,
    },

    /// The configuration is unusable (a bad URL or header).
    #[error("invalid model configuration: {0}")]
    InvalidConfig(String),

    /// The server answered with an error status (after any retries).
    #[error("model server answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The error message from the body, or the body itself, shortened.
        message: String,
    },

    /// The server could not be reached or the connection broke.
    #[error("model server unreachable: {0}")]
    Transport(String),

    /// No byte arrived for too long (connect or idle timeout).
    #[error("model server sent nothing for {}s ({what})", limit.as_secs_f32())]
    Timeout {
        /// What timed out: connecting or waiting for data.
        what: &'static str,
        /// The limit that was exceeded.
        limit: Duration,
    },

    /// The server's answer could not be understood.
    #[error("could not decode the model's response: {0}")]
    Decode(String),

    /// The call was cancelled.
    #[error("model call cancelled")]
    Cancelled,
}

impl ModelError {
    /// Whether retrying the same request may succeed (rate limits, server errors, broken
    /// connections, timeouts).
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => *status == 429 || *status >= 500,
            ModelError::Transport(_) | ModelError::Timeout { .. } => true,
            _ => false,
        }
    }
}
