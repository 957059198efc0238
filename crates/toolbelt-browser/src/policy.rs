//! Where the browser may go: WebFetch's domain policy and SSRF guard, for every request.
//!
//! The same two checks WebFetch makes (block and allow lists of domains, then the addresses a
//! host resolves to) decide every connection the browser opens. [`NetPolicy::connect`]
//! resolves, checks and connects in one step, so the address that was checked is the address
//! connected to, and a DNS answer that changes between check and use (rebinding) gains nothing.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;
use toolbelt_builtin::web::{AddressPolicy, BlockedHost, DomainPolicy};
use url::Url;

/// How long one connection attempt to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a connection was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denied {
    /// The policy refused the host or every address it resolves to.
    Refused(String),
    /// The host could not be resolved or reached (not a policy decision).
    Unreachable(String),
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(m) | Self::Unreachable(m) => f.write_str(m),
        }
    }
}

/// The domain and address rules every browser request must pass.
#[derive(Debug, Clone, Default)]
pub(crate) struct NetPolicy {
    pub(crate) domains: DomainPolicy,
    pub(crate) addresses: AddressPolicy,
}

impl NetPolicy {
    /// Checks a URL the model asked to open: http(s) only, a host, the domain rules, and
    /// the addresses the host resolves to (so the model gets a clear refusal instead of an
    /// error page from the egress proxy).
    pub(crate) async fn check_url(&self, url: &Url) -> Result<(), String> {
        match url.scheme() {
            "http" | "https" => {}
            other => {
                return Err(format!(
                    "the browser opens only http and https URLs, not {other}:"
                ));
            }
        }
        let host = url.host_str().ok_or_else(|| format!("{url} has no host"))?;
        let port = url.port_or_known_default().unwrap_or(80);
        self.resolve(host, port)
            .await
            .map(|_| ())
            .map_err(|denied| denied.to_string())
    }

    /// The addresses of `host` that the policy allows, or why there are none.
    pub(crate) async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Denied> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        self.domains
            .check(bare)
            .map_err(|refusal| Denied::Refused(refusal.to_string()))?;
        let resolved: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|e| Denied::Unreachable(format!("{bare} could not be resolved: {e}")))?
                .collect(),
        };
        let mut allowed = Vec::new();
        let mut refused = Vec::new();
        for addr in resolved {
            match self.addresses.check(addr.ip()) {
                Ok(()) => allowed.push(addr),
                Err(blocked) => refused.push(blocked),
            }
        }
        if allowed.is_empty() {
            if refused.is_empty() {
                return Err(Denied::Unreachable(format!(
                    "{bare} did not resolve to any address"
                )));
            }
            return Err(Denied::Refused(
                BlockedHost {
                    host: bare.to_string(),
                    addresses: refused,
                }
                .to_string(),
            ));
        }
        Ok(allowed)
    }

    /// Resolves `host`, checks every address, and connects to the first allowed one that
    /// answers.
    pub(crate) async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, Denied> {
        let mut last_error = String::new();
        for addr in self.resolve(host, port).await? {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last_error = format!("connecting to {addr} failed: {e}"),
                Err(_) => last_error = format!("connecting to {addr} timed out"),
            }
        }
        Err(Denied::Unreachable(last_error))
    }
}
