//! The browser's only way out: an HTTP proxy on 127.0.0.1 that checks every connection.
//!
//! A page the model opens is hostile until proven otherwise: its images, scripts, iframes,
//! `fetch` calls, form posts and redirects could aim at `127.0.0.1` or the cloud metadata
//! address. Checking URLs inside the browser (CDP interception) would miss requests made by
//! workers and other frames, and the browser would resolve host names itself after the check.
//! So Chromium is started with this proxy as its proxy server for every host, loopback
//! included (`--proxy-bypass-list=<-loopback>`), and the proxy resolves, checks and connects
//! in one step ([`NetPolicy::connect`]): the check is made where the connection is made.
//!
//! Plain HTTP requests arrive in absolute form and are forwarded one per connection
//! (`Connection: close`), so a reused proxy connection can never carry a request to a second
//! host past the check; HTTPS and WebSockets arrive as `CONNECT host:port` and are tunnelled
//! after the check. A refused request gets `403` with the reason, and the reason is recorded
//! for the next tool result; a host that cannot be resolved or reached gets `502`, unrecorded
//! (that is the network, not the policy, and Chromium's own service traffic fails this way on
//! a closed network).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use url::Url;

use crate::policy::{Denied, NetPolicy};

/// The largest request head the proxy reads before refusing the request.
const MAX_HEAD_BYTES: usize = 32 * 1024;
/// How long a client may take to send a request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How many refusals are kept for the next tool result (the oldest are dropped).
const MAX_REFUSALS: usize = 50;

