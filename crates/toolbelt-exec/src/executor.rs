//! The executor: the one path every tool call takes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use toolbelt_core::{
    DynTool, Permission, PermissionCheck, PermissionRequest, ToolContext, ToolError, ToolOutput,
};

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver, RunApprovals, nobody_to_ask};
use crate::artifact::{ArtifactOffload, ArtifactRef};
use crate::batch::CallSettings;
use crate::events::ChunkSink;
use crate::hooks::{AfterAction, AfterHook, BeforeAction, BeforeHook, HookCall};
use crate::interrupt::{own_token, until_cancelled};
use crate::lane::Lane;
use crate::middleware::{DynMiddleware, Middleware, Next, ToolRequest, panic_message};
use crate::registry::{Entry, Registry, ToolSnapshot};
use crate::repair::{parse_strict, repair_arguments};
use crate::suggest::suggest;
use crate::validate::ValidatorCache;
use crate::{CallResult, ExecutorConfig, ToolCall};

type DynBefore = Arc<dyn BeforeHook>;
type DynAfter = Arc<dyn AfterHook>;

pub(crate) struct Inner {
    pub(crate) registry: Arc<Registry>,
    pub(crate) config: ExecutorConfig,
    before_for_tool: HashMap<String, Vec<DynBefore>>,
    before_global: Vec<DynBefore>,
    after_global: Vec<DynAfter>,
    after_for_tool: HashMap<String, Vec<DynAfter>>,
    middleware: Vec<DynMiddleware>,
    validators: ValidatorCache,
    offload: Option<ArtifactOffload>,
    permission: Option<Arc<dyn PermissionCheck>>,
    approver: Option<Arc<dyn Approver>>,
    /// The lane of tools whose source knows no sets (a snapshot made from a list of tools).
    lane: Arc<Lane>,
}

/// Runs tool calls through the pipeline: resolve → repair → validate → permission → before hooks →
/// middleware → tool → after hooks → offload. Cheap to clone (one `Arc`).
///
/// See the [crate docs](crate) for the exact order and an example.
#[derive(Clone)]
pub struct Executor {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("config", &self.inner.config)
            .field("middleware", &self.inner.middleware.len())
            .field(
                "before_hooks",
                &(self.inner.before_global.len() + self.inner.before_for_tool.len()),
            )
            .field(
                "after_hooks",
                &(self.inner.after_global.len() + self.inner.after_for_tool.len()),
            )
            .field("offload", &self.inner.offload)
            .finish()
    }
}

