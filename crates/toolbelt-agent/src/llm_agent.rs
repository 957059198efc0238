//! [`LlmAgent`]: the loop that gives tools to a model and runs what it asks for.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use toolbelt_core::{DynTool, DynToolSet, RetryPolicy, Tool, ToolContext, ToolError, ToolFilter};
use toolbelt_exec::{
    BatchEvent, BatchItem, BatchOptions, CallResult, ExecutionMode, Executor, ExecutorBuilder,
    Registry, Retry, RunApprovals, ToolSetOptions, ToolSetRefresh, ToolSnapshot, record_calls,
};
use toolbelt_model::{
    DynModel, FinishReason, GenerationConfig, Message, Model, Request, Response, ToolCall, Tools,
    Usage,
};

use crate::callbacks::{Active, ToolCallbackHooks};
use crate::framework::{
    AWAIT_USER_REPLY_STATE_KEY, AwaitUserReplyTool, FRAMEWORK_TOOLS, TransferTool,
    is_framework_tool,
};
use crate::history::conversation;
use crate::{Agent, AgentError, Callbacks, DynAgent, ErrorKind, EventKind, Invocation, ToolResult};

/// The default limit of consecutive model turns that call tools.
pub const DEFAULT_MAX_TOOL_ITERATIONS: usize = 20;

/// An agent driven by a chat model: each turn it sends the conversation and its tools to
/// the model, runs the tool calls through the executor, and feeds the results back, until
/// the model answers without calling tools (or the iteration limit is reached).
///
/// Tools run through a [`toolbelt_exec::Executor`]: name resolution with suggestions,
/// validation, JSON repair, hooks, middleware, retries, streaming and batch scheduling all
/// come from there. The agent's own tools, tool sets and framework tools live in a
/// [`Registry::layered`] over the executor's registry ("agent tools over shared tools"), so
/// listing, renaming on clash and listing errors have one owner; the agent's per-run
/// settings travel in [`BatchOptions`] and fall back to the executor's config.
pub struct LlmAgent {
    name: String,
    description: String,
    instruction: String,
    model: DynModel,
    executor: Executor,
    /// The agent's layer: its tools, sets and framework tools over the executor's registry.
    registry: Arc<Registry>,
    sub_agents: Vec<DynAgent>,
    config: GenerationConfig,
    mode: Option<ExecutionMode>,
    tool_filter: Option<ToolFilter>,
    refresh_tool_sets_on_run: bool,
    max_tool_iterations: usize,
    repair_json: Option<bool>,
    callbacks: Callbacks,
    /// The extensions' callbacks, run after the plugins' and before the agent's own.
    extension_callbacks: Vec<Callbacks>,
    /// Whether the executor runs tool callbacks (it does when the agent built it).
    runs_tool_callbacks: bool,
    /// The framework tools this agent registered itself: the only tools that may carry a
    /// framework name (see [`LlmAgent::snapshot`]).
    framework_tools: Vec<DynTool>,
    /// This agent's own plugins ([`LlmAgentBuilder::plugin`]).
    plugins: Vec<crate::Plugin>,
    /// The declarations the last run offered, shared with its requests: a run that offers
    /// the same tools reuses them and their wire shapes (made once, not once per run).
    offered: std::sync::Mutex<Tools>,
}

impl std::fmt::Debug for LlmAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmAgent")
            .field("name", &self.name)
            .field("model", &self.model.name())
            .field("mode", &self.mode)
            .field("max_tool_iterations", &self.max_tool_iterations)
            .finish_non_exhaustive()
    }
}

type ConfigureExecutor = Box<dyn FnOnce(ExecutorBuilder) -> ExecutorBuilder + Send>;

/// Builds an [`LlmAgent`].
pub struct LlmAgentBuilder {
    name: String,
    description: String,
    instruction: String,
    model: Option<DynModel>,
    tools: Vec<DynTool>,
    tool_sets: Vec<DynToolSet>,
    sub_agents: Vec<DynAgent>,
    config: GenerationConfig,
    mode: Option<ExecutionMode>,
    tool_retry: Option<Retry>,
    tool_filter: Option<ToolFilter>,
    refresh_tool_sets_on_run: bool,
    max_tool_iterations: usize,
    repair_json: Option<bool>,
    await_user_reply: bool,
    executor: Option<Executor>,
    configure: Vec<ConfigureExecutor>,
    callbacks: Callbacks,
    extensions: Vec<crate::extension::Contribution>,
    plugins: Vec<crate::Plugin>,
}

impl LlmAgentBuilder {
    /// What the agent is for.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The system instruction.
    pub fn instruction(mut self, instruction: impl Into<String>) -> Self {
        self.instruction = instruction.into();
        self
    }

