//! [`ToolsNode`]: the last assistant message's tool calls, run through the executor.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use toolbelt_agent::{AgentError, EventKind, ToolResult, tool_callback_hooks};
use toolbelt_core::{DynTool, DynToolSet, RetryPolicy, Tool, ToolContext, ToolFilter};
use toolbelt_exec::{
    BatchEvent, BatchItem, BatchOptions, ExecutionMode, Executor, ExecutorBuilder, Registry, Retry,
    ToolSetOptions, ToolSnapshot,
};
use toolbelt_model::{Message, Role, ToolCall};

use crate::{Node, NodeContext, NodeError, State};

type ConfigureExecutor = Box<dyn FnOnce(ExecutorBuilder) -> ExecutorBuilder + Send>;

/// A node that runs the tool calls of the conversation's last assistant message (those not
/// answered yet) through one [`Executor`]: name resolution with suggestions, JSON repair,
/// validation, hooks, middleware (this node's retry policy is exec's [`Retry`]), lanes,
/// artifact offload, in this node's [`ExecutionMode`]. Each call's context carries its
/// `tool_call_id` ([`ToolContext::call_id`]) and the run's
/// [`Invocation`](toolbelt_agent::Invocation); chunks, progress and results are events as
/// they happen; the results are appended to the conversation as tool messages in call order.
pub struct ToolsNode {
    executor: Executor,
    offered: Offered,
    mode: Option<ExecutionMode>,
}

/// The tools a tools node runs: its registry seen through its filter. The model nodes that
/// declare them hold the same, so what a model is offered is what the node runs.
#[derive(Clone)]
pub(crate) struct Offered {
    registry: Arc<Registry>,
    filter: Option<ToolFilter>,
}

impl Offered {
    /// The tools visible now (tool sets listed afresh).
    pub(crate) async fn snapshot(&self, ctx: &ToolContext) -> ToolSnapshot {
        let tools = self.registry.snapshot(ctx).await;
        match &self.filter {
            Some(filter) => tools.filtered(ctx, filter),
            None => tools,
        }
    }
}

impl std::fmt::Debug for ToolsNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsNode")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ToolsNode`].
#[derive(Default)]
pub struct ToolsNodeBuilder {
    tools: Vec<DynTool>,
    sets: Vec<DynToolSet>,
    retry: Option<RetryPolicy>,
    mode: Option<ExecutionMode>,
    executor: Option<Executor>,
    configure: Vec<ConfigureExecutor>,
    filter: Option<ToolFilter>,
}

impl std::fmt::Debug for ToolsNodeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolsNodeBuilder")
            .field("tools", &self.tools.len())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl ToolsNodeBuilder {
    /// Adds a tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = DynTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds a tool set (listed and renamed on clash by the node's registry).
    pub fn tool_set(mut self, set: DynToolSet) -> Self {
        self.sets.push(set);
        self
    }

    /// Retries failing calls on `policy`'s schedule through exec's [`Retry`] middleware
    /// (transient failures of tools not declared non-idempotent).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Runs the calls of one message concurrently ([`ExecutionMode::Parallel`]) or one after
    /// another ([`ExecutionMode::Serial`]); without this, the executor's mode.
    pub fn parallel(mut self, parallel: bool) -> Self {
        self.mode = Some(if parallel {
            ExecutionMode::Parallel
        } else {
            ExecutionMode::Serial
        });
        self
    }

    /// Schedules the calls in `mode` (Serial, Parallel or Mixed).
    pub fn execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Adjusts the executor the node builds (hooks, middleware, artifact offload, limits).
    pub fn configure_executor(
        mut self,
        configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder + Send + 'static,
    ) -> Self {
        self.configure.push(Box::new(configure));
        self
    }

    /// Uses this executor (its registry's tools too, below the node's own); its middleware
    /// and hooks apply. Retry, configuration and tool callbacks then belong to it:
    /// [`ToolsNodeBuilder::retry`] or [`ToolsNodeBuilder::configure_executor`] as well is an
    /// error.
    pub fn executor(mut self, executor: Executor) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Runs only the tools `filter` lets through; a call to any other is answered as a call
    /// to an unknown tool. With an executor of your own whose registry holds more tools than
    /// this node declares to its model, this keeps the node to its own.
    pub fn filter(mut self, filter: ToolFilter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// The node. Fails on duplicate tool names, or on retry or configuration given with an
    /// executor of your own.
    pub fn build(self) -> Result<ToolsNode, AgentError> {
        let executor = match self.executor {
            Some(_) if self.retry.is_some() || !self.configure.is_empty() => {
                return Err(AgentError::Config(
                    "tools node: retry and configure_executor adjust the executor the node \
                     builds; with your own executor, configure that one instead"
                        .into(),
                ));
            }
            Some(executor) => executor,
            None => {
                let mut builder = Executor::builder(Arc::new(Registry::new()));
                if let Some(policy) = self.retry {
                    builder = builder.middleware(Retry::new(policy));
                }
                for configure in self.configure {
                    builder = configure(builder);
                }
                // Last, as in the agent loop: tool callbacks run after the executor's own
                // global hooks.
                let (before, after) = tool_callback_hooks();
                builder.before_hook(before).after_hook(after).build()
            }
        };
        let registry = Arc::new(Registry::layered(executor.registry().clone()));
        let config =
            |e: toolbelt_exec::RegistryError| AgentError::Config(format!("tools node: {e}"));
        for tool in self.tools {
            registry.register_arc(tool).map_err(config)?;
        }
        for set in self.sets {
            registry
                .add_tool_set(set, ToolSetOptions::new())
                .map_err(config)?;
        }
        Ok(ToolsNode {
            executor,
            offered: Offered {
                registry,
                filter: self.filter,
            },
            mode: self.mode,
        })
    }
}

impl ToolsNode {
    /// A builder.
    pub fn builder() -> ToolsNodeBuilder {
        ToolsNodeBuilder::default()
    }

    /// A node over these tools, in the executor's default mode, without retries.
    pub fn new(tools: impl IntoIterator<Item = DynTool>) -> Result<Self, AgentError> {
        Self::builder().tools(tools).build()
    }

    /// The node's registry: its tools over the executor's.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.offered.registry
    }

    /// What the node runs, for the model nodes that declare it.
    pub(crate) fn offered(&self) -> Offered {
        self.offered.clone()
    }
}