/// Builds an [`Executor`].
pub struct ExecutorBuilder {
    registry: Arc<Registry>,
    config: ExecutorConfig,
    before_for_tool: HashMap<String, Vec<DynBefore>>,
    before_global: Vec<DynBefore>,
    after_global: Vec<DynAfter>,
    after_for_tool: HashMap<String, Vec<DynAfter>>,
    middleware: Vec<DynMiddleware>,
    offload: Option<ArtifactOffload>,
    permission: Option<Arc<dyn PermissionCheck>>,
    approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ExecutorBuilder {
    /// Replaces every setting at once.
    pub fn config(mut self, config: ExecutorConfig) -> Self {
        self.config = config;
        self
    }

    /// Turns argument validation against input schemas on or off (default on).
    pub fn validate_arguments(mut self, on: bool) -> Self {
        self.config.validate_arguments = on;
        self
    }

    /// Turns JSON argument repair on or off (default off).
    pub fn repair_json(mut self, on: bool) -> Self {
        self.config.repair_json = on;
        self
    }

    /// Sets the default batch scheduling mode (default serial).
    pub fn mode(mut self, mode: crate::ExecutionMode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Sets the most calls of a batch that run at once (0 = unlimited, the default).
    pub fn concurrency_limit(mut self, limit: usize) -> Self {
        self.config.concurrency_limit = limit;
        self
    }

    /// Adds a before hook for every tool. Global before hooks run after tool-specific ones.
    pub fn before_hook(mut self, hook: impl BeforeHook + 'static) -> Self {
        self.before_global.push(Arc::new(hook));
        self
    }

    /// Adds a before hook for the tool named `tool` only.
    pub fn before_hook_for(
        mut self,
        tool: impl Into<String>,
        hook: impl BeforeHook + 'static,
    ) -> Self {
        self.before_for_tool
            .entry(tool.into())
            .or_default()
            .push(Arc::new(hook));
        self
    }

    /// Adds an after hook for every tool. Global after hooks run before tool-specific ones.
    pub fn after_hook(mut self, hook: impl AfterHook + 'static) -> Self {
        self.after_global.push(Arc::new(hook));
        self
    }

    /// Adds an after hook for the tool named `tool` only.
    pub fn after_hook_for(
        mut self,
        tool: impl Into<String>,
        hook: impl AfterHook + 'static,
    ) -> Self {
        self.after_for_tool
            .entry(tool.into())
            .or_default()
            .push(Arc::new(hook));
        self
    }

    /// Adds a middleware. The first added is the outermost layer.
    pub fn middleware(mut self, middleware: impl Middleware + 'static) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Adds a shared middleware (see [`ExecutorBuilder::middleware`]).
    pub fn middleware_arc(mut self, middleware: DynMiddleware) -> Self {
        self.middleware.push(middleware);
        self
    }

    /// Offloads large results as configured. Register
    /// [`ArtifactOffload::read_tool`] in the registry so the model can read them back.
    pub fn artifact_offload(mut self, offload: ArtifactOffload) -> Self {
        self.offload = Some(offload);
        self
    }

    /// Decides every call with `check` after validation and before hooks: a denied call
    /// fails with [`ToolError::Rejected`] carrying the reason; a call it asks about goes to
    /// the [`approver`](Self::approver), and is refused when there is none.
    pub fn permissions(mut self, check: Arc<dyn PermissionCheck>) -> Self {
        self.permission = Some(check);
        self
    }

    /// Asks `approver` about the calls the [`permissions`](Self::permissions) ask about.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The executor.
    pub fn build(self) -> Executor {
        Executor {
            inner: Arc::new(Inner {
                registry: self.registry,
                config: self.config,
                before_for_tool: self.before_for_tool,
                before_global: self.before_global,
                after_global: self.after_global,
                after_for_tool: self.after_for_tool,
                middleware: self.middleware,
                validators: ValidatorCache::new(),
                offload: self.offload,
                permission: self.permission,
                approver: self.approver,
                lane: Lane::new(),
            }),
        }
    }
}

/// A resolved call and how to run it.
struct Step<'a> {
    entry: Entry,
    call: &'a ToolCall,
    settings: CallSettings,
    chunks: Option<Arc<ChunkSink>>,
}

/// Where a call's tool is looked up.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Registry(&'a Registry),
    Snapshot(&'a ToolSnapshot),
}

impl Source<'_> {
    pub(crate) fn resolve(&self, name: &str) -> Option<DynTool> {
        match self {
            Source::Registry(registry) => registry.get(name),
            Source::Snapshot(snapshot) => snapshot.get(name).cloned(),
        }
    }

    /// The tool named `name` with its lane.
    fn resolve_entry(&self, name: &str) -> Option<Entry> {
        match self {
            Source::Registry(registry) => registry.entry(name),
            Source::Snapshot(snapshot) => snapshot.entry(name).cloned(),
        }
    }

    fn suggestions(&self, name: &str) -> Vec<String> {
        match self {
            Source::Registry(registry) => {
                let names = registry.tool_names();
                suggest(name, names.iter().map(String::as_str), 3)
            }
            Source::Snapshot(snapshot) => suggest(name, snapshot.names(), 3),
        }
    }
}

impl Executor {
    /// A builder over `registry`, with default settings.
    pub fn builder(registry: Arc<Registry>) -> ExecutorBuilder {
        ExecutorBuilder {
            registry,
            config: ExecutorConfig::default(),
            before_for_tool: HashMap::new(),
            before_global: Vec::new(),
            permission: None,
            approver: None,
            after_global: Vec::new(),
            after_for_tool: HashMap::new(),
            middleware: Vec::new(),
            offload: None,
        }
    }

    /// An executor over `registry` with default settings and no hooks or middleware.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self::builder(registry).build()
    }

    /// The registry the executor resolves names in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }

    /// The settings.
    pub fn config(&self) -> &ExecutorConfig {
        &self.inner.config
    }

    /// The artifact offload settings, if offload is on.
    pub fn artifact_offload(&self) -> Option<&ArtifactOffload> {
        self.inner.offload.as_ref()
    }

    /// Calls the tool named `name` with raw JSON arguments through the whole pipeline.
    ///
    /// The program's way in: use it instead of calling [`Tool::call`](toolbelt_core::Tool::call)
    /// directly when the call must pass validation, permission hooks and audit middleware.
    /// The call id is taken from `ctx` when it has one.
    ///
    /// Unknown tools, bad arguments, schema violations and rejections are errors, never
    /// outputs: match on [`ToolError`] to tell them apart.
    pub async fn invoke_tool(
        &self,
        ctx: ToolContext,
        name: &str,
        raw_args: &str,
    ) -> Result<ToolOutput, ToolError> {
        let call = ToolCall::new(ctx.call_id().unwrap_or_default(), name, raw_args);
        self.execute(ctx, &call).await.result
    }

