//! [`Runner`]: runs an agent for a user's session and streams its events.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{FutureExt, Stream};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use toolbelt_model::{Message, Role};

use crate::framework::AWAIT_USER_REPLY_STATE_KEY;
use crate::invocation::{HistoryStore, input_events};
use crate::llm_agent::route_target;
use crate::session::{InMemorySessionService, SessionKey, SessionService};
use crate::{
    AgentError, DynAgent, ErrorKind, Event, EventKind, Invocation, Plugin, RunOptions, find_agent,
};

/// How many events may wait for a slow consumer before the agent pauses.
pub(crate) const CHANNEL_CAPACITY: usize = 256;

/// The events of a run, ending with [`EventKind::RunCompleted`]. Dropping it cancels
/// the run.
pub struct EventStream {
    rx: mpsc::Receiver<Event>,
    cancel: CancellationToken,
    _cancel_on_drop: DropGuard,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventStream(..)")
    }
}

impl EventStream {
    pub(crate) fn new(rx: mpsc::Receiver<Event>, cancel: CancellationToken) -> Self {
        Self {
            rx,
            cancel: cancel.clone(),
            _cancel_on_drop: cancel.drop_guard(),
        }
    }

    /// Cancels the run but keeps the stream: running tools see their cancellation (a shell
    /// command's process group is killed) and the run still ends with [`EventKind::RunCompleted`],
    /// so a caller that keeps reading knows when everything has stopped. Dropping the
    /// stream cancels too, without waiting.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The next event, or `None` after the last one (the same as `StreamExt::next`, for
    /// callers without `futures`).
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// Collects every remaining event.
    pub async fn collect_all(mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.rx.recv().await {
            events.push(event);
        }
        events
    }
}

impl Stream for EventStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}

/// What a run starts from: user messages, or role=tool messages answering calls that an
/// execution filter handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInput(pub Vec<Message>);

impl RunInput {
    /// No new message: a run that resumes the session, to apply a person's decisions on
    /// requested approvals ([`RunOptions::decide`](crate::RunOptions::decide)).
    pub fn resume() -> Self {
        RunInput(Vec::new())
    }
}

impl From<Message> for RunInput {
    fn from(message: Message) -> Self {
        RunInput(vec![message])
    }
}

impl From<Vec<Message>> for RunInput {
    fn from(messages: Vec<Message>) -> Self {
        RunInput(messages)
    }
}

impl From<&str> for RunInput {
    fn from(text: &str) -> Self {
        RunInput(vec![Message::user(text)])
    }
}

impl From<String> for RunInput {
    fn from(text: String) -> Self {
        RunInput(vec![Message::user(text)])
    }
}

/// Runs an agent (and its sub-agents) for users' sessions.
///
/// Each [`Runner::run`] stores the input in the session, runs the agent that should answer
/// (the root, or the agent a one-shot `await_user_reply` route points at), stores every
/// complete event before yielding it, and ends with [`EventKind::RunCompleted`].
#[derive(Clone)]
pub struct Runner {
    app: String,
    root: DynAgent,
    sessions: Arc<dyn SessionService>,
    await_user_reply_routing: bool,
    plugins: Arc<[Plugin]>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("app", &self.app)
            .field("root", &self.root.name())
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// A runner for application `app` with sessions in memory.
    pub fn new(app: impl Into<String>, root: DynAgent) -> Self {
        Self {
            app: app.into(),
            root,
            sessions: Arc::new(InMemorySessionService::new()),
            await_user_reply_routing: false,
            plugins: Arc::new([]),
        }
    }

    /// Stores sessions in `sessions`.
    pub fn with_session_service(mut self, sessions: Arc<dyn SessionService>) -> Self {
        self.sessions = sessions;
        self
    }

    /// Routes the next user message to the agent that called `await_user_reply`, once.
    pub fn with_await_user_reply_routing(mut self, on: bool) -> Self {
        self.await_user_reply_routing = on;
        self
    }

    /// Applies `plugin`'s callbacks and tools to every agent of every run (see [`Plugin`]).
    /// Plugins run in the order they were added, before each agent's own callbacks.
    pub fn with_plugin(mut self, plugin: Plugin) -> Self {
        let mut plugins = self.plugins.to_vec();
        plugins.push(plugin);
        self.plugins = plugins.into();
        self
    }

    /// Applies the started `extensions` to every agent of every run, each as a [`Plugin`]
    /// of its name added after the plugins already there (see [`crate::extension`]). Fails
    /// naming an extension that contributes tool sets or middleware: those belong to one
    /// agent ([`crate::LlmAgentBuilder::with_extensions`]).
    pub fn with_extensions(self, extensions: &crate::Extensions) -> Result<Self, AgentError> {
        Ok(extensions
            .plugins()?
            .into_iter()
            .fold(self, Self::with_plugin))
    }

    /// The session store.
    pub fn sessions(&self) -> &Arc<dyn SessionService> {
        &self.sessions
    }

    /// The application name (the first part of every session key).
    pub fn app(&self) -> &str {
        &self.app
    }

    /// Starts a run and returns its events. Errors arrive as error events (a session store
    /// that fails before the model is called ends the run there); the stream always ends
    /// with [`EventKind::RunCompleted`].
    pub fn run(
        &self,
        user_id: &str,
        session_id: &str,
        input: impl Into<RunInput>,
        options: RunOptions,
    ) -> EventStream {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        // A child of the caller's token: dropping the stream cancels this run only, never
        // the token the caller passed in (which may guard other work too).
        let cancel = options
            .cancellation
            .as_ref()
            .map_or_else(CancellationToken::new, CancellationToken::child_token);
        let stream = EventStream::new(rx, cancel.clone());
        let runner = self.clone();
        let key = SessionKey::new(&self.app, user_id, session_id);
        let input = input.into().0;
        let root = Invocation::root(
            runner.root.name(),
            key,
            options,
            HistoryStore::Session(runner.sessions.clone()),
            tx,
            cancel,
        )
        .with_plugins(self.plugins.clone());
        let inv = root.clone();
        spawn_run(root, async move { runner.drive(&inv, input).await });
        stream
    }

