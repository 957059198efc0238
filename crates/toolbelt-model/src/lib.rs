//! # toolbelt-model: talking to a chat model that calls tools
//!
//! - [`Model`]: a [`Request`] (messages, tools as [`toolbelt_core::Declaration`]s,
//!   [`ToolChoice`], `parallel_tool_calls`, [`GenerationConfig`]) in, a [`ResponseStream`]
//!   out: partial [`Response`]s with deltas, then one final response with the whole
//!   assistant [`Message`] and its [`ToolCall`]s assembled.
//! - [`OpenAiModel`]: an OpenAI-compatible chat completions client over HTTP: streaming
//!   (server-sent events, tool-call argument deltas assembled by index) and non-streaming,
//!   token [`Usage`], retries of 429 and 5xx with backoff that honours `Retry-After`
//!   ([`RetryPolicy`]), connect and idle timeouts, and lenient parsing that ignores fields
//!   it does not know.
//! - `testing` (feature `test-server`): a scriptable OpenAI-compatible server on 127.0.0.1.
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
//! [`OpenAiConfig::from_env`] reads `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
//! `TOOLBELT_MODEL`. A model name is required, and a base URL or a key (a key alone means
//! OpenAI's endpoint). What is missing is reported by name ([`ModelError::NotConfigured`]).
//!
//! ## Retries and timeouts
//!
//! A request that fails before its response starts (connection refused or reset, 429, 5xx,
//! no response headers within the idle timeout) is retried up to
//! [`RetryPolicy::max_retries`] times; `retry-after-ms` or `Retry-After` (seconds) replace the
//! computed delay, capped by [`RetryPolicy::max_retry_after`]. Other 4xx are not retried. A
//! stream that breaks or goes quiet for longer than [`OpenAiConfig::idle_timeout`] after it
//! started is not retried (the caller has already seen its deltas): the stream ends with an
//! error.
//!
//! ## Known differences between OpenAI-compatible servers
//!
//! What this client does about them is in brackets.
//!
//! - **OpenAI**: the reference. Usage in streams only with `stream_options.include_usage`
//!   [always sent when streaming], then arrives in a last chunk with empty `choices`
//!   [accepted]. Sends `retry-after-ms` as well as `Retry-After` on 429 [the finer one
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
mod error;
mod message;
mod model;
mod openai;
mod request;
mod response;
mod retry;
#[cfg(feature = "test-server")]
pub mod testing;
mod wire;

pub use assemble::MessageAssembler;
pub use error::ModelError;
pub use message::{FunctionCall, Message, Role, ToolCall};
pub use model::{DynModel, Model, ResponseStream};
pub use openai::{
    ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, OPENAI_DEFAULT_BASE_URL, OpenAiConfig, OpenAiModel,
};
pub use request::{GenerationConfig, Request, ToolChoice};
pub use response::{Delta, FinishReason, Response, ToolCallDelta, Usage};
pub use retry::RetryPolicy;