    /// Runs one model tool call through the pipeline, resolving the name in the registry.
    /// Never panics: every failure is in [`CallResult::result`].
    pub async fn execute(&self, ctx: ToolContext, call: &ToolCall) -> CallResult {
        let registry = self.inner.registry.clone();
        let settings = CallSettings::of(&self.inner.config);
        self.execute_from(Source::Registry(&registry), ctx, call, settings, None)
            .await
    }

    /// Runs one call, resolving the name in `snapshot` (the tools visible for this run).
    pub async fn execute_in(
        &self,
        snapshot: &ToolSnapshot,
        ctx: ToolContext,
        call: &ToolCall,
    ) -> CallResult {
        let settings = CallSettings::of(&self.inner.config);
        self.execute_from(Source::Snapshot(snapshot), ctx, call, settings, None)
            .await
    }

    pub(crate) async fn execute_from(
        &self,
        source: Source<'_>,
        ctx: ToolContext,
        call: &ToolCall,
        settings: CallSettings,
        chunks: Option<Arc<ChunkSink>>,
    ) -> CallResult {
        let started = Instant::now();
        // OpenTelemetry GenAI `execute_tool` span; built only when a subscriber enables
        // target `gen_ai` (the CLI's `otel` feature), else it is a no-op.
        let span = tracing::info_span!(
            target: "gen_ai",
            "execute_tool",
            otel.name = %format_args!("execute_tool {}", call.name),
            otel.kind = "internal",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %call.name,
            gen_ai.tool.call.id = %call.id,
            gen_ai.tool.type = "function",
            error.type = tracing::field::Empty,
        );
        let entry = source.resolve_entry(&call.name);
        let mut repaired_arguments = None;
        let mut artifact = None;
        let result = match entry {
            None => Err(ToolError::UnknownTool {
                name: call.name.clone(),
                suggestions: source.suggestions(&call.name),
            }),
            Some(entry) => {
                let step = Step {
                    entry,
                    call,
                    settings,
                    chunks,
                };
                let pipeline = self.pipeline(ctx, step, &mut repaired_arguments, &mut artifact);
                let pipeline = tracing::Instrument::instrument(pipeline, span.clone());
                match std::panic::AssertUnwindSafe(pipeline).catch_unwind().await {
                    Ok(result) => result,
                    Err(payload) => Err(ToolError::Panicked(panic_message(payload.as_ref()))),
                }
            }
        };
        if !span.is_disabled() {
            let failure = match &result {
                Ok(output) if output.is_error => Some("result_error"),
                Ok(_) => None,
                Err(error) => Some(crate::audit::error_kind(error)),
            };
            if let Some(kind) = failure {
                span.record("error.type", kind);
                span.record("otel.status_code", "error");
            }
        }
        CallResult {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result,
            repaired_arguments,
            artifact,
            duration: started.elapsed(),
        }
    }

