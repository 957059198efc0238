//! Scheduling a model's batch of tool calls: serial, parallel or mixed, with limits, an
//! execution filter, and results in the model's call order.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use tokio::sync::Semaphore;
use toolbelt_core::{DynTool, Tool, ToolContext, ToolError};

use crate::events::{BatchStream, Events};
use crate::executor::Source;
use crate::registry::ToolSnapshot;
use crate::{BatchItem, CallResult, Executor, ExecutorConfig, ToolCall};

/// How the calls of one batch may overlap.
///
/// | mode | runs in the shared pool | runs alone |
/// |---|---|---|
/// | `Serial` | nothing | every call, in order |
/// | `Parallel` | every call not declared unsafe (`concurrency_safe` is `None` or `Some(true)`) | `Some(false)` |
/// | `Mixed` | only calls declared `Some(true)` | `None` and `Some(false)` |
///
/// A call that runs alone is a barrier: the calls before it finish first, and the calls
/// after it start after it finished. Use `Serial` or `Mixed` until every tool's concurrency
/// safety has been checked.
///
/// Whatever the mode, calls of tools not declared concurrency-safe never overlap on one
/// tool set: in a `Parallel` pool, undeclared calls of one set take turns on the set's lane
/// (see the [crate docs](crate#one-call-at-a-time-per-tool-set)) while safe calls run beside
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionMode {
    /// One call at a time, in order.
    #[default]
    Serial,
    /// Every call not declared unsafe shares the pool (undeclared calls of one tool set
    /// still take turns on its lane).
    Parallel,
    /// Only calls declared safe share the pool.
    Mixed,
}

impl ExecutionMode {
    /// Whether a call of `tool` may share the pool in this mode. Unknown tools may (they
    /// fail at once without running anything).
    pub fn pools(self, tool: Option<&dyn Tool>) -> bool {
        let declared = tool.and_then(|t| t.declaration().meta.concurrency_safe);
        match self {
            ExecutionMode::Serial => false,
            ExecutionMode::Parallel => tool.is_none() || declared != Some(false),
            ExecutionMode::Mixed => tool.is_none() || declared == Some(true),
        }
    }
}

type FilterFn = dyn Fn(&ToolCall, Option<&dyn Tool>) -> bool + Send + Sync;
type GroupFn = dyn Fn(&ToolCall, &dyn Tool) -> Option<String> + Send + Sync;

/// Decides, per call, whether the executor runs it here (`true`) or hands it back as
/// [`BatchItem::Pending`] (`false`), for example because the client executes some tools
/// itself. The predicate sees the call and its tool (`None` when the name is unknown here,
/// which is common for client-side tools), and runs before the name is checked.
#[derive(Clone)]
pub struct ExecutionFilter {
    predicate: Arc<FilterFn>,
}

impl std::fmt::Debug for ExecutionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExecutionFilter(..)")
    }
}

impl ExecutionFilter {
    /// A filter from a predicate returning `true` for calls to execute here.
    pub fn new(
        predicate: impl Fn(&ToolCall, Option<&dyn Tool>) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            predicate: Arc::new(predicate),
        }
    }

    /// Hands back calls of these tools as pending; executes everything else.
    pub fn pending_names<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names: std::collections::HashSet<String> = names.into_iter().map(Into::into).collect();
        Self::new(move |call, _| !names.contains(&call.name))
    }

    /// Whether the call runs here.
    pub fn executes(&self, call: &ToolCall, tool: Option<&dyn Tool>) -> bool {
        (self.predicate)(call, tool)
    }
}

