//! # toolbelt-exec: the one path every tool call takes
//!
//! Whoever calls a tool (the agent loop, a program through [`Executor::invoke_tool`], the MCP
//! server, the CLI), the call goes through this crate:
//!
//! 1. **Resolve** the name in the [`Registry`] (or a per-run [`ToolSnapshot`]). An unknown
//!    name fails with [`ToolError::UnknownTool`](toolbelt_core::ToolError::UnknownTool),
//!    suggesting up to three close names.
//! 2. **Repair** the JSON arguments, if repair is on ([`BatchOptions::repair_json`] for a
//!    batch, else [`ExecutorConfig::repair_json`], off by default): only when strict parsing
//!    fails; valid JSON is never touched; a repair is recorded in
//!    [`CallResult::repaired_arguments`].
//! 3. **Validate** them against the tool's input schema, if validation is on
//!    ([`BatchOptions::validate_arguments`], else [`ExecutorConfig::validate_arguments`], on
//!    by default), with compiled validators cached per tool. Every violation is listed with
//!    its JSON path
//!    ([`ToolError::SchemaViolation`](toolbelt_core::ToolError::SchemaViolation)).
//! 4. **Permission**, if the executor has a check ([`ExecutorBuilder::permissions`]): the
//!    call is allowed, denied with a reason the model reads, or asked about; a call asked
//!    about runs only when the [`Approver`] approves it (perhaps with edited arguments,
//!    validated again), and is refused when there is no approver.
//! 5. **Tool-specific before hooks**, then **global before hooks** ([`BeforeHook`]): each
//!    may let the call go on, replace its arguments, answer in the tool's place, or reject it
//!    ([`ToolError::Rejected`](toolbelt_core::ToolError::Rejected)).
//! 6. **The lane**, for a tool not declared concurrency-safe (see below), then
//!    **middleware** ([`Middleware`]), first added outermost: [`Timeout`], [`Retry`],
//!    [`Audit`], [`ResultCache`] or your own.
//! 7. **The tool** ([`Tool::call`](toolbelt_core::Tool::call); in a streamed batch,
//!    [`Tool::call_stream`](toolbelt_core::Tool::call_stream) for a streaming tool, each
//!    chunk forwarded as it arrives and the chunks merged into the one output the steps
//!    around see); a panic becomes
//!    [`ToolError::Panicked`](toolbelt_core::ToolError::Panicked).
//! 8. **Global after hooks**, then **tool-specific after hooks** ([`AfterHook`]): each sees
//!    the result or error and may replace it.
//! 9. **Artifact offload** ([`ArtifactOffload`]): a result over the threshold (50 KiB by
//!    default) is stored; the model sees a preview and `artifact://ID`, the user the full
//!    result, and the [`ArtifactReadTool`] reads it back.
//!
//! **Hooks or middleware?** Both intercept a call; they differ in where they sit and what
//! they may do. A hook *decides about* a call: it sees the validated arguments and may
//! change them, answer, or refuse before anything else runs (steps 5 and 8 sit outside the
//! lane, so a hook that answers never waits for another call of the set), and it sees the
//! final result, after every retry. Middleware *wraps the running* of a call: it runs on the
//! lane, around the tool itself, and owns how it runs (a deadline, retries, a cache, an
//! audit record of each attempt). Policy (block `rm -rf`, fill a default, redact a result)
//! belongs in a hook; mechanics (time, retries, caching) in middleware. Among middleware,
//! the first added is the outermost, as in tower.
//!
//! Unknown tools, invalid arguments and rejections are failures, never successes, and are
//! distinct [`ToolError`](toolbelt_core::ToolError) variants. Cancelling the caller's token
//! interrupts the call ([`ToolError::Cancelled`](toolbelt_core::ToolError::Cancelled),
//! rendered for the model as `Error: tool execution was interrupted`).
//!
//! **Calling a tool's [`Tool::call`](toolbelt_core::Tool::call) directly bypasses all of
//! this**: no repair, no validation, no hooks, no middleware, no offload. Programs that need
//! their calls audited or permission-checked must go through the executor.
//!
//! A model's batch of calls runs with [`Executor::execute_batch`]: [`ExecutionMode::Serial`],
//! [`ExecutionMode::Parallel`] or [`ExecutionMode::Mixed`] by each tool's
//! `concurrency_safe`, under concurrency limits, with an [`ExecutionFilter`] that hands calls
//! back as [`BatchItem::Pending`], and results in the model's call order. The run's settings
//! travel in [`BatchOptions`]; each one it leaves unset is the executor's
//! ([`ExecutorConfig`]).
//!
//! ## Streaming
//!
//! [`Executor::execute_batch_stream`] runs the same batch, through the same steps, and yields
//! [`BatchEvent`]s as they happen: each chunk of a streaming tool and each progress report
//! ([`ToolContext::report_progress`](toolbelt_core::ToolContext::report_progress)) while its
//! call runs, and one [`BatchEvent::Done`] per call as it ends (completion order; `index`
//! says which call). [`Executor::execute_batch`] is the same driver keeping only the `Done`
//! items; it costs what it cost before streaming existed (within 1%, measured with
//! `benches/pipeline_instructions.rs`), and a streamed batch about 2,500 instructions more
//! per call (the event channel and the call's sinks).
//!
//! ## Whose tools
//!
//! The [`Registry`] owns every tool-set listing: when sets are listed (concurrently, each
//! within a timeout), how clashing names are resolved (`{set}_{tool}`, in registration
//! order), and what failed ([`ToolSnapshot::errors`]). [`Registry::layered`] puts a layer
//! of one agent's own tools and sets over shared ones.
//!
//! ## One call at a time per tool set
//!
//! Calls of tools not declared concurrency-safe (`concurrency_safe` is `Some(false)` or
//! `None`) never overlap on one tool set, however they arrive: a `Parallel` batch, an MCP
//! client pipelining requests to a server that calls [`Executor::execute`] once per
//! request, concurrent agent runs. Each such call waits for its set's *lane* (a fair async
//! lock) and holds it while the middleware and the tool run; calls declared
//! `concurrency_safe: Some(true)` never wait for it. Two Edits of one file that each read
//! it, change their own line and write it back would otherwise both report success with
//! one change lost.
//!
//! Every set added with [`Registry::add_tool_set`] has a lane of its own (an MCP server's
//! tools never wait on the built-in Bash); tools registered directly share the registry's;
//! tools of a [`ToolSnapshot::from_tools`] snapshot, which knows no sets, share the
//! executor's. The wait is not counted by the [`Timeout`] middleware, ends at once when the
//! call is cancelled, and is skipped by a call nested in a call that holds the same lane
//! (it would otherwise wait for itself). Taking an uncontended lane costs about 600
//! instructions per call (measured with `benches/pipeline_instructions.rs`).
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use toolbelt_core::{FunctionTool, ToolContext, ToolError};
//! use toolbelt_exec::{BeforeAction, Executor, HookCall, Registry, Timeout, ToolCall, BatchOptions, ExecutionMode};
//!
//! /// Arguments of `greet`.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct GreetArgs {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! async fn greet(_ctx: ToolContext, args: GreetArgs) -> Result<String, ToolError> {
//!     Ok(format!("Hello, {}!", args.name))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let registry = Arc::new(Registry::new());
//! registry.register(FunctionTool::new("greet", "Greets someone", greet)?)?;
//!
//! let executor = Executor::builder(registry)
//!     .repair_json(true)
//!     .before_hook(|_: &ToolContext, call: &HookCall<'_>| {
//!         if call.arguments.contains("Mallory") {
//!             BeforeAction::Reject("Mallory is not welcome".into())
//!         } else {
//!             BeforeAction::Continue
//!         }
//!     })
//!     .middleware(Timeout::new(Duration::from_secs(30)))
//!     .build();
//!
//! // A program's call.
//! let out = executor.invoke_tool(ToolContext::new(), "greet", r#"{"name":"Ada"}"#).await?;
//! assert_eq!(out.llm_text(), "Hello, Ada!");
//!
//! // Failures are typed.
//! let err = executor.invoke_tool(ToolContext::new(), "gret", "{}").await.unwrap_err();
//! assert_eq!(err.for_model(), r#"Error: unknown tool "gret"; did you mean "greet"?"#);
//! let err = executor.invoke_tool(ToolContext::new(), "greet", r#"{"name":"Mallory"}"#).await.unwrap_err();
//! assert!(matches!(err, ToolError::Rejected { .. }));
//!
//! // A model's batch, with repaired arguments, in call order.
//! let calls = [
//!     ToolCall::new("call_1", "greet", "{name: 'Grace'}"),
//!     ToolCall::new("call_2", "greet", r#"{"name":"Linus"}"#),
//! ];
//! let items = executor
//!     .execute_batch(&ToolContext::new(), &calls, &BatchOptions::new().mode(ExecutionMode::Parallel))
//!     .await;
//! let first = items[0].as_done().unwrap();
//! assert_eq!(first.model_text(), "Hello, Grace!");
//! assert!(first.was_repaired());
//! assert_eq!(items[1].call_id(), "call_2");
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

