//! Callbacks: code that runs at each stage of an agent's run, on one agent
//! ([`LlmAgentBuilder::callbacks`](crate::LlmAgentBuilder::callbacks)) or on every agent of a
//! run (a [`Plugin`](crate::Plugin) on the [`Runner`](crate::Runner)).
//!
//! Every callback sees the [`Invocation`] (agent name, ids, session, runtime state; a tool
//! callback reads it with [`Invocation::from_context`] and the call id from its
//! [`HookCall`]) and may fail with a [`CallbackError`], which ends the run with an
//! [`ErrorKind::Callback`](crate::ErrorKind::Callback) error event and then
//! [`EventKind::RunCompleted`](crate::EventKind::RunCompleted).
//!
//! # Order
//!
//! Plugins run in the order they were added to the runner, each before the agent's own
//! callbacks; callbacks of one stage run in the order they were added.
//!
//! | stage | when | may | skipped callbacks |
//! |---|---|---|---|
//! | before_agent | the agent's run starts (also after a transfer) | end the run with a message | the rest of before_agent and the whole loop; after_agent still runs |
//! | before_model | before every model call, on the request as built | rewrite the request (messages, tools, generation config) or answer with a message | the rest of before_model and the model; after_model still runs |
//! | after_model | on the complete message, before its tool calls are recorded | replace the message (text and tool calls) | — |
//! | before_tool | executor step 4: after the tool-specific and global before hooks of the executor | the executor's [`BeforeAction`]s | as for any before hook |
//! | after_tool | executor step 7: after the executor's global after hooks, before its tool-specific ones | the executor's [`AfterAction`]s | — |
//! | after_agent | the agent's loop ended (an answer, handed-back calls, a transfer that came back, an error event) — not on cancellation or a callback error | add a last message | — |
//!
//! # Tool callbacks are executor hooks
//!
//! `before_tool` and `after_tool` take the executor's [`BeforeHook`] and [`AfterHook`]: they
//! run inside the executor's pipeline, for the agent's calls only, in one global hook pair
//! the agent adds to the executor it builds. Use the executor's own hooks
//! ([`ExecutorBuilder::before_hook`](toolbelt_exec::ExecutorBuilder::before_hook)) for rules
//! that hold for every caller of the executor (MCP server, CLI, programs); use tool callbacks
//! for rules of an agent or a run. An agent given an executor of its own
//! ([`LlmAgentBuilder::executor`](crate::LlmAgentBuilder::executor)) cannot add the pair:
//! building it with tool callbacks is a configuration error, and a plugin's tool callbacks
//! are reported with a warning event at the start of its runs.

use std::sync::Arc;

use async_trait::async_trait;
use toolbelt_core::{ToolContext, ToolError, ToolOutput};
use toolbelt_exec::{AfterAction, AfterHook, BeforeAction, BeforeHook, HookCall};
use toolbelt_model::{Message, Request};

use crate::{AgentError, Invocation};

/// Why a callback ended the run: a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallbackError(pub String);

impl CallbackError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Runs when an agent starts or ends (`before_agent`, `after_agent`).
///
/// Closures `Fn(&Invocation) -> Result<Option<Message>, CallbackError>` are agent
/// callbacks; implement the trait for callbacks that need to await.
#[async_trait]
pub trait AgentCallback: Send + Sync {
    /// `Some(message)`: before the agent, the run ends with this message instead of
    /// running the agent; after it, the message is added as the agent's last word.
    async fn call(&self, inv: &Invocation) -> Result<Option<Message>, CallbackError>;
}

#[async_trait]
impl<F> AgentCallback for F
where
    F: Fn(&Invocation) -> Result<Option<Message>, CallbackError> + Send + Sync,
{
    async fn call(&self, inv: &Invocation) -> Result<Option<Message>, CallbackError> {
        self(inv)
    }
}

/// Runs before each model call with the request, which it may change in place.
///
/// Closures `Fn(&Invocation, &mut Request) -> Result<Option<Message>, CallbackError>` are
/// before-model callbacks.
#[async_trait]
pub trait BeforeModel: Send + Sync {
    /// Rewrites `request` (the tools offered, the messages, the generation config), or
    /// returns `Some(message)` to answer in the model's place (the model is not called).
    ///
    /// Tools removed from the request are not offered; a call the model still makes to
    /// one runs as usual (filter with [`RunOptions::tool_filter`](crate::RunOptions) to
    /// forbid it).
    async fn call(
        &self,
        inv: &Invocation,
        request: &mut Request,
    ) -> Result<Option<Message>, CallbackError>;
}

#[async_trait]
impl<F> BeforeModel for F
where
    F: Fn(&Invocation, &mut Request) -> Result<Option<Message>, CallbackError> + Send + Sync,
{
    async fn call(
        &self,
        inv: &Invocation,
        request: &mut Request,
    ) -> Result<Option<Message>, CallbackError> {
        self(inv, request)
    }
}

