//! Errors of the MCP client, each naming the server and the step that failed.

use std::time::Duration;

use toolbelt_core::{BoxError, ToolError};

/// The step of a server's lifecycle at which something failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Starting the process or opening the connection.
    Connect,
    /// The `initialize` handshake.
    Initialize,
    /// `tools/list`.
    ListTools,
    /// `tools/call`.
    CallTool,
    /// Another request relayed to the server (resources, prompts, completions, logging).
    Request,
    /// Re-establishing a lost session.
    Reconnect,
    /// Ending the session.
    Close,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Connect => "connect",
            Step::Initialize => "initialize",
            Step::ListTools => "list tools",
            Step::CallTool => "call tool",
            Step::Request => "request",
            Step::Reconnect => "reconnect",
            Step::Close => "close",
        })
    }
}

/// How a failure should be treated by the reconnect logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// The connection or session is gone (dead child, closed transport, expired session,
    /// refused or reset connection): reconnecting may cure it.
    Connection,
    /// The configuration is wrong (bad command, DNS failure, 401/403, bad URL): reconnecting
    /// would fail the same way.
    Configuration,
    /// The server spoke something that is not MCP (garbage on stdout, an unexpected reply).
    Protocol,
    /// The server answered with a JSON-RPC error.
    Server,
    /// The step ran out of time.
    Timeout,
    /// The caller cancelled.
    Cancelled,
    /// The connection was lost while a call was in flight, after the request may have
    /// reached the server: the call may or may not have run, so it is not sent again.
    UnknownOutcome,
}

/// A failure talking to an MCP server.
///
/// The message always names the server and the step, for example
/// `MCP server "files": initialize failed: timed out after 5s`.
#[derive(Debug, thiserror::Error)]
#[error("MCP server {server:?}: {step} failed: {message}")]
pub struct McpError {
    /// The server's name (the tool set's name).
    pub server: String,
    /// The step that failed.
    pub step: Step,
    /// How the failure is classified.
    pub kind: FailureKind,
    /// What went wrong.
    pub message: String,
    /// The limit that was exceeded, for [`FailureKind::Timeout`].
    pub limit: Option<Duration>,
    /// The underlying error, when there is one.
    #[source]
    pub source: Option<BoxError>,
}

impl McpError {
    /// A new error without an underlying cause.
    pub fn new(
        server: impl Into<String>,
        step: Step,
        kind: FailureKind,
        message: impl Into<String>,
    ) -> Self {
        Self {
            server: server.into(),
            step,
            kind,
            message: message.into(),
            limit: None,
            source: None,
        }
    }

