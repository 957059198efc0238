//! # toolbelt-agent: the agent loop
//!
//! - [`LlmAgent`]: a model, an instruction, tools and tool sets (in a
//!   [`toolbelt_exec::Registry::layered`] over the executor's registry); each turn it sends
//!   the conversation and the visible tools to the model and runs the calls through
//!   [`toolbelt_exec::Executor::execute_batch_stream`] (the executor's mode, repair and
//!   validation unless the agent or the run sets them; unknown tools answered with
//!   suggestions; streamed chunks, progress and each result as events when they happen),
//!   until the model answers without tools or [`LlmAgentBuilder::max_tool_iterations`] is
//!   reached (an error event). [`LlmAgent::tools`] and [`LlmAgent::invoke_tool`] work
//!   outside a run.
//! - [`Runner`]: `run(user_id, session_id, input, options)` → an [`EventStream`] of
//!   [`Event`]s: a header plus an [`EventKind`] (input, model deltas and responses, tool
//!   chunks, progress and results as they happen, warnings, errors) and always, last,
//!   [`EventKind::RunCompleted`]. The JSON form is stable (see [`Event`]).
//! - Sessions ([`session`]): in memory, SQLite (feature `sqlite`), PostgreSQL (`postgres`)
//!   or Redis (`redis`), one by URL with [`session::open_url`]; every complete event
//!   is stored before the caller sees it; a store that fails ends the run with an
//!   [`ErrorKind::Session`] error the caller still receives (before the model is called when
//!   the store fails at the start). History is made valid for any provider before every
//!   model call ([`history::conversation`]).
//! - In tools: [`Invocation::from_context`] gives the agent name, invocation id, session
//!   and runtime state; the context's `call_id()` is the tool_call_id;
//!   [`Invocation::child`] and [`Invocation::run_child`] run another agent whose events
//!   carry the parent's invocation id.
//! - Agents as tools: [`AgentTool`] offers any agent to another as a tool (skip
//!   summarization, forwarding of the child's events, history scope, a depth limit).
//! - Multi-agent: sub-agents and `transfer_to_agent`; `await_user_reply` with one-shot
//!   routing ([`Runner::with_await_user_reply_routing`]); framework tools are never removed
//!   by tool filters.
//! - Callbacks and plugins ([`callbacks`]): code at each stage of a run (before/after the
//!   agent, each model call and each tool call) on one agent
//!   ([`LlmAgentBuilder::callbacks`]) or, as a [`Plugin`] on the runner
//!   ([`Runner::with_plugin`]), on every agent of the run; a plugin may add framework tools.
//! - Extensions ([`extension`]): an [`Extension`] bundles instructions, tools, tool sets,
//!   hooks, middleware and callbacks with an init/close lifecycle, started together as
//!   [`Extensions`] and given to an agent ([`LlmAgentBuilder::with_extensions`]) or a runner
//!   ([`Runner::with_extensions`]).
//! - Per run ([`RunOptions`]): a tool filter, an execution filter (calls it declines are
//!   handed back in an [`EventKind::PendingToolCalls`] event; resume with role=tool
//!   messages), JSON repair, runtime state.
//!
//! ## Quick start
//!
//! ```
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use toolbelt_agent::{EventKind, LlmAgent, RunOptions, Runner};
//! use toolbelt_core::{FunctionTool, ToolContext, ToolError};
//! use toolbelt_model::testing::{Reply, ScriptedServer};
//! use toolbelt_model::{OpenAiConfig, OpenAiModel};
//!
//! /// Arguments of `multiply`.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Factors {
//!     /// The first factor.
//!     a: f64,
//!     /// The second factor.
//!     b: f64,
//! }
//!
//! async fn multiply(_ctx: ToolContext, f: Factors) -> Result<f64, ToolError> {
//!     Ok(f.a * f.b)
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! // A local stand-in for a real model: it calls the tool, then answers.
//! let server = ScriptedServer::start([
//!     Reply::tool_call("call_1", "multiply", r#"{"a":25,"b":4}"#),
//!     Reply::text("25 × 4 = 100"),
//! ]).await?;
//! let model = OpenAiModel::new(OpenAiConfig::new(server.base_url(), "any"))?;
//!
//! let agent = LlmAgent::builder("calculator")
//!     .instruction("You are a maths assistant.")
//!     .model(model)
//!     .tool(FunctionTool::new("multiply", "Multiplies two numbers", multiply)?)
//!     .build()?;
//! let runner = Runner::new("math-app", Arc::new(agent));
//!
//! let mut events = runner.run("user1", "session1", "What is 25 times 4?", RunOptions::new());
//! let mut answer = String::new();
//! while let Some(event) = events.next().await {
//!     match &event.kind {
//!         EventKind::ModelResponse { message, .. } => {
//!             for call in &message.tool_calls {
//!                 println!("calling {} with {}", call.name, call.arguments);
//!             }
//!             answer = message.content.clone();
//!         }
//!         EventKind::ToolResult { result } => assert_eq!(result.content, "100.0"),
//!         EventKind::Error { kind, message } => panic!("{kind:?}: {message}"),
//!         EventKind::RunCompleted => break,
//!         _ => {}
//!     }
//! }
//! assert_eq!(answer, "25 × 4 = 100");
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

#![warn(missing_docs)]

mod agent;
mod agent_tool;
pub mod approval;
pub mod callbacks;
mod error;
mod event;
pub mod extension;
pub mod framework;
pub mod history;
mod id;
mod invocation;
mod llm_agent;
mod long_running;
mod plugin;
mod runner;
pub mod session;
pub mod tool_search;

pub use agent::{Agent, DynAgent, find_agent};
pub use agent_tool::{AgentTool, DEFAULT_MAX_AGENT_DEPTH, HistoryScope, InnerTextMode};
pub use approval::{Decision, PendingApproval, pending_approvals};
pub use callbacks::{CallbackChain, CallbackError, Callbacks, tool_callback_hooks};
pub use error::AgentError;
pub use event::{ErrorKind, Event, EventKind, ToolResult};
pub use extension::{Extension, ExtensionError, Extensions};
pub use invocation::{Invocation, RunOptions};
pub use llm_agent::{DEFAULT_MAX_TOOL_ITERATIONS, LlmAgent, LlmAgentBuilder};
pub use long_running::{AwaitedResult, awaiting_results};
pub use plugin::Plugin;
pub use runner::{EventStream, RunInput, Runner};
#[cfg(feature = "postgres")]
pub use session::PostgresSessionService;
#[cfg(feature = "redis")]
pub use session::RedisSessionService;
#[cfg(feature = "sqlite")]
pub use session::SqliteSessionService;
pub use session::{InMemorySessionService, Session, SessionKey, SessionService};
