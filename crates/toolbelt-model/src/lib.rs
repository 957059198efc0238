//! # toolbelt-model: talking to a chat model that calls tools
//!
//! - [`Model`]: a [`Request`] (messages, tools as [`toolbelt_core::Declaration`]s,
//!   [`ToolChoice`], `parallel_tool_calls`, [`GenerationConfig`]) in, a [`ResponseStream`]
//!   out: partial [`Response`]s with deltas, then one final response with the whole
//!   assistant [`Message`] and its [`ToolCall`]s assembled.
//! - [`OpenAiModel`]: an OpenAI-compatible chat completions client over HTTP: streaming
//!   (server-sent events, tool-call argument deltas assembled by index) and non-streaming,
//!   token [`Usage`], retries of 429 and 5xx with backoff that honours `Retry-After`
//!   ([`RetryPolicy`]), connect, request and idle timeouts, image content parts, strict
//!   checks of what a body is, and lenient parsing that ignores fields it does not know.
//! - [`ProviderModel`] (through [`connect`] with a [`Provider`]): the OpenAI Responses API,
//!   Anthropic Messages and Gemini `generateContent`, streamed and whole, with the same
//!   retries, timeouts and answer checks. What a provider needs sent back on later turns
//!   rides on the message as [`ReplayItem`]s tagged with their provider (others skip them),
//!   so one session can go on with another provider.
//! - [`wire_tools`]: a request's tools as each [`ToolDialect`] accepts them (OpenAI strict
//!   mode, Gemini's schema subset, Anthropic's names), renamed tools mapped back on the calls.
//! - `testing` (feature `test-server`): a scriptable server on 127.0.0.1 that answers chat
//!   completions and, as strictly as the real APIs document, the other three dialects.
//!
//! ## Quick start
//!
//! ```no_run
//! use futures::StreamExt;
//! use toolbelt_model::{GenerationConfig, Message, Model, OpenAiModel, Request};
//!
//! # async fn demo() -> Result<(), toolbelt_model::ModelError> {
//! // OPENAI_BASE_URL=http://127.0.0.1:8000/v1 TOOLBELT_MODEL=qwen3 (OPENAI_API_KEY if needed)
//! let model = OpenAiModel::from_env()?;
//! let request = Request::new(vec![Message::user("Say hi")])
//!     .with_config(GenerationConfig::streaming());
//! let mut stream = model.generate(request).await?;
//! while let Some(response) = stream.next().await {
//!     let response = response?;
//!     if response.partial {
//!         print!("{}", response.delta.content);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! The assembled final message always follows the deltas, so deltas concatenated equal it:
//!
//! ```
//! use toolbelt_model::{Delta, MessageAssembler};
//! let mut assembler = MessageAssembler::new();
//! for piece in ["Hel", "lo"] {
//!     assembler.push(&Delta { content: piece.into(), ..Delta::default() });
//! }
//! assert_eq!(assembler.finish().content, "Hello");
//! ```
//!
//! ## Configuration
//!
//! [`OpenAiConfig::from_env`] reads `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `TOOLBELT_MODEL`
//! and `TOOLBELT_MODEL_IMAGES`. A model name is required, and a base URL or a key (a key alone means
//! OpenAI's endpoint). What is missing is reported by name ([`ModelError::NotConfigured`]).
//!
//! ## Retries and timeouts
//!
//! Four limits, each named in the error it causes ("no response headers within 25 s
//! (request timeout)") and each settable on [`OpenAiConfig`]:
//!
//! | setting | limits | default |
//! |---|---|---|
//! | [`OpenAiConfig::connect_timeout`] | one TCP/TLS connection | 10 s |
//! | [`OpenAiConfig::request_timeout`] | one attempt, from sending to the response headers | 25 s |
//! | [`OpenAiConfig::idle_timeout`] | the gap between two chunks of a body | 45 s |
//! | [`OpenAiConfig::retry`] ([`RetryPolicy`], shared with tool calls) | retries and the waits between them | 3 retries, waits from 0.5 s doubling, jittered |
//!
//! What is retried: a connection refused or reset before any response, 429 and 5xx.
//! `retry-after-ms` or `Retry-After` (seconds) replace the computed wait, capped by
//! [`RetryPolicy::max_retry_after`]. A timed-out attempt (connect or request timeout) is
//! retried once at most, whatever the policy says: a server that let one attempt time out
//! rarely answers the next, and each such attempt costs a whole timeout. Other 4xx are not
//! retried, nor is anything after the response started: a stream that breaks or goes quiet
//! for longer than the idle timeout ends with an error (the caller has already seen its
//! deltas).
//!
//! [`OpenAiConfig::with_retry_observer`] hears of each retry before its wait ([`RetryNotice`]:
//! the attempt, why it failed, how long until the next), to show a user why nothing arrives;
//! the client itself prints nothing.
//!
//! So a dead server fails in under a minute with the defaults: one that accepts connections
//! and never answers costs two attempts of 25 s and one wait of at most 1 s (≤ 51 s); one that
//! drops packets, two connect timeouts of 10 s (≤ 21 s); any mix with fast failures (refused
//! connections, 5xx) adds at most the waits 1 + 2 + 4 s to the two timed-out attempts
//! (≤ 57 s). A server that sends its headers and then nothing fails after the idle timeout.
//! A non-streaming server sends its headers only with the whole answer: raise the request
//! timeout for long non-streamed answers.
//!
//! A stream whose answer is complete (a `finish_reason` arrived) and whose server holds the
//! connection open without `[DONE]` finishes one second after its last chunk (time for a
//! trailing usage chunk), not after the idle timeout.
//!
//! ## What counts as an answer
//!
//! A streaming request must be answered with `text/event-stream`. A JSON completion instead
//! (a proxy that ignored `stream: true`) is parsed and yielded as the final response; an
//! `{"error": …}` body is [`ModelError::Status`] with its message; an HTML page or any other
//! body is [`ModelError::UnexpectedBody`] naming the content type with the body's start.
//! An answer with no text, no reasoning and no tool calls is [`ModelError::EmptyAnswer`],
//! never a blank success; chunks with empty `choices` (usage, keep-alives) are skipped.
//!
//! ## Images
//!
//! A message's [`Message::parts`] ([`ContentPart`]) go on the wire as OpenAI content parts
//! after its text (`{"type": "image_url", "image_url": {"url": …}}`, `data:` URLs allowed),
//! in user messages of a model that takes images ([`Model::accepts_images`]; for
//! [`OpenAiModel`] [`OpenAiConfig::accepts_images`], on unless `TOOLBELT_MODEL_IMAGES=0`).
//! Elsewhere each image becomes a text note. When a server answers a request with images
//! with 400, the client sends it once more with notes in place of the images, logs a
//! warning, and sends notes from then on.
//!
//! ## Known differences between OpenAI-compatible servers
//!
//! What this client does about them is in brackets.
//!
//! - **OpenAI**: the reference. Usage in streams only with `stream_options.include_usage`
//!   [always sent when streaming], then arrives in a last chunk with empty `choices`
//!   \[accepted\]. Sends `retry-after-ms` as well as `Retry-After` on 429 [the finer one
//!   wins]. Reasoning models reject `temperature`/`max_tokens` variants [leave them unset;
//!   `reasoning_effort` is passed through].
//! - **vLLM**: tool calls only with a server started with `--enable-auto-tool-choice` and a
//!   `--tool-call-parser`; otherwise the call arrives as text in `content`. `tool_choice:
//!   "required"` needs a recent version. Reasoning parsers put thinking in
//!   `reasoning_content` [read into [`Message::reasoning`]]. Template switches go in
//!   `chat_template_kwargs` [use [`OpenAiConfig::extra_body`]].
//! - **llama.cpp server** (`llama-server --jinja`): tool calls need `--jinja` and a template
//!   with tool support; older builds end streams without `[DONE]` [the end of the body
//!   finishes the stream] and ignore `parallel_tool_calls` [only sent when set]. No API key
//!   unless started with `--api-key`.
//! - **Ollama** (`/v1` endpoint): older versions sent a tool call whole in one chunk and
//!   without `index`, and the native API sends `arguments` as a JSON object [both
//!   accepted: fragments without index are numbered by their ids, objects re-serialised].
//!   Needs any non-empty API key with some proxies; `keep_alive` via `extra_body`.
//! - **DeepSeek-style** endpoints: `reasoning_content` alongside `content` [kept apart, never
//!   sent back, as they require]; strict about `tool` messages answering every call of the
//!   preceding assistant turn [the agent layer sanitises history before each call]; may send
//!   `finish_reason: "tool_calls"` with text too [both kept].
//! - Everywhere: an assistant message that only calls tools is sent with `content: null`
//!   (some servers reject `""`); `name` is not sent on `tool` messages (some strict servers
//!   reject it); `parallel_tool_calls` and `tool_choice` are only sent together with tools.