    /// A timeout of `step` after `limit`.
    pub fn timeout(server: impl Into<String>, step: Step, limit: Duration) -> Self {
        Self {
            limit: Some(limit),
            ..Self::new(
                server,
                step,
                FailureKind::Timeout,
                format!("timed out after {}", format_duration(limit)),
            )
        }
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Whether a reconnect may cure this failure.
    pub fn is_connection_error(&self) -> bool {
        self.kind == FailureKind::Connection
    }

    /// This connection failure, for a call whose request may have reached the server: the
    /// call's outcome is unknown, and it must not be sent again.
    pub(crate) fn into_unknown_outcome(self) -> Self {
        Self {
            kind: FailureKind::UnknownOutcome,
            message: format!(
                "the server connection was lost while the call was in flight; it may or may not \
                 have run, so it was not sent again ({})",
                self.message
            ),
            ..self
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

impl From<McpError> for ToolError {
    /// Cancellation and call timeouts keep their core kinds (so the executor's retry and
    /// timeout middleware treat them as interruptions); a lost connection is transient; a
    /// call of unknown outcome, like everything else, is a tool failure carrying the full
    /// message (never transient: retrying it could run it twice).
    fn from(err: McpError) -> Self {
        match err.kind {
            FailureKind::Cancelled => ToolError::Cancelled,
            FailureKind::Timeout if err.step == Step::CallTool => ToolError::Timeout {
                limit: err.limit.unwrap_or_default(),
            },
            FailureKind::Connection => ToolError::Transient(Box::new(err)),
            _ => ToolError::Failed(Box::new(err)),
        }
    }
}

/// Classifies a failed HTTP request: refused or reset connections are connection failures
/// (the server may come back); DNS failures and malformed requests are configuration errors.
pub(crate) fn classify_reqwest(err: &reqwest::Error) -> FailureKind {
    if err.is_builder() {
        return FailureKind::Configuration;
    }
    if let Some(status) = err.status() {
        return classify_status(status, true);
    }
    if err.is_timeout() {
        return FailureKind::Timeout;
    }
    classify_error_chain(err)
}

/// Classifies an HTTP status. A 404 means "session expired" once a session exists, and
/// "wrong URL" before.
pub(crate) fn classify_status(status: reqwest::StatusCode, in_session: bool) -> FailureKind {
    match status.as_u16() {
        401 | 403 => FailureKind::Configuration,
        404 if in_session => FailureKind::Connection,
        400..=499 => FailureKind::Configuration,
        _ => FailureKind::Server,
    }
}

/// The status in rmcp's "unexpected server response: HTTP 401 Unauthorized: ..." message.
fn unexpected_response_status(text: &str) -> Option<reqwest::StatusCode> {
    let rest = text.split("unexpected server response: http ").nth(1)?;
    let code = rest.get(..3)?.parse::<u16>().ok()?;
    reqwest::StatusCode::from_u16(code).ok()
}

/// The HTTP status in an error's chain, the one place a failure's status is found (the
/// broker's error interceptor reads it, [`classify_error_chain`] classifies by it): rmcp's
/// auth and status errors (looking inside its handshake and send errors, whose causes are
/// fields rather than sources), reqwest's status, the SSE transport's status. Where rmcp
/// gives only text, its wording is read here and nowhere else: "unexpected server response:
/// HTTP 401 …", "Auth required", "Insufficient scope".
pub(crate) fn http_status(error: &(dyn std::error::Error + 'static)) -> Option<u16> {
    use rmcp::ServiceError;
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::DynamicTransportError;
    use rmcp::transport::streamable_http_client::{
        AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    };
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
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
        if let Some(crate::transport::sse::SseTransportError::Status { status }) =
            e.downcast_ref::<crate::transport::sse::SseTransportError>()
        {
            return Some(*status);
        }
        if let Some(status) = rmcp_status_in_text(&e.to_string().to_ascii_lowercase()) {
            return Some(status);
        }
        current = e.source();
    }
    None
}

/// The status rmcp reports only in words.
fn rmcp_status_in_text(lower: &str) -> Option<u16> {
    if let Some(status) = unexpected_response_status(lower) {
        return Some(status.as_u16());
    }
    if lower.contains("auth required") {
        return Some(401);
    }
    if lower.contains("insufficient scope") {
        return Some(403);
    }
    None
}

/// Walks an error's causes looking for the I/O failure or DNS failure underneath.
pub(crate) fn classify_error_chain(err: &(dyn std::error::Error + 'static)) -> FailureKind {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io_err) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return match io_err.kind() {
                NotFound | PermissionDenied | InvalidInput | AddrNotAvailable => {
                    FailureKind::Configuration
                }
                _ => FailureKind::Connection,
            };
        }
        let text = e.to_string().to_ascii_lowercase();
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return FailureKind::Configuration;
        }
        if text.contains("session expired") {
            return FailureKind::Connection;
        }
        // A refused request (a 401 without `WWW-Authenticate`, a 403, a 5xx); an expired
        // session has its own variant, matched above.
        if let Some(status) = http_status(e).and_then(|s| reqwest::StatusCode::from_u16(s).ok()) {
            return classify_status(status, false);
        }
        current = e.source();
    }
    FailureKind::Connection
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_streamable_http_requests_are_classified_by_status() {
        /// An error that is only its message, as rmcp's streamable HTTP errors are.
        #[derive(Debug, thiserror::Error)]
        #[error("{0}")]
        struct Message(String);
        let classify = |text: &str| classify_error_chain(&Message(text.to_string()));
        let refused = |status: &str| format!("unexpected server response: HTTP {status}: body");
        assert_eq!(
            classify(&refused("401 Unauthorized")),
            FailureKind::Configuration
        );
        assert_eq!(
            classify(&refused("403 Forbidden")),
            FailureKind::Configuration
        );
        assert_eq!(
            classify(&refused("500 Internal Server Error")),
            FailureKind::Server
        );
        assert_eq!(
            classify("Session expired (HTTP 404)"),
            FailureKind::Connection
        );
    }
}