    /// The model (required).
    pub fn model(mut self, model: impl Model + 'static) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// The model, shared.
    pub fn model_arc(mut self, model: DynModel) -> Self {
        self.model = Some(model);
        self
    }

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

    /// Adds a tool set (listed and renamed on clash by the agent's [`Registry`]: a tool
    /// whose name is taken is offered as `{set}_{tool}`).
    pub fn tool_set(mut self, set: DynToolSet) -> Self {
        self.tool_sets.push(set);
        self
    }

    /// Adds a sub-agent; with any, the agent gets the `transfer_to_agent` tool.
    pub fn sub_agent(mut self, agent: DynAgent) -> Self {
        self.sub_agents.push(agent);
        self
    }

    /// How to generate (streaming, sampling, limits).
    pub fn generation_config(mut self, config: GenerationConfig) -> Self {
        self.config = config;
        self
    }

    /// Runs the calls of one turn concurrently (through [`ExecutionMode::Parallel`]) or one
    /// after another ([`ExecutionMode::Serial`]). Without this (or
    /// [`LlmAgentBuilder::execution_mode`]) the executor's configured mode applies. Results
    /// are shown as each call ends and sent to the model in call order either way; calls of
    /// tools not declared concurrency-safe still take turns with each other.
    pub fn parallel_tools(mut self, parallel: bool) -> Self {
        self.mode = Some(if parallel {
            ExecutionMode::Parallel
        } else {
            ExecutionMode::Serial
        });
        self
    }

    /// Schedules each turn's calls in `mode` (see [`ExecutionMode`]). Without this (or
    /// [`LlmAgentBuilder::parallel_tools`]) the executor's configured mode applies.
    pub fn execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Retries failing tool calls on `policy`'s schedule, through the executor's
    /// [`Retry`] middleware and its default rule: transient failures of tools not declared
    /// non-idempotent (so plain function tools, which declare nothing, are retried; an
    /// unknown outcome never is). With an executor of your own
    /// ([`LlmAgentBuilder::executor`]) add the middleware there instead; giving both is a
    /// configuration error.
    pub fn tool_retry(mut self, policy: RetryPolicy) -> Self {
        self.tool_retry = Some(Retry::new(policy));
        self
    }

    /// Retries failing tool calls as `retry` says: its schedule and its own rule, which
    /// reads the failure and the call's context (the run's [`Invocation`] is there, so a
    /// rule can depend on the agent, the session or the tool). Same placement and limits as
    /// [`LlmAgentBuilder::tool_retry`].
    ///
    /// ```
    /// use toolbelt_agent::{Invocation, LlmAgent};
    /// use toolbelt_core::RetryPolicy;
    /// use toolbelt_exec::{Retry, default_retry_on};
    /// let retry = Retry::new(RetryPolicy::default()).retry_on(|info| {
    ///     let in_ci = Invocation::from_context(info.ctx).is_some_and(|inv| inv.agent_name() == "ci");
    ///     default_retry_on(info) || (in_ci && info.result_error)
    /// });
    /// let builder = LlmAgent::builder("ci").tool_retry_with(retry);
    /// # let _ = builder;
    /// ```
    pub fn tool_retry_with(mut self, retry: Retry) -> Self {
        self.tool_retry = Some(retry);
        self
    }

    /// Narrows the tools offered to the model (framework tools are always kept).
    pub fn tool_filter(mut self, filter: ToolFilter) -> Self {
        self.tool_filter = Some(filter);
        self
    }

    /// Lists the agent's tool sets again at the start of every run
    /// ([`ToolSetRefresh::OnRun`]; default: list once and keep, [`ToolSetRefresh::Cached`]).
    ///
    /// A set decides what listing again means. An MCP tool set keeps the server's list until
    /// the server sends `notifications/tools/list_changed`, as the protocol intends, so a run
    /// costs no round trip for an unchanged list; this differs from the spec, where refresh
    /// always asks the server. For a server that changes its tools without saying so, build
    /// the set with `McpToolSetBuilder::relist_every_time(true)`.
    pub fn refresh_tool_sets_on_run(mut self, refresh: bool) -> Self {
        self.refresh_tool_sets_on_run = refresh;
        self
    }

    /// The most consecutive model turns that may call tools before the run stops with an
    /// error event (default [`DEFAULT_MAX_TOOL_ITERATIONS`]).
    pub fn max_tool_iterations(mut self, max: usize) -> Self {
        self.max_tool_iterations = max;
        self
    }

    /// Repairs malformed JSON arguments by default (a run may override it). Without this,
    /// the executor's setting applies.
    pub fn repair_json(mut self, on: bool) -> Self {
        self.repair_json = Some(on);
        self
    }

    /// Offers the `await_user_reply` tool.
    pub fn await_user_reply_tool(mut self, on: bool) -> Self {
        self.await_user_reply = on;
        self
    }

    /// Uses this executor: its registry's tools are offered too, below the agent's own
    /// (which shadow them by name and are never added to it), and its configuration (mode,
    /// repair, validation, hooks, middleware) applies wherever the agent sets nothing.
    /// Without one, the agent builds its own over a fresh registry.
    pub fn executor(mut self, executor: Executor) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Adjusts the executor the agent builds (hooks, middleware, limits). Giving an
    /// executor with [`LlmAgentBuilder::executor`] as well is a configuration error.
    pub fn configure_executor(
        mut self,
        configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder + Send + 'static,
    ) -> Self {
        self.configure.push(Box::new(configure));
        self
    }

    /// Runs these callbacks at the stages of the agent's runs, after those of the runner's
    /// plugins (see [`crate::callbacks`] for the stages and their order). Replaces earlier
    /// callbacks. Tool callbacks need the executor the agent builds: with
    /// [`LlmAgentBuilder::executor`] they are a configuration error.
    pub fn callbacks(mut self, callbacks: Callbacks) -> Self {
        self.callbacks = callbacks;
        self
    }

    /// Adds what the started `extensions` contribute (instructions, tools, tool sets,
    /// middleware, hooks, callbacks), after anything given before; see
    /// [`crate::extension`] for where each part goes and in which order. The agent keeps
    /// the parts, not the extensions: close them with [`crate::Extensions::close`] after
    /// the agent's last run.
    pub fn with_extensions(mut self, extensions: &crate::Extensions) -> Self {
        self.extensions.extend(extensions.contributions());
        self
    }

    /// Adds a plugin to this agent alone: its tools are framework tools of the agent, as a
    /// runner plugin's ([`crate::Runner::with_plugin`]) are of every agent of a run (no
    /// filter removes them, a tool set's tool of the same name is left out), and its
    /// callbacks run after the runner plugins' and before the extensions' and the agent's
    /// own. A sub-agent does not inherit it. This is how a library gives one agent a
    /// capability that brings tools, such as a knowledge base (toolbelt-knowledge's
    /// `KnowledgeAgentExt::knowledge`).
    pub fn plugin(mut self, plugin: crate::Plugin) -> Self {
        self.plugins.push(plugin);
        self
    }

    /// The agent. Fails without a model, on duplicate tool names, or when a tool uses the
    /// name of a framework tool.
    pub fn build(self) -> Result<LlmAgent, AgentError> {
        let model = self
            .model
            .ok_or_else(|| AgentError::Config(format!("agent {} has no model", self.name)))?;
        let runs_tool_callbacks = self.executor.is_none();
        if let (Some(_), Some(c)) = (
            &self.executor,
            self.extensions.iter().find(|c| c.needs_own_executor()),
        ) {
            return Err(AgentError::Config(format!(
                "agent {}: extension {} adds middleware or tool hooks, which need the executor \
                 the agent builds; with your own executor, add them to it instead",
                self.name, c.name
            )));
        }
        let executor = match self.executor {
            Some(_) if self.tool_retry.is_some() || !self.configure.is_empty() => {
                return Err(AgentError::Config(format!(
                    "agent {}: tool_retry and configure_executor adjust the executor the agent \
                     builds; with your own executor, configure that one instead",
                    self.name
                )));
            }
            Some(_) if self.callbacks.has_tool_callbacks() => {
                return Err(AgentError::Config(format!(
                    "agent {}: tool callbacks run as hooks of the executor the agent builds; \
                     with your own executor, add them to it as before/after hooks instead",
                    self.name
                )));
            }
            Some(executor) => executor,
            None => {
                let mut builder = Executor::builder(Arc::new(Registry::new()));
                if let Some(retry) = self.tool_retry {
                    builder = builder.middleware(retry);
                }
                for configure in self.configure {
                    builder = configure(builder);
                }
                for middleware in self.extensions.iter().flat_map(|c| &c.middleware) {
                    builder = builder.middleware_arc(middleware.clone());
                }
                // Added last: tool callbacks run after the executor's global before hooks
                // and after its global after hooks (see `crate::callbacks`).
                builder
                    .before_hook(ToolCallbackHooks)
                    .after_hook(ToolCallbackHooks)
                    .build()
            }
        };
        let registry = Arc::new(Registry::layered(executor.registry().clone()));
        let config_error = |e: toolbelt_exec::RegistryError| AgentError::Config(e.to_string());
        for tool in self.tools {
            if is_framework_tool(tool.name()) {
                return Err(AgentError::Config(format!(
                    "the tool name {} is reserved for the framework",
                    tool.name()
                )));
            }
            registry.register_arc(tool).map_err(config_error)?;
        }
        let set_options = tool_set_options(self.refresh_tool_sets_on_run);
        for set in self.tool_sets {
            registry
                .add_tool_set(set, set_options)
                .map_err(config_error)?;
        }
        crate::extension::register(&self.extensions, &registry, set_options)?;
        let tool_error = |e: ToolError| AgentError::Config(e.to_string());
        let mut framework_tools: Vec<DynTool> = Vec::new();
        if !self.sub_agents.is_empty() {
            let targets: Vec<(String, String)> = self
                .sub_agents
                .iter()
                .map(|a| (a.name().to_string(), a.description().to_string()))
                .collect();
            framework_tools.push(Arc::new(TransferTool::new(&targets).map_err(tool_error)?));
        }
        if self.await_user_reply {
            framework_tools.push(Arc::new(AwaitUserReplyTool::new().map_err(tool_error)?));
        }
        for tool in &framework_tools {
            registry.register_arc(tool.clone()).map_err(config_error)?;
        }
        Ok(LlmAgent {
            name: self.name,
            description: self.description,
            instruction: crate::extension::compose_instruction(self.instruction, &self.extensions),
            model,
            executor,
            registry,
            sub_agents: self.sub_agents,
            config: self.config,
            mode: self.mode,
            tool_filter: self.tool_filter,
            refresh_tool_sets_on_run: self.refresh_tool_sets_on_run,
            max_tool_iterations: self.max_tool_iterations,
            repair_json: self.repair_json,
            callbacks: self.callbacks,
            extension_callbacks: self.extensions.into_iter().map(|c| c.callbacks).collect(),
            runs_tool_callbacks,
            framework_tools,
            plugins: self.plugins,
            offered: std::sync::Mutex::default(),
        })
    }
}

/// The address of a tool's value, which every `Arc` of it shares: its identity.
fn tool_identity(tool: &DynTool) -> usize {
    data_address(tool.as_ref())
}

fn data_address(tool: &dyn Tool) -> usize {
    (tool as *const dyn Tool).cast::<()>() as usize
}

/// How the agent adds its tool sets to its registry.
fn tool_set_options(refresh_on_run: bool) -> ToolSetOptions {
    ToolSetOptions::new().refresh(if refresh_on_run {
        ToolSetRefresh::OnRun
    } else {
        ToolSetRefresh::Cached
    })
}

/// The tool calls of one model response, as recorded (see [`record_calls`]) and run.
struct TurnCalls {
    /// What the executor runs, exactly as the response event and the history record it.
    calls: Vec<ToolCall>,
    /// The calls (by id) whose arguments JSON repair changed.
    repaired: HashSet<String>,
    /// The calls (by id) whose arguments a person changed before they ran.
    edited: HashSet<String>,
}

/// What one turn's tool calls came to.
enum TurnEnd {
    /// Results are in; ask the model again.
    Continue,
    /// Stop the run here (calls handed back, or a transfer finished).
    Stop,
}

impl LlmAgent {
    /// A builder for an agent named `name`.
    pub fn builder(name: impl Into<String>) -> LlmAgentBuilder {
        LlmAgentBuilder {
            name: name.into(),
            description: String::new(),
            instruction: String::new(),
            model: None,
            tools: Vec::new(),
            tool_sets: Vec::new(),
            sub_agents: Vec::new(),
            config: GenerationConfig::default(),
            mode: None,
            tool_retry: None,
            tool_filter: None,
            refresh_tool_sets_on_run: false,
            max_tool_iterations: DEFAULT_MAX_TOOL_ITERATIONS,
            repair_json: None,
            await_user_reply: false,
            executor: None,
            configure: Vec::new(),
            callbacks: Callbacks::new(),
            extensions: Vec::new(),
            plugins: Vec::new(),
        }
    }