#![warn(missing_docs)]

mod approval;
mod artifact;
mod audit;
mod batch;
mod cache;
mod call;
mod caller;
mod config;
mod events;
mod executor;
mod hooks;
mod interrupt;
mod lane;
mod middleware;
mod record;
mod registry;
mod repair;
mod retry;
mod suggest;
mod timeout;
mod validate;

pub use approval::{ApprovalDecision, ApprovalRequest, Approver, RunApprovals};
pub use artifact::{
    ARTIFACT_READ_TOOL, ARTIFACT_SCHEME, ArtifactOffload, ArtifactReadTool, ArtifactRef,
    ArtifactSlice, ArtifactStore, DEFAULT_OFFLOAD_THRESHOLD, DEFAULT_PREVIEW_BYTES,
    DEFAULT_READ_LENGTH, DynArtifactStore, FsArtifactStore, MemoryArtifactStore,
};
#[cfg(feature = "s3")]
pub use artifact::{S3ArtifactStore, S3ArtifactStoreBuilder};
pub use audit::{Audit, AuditOutcome, AuditRecord, is_secret_key, redact_secrets};
pub use batch::{BatchOptions, ExecutionFilter, ExecutionMode};
pub use cache::{CACHE_META_KEY, CacheStats, ResultCache};
pub use call::{BatchItem, CallResult};
// The one tool-call type, shared with the model clients and the agent.
pub use caller::WeakExecutor;
pub use config::{DEFAULT_MAX_BATCH_CALLS, ExecutorConfig};
pub use events::{BatchEvent, BatchStream};
pub use executor::{Executor, ExecutorBuilder};
pub use hooks::{AfterAction, AfterHook, BeforeAction, BeforeHook, HookCall};
pub use middleware::{DynMiddleware, Middleware, Next, ToolRequest};
pub use record::{MALFORMED_ARGUMENTS_KEY, record_calls};
pub use registry::{
    DEFAULT_LISTING_TIMEOUT, Registry, RegistryError, ToolSetOptions, ToolSetRefresh, ToolSnapshot,
};
pub use repair::{RepairedArguments, repair_arguments};
pub use retry::{Retry, RetryInfo, RetryOn, default_retry_on};
pub use suggest::{edit_distance, suggest};
pub use timeout::Timeout;
/// The retry schedule [`Retry`] runs on (the same type model calls use).
pub use toolbelt_core::RetryPolicy;
pub use toolbelt_core::ToolCall;
pub use validate::ValidatorCache;
