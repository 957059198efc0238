//! The HTTP side of every client: sending a request with the one retry policy and its
//! timeouts, reading bodies within their size and idle limits, and telling what kind of
//! body arrived. The wire formats (`wire.rs`, `dialect/`) only build and read JSON.

use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::retry::{RetryNotice, retry_after};
use crate::{ModelError, OpenAiConfig, wire};

/// Attempts that may end in a timeout: a server that did not answer one attempt in time
/// gets one more (a connection lost silently), not as many as the retry policy allows, so
/// a dead server fails within the budget the crate documentation computes.
pub(crate) const TIMED_OUT_ATTEMPTS: usize = 2;
/// The largest non-streamed completion body read.
pub(crate) const MAX_BODY: usize = 32 << 20;
/// The most bytes of an event stream read: it bounds the memory a server that streams
/// without end (or sends one endless event) can take, far above a real answer's size.
pub(crate) const MAX_STREAM: usize = 256 << 20;
/// How much of an unexpected or error body is read for its message.
pub(crate) const MAX_SNIPPET_BODY: usize = 16 << 10;

/// A failed attempt: the error and the delay the server asked for, if any.
type Failure = (ModelError, Option<Duration>);

/// A response body as it arrives.
pub(crate) type Body = BoxStream<'static, Result<Bytes, reqwest::Error>>;

/// One provider's connection: its settings and a client carrying its authentication
/// headers. Clones share the connection pool.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    pub(crate) config: OpenAiConfig,
    client: reqwest::Client,
}

impl Http {
    /// A client for `config`, sending `auth` (the provider's key headers) and the
    /// configured extra headers with every request.
    pub(crate) fn new(config: OpenAiConfig, auth: HeaderMap) -> Result<Self, ModelError> {
        let mut headers = auth;
        for (name, value) in &config.extra_headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ModelError::InvalidConfig(format!("bad header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| ModelError::InvalidConfig(format!("bad value for header {name}")))?;
            headers.insert(name, value);
        }
        // The request and idle timeouts are ours (per attempt, per chunk), so each error
        // can say which limit fired; reqwest only enforces the connect timeout.
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| ModelError::InvalidConfig(e.to_string()))?;
        Ok(Self { config, client })
    }