    /// The executor tool calls go through.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The agent's registry: its own tools, tool sets and framework tools, layered over the
    /// executor's registry. Tools registered here are offered from the next run on.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Adds a tool set, or replaces the set of the same name (which keeps its place in the
    /// naming order), for runs that start from now on. The replaced set is not closed.
    pub fn add_tool_set(&self, set: DynToolSet) {
        self.registry
            .replace_tool_set(set, tool_set_options(self.refresh_tool_sets_on_run));
    }

    /// Replaces all the agent's tool sets with `sets`, for runs that start from now on (the
    /// spec's `SetToolSets`): sets not named in `sets` are removed, a set whose name is
    /// already there takes that set's place in the naming order, new ones come after in
    /// the order given. The sets taken away are not closed: whoever opened them closes them.
    pub fn set_tool_sets(&self, sets: Vec<DynToolSet>) {
        let options = tool_set_options(self.refresh_tool_sets_on_run);
        for name in self.registry.tool_set_names() {
            if !sets.iter().any(|set| set.name() == name) {
                self.registry.remove_tool_set(&name);
            }
        }
        for set in sets {
            self.registry.replace_tool_set(set, options);
        }
    }

    /// Removes the tool set named `name` (not closing it); whether it was there.
    pub fn remove_tool_set(&self, name: &str) -> bool {
        self.registry.remove_tool_set(name).is_some()
    }

