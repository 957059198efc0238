//! The OpenAI-compatible chat completions client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Map, Value};
use tokio::time::Instant;
use toolbelt_core::RetryPolicy;

use crate::assemble::MessageAssembler;
use crate::declare::{ToolDialect, WireTools};
use crate::http::{
    Body, BodyKind, Http, MAX_BODY, MAX_SNIPPET_BODY, MAX_STREAM, StreamBodyError, body_kind,
    header_value, is_json, limited, media_type,
};
use crate::model::ResponseStream;
use crate::retry::RetryObserver;
use crate::wire;
use crate::{FinishReason, Message, Model, ModelError, Request, Response, Usage};

/// The environment variable with the server's base URL (ending in `/v1` for most servers).
pub const ENV_BASE_URL: &str = "OPENAI_BASE_URL";
/// The environment variable with the API key.
pub const ENV_API_KEY: &str = "OPENAI_API_KEY";
/// The environment variable with the model name.
pub const ENV_MODEL: &str = "TOOLBELT_MODEL";

/// OpenAI's own endpoint, used when only an API key is configured.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable that turns image parts off (`0`, `false`, `no` or `off`) for
/// models that do not take images.
pub const ENV_MODEL_IMAGES: &str = "TOOLBELT_MODEL_IMAGES";

/// The default [`OpenAiConfig::connect_timeout`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default [`OpenAiConfig::request_timeout`].
const REQUEST_TIMEOUT: Duration = Duration::from_secs(25);
/// The default [`OpenAiConfig::idle_timeout`].
const IDLE_TIMEOUT: Duration = Duration::from_secs(45);
/// How long a stream whose answer is complete (a `finish_reason` arrived) may stay open for
/// a trailing usage chunk and `[DONE]` before it counts as finished.
const FINISH_GRACE: Duration = Duration::from_secs(1);