/// The calls of the last assistant message that no later tool message answers.
fn open_calls(messages: &[Message]) -> Vec<ToolCall> {
    let Some(at) = messages.iter().rposition(|m| m.role == Role::Assistant) else {
        return Vec::new();
    };
    let answered: Vec<&str> = messages[at + 1..]
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    messages[at]
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .cloned()
        .collect()
}

#[async_trait]
impl<S: State> Node<S> for ToolsNode {
    async fn run(&self, ctx: NodeContext<S>) -> Result<S::Update, NodeError> {
        let calls = open_calls(ctx.state().messages().unwrap_or_default());
        if calls.is_empty() {
            return Ok(S::Update::default());
        }
        let inv = ctx.invocation();
        let tool_ctx = ctx.callbacks().attach(
            ToolContext::new()
                .with_cancellation(inv.cancellation().child_token())
                .with_extension(inv.clone()),
        );
        let tools = self.offered.snapshot(&tool_ctx).await;
        for (set, error) in tools.errors() {
            let message = format!("tool set {set}: {error}");
            inv.emit(inv.new_event(EventKind::Warning { message }))
                .await?;
        }
        let batch = calls;
        let mut options = BatchOptions::new().snapshot(tools);
        if let Some(mode) = self.mode {
            options = options.mode(mode);
        }
        if let Some(repair) = inv.options().repair_json {
            options = options.repair_json(repair);
        }
        let mut results: Vec<Option<ToolResult>> = vec![None; batch.len()];
        let mut events = self
            .executor
            .execute_batch_stream(&tool_ctx, &batch, &options);
        while let Some(event) = events.next().await {
            if inv.is_cancelled() {
                // Keep polling: the calls see their cancellation and end on their own terms.
                continue;
            }
            let name = |index: usize| {
                batch
                    .get(index)
                    .map_or_else(String::new, |c| c.name.clone())
            };
            let kind = match event {
                BatchEvent::Chunk {
                    index,
                    call_id,
                    chunk,
                } => EventKind::ToolChunk {
                    call_id,
                    name: name(index),
                    chunk,
                },
                BatchEvent::Progress {
                    index,
                    call_id,
                    update,
                } => EventKind::ToolProgress {
                    call_id,
                    name: name(index),
                    update,
                },
                BatchEvent::Done {
                    index,
                    item: BatchItem::Done(result),
                } => {
                    let result = ToolResult::from_call(result);
                    if let Some(slot) = results.get_mut(index) {
                        *slot = Some(result.clone());
                    }
                    EventKind::ToolResult { result }
                }
                // No execution filter is set, so nothing is handed back.
                BatchEvent::Done {
                    item: BatchItem::Pending(_),
                    ..
                } => continue,
            };
            inv.emit(inv.new_event(kind)).await?;
        }
        drop(events);
        if inv.is_cancelled() {
            return Err(AgentError::Cancelled.into());
        }
        let messages = results
            .into_iter()
            .zip(&batch)
            .map(|(result, call)| match result {
                Some(result) => result.to_message(),
                None => Message::tool(&call.id, &call.name, "Error: the call was not executed"),
            })
            .collect();
        Ok(S::append_messages(messages).unwrap_or_default())
    }

    fn kind(&self) -> &'static str {
        "tools"
    }

    fn needs_messages(&self) -> bool {
        true
    }
}