/// Runs on the model's complete message, which it may change in place (its text, its tool
/// calls).
///
/// Closures `Fn(&Invocation, &mut Message) -> Result<(), CallbackError>` are after-model
/// callbacks.
#[async_trait]
pub trait AfterModel: Send + Sync {
    /// Inspects or rewrites the message before it is recorded and its calls run.
    async fn call(&self, inv: &Invocation, message: &mut Message) -> Result<(), CallbackError>;
}

#[async_trait]
impl<F> AfterModel for F
where
    F: Fn(&Invocation, &mut Message) -> Result<(), CallbackError> + Send + Sync,
{
    async fn call(&self, inv: &Invocation, message: &mut Message) -> Result<(), CallbackError> {
        self(inv, message)
    }
}

/// The callbacks of an agent or a plugin, stage by stage (see the [module docs](self) for
/// the order). Cheap to clone.
#[derive(Clone, Default)]
pub struct Callbacks {
    pub(crate) before_agent: Vec<Arc<dyn AgentCallback>>,
    pub(crate) after_agent: Vec<Arc<dyn AgentCallback>>,
    pub(crate) before_model: Vec<Arc<dyn BeforeModel>>,
    pub(crate) after_model: Vec<Arc<dyn AfterModel>>,
    pub(crate) before_tool: Vec<Arc<dyn BeforeHook>>,
    pub(crate) after_tool: Vec<Arc<dyn AfterHook>>,
}

impl std::fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callbacks")
            .field("before_agent", &self.before_agent.len())
            .field("after_agent", &self.after_agent.len())
            .field("before_model", &self.before_model.len())
            .field("after_model", &self.after_model.len())
            .field("before_tool", &self.before_tool.len())
            .field("after_tool", &self.after_tool.len())
            .finish()
    }
}

impl Callbacks {
    /// No callbacks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a callback run when the agent starts.
    pub fn before_agent(mut self, callback: impl AgentCallback + 'static) -> Self {
        self.before_agent.push(Arc::new(callback));
        self
    }

    /// Adds a callback run when the agent's loop has ended.
    pub fn after_agent(mut self, callback: impl AgentCallback + 'static) -> Self {
        self.after_agent.push(Arc::new(callback));
        self
    }

    /// Adds a callback run before each model call.
    pub fn before_model(mut self, callback: impl BeforeModel + 'static) -> Self {
        self.before_model.push(Arc::new(callback));
        self
    }

    /// Adds a callback run on each complete model message.
    pub fn after_model(mut self, callback: impl AfterModel + 'static) -> Self {
        self.after_model.push(Arc::new(callback));
        self
    }

    /// Adds an executor before hook run on the agent's tool calls.
    pub fn before_tool(mut self, hook: impl BeforeHook + 'static) -> Self {
        self.before_tool.push(Arc::new(hook));
        self
    }

    /// Adds an executor after hook run on the agent's tool calls.
    pub fn after_tool(mut self, hook: impl AfterHook + 'static) -> Self {
        self.after_tool.push(Arc::new(hook));
        self
    }

    /// Whether any tool callback is set.
    pub(crate) fn has_tool_callbacks(&self) -> bool {
        !(self.before_tool.is_empty() && self.after_tool.is_empty())
    }
}

/// The callbacks in force for one agent's run, in order: each plugin's, then the agent's.
/// Carried to the tool callbacks as an extension of the tool context.
#[derive(Clone, Default)]
pub(crate) struct Active(pub(crate) Vec<Callbacks>);

impl Active {
    pub(crate) async fn before_agent(
        &self,
        inv: &Invocation,
    ) -> Result<Option<Message>, AgentError> {
        for callback in self.0.iter().flat_map(|c| &c.before_agent) {
            if let Some(message) = callback.call(inv).await.map_err(stage("before_agent"))? {
                return Ok(Some(message));
            }
        }
        Ok(None)
    }

    /// Every after_agent callback; the messages they add, in order.
    pub(crate) async fn after_agent(&self, inv: &Invocation) -> Result<Vec<Message>, AgentError> {
        let mut messages = Vec::new();
        for callback in self.0.iter().flat_map(|c| &c.after_agent) {
            if let Some(message) = callback.call(inv).await.map_err(stage("after_agent"))? {
                messages.push(message);
            }
        }
        Ok(messages)
    }