/// How to reach an OpenAI-compatible server.
///
/// The defaults fail a dead server in under a minute: see "Retries and timeouts" in the
/// crate documentation for the arithmetic.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The base URL; `/chat/completions` is appended.
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer …` (local servers usually need none).
    pub api_key: Option<String>,
    /// The model name.
    pub model: String,
    /// Extra headers sent with every request (organisation, project, gateway routing).
    pub extra_headers: Vec<(String, String)>,
    /// Extra top-level body fields, merged last (provider-specific switches such as
    /// vLLM's `chat_template_kwargs` or Ollama's `keep_alive`).
    pub extra_body: Map<String, Value>,
    /// The longest wait for a TCP/TLS connection. Default 10 s.
    pub connect_timeout: Duration,
    /// The longest wait for the response headers of one attempt, counted from sending the
    /// request (connecting included). A streaming server sends its headers at once; a
    /// non-streaming one only with the whole answer, so raise this for long non-streamed
    /// answers. Default 25 s.
    pub request_timeout: Duration,
    /// The longest gap between two chunks of a body once its headers arrived. Default 45 s.
    pub idle_timeout: Duration,
    /// When to retry connection failures, 429 and 5xx (a timed-out attempt is retried once
    /// at most). Default: [`RetryPolicy::default`] (3 retries).
    pub retry: RetryPolicy,
    /// Whether the model takes image parts ([`Model::accepts_images`]). Default true;
    /// [`ENV_MODEL_IMAGES`]`=0` turns it off. A server that refuses a request with images
    /// (400) turns it off for this client from then on.
    pub accepts_images: bool,
    /// Told of each retry before its wait (see [`RetryObserver`]). Default: none.
    pub on_retry: Option<RetryObserver>,
}

impl OpenAiConfig {
    /// A configuration for `model` at `base_url`, with default timeouts and retries.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            extra_headers: Vec::new(),
            extra_body: Map::new(),
            connect_timeout: CONNECT_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            retry: RetryPolicy::default(),
            accepts_images: true,
            on_retry: None,
        }
    }

    /// Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `TOOLBELT_MODEL` and
    /// `TOOLBELT_MODEL_IMAGES`.
    ///
    /// A model name is required, and a base URL or an API key (with only a key, OpenAI's
    /// endpoint is used). [`ModelError::NotConfigured`] names what is missing.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_values(var(ENV_BASE_URL), var(ENV_API_KEY), var(ENV_MODEL))
    }

    /// Like [`OpenAiConfig::from_env`], from explicit values (an option given on a command
    /// line overrides the environment this way). `TOOLBELT_MODEL_IMAGES`, which has no
    /// option, is still read from the environment.
    pub fn from_values(
        base_url: Option<String>,
        api_key: Option<String>,
        model: Option<String>,
    ) -> Result<Self, ModelError> {
        let mut missing = Vec::new();
        if base_url.is_none() && api_key.is_none() {
            missing.push(ENV_BASE_URL);
        }
        if model.is_none() {
            missing.push(ENV_MODEL);
        }
        if !missing.is_empty() {
            return Err(ModelError::NotConfigured { missing });
        }
        let base_url = base_url.unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_string());
        let mut config = Self::new(base_url, model.unwrap_or_default());
        config.api_key = api_key;
        if let Some(images) = var(ENV_MODEL_IMAGES) {
            config.accepts_images = !matches!(
                images.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "no" | "off"
            );
        }
        Ok(config)
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Adds a header sent with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the observer told of each retry before its wait.
    pub fn with_retry_observer(mut self, observer: RetryObserver) -> Self {
        self.on_retry = Some(observer);
        self
    }

    /// Sets the connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the request timeout (the wait for one attempt's response headers).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the idle timeout (the longest gap between two chunks).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Says whether the model takes image parts.
    pub fn with_images(mut self, accepts_images: bool) -> Self {
        self.accepts_images = accepts_images;
        self
    }
}

/// A non-empty environment variable.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A [`Model`] served by an OpenAI-compatible `/chat/completions` endpoint.
///
/// See the crate documentation for what differs between OpenAI, vLLM, llama.cpp server,
/// Ollama and DeepSeek-style endpoints. Clones share their connection pool and what they
/// learnt about the server (that it refuses images).
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    http: Http,
    url: String,
    /// Set once the server refused a request with images: text notes from then on.
    images_refused: Arc<AtomicBool>,
}

impl OpenAiModel {
    /// A client for this configuration.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            headers.insert(
                AUTHORIZATION,
                header_value("API key", &format!("Bearer {key}"))?,
            );
        }
        let http = Http::new(config, headers)?;
        let url = format!("{}/chat/completions", http.base_url()?);
        Ok(Self {
            http,
            url,
            images_refused: Arc::default(),
        })
    }

    /// A client configured from the environment (see [`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// Sets the observer told of each retry before its wait ([`OpenAiConfig::on_retry`]).
    pub fn with_retry_observer(mut self, observer: RetryObserver) -> Self {
        self.http.config.on_retry = Some(observer);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.http.config
    }

    /// Whether image parts go out as images (else as text notes).
    fn sends_images(&self) -> bool {
        self.http.config.accepts_images && !self.images_refused.load(Ordering::Relaxed)
    }

    /// Sends the request; a 400 to a request with images is taken as "this model does not
    /// take images": the request is sent once more with text notes in their place, and
    /// every later request too.
    async fn send_request(
        &self,
        request: &Request,
        tools: &WireTools,
    ) -> Result<reqwest::Response, ModelError> {
        let images = self.sends_images() && request.messages.iter().any(Message::has_images);
        let extra = &self.http.config.extra_body;
        let model = &self.http.config.model;
        let body = wire::request_body(model, request, tools, extra, images);
        match self.http.send(&self.url, &body).await {
            Err(ModelError::Status {
                status: 400,
                message,
            }) if images => {
                self.images_refused.store(true, Ordering::Relaxed);
                tracing::warn!(
                    model = %self.http.config.model,
                    %message,
                    "the model server refused a request with images; sending a text note in \
                     place of each image from now on"
                );
                let body = wire::request_body(model, request, tools, extra, false);
                self.http.send(&self.url, &body).await
            }
            other => other,
        }
    }

    /// Reads a whole JSON completion (the answer to a non-streaming request, or to a
    /// streaming one from a server that ignored `stream`).
    async fn completion(
        &self,
        content_type: &str,
        first: Vec<u8>,
        body: Body,
        expected: &'static str,
    ) -> Result<Response, ModelError> {
        let (text, truncated) = self.http.read_rest(first, body, MAX_BODY).await?;
        if truncated {
            return Err(ModelError::Decode(format!(
                "the response is larger than {} MiB",
                MAX_BODY >> 20
            )));
        }
        match wire::parse_completion(&String::from_utf8_lossy(&text)) {
            Err(ModelError::Decode(_)) if !is_json(content_type) => {
                Err(ModelError::UnexpectedBody {
                    expected,
                    content_type: content_type.to_string(),
                    snippet: wire::snippet(&text),
                })
            }
            other => other,
        }
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.http.config.model
    }

    fn accepts_images(&self) -> bool {
        self.sends_images()
    }

    async fn generate(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let span = crate::trace::chat_span(&self.http.config.model);
        let started = tracing::Instrument::instrument(self.start(request), span.clone()).await;
        match started {
            Ok(stream) => Ok(crate::trace::Traced::wrap(stream, span)),
            Err(error) => {
                crate::trace::record_error(&span, &error);
                Err(error)
            }
        }
    }
}

