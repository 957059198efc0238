//! Streamable HTTP: rmcp's transport over a reqwest client that adds the headers an injector
//! chose for each request (see [`super::HEADERS_META_KEY`]), records whether each call's
//! POST could have reached the server (see [`super::delivery`]), and carries OAuth bearer
//! tokens (see [`crate::auth`]): a 401 gets one retry with a refreshed or new token, a
//! `403 insufficient_scope` one retry after a step-up. Retrying is safe there: a server
//! that answers 401 or 403 has not processed the message.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::delivery::DeliveryLog;
use super::{parse_header, take_injected_headers};
use crate::auth::{OAuthConfig, OAuthSession};

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

/// A reqwest client that moves per-request headers out of `_meta` and onto the HTTP request,
/// notes each ticketed call's delivery, and authorizes with OAuth.
#[derive(Clone)]
pub(crate) struct InjectingClient {
    inner: reqwest::Client,
    deliveries: Arc<DeliveryLog>,
    oauth: Option<Arc<OAuthSession>>,
}

impl InjectingClient {
    /// Wraps `inner`, noting deliveries in `deliveries`.
    pub fn new(inner: reqwest::Client, deliveries: Arc<DeliveryLog>) -> Self {
        Self {
            inner,
            deliveries,
            oauth: None,
        }
    }

    /// Sends OAuth tokens for the server at `url`: the stored ones, and new ones as
    /// `config` allows.
    pub fn with_oauth(mut self, url: &str, config: Option<&OAuthConfig>) -> Self {
        self.oauth = Some(Arc::new(OAuthSession::new(url, config)));
        self
    }

    /// Runs `send` with the bearer token (unless the caller set one, or an `Authorization`
    /// header of its own), and once more with a new token when the server refuses it.
    async fn authorized<T, F, Fut>(
        &self,
        auth_header: Option<String>,
        headers: &HashMap<HeaderName, HeaderValue>,
        send: F,
    ) -> HttpResult<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        let Some(oauth) = self
            .oauth
            .as_ref()
            .filter(|_| auth_header.is_none())
            .filter(|_| !headers.contains_key(&reqwest::header::AUTHORIZATION))
        else {
            return send(auth_header).await;
        };
        let token = oauth.bearer().await?;
        let retry = match send(token.clone()).await {
            Err(StreamableHttpError::AuthRequired(refused)) => {
                match oauth
                    .unauthorized(&refused.www_authenticate_header, token.as_deref())
                    .await?
                {
                    Some(token) => token,
                    None => return Err(StreamableHttpError::AuthRequired(refused)),
                }
            }
            Err(StreamableHttpError::InsufficientScope(refused)) => {
                match oauth
                    .insufficient_scope(&refused.www_authenticate_header)
                    .await?
                {
                    Some(token) => token,
                    None => return Err(StreamableHttpError::InsufficientScope(refused)),
                }
            }
            other => return other,
        };
        send(Some(retry)).await
    }

    /// Sends one message with `send` (one of the inner client's POST variants, given the
    /// message, the headers and the bearer token): the injected headers go onto the request,
    /// the call gets its delivery ticket, OAuth authorizes it, and the outcome is noted.
    async fn post<F, Fut>(
        &self,
        mut message: ClientJsonRpcMessage,
        auth_header: Option<String>,
        mut headers: HashMap<HeaderName, HeaderValue>,
        send: F,
    ) -> HttpResult<StreamableHttpPostResponse>
    where
        F: Fn(ClientJsonRpcMessage, HashMap<HeaderName, HeaderValue>, Option<String>) -> Fut,
        Fut: Future<Output = HttpResult<StreamableHttpPostResponse>>,
    {
        add_injected(&mut message, &mut headers);
        let ticket = self.deliveries.sending(&mut message);
        let result = self
            .authorized(auth_header, &headers, |token| {
                send(message.clone(), headers.clone(), token)
            })
            .await;
        self.note(ticket, &result);
        result
    }

    /// Marks ticket `ticket` refused when its POST provably never reached the server: no
    /// connection was made, or the server answered 404 for the session (a server does not
    /// process messages of sessions it does not know).
    fn note(
        &self,
        ticket: Option<u64>,
        result: &Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>,
    ) {
        let never_arrived = match result {
            Err(StreamableHttpError::Client(err)) => err.is_connect(),
            Err(StreamableHttpError::SessionExpired) => true,
            _ => false,
        };
        if never_arrived {
            self.deliveries.refused(ticket);
        }
    }
}

fn add_injected(
    message: &mut ClientJsonRpcMessage,
    headers: &mut HashMap<HeaderName, HeaderValue>,
) {
    for (name, value) in take_injected_headers(message) {
        match parse_header(&name, &value) {
            Ok((name, value)) => {
                headers.insert(name, value);
            }
            Err(problem) => tracing::warn!("dropping an injected header: {problem}"),
        }
    }
}

impl StreamableHttpClient for InjectingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post(
            message,
            auth_header,
            custom_headers,
            |message, headers, token| {
                self.inner
                    .post_message(uri.clone(), message, session_id.clone(), token, headers)
            },
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post(
            message,
            auth_header,
            custom_headers,
            |message, headers, token| {
                self.inner.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message,
                    session_id.clone(),
                    token,
                    headers,
                    max_sse_event_size,
                )
            },
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post(
            message,
            auth_header,
            custom_headers,
            |message, headers, token| {
                self.inner.post_message_with_response_limits(
                    uri.clone(),
                    message,
                    session_id.clone(),
                    token,
                    headers,
                    limits,
                )
            },
        )
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.authorized(auth_header, &custom_headers, |token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.authorized(auth_header, &custom_headers, |token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.authorized(auth_header, &custom_headers, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::transport::delivery::tests::call_with;

    /// A server on 127.0.0.1 answering every request with `status`; returns its URL.
    async fn answering(status: &'static str) -> Arc<str> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 8192];
                let _ = socket.read(&mut buf).await;
                let response = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                let _ = socket.write_all(response.as_bytes()).await;
            }
        });
        url.into()
    }

    async fn post_reached(url: Arc<str>) -> bool {
        let log = Arc::new(DeliveryLog::default());
        let client = InjectingClient::new(reqwest::Client::new(), log.clone());
        let ticket = log.ticket();
        let session = Some(Arc::from("a-session"));
        let result = client
            .post_message(url, call_with(&ticket), session, None, HashMap::new())
            .await;
        assert!(result.is_err(), "every case here fails");
        ticket.may_have_reached_server()
    }

    #[tokio::test]
    async fn only_a_refused_connection_or_an_unknown_session_proves_a_post_never_arrived() {
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/mcp", listener.local_addr().unwrap())
        };
        assert!(!post_reached(closed.into()).await, "connection refused");
        assert!(!post_reached(answering("404 Not Found").await).await);
        assert!(
            post_reached(answering("500 Internal Server Error").await).await,
            "a server error may come after the work was done"
        );
    }
}