#![warn(missing_docs)]

mod assemble;
mod declare;
mod dialect;
mod error;
mod fallback;
mod http;
mod message;
mod model;
mod openai;
mod provider;
mod request;
mod response;
mod retry;
#[cfg(feature = "test-server")]
pub mod testing;
mod trace;
mod wire;

pub use assemble::MessageAssembler;
pub use declare::{ToolDialect, WireTools, strip_added_nulls, wire_tools};
pub use error::ModelError;
pub use fallback::{FallbackModel, FallbackNotice, FallbackObserver};
pub use message::{ContentPart, Message, ReplayItem, Role, ToolCall};
pub use model::{DynModel, Model, ResponseStream};
pub use openai::{
    ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, ENV_MODEL_IMAGES, OPENAI_DEFAULT_BASE_URL, OpenAiConfig,
    OpenAiModel,
};
pub use provider::{Provider, ProviderModel, connect};
pub use request::{GenerationConfig, Request, ToolChoice, Tools};
pub use response::{Delta, FinishReason, Response, ToolCallDelta, Usage};
pub use retry::{RetryNotice, RetryObserver};
pub use toolbelt_core::RetryPolicy;

/// The key the agent records in place of tool-call arguments that were not JSON; sent as
/// such to providers that want arguments as an object.
pub(crate) const MALFORMED_ARGUMENTS: &str = "_malformed_arguments";