    /// The names of the agent's tool sets, in the order they were added.
    pub fn tool_set_names(&self) -> Vec<String> {
        self.registry.tool_set_names()
    }

    /// The tools the agent offers the model, outside any run: its own, its sets' (listed as
    /// the registry's listing rules say) and the executor's, narrowed by the agent's filter,
    /// plus the framework tools. Sets that failed to list are in
    /// [`ToolSnapshot::errors`].
    pub async fn tools(&self) -> ToolSnapshot {
        let ctx = ToolContext::new();
        self.snapshot(&ctx, None, &[]).await
    }

    /// Calls one of [`LlmAgent::tools`] outside a run, through the same executor pipeline as
    /// the model's calls (validation, repair, hooks, middleware, retries). Framework tools
    /// answer that they only work inside a run.
    pub async fn invoke_tool(&self, name: &str, arguments: &str) -> CallResult {
        let ctx = ToolContext::new();
        let tools = self.snapshot(&ctx, None, &[]).await;
        let call = ToolCall::new(crate::id::new_id(), name, arguments);
        let options = self.batch_options(None).snapshot(tools);
        let mut items = self
            .executor
            .execute_batch(&ctx, std::slice::from_ref(&call), &options)
            .await;
        match items.pop() {
            Some(BatchItem::Done(result)) => result,
            // Without an execution filter nothing is handed back; kept total all the same.
            _ => CallResult {
                call_id: call.id,
                tool_name: call.name,
                result: Err(ToolError::failed("the call was not executed")),
                repaired_arguments: None,
                artifact: None,
                duration: std::time::Duration::ZERO,
            },
        }
    }

    /// The tools this agent offers in `inv`: its own, its sets' and the executor's,
    /// narrowed by the agent's filter and the run's, plus the framework tools and the
    /// plugins' tools, which no filter removes. Sets that failed to list are in [`ToolSnapshot::errors`] (a run
    /// reports them as warnings).
    pub async fn visible_tools(&self, inv: &Invocation) -> ToolSnapshot {
        let ctx = self.tool_context(inv);
        self.snapshot(&ctx, inv.options().tool_filter.as_ref(), &inv.plugins)
            .await
    }