/// Per-run settings of a batch. Each one not set here falls back to the executor's
/// [`ExecutorConfig`](crate::ExecutorConfig): an agent or a run that sets nothing gets exactly
/// what the executor was configured with, and one that sets a value changes it for this batch
/// only.
///
/// | setting | falls back to |
/// |---|---|
/// | [`mode`](BatchOptions::mode) | [`ExecutorConfig::mode`](crate::ExecutorConfig::mode) |
/// | [`concurrency_limit`](BatchOptions::concurrency_limit) | [`ExecutorConfig::concurrency_limit`](crate::ExecutorConfig::concurrency_limit) |
/// | [`repair_json`](BatchOptions::repair_json) | [`ExecutorConfig::repair_json`](crate::ExecutorConfig::repair_json) |
/// | [`validate_arguments`](BatchOptions::validate_arguments) | [`ExecutorConfig::validate_arguments`](crate::ExecutorConfig::validate_arguments) |
/// | [`filter`](BatchOptions::filter) | none: every call runs here |
/// | [`snapshot`](BatchOptions::snapshot) | the executor's registry |
#[derive(Clone, Default)]
pub struct BatchOptions {
    mode: Option<ExecutionMode>,
    concurrency_limit: Option<usize>,
    repair_json: Option<bool>,
    validate_arguments: Option<bool>,
    filter: Option<ExecutionFilter>,
    snapshot: Option<ToolSnapshot>,
    group_of: Option<Arc<GroupFn>>,
    group_limits: HashMap<String, usize>,
}

impl std::fmt::Debug for BatchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchOptions")
            .field("mode", &self.mode)
            .field("concurrency_limit", &self.concurrency_limit)
            .field("repair_json", &self.repair_json)
            .field("validate_arguments", &self.validate_arguments)
            .field("filter", &self.filter.is_some())
            .field("snapshot", &self.snapshot)
            .field("group_limits", &self.group_limits)
            .finish()
    }
}

impl BatchOptions {
    /// The executor's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules this batch in `mode`.
    pub fn mode(mut self, mode: ExecutionMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Runs at most `limit` calls at once (0 = unlimited).
    pub fn concurrency_limit(mut self, limit: usize) -> Self {
        self.concurrency_limit = Some(limit);
        self
    }

    /// Repairs almost-JSON arguments in this batch (`true`) or takes them as given (`false`),
    /// whatever the executor's config says.
    pub fn repair_json(mut self, on: bool) -> Self {
        self.repair_json = Some(on);
        self
    }

    /// Validates arguments against input schemas in this batch (`true`) or not (`false`),
    /// whatever the executor's config says.
    pub fn validate_arguments(mut self, on: bool) -> Self {
        self.validate_arguments = Some(on);
        self
    }

    /// The argument settings of this batch: these options where set, else `config`'s.
    pub(crate) fn settings(&self, config: &ExecutorConfig) -> CallSettings {
        CallSettings {
            repair_json: self.repair_json.unwrap_or(config.repair_json),
            validate_arguments: self.validate_arguments.unwrap_or(config.validate_arguments),
        }
    }

    /// Hands back the calls `filter` does not execute as pending.
    pub fn filter(mut self, filter: ExecutionFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Resolves names in `snapshot` (the tools visible for this run) instead of the
    /// registry.
    pub fn snapshot(mut self, snapshot: ToolSnapshot) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Puts calls in groups (for example by tool name, or by the server a tool comes from)
    /// for [`BatchOptions::group_limit`]. `None` means no group.
    pub fn group_by(
        mut self,
        group_of: impl Fn(&ToolCall, &dyn Tool) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.group_of = Some(Arc::new(group_of));
        self
    }

    /// Runs at most `limit` calls of `group` at once (0 = unlimited), on top of the
    /// batch-wide limit. Groups come from [`BatchOptions::group_by`], or are tool names when
    /// no grouping was set.
    pub fn group_limit(mut self, group: impl Into<String>, limit: usize) -> Self {
        self.group_limits.insert(group.into(), limit);
        self
    }

    fn group(&self, call: &ToolCall, tool: &dyn Tool) -> Option<String> {
        match &self.group_of {
            Some(group_of) => group_of(call, tool),
            None => Some(tool.name().to_string()),
        }
    }
}

/// The argument settings one call runs with (see [`BatchOptions::settings`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSettings {
    pub(crate) repair_json: bool,
    pub(crate) validate_arguments: bool,
}

impl CallSettings {
    pub(crate) fn of(config: &ExecutorConfig) -> Self {
        Self {
            repair_json: config.repair_json,
            validate_arguments: config.validate_arguments,
        }
    }
}

/// A call of the batch, classified.
struct Planned<'a> {
    index: usize,
    call: &'a ToolCall,
    tool: Option<DynTool>,
}

