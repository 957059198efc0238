//! The one error type every layer of Toolbelt speaks.
//!
//! A tool, the executor, an MCP tool set and the agent loop all fail with [`ToolError`], so a
//! caller can match on *what kind* of failure happened without knowing which layer produced it.
//! Each variant renders as a short, specific message fit to show a model (see
//! [`ToolError::for_model`]).

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

/// A boxed error from a tool's own code.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Why a tool call (or a step around it) failed.
///
/// Result-level failures, where the tool ran and reported a problem in its output, are *not*
/// errors: they are a [`ToolOutput`](crate::ToolOutput) with `is_error` set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// A tool name failed validation at construction.
    #[error("invalid tool name {name:?}: {reason}")]
    InvalidName {
        /// The name that was refused.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A declaration was built with something that is not usable (for example a non-object
    /// input schema).
    #[error("invalid declaration for {tool}: {reason}")]
    InvalidDeclaration {
        /// The tool being declared.
        tool: String,
        /// What is wrong.
        reason: String,
    },

    /// No tool of that name is registered or visible.
    #[error("{}", unknown_tool_message(name, suggestions))]
    UnknownTool {
        /// The name the caller asked for.
        name: String,
        /// Up to three registered names close to it.
        suggestions: Vec<String>,
    },

    /// The arguments could not be parsed or decoded, or are missing required fields.
    #[error("invalid arguments: {message}")]
    InvalidArguments {
        /// What is wrong, naming the field where one is known.
        message: String,
    },

    /// The arguments do not satisfy the tool's input schema.
    #[error("arguments do not match the schema: {}", violations.join("; "))]
    SchemaViolation {
        /// Every violation, each prefixed with its JSON path.
        violations: Vec<String>,
    },

    /// A hook or policy refused the call before the tool ran.
    #[error("tool call rejected: {reason}")]
    Rejected {
        /// The reason given by the hook.
        reason: String,
    },

    /// The call needs a person's decision and nobody can be asked now: the tool did not run.
    /// Only a caller that said it can pause gets this (`toolbelt_exec::RunApprovals` in the
    /// call's context); it asks a person later and, once approved, makes the call again with
    /// its id approved there.
    #[error("tool call awaits the user's approval ({reason}); it has not run")]
    AwaitingApproval {
        /// Why it needs approval (the rule that asked, or the default).
        reason: String,
        /// What a person should see to decide: a diff, the command (see
        /// [`crate::PermissionCheck::preview`]).
        preview: Option<String>,
    },

    /// The call was cancelled (its token fired) before it finished.
    #[error("tool execution was interrupted")]
    Cancelled,

    /// The call ran out of time.
    #[error("tool call timed out after {}", format_duration(*limit))]
    Timeout {
        /// The limit that was exceeded.
        limit: Duration,
    },

    /// A transient failure of a transport (connection reset, unexpected EOF, a network
    /// timeout): worth retrying for idempotent tools.
    #[error("transient failure: {0}")]
    Transient(#[source] BoxError),

    /// The tool panicked; the panic was caught and turned into this error.
    #[error("tool panicked: {0}")]
    Panicked(String),

    /// The tool's own code failed.
    #[error("{0}")]
    Failed(#[source] BoxError),
}

fn unknown_tool_message(name: &str, suggestions: &[String]) -> String {
    match suggestions {
        [] => format!("unknown tool {name:?}"),
        [one] => format!("unknown tool {name:?}; did you mean {one:?}?"),
        many => {
            let quoted: Vec<String> = many.iter().map(|s| format!("{s:?}")).collect();
            format!(
                "unknown tool {name:?}; did you mean one of {}?",
                quoted.join(", ")
            )
        }
    }
}

fn format_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

impl ToolError {
    /// A tool failure from any error or message.
    pub fn failed(err: impl Into<BoxError>) -> Self {
        Self::from_boxed(err.into())
    }

    /// A decoding or argument error.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::InvalidArguments {
            message: message.into(),
        }
    }

    /// A rejection with a reason.
    pub fn rejected(reason: impl Into<String>) -> Self {
        Self::Rejected {
            reason: reason.into(),
        }
    }

    /// Wraps a boxed error, unwrapping a `ToolError` inside it and classifying I/O errors that
    /// are transient, so a function tool may return `ToolError`s or `io::Error`s through `?`
    /// without losing their kind.
    pub fn from_boxed(err: BoxError) -> Self {
        match err.downcast::<ToolError>() {
            Ok(tool_error) => *tool_error,
            Err(err) => match err.downcast::<io::Error>() {
                Ok(io_err) if is_transient_io(io_err.kind()) => Self::Transient(io_err),
                Ok(io_err) => Self::Failed(io_err),
                Err(other) => Self::Failed(other),
            },
        }
    }

    /// True for errors a retry may cure: [`ToolError::Transient`] only. Cancellation,
    /// timeouts of the call itself, bad arguments and rejections are never transient.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient(_))
    }

    /// True when the call failed because it was cancelled or ran out of time.
    pub fn is_interruption(&self) -> bool {
        matches!(self, Self::Cancelled | Self::Timeout { .. })
    }

    /// The text a model sees for this error: `Error: ` and the message.
    ///
    /// Kept short and actionable; a model reads it and decides what to do next.
    pub fn for_model(&self) -> String {
        format!("Error: {self}")
    }
}

/// I/O error kinds that a retry may cure.
pub fn is_transient_io(kind: io::ErrorKind) -> bool {
    use io::ErrorKind::*;
    matches!(
        kind,
        UnexpectedEof
            | ConnectionReset
            | ConnectionAborted
            | BrokenPipe
            | TimedOut
            | Interrupted
            | WouldBlock
    )
}

/// `error` and its sources on one line, `: ` between them, a source left out when the text
/// before already says it. HTTP and database clients name only the outer layer ("error
/// sending request"); the sources say why ("connection refused"). The one place Toolbelt
/// turns an error chain into text.
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::Other, "connection refused");
/// let outer = std::io::Error::new(std::io::ErrorKind::Other, io);
/// assert_eq!(toolbelt_core::error_chain(&outer), "connection refused");
/// ```
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tool_message_lists_suggestions() {
        let e = ToolError::UnknownTool {
            name: "reed".into(),
            suggestions: vec!["Read".into(), "read_file".into()],
        };
        assert_eq!(
            e.for_model(),
            r#"Error: unknown tool "reed"; did you mean one of "Read", "read_file"?"#
        );
    }

    #[test]
    fn boxed_tool_errors_and_io_errors_keep_their_kind() {
        let boxed: BoxError = Box::new(ToolError::Cancelled);
        assert!(matches!(ToolError::from_boxed(boxed), ToolError::Cancelled));
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "eof");
        assert!(ToolError::failed(eof).is_transient());
        let denied = io::Error::new(io::ErrorKind::PermissionDenied, "no");
        assert!(!ToolError::failed(denied).is_transient());
        assert!(!ToolError::failed("plain message").is_transient());
    }

    #[test]
    fn cancellation_reads_as_interrupted_for_the_model() {
        assert_eq!(
            ToolError::Cancelled.for_model(),
            "Error: tool execution was interrupted"
        );
        let t = ToolError::Timeout {
            limit: Duration::from_millis(250),
        };
        assert_eq!(t.to_string(), "tool call timed out after 250ms");
    }
}
