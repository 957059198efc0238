//! One live MCP session: the transport, the rmcp service running the protocol over it, and
//! (for stdio) the child process.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt};
use tokio::sync::Mutex;

use super::handler::Handler;
use super::progress::ProgressTap;
use crate::config::{ConnectionConfig, TransportConfig};
use crate::error::{FailureKind, McpError, Step};
use crate::transport::delivery::{DeliveryLog, Ticket};
use crate::transport::http::InjectingClient;
use crate::transport::sse;
use crate::transport::stdio::{self, ChildProcess, SharedDiagnostics};
use crate::transport::{describe_transport_error, header_map, parse_header};

/// How long closing the protocol side may take before the transport is dropped anyway.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A live session.
pub(crate) struct Session {
    service: Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: Peer<RoleClient>,
    child: Option<ChildProcess>,
    diagnostics: Option<SharedDiagnostics>,
    /// Whether each ticketed call reached the server.
    deliveries: Arc<DeliveryLog>,
    /// Which connection this is (0 for the first, +1 per reconnect).
    pub generation: u64,
}

impl Session {
    /// Connects and runs the `initialize` handshake, each step bounded by the config's
    /// timeout. `extra_headers` come from the header injector for the connecting context.
    pub async fn connect(
        server: &str,
        config: &ConnectionConfig,
        handler: Handler,
        extra_headers: &[(String, String)],
        generation: u64,
    ) -> Result<Session, McpError> {
        let limit = config.timeout;
        let deliveries = Arc::new(DeliveryLog::default());
        match &config.transport {
            TransportConfig::Stdio {
                command, args, cwd, ..
            } => {
                let env = config.env_policy().unwrap_or_default();
                let (child, transport) = stdio::spawn(
                    server,
                    command,
                    args,
                    &env,
                    cwd.as_ref(),
                    deliveries.clone(),
                )?;
                let diagnostics = child.diagnostics();
                let transport = ProgressTap::new(transport, handler.progress_routes());
                let started = tokio::time::timeout(limit, handler.serve(transport)).await;
                let service = match started {
                    Ok(Ok(service)) => service,
                    Ok(Err(err)) => {
                        let error = init_error(server, err, Some(&diagnostics));
                        close_child(&child).await;
                        return Err(error);
                    }
                    Err(_) => {
                        close_child(&child).await;
                        let mut error = McpError::timeout(server, Step::Initialize, limit);
                        append_stderr(&mut error, Some(&diagnostics));
                        return Err(error);
                    }
                };
                Ok(Self::from_service(
                    service,
                    Some(child),
                    Some(diagnostics),
                    deliveries,
                    generation,
                ))
            }
            TransportConfig::Sse { url, headers } => {
                let headers = merged_headers(server, headers, extra_headers)?;
                let client = http_client(server)?;
                let connect = sse::connect(server, client, url, headers, deliveries.clone());
                let transport = tokio::time::timeout(limit, connect)
                    .await
                    .map_err(|_| McpError::timeout(server, Step::Connect, limit))??;
                Self::start_http(server, handler, transport, limit, deliveries, generation).await
            }
            TransportConfig::StreamableHttp { url, headers } => {
                let headers = merged_headers(server, headers, extra_headers)?;
                let client = InjectingClient::new(http_client(server)?, deliveries.clone())
                    .with_oauth(url, config.oauth.as_ref());
                let transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(
                        headers
                            .into_iter()
                            .filter_map(|(k, v)| Some((k?, v)))
                            .collect(),
                    )
                    // Session loss is handled by the tool set's reconnect policy, the same way
                    // for every transport.
                    .reinit_on_expired_session(false);
                let transport =
                    StreamableHttpClientTransport::with_client(client, transport_config);
                Self::start_http(server, handler, transport, limit, deliveries, generation).await
            }
        }
    }

    /// Runs the handshake over an HTTP transport (SSE or streamable HTTP), within `limit`.
    async fn start_http<T>(
        server: &str,
        handler: Handler,
        transport: T,
        limit: Duration,
        deliveries: Arc<DeliveryLog>,
        generation: u64,
    ) -> Result<Session, McpError>
    where
        T: rmcp::transport::Transport<RoleClient> + 'static,
    {
        let routes = handler.progress_routes();
        let service =
            tokio::time::timeout(limit, handler.serve(ProgressTap::new(transport, routes)))
                .await
                .map_err(|_| McpError::timeout(server, Step::Initialize, limit))?
                .map_err(|err| init_error(server, err, None))?;
        Ok(Self::from_service(
            service, None, None, deliveries, generation,
        ))
    }

