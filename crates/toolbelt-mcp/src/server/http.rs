//! Serving over streamable HTTP, mounted in axum at `/mcp`, with sessions that expire and are
//! capped, a bearer token, Host and Origin checks (DNS-rebinding protection), JSON-RPC errors
//! for malformed requests and a graceful shutdown.
//!
//! Safe by default: [`HttpServer::bind`] refuses an address other machines can reach unless a
//! token is set. The layers, outermost first: the bearer token (nothing else runs for a
//! caller without it), JSON-RPC errors for malformed bodies, the session cap, then rmcp's
//! service (Host, Origin, the protocol).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::{
    SessionId, StreamableHttpServerConfig, StreamableHttpService,
};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::ToolServer;
use super::bus::SessionBus;
use super::malformed::{self, MAX_BODY_BYTES, SERVER_BUSY, json_rpc_error};
use super::sessions::{BoundedSessions, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT};
use super::shared::{RecordStore, SharedSessionStore};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// Options of the HTTP server.
#[derive(Debug, Clone)]
pub struct HttpServeOptions {
    /// When set, every request must carry `Authorization: Bearer <token>` (else 401). Required
    /// to bind an address that is not loopback.
    pub token: Option<String>,
    /// Browser origins allowed to call the server (`http://localhost:*` style). Requests with
    /// an `Origin` header not in the list are refused; requests without one (non-browser
    /// clients) pass. Empty means the loopback origins only.
    pub allowed_origins: Vec<String>,
    /// Extra `Host` values to accept besides the loopback names and the bound address.
    pub allowed_hosts: Vec<String>,
    /// A session with no request, response or open stream for this long is closed (default
    /// 30 minutes); its client gets 404 next time and starts a new session.
    pub session_idle_timeout: Duration,
    /// The most sessions open at once (default 1,000). A new session over the cap replaces
    /// the one idle the longest; when every session is busy it is refused with HTTP 503.
    pub max_sessions: usize,
    /// Where session records are shared with the other replicas of this server, so that a
    /// session opened on one is accepted by all (see [`SharedSessionStore`]); the idle
    /// timeout is the records' time to live. `None`: sessions are this process's only.
    pub shared_sessions: Option<Arc<dyn SharedSessionStore>>,
}

impl Default for HttpServeOptions {
    fn default() -> Self {
        Self {
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            shared_sessions: None,
        }
    }
}

/// The loopback origins allowed when none are configured.
/// How long a shutdown waits for open connections to finish. A client that stopped reading
/// its `GET` stream keeps its connection's last write pending forever, and waiting for it
/// would keep `serve` from ever exiting.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