/// What every call of one batch shares.
#[derive(Clone, Copy)]
struct Batch<'a> {
    source: Source<'a>,
    ctx: &'a ToolContext,
    settings: CallSettings,
    events: &'a Events,
}

impl Executor {
    /// Runs a model's batch of tool calls and returns one [`BatchItem`] per call, in the
    /// model's call order.
    ///
    /// - The execution filter (if any) runs first; calls it declines come back
    ///   [`BatchItem::Pending`] and are not run.
    /// - The rest are scheduled by the mode (see [`ExecutionMode`]) under the concurrency
    ///   limits. Calls of one pool overlap on the calling task; a CPU-heavy tool should move
    ///   its work to `tokio::task::spawn_blocking`.
    /// - A failing or panicking call becomes an error result for that call only.
    /// - Cancelling `ctx`'s token cancels every running call (each sees its token fire) and
    ///   every call not started yet fails with [`ToolError::Cancelled`]. Dropping the
    ///   returned future drops every running call.
    ///
    /// This is [`Executor::execute_batch_stream`] (the same scheduling, the same pipeline)
    /// keeping only the `Done` items, in call order; streaming tools are called with
    /// [`Tool::call`], which merges their chunks.
    pub async fn execute_batch(
        &self,
        ctx: &ToolContext,
        calls: &[ToolCall],
        options: &BatchOptions,
    ) -> Vec<BatchItem> {
        let events = Events::collect(calls.len());
        self.drive(ctx, calls, options, &events).await;
        let items = events.into_items();
        items
            .into_iter()
            .zip(calls)
            .map(|(item, call)| {
                item.unwrap_or_else(|| {
                    // Every call ends with a `Done`; this keeps a scheduling slip from
                    // becoming a panic.
                    BatchItem::Done(CallResult {
                        call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        result: Err(ToolError::failed("the call was not scheduled")),
                        repaired_arguments: None,
                        artifact: None,
                        duration: Default::default(),
                    })
                })
            })
            .collect()
    }