    pub(crate) async fn before_model(
        &self,
        inv: &Invocation,
        request: &mut Request,
    ) -> Result<Option<Message>, AgentError> {
        for callback in self.0.iter().flat_map(|c| &c.before_model) {
            let answer = callback
                .call(inv, request)
                .await
                .map_err(stage("before_model"))?;
            if answer.is_some() {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    pub(crate) async fn after_model(
        &self,
        inv: &Invocation,
        message: &mut Message,
    ) -> Result<(), AgentError> {
        for callback in self.0.iter().flat_map(|c| &c.after_model) {
            callback
                .call(inv, message)
                .await
                .map_err(stage("after_model"))?;
        }
        Ok(())
    }

    pub(crate) fn has_tool_callbacks(&self) -> bool {
        self.0.iter().any(Callbacks::has_tool_callbacks)
    }
}

/// The callbacks in force for an agent of your own (a graph workflow, a router) in one
/// invocation: the runner's plugins', then the ones given, run stage by stage in the order an
/// [`LlmAgent`](crate::LlmAgent) runs them (see the [module docs](self)). Tool callbacks need
/// the hook pair of [`tool_callback_hooks`] in the executor and the chain attached to each
/// call's context with [`CallbackChain::attach`].
#[derive(Clone, Default)]
pub struct CallbackChain(Active);

impl std::fmt::Debug for CallbackChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CallbackChain")
            .field(&self.0.0.len())
            .finish()
    }
}

impl CallbackChain {
    /// The plugins' callbacks of `inv`'s run, then `own`.
    pub fn new(inv: &Invocation, own: impl IntoIterator<Item = Callbacks>) -> Self {
        let mut all: Vec<Callbacks> = inv.plugins.iter().map(|p| p.callbacks.clone()).collect();
        all.extend(own);
        Self(Active(all))
    }

    /// Runs the before_agent stage: `Some(message)` ends the agent's run with it.
    pub async fn before_agent(&self, inv: &Invocation) -> Result<Option<Message>, AgentError> {
        self.0.before_agent(inv).await
    }

    /// Runs the after_agent stage: the messages the callbacks add.
    pub async fn after_agent(&self, inv: &Invocation) -> Result<Vec<Message>, AgentError> {
        self.0.after_agent(inv).await
    }

    /// Runs the before_model stage on `request`: `Some(message)` answers in the model's place.
    pub async fn before_model(
        &self,
        inv: &Invocation,
        request: &mut Request,
    ) -> Result<Option<Message>, AgentError> {
        self.0.before_model(inv, request).await
    }

    /// Runs the after_model stage on the model's message.
    pub async fn after_model(
        &self,
        inv: &Invocation,
        message: &mut Message,
    ) -> Result<(), AgentError> {
        self.0.after_model(inv, message).await
    }

    /// `ctx` carrying this chain, so [`tool_callback_hooks`] run its tool callbacks.
    pub fn attach(&self, ctx: ToolContext) -> ToolContext {
        ctx.with_extension(self.0.clone())
    }
}

/// The before/after hook pair that runs the tool callbacks of the [`CallbackChain`] attached
/// to a call's context (and nothing for other calls): add both, last, to the executor an
/// agent of your own builds, as [`LlmAgent`](crate::LlmAgent) does.
pub fn tool_callback_hooks() -> (impl BeforeHook, impl AfterHook) {
    (ToolCallbackHooks, ToolCallbackHooks)
}

fn stage(name: &'static str) -> impl Fn(CallbackError) -> AgentError {
    move |error| AgentError::Callback(format!("{name} callback: {error}"))
}

/// The global hook pair an agent adds to the executor it builds: runs the tool callbacks
/// in force for the call's agent ([`Active`], from the tool context), and nothing for
/// calls made outside an agent run.
pub(crate) struct ToolCallbackHooks;

#[async_trait]
impl BeforeHook for ToolCallbackHooks {
    async fn before(&self, ctx: &ToolContext, call: &HookCall<'_>) -> BeforeAction {
        let Some(active) = ctx.get::<Active>() else {
            return BeforeAction::Continue;
        };
        let mut replaced: Option<String> = None;
        for hook in active.0.iter().flat_map(|c| &c.before_tool) {
            let view = HookCall {
                arguments: replaced.as_deref().unwrap_or(call.arguments),
                ..*call
            };
            match hook.before(ctx, &view).await {
                BeforeAction::Continue => {}
                BeforeAction::ReplaceArguments(arguments) => replaced = Some(arguments),
                decided @ (BeforeAction::Respond(_) | BeforeAction::Reject(_)) => return decided,
            }
        }
        replaced.map_or(BeforeAction::Continue, BeforeAction::ReplaceArguments)
    }
}

#[async_trait]
impl AfterHook for ToolCallbackHooks {
    async fn after(
        &self,
        ctx: &ToolContext,
        call: &HookCall<'_>,
        result: &Result<ToolOutput, ToolError>,
    ) -> AfterAction {
        let Some(active) = ctx.get::<Active>() else {
            return AfterAction::Keep;
        };
        let mut replaced: Option<Result<ToolOutput, ToolError>> = None;
        for hook in active.0.iter().flat_map(|c| &c.after_tool) {
            let current = replaced.as_ref().unwrap_or(result);
            if let AfterAction::Replace(replacement) = hook.after(ctx, call, current).await {
                replaced = Some(replacement);
            }
        }
        replaced.map_or(AfterAction::Keep, AfterAction::Replace)
    }
}