    async fn snapshot(
        &self,
        ctx: &ToolContext,
        run_filter: Option<&ToolFilter>,
        plugins: &[crate::Plugin],
    ) -> ToolSnapshot {
        let plugin_tools: Vec<&DynTool> = plugins
            .iter()
            .chain(&self.plugins)
            .flat_map(|p| &p.tools)
            .collect();
        let mut tools = if plugin_tools.is_empty() {
            self.registry.snapshot(ctx).await
        } else {
            // The plugins' tools in a layer of this run only, over the agent's: they shadow
            // agent tools of the same name and never enter the agent's registry.
            let layer = Registry::layered(self.registry.clone());
            for tool in &plugin_tools {
                layer.replace((*tool).clone());
            }
            layer.snapshot(ctx).await
        };
        // No filter removes a framework name, so only the framework's own tools may carry
        // one: a tool set's tool named `transfer_to_agent` (say, a hostile MCP server's)
        // would otherwise pass every allow-list. Told apart by identity, not by name.
        let own: HashSet<usize> = self
            .framework_tools
            .iter()
            .chain(plugin_tools.iter().copied())
            .map(tool_identity)
            .collect();
        let impostor = move |tool: &dyn Tool| {
            is_framework_tool(tool.name()) && !own.contains(&data_address(tool))
        };
        let impostors: Vec<String> = tools
            .tools()
            .filter(|tool| impostor(tool.as_ref()))
            .map(|tool| tool.name().to_string())
            .collect();
        if !impostors.is_empty() {
            tracing::warn!(
                tools = ?impostors,
                "tools offered under names reserved for the framework: left out"
            );
            tools = tools.filtered(ctx, &ToolFilter::new(move |_, tool| !impostor(tool)));
        }
        let kept = FRAMEWORK_TOOLS
            .iter()
            .copied()
            .chain(plugin_tools.iter().map(|t| t.name()));
        let keep_framework = ToolFilter::include_names(kept);
        for filter in [self.tool_filter.as_ref(), run_filter]
            .into_iter()
            .flatten()
        {
            tools = tools.filtered(ctx, &keep_framework.clone().or(filter.clone()));
        }
        tools
    }

    /// The callbacks in force for this agent in `inv`: the plugins', then its own.
    fn active_callbacks(&self, inv: &Invocation) -> Active {
        let mut all: Vec<Callbacks> = inv
            .plugins
            .iter()
            .chain(&self.plugins)
            .map(|p| p.callbacks.clone())
            .collect();
        all.extend(self.extension_callbacks.iter().cloned());
        all.push(self.callbacks.clone());
        Active(all)
    }

    /// The batch options of the agent (and of the run `inv`, if any): only what they set,
    /// so everything else is the executor's configuration.
    fn batch_options(&self, inv: Option<&Invocation>) -> BatchOptions {
        let mut options = BatchOptions::new();
        if let Some(mode) = self.mode {
            options = options.mode(mode);
        }
        let run = inv.map(Invocation::options);
        if let Some(repair) = run.and_then(|o| o.repair_json).or(self.repair_json) {
            options = options.repair_json(repair);
        }
        if let Some(filter) = run.and_then(|o| o.execution_filter.as_ref()) {
            options = options.filter(filter.clone());
        }
        options
    }

    fn tool_context(&self, inv: &Invocation) -> ToolContext {
        ToolContext::new()
            .with_cancellation(inv.cancellation().child_token())
            .with_extension(inv.clone())
            .with_extension(self.active_callbacks(inv))
    }

    /// What the calls of `inv` know about approvals: none given yet, and whether an ask
    /// nobody can answer now pauses the run (see [`crate::approval`]).
    fn run_approvals(inv: &Invocation) -> RunApprovals {
        if inv.can_pause() {
            RunApprovals::pausing()
        } else {
            RunApprovals::default()
        }
    }

    /// The declarations `tools` offers, shared by every request of the run and, while they
    /// stay the same, by later runs (comparing costs less than shaping them anew).
    fn offered_tools(&self, tools: &ToolSnapshot) -> Tools {
        let mut last = self.offered.lock().unwrap_or_else(|p| p.into_inner());
        let same = last.len() == tools.len()
            && last
                .iter()
                .zip(tools.tools())
                .all(|(kept, tool)| kept == tool.declaration());
        if !same {
            *last = Tools::new(tools.declarations());
        }
        last.clone()
    }

    async fn request(&self, inv: &Invocation, tools: &Tools) -> Result<Request, AgentError> {
        let events = inv.history().await?;
        let mut messages = Vec::with_capacity(events.len() + 1);
        if !self.instruction.is_empty() {
            messages.push(Message::system(&self.instruction));
        }
        messages.extend(conversation(&events, self.model.accepts_images()));
        // `parallel_tool_calls` is left unset: how the calls of one turn are *executed* is
        // the executor's business (`parallel_tools`); forbidding the model to ask for several
        // calls at once would only cost extra turns, and some servers reject the field.
        Ok(Request::new(messages)
            .with_tools(tools.clone())
            .with_config(self.config.clone()))
    }