const LOOPBACK_ORIGINS: &[&str] = &["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Whether only this machine can connect to `ip` (`127.0.0.0/8`, `::1`, or `::ffff:127.x`).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// A bound, not yet running, MCP HTTP server.
pub struct HttpServer {
    listener: TcpListener,
    router: Router,
    sessions: Arc<BoundedSessions>,
    /// Messages between the replicas, when sessions are shared.
    bus: Option<Arc<SessionBus>>,
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
    ///
    /// An address other machines can reach (anything but loopback, `0.0.0.0` included) needs
    /// a token: without one this fails with [`std::io::ErrorKind::PermissionDenied`] before
    /// binding, since the tools would be anyone's to call.
    pub async fn bind(
        addr: SocketAddr,
        server: ToolServer,
        options: HttpServeOptions,
    ) -> std::io::Result<Self> {
        let token = options.token.filter(|t| !t.is_empty());
        if token.is_none() && !is_loopback(addr.ip()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{addr} is reachable from other machines; serving it needs a bearer token"),
            ));
        }
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
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts.clone())
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_BODY_BYTES)
            .with_cancellation_token(stop.child_token());
        let mut sessions = BoundedSessions::new(options.session_idle_timeout, options.max_sessions);
        let mut server = server;
        let mut bus = None;
        if let Some(store) = options.shared_sessions {
            // rmcp saves a record after each handshake, restores unknown sessions from the
            // store and deletes the record on DELETE; ours renews it on every request.
            config.session_store = Some(Arc::new(RecordStore {
                store: store.clone(),
                ttl: options.session_idle_timeout,
            }));
            let shared = SessionBus::new(store.clone());
            sessions = sessions.with_shared(shared.clone());
            server = server.with_bus(shared.clone());
            bus = Some(shared);
        }
        if let Some(closed) = server.session_closed() {
            sessions = sessions.on_close(closed);
        }
        let sessions = Arc::new(sessions);
        if let Some(bus) = &bus {
            bus.serve_sessions(&sessions);
        }
        let service =
            StreamableHttpService::new(move || Ok(server.for_session()), sessions.clone(), config);
        let admission = sessions.clone();
        let ending = sessions.clone();
        let mut router = Router::new()
            .nest_service(MCP_PATH, service)
            .layer(middleware::from_fn(move |request: Request, next: Next| {
                let sessions = ending.clone();
                async move { end_session(&sessions, request, next).await }
            }))
            .layer(middleware::from_fn(move |request: Request, next: Next| {
                let sessions = admission.clone();
                async move { admit_new_session(&sessions, request, next).await }
            }))
            .layer(middleware::from_fn(malformed::json_rpc_errors));
        if let Some(token) = token {
            let names = PublicName {
                hosts: hosts.into(),
                bound,
            };
            let check = Arc::new(BearerCheck {
                expected: format!("Bearer {token}"),
                names: names.clone(),
            });
            router = router
                .layer(middleware::from_fn(move |request: Request, next: Next| {
                    let check = check.clone();
                    async move { require_bearer(&check, request, next).await }
                }))
                // Public, as RFC 9728 has it: added after the token's layer, so outside it.
                .route(
                    RESOURCE_METADATA_PATH,
                    axum::routing::get(move |request: Request| {
                        let names = names.clone();
                        async move { resource_metadata(&names, &request) }
                    }),
                );
        }
        Ok(Self {
            listener,
            router,
            sessions,
            bus,
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
    /// connections have closed, or after a few seconds with the connections of clients that
    /// do not read still open.
    pub async fn run(self, shutdown: CancellationToken) -> std::io::Result<()> {
        let stop = self.stop.clone();
        let drain_started = shutdown.clone();
        let expiry = tokio::spawn(self.sessions.clone().expire_until(stop.clone()));
        let listening = self
            .bus
            .clone()
            .map(|bus| tokio::spawn(bus.listen(stop.clone())));
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
        let serving = axum::serve(listener, self.router).with_graceful_shutdown(graceful);
        let served = tokio::select! {
            served = serving => served,
            () = async {
                drain_started.cancelled().await;
                tokio::time::sleep(DRAIN_LIMIT).await;
            } => {
                tracing::warn!("connections still open {DRAIN_LIMIT:?} after shutdown; leaving them");
                Ok(())
            }
        };
        self.stop.cancel();
        let _ = expiry.await;
        if let Some(listening) = listening {
            let _ = listening.await;
        }
        served
    }
}

/// Refuses a new session (a POST without `Mcp-Session-Id`) with HTTP 503 and a JSON-RPC
/// error when the cap is reached and no session is idle.
async fn admit_new_session(sessions: &BoundedSessions, request: Request, next: Next) -> Response {
    let opens_session =
        request.method() == Method::POST && !request.headers().contains_key("mcp-session-id");
    if opens_session && !sessions.admits_new() {
        return json_rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            SERVER_BUSY,
            serde_json::Value::Null,
            &format!(
                "{} MCP sessions are open and all are busy, the most this server allows; try again later",
                sessions.max()
            ),
        );
    }
    next.run(request).await
}

/// A `DELETE` naming a session: 200 when the session existed and is now ended, 404 when no
/// session of that id exists (here, or with shared sessions on any replica), as a `POST`
/// naming it gets. rmcp answers both with 202, which clients read as a failed termination
/// (the Python SDK warns `Session termination failed: 202` on every close). rmcp still
/// checks the request (Host, Origin, protocol version) and ends the session; only its
/// status is replaced.
async fn end_session(sessions: &BoundedSessions, request: Request, next: Next) -> Response {
    let id: Option<SessionId> = (request.method() == Method::DELETE)
        .then(|| request.headers().get("mcp-session-id"))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .map(|id| id.to_owned().into());
    let Some(id) = id else {
        return next.run(request).await;
    };
    // Asked before rmcp closes it: afterwards no session of that id is left either way.
    let known = match sessions.knows(&id).await {
        Ok(known) => known,
        Err(err) => {
            tracing::warn!(session = %id, "cannot tell whether the session to end exists: {err}");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot look up the session: {err}"),
            )
                .into_response();
        }
    };
    let mut response = next.run(request).await;
    if response.status() == StatusCode::ACCEPTED {
        if known {
            *response.status_mut() = StatusCode::OK;
        } else {
            // rmcp's own words for an unknown session.
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    response
}

/// How the server names itself in the URLs it gives clients: by the `Host` the client sent
/// when that is one the server accepts (behind a proxy, the proxy's name), else by the bound
/// address. Always `http://`, the scheme this server speaks.
#[derive(Debug, Clone)]
struct PublicName {
    /// The accepted `Host` values (names or addresses, a port optional), as rmcp checks them.
    hosts: Arc<[String]>,
    bound: SocketAddr,
}

impl PublicName {
    /// `http://host[:port]` for a request with these headers.
    fn origin(&self, headers: &axum::http::HeaderMap) -> String {
        let sent = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<axum::http::uri::Authority>().ok())
            .filter(|sent| self.accepts(sent));
        match sent {
            Some(sent) => format!("http://{sent}"),
            None => format!("http://{}", self.bound),
        }
    }

    fn accepts(&self, sent: &axum::http::uri::Authority) -> bool {
        let name = |authority: &axum::http::uri::Authority| {
            authority
                .host()
                .trim_matches(['[', ']'])
                .to_ascii_lowercase()
        };
        self.hosts.iter().any(|allowed| {
            // A bare IPv6 address (`::1`) is no authority; in brackets it is.
            let allowed = match allowed.parse::<IpAddr>() {
                Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
                _ => allowed.clone(),
            };
            allowed
                .parse::<axum::http::uri::Authority>()
                .is_ok_and(|allowed| {
                    name(&allowed) == name(sent)
                        && allowed
                            .port_u16()
                            .is_none_or(|p| sent.port_u16() == Some(p))
                })
        })
    }
}