    fn from_service(
        service: RunningService<RoleClient, Handler>,
        child: Option<ChildProcess>,
        diagnostics: Option<SharedDiagnostics>,
        deliveries: Arc<DeliveryLog>,
        generation: u64,
    ) -> Self {
        let peer = service.peer().clone();
        Self {
            service: Mutex::new(Some(service)),
            peer,
            child,
            diagnostics,
            deliveries,
            generation,
        }
    }

    /// A ticket recording whether one request reaches the server (see
    /// [`crate::transport::delivery`]).
    pub fn ticket(&self) -> Ticket {
        self.deliveries.ticket()
    }

    /// The handle for sending requests.
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// The stdio child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(ChildProcess::pid)
    }

    /// A protocol error the stdio transport recorded (garbage on stdout), if any.
    pub fn protocol_error(&self) -> Option<String> {
        let diagnostics = self.diagnostics.as_ref()?;
        let diag = diagnostics.lock().unwrap_or_else(|e| e.into_inner());
        diag.protocol_error.clone()
    }

    /// Adds the stdio server's recent stderr to an error about this session.
    pub fn annotate(&self, error: &mut McpError) {
        append_stderr(error, self.diagnostics.as_ref());
    }

    /// Ends the session: stops the protocol (for streamable HTTP this DELETEs the session;
    /// for stdio it closes stdin), then terminates and reaps a child.
    pub async fn close(&self) {
        if let Some(mut service) = self.service.lock().await.take()
            && tokio::time::timeout(CLOSE_TIMEOUT, service.close())
                .await
                .is_err()
        {
            tracing::warn!("closing the MCP session took too long; dropping it");
        }
        if let Some(child) = &self.child {
            close_child(child).await;
        }
    }
}

async fn close_child(child: &ChildProcess) {
    if let Err(err) = child.terminate().await {
        tracing::warn!("could not terminate the MCP server process: {err}");
    }
}

fn append_stderr(error: &mut McpError, diagnostics: Option<&SharedDiagnostics>) {
    let Some(diagnostics) = diagnostics else {
        return;
    };
    let diag = diagnostics.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tail) = diag.stderr_summary() {
        error
            .message
            .push_str("; the server's last stderr lines:\n");
        error.message.push_str(&tail);
    }
}

/// Turns a failed handshake into an error naming the server, preferring what the stdio
/// transport saw (garbage on stdout, the child's stderr) over rmcp's generic message.
fn init_error(
    server: &str,
    err: ClientInitializeError,
    diagnostics: Option<&SharedDiagnostics>,
) -> McpError {
    if let Some(diagnostics) = diagnostics {
        let protocol_error = {
            let diag = diagnostics.lock().unwrap_or_else(|e| e.into_inner());
            diag.protocol_error.clone()
        };
        if let Some(message) = protocol_error {
            return McpError::new(server, Step::Initialize, FailureKind::Protocol, message);
        }
    }
    let (kind, message) = match &err {
        ClientInitializeError::ConnectionClosed(_) => (
            FailureKind::Connection,
            "the server closed the connection during the handshake".to_string(),
        ),
        ClientInitializeError::TransportError { error, .. } => describe_transport_error(error),
        ClientInitializeError::JsonRpcError(data) => (
            FailureKind::Server,
            format!("the server refused initialize: {}", data.message),
        ),
        ClientInitializeError::Cancelled => (FailureKind::Cancelled, err.to_string()),
        other => (FailureKind::Protocol, other.to_string()),
    };
    let mut error = McpError::new(server, Step::Initialize, kind, message).with_source(err);
    append_stderr(&mut error, diagnostics);
    error
}

fn merged_headers(
    server: &str,
    headers: &std::collections::BTreeMap<String, String>,
    extra: &[(String, String)],
) -> Result<HeaderMap, McpError> {
    let config_error =
        |message: String| McpError::new(server, Step::Connect, FailureKind::Configuration, message);
    let mut map = header_map(headers).map_err(config_error)?;
    for (name, value) in extra {
        let (name, value) = parse_header(name, value).map_err(config_error)?;
        map.insert(name, value);
    }
    Ok(map)
}

fn http_client(server: &str) -> Result<reqwest::Client, McpError> {
    reqwest::Client::builder().build().map_err(|err| {
        McpError::new(
            server,
            Step::Connect,
            FailureKind::Configuration,
            format!("could not build an HTTP client: {err}"),
        )
    })
}