    /// Runs a model's batch of tool calls like [`Executor::execute_batch`] and yields what
    /// happens as it happens: each chunk a streaming tool produces
    /// ([`BatchEvent::Chunk`](crate::BatchEvent::Chunk)), each progress report ([`BatchEvent::Progress`](crate::BatchEvent::Progress)), and one
    /// [`BatchEvent::Done`](crate::BatchEvent::Done) per call as that call ends (completion order; `index` is the
    /// call's position in `calls`).
    ///
    /// Every call takes the same pipeline as in [`Executor::execute_batch`]: hooks, lanes,
    /// middleware, validation and offload. The innermost step calls
    /// [`Tool::call_stream`](toolbelt_core::Tool::call_stream) for tools whose
    /// [`is_streaming`](toolbelt_core::Tool::is_streaming) is true, forwards each chunk as it
    /// arrives, and merges the chunks ([`toolbelt_core::collect_stream`]) into the output that
    /// middleware and after hooks see, so a hook that replaces the output replaces what the
    /// `Done` carries, not the chunks already sent. A retried call may have sent chunks from
    /// its failed attempts before those of the attempt that counts.
    ///
    /// Progress reports go to the stream and to the progress sink of `ctx`, if it has one;
    /// when the consumer falls more than 32 events behind, further progress reports are
    /// dropped until it catches up (chunks and `Done` events wait instead: nothing else is
    /// lost). Nothing runs while the stream is not polled, so a consumer that stops reading
    /// also holds up a streaming call that is waiting to send (and the lane it holds, see the
    /// [crate docs](crate#one-call-at-a-time-per-tool-set)); dropping the stream drops every
    /// running call.
    pub fn execute_batch_stream<'a>(
        &'a self,
        ctx: &ToolContext,
        calls: &'a [ToolCall],
        options: &'a BatchOptions,
    ) -> BatchStream<'a> {
        let (events, receiver) = Events::channel();
        let ctx = ctx.clone();
        let driver = async move { self.drive(&ctx, calls, options, &events).await };
        BatchStream::new(Box::pin(driver), receiver)
    }

    /// Schedules the batch; every call ends with its `Done` event.
    async fn drive(
        &self,
        ctx: &ToolContext,
        calls: &[ToolCall],
        options: &BatchOptions,
        events: &Events,
    ) {
        let registry = self.inner.registry.clone();
        let source = match &options.snapshot {
            Some(snapshot) => Source::Snapshot(snapshot),
            None => Source::Registry(&registry),
        };
        let config = &self.inner.config;
        let batch = Batch {
            source,
            ctx,
            settings: options.settings(config),
            events,
        };
        let mode = options.mode.unwrap_or(config.mode);
        let limit = options
            .concurrency_limit
            .unwrap_or(config.concurrency_limit);
        let global = (limit > 0).then(|| Semaphore::new(limit));
        let groups: HashMap<&str, Semaphore> = options
            .group_limits
            .iter()
            .filter(|(_, limit)| **limit > 0)
            .map(|(name, limit)| (name.as_str(), Semaphore::new(*limit)))
            .collect();

        let mut pool: Vec<Planned<'_>> = Vec::new();
        let max_calls = match config.max_batch_calls {
            0 => usize::MAX,
            n => n,
        };
        for (index, call) in calls.iter().enumerate() {
            if index >= max_calls {
                let reason = format!(
                    "not run: this turn made {} tool calls and one turn may make at most \
                     {max_calls}; make fewer calls at a time",
                    calls.len()
                );
                let result = CallResult {
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    result: Err(ToolError::rejected(reason)),
                    repaired_arguments: None,
                    artifact: None,
                    duration: Default::default(),
                };
                events.done(index, BatchItem::Done(result)).await;
                continue;
            }
            let tool = source.resolve(&call.name);
            if let Some(filter) = &options.filter
                && !filter.executes(call, tool.as_deref())
            {
                events.done(index, BatchItem::Pending(call.clone())).await;
                continue;
            }
            let planned = Planned { index, call, tool };
            if mode.pools(planned.tool.as_deref()) {
                pool.push(planned);
            } else {
                // A barrier: finish the pool so far, then run this call alone.
                self.run_pool(batch, std::mem::take(&mut pool), &global, &groups, options)
                    .await;
                self.run_one(batch, &planned, None, None).await;
            }
        }
        self.run_pool(batch, pool, &global, &groups, options).await;
    }

    async fn run_pool(
        &self,
        batch: Batch<'_>,
        pool: Vec<Planned<'_>>,
        global: &Option<Semaphore>,
        groups: &HashMap<&str, Semaphore>,
        options: &BatchOptions,
    ) {
        if pool.is_empty() {
            return;
        }
        let runs = pool.iter().map(|planned| {
            let group = planned
                .tool
                .as_deref()
                .and_then(|tool| options.group(planned.call, tool))
                .and_then(|name| groups.get(name.as_str()));
            self.run_one(batch, planned, global.as_ref(), group)
        });
        join_all(runs).await;
    }

    async fn run_one(
        &self,
        batch: Batch<'_>,
        planned: &Planned<'_>,
        global: Option<&Semaphore>,
        group: Option<&Semaphore>,
    ) {
        // Permits are held for the whole call; a closed semaphore cannot happen (we never
        // close them), and waiting stops when the batch is cancelled.
        let permits = async {
            let g = match global {
                Some(s) => s.acquire().await.ok(),
                None => None,
            };
            let l = match group {
                Some(s) => s.acquire().await.ok(),
                None => None,
            };
            (g, l)
        };
        let _permits = tokio::select! {
            biased;
            () = batch.ctx.cancelled() => None,
            permits = permits => Some(permits),
        };
        let (ctx, chunks) = batch
            .events
            .for_call(batch.ctx, planned.index, &planned.call.id);
        let result = self
            .execute_from(batch.source, ctx, planned.call, batch.settings, chunks)
            .await;
        batch
            .events
            .done(planned.index, BatchItem::Done(result))
            .await;
    }
}
