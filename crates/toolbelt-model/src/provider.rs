//! The providers this crate reaches and the one client behind the wire formats other than
//! chat completions: [`ProviderModel`] sends a request in its provider's dialect (see
//! `dialect/`) with the shared retry policy and timeouts, and reads the answer, streamed
//! or whole, back into the one [`Response`] and [`Message`] shape.

use std::sync::Arc;

use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::HeaderMap;

use crate::declare::{ToolDialect, WireTools};
use crate::dialect::{self, Decoder};
use crate::http::{
    Body, BodyKind, Http, MAX_BODY, MAX_SNIPPET_BODY, MAX_STREAM, StreamBodyError, body_kind,
    limited, media_type,
};
use crate::model::ResponseStream;
use crate::{DynModel, Model, ModelError, OpenAiConfig, OpenAiModel, Request, Response, wire};

/// A model provider's API, as `--provider` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI chat completions and every server compatible with it (`/chat/completions`).
    OpenAi,
    /// The OpenAI Responses API (`/responses`).
    OpenAiResponses,
    /// Anthropic Messages (`/messages`).
    Anthropic,
    /// Google Gemini (`/models/{model}:generateContent`).
    Gemini,
}

impl Provider {
    /// Every provider.
    pub const ALL: [Provider; 4] = [
        Provider::OpenAi,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    /// The provider's name: `openai`, `openai-responses`, `anthropic`, `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The environment variable with its API key.
    pub fn key_variable(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses => crate::ENV_API_KEY,
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::Gemini => "GEMINI_API_KEY",
        }
    }

    /// The provider's own endpoint, used when no base URL is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses => crate::OPENAI_DEFAULT_BASE_URL,
            Provider::Anthropic => "https://api.anthropic.com/v1",
            Provider::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }

    /// The shape its request's `tools` take.
    pub fn tool_dialect(self) -> ToolDialect {
        match self {
            Provider::OpenAi => ToolDialect::OpenAi,
            Provider::OpenAiResponses => ToolDialect::OpenAiResponses,
            Provider::Anthropic => ToolDialect::Anthropic,
            Provider::Gemini => ToolDialect::Gemini,
        }
    }
}

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == name.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown provider {name:?}: use one of {}", names.join(", "))
            })
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client for `provider` with `config` (its base URL, key, model, timeouts, retries):
/// [`OpenAiModel`] for chat completions, [`ProviderModel`] for the others.
pub fn connect(provider: Provider, config: OpenAiConfig) -> Result<DynModel, ModelError> {
    Ok(match provider {
        Provider::OpenAi => Arc::new(OpenAiModel::new(config)?),
        other => Arc::new(ProviderModel::new(other, config)?),
    })
}

/// A [`Model`] served by the OpenAI Responses API, Anthropic Messages or Gemini.
///
/// The [`OpenAiConfig`] says where and how (its `base_url` ends before the dialect's path:
/// `…/v1` for OpenAI and Anthropic, `…/v1beta` for Gemini); tools are sent as
/// [`crate::wire_tools`] shapes them for the provider, renamed tools are mapped back on the
/// calls, and what the provider needs replayed is kept in [`crate::Message::replay`].
#[derive(Debug, Clone)]
pub struct ProviderModel {
    provider: Provider,
    http: Http,
    base: String,
}

impl ProviderModel {
    /// A client for `provider` (not [`Provider::OpenAi`], which is [`OpenAiModel`]).
    pub fn new(provider: Provider, config: OpenAiConfig) -> Result<Self, ModelError> {
        if provider == Provider::OpenAi {
            return Err(ModelError::InvalidConfig(
                "chat completions are served by OpenAiModel (use toolbelt_model::connect)".into(),
            ));
        }
        let headers: HeaderMap = dialect::auth_headers(provider, config.api_key.as_deref())?;
        let http = Http::new(config, headers)?;
        let base = http.base_url()?.to_string();
        Ok(Self {
            provider,
            http,
            base,
        })
    }

