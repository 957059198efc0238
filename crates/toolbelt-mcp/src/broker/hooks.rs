//! The host application's hooks into broker operations: a header injector (so tokens come
//! from the host, never from the model) and an error interceptor (so a 401 can become
//! "authorise in the host application first").

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use toolbelt_core::{ToolContext, ToolError};

use crate::error::McpError;

/// The broker operation under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// `mcp_list_tools`.
    ListTools,
    /// `mcp_inspect_tools`.
    InspectTools,
    /// `mcp_call`.
    CallTool,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::ListTools => "list_tools",
            Phase::InspectTools => "inspect_tools",
            Phase::CallTool => "call_tool",
        })
    }
}

/// What the header injector is told about an operation on an HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderInjectRequest {
    /// The selector as the model wrote it (trimmed).
    pub selector: String,
    /// The configured server's name, or the ad-hoc URL.
    pub target: String,
    /// Whether `target` is an ad-hoc URL chosen by the model (check it before handing out a
    /// token: the allow-list ran already, but a token may be meant for one host only).
    pub is_ad_hoc: bool,
    /// The operation.
    pub phase: Phase,
    /// The tool, for [`Phase::CallTool`].
    pub tool: Option<String>,
}

/// Chooses HTTP headers for one broker operation on an HTTP server (named or ad-hoc), from
/// the caller's context. Its headers are sent with that operation's requests (and with the
/// connection's handshake when the operation opens it), override the model's headers of the
/// same name, and are never checked against the deny list. Not called for stdio servers.
pub type BrokerHeaderInjector = Arc<
    dyn Fn(
            &ToolContext,
            &HeaderInjectRequest,
        ) -> BoxFuture<'static, Result<Vec<(String, String)>, ToolError>>
        + Send
        + Sync,
>;

/// What the error interceptor is told about a failed operation on an HTTP server.
#[derive(Debug)]
pub struct BrokerErrorRequest<'a> {
    /// The selector as the model wrote it (trimmed).
    pub selector: &'a str,
    /// The configured server's name, or the ad-hoc URL.
    pub target: &'a str,
    /// Whether `target` is an ad-hoc URL.
    pub is_ad_hoc: bool,
    /// The operation.
    pub phase: Phase,
    /// The tool, for [`Phase::CallTool`].
    pub tool: Option<&'a str>,
    /// The error.
    pub error: &'a ToolError,
}

impl BrokerErrorRequest<'_> {
    /// The MCP client's error underneath, when there is one (it names the step that failed).
    pub fn mcp_error(&self) -> Option<&McpError> {
        mcp_error_of(self.error)
    }

    /// The HTTP status the server answered with, when the failure was an HTTP status
    /// (for example 401 or 403).
    pub fn http_status(&self) -> Option<u16> {
        http_status_of(self.error)
    }
}

/// What to do with an error from an HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorDecision {
    /// Keep the error as it is.
    Pass,
    /// Fail with this message instead (the original stays as the error's source).
    Wrap(String),
    /// Handle it: the model gets this message as a result-level error (a tool output with
    /// `is_error`) rather than a failed call.
    Handle(String),
}

/// Decides what the model sees when an operation on an HTTP server fails: connecting,
/// listing or calling. The broker's own refusals (selectors, policy, arguments) and the
/// operation timeout do not pass through it.
pub type ErrorInterceptor =
    Arc<dyn Fn(&ToolContext, &BrokerErrorRequest<'_>) -> ErrorDecision + Send + Sync>;

/// The MCP client's error inside a [`ToolError`], if any.
pub(crate) fn mcp_error_of(error: &ToolError) -> Option<&McpError> {
    let boxed = match error {
        ToolError::Failed(inner) | ToolError::Transient(inner) => inner,
        _ => return None,
    };
    boxed.downcast_ref::<McpError>()
}

/// The HTTP status a failed operation carries (see [`crate::error::http_status`]).
pub(crate) fn http_status_of(error: &ToolError) -> Option<u16> {
    crate::error::http_status(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{FailureKind, Step};

    #[test]
    fn statuses_are_found_in_typed_errors_and_in_rmcps_words_only() {
        use crate::transport::sse::SseTransportError;
        let failed = |e: McpError| ToolError::Failed(Box::new(e));
        // The SSE transport's connect failure carries its status as a typed source.
        let sse = McpError::new(
            "s",
            Step::Connect,
            FailureKind::Configuration,
            "GET … answered",
        )
        .with_source(SseTransportError::Status { status: 401 });
        assert_eq!(http_status_of(&failed(sse)), Some(401));
        // Our own messages are not read for a status.
        let worded = McpError::new(
            "s",
            Step::Connect,
            FailureKind::Configuration,
            "answered HTTP 401",
        );
        assert_eq!(http_status_of(&failed(worded)), None);
        // rmcp's, where it gives nothing else, are.
        let rmcp = McpError::new("s", Step::CallTool, FailureKind::Server, "x").with_source(
            std::io::Error::other("Unexpected server response: HTTP 502 Bad Gateway"),
        );
        assert_eq!(http_status_of(&failed(rmcp)), Some(502));
        let plain = McpError::new("s", Step::CallTool, FailureKind::Server, "boom");
        assert_eq!(http_status_of(&failed(plain)), None);
        assert_eq!(http_status_of(&ToolError::Cancelled), None);
    }
}