    /// Whether malformed JSON arguments are repaired in `inv`: the run's setting, else the
    /// agent's, else the executor's.
    fn repairs_json(&self, inv: &Invocation) -> bool {
        inv.options()
            .repair_json
            .or(self.repair_json)
            .unwrap_or(self.executor.config().repair_json)
    }

    /// One model call, between the before_model and after_model callbacks: emits deltas and the complete response (with its tool calls as
    /// recorded, see [`record_tool_calls`]) and, when the answer was cut at the token limit,
    /// a warning. Returns the calls to run (recorded ids, the model's own arguments: the
    /// executor validates or repairs them), or `None` after emitting an error event.
    async fn call_model(
        &self,
        inv: &Invocation,
        callbacks: &Active,
        mut request: Request,
        warned: &mut HashSet<String>,
    ) -> Result<Option<TurnCalls>, AgentError> {
        let answered = callbacks.before_model(inv, &mut request).await?;
        let (mut message, finish_reason, usage) = match answered {
            Some(message) => (message, None, None),
            None => match self.generate(inv, request, warned).await? {
                Some(response) => response,
                None => return Ok(None),
            },
        };
        callbacks.after_model(inv, &mut message).await?;
        let repaired = record_calls(&mut message.tool_calls, self.repairs_json(inv));
        let calls = message.tool_calls.clone();
        let cut = finish_reason == Some(FinishReason::Length);
        inv.emit(inv.new_event(EventKind::ModelResponse {
            message,
            finish_reason,
            usage,
        }))
        .await?;
        if cut {
            let message = format!(
                "the model stopped at its token limit (finish_reason: length): agent {}'s \
                 answer may be cut short; raise max_tokens or ask for a shorter answer",
                self.name
            );
            inv.emit(inv.new_event(EventKind::Warning { message }))
                .await?;
        }
        Ok(Some(TurnCalls {
            calls,
            repaired,
            edited: HashSet::new(),
        }))
    }

    /// Calls the model: emits its deltas and returns its complete message, or `None` after
    /// emitting an error event.
    async fn generate(
        &self,
        inv: &Invocation,
        request: Request,
        warned: &mut HashSet<String>,
    ) -> Result<Option<(Message, Option<FinishReason>, Option<Usage>)>, AgentError> {
        // Waiting for the first byte can take long (retries honour `Retry-After`), so it
        // is cancellable like the stream itself.
        let started = tokio::select! {
            biased;
            () = inv.cancellation().cancelled() => return Err(AgentError::Cancelled),
            started = self.model.generate(request) => started,
        };
        let mut stream = match started {
            Ok(stream) => stream,
            Err(error) => {
                emit_error(inv, ErrorKind::Model, error.to_string()).await?;
                return Ok(None);
            }
        };
        let mut last: Option<Response> = None;
        loop {
            let item = tokio::select! {
                biased;
                () = inv.cancellation().cancelled() => return Err(AgentError::Cancelled),
                item = stream.next() => item,
            };
            match item {
                None => break,
                Some(Err(error)) => {
                    emit_error(inv, ErrorKind::Model, error.to_string()).await?;
                    return Ok(None);
                }
                Some(Ok(response)) if response.partial => {
                    if !response.delta.is_empty() {
                        let delta = response.delta;
                        inv.emit(inv.new_event(EventKind::ModelDelta { delta }))
                            .await?;
                    }
                }
                Some(Ok(response)) => last = Some(response),
            }
        }
        // What the client changed to get the answer (a tool renamed or left out, a move to
        // the next model): each said once per run, since most repeat on every turn.
        for message in last.iter().flat_map(|r| &r.warnings) {
            if warned.insert(message.clone()) {
                let message = message.clone();
                inv.emit(inv.new_event(EventKind::Warning { message }))
                    .await?;
            }
        }
        let Some(response) = last.and_then(|r| {
            let Response {
                message,
                finish_reason,
                usage,
                ..
            } = r;
            message.map(|m| (m, finish_reason, usage))
        }) else {
            let message = "the model's response ended without a message".to_string();
            emit_error(inv, ErrorKind::Model, message).await?;
            return Ok(None);
        };
        Ok(Some(response))
    }

    /// Runs one turn's tool calls (recorded ids) and emits each result; a call that awaits
    /// approval is emitted as a request instead, and the run stops after the turn.
    async fn run_tools(
        &self,
        inv: &Invocation,
        tools: &ToolSnapshot,
        calls: &TurnCalls,
        approvals: RunApprovals,
    ) -> Result<TurnEnd, AgentError> {
        let batch = &calls.calls;
        let options = self.batch_options(Some(inv)).snapshot(tools.clone());
        let ctx = self.tool_context(inv).with_extension(approvals);
        let mut events = self.executor.execute_batch_stream(&ctx, batch, &options);
        let mut pending: Vec<Option<ToolCall>> = vec![None; batch.len()];
        let mut paused = false;
        while let Some(event) = events.next().await {
            if inv.is_cancelled() {
                // Keep polling: the calls see their cancellation and end on their own terms
                // (a shell command's process group is killed) instead of being dropped.
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
                } => match result.result {
                    Ok(output) if output.pending => {
                        paused = true;
                        EventKind::ToolPending {
                            call_id: result.call_id,
                            name: result.tool_name,
                            status: output.llm_text(),
                        }
                    }
                    Err(ToolError::AwaitingApproval { reason, preview }) => {
                        paused = true;
                        EventKind::ApprovalRequested {
                            arguments: batch
                                .get(index)
                                .map_or_else(String::new, |c| c.arguments.clone()),
                            call_id: result.call_id,
                            name: result.tool_name,
                            reason,
                            preview,
                        }
                    }
                    _ => {
                        let mut result = tool_result(result);
                        if calls.repaired.contains(&result.call_id) {
                            result.repaired_arguments =
                                batch.get(index).map(|c| c.arguments.clone());
                        }
                        if calls.edited.contains(&result.call_id) {
                            let arguments = batch.get(index).map_or("", |c| &c.arguments);
                            let note = crate::approval::edited_note(arguments);
                            result.content.insert_str(0, &note);
                        }
                        EventKind::ToolResult { result }
                    }
                },
                BatchEvent::Done {
                    index,
                    item: BatchItem::Pending(call),
                } => {
                    if let Some(slot) = pending.get_mut(index) {
                        *slot = Some(call);
                    }
                    continue;
                }
            };
            inv.emit(inv.new_event(kind)).await?;
        }
        drop(events);
        if inv.is_cancelled() {
            return Err(AgentError::Cancelled);
        }

