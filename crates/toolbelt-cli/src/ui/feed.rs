//! What the page is told as it happens, through one broadcast channel per process:
//!
//! - stored events, read from the session file by one poller (so runs of other processes,
//!   such as `toolbelt run --session FILE`, appear as they are committed);
//! - live-only events (model deltas, tool chunks and progress) of runs this process started;
//! - for `serve --ui`, the start and end of every tool call, from a middleware in the
//!   serve executor ([`CallTap`]).
//!
//! The channel is bounded: a page that falls behind catches up from the file (stored
//! events) and loses only live-only ones, which the stored events supersede.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::broadcast;
use toolbelt::agent::session::{SqliteSessionService, StoredEvent};
use toolbelt::agent::{Event, ToolResult};
use toolbelt::async_trait;
use toolbelt::exec::{Middleware, Next, ToolRequest};
use toolbelt::mcp::server::CancellationToken;
use toolbelt::{ToolContext, ToolError, ToolOutput};

/// How often the session file is asked for new rows.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// The most rows read per poll (the rest come on the next one, without waiting).
pub(crate) const PAGE: usize = 500;
/// Items that may wait for a slow page before it must catch up.
const CHANNEL_CAPACITY: usize = 1024;
/// Tool calls `serve --ui` keeps for a page that opens later.
const RECENT_CALLS: usize = 500;

/// One item of the feed; its JSON form (tagged by `kind`) is what the page receives.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum FeedItem {
    /// An event committed to the session file.
    Stored {
        /// The row's sequence number.
        seq: i64,
        /// The session's application.
        app: String,
        /// The session's user.
        user_id: String,
        /// The session.
        session_id: String,
        /// The event.
        event: Event,
    },
    /// A live-only event of a run this process started.
    Live {
        /// The session.
        session_id: String,
        /// The event.
        event: Event,
    },
    /// A run started from the page ended (its last stored event may still be on its way).
    RunEnded {
        /// The session.
        session_id: String,
    },
    /// `serve --ui`: a tool call began.
    CallStart {
        /// This process's number for the call.
        id: u64,
        /// The call's id as the client sent it (may be empty).
        call_id: String,
        /// The tool.
        name: String,
        /// The argument text.
        arguments: String,
        /// When it began, in milliseconds since the Unix epoch.
        timestamp_ms: u64,
    },
    /// `serve --ui`: a tool call ended.
    CallEnd {
        /// The number of its [`FeedItem::CallStart`].
        id: u64,
        /// The result, in the agent's shape so the page draws one kind of tool card.
        result: ToolResult,
        /// When it ended, in milliseconds since the Unix epoch.
        timestamp_ms: u64,
    },
}

impl FeedItem {
    fn stored(stored: StoredEvent) -> Self {
        FeedItem::Stored {
            seq: stored.seq,
            app: stored.key.app,
            user_id: stored.key.user_id,
            session_id: stored.key.session_id,
            event: stored.event,
        }
    }

    /// The sequence number of a stored event.
    pub(crate) fn seq(&self) -> Option<i64> {
        match self {
            FeedItem::Stored { seq, .. } => Some(*seq),
            _ => None,
        }
    }
}

/// The broadcast channel and what a page that opens late needs.
#[derive(Debug)]
pub(crate) struct Hub {
    sender: broadcast::Sender<Arc<FeedItem>>,
    /// `serve --ui`: the recent calls, oldest first.
    recent: Mutex<VecDeque<Arc<FeedItem>>>,
}

impl Hub {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            sender: broadcast::channel(CHANNEL_CAPACITY).0,
            recent: Mutex::new(VecDeque::new()),
        })
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<FeedItem>> {
        self.sender.subscribe()
    }

    /// Sends to every open page (none listening is fine).
    pub(crate) fn send(&self, item: FeedItem) {
        let _ = self.sender.send(Arc::new(item));
    }

    /// Sends a call item and keeps it for pages opened later.
    fn send_call(&self, item: FeedItem) {
        let item = Arc::new(item);
        {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if recent.len() == RECENT_CALLS {
                recent.pop_front();
            }
            recent.push_back(item.clone());
        }
        let _ = self.sender.send(item);
    }

    /// The calls kept, oldest first.
    pub(crate) fn recent_calls(&self) -> Vec<Arc<FeedItem>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.iter().cloned().collect()
    }
}

/// Follows the session file until `stop`: every committed row after the last one seen is
/// broadcast, in order. A failing read is logged and tried again on the next tick.
pub(crate) async fn poll_store(
    store: SqliteSessionService,
    hub: Arc<Hub>,
    mut last: i64,
    stop: CancellationToken,
) {
    loop {
        match store.events_after(last, PAGE).await {
            Ok(rows) => {
                let full = rows.len() == PAGE;
                for row in rows {
                    last = last.max(row.seq);
                    hub.send(FeedItem::stored(row));
                }
                if full {
                    continue;
                }
            }
            Err(error) => tracing::warn!(%error, "web UI: cannot read the session file"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(POLL_INTERVAL) => {}
        }
    }
}

/// Stored events after `after`, as feed items (a page catching up).
pub(crate) async fn stored_after(
    store: &SqliteSessionService,
    after: i64,
) -> Result<Vec<FeedItem>, toolbelt::agent::AgentError> {
    Ok(store
        .events_after(after, PAGE)
        .await?
        .into_iter()
        .map(FeedItem::stored)
        .collect())
}

/// The middleware `serve --ui` adds (outermost, so it sees time-outs and retries as one
/// call): it tells the page when each call starts and how it ended.
#[derive(Debug)]
pub(crate) struct CallTap {
    hub: Arc<Hub>,
    next_id: AtomicU64,
}

impl CallTap {
    pub(crate) fn new(hub: Arc<Hub>) -> Self {
        Self {
            hub,
            next_id: AtomicU64::new(1),
        }
    }
}

#[async_trait]
impl Middleware for CallTap {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let name = req.tool_name().to_string();
        let call_id = req.call_id.to_string();
        self.hub.send_call(FeedItem::CallStart {
            id,
            call_id: call_id.clone(),
            name: name.clone(),
            arguments: req.arguments.to_string(),
            timestamp_ms: now_ms(),
        });
        let started = Instant::now();
        let result = next.run(ctx, req).await;
        let duration_ms = started.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
        let mut shown = match &result {
            Ok(output) => {
                let mut shown = ToolResult::new(&call_id, &name, output.llm_text());
                let user = output.user_text();
                if user != shown.content {
                    shown.user_text = Some(user);
                }
                shown.blocks = output.blocks.clone();
                shown.silent = output.silent;
                shown.is_error = output.is_error;
                shown
            }
            Err(error) => {
                let mut shown =
                    ToolResult::new(&call_id, &name, format!("Error: {}", error.for_model()));
                shown.is_error = true;
                shown
            }
        };
        shown.duration_ms = duration_ms;
        self.hub.send_call(FeedItem::CallEnd {
            id,
            result: shown,
            timestamp_ms: now_ms(),
        });
        result
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().try_into().unwrap_or(u64::MAX))
}