    /// The configured base URL without its trailing `/`, checked to be http(s).
    pub(crate) fn base_url(&self) -> Result<&str, ModelError> {
        let base = self.config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::InvalidConfig(format!(
                "the base URL {base:?} must start with http:// or https://"
            )));
        }
        Ok(base)
    }

    /// Sends the request, retrying what may succeed next time (see the crate
    /// documentation), and returns the first successful response.
    pub(crate) async fn send(
        &self,
        url: &str,
        body: &Value,
    ) -> Result<reqwest::Response, ModelError> {
        let policy = &self.config.retry;
        let mut delays = policy.delays();
        let mut timed_out = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (error, asked) = match self.send_once(url, body).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if matches!(error, ModelError::Timeout { .. }) {
                timed_out += 1;
            }
            if !error.is_retryable() || timed_out >= TIMED_OUT_ATTEMPTS {
                return Err(error);
            }
            let Some(computed) = delays.next() else {
                return Err(error);
            };
            let delay = policy.delay_for(asked, computed);
            tracing::debug!(%error, ?delay, "retrying the model call");
            if let Some(observer) = &self.config.on_retry {
                observer.notify(&RetryNotice {
                    attempt,
                    max_attempts: policy.max_retries.saturating_add(1),
                    error: &error,
                    delay,
                });
            }
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_once(&self, url: &str, body: &Value) -> Result<reqwest::Response, Failure> {
        let pending = self.client.post(url).json(body).send();
        let response = match tokio::time::timeout(self.config.request_timeout, pending).await {
            Err(_) => {
                let error = ModelError::Timeout {
                    what: "no response headers",
                    setting: "request timeout",
                    limit: self.config.request_timeout,
                };
                return Err((error, None));
            }
            Ok(Err(e)) => return Err((self.transport_error(&e), None)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let asked = retry_after(response.headers());
        let message = match self.read_body(response, MAX_SNIPPET_BODY).await {
            Ok((body, _)) => wire::error_message(&String::from_utf8_lossy(&body)),
            Err(error) => format!("(the error body was lost: {error})"),
        };
        let error = ModelError::Status {
            status: status.as_u16(),
            message,
        };
        Err((error, asked))
    }

    /// Reads at most `max` bytes of a body, each chunk within the idle timeout; the flag
    /// says whether more was left unread.
    pub(crate) async fn read_body(
        &self,
        response: reqwest::Response,
        max: usize,
    ) -> Result<(Vec<u8>, bool), ModelError> {
        self.read_rest(Vec::new(), response.bytes_stream().boxed(), max)
            .await
    }

    pub(crate) async fn read_rest(
        &self,
        mut out: Vec<u8>,
        mut body: Body,
        max: usize,
    ) -> Result<(Vec<u8>, bool), ModelError> {
        while out.len() < max {
            match tokio::time::timeout(self.config.idle_timeout, body.next()).await {
                Err(_) => return Err(self.idle_timeout()),
                Ok(None) => return Ok((out, false)),
                Ok(Some(Err(e))) => return Err(self.transport_error(&e)),
                Ok(Some(Ok(bytes))) => out.extend_from_slice(&bytes),
            }
        }
        out.truncate(max);
        Ok((out, true))
    }

    pub(crate) fn idle_timeout(&self) -> ModelError {
        ModelError::Timeout {
            what: "no new data",
            setting: "idle timeout",
            limit: self.config.idle_timeout,
        }
    }

    pub(crate) fn transport_error(&self, error: &reqwest::Error) -> ModelError {
        if error.is_timeout() {
            return ModelError::Timeout {
                what: "no connection",
                setting: "connect timeout",
                limit: self.config.connect_timeout,
            };
        }
        // The source chain says why (connection refused, DNS, TLS); the top level alone
        // only says "error sending request".
        ModelError::Transport(toolbelt_core::error_chain(error))
    }
}

/// A header value from a secret or setting, or a clear configuration error.
pub(crate) fn header_value(what: &str, value: &str) -> Result<HeaderValue, ModelError> {
    HeaderValue::from_str(value)
        .map_err(|_| ModelError::InvalidConfig(format!("the {what} is not a valid header")))
}

/// What kind of body a successful response carries.
pub(crate) enum BodyKind {
    EventStream,
    Json,
    Other,
}

/// The media type of a `Content-Type` value ("none" when absent), lower-cased.
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "none".to_string())
}

pub(crate) fn is_json(media_type: &str) -> bool {
    media_type == "application/json" || media_type.ends_with("+json")
}

/// The kind of a body by its media type, or by its first bytes when the server sent none.
pub(crate) fn body_kind(media_type: &str, first: &[u8]) -> BodyKind {
    match media_type {
        "text/event-stream" => BodyKind::EventStream,
        t if is_json(t) => BodyKind::Json,
        "none" => {
            let start = String::from_utf8_lossy(first);
            let start = start.trim_start();
            if start.starts_with('{') {
                BodyKind::Json
            } else if ["data:", "event:", "id:", "retry:", ":"]
                .iter()
                .any(|field| start.starts_with(field))
            {
                BodyKind::EventStream
            } else {
                BodyKind::Other
            }
        }
        _ => BodyKind::Other,
    }
}

/// Why an event stream's body stopped.
#[derive(Debug)]
pub(crate) enum StreamBodyError {
    Transport(reqwest::Error),
    TooLarge,
}

impl std::fmt::Display for StreamBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamBodyError::Transport(error) => error.fmt(f),
            StreamBodyError::TooLarge => write!(
                f,
                "the event stream is longer than {} MiB",
                MAX_STREAM >> 20
            ),
        }
    }
}

/// The body's bytes, cut off with an error past `max` ([`MAX_STREAM`]).
pub(crate) fn limited(
    body: Body,
    max: usize,
) -> impl Stream<Item = Result<Bytes, StreamBodyError>> + Send {
    body.scan(0usize, move |seen, item| {
        let item = item.map_err(StreamBodyError::Transport).and_then(|bytes| {
            *seen += bytes.len();
            if *seen > max {
                Err(StreamBodyError::TooLarge)
            } else {
                Ok(bytes)
            }
        });
        std::future::ready(Some(item))
    })
}
