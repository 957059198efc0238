//! The OpenAI-compatible chat completions client.

use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use crate::assemble::MessageAssembler;
use crate::model::ResponseStream;
use crate::retry::RetryPolicy;
use crate::wire;
use crate::{FinishReason, Model, ModelError, Request, Response, Usage};

/// The environment variable with the server's base URL (ending in `/v1` for most servers).
pub const ENV_BASE_URL: &str = "OPENAI_BASE_URL";
/// The environment variable with the API key.
pub const ENV_API_KEY: &str = "OPENAI_API_KEY";
/// The environment variable with the model name.
pub const ENV_MODEL: &str = "TOOLBELT_MODEL";

/// OpenAI's own endpoint, used when only an API key is configured.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// How to reach an OpenAI-compatible server.
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
    /// The longest wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// The longest wait for the response headers and between two chunks of a stream.
    pub idle_timeout: Duration,
    /// Retries of rate limits and server errors.
    pub retry: RetryPolicy,
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
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }

    /// Reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `TOOLBELT_MODEL`.
    ///
    /// A model name is required, and a base URL or an API key (with only a key, OpenAI's
    /// endpoint is used). [`ModelError::NotConfigured`] names what is missing.
    pub fn from_env() -> Result<Self, ModelError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Self::from_values(var(ENV_BASE_URL), var(ENV_API_KEY), var(ENV_MODEL))
    }

    /// Like [`OpenAiConfig::from_env`], from explicit values (an option given on a command
    /// line overrides the environment this way).
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

    /// Sets the connect and idle timeouts.
    pub fn with_timeouts(mut self, connect: Duration, idle: Duration) -> Self {
        self.connect_timeout = connect;
        self.idle_timeout = idle;
        self
    }
}

/// A [`Model`] served by an OpenAI-compatible `/chat/completions` endpoint.
///
/// See the crate documentation for what differs between OpenAI, vLLM, llama.cpp server,
/// Ollama and DeepSeek-style endpoints.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    url: String,
    client: reqwest::Client,
}

impl OpenAiModel {
    /// A client for this configuration.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ModelError::InvalidConfig("the API key is not a valid header".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &config.extra_headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ModelError::InvalidConfig(format!("bad header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| ModelError::InvalidConfig(format!("bad value for header {name}")))?;
            headers.insert(name, value);
        }
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::InvalidConfig(format!(
                "the base URL {base:?} must start with http:// or https://"
            )));
        }
        let url = format!("{base}/chat/completions");
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.idle_timeout)
            .build()
            .map_err(|e| ModelError::InvalidConfig(e.to_string()))?;
        Ok(Self {
            config,
            url,
            client,
        })
    }

    /// A client configured from the environment (see [`OpenAiConfig::from_env`]).
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env()?)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Sends the request, retrying rate limits, server errors and failed connections, and
    /// returns the first successful response.
    async fn send(&self, body: &Value) -> Result<reqwest::Response, ModelError> {
        let mut delays = self.config.retry.delays();
        loop {
            let attempt = self.send_once(body).await;
            let (error, headers) = match attempt {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            if !error.is_retryable() {
                return Err(error);
            }
            let Some(computed) = delays.next() else {
                return Err(error);
            };
            let delay = self.config.retry.delay_for(headers.as_ref(), computed);
            tracing::debug!(%error, ?delay, "retrying the model call");
            tokio::time::sleep(delay).await;
        }
    }

    async fn send_once(
        &self,
        body: &Value,
    ) -> Result<reqwest::Response, (ModelError, Option<HeaderMap>)> {
        let pending = self.client.post(&self.url).json(body).send();
        let response = match tokio::time::timeout(self.config.idle_timeout, pending).await {
            Err(_) => {
                let limit = self.config.idle_timeout;
                return Err((
                    ModelError::Timeout {
                        what: "waiting for the response",
                        limit,
                    },
                    None,
                ));
            }
            Ok(Err(e)) => return Err((self.transport_error(&e), None)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        let error = ModelError::Status {
            status: status.as_u16(),
            message: wire::error_message(&body),
        };
        Err((error, Some(headers)))
    }

    fn transport_error(&self, error: &reqwest::Error) -> ModelError {
        if error.is_timeout() {
            let (what, limit) = if error.is_connect() {
                ("connecting", self.config.connect_timeout)
            } else {
                ("waiting for data", self.config.idle_timeout)
            };
            return ModelError::Timeout { what, limit };
        }
        // The source chain says why (connection refused, DNS, TLS); the top level alone
        // only says "error sending request".
        let mut message = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ModelError::Transport(message)
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.config.model
    }

    async fn generate(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let body = wire::request_body(&self.config.model, &request, &self.config.extra_body);
        let response = self.send(&body).await?;
        if !request.config.stream {
            let pending = response.text();
            let text = match tokio::time::timeout(self.config.idle_timeout, pending).await {
                Err(_) => {
                    let limit = self.config.idle_timeout;
                    return Err(ModelError::Timeout {
                        what: "reading the response",
                        limit,
                    });
                }
                Ok(text) => text.map_err(|e| self.transport_error(&e))?,
            };
            let parsed = wire::parse_completion(&text)?;
            return Ok(futures::stream::once(async move { Ok(parsed) }).boxed());
        }
        Ok(sse_responses(response, self.clone()).boxed())
    }
}

/// Turns an SSE body into partial responses and one final response.
fn sse_responses(
    response: reqwest::Response,
    model: OpenAiModel,
) -> impl Stream<Item = Result<Response, ModelError>> + Send {
    struct State {
        events: futures::stream::BoxStream<
            'static,
            Result<eventsource_stream::Event, eventsource_stream::EventStreamError<reqwest::Error>>,
        >,
        model: OpenAiModel,
        assembler: Option<MessageAssembler>,
        next_index: usize,
        id: String,
        name: String,
        finish_reason: Option<FinishReason>,
        usage: Option<Usage>,
    }

    impl State {
        fn finish(&mut self) -> Option<Result<Response, ModelError>> {
            let assembler = self.assembler.take()?;
            Some(Ok(Response {
                id: self.id.clone(),
                model: self.name.clone(),
                partial: false,
                delta: Default::default(),
                message: Some(assembler.finish()),
                finish_reason: self.finish_reason.take(),
                usage: self.usage.take(),
            }))
        }

        fn fail(&mut self, error: ModelError) -> Option<Result<Response, ModelError>> {
            self.assembler = None;
            Some(Err(error))
        }

        async fn next(&mut self) -> Option<Result<Response, ModelError>> {
            self.assembler.as_ref()?;
            let idle = self.model.config.idle_timeout;
            loop {
                let event = match tokio::time::timeout(idle, self.events.next()).await {
                    Err(_) => {
                        let what = "waiting for the next chunk";
                        return self.fail(ModelError::Timeout { what, limit: idle });
                    }
                    // A stream that ends without `[DONE]` (some llama.cpp builds) is complete.
                    Ok(None) => return self.finish(),
                    Ok(Some(Err(eventsource_stream::EventStreamError::Transport(e)))) => {
                        let error = self.model.transport_error(&e);
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
        events: response.bytes_stream().eventsource().boxed(),
        name: model.config.model.clone(),
        model,
        assembler: Some(MessageAssembler::new()),
        next_index: 0,
        id: String::new(),
        finish_reason: None,
        usage: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
}