        let pending: Vec<ToolCall> = pending.into_iter().flatten().collect();
        let handed_back = !pending.is_empty();
        if handed_back {
            inv.emit(inv.new_event(EventKind::PendingToolCalls { calls: pending }))
                .await?;
        }

        let (transfer_to, await_reply, skip_summarization) = {
            let mut actions = inv.actions.lock().unwrap_or_else(|p| p.into_inner());
            (
                actions.transfer_to.take(),
                std::mem::take(&mut actions.await_user_reply),
                std::mem::take(&mut actions.skip_summarization),
            )
        };
        if await_reply {
            let mut changes = Map::new();
            changes.insert(AWAIT_USER_REPLY_STATE_KEY.into(), json!(self.name));
            inv.update_session_state(changes).await?;
        }
        if handed_back || paused {
            return Ok(TurnEnd::Stop);
        }
        if let Some(target) = transfer_to {
            let Some(agent) = self.sub_agents.iter().find(|a| a.name() == target).cloned() else {
                let message = format!("agent {} has no sub-agent {target}", self.name);
                emit_error(inv, ErrorKind::Config, message).await?;
                return Ok(TurnEnd::Stop);
            };
            agent.run(inv.transfer_to(&target)).await?;
            return Ok(TurnEnd::Stop);
        }
        if skip_summarization {
            // An AgentTool's result is the answer: the turn ends without another model call.
            return Ok(TurnEnd::Stop);
        }
        Ok(TurnEnd::Continue)
    }
}

/// What the executor's result of one call becomes in the agent's events and history.
fn tool_result(result: CallResult) -> ToolResult {
    ToolResult::from_call(result)
}

async fn emit_error(inv: &Invocation, kind: ErrorKind, message: String) -> Result<(), AgentError> {
    inv.emit(inv.new_event(EventKind::Error { kind, message }))
        .await
}

#[async_trait]
impl Agent for LlmAgent {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn sub_agents(&self) -> Vec<DynAgent> {
        self.sub_agents.clone()
    }

    async fn run(&self, inv: Invocation) -> Result<(), AgentError> {
        // OpenTelemetry GenAI `invoke_agent` span: the model and tool spans of this run are
        // its children. Built only when a subscriber enables target `gen_ai`.
        let span = tracing::info_span!(
            target: "gen_ai",
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {}", self.name),
            otel.kind = "internal",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.provider.name = "openai",
            gen_ai.agent.name = %self.name,
            gen_ai.agent.id = %inv.id(),
            gen_ai.conversation.id = %inv.session().session_id,
            gen_ai.request.model = %self.model.name(),
            error.type = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.run_traced(inv), span.clone()).await;
        if let Err(error) = &result
            && !span.is_disabled()
        {
            span.record("error.type", error_type(error));
            span.record("otel.status_code", "error");
        }
        result
    }
}

/// The `error.type` of a failed `invoke_agent` span.
fn error_type(error: &AgentError) -> &'static str {
    match error {
        AgentError::Model(_) => "model",
        AgentError::Session(_) => "session",
        AgentError::Config(_) => "config",
        AgentError::Panicked(_) => "panic",
        AgentError::Callback(_) => "callback",
        AgentError::Cancelled => "cancelled",
    }
}

impl LlmAgent {
    /// [`Agent::run`] inside its span.
    async fn run_traced(&self, inv: Invocation) -> Result<(), AgentError> {
        let callbacks = self.active_callbacks(&inv);
        if !self.runs_tool_callbacks && callbacks.has_tool_callbacks() {
            let message = format!(
                "agent {} uses an executor of its own: the plugins' tool callbacks do not run \
                 for its calls",
                self.name
            );
            inv.emit(inv.new_event(EventKind::Warning { message }))
                .await?;
        }
        match callbacks.before_agent(&inv).await? {
            Some(message) => {
                let kind = EventKind::ModelResponse {
                    message,
                    finish_reason: None,
                    usage: None,
                };
                inv.emit(inv.new_event(kind)).await?;
            }
            None => self.run_loop(&inv, &callbacks).await?,
        }
        for message in callbacks.after_agent(&inv).await? {
            let kind = EventKind::ModelResponse {
                message,
                finish_reason: None,
                usage: None,
            };
            inv.emit(inv.new_event(kind)).await?;
        }
        Ok(())
    }
}

