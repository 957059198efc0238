//! The loopback redirect listener: where the browser (or the no-browser follower) lands
//! after the user approves, carrying the authorization code.
//!
//! It binds 127.0.0.1 only, so no other machine can reach it; it answers `GET /callback`
//! and nothing else; a request whose `state` is not the one this login sent is refused
//! (HTTP 400) and the wait goes on, so a page that guesses the port cannot inject its own
//! code (login CSRF); the first request with the right `state` ends the wait and the
//! listener closes. Requests are read with a size limit and a time limit each.
//!
//! Connections are served concurrently, so a connection that sends nothing (another local
//! program, a browser's speculative preconnect) cannot hold up the real redirect: each has
//! [`CONNECTION_LIMIT`] to send its request and get its answer, and at most
//! [`MAX_CONNECTIONS`] are served at once, the oldest being closed to make room for a new
//! one (so a flood of idle connections cannot keep the real one out either).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The path the redirect URI names.
const CALLBACK_PATH: &str = "/callback";
/// The most of a request line and headers read from one connection.
const MAX_REQUEST_BYTES: usize = 16 * 1024;
/// How long one connection may take to send its request and be answered.
const CONNECTION_LIMIT: Duration = Duration::from_secs(5);
/// The most connections served at once.
const MAX_CONNECTIONS: usize = 32;

/// What the authorization server sent back through the browser.
#[derive(Debug)]
pub(crate) struct Callback {
    /// The authorization code.
    pub code: String,
    /// The `iss` parameter (RFC 9207), when the server sends one.
    pub issuer: Option<String>,
}

/// A listener on a loopback port waiting for one redirect.
pub(crate) struct CallbackListener {
    listener: TcpListener,
    redirect_uri: String,
}

impl CallbackListener {
    /// Binds 127.0.0.1 on `port` (0: any free port).
    pub async fn bind(port: u16) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
        })
    }

    /// The redirect URI to register and send: `http://127.0.0.1:PORT/callback`.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits for the redirect whose `state` is `expected_state`, and closes.
    ///
    /// Fails when the server redirects with an `error` (the user declined, the request was
    /// invalid) for this state. Other requests are answered and ignored.
    pub async fn wait(self, expected_state: &str) -> Result<Callback, String> {
        let expected_state: std::sync::Arc<str> = expected_state.into();
        let mut serving = tokio::task::JoinSet::new();
        // In the order they came, to close the oldest when full.
        let mut arrivals = std::collections::VecDeque::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, _) = accepted
                        .map_err(|err| format!("the redirect listener failed: {err}"))?;
                    arrivals.retain(|handle: &tokio::task::AbortHandle| !handle.is_finished());
                    if arrivals.len() >= MAX_CONNECTIONS
                        && let Some(oldest) = arrivals.pop_front()
                    {
                        oldest.abort();
                    }
                    let state = expected_state.clone();
                    arrivals.push_back(serving.spawn(async move {
                        tokio::time::timeout(CONNECTION_LIMIT, answer(stream, &state))
                            .await
                            .ok()
                            .flatten()
                    }));
                }
                Some(served) = serving.join_next(), if !serving.is_empty() => {
                    if let Ok(Some(outcome)) = served {
                        return outcome; // dropping the set closes the other connections
                    }
                }
            }
        }
    }
}

/// Reads one request and answers it; `Some` ends the wait.
async fn answer(mut stream: TcpStream, expected_state: &str) -> Option<Result<Callback, String>> {
    let head = read_head(&mut stream).await?;
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("");
    let Ok(url) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
        respond(&mut stream, "400 Bad Request", "Not a redirect.").await;
        return None;
    };
    if url.path() != CALLBACK_PATH {
        respond(&mut stream, "404 Not Found", "Not here.").await;
        return None;
    }
    let param = |name: &str| {
        url.query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    if param("state").as_deref() != Some(expected_state) {
        tracing::warn!("refused an OAuth redirect whose state is not this login's");
        respond(
            &mut stream,
            "400 Bad Request",
            "This redirect does not belong to the login in progress.",
        )
        .await;
        return None;
    }
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or_default();
        respond(&mut stream, "400 Bad Request", "Authorization failed.").await;
        return Some(Err(format!(
            "the authorization server refused: {error} {description}"
        )));
    }
    let Some(code) = param("code") else {
        respond(&mut stream, "400 Bad Request", "The redirect has no code.").await;
        return Some(Err("the redirect carried no authorization code".into()));
    };
    respond(
        &mut stream,
        "200 OK",
        "Toolbelt is authorized. You can close this window.",
    )
    .await;
    Some(Ok(Callback {
        code,
        issuer: param("iss"),
    }))
}

/// The request line and headers, or `None` when the peer sends too much or closes early.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > MAX_REQUEST_BYTES {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(buf).ok()
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!("<!doctype html><title>Toolbelt</title><p>{text}</p>\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(uri: &str, path_and_query: &str) -> u16 {
        let port = url::Url::parse(uri).unwrap().port().unwrap();
        let response = reqwest::get(format!("http://127.0.0.1:{port}{path_and_query}"))
            .await
            .unwrap();
        response.status().as_u16()
    }

    #[tokio::test]
    async fn only_the_redirect_with_this_logins_state_is_accepted_then_the_listener_closes() {
        let listener = CallbackListener::bind(0).await.unwrap();
        let uri = listener.redirect_uri().to_string();
        assert!(uri.starts_with("http://127.0.0.1:"), "{uri}");
        let waiting = tokio::spawn(listener.wait("the-state"));
        assert_eq!(get(&uri, "/callback?code=evil&state=guessed").await, 400);
        assert_eq!(get(&uri, "/callback?code=evil").await, 400);
        assert_eq!(get(&uri, "/other?code=c&state=the-state").await, 404);
        assert!(
            !waiting.is_finished(),
            "a wrong state does not end the wait"
        );
        assert_eq!(
            get(&uri, "/callback?code=good&state=the-state&iss=x").await,
            200
        );
        let callback = waiting.await.unwrap().unwrap();
        assert_eq!(callback.code, "good");
        assert_eq!(callback.issuer.as_deref(), Some("x"));
        let port = url::Url::parse(&uri).unwrap().port().unwrap();
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "the listener is closed after one code"
        );
    }

    #[tokio::test]
    async fn idle_connections_do_not_hold_up_the_redirect_nor_can_a_flood_keep_it_out() {
        let listener = CallbackListener::bind(0).await.unwrap();
        let uri = listener.redirect_uri().to_string();
        let port = url::Url::parse(&uri).unwrap().port().unwrap();
        let waiting = tokio::spawn(listener.wait("s"));
        // More silent connections than are served at once, all still open.
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 5 {
            idle.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        }
        // Served one at a time they would hold it for minutes; the guard turns that into a
        // failure.
        let answered = tokio::time::timeout(
            Duration::from_secs(60),
            get(&uri, "/callback?code=c&state=s"),
        );
        assert_eq!(answered.await.expect("the redirect is served"), 200);
        assert_eq!(waiting.await.unwrap().unwrap().code, "c");
        drop(idle);
    }

    #[tokio::test]
    async fn a_refusal_for_this_state_ends_the_login_with_the_servers_reason() {
        let listener = CallbackListener::bind(0).await.unwrap();
        let uri = listener.redirect_uri().to_string();
        let waiting = tokio::spawn(listener.wait("s"));
        assert_eq!(
            get(&uri, "/callback?error=access_denied&state=s").await,
            400
        );
        let err = waiting.await.unwrap().unwrap_err();
        assert!(err.contains("access_denied"), "{err}");
    }
}