    /// The provider.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.http.config
    }

    async fn start(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let tools = request.tools.shaped(self.provider.tool_dialect());
        for warning in &tools.warnings {
            tracing::warn!(provider = %self.provider, %warning, "tool declaration changed");
        }
        let images = self.http.config.accepts_images;
        let body =
            dialect::request_body(self.provider, &self.http.config, &request, &tools, images);
        let stream = request.config.stream;
        let url = dialect::url(self.provider, &self.base, &self.http.config.model, stream);
        let response = self.http.send(&url, &body).await?;
        let content_type = media_type(response.headers());
        let body: Body = response.bytes_stream().boxed();
        let fix = tools;
        let expected = if stream {
            "an event stream"
        } else {
            "a JSON response"
        };
        match body_kind(&content_type, &[]) {
            BodyKind::EventStream => {
                let responses = events(body, self.clone(), fix);
                if stream {
                    Ok(responses.boxed())
                } else {
                    Ok(responses
                        .filter(|item| std::future::ready(!matches!(item, Ok(r) if r.partial)))
                        .boxed())
                }
            }
            BodyKind::Json => {
                let (text, truncated) = self.http.read_rest(Vec::new(), body, MAX_BODY).await?;
                if truncated {
                    return Err(ModelError::Decode(format!(
                        "the response is larger than {} MiB",
                        MAX_BODY >> 20
                    )));
                }
                let text = String::from_utf8_lossy(&text);
                let mut response = dialect::parse(self.provider, &text, &fix)?;
                fix.fix(&mut response);
                Ok(futures::stream::once(async move { Ok(response) }).boxed())
            }
            BodyKind::Other => {
                let (text, _) = self
                    .http
                    .read_rest(Vec::new(), body, MAX_SNIPPET_BODY)
                    .await?;
                Err(ModelError::UnexpectedBody {
                    expected,
                    content_type,
                    snippet: wire::snippet(&text),
                })
            }
        }
    }
}

#[async_trait]
impl Model for ProviderModel {
    fn name(&self) -> &str {
        &self.http.config.model
    }

    fn accepts_images(&self) -> bool {
        self.http.config.accepts_images
    }

    async fn generate(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let span = crate::trace::chat_span_of(self.provider.as_str(), &self.http.config.model);
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

/// Turns an event stream into partial responses and one final response.
fn events(
    body: Body,
    model: ProviderModel,
    fix: Arc<WireTools>,
) -> impl futures::Stream<Item = Result<Response, ModelError>> + Send {
    type Event =
        Result<eventsource_stream::Event, eventsource_stream::EventStreamError<StreamBodyError>>;
    struct State {
        events: BoxStream<'static, Event>,
        model: ProviderModel,
        decoder: Option<Box<dyn Decoder>>,
        fix: Arc<WireTools>,
    }

    impl State {
        fn finish(&mut self) -> Option<Result<Response, ModelError>> {
            let mut decoder = self.decoder.take()?;
            Some(decoder.finish().map(|mut response| {
                self.fix.fix(&mut response);
                if response.model.is_empty() {
                    response.model = self.model.http.config.model.clone();
                }
                response
            }))
        }

        fn fail(&mut self, error: ModelError) -> Option<Result<Response, ModelError>> {
            self.decoder = None;
            Some(Err(error))
        }

        async fn next(&mut self) -> Option<Result<Response, ModelError>> {
            self.decoder.as_ref()?;
            let idle = self.model.http.config.idle_timeout;
            loop {
                if self.decoder.as_ref().is_some_and(|d| d.complete()) {
                    return self.finish();
                }
                let event = match tokio::time::timeout(idle, self.events.next()).await {
                    Err(_) => return self.fail(self.model.http.idle_timeout()),
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
                if data.is_empty() || data == "[DONE]" {
                    continue;
                }
                let decoder = self.decoder.as_mut()?;
                let delta = match decoder.event(&event.event, data) {
                    Ok(delta) => delta,
                    Err(error) => return self.fail(error),
                };
                if delta.is_empty() {
                    continue;
                }
                let mut response = Response {
                    partial: true,
                    delta,
                    model: self.model.http.config.model.clone(),
                    ..Response::default()
                };
                self.fix.fix(&mut response);
                return Some(Ok(response));
            }
        }
    }

    let state = State {
        events: limited(body, MAX_STREAM).eventsource().boxed(),
        decoder: Some(dialect::decoder(model.provider, fix.clone())),
        model,
        fix,
    };
    futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
}