    async fn drive(&self, root: &Invocation, input: Vec<Message>) -> Result<(), AgentError> {
        self.sessions.get_or_create(root.session()).await?;
        let agent = self.agent_for(root, &input).await?;
        for event in input_events(root, "user", input) {
            root.emit(event).await?;
        }
        let invocation = if agent.name() == root.agent_name() {
            root.clone()
        } else {
            root.transfer_to(agent.name())
        };
        agent.run(invocation).await
    }

    /// The agent that answers this input: for role=tool results, the agent whose calls
    /// were handed back (or are running long); for decisions on requested approvals, the agent that asked; for a
    /// user message, the one a pending await_user_reply route names
    /// (consuming the route); else the root.
    async fn agent_for(
        &self,
        root: &Invocation,
        input: &[Message],
    ) -> Result<DynAgent, AgentError> {
        let answered: Vec<&str> = input
            .iter()
            .filter(|m| m.role == Role::Tool)
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        if !answered.is_empty() {
            let events = self.sessions.events(root.session()).await?;
            let asker = events.iter().rev().find(|event| match &event.kind {
                EventKind::PendingToolCalls { calls } => calls
                    .iter()
                    .any(|call| answered.contains(&call.id.as_str())),
                EventKind::ToolPending { call_id, .. } => answered.contains(&call_id.as_str()),
                _ => false,
            });
            let agent = asker.and_then(|event| find_agent(&self.root, &event.author));
            return Ok(agent.unwrap_or_else(|| self.root.clone()));
        }
        // A resume with decisions (or with nothing new) goes to the agent that asked for
        // them. Only then is the session read here: the agent reads it anyway, but a
        // plain turn should not pay for it twice.
        if !root.options().decisions.is_empty() || input.is_empty() {
            let events = self.sessions.events(root.session()).await?;
            let open = crate::approval::open_approvals(&events);
            if let Some(agent) = open.asker().and_then(|name| find_agent(&self.root, name)) {
                return Ok(agent);
            }
        }
        let from_user = input.iter().any(|m| m.role == Role::User);
        if !(self.await_user_reply_routing && from_user) {
            return Ok(self.root.clone());
        }
        let route = self
            .sessions
            .take_state(root.session(), AWAIT_USER_REPLY_STATE_KEY)
            .await?;
        let target = route.as_ref().and_then(route_target);
        Ok(match target.and_then(|name| find_agent(&self.root, name)) {
            Some(agent) => agent,
            None => self.root.clone(),
        })
    }
}

/// The one way a run (root or child) is started: runs `work` on its own task, contains a
/// panic (reported as [`ErrorKind::Panic`]), turns an error into an error event, and always
/// ends with [`EventKind::RunCompleted`].
///
/// When the error is the session store's, the error event cannot be stored: it is sent to
/// the caller without storing, so a failing store is never silent. The completion is stored
/// when possible and sent either way.
pub(crate) fn spawn_run<F>(inv: Invocation, work: F)
where
    F: Future<Output = Result<(), AgentError>> + Send + 'static,
{
    // The run's task continues the caller's span (a tool call's, for an agent run as a
    // tool), so a child run's `gen_ai` spans nest under the call that started it.
    let parent = tracing::Span::current();
    let task = async move {
        let result = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|payload| Err(AgentError::Panicked(panic_text(payload.as_ref()))));
        // After a store failure, storing more would only fail again (after the store's own
        // busy wait): the last events go straight to the caller.
        let mut store_works = true;
        match result {
            Ok(()) | Err(AgentError::Cancelled) => {}
            Err(error) => {
                let event = error_event(&inv, &error);
                if matches!(error, AgentError::Session(_)) {
                    store_works = false;
                    let _ = inv.forward(event).await;
                } else {
                    store_works = emit_or_forward(&inv, event).await;
                }
            }
        }
        let done = inv.new_event(EventKind::RunCompleted);
        if store_works {
            emit_or_forward(&inv, done).await;
        } else {
            let _ = inv.forward(done).await;
        }
    };
    tokio::spawn(tracing::Instrument::instrument(task, parent));
}

/// Stores and sends `event`; when storing fails, sends it anyway (the run is ending, and the
/// caller must still learn how). Returns whether storing worked.
async fn emit_or_forward(inv: &Invocation, event: Event) -> bool {
    match inv.emit(event.clone()).await {
        Ok(()) | Err(AgentError::Cancelled) => true,
        Err(error) => {
            tracing::warn!(%error, event = event.kind.type_name(), "could not store a final event");
            let _ = inv.forward(event).await;
            false
        }
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// The error event for `error` in `inv`.
pub(crate) fn error_event(inv: &Invocation, error: &AgentError) -> Event {
    let kind = match error {
        AgentError::Model(_) => ErrorKind::Model,
        AgentError::Session(_) => ErrorKind::Session,
        AgentError::Config(_) => ErrorKind::Config,
        AgentError::Cancelled => ErrorKind::Cancelled,
        AgentError::Panicked(_) => ErrorKind::Panic,
        AgentError::Callback(_) => ErrorKind::Callback,
    };
    inv.new_event(EventKind::Error {
        kind,
        message: error.to_string(),
    })
}
