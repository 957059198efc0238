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

    /// The server answered with an error status (after any retries), or with an
    /// `{"error": …}` body under a 200.
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

    /// A limit of [`crate::OpenAiConfig`] fired, e.g. "no response headers within 20 s
    /// (request timeout)".
    #[error("{what} within {} ({setting})", format_duration(*limit))]
    Timeout {
        /// What did not happen in time ("no response headers", "no chunk").
        what: &'static str,
        /// The setting that limits it ("connect timeout", "request timeout", "idle
        /// timeout"), so the user knows which option to raise.
        setting: &'static str,
        /// Its value.
        limit: Duration,
    },

    /// A successful status with a body of the wrong kind: an HTML page, plain text, or
    /// anything that is neither the event stream nor the JSON completion asked for.
    #[error("the model server sent {content_type} instead of {expected}: {snippet}")]
    UnexpectedBody {
        /// What was asked for ("an event stream", "a JSON completion").
        expected: &'static str,
        /// The `Content-Type` the server sent ("none" when it sent none).
        content_type: String,
        /// The start of the body, shortened.
        snippet: String,
    },

    /// The answer had no text, no reasoning and no tool calls: never a blank success.
    #[error(
        "the model's answer was empty: no text, no reasoning and no tool calls (finish reason: {})",
        finish_reason.as_deref().unwrap_or("none")
    )]
    EmptyAnswer {
        /// The `finish_reason` the server gave, verbatim, if any.
        finish_reason: Option<String>,
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
    /// connections, timeouts). [`crate::OpenAiModel`] retries a timeout only once (see the
    /// crate documentation).
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => *status == 429 || *status >= 500,
            ModelError::Transport(_) | ModelError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// "20 s", "1.5 s", "200 ms": how a limit reads in a message.
pub(crate) fn format_duration(limit: Duration) -> String {
    if limit < Duration::from_secs(1) {
        format!("{} ms", limit.as_millis())
    } else {
        format!("{} s", (limit.as_secs_f64() * 10.0).round() / 10.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_names_the_limit_and_its_value() {
        let error = ModelError::Timeout {
            what: "no response headers",
            setting: "request timeout",
            limit: Duration::from_secs(20),
        };
        assert_eq!(
            error.to_string(),
            "no response headers within 20 s (request timeout)"
        );
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(format_duration(Duration::from_millis(200)), "200 ms");
    }
}