impl LlmAgent {
    /// The model/tools loop of one run.
    async fn run_loop(&self, inv: &Invocation, callbacks: &Active) -> Result<(), AgentError> {
        let tools = self.visible_tools(inv).await;
        for (set, error) in tools.errors() {
            let message = format!("tool set {set}: {error}");
            inv.emit(inv.new_event(EventKind::Warning { message }))
                .await?;
        }
        if let TurnEnd::Stop = self.settle_approvals(inv, &tools).await? {
            return Ok(());
        }
        let mut tool_turns = 0;
        let mut warned = HashSet::new();
        let offered = self.offered_tools(&tools);
        loop {
            let request = self.request(inv, &offered).await?;
            let Some(calls) = self
                .call_model(inv, callbacks, request, &mut warned)
                .await?
            else {
                return Ok(());
            };
            if calls.calls.is_empty() {
                return Ok(());
            }
            if tool_turns == self.max_tool_iterations {
                let text = format!(
                    "agent {} stopped after {} rounds of tool calls without a final answer \
                     (max_tool_iterations); the last calls were not run",
                    self.name, self.max_tool_iterations
                );
                return emit_error(inv, ErrorKind::MaxIterations, text).await;
            }
            tool_turns += 1;
            match self
                .run_tools(inv, &tools, &calls, Self::run_approvals(inv))
                .await?
            {
                TurnEnd::Continue => {}
                TurnEnd::Stop => return Ok(()),
            }
        }
    }
}

impl LlmAgent {
    /// Applies the run's decisions to the approvals this agent asked for in the session's
    /// last turn (see [`crate::approval`]), before the model is asked anything.
    async fn settle_approvals(
        &self,
        inv: &Invocation,
        tools: &ToolSnapshot,
    ) -> Result<TurnEnd, AgentError> {
        use crate::Decision;
        use crate::approval::{denied, open_approvals, undecided, unknown_outcome};
        // Once per run, by its first agent (the runner routes a resume to the agent that
        // asked): an agent transferred to later in the run, or run by a tool, has nothing to
        // settle and must not read the decisions as its own.
        let first = !inv
            .run_value_or_default::<ApprovalsSettled>()
            .0
            .swap(true, std::sync::atomic::Ordering::SeqCst);
        if !(first && inv.can_pause()) {
            return Ok(TurnEnd::Continue);
        }
        let open = open_approvals(&inv.history().await?).of(&self.name);
        // A decision for a call nobody waits on (decided twice, a wrong id) must not pass
        // for an answer: the run stops there and says so, and runs nothing.
        let mut stray: Vec<&str> = inv
            .options()
            .decisions
            .keys()
            .map(String::as_str)
            .filter(|id| !open.pending.iter().any(|p| p.call_id == *id))
            .collect();
        if !stray.is_empty() {
            stray.sort_unstable();
            let message = format!(
                "no approval of agent {} awaits a decision for call {} (already decided, or \
                 never asked); nothing was run",
                self.name,
                stray.join(", ")
            );
            emit_error(inv, ErrorKind::Config, message).await?;
            return Ok(TurnEnd::Stop);
        }
        if open.is_empty() {
            return Ok(TurnEnd::Continue);
        }
        for (_, call_id, name) in &open.interrupted {
            let result = unknown_outcome(call_id, name);
            inv.emit(inv.new_event(EventKind::ToolResult { result }))
                .await?;
        }
        let mut approvals = Self::run_approvals(inv);
        let mut to_run = Vec::new();
        let mut edited = HashSet::new();
        for call in open.pending {
            let Some(decision) = inv.options().decisions.get(&call.call_id).cloned() else {
                let result = undecided(&call);
                inv.emit(inv.new_event(EventKind::ToolResult { result }))
                    .await?;
                continue;
            };
            let arguments = match &decision {
                Decision::Approve => Some(call.arguments.clone()),
                Decision::Edit { arguments } => {
                    edited.insert(call.call_id.clone());
                    Some(arguments.to_string())
                }
                Decision::Deny { .. } => None,
            };
            let kind = EventKind::ApprovalDecided {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                decision: decision.clone(),
            };
            inv.emit(inv.new_event(kind)).await?;
            match (arguments, decision) {
                (Some(arguments), _) => {
                    approvals = approvals.approve(&call.call_id);
                    to_run.push(ToolCall::new(call.call_id, call.name, arguments));
                }
                (None, Decision::Deny { message }) => {
                    let result = denied(&call, message.as_deref());
                    inv.emit(inv.new_event(EventKind::ToolResult { result }))
                        .await?;
                }
                (None, _) => {}
            }
        }
        if to_run.is_empty() {
            return Ok(TurnEnd::Continue);
        }
        let calls = TurnCalls {
            calls: to_run,
            repaired: HashSet::new(),
            edited,
        };
        self.run_tools(inv, tools, &calls, approvals).await
    }
}

/// Marks a run whose approvals were settled (see [`LlmAgent::settle_approvals`]).
#[derive(Default)]
struct ApprovalsSettled(std::sync::atomic::AtomicBool);

/// The JSON value of an agent's name, as stored for await_user_reply routing.
pub(crate) fn route_target(value: &Value) -> Option<&str> {
    value.as_str()
}
