//! A real OAuth 2.1 authorization server and a protected MCP server on 127.0.0.1, for the
//! OAuth tests.
//!
//! - The authorization server (axum) publishes RFC 8414 metadata, registers clients
//!   (RFC 7591; one client is pre-registered), approves every authorization request at
//!   once by redirecting with a code (so a client can follow it without a browser), and
//!   exchanges codes (checking PKCE S256, the client and the redirect URI) and refresh
//!   tokens.
//! - The resource server (axum) publishes RFC 9728 metadata, answers a request without a
//!   valid token with 401 and a `WWW-Authenticate` challenge, a call of `admin_echo` with a
//!   token lacking `mcp:admin` with 403 `insufficient_scope`, and forwards the rest to a
//!   real MCP server of this crate (`toolbelt_mcp::server`) serving `echo` and `admin_echo`.
//!
//! Everything the client did is recorded in [`Log`] for the tests to check.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Form, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolbelt_core::schemars::{self, JsonSchema};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_exec::{Executor, Registry};
use toolbelt_mcp::server::{CancellationToken, HttpServeOptions, HttpServer, ToolServer};

/// The client registered ahead of time, and its secret.
pub const PRE_CLIENT_ID: &str = "pre-registered-client";
pub const PRE_CLIENT_SECRET: &str = "pre-registered-secret";
/// The scope every call needs, and the one `admin_echo` needs besides.
pub const READ_SCOPE: &str = "mcp:read";
pub const ADMIN_SCOPE: &str = "mcp:admin";

/// How the authorization server misbehaves, for the attack tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Twist {
    #[default]
    None,
    /// The metadata names another issuer than the server it is served by.
    WrongIssuer,
    /// The redirect carries another `state` than the request's.
    WrongState,
    /// The server accepts client ID metadata documents (any https client id).
    MetadataDocuments,
}

/// What the client did, in order.
#[derive(Debug, Default, Clone)]
pub struct Log {
    /// One entry per request: "prm", "as-metadata", "register", "authorize",
    /// "token:authorization_code", "token:refresh_token", "mcp:401", "mcp:403", "mcp".
    pub events: Vec<String>,
    /// The query of each authorization request.
    pub authorizations: Vec<HashMap<String, String>>,
    /// The form of each token request, secrets removed.
    pub token_requests: Vec<HashMap<String, String>>,
    /// The bearer tokens the MCP server saw.
    pub bearers: Vec<String>,
}

impl Log {
    pub fn count(&self, event: &str) -> usize {
        self.events.iter().filter(|e| *e == event).count()
    }
}

struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    scopes: Vec<String>,
    resource: Option<String>,
}

#[derive(Default)]
struct Inner {
    log: Log,
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Grant>,
    /// Access token → scopes.
    access: HashMap<String, Vec<String>>,
    /// Refresh token → (client, scopes).
    refresh: HashMap<String, (String, Vec<String>)>,
    next: u64,
}

/// The two servers; dropped, they stop.
pub struct OAuthWorld {
    pub issuer: String,
    pub mcp_url: String,
    state: Arc<Mutex<Inner>>,
    stop: CancellationToken,
}

impl Drop for OAuthWorld {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl OAuthWorld {
    /// A copy of what happened so far.
    pub fn log(&self) -> Log {
        self.state.lock().unwrap().log.clone()
    }

    /// Invalidates every access token issued so far (refresh tokens stay valid), as an
    /// expiry would.
    pub fn expire_access_tokens(&self) {
        self.state.lock().unwrap().access.clear();
    }

    /// Starts both servers and the MCP server behind them.
    pub async fn start(twist: Twist) -> Self {
        let stop = CancellationToken::new();
        let backend = start_backend(stop.clone()).await;
        let as_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let rs_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!(
            "http://127.0.0.1:{}",
            as_listener.local_addr().unwrap().port()
        );
        let rs_base = format!(
            "http://127.0.0.1:{}",
            rs_listener.local_addr().unwrap().port()
        );
        let state = Arc::new(Mutex::new(Inner::default()));
        state
            .lock()
            .unwrap()
            .clients
            .insert(PRE_CLIENT_ID.into(), vec![]);

        let auth = AuthServer {
            issuer: issuer.clone(),
            twist,
            state: state.clone(),
        };
        let as_app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(as_metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(auth);
        let resource = ResourceServer {
            issuer: issuer.clone(),
            base: rs_base.clone(),
            backend,
            http: reqwest::Client::new(),
            state: state.clone(),
        };
        let rs_app = Router::new()
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(rs_metadata),
            )
            .route("/mcp", any(mcp))
            .with_state(resource);
        for (listener, app) in [(as_listener, as_app), (rs_listener, rs_app)] {
            let stop = stop.clone();
            tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move { stop.cancelled().await })
                    .await
                    .unwrap();
            });
        }
        Self {
            issuer,
            mcp_url: format!("{rs_base}/mcp"),
            state,
            stop,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "schemars")]