impl OpenAiModel {
    /// [`Model::generate`] without its span: sends the request and reads the body's kind.
    async fn start(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let tools = request.tools.shaped(ToolDialect::OpenAi);
        let response = self.send_request(&request, &tools).await?;
        let content_type = media_type(response.headers());
        let mut body: Body = response.bytes_stream().boxed();
        // The first bytes decide what a body without a content type is.
        let mut first = Vec::new();
        if content_type == "none" {
            match tokio::time::timeout(self.http.config.idle_timeout, body.next()).await {
                Err(_) => return Err(self.http.idle_timeout()),
                Ok(Some(Err(e))) => return Err(self.http.transport_error(&e)),
                Ok(Some(Ok(bytes))) => first = bytes.to_vec(),
                Ok(None) => {}
            }
        }
        let stream = request.config.stream;
        let expected = if stream {
            "an event stream"
        } else {
            "a JSON completion"
        };
        match body_kind(&content_type, &first) {
            BodyKind::EventStream => {
                let body = futures::stream::iter((!first.is_empty()).then(|| Ok(first.into())))
                    .chain(body)
                    .boxed();
                let responses = sse_responses(body, self.clone()).map(move |item| {
                    item.map(|mut response| {
                        tools.fix(&mut response);
                        response
                    })
                });
                if stream {
                    Ok(responses.boxed())
                } else {
                    // A server that streams although asked not to: only the final response.
                    Ok(responses
                        .filter(|item| std::future::ready(!matches!(item, Ok(r) if r.partial)))
                        .boxed())
                }
            }
            BodyKind::Json => {
                let mut response = self
                    .completion(&content_type, first, body, expected)
                    .await?;
                tools.fix(&mut response);
                Ok(futures::stream::once(async move { Ok(response) }).boxed())
            }
            BodyKind::Other => {
                let (text, _) = self.http.read_rest(first, body, MAX_SNIPPET_BODY).await?;
                Err(ModelError::UnexpectedBody {
                    expected,
                    content_type,
                    snippet: wire::snippet(&text),
                })
            }
        }
    }
}

