//! The OpenTelemetry GenAI `chat` span of one model call.
//!
//! A span of target `gen_ai` (client kind) from the request to the end of the response
//! stream, with the attributes of the GenAI semantic conventions: the operation, provider and
//! requested model, then the answering model, finish reason and token usage when the final
//! response arrives, or `error.type` when the call fails. Nothing is built unless a
//! subscriber enables the target (the CLI does with its `otel` feature).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tracing::Span;
use tracing::field::Empty;

use crate::{ModelError, Response, ResponseStream};

/// The span of one call to `model` over the OpenAI chat completions protocol.
pub(crate) fn chat_span(model: &str) -> Span {
    chat_span_of("openai", model)
}

/// The span of one call to `model` of `provider` (its GenAI provider name).
pub(crate) fn chat_span_of(provider: &str, model: &str) -> Span {
    let provider = match provider {
        "openai-responses" => "openai",
        "gemini" => "gcp.gemini",
        other => other,
    };
    tracing::info_span!(
        target: "gen_ai",
        "chat",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    )
}

/// Marks `span` failed with `error`'s kind.
pub(crate) fn record_error(span: &Span, error: &ModelError) {
    if span.is_disabled() {
        return;
    }
    let status;
    let kind = match error {
        ModelError::NotConfigured { .. } => "not_configured",
        ModelError::InvalidConfig(_) => "invalid_config",
        // The conventions' choice for HTTP failures: the status code.
        ModelError::Status { status: code, .. } => {
            status = code.to_string();
            status.as_str()
        }
        ModelError::Transport(_) => "transport",
        ModelError::Timeout { .. } => "timeout",
        ModelError::UnexpectedBody { .. } => "unexpected_body",
        ModelError::EmptyAnswer { .. } => "empty_answer",
        ModelError::Decode(_) => "decode",
        ModelError::Cancelled => "cancelled",
    };
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}

/// Records what the final response says about the call.
fn record_final(span: &Span, response: &Response) {
    if !response.model.is_empty() {
        span.record("gen_ai.response.model", response.model.as_str());
    }
    if !response.id.is_empty() {
        span.record("gen_ai.response.id", response.id.as_str());
    }
    if let Some(reason) = &response.finish_reason {
        span.record("gen_ai.response.finish_reasons", reason.as_str());
    }
    if let Some(usage) = &response.usage {
        // As i64: OpenTelemetry's integers are signed, and a u64 would be exported as text.
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        span.record("gen_ai.usage.input_tokens", int(usage.prompt_tokens));
        span.record("gen_ai.usage.output_tokens", int(usage.completion_tokens));
    }
}

/// A response stream that keeps its call's span open until it is dropped (the call ends
/// when its reader stops reading) and records the outcome on it.
pub(crate) struct Traced {
    inner: ResponseStream,
    span: Span,
}

impl Traced {
    /// `inner`, read inside `span`; the plain stream back when nothing listens.
    pub(crate) fn wrap(inner: ResponseStream, span: Span) -> ResponseStream {
        if span.is_disabled() {
            return inner;
        }
        Box::pin(Traced { inner, span })
    }
}

impl Stream for Traced {
    type Item = Result<Response, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        let item = this.inner.as_mut().poll_next(cx);
        match &item {
            Poll::Ready(Some(Ok(response))) if !response.partial => {
                record_final(&this.span, response)
            }
            Poll::Ready(Some(Err(error))) => record_error(&this.span, error),
            _ => {}
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
