//! The wire formats of [`crate::ProviderModel`]: for each provider, how a [`Request`] becomes
//! a body and where it goes, and how an answer (one JSON body, or an event stream through a
//! [`Decoder`]) becomes a [`Response`]. One internal message type is mapped at this edge
//! only; reading is lenient (unknown fields ignored), writing sends only documented fields.

mod anthropic;
mod gemini;
mod responses;

// The scripted Gemini server accepts the placeholder signature the dialect writes.
#[cfg(feature = "test-server")]
pub(crate) use gemini::FOREIGN_SIGNATURE;

use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::{Value, json};

use crate::declare::WireTools;
use crate::http::header_value;
use crate::{
    ContentPart, Delta, FinishReason, Message, ModelError, OpenAiConfig, Provider, Request,
    Response, Role,
};

/// Reads one provider's event stream.
pub(crate) trait Decoder: Send {
    /// One server-sent event (its `event:` name, its data): the delta it carries (empty
    /// for bookkeeping events), or an error event / a malformed event as an error.
    fn event(&mut self, event: &str, data: &str) -> Result<Delta, ModelError>;

    /// Whether the stream's terminal event arrived.
    fn complete(&self) -> bool;

    /// The final response, once the stream ended (an error if it ended before the answer
    /// was complete).
    fn finish(&mut self) -> Result<Response, ModelError>;
}

/// The headers that carry `key`.
pub(crate) fn auth_headers(provider: Provider, key: Option<&str>) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: &str| -> Result<(), ModelError> {
        headers.insert(HeaderName::from_static(name), header_value(name, value)?);
        Ok(())
    };
    match provider {
        Provider::OpenAi | Provider::OpenAiResponses => {
            if let Some(key) = key {
                set("authorization", &format!("Bearer {key}"))?;
            }
        }
        Provider::Anthropic => {
            set("anthropic-version", anthropic::VERSION)?;
            if let Some(key) = key {
                set("x-api-key", key)?;
            }
        }
        Provider::Gemini => {
            if let Some(key) = key {
                set("x-goog-api-key", key)?;
            }
        }
    }
    Ok(headers)
}

/// Where a request goes.
pub(crate) fn url(provider: Provider, base: &str, model: &str, stream: bool) -> String {
    match provider {
        Provider::OpenAi => format!("{base}/chat/completions"),
        Provider::OpenAiResponses => format!("{base}/responses"),
        Provider::Anthropic => format!("{base}/messages"),
        Provider::Gemini if stream => {
            format!("{base}/models/{model}:streamGenerateContent?alt=sse")
        }
        Provider::Gemini => format!("{base}/models/{model}:generateContent"),
    }
}

/// The request body.
pub(crate) fn request_body(
    provider: Provider,
    config: &OpenAiConfig,
    request: &Request,
    tools: &WireTools,
    images: bool,
) -> Value {
    let mut body = match provider {
        Provider::Anthropic => anthropic::body(&config.model, request, tools, images),
        Provider::Gemini => gemini::body(request, tools, images),
        Provider::OpenAiResponses | Provider::OpenAi => {
            responses::body(&config.model, request, tools, images)
        }
    };
    if let Some(object) = body.as_object_mut() {
        for (key, value) in &config.extra_body {
            object.insert(key.clone(), value.clone());
        }
    }
    body
}

/// Reads a whole JSON answer.
pub(crate) fn parse(
    provider: Provider,
    body: &str,
    tools: &WireTools,
) -> Result<Response, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|e| {
        ModelError::Decode(format!(
            "{e} in {:?}",
            crate::wire::snippet(body.as_bytes())
        ))
    })?;
    if let Some(error) = embedded_error(&value) {
        return Err(error);
    }
    let response = match provider {
        Provider::Anthropic => anthropic::parse(&value),
        Provider::Gemini => gemini::parse(&value),
        Provider::OpenAiResponses | Provider::OpenAi => responses::parse(&value, tools),
    }?;
    check_answer(response)
}

/// The decoder of a provider's stream.
pub(crate) fn decoder(provider: Provider, tools: Arc<WireTools>) -> Box<dyn Decoder> {
    match provider {
        Provider::Anthropic => Box::new(anthropic::StreamDecoder::default()),
        Provider::Gemini => Box::new(gemini::StreamDecoder::default()),
        Provider::OpenAiResponses | Provider::OpenAi => {
            Box::new(responses::StreamDecoder::new(tools))
        }
    }
}

/// An `{"error": …}` object in a 200 body or an event.
pub(crate) fn embedded_error(value: &Value) -> Option<ModelError> {
    let error = value.get("error").filter(|e| !e.is_null())?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_string);
    // Anthropic's overloaded and rate-limit errors mid-stream are as retryable as their
    // statuses (529, 429); a numeric `code` (Gemini) is the status itself.
    let status = match error.get("type").and_then(Value::as_str) {
        Some("overloaded_error") => 529,
        Some("rate_limit_error") => 429,
        Some("api_error") => 500,
        _ => error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(200),
    };
    Some(ModelError::Status { status, message })
}

/// A final response that says nothing is [`ModelError::EmptyAnswer`].
pub(crate) fn check_answer(response: Response) -> Result<Response, ModelError> {
    match &response.message {
        Some(message) if !crate::wire::is_empty_answer(message) => Ok(response),
        _ => Err(ModelError::EmptyAnswer {
            finish_reason: response.finish_reason.map(|r| r.as_str().to_string()),
        }),
    }
}

/// Tool-call arguments as the JSON object providers other than chat completions want;
/// arguments that are not an object (the agent has already repaired or replaced them)
/// are wrapped so the request is still accepted.
pub(crate) fn arguments_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ crate::MALFORMED_ARGUMENTS: arguments }),
    }
}

/// An image part as `(media type, base64 data)` when it is a `data:` URL.
pub(crate) fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (kind, data) = rest.split_once(',')?;
    let media_type = kind.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// The text of a message with its text parts, and its image parts apart.
pub(crate) fn text_and_images(message: &Message) -> (String, Vec<&str>) {
    let mut text = message.content.clone();
    let mut images = Vec::new();
    for part in &message.parts {
        match part {
            ContentPart::Text { text: more } => {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(more);
            }
            ContentPart::ImageUrl { url } => images.push(url.as_str()),
        }
    }
    (text, images)
}

/// The system messages' text, joined (the providers here take it as a field of its own).
pub(crate) fn system_text(request: &Request) -> Option<String> {
    let texts: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.is_empty())
        .map(|m| m.content.as_str())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// A finish reason, by the provider's word.
pub(crate) fn finish_reason(word: &str) -> FinishReason {
    match word {
        "end_turn" | "stop_sequence" | "STOP" | "completed" => FinishReason::Stop,
        "max_tokens" | "MAX_TOKENS" | "max_output_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" | "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII"
        | "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::parse(other),
    }
}

pub(crate) fn u64_at(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

pub(crate) fn str_at<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A malformed event's error.
pub(crate) fn bad_event(data: &str, error: impl std::fmt::Display) -> ModelError {
    ModelError::Decode(format!(
        "{error} in the event {:?}",
        crate::wire::snippet(data.as_bytes())
    ))
}

/// Parses one event's JSON data.
pub(crate) fn event_json(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| bad_event(data, e))
}