/// A running egress proxy; stops (with every connection it carries) when dropped.
pub(crate) struct Egress {
    addr: SocketAddr,
    refusals: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Egress {
    /// Starts the proxy on an ephemeral port of 127.0.0.1.
    pub(crate) async fn start(policy: NetPolicy) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept_loop(listener, Arc::new(policy), refusals.clone()));
        Ok(Self {
            addr,
            refusals,
            task,
        })
    }

    /// The proxy's address, for Chromium's `--proxy-server`.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The requests refused since the last call.
    pub(crate) fn take_refusals(&self) -> Vec<String> {
        std::mem::take(&mut *self.refusals.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        // The accept loop owns the connection tasks (a JoinSet), so aborting it ends them too.
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    policy: Arc<NetPolicy>,
    refusals: Arc<Mutex<Vec<String>>>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                connections.spawn(serve(stream, policy.clone(), refusals.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// One proxied request (plain HTTP) or tunnel (CONNECT).
async fn serve(mut client: TcpStream, policy: Arc<NetPolicy>, refusals: Arc<Mutex<Vec<String>>>) {
    let Ok(Ok(Some((head, rest)))) =
        tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await
    else {
        let _ = client.write_all(&response(400, "bad proxy request")).await;
        return;
    };
    let request = match ProxyRequest::parse(&head) {
        Ok(request) => request,
        Err(reason) => {
            refuse(&mut client, &refusals, "a request", &reason).await;
            return;
        }
    };
    let mut server = match policy.connect(&request.host, request.port).await {
        Ok(server) => server,
        Err(Denied::Refused(reason)) => {
            refuse(&mut client, &refusals, &request.target, &reason).await;
            return;
        }
        Err(Denied::Unreachable(reason)) => {
            // Not a policy decision (a closed network, a dead host): the page sees a failed
            // load, and the model is not told about it as if something had been refused.
            let _ = client.write_all(&response(502, &reason)).await;
            return;
        }
    };
    if request.is_connect {
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        if !rest.is_empty() && server.write_all(&rest).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        return;
    }
    let mut forwarded = request.origin_form_head();
    forwarded.extend_from_slice(&rest);
    if server.write_all(&forwarded).await.is_err() {
        return;
    }
    // One request per connection: the request body (if any) flows up while the response
    // flows down; when the server closes, so does the client side.
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upload = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
    });
    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    let _ = client_write.shutdown().await;
    upload.abort();
}

async fn refuse(client: &mut TcpStream, refusals: &Mutex<Vec<String>>, target: &str, reason: &str) {
    tracing::info!(target: "toolbelt_browser", %target, %reason, "browser request refused");
    {
        let mut list = refusals.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() >= MAX_REFUSALS {
            list.remove(0);
        }
        list.push(format!("{target}: {reason}"));
    }
    let _ = client
        .write_all(&response(
            403,
            &format!("Toolbelt refused this request: {reason}"),
        ))
        .await;
}

fn response(status: u16, body: &str) -> Vec<u8> {
    let reason = match status {
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Bad Request",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads up to the end of the request head; returns the head and any bytes after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        let searched_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buf[searched_from..], b"\r\n\r\n") {
            let end = searched_from + end + 4;
            let rest = buf.split_off(end);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Ok(None);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A proxy request head, parsed.
#[derive(Debug)]
struct ProxyRequest {
    is_connect: bool,
    /// What the request was for, as the browser named it (for refusal messages).
    target: String,
    host: String,
    port: u16,
    method: String,
    path_and_query: String,
    version: String,
    headers: Vec<String>,
}

impl ProxyRequest {
    fn parse(head: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(head).map_err(|_| "a request head that is not UTF-8")?;
        let mut lines = text.split("\r\n");
        let request_line = lines.next().unwrap_or_default();
        let mut parts = request_line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("a malformed request line {request_line:?}"));
        };
        let headers: Vec<String> = lines
            .filter(|line| !line.is_empty())
            .map(str::to_string)
            .collect();
        if method == "CONNECT" {
            // An authority: host:port or [v6]:port.
            let url = Url::parse(&format!("http://{target}/"))
                .map_err(|_| format!("CONNECT to {target:?}, which is not host:port"))?;
            let host = url
                .host_str()
                .ok_or_else(|| format!("CONNECT to {target:?} without a host"))?;
            let port = url
                .port()
                .ok_or_else(|| format!("CONNECT to {target:?} without a port"))?;
            return Ok(Self {
                is_connect: true,
                target: target.to_string(),
                host: host.to_string(),
                port,
                method: method.to_string(),
                path_and_query: String::new(),
                version: version.to_string(),
                headers,
            });
        }
        let url = Url::parse(target).map_err(|_| format!("{target:?} is not an absolute URL"))?;
        if url.scheme() != "http" {
            return Err(format!("{} requests are not proxied", url.scheme()));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("{target} has no host"))?;
        let mut path_and_query = url.path().to_string();
        if let Some(query) = url.query() {
            path_and_query.push('?');
            path_and_query.push_str(query);
        }
        Ok(Self {
            is_connect: false,
            target: target.to_string(),
            host: host.to_string(),
            port: url.port_or_known_default().unwrap_or(80),
            method: method.to_string(),
            path_and_query,
            version: version.to_string(),
            headers,
        })
    }

    /// The head sent to the origin server: origin-form target, proxy headers removed, and
    /// `Connection: close` so the connection carries this one request.
    fn origin_form_head(&self) -> Vec<u8> {
        let mut head = format!(
            "{} {} {}\r\n",
            self.method, self.path_and_query, self.version
        );
        for header in &self.headers {
            let name = header
                .split_once(':')
                .map_or(header.as_str(), |(n, _)| n)
                .trim()
                .to_ascii_lowercase();
            if matches!(
                name.as_str(),
                "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
            ) {
                continue;
            }
            head.push_str(header);
            head.push_str("\r\n");
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_requests_are_rewritten_to_origin_form_with_connection_close() {
        let head = b"GET http://127.0.0.1:8080/a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\
                     Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n";
        let request = ProxyRequest::parse(head).unwrap();
        assert!(!request.is_connect);
        assert_eq!((request.host.as_str(), request.port), ("127.0.0.1", 8080));
        let forwarded = String::from_utf8(request.origin_form_head()).unwrap();
        assert_eq!(
            forwarded,
            "GET /a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn connect_targets_name_host_and_port() {
        let request = ProxyRequest::parse(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").unwrap();
        assert!(request.is_connect);
        assert_eq!((request.host.as_str(), request.port), ("[::1]", 443));
        assert!(ProxyRequest::parse(b"CONNECT example.com HTTP/1.1\r\n\r\n").is_err());
        assert!(ProxyRequest::parse(b"GET ftp://example.com/ HTTP/1.1\r\n\r\n").is_err());
        assert!(ProxyRequest::parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
    }
}