struct EchoArgs {
    /// What to say back.
    text: String,
}

async fn echo(_ctx: ToolContext, args: EchoArgs) -> Result<String, ToolError> {
    Ok(args.text)
}

/// The real MCP server behind the resource server; its URL.
async fn start_backend(stop: CancellationToken) -> String {
    let registry = Registry::new();
    registry
        .register(FunctionTool::new("echo", "Says the text back", echo).unwrap())
        .unwrap();
    registry
        .register(FunctionTool::new("admin_echo", "Says the text back, for admins", echo).unwrap())
        .unwrap();
    let server = ToolServer::new(Arc::new(Executor::new(Arc::new(registry))));
    let http = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        server,
        HttpServeOptions::default(),
    )
    .await
    .unwrap();
    let url = http.url().unwrap();
    tokio::spawn(http.run(stop));
    url
}

#[derive(Clone)]
struct AuthServer {
    issuer: String,
    twist: Twist,
    state: Arc<Mutex<Inner>>,
}

async fn as_metadata(State(auth): State<AuthServer>) -> Response {
    auth.state
        .lock()
        .unwrap()
        .log
        .events
        .push("as-metadata".into());
    let issuer = match auth.twist {
        Twist::WrongIssuer => "https://attacker.example".to_string(),
        _ => auth.issuer.clone(),
    };
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{}/authorize", auth.issuer),
        "token_endpoint": format!("{}/token", auth.issuer),
        "registration_endpoint": format!("{}/register", auth.issuer),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "scopes_supported": [READ_SCOPE, ADMIN_SCOPE],
        "client_id_metadata_document_supported": auth.twist == Twist::MetadataDocuments,
    }))
    .into_response()
}

async fn register(State(auth): State<AuthServer>, axum::Json(body): axum::Json<Value>) -> Response {
    let mut state = auth.state.lock().unwrap();
    state.log.events.push("register".into());
    state.next += 1;
    let client_id = format!("dynamic-client-{}", state.next);
    let redirect_uris: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|uris| {
            uris.iter()
                .filter_map(|u| u.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    state
        .clients
        .insert(client_id.clone(), redirect_uris.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": client_id,
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response()
}

async fn authorize(
    State(auth): State<AuthServer>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mut state = auth.state.lock().unwrap();
    state.log.events.push("authorize".into());
    state.log.authorizations.push(query.clone());
    let param = |name: &str| query.get(name).cloned().unwrap_or_default();
    let client_id = param("client_id");
    let redirect_uri = param("redirect_uri");
    let known = match state.clients.get(&client_id) {
        // The pre-registered client may use any loopback redirect (RFC 8252 §7.3).
        Some(uris) if client_id == PRE_CLIENT_ID => {
            uris.is_empty() && redirect_uri.starts_with("http://127.0.0.1:")
        }
        Some(uris) => uris.contains(&redirect_uri),
        None if auth.twist == Twist::MetadataDocuments && client_id.starts_with("https://") => {
            redirect_uri.starts_with("http://127.0.0.1:")
        }
        None => false,
    };
    if !known || param("response_type") != "code" || param("code_challenge_method") != "S256" {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    }
    state.next += 1;
    let code = format!("code-{}", state.next);
    state.codes.insert(
        code.clone(),
        Grant {
            client_id,
            redirect_uri: redirect_uri.clone(),
            challenge: param("code_challenge"),
            scopes: param("scope")
                .split_whitespace()
                .map(String::from)
                .collect(),
            resource: query.get("resource").cloned(),
        },
    );
    let returned_state = match auth.twist {
        Twist::WrongState => "forged-state".to_string(),
        _ => param("state"),
    };
    let mut target = url::Url::parse(&redirect_uri).unwrap();
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &returned_state);
    Redirect::to(target.as_str()).into_response()
}

fn s256(verifier: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn basic_client(headers: &HeaderMap) -> Option<(String, String)> {
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value.strip_prefix("Basic ")?)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((id.to_string(), secret.to_string()))
}

fn token_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
}

async fn token(
    State(auth): State<AuthServer>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut state = auth.state.lock().unwrap();
    let grant_type = form.get("grant_type").cloned().unwrap_or_default();
    state.log.events.push(format!("token:{grant_type}"));
    let mut logged = form.clone();
    logged.remove("client_secret");
    state.log.token_requests.push(logged);
    let (client_id, secret) = match basic_client(&headers) {
        Some((id, secret)) => (id, Some(secret)),
        None => (
            form.get("client_id").cloned().unwrap_or_default(),
            form.get("client_secret").cloned(),
        ),
    };
    if client_id == PRE_CLIENT_ID && secret.as_deref() != Some(PRE_CLIENT_SECRET) {
        return token_error("invalid_client");
    }
    let scopes = match grant_type.as_str() {
        "authorization_code" => {
            let Some(grant) = form.get("code").and_then(|c| state.codes.remove(c)) else {
                return token_error("invalid_grant");
            };
            let verifier = form.get("code_verifier").cloned().unwrap_or_default();
            if grant.client_id != client_id
                || form.get("redirect_uri") != Some(&grant.redirect_uri)
                || s256(&verifier) != grant.challenge
            {
                return token_error("invalid_grant");
            }
            let _ = grant.resource;
            grant.scopes
        }
        "client_credentials" => {
            if client_id != PRE_CLIENT_ID {
                return token_error("unauthorized_client");
            }
            form.get("scope")
                .map(|s| s.split_whitespace().map(String::from).collect())
                .unwrap_or_default()
        }
        "refresh_token" => {
            match form
                .get("refresh_token")
                .and_then(|r| state.refresh.get(r))
                .cloned()
            {
                Some((owner, scopes)) if owner == client_id => scopes,
                _ => return token_error("invalid_grant"),
            }
        }
        _ => return token_error("unsupported_grant_type"),
    };
    state.next += 1;
    let access = format!("access-{}", state.next);
    let refresh = format!("refresh-{}", state.next);
    state.access.insert(access.clone(), scopes.clone());
    state
        .refresh
        .insert(refresh.clone(), (client_id, scopes.clone()));
    axum::Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": 3600,
        "refresh_token": refresh,
        "scope": scopes.join(" "),
    }))
    .into_response()
}

