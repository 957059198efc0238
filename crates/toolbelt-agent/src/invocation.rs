//! The invocation: one agent's part of a run, readable from a tool's context.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolbelt_core::{ToolContext, ToolFilter};
use toolbelt_exec::ExecutionFilter;
use toolbelt_model::Message;

use crate::session::{SessionKey, SessionService};
use crate::{Agent, AgentError, Event, EventKind, EventStream, Plugin, ToolResult};

/// Per-run settings, given to [`Runner::run`](crate::Runner::run).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Narrows the tools every agent of this run offers the model. Framework tools
    /// (`transfer_to_agent`, `await_user_reply`) are never filtered out.
    pub tool_filter: Option<ToolFilter>,
    /// Decides which of the model's calls the framework runs; the others are handed back in
    /// an [`EventKind::PendingToolCalls`] event and the run ends so the caller can run them and resume
    /// with role=tool messages.
    pub execution_filter: Option<ExecutionFilter>,
    /// Repairs malformed JSON arguments for this run (`None`: the agent's setting, else the
    /// executor's).
    pub repair_json: Option<bool>,
    /// Values tools can read through [`Invocation::runtime_state`].
    pub runtime_state: Map<String, Value>,
    /// Cancels the run when fired (dropping the event stream does too).
    pub cancellation: Option<CancellationToken>,
    /// A person's decisions on the session's requested approvals, by call id (see
    /// [`crate::approval`]): the run applies them before it asks the model anything.
    pub decisions: std::collections::HashMap<String, crate::Decision>,
}

impl RunOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the per-run tool filter.
    pub fn tool_filter(mut self, filter: ToolFilter) -> Self {
        self.tool_filter = Some(filter);
        self
    }

    /// Sets the execution filter.
    pub fn execution_filter(mut self, filter: ExecutionFilter) -> Self {
        self.execution_filter = Some(filter);
        self
    }

    /// Turns JSON argument repair on or off for this run.
    pub fn repair_json(mut self, on: bool) -> Self {
        self.repair_json = Some(on);
        self
    }

    /// Adds a runtime state value.
    pub fn state(mut self, key: impl Into<String>, value: Value) -> Self {
        self.runtime_state.insert(key.into(), value);
        self
    }

    /// Cancels the run when `token` fires.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }

    /// Decides the requested approval of the call `call_id` (an
    /// [`EventKind::ApprovalRequested`] of the session): resume the session with an empty
    /// input and these options to apply it. An open approval left undecided by a resume is
    /// answered as not approved.
    pub fn decide(mut self, call_id: impl Into<String>, decision: crate::Decision) -> Self {
        self.decisions.insert(call_id.into(), decision);
        self
    }
}

/// What the framework tools asked for during a turn.
#[derive(Debug, Default)]
pub(crate) struct Actions {
    pub(crate) transfer_to: Option<String>,
    pub(crate) await_user_reply: bool,
    /// An [`AgentTool`](crate::AgentTool) asked that the turn end after its result, without
    /// another model call.
    pub(crate) skip_summarization: bool,
}

/// Where an invocation's conversation lives.
#[derive(Clone)]
pub(crate) enum HistoryStore {
    /// The session: a root invocation and the agents it transfers to.
    Session(Arc<dyn SessionService>),
    /// A private list: a child invocation started by a tool, isolated from the session.
    Local(Arc<Mutex<Vec<Event>>>),
}

/// One agent's part of a run: who runs, for which session, with which options, and where
/// its events go.
///
/// A tool reads it from its context with [`Invocation::from_context`]; the tool_call_id is
/// [`ToolContext::call_id`]. Cloning is cheap.
#[derive(Clone)]
pub struct Invocation {
    id: String,
    parent_id: Option<String>,
    agent_name: String,
    session: SessionKey,
    runtime_state: Arc<Map<String, Value>>,
    pub(crate) options: Arc<RunOptions>,
    pub(crate) history: HistoryStore,
    output: mpsc::Sender<Event>,
    cancel: CancellationToken,
    pub(crate) actions: Arc<Mutex<Actions>>,
    /// The runner's plugins, applied to this invocation's agent and every one it starts.
    pub(crate) plugins: Arc<[Plugin]>,
    /// How many child invocations (agents run by tools) lie between this one and the root.
    depth: usize,
    /// Values shared by the parts of one run, one per type ([`Invocation::run_value`]).
    run_values: Arc<Mutex<RunValues>>,
}

type RunValues = std::collections::HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>;