/// Turns an SSE body into partial responses and one final response.
fn sse_responses(
    body: Body,
    model: OpenAiModel,
) -> impl Stream<Item = Result<Response, ModelError>> + Send {
    type Event =
        Result<eventsource_stream::Event, eventsource_stream::EventStreamError<StreamBodyError>>;
    struct State {
        events: BoxStream<'static, Event>,
        model: OpenAiModel,
        assembler: Option<MessageAssembler>,
        next_index: usize,
        id: String,
        name: String,
        finish_reason: Option<FinishReason>,
        usage: Option<Usage>,
        /// When a complete answer (a `finish_reason` arrived) counts as finished.
        complete_by: Option<Instant>,
    }

    impl State {
        fn finish(&mut self) -> Option<Result<Response, ModelError>> {
            let message = self.assembler.take()?.finish();
            if wire::is_empty_answer(&message) {
                let finish_reason = self.finish_reason.take().map(|r| r.as_str().to_string());
                return Some(Err(ModelError::EmptyAnswer { finish_reason }));
            }
            Some(Ok(Response {
                id: self.id.clone(),
                model: self.name.clone(),
                partial: false,
                delta: Default::default(),
                message: Some(message),
                finish_reason: self.finish_reason.take(),
                usage: self.usage.take(),
                warnings: Vec::new(),
            }))
        }

        fn fail(&mut self, error: ModelError) -> Option<Result<Response, ModelError>> {
            self.assembler = None;
            Some(Err(error))
        }

        async fn next(&mut self) -> Option<Result<Response, ModelError>> {
            self.assembler.as_ref()?;
            let idle = self.model.http.config.idle_timeout;
            loop {
                // Once the answer is complete, only a short wait for the usage chunk and
                // `[DONE]`: a server that holds the connection open must not cost the
                // whole idle timeout, nor lose the answer.
                // The grace is counted from the first sign of completion, not renewed by
                // each later event, so keep-alives cannot hold a finished answer back.
                if self.finish_reason.is_some() && self.complete_by.is_none() {
                    self.complete_by = Some(Instant::now() + FINISH_GRACE.min(idle));
                }
                let complete = self.complete_by.is_some();
                let deadline = self.complete_by.unwrap_or_else(|| Instant::now() + idle);
                let event = match tokio::time::timeout_at(deadline, self.events.next()).await {
                    Err(_) if complete => return self.finish(),
                    Err(_) => return self.fail(self.model.http.idle_timeout()),
                    // A stream that ends without `[DONE]` (some llama.cpp builds) is complete.
                    Ok(None) => return self.finish(),
                    Ok(Some(Err(eventsource_stream::EventStreamError::Transport(e)))) => {
                        let error = match e {
                            StreamBodyError::Transport(e) => self.model.http.transport_error(&e),
                            too_large => ModelError::Decode(too_large.to_string()),
                        };
                        return self.fail(error);
                    }
                    Ok(Some(Err(e))) => return self.fail(ModelError::Decode(e.to_string())),
                    Ok(Some(Ok(event))) => event,
                };
                let data = event.data.trim();
                if data.is_empty() {
                    continue;
                }
                if data == "[DONE]" {
                    return self.finish();
                }
                let chunk = match wire::parse_chunk(data, &mut self.next_index) {
                    Ok(chunk) => chunk,
                    Err(error) => return self.fail(error),
                };
                if let Some(id) = chunk.id.filter(|id| !id.is_empty()) {
                    self.id = id;
                }
                if let Some(name) = chunk.model.filter(|n| !n.is_empty()) {
                    self.name = name;
                }
                if chunk.finish_reason.is_some() {
                    self.finish_reason = chunk.finish_reason;
                }
                if chunk.usage.is_some() {
                    self.usage = chunk.usage;
                }
                // Chunks with empty choices (usage, keep-alives) carry no delta.
                if chunk.delta.is_empty() {
                    continue;
                }
                if let Some(assembler) = self.assembler.as_mut() {
                    assembler.push(&chunk.delta);
                }
                return Some(Ok(Response {
                    id: self.id.clone(),
                    model: self.name.clone(),
                    partial: true,
                    delta: chunk.delta,
                    ..Response::default()
                }));
            }
        }
    }

    let state = State {
        events: limited(body, MAX_STREAM).eventsource().boxed(),
        name: model.http.config.model.clone(),
        model,
        assembler: Some(MessageAssembler::new()),
        next_index: 0,
        id: String::new(),
        finish_reason: None,
        usage: None,
        complete_by: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::TIMED_OUT_ATTEMPTS;
    use bytes::Bytes;

    /// The crate documentation's arithmetic: with the defaults, a server that accepts and
    /// never answers, or any mix of timed-out and fast-failing attempts, fails in under a
    /// minute. Jitter adds at most one more computed wait, so each wait is at most twice
    /// the unjittered one.
    #[test]
    fn the_defaults_fail_a_dead_server_in_under_a_minute() {
        let config = OpenAiConfig::new("http://127.0.0.1:1/v1", "m");
        let unjittered = RetryPolicy {
            jitter: false,
            ..config.retry.clone()
        };
        let longest_waits: Duration = unjittered.delays().map(|d| d * 2).sum();
        let attempt = config.request_timeout.max(config.connect_timeout);
        let worst = attempt * TIMED_OUT_ATTEMPTS as u32 + longest_waits;
        assert!(worst < Duration::from_secs(60), "{worst:?}");
    }

    #[tokio::test]
    async fn an_endless_event_stream_is_cut_off_with_an_error() {
        let endless: Body =
            futures::stream::repeat_with(|| Ok(Bytes::from_static(b"xxxxxxxx"))).boxed();
        let mut events = limited(endless, 1000).eventsource();
        match events.next().await {
            Some(Err(eventsource_stream::EventStreamError::Transport(error))) => {
                assert!(matches!(error, StreamBodyError::TooLarge), "{error}");
            }
            other => panic!("expected the size error, got {other:?}"),
        }
    }

    #[test]
    fn a_body_without_a_content_type_is_judged_by_its_first_bytes() {
        assert!(matches!(
            body_kind("none", b"  {\"choices\":[]}"),
            BodyKind::Json
        ));
        assert!(matches!(
            body_kind("none", b"data: {}\n\n"),
            BodyKind::EventStream
        ));
        assert!(matches!(body_kind("none", b"<html>"), BodyKind::Other));
        assert!(matches!(
            body_kind("application/vnd.api+json", b""),
            BodyKind::Json
        ));
    }
}
