//! Runs started from the page's chat box: the agent `toolbelt run` builds (same flags, same
//! [`AgentSession`]), one run at a time per session. Stored events reach the page through
//! the file poller like any other process's; the live-only ones (deltas, chunks, progress)
//! are sent straight to the feed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use toolbelt::agent::{Decision, EventKind, EventStream, RunInput};
use toolbelt::mcp::server::CancellationToken;

use super::feed::{FeedItem, Hub};
use crate::agent_cli::{AgentSession, MAX_STOP_ROUNDS};

/// How long runs may take to stop their tools when the UI shuts down.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// Why a run could not start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StartError {
    /// A run of this session is still going.
    Busy,
}

/// How a run of the chat box ended, for the Stop hooks: only an answer may be sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Answered,
    /// It waits for an approval, a long-running call's result or a graph node's answer.
    Paused,
    Failed,
    /// The UI is shutting down.
    Stopped,
}

/// The agent and the runs it has going.
pub(crate) struct Runs {
    session: AgentSession,
    hub: Arc<Hub>,
    running: Mutex<HashSet<String>>,
    tasks: tokio::sync::Mutex<JoinSet<()>>,
    stop: CancellationToken,
}

impl Runs {
    pub(crate) fn new(session: AgentSession, hub: Arc<Hub>, stop: CancellationToken) -> Self {
        Self {
            session,
            hub,
            running: Mutex::new(HashSet::new()),
            tasks: tokio::sync::Mutex::new(JoinSet::new()),
            stop,
        }
    }

    /// The application and user the chat box's sessions are stored under.
    pub(crate) fn key_parts(&self) -> (&str, &str) {
        (self.session.runner.app(), crate::agent_cli::USER)
    }

    /// Starts a run of `input` in `session_id` (a new session when `None`) with a person's
    /// `decisions` on its requested approvals; returns the session's id.
    pub(crate) async fn start(
        self: &Arc<Self>,
        session_id: Option<String>,
        input: RunInput,
        decisions: HashMap<String, Decision>,
    ) -> Result<String, StartError> {
        let session_id = session_id.unwrap_or_else(crate::agent_cli::new_session_id);
        {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            if !running.insert(session_id.clone()) {
                return Err(StartError::Busy);
            }
        }
        let this = self.clone();
        let id = session_id.clone();
        self.tasks.lock().await.spawn(async move {
            let mut events = this.session.start_with(&id, input, decisions);
            // A Stop hook may send the agent on after a run that ended of itself, a bounded
            // number of times, as in `toolbelt run`.
            for round in 0..=MAX_STOP_ROUNDS {
                let ended = this.follow(&id, &mut events).await;
                if ended != Ended::Answered || round == MAX_STOP_ROUNDS {
                    break;
                }
                let Some(reason) = this.session.stop_hooks(&id, round > 0).await else {
                    break;
                };
                events = this
                    .session
                    .start_with(&id, RunInput::from(reason), HashMap::new());
            }
            this.running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            this.hub.send(FeedItem::RunEnded { session_id: id });
        });
        Ok(session_id)
    }

    /// The messages a prompt sends in `session_id` once the `UserPromptSubmit` hooks let it
    /// through (their context added), or why they refused it.
    pub(crate) async fn prompt(
        &self,
        session_id: &str,
        prompt: &str,
    ) -> Result<Vec<toolbelt::model::Message>, String> {
        self.session.prompt_hooks(session_id, prompt).await
    }

    /// Allows from now on (in this UI's runs and in the project's settings file) what the
    /// calls `ids`, paused in `session_id`, need. Nothing is added unless every id names a
    /// paused call.
    pub(crate) async fn approve_always(
        &self,
        session_id: &str,
        ids: &[String],
    ) -> Result<(), String> {
        let (app, user) = self.key_parts();
        let key = toolbelt::agent::SessionKey::new(app, user, session_id);
        let events = self
            .session
            .runner
            .sessions()
            .events(&key)
            .await
            .map_err(|e| format!("reading the session: {e}"))?;
        let pending = toolbelt::agent::pending_approvals(&events);
        let mut calls = Vec::new();
        for id in ids {
            let call = pending
                .iter()
                .find(|p| &p.call_id == id)
                .ok_or_else(|| format!("call {id} of this session waits for no approval"))?;
            calls.push(call);
        }
        for call in calls {
            let added = self
                .session
                .rules
                .allow_always(&call.name, &call.arguments)
                .map_err(|e| e.message)?;
            if added.is_empty() {
                eprintln!(
                    "toolbelt: no allow rule can be written for call {}; it is approved this once",
                    toolbelt::visible(&call.call_id)
                );
            } else {
                eprintln!(
                    "toolbelt: allowed from now on: {}",
                    toolbelt::visible(&added.join(", "))
                );
            }
        }
        Ok(())
    }

    /// Sends a run's live-only events to the page until it ends; how it ended.
    async fn follow(&self, session_id: &str, events: &mut EventStream) -> Ended {
        let mut ended = Ended::Answered;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = self.stop.cancelled() => {
                    // Stop the tools first; the run still ends with run_completed.
                    events.cancel();
                    let _ = tokio::time::timeout(WIND_DOWN, async {
                        while events.recv().await.is_some() {}
                    })
                    .await;
                    return Ended::Stopped;
                }
            };
            let Some(event) = event else { return ended };
            match &event.kind {
                EventKind::Error { .. } => ended = Ended::Failed,
                EventKind::ApprovalRequested { .. }
                | EventKind::ToolPending { .. }
                | EventKind::Interrupted { .. }
                    if ended == Ended::Answered =>
                {
                    ended = Ended::Paused;
                }
                _ => {}
            }
            if is_live_only(&event) {
                self.hub.send(FeedItem::Live {
                    session_id: session_id.to_string(),
                    event,
                });
            }
        }
    }

    /// Waits for the runs to stop (after the stop token was cancelled), then closes the tool
    /// sets.
    pub(crate) async fn close(self: Arc<Self>) {
        let mut tasks = std::mem::take(&mut *self.tasks.lock().await);
        let _ = tokio::time::timeout(WIND_DOWN * 2, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        tasks.abort_all();
        match Arc::try_unwrap(self) {
            Ok(runs) => runs.session.toolbox.close().await,
            Err(_) => {
                tracing::warn!("web UI: a request still holds the agent; not closing its tools")
            }
        }
    }
}

/// Events that are shown but never stored (the file poller will not see them): deltas,
/// chunks and progress, and whatever an agent run as a tool forwards from its child (marked
/// with the call's `tool_call_id`; the session keeps only the call and its result).
fn is_live_only(event: &toolbelt::agent::Event) -> bool {
    use toolbelt::agent::EventKind;
    event.tool_call_id.is_some()
        || matches!(
            event.kind,
            EventKind::ModelDelta { .. }
                | EventKind::ToolChunk { .. }
                | EventKind::ToolProgress { .. }
        )
}
