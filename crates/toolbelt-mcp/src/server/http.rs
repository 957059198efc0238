//! Serving over streamable HTTP, mounted in axum at `/mcp`, with sessions, a bearer token,
//! Host and Origin checks (DNS-rebinding protection) and a graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::ToolServer;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// Options of the HTTP server.
#[derive(Debug, Clone, Default)]
pub struct HttpServeOptions {
    /// When set, every request must carry `Authorization: Bearer <token>` (else 401).
    pub token: Option<String>,
    /// Browser origins allowed to call the server (`http://localhost:*` style). Requests with
    /// an `Origin` header not in the list are refused; requests without one (non-browser
    /// clients) pass. Empty means the loopback origins only.
    pub allowed_origins: Vec<String>,
    /// Extra `Host` values to accept besides the loopback names and the bound address.
    pub allowed_hosts: Vec<String>,
}

/// The loopback origins allowed when none are configured.
const LOOPBACK_ORIGINS: &[&str] = &["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// A bound, not yet running, MCP HTTP server.
pub struct HttpServer {
    listener: TcpListener,
    router: Router,
    stop: CancellationToken,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("local_addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `addr` (use port 0 for any free port) and prepares the routes.
    pub async fn bind(
        addr: SocketAddr,
        server: ToolServer,
        options: HttpServeOptions,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let stop = CancellationToken::new();

        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        hosts.push(bound.ip().to_string());
        hosts.extend(options.allowed_hosts.iter().cloned());
        let origins: Vec<String> = if options.allowed_origins.is_empty() {
            LOOPBACK_ORIGINS.iter().map(|o| o.to_string()).collect()
        } else {
            options.allowed_origins.clone()
        };
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_cancellation_token(stop.child_token());
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let mut router = Router::new().nest_service(MCP_PATH, service);
        if let Some(token) = options.token {
            let expected = Arc::new(format!("Bearer {token}"));
            router = router.layer(middleware::from_fn(move |request: Request, next: Next| {
                let expected = expected.clone();
                async move { require_bearer(&expected, request, next).await }
            }));
        }
        Ok(Self {
            listener,
            router,
            stop,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The URL of the MCP endpoint.
    pub fn url(&self) -> std::io::Result<String> {
        Ok(format!("http://{}{MCP_PATH}", self.local_addr()?))
    }

    /// Serves until `shutdown` is cancelled, then ends every session and returns once the
    /// connections have closed.
    pub async fn run(self, shutdown: CancellationToken) -> std::io::Result<()> {
        let stop = self.stop.clone();
        let graceful = async move {
            shutdown.cancelled().await;
            // Ends open SSE streams so the graceful shutdown does not wait on them forever.
            stop.cancel();
        };
        // Without TCP_NODELAY the small writes of an SSE response wait for the client's
        // delayed ACK (about 40 ms per call).
        let listener = self.listener.tap_io(|tcp| {
            if let Err(err) = tcp.set_nodelay(true) {
                tracing::debug!("could not set TCP_NODELAY: {err}");
            }
        });
        axum::serve(listener, self.router)
            .with_graceful_shutdown(graceful)
            .await
    }
}

/// Refuses requests without the expected `Authorization` header (compared in constant time).
async fn require_bearer(expected: &str, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if constant_time_eq(given.as_bytes(), expected.as_bytes()) {
        return next.run(request).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, "missing or wrong bearer token").into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