#[derive(Clone)]
struct ResourceServer {
    issuer: String,
    base: String,
    backend: String,
    http: reqwest::Client,
    state: Arc<Mutex<Inner>>,
}

async fn rs_metadata(State(rs): State<ResourceServer>) -> Response {
    rs.state.lock().unwrap().log.events.push("prm".into());
    axum::Json(json!({
        "resource": format!("{}/mcp", rs.base),
        "authorization_servers": [rs.issuer],
        "scopes_supported": [READ_SCOPE],
    }))
    .into_response()
}

fn challenge(rs: &ResourceServer, status: StatusCode, extra: &str) -> Response {
    let value = format!(
        r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp"{extra}"#,
        rs.base
    );
    let mut response = (status, "").into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(&value).unwrap(),
    );
    response
}

async fn mcp(State(rs): State<ResourceServer>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let bearer = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(String::from);
    let scopes = {
        let mut state = rs.state.lock().unwrap();
        if let Some(bearer) = &bearer {
            state.log.bearers.push(bearer.clone());
        }
        bearer.as_ref().and_then(|b| state.access.get(b).cloned())
    };
    let Some(scopes) = scopes.filter(|s| s.iter().any(|s| s == READ_SCOPE)) else {
        rs.state.lock().unwrap().log.events.push("mcp:401".into());
        let extra = match &bearer {
            Some(_) => format!(r#", error="invalid_token", scope="{READ_SCOPE}""#),
            None => format!(r#", scope="{READ_SCOPE}""#),
        };
        return challenge(&rs, StatusCode::UNAUTHORIZED, &extra);
    };
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if message["method"] == "tools/call"
        && message["params"]["name"] == "admin_echo"
        && !scopes.iter().any(|s| s == ADMIN_SCOPE)
    {
        rs.state.lock().unwrap().log.events.push("mcp:403".into());
        let extra = format!(r#", error="insufficient_scope", scope="{READ_SCOPE} {ADMIN_SCOPE}""#);
        return challenge(&rs, StatusCode::FORBIDDEN, &extra);
    }
    rs.state.lock().unwrap().log.events.push("mcp".into());
    forward(&rs, parts, body).await
}

/// Sends the request on to the real MCP server and streams its answer back.
async fn forward(
    rs: &ResourceServer,
    parts: axum::http::request::Parts,
    body: bytes::Bytes,
) -> Response {
    let mut request = rs
        .http
        .request(parts.method.clone(), &rs.backend)
        .body(body);
    for name in [
        "accept",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    ] {
        if let Some(value) = parts.headers.get(name) {
            request = request.header(name, value);
        }
    }
    let Ok(upstream) = request.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut response = Response::builder().status(upstream.status().as_u16());
    for name in ["content-type", "mcp-session-id", "mcp-protocol-version"] {
        if let Some(value) = upstream.headers().get(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap()
}