impl std::fmt::Debug for Invocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invocation")
            .field("id", &self.id)
            .field("parent_id", &self.parent_id)
            .field("agent_name", &self.agent_name)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Invocation {
    pub(crate) fn root(
        agent_name: &str,
        session: SessionKey,
        options: RunOptions,
        history: HistoryStore,
        output: mpsc::Sender<Event>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            id: crate::id::new_id(),
            parent_id: None,
            agent_name: agent_name.to_string(),
            session,
            runtime_state: Arc::new(options.runtime_state.clone()),
            options: Arc::new(options),
            history,
            output,
            cancel,
            actions: Arc::default(),
            depth: 0,
            plugins: Arc::new([]),
            run_values: Arc::default(),
        }
    }

    /// Applies the runner's plugins to this invocation (and the ones it starts).
    pub(crate) fn with_plugins(mut self, plugins: Arc<[Plugin]>) -> Self {
        self.plugins = plugins;
        self
    }

    /// The invocation of the tool call running in `ctx`, if it runs inside an agent.
    pub fn from_context(ctx: &ToolContext) -> Option<&Invocation> {
        ctx.get::<Invocation>()
    }

    /// The invocation's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id of the invocation that started this one, if any.
    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.as_deref()
    }

    /// The name of the agent that runs.
    pub fn agent_name(&self) -> &str {
        &self.agent_name
    }

    /// The session.
    pub fn session(&self) -> &SessionKey {
        &self.session
    }

    /// The run's options.
    pub fn options(&self) -> &RunOptions {
        &self.options
    }

    /// The runtime state (from [`RunOptions::runtime_state`], plus what a parent added).
    pub fn runtime_state(&self) -> &Map<String, Value> {
        &self.runtime_state
    }

    /// Sets a runtime state value on this copy only: the state is copied on the first
    /// write, so a child's changes never reach its parent.
    pub fn with_runtime_state(mut self, key: impl Into<String>, value: Value) -> Self {
        Arc::make_mut(&mut self.runtime_state).insert(key.into(), value);
        self
    }

    /// The run value of type `T`, if one was stored: a typed slot shared by the parts of one
    /// run (callbacks, plugins, tools). This invocation, its clones (the one in a tool's
    /// context) and the agents it transfers to see the same values; a child invocation
    /// ([`Invocation::child`]) starts with none. Tool search keeps its token usage here
    /// ([`ToolSearchUsage`](crate::tool_search::ToolSearchUsage)).
    pub fn run_value<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let values = self.run_values.lock().unwrap_or_else(|p| p.into_inner());
        let value = values.get(&std::any::TypeId::of::<T>())?.clone();
        value.downcast::<T>().ok()
    }

    /// The run value of type `T`, stored first as `T::default()` if there is none (see
    /// [`Invocation::run_value`]); give `T` interior mutability to change it.
    pub fn run_value_or_default<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut values = self.run_values.lock().unwrap_or_else(|p| p.into_inner());
        let value = values
            .entry(std::any::TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        // The entry for T's id always holds a T.
        value
            .downcast::<T>()
            .unwrap_or_else(|_| Arc::new(T::default()))
    }

    /// The cancellation token of the invocation.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// A new event of this invocation, authored by its agent.
    pub fn new_event(&self, kind: EventKind) -> Event {
        Event::new(&self.id, self.parent_id.clone(), &self.agent_name, kind)
    }

    /// Stores the event (unless it is not persistent, see [`Event::is_persistent`]) and then
    /// sends it to the caller, so anything the caller saw is already stored. Fails with
    /// [`AgentError::Session`] when storing fails (the event is then not sent: the run ends
    /// with a session error instead) and with [`AgentError::Cancelled`] when the caller is
    /// gone.
    pub async fn emit(&self, event: Event) -> Result<(), AgentError> {
        if event.is_persistent() {
            match &self.history {
                HistoryStore::Session(service) => {
                    service.append_event(&self.session, &event).await?
                }
                HistoryStore::Local(events) => events
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(event.clone()),
            }
        }
        self.forward(event).await
    }

    /// Sends an event to the caller without storing it (for example, a child invocation's
    /// events, which belong to another conversation, shown as progress).
    pub async fn forward(&self, event: Event) -> Result<(), AgentError> {
        self.output
            .send(event)
            .await
            .map_err(|_| AgentError::Cancelled)
    }

    /// The events of this invocation's conversation so far, oldest first.
    pub async fn history(&self) -> Result<Vec<Event>, AgentError> {
        match &self.history {
            HistoryStore::Session(service) => service.events(&self.session).await,
            HistoryStore::Local(events) => {
                Ok(events.lock().unwrap_or_else(|p| p.into_inner()).clone())
            }
        }
    }

    /// Stores session state changes (ignored for isolated child invocations, which have no
    /// session of their own).
    pub async fn update_session_state(
        &self,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError> {
        match &self.history {
            HistoryStore::Session(service) => service.update_state(&self.session, changes).await,
            HistoryStore::Local(_) => Ok(()),
        }
    }

    /// The invocation of `agent_name` taking over this conversation (a transfer): same
    /// session, options, state and event stream; a new id whose parent is this one.
    pub fn transfer_to(&self, agent_name: &str) -> Invocation {
        Invocation {
            id: crate::id::new_id(),
            parent_id: Some(self.id.clone()),
            agent_name: agent_name.to_string(),
            actions: Arc::default(),
            ..self.clone()
        }
    }

    /// A child invocation of `agent`: a new id whose parent is this one, a copy of the
    /// runtime state (change it with [`Invocation::with_runtime_state`] without touching the
    /// parent's), the same options, and a private conversation that starts empty and is not
    /// stored in the session. Start it with [`Invocation::run_child`].
    pub fn child(&self, agent_name: &str) -> Invocation {
        let (output, _) = mpsc::channel(1);
        Invocation {
            id: crate::id::new_id(),
            parent_id: Some(self.id.clone()),
            agent_name: agent_name.to_string(),
            session: self.session.clone(),
            runtime_state: Arc::new((*self.runtime_state).clone()),
            options: self.options.clone(),
            history: HistoryStore::Local(Arc::default()),
            output,
            cancel: self.cancel.child_token(),
            actions: Arc::default(),
            depth: self.depth + 1,
            plugins: self.plugins.clone(),
            run_values: Arc::default(),
        }
    }

    /// Whether a call asked about here can pause the run (see [`crate::approval`]): only in
    /// a root run (or one it transferred to) whose conversation is stored in the session, so
    /// that a later run can resume it. An agent run by a tool cannot pause its caller's call.
    pub(crate) fn can_pause(&self) -> bool {
        self.depth == 0 && matches!(self.history, HistoryStore::Session(_))
    }

    /// How many child invocations lie between this one and the root of the run: 0 for the
    /// root and the agents it transfers to, one more for each [`Invocation::child`].
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Cancels this (child) invocation when `token` fires instead of when its parent's does:
    /// a tool passes its call's token (a child of the parent's, which the call's timeout
    /// also fires) so the child stops with the call.
    pub(crate) fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Runs `agent` in this (child) invocation on `input` and returns its events; every one
    /// carries this invocation's id and its parent's. The stream ends with
    /// [`EventKind::RunCompleted`] like a root run's (a panicking agent gives an
    /// [`ErrorKind::Panic`](crate::ErrorKind::Panic) error first). Dropping the stream
    /// cancels the child.
    pub fn run_child(mut self, agent: Arc<dyn Agent>, input: Vec<Message>) -> EventStream {
        let (tx, rx) = mpsc::channel(crate::runner::CHANNEL_CAPACITY);
        self.output = tx;
        self.agent_name = agent.name().to_string();
        let stream = EventStream::new(rx, self.cancel.clone());
        let inv = self.clone();
        crate::runner::spawn_run(self, async move {
            for event in input_events(&inv, "user", input) {
                inv.emit(event).await?;
            }
            agent.run(inv).await
        });
        stream
    }
}

/// The events that record a caller's input: one per user or system message, and one per
/// run of consecutive role=tool messages.
pub(crate) fn input_events(inv: &Invocation, author: &str, input: Vec<Message>) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::new();
    for message in input {
        if message.role == toolbelt_model::Role::Tool {
            let result = ToolResult::new(
                message.tool_call_id.clone().unwrap_or_default(),
                message.name.clone().unwrap_or_default(),
                message.content,
            );
            if let Some(Event {
                kind: EventKind::ToolInput { results },
                ..
            }) = events.last_mut()
            {
                results.push(result);
                continue;
            }
            let kind = EventKind::ToolInput {
                results: vec![result],
            };
            events.push(Event::new(
                inv.id(),
                inv.parent_id().map(str::to_string),
                author,
                kind,
            ));
        } else {
            let kind = EventKind::UserInput { message };
            events.push(Event::new(
                inv.id(),
                inv.parent_id().map(str::to_string),
                author,
                kind,
            ));
        }
    }
    events
}