/// Where the protected resource metadata (RFC 9728) of the endpoint is served, with a token
/// set: the well-known prefix before [`MCP_PATH`], as RFC 9728 builds it from the resource's
/// URL. Every 401 names it in `WWW-Authenticate` (`resource_metadata`, as the MCP
/// authorization spec has servers do).
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";

/// The bearer token a request must carry, and how to name the metadata in a refusal.
struct BearerCheck {
    /// `Bearer <token>`, the whole `Authorization` header expected.
    expected: String,
    names: PublicName,
}

/// Refuses requests without the expected `Authorization` header (compared in constant time)
/// with 401 and a challenge (RFC 6750): without bearer credentials, only where the resource
/// metadata is; with a wrong token, `error="invalid_token"` and a description too.
async fn require_bearer(check: &BearerCheck, request: Request, next: Next) -> Response {
    let given = request.headers().get(header::AUTHORIZATION);
    let given_bytes = given.map(|v| v.as_bytes()).unwrap_or_default();
    if bool::from(given_bytes.ct_eq(check.expected.as_bytes())) {
        return next.run(request).await;
    }
    let metadata = format!(
        "{}{RESOURCE_METADATA_PATH}",
        check.names.origin(request.headers())
    );
    // RFC 6750 3.1: a request without bearer credentials (none, or another scheme) gets no
    // error code; one with a token that is not the right one gets `invalid_token`.
    let bearer = given_bytes
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"bearer "));
    let (challenge, body) = if bearer {
        (
            format!(
                "Bearer error=\"invalid_token\", error_description=\"the bearer token is not \
                 the one this server was started with\", resource_metadata=\"{metadata}\""
            ),
            "wrong bearer token",
        )
    } else {
        (
            format!("Bearer resource_metadata=\"{metadata}\""),
            "missing bearer token: send `Authorization: Bearer TOKEN`",
        )
    };
    let mut response = (StatusCode::UNAUTHORIZED, body).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// The protected resource metadata (RFC 9728) of the endpoint: the resource's URL and that
/// the token goes in the `Authorization` header. It names no authorization server, since
/// none issues the token: it is given to the server (`--token`) and to its clients by hand.
fn resource_metadata(names: &PublicName, request: &Request) -> Response {
    let document = serde_json::json!({
        "resource": format!("{}{MCP_PATH}", names.origin(request.headers())),
        "bearer_methods_supported": ["header"],
    });
    let mut response = (StatusCode::OK, document.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_given_to_clients_use_an_accepted_host_else_the_bound_address() {
        let names = PublicName {
            hosts: vec![
                "localhost".into(),
                "::1".into(),
                "mcp.example.com:8443".into(),
            ]
            .into(),
            bound: "127.0.0.1:8808".parse().unwrap(),
        };
        let origin = |host: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            names.origin(&headers)
        };
        assert_eq!(origin("localhost:8808"), "http://localhost:8808");
        assert_eq!(origin("[::1]:8808"), "http://[::1]:8808");
        assert_eq!(
            origin("mcp.example.com:8443"),
            "http://mcp.example.com:8443"
        );
        // Not accepted: a foreign name, another port than the one allowed, no Host at all.
        assert_eq!(origin("attacker.example:8808"), "http://127.0.0.1:8808");
        assert_eq!(origin("mcp.example.com:9999"), "http://127.0.0.1:8808");
        assert_eq!(
            names.origin(&axum::http::HeaderMap::new()),
            "http://127.0.0.1:8808"
        );
    }

    #[test]
    fn only_loopback_addresses_count_as_loopback() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "0.0.0.0",
            "::",
            "10.0.0.1",
            "192.168.1.2",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }
}
