//! Who may use the web UI. The page can start runs whose tools include Bash, so it follows
//! the rules of `serve --http`: a token unless told otherwise on loopback, no start on an
//! address other machines can reach without one.
//!
//! A browser cannot put a bearer token on a page load, so the token also travels as Jupyter's
//! does: the printed URL carries `?token=…` once, the page answers with an `HttpOnly`,
//! `SameSite=Strict` cookie and a redirect that drops the token from the address bar. Every
//! request (page, assets, API, event stream) must then carry the cookie or
//! `Authorization: Bearer TOKEN`, compared in constant time.
//!
//! Two checks apply with or without a token, because a loopback server is still reachable
//! from any page the user's browser opens: the `Host` header must name this server (a
//! DNS-rebinding page arrives with its own host name), and a request carrying an `Origin`
//! must come from this server's own origin (a cross-site `POST` never starts a run).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::common::CliError;

/// The environment variable read for the token when `--token` is not given (a token on the
/// command line is visible to other users in the process list).
pub const TOKEN_ENV: &str = "TOOLBELT_UI_TOKEN";

/// How requests are authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Access {
    /// The token the user gave.
    Given(String),
    /// A random token made for this run (printed on stderr inside the URL).
    Generated(String),
    /// `--no-auth` on loopback.
    Open,
}

impl Access {
    fn token(&self) -> Option<&str> {
        match self {
            Access::Given(token) | Access::Generated(token) => Some(token),
            Access::Open => None,
        }
    }
}

/// The access rule for serving on `addr`: the given token (flag, else `env_token`), else a
/// generated one on loopback, or none with `no_auth` on loopback; an address other machines
/// can reach without a token is a usage error (exit 2).
pub(crate) fn resolve(
    addr: SocketAddr,
    flag_token: Option<String>,
    env_token: Option<String>,
    no_auth: bool,
) -> Result<Access, CliError> {
    let given = flag_token
        .filter(|t| !t.is_empty())
        .or(env_token.filter(|t| !t.is_empty()));
    let loopback = addr.ip().to_canonical().is_loopback();
    match (given, no_auth) {
        (Some(_), true) => Err(CliError::usage(format!(
            "--no-auth contradicts the token in {TOKEN_ENV}; unset it or leave out --no-auth"
        ))),
        (Some(token), false) => Ok(Access::Given(token)),
        (None, true) if loopback => Ok(Access::Open),
        (None, true) => Err(CliError::usage(format!(
            "--no-auth is allowed on a loopback address only, and {addr} is reachable from \
             other machines; give a token with --token or {TOKEN_ENV}"
        ))),
        (None, false) if loopback => Ok(Access::Generated(random_token()?)),
        (None, false) => Err(CliError::usage(format!(
            "refusing to serve the web UI on {addr} without a token: other machines could \
             start runs (Bash included); give one with --token or {TOKEN_ENV}, or bind 127.0.0.1"
        ))),
    }
}

/// 32 random bytes from the operating system, in hex.
fn random_token() -> Result<String, CliError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| CliError::failed(format!("cannot generate a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What the guard checks every request against.
#[derive(Debug)]
pub(crate) struct Guard {
    access: Access,
    /// `Host` values accepted (lower case, with the port).
    hosts: Vec<String>,
    /// The cookie carrying the token; named after the port, since browsers share cookies
    /// between the ports of one host.
    cookie: String,
}

impl Guard {
    /// The guard of a server bound to `bound`, accepting also `extra_hosts` (`--allow-host`).
    pub(crate) fn new(access: Access, bound: SocketAddr, extra_hosts: &[String]) -> Self {
        let port = bound.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            bound.to_string(),
        ];
        for host in extra_hosts {
            let host = host.trim().to_ascii_lowercase();
            if host.contains(':') && !host.ends_with(']') {
                hosts.push(host);
            } else {
                hosts.push(format!("{host}:{port}"));
            }
        }
        Self {
            access,
            hosts,
            cookie: format!("toolbelt_ui_{port}"),
        }
    }

    /// The URL to open: with `?token=` when the token was generated (the user has no other
    /// way to learn it).
    pub(crate) fn url_to_open(&self, base: &str) -> String {
        match &self.access {
            Access::Generated(token) => format!("{base}?token={token}"),
            _ => base.to_string(),
        }
    }

    /// Whether the server prints its URL with a generated token.
    pub(crate) fn generated(&self) -> bool {
        matches!(self.access, Access::Generated(_))
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let host = host.trim().to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let (Ok(origin), Some(host)) = (
            origin.to_str(),
            headers.get(header::HOST).and_then(|h| h.to_str().ok()),
        ) else {
            return false;
        };
        origin.eq_ignore_ascii_case(&format!("http://{}", host.trim()))
    }

    fn presented<'h>(&self, headers: &'h HeaderMap) -> Vec<&'h str> {
        let mut presented = Vec::new();
        if let Some(bearer) = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
        {
            presented.push(bearer.trim());
        }
        for cookies in headers.get_all(header::COOKIE) {
            let Ok(cookies) = cookies.to_str() else {
                continue;
            };
            for pair in cookies.split(';') {
                if let Some((name, value)) = pair.trim().split_once('=')
                    && name == self.cookie
                {
                    presented.push(value);
                }
            }
        }
        presented
    }
}

/// Constant-time equality (a length difference is not hidden; the token's length is public).
fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// The axum middleware: host and origin checks, then the token.
pub(crate) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if !guard.host_allowed(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this Host is not allowed (DNS-rebinding protection; --allow-host adds one)",
        );
    }
    if !guard.origin_allowed(headers) {
        return refuse(StatusCode::FORBIDDEN, "cross-origin requests are refused");
    }
    let Some(token) = guard.access.token() else {
        return next.run(request).await;
    };
    if guard.presented(headers).iter().any(|p| same(p, token)) {
        return next.run(request).await;
    }
    // The printed URL: trade the token in the query for the cookie, then drop it from the
    // address bar (and from the history and any Referer).
    if request.method() == axum::http::Method::GET
        && request.uri().path() == "/"
        && let Some(query) = request.uri().query()
        && query
            .split('&')
            .filter_map(|pair| pair.strip_prefix("token="))
            .any(|given| same(given, token))
    {
        let cookie = format!(
            "{}={token}; Path=/; HttpOnly; SameSite=Strict",
            guard.cookie
        );
        let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return response;
    }
    refuse(
        StatusCode::UNAUTHORIZED,
        "the web UI needs its token: open the URL toolbelt printed (…/?token=…) or send \
         Authorization: Bearer TOKEN",
    )
}

fn refuse(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_without_a_token_generates_one_and_other_addresses_refuse() {
        let loopback: SocketAddr = "127.0.0.1:8810".parse().unwrap();
        let anywhere: SocketAddr = "0.0.0.0:8810".parse().unwrap();
        assert!(matches!(
            resolve(loopback, None, None, false).unwrap(),
            Access::Generated(t) if t.len() == 64
        ));
        assert_eq!(resolve(loopback, None, None, true).unwrap(), Access::Open);
        assert_eq!(resolve(anywhere, None, None, false).unwrap_err().code, 2);
        assert_eq!(resolve(anywhere, None, None, true).unwrap_err().code, 2);
        assert_eq!(
            resolve(anywhere, None, Some("e".into()), false).unwrap(),
            Access::Given("e".into())
        );
        assert_eq!(
            resolve(anywhere, Some("f".into()), Some("e".into()), false).unwrap(),
            Access::Given("f".into())
        );
        assert_eq!(
            resolve(loopback, Some("f".into()), None, true)
                .unwrap_err()
                .code,
            2
        );
    }
}