    /// Steps 2 to 9 of the pipeline for a resolved tool.
    async fn pipeline(
        &self,
        ctx: ToolContext,
        step: Step<'_>,
        repaired: &mut Option<String>,
        artifact: &mut Option<ArtifactRef>,
    ) -> Result<ToolOutput, ToolError> {
        let inner = &*self.inner;
        if ctx.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let Step {
            entry: Entry { tool, lane, set },
            call,
            settings,
            chunks,
        } = step;
        // Each call gets a token of its own: cancelling one call (a timeout) never cancels its
        // siblings, and cancelling the caller's token cancels every call (forwarded by
        // `until_cancelled` below).
        // Shared strings: the context and the middleware request hold the same allocations.
        let declaration = tool.declaration();
        let call_id: Arc<str> = Arc::from(call.id.as_str());
        let (ctx, caller, own) = own_token(ctx);
        let mut ctx = ctx.with_tool_name(declaration.name.shared());
        if !call.id.is_empty() && ctx.call_id() != Some(call.id.as_str()) {
            ctx = ctx.with_call_id(call_id.clone());
        }

        // Arguments the model broke beyond repair, as the agent records them.
        if let Some(refusal) = crate::record::refuse_placeholder(&call.arguments) {
            return Err(refusal);
        }
        // Repair, then validation.
        let mut arguments: Arc<str> = if settings.repair_json {
            let fixed = repair_arguments(&call.arguments)?;
            let cleaned = if settings.validate_arguments {
                inner
                    .validators
                    .validate_without_nulls(&tool, &fixed.value)?
            } else {
                None
            };
            if fixed.repaired {
                *repaired = Some(fixed.text.clone());
            }
            cleaned.map_or_else(|| Arc::from(fixed.text), |v| Arc::from(v.to_string()))
        } else if settings.validate_arguments {
            let value = parse_strict(&call.arguments)?;
            match inner.validators.validate_without_nulls(&tool, &value)? {
                Some(cleaned) => Arc::from(cleaned.to_string()),
                None => Arc::from(call.arguments.as_str()),
            }
        } else {
            Arc::from(call.arguments.as_str())
        };

        let work = async {
            let name = tool.name();
            if let Some(replacement) = self
                .permitted(&ctx, &tool, set.as_deref(), &call.id, &arguments)
                .await?
            {
                arguments = replacement;
            }
            // Before hooks: the tool's own, then global ones.
            let before = inner
                .before_for_tool
                .get(name)
                .into_iter()
                .flatten()
                .chain(inner.before_global.iter());
            let mut answered = None;
            for hook in before {
                let view = HookCall {
                    declaration,
                    set: set.as_deref(),
                    call_id: &call.id,
                    arguments: &arguments,
                };
                match hook.before(&ctx, &view).await {
                    BeforeAction::Continue => {}
                    BeforeAction::ReplaceArguments(replacement) => {
                        arguments = Arc::from(replacement)
                    }
                    BeforeAction::Respond(output) => {
                        answered = Some(Ok(output));
                        break;
                    }
                    BeforeAction::Reject(reason) => {
                        answered = Some(Err(ToolError::rejected(reason)));
                        break;
                    }
                }
            }
            let mut result = match answered {
                Some(result) => result,
                None => {
                    let request = ToolRequest {
                        tool: tool.clone(),
                        call_id: call_id.clone(),
                        arguments: arguments.clone(),
                        chunks,
                    };
                    let run = Next::new(&inner.middleware);
                    if declaration.meta.concurrency_safe == Some(true) {
                        run.run(ctx.clone(), request).await
                    } else {
                        // Not declared concurrency-safe: the middleware and the tool run on
                        // the set's lane, one call at a time (see `lane.rs`).
                        let lane = lane.as_deref().unwrap_or(&inner.lane);
                        lane.run(&ctx, run.run(ctx.clone(), request)).await
                    }
                }
            };
            // After hooks: global ones, then the tool's own.
            let after = inner
                .after_global
                .iter()
                .chain(inner.after_for_tool.get(name).into_iter().flatten());
            for hook in after {
                let view = HookCall {
                    declaration,
                    set: set.as_deref(),
                    call_id: &call.id,
                    arguments: &arguments,
                };
                if let AfterAction::Replace(replacement) = hook.after(&ctx, &view, &result).await {
                    result = replacement;
                }
            }
            result
        };
        let output = until_cancelled(
            work,
            &caller,
            &own,
            inner.config.cancel_grace,
            ToolError::Cancelled,
        )
        .await?;
        match &inner.offload {
            Some(offload) => {
                let (output, stored) = offload.apply(tool.declaration(), output).await?;
                *artifact = stored;
                Ok(output)
            }
            None => Ok(output),
        }
    }

    /// The permission step: `Ok(None)` lets the call go on as it is, `Ok(Some(arguments))`
    /// with the arguments a person edited, `Err` refuses it.
    async fn permitted(
        &self,
        ctx: &ToolContext,
        tool: &DynTool,
        set: Option<&str>,
        call_id: &str,
        arguments: &str,
    ) -> Result<Option<Arc<str>>, ToolError> {
        let inner = &*self.inner;
        let Some(check) = &inner.permission else {
            return Ok(None);
        };
        let declaration = tool.declaration();
        let request = PermissionRequest {
            declaration,
            set,
            arguments,
        };
        let reason = match check.check(&request) {
            Permission::Allow => return Ok(None),
            Permission::Deny(reason) => return Err(ToolError::rejected(reason)),
            Permission::Ask(reason) => reason,
        };
        let approvals = ctx.get::<RunApprovals>();
        if approvals.is_some_and(|a| a.is_approved(call_id)) {
            return Ok(None);
        }
        // The preview may read a file: made only for someone who will see it.
        let Some(approver) = &inner.approver else {
            if approvals.is_some_and(RunApprovals::pauses) {
                let preview = check.preview(&request);
                return Err(ToolError::AwaitingApproval { reason, preview });
            }
            return Err(ToolError::rejected(nobody_to_ask(&reason)));
        };
        let preview = check.preview(&request);
        let request = ApprovalRequest {
            declaration,
            call_id,
            arguments,
            reason: &reason,
            preview: preview.as_deref(),
        };
        match approver.decide(ctx, &request).await {
            ApprovalDecision::Approve => Ok(None),
            ApprovalDecision::Deny(message) => Err(ToolError::rejected(message)),
            ApprovalDecision::ApproveWith(edited) => {
                let value = parse_strict(&edited)?;
                Ok(Some(
                    match inner.validators.validate_without_nulls(tool, &value)? {
                        Some(cleaned) => Arc::from(cleaned.to_string()),
                        None => Arc::from(edited),
                    },
                ))
            }
        }
    }
}
