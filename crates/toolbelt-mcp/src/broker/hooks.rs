//! The host application's hooks into broker operations: a header injector (so tokens come
//! from the host, never from the model) and an error interceptor (so a 401 can become
//! "authorise in the host application first").

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use toolbelt_core::{ToolContext, ToolError};

use crate::error::McpError;
use crate::transport::sse::SseTransportError;

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

/// Finds an HTTP status in an error's chain: rmcp's auth and status errors (looking inside
/// its handshake and send errors, whose causes are fields rather than sources), reqwest's
/// status, the SSE transport's status, or, last, the client's messages (`answered HTTP
/// 401`, `Auth required`, `Insufficient scope`).
pub(crate) fn http_status_of(error: &ToolError) -> Option<u16> {
    use rmcp::ServiceError;
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::DynamicTransportError;
    use rmcp::transport::streamable_http_client::{
        AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    };
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut messages = Vec::new();
    while let Some(e) = current {
        if let Some(ClientInitializeError::TransportError { error, .. }) =
            e.downcast_ref::<ClientInitializeError>()
        {
            current = Some(error);
            continue;
        }
        if let Some(ServiceError::TransportSend(error)) = e.downcast_ref::<ServiceError>() {
            current = Some(error);
            continue;
        }
        if let Some(dynamic) = e.downcast_ref::<DynamicTransportError>() {
            let inner: &(dyn std::error::Error + 'static) = dynamic.error.as_ref();
            current = Some(inner);
            continue;
        }
        if let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            match http {
                StreamableHttpError::AuthRequired(_) => return Some(401),
                StreamableHttpError::InsufficientScope(_) => return Some(403),
                StreamableHttpError::HttpStatus(status) => return Some(status.status),
                StreamableHttpError::Client(err) if err.status().is_some() => {
                    return err.status().map(|s| s.as_u16());
                }
                _ => {}
            }
        }
        if e.downcast_ref::<AuthRequiredError>().is_some() {
            return Some(401);
        }
        if e.downcast_ref::<InsufficientScopeError>().is_some() {
            return Some(403);
        }
        if let Some(status) = e.downcast_ref::<HttpStatusError>() {
            return Some(status.status);
        }
        if let Some(err) = e.downcast_ref::<reqwest::Error>()
            && let Some(status) = err.status()
        {
            return Some(status.as_u16());
        }
        if let Some(SseTransportError::Status { status }) = e.downcast_ref::<SseTransportError>() {
            return Some(*status);
        }
        if let Some(mcp) = e.downcast_ref::<McpError>() {
            messages.push(mcp.message.as_str());
        }
        current = e.source();
    }
    messages.into_iter().find_map(status_in_message)
}

/// The status a client message reports (the SSE transport's connect failure has no typed
/// source).
fn status_in_message(message: &str) -> Option<u16> {
    let lower = message.to_ascii_lowercase();
    if let Some(at) = lower.find("answered http ") {
        let digits = lower.get(at + "answered http ".len()..)?.get(..3)?;
        return digits.parse().ok().filter(|s| (100..600).contains(s));
    }
    if lower.contains("auth required") {
        return Some(401);
    }
    if lower.contains("insufficient scope") {
        return Some(403);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{FailureKind, Step};

    #[test]
    fn statuses_are_found_in_typed_errors_and_in_sse_connect_messages() {
        let sse = McpError::new(
            "s",
            Step::Connect,
            FailureKind::Configuration,
            "GET http://127.0.0.1:1/sse answered HTTP 401 Unauthorized",
        );
        assert_eq!(http_status_of(&ToolError::Failed(Box::new(sse))), Some(401));
        let status = McpError::new("s", Step::CallTool, FailureKind::Configuration, "x")
            .with_source(SseTransportError::Status { status: 403 });
        assert_eq!(
            http_status_of(&ToolError::Failed(Box::new(status))),
            Some(403)
        );
        let plain = McpError::new("s", Step::CallTool, FailureKind::Server, "boom");
        assert_eq!(http_status_of(&ToolError::Failed(Box::new(plain))), None);
        assert_eq!(http_status_of(&ToolError::Cancelled), None);
    }
}
