//! The exclusive lane: calls of tools not declared concurrency-safe never overlap on one
//! tool set, whichever front end made them.
//!
//! A tool declared `concurrency_safe: Some(true)` may run beside anything. Every other call
//! (declared unsafe, or not declared) takes its tool set's lane for the time the tool runs
//! (middleware included, hooks not), so two Edits of one set, or an Edit and a Bash command,
//! never interleave: not in a `Parallel` batch, not when an MCP client pipelines requests to
//! `toolbelt serve` (one `execute` per request), not across concurrent agent runs. Without it,
//! two Edits that each read the file, change their own line and write it back both report
//! success and one change is gone.
//!
//! Which lane a call takes:
//! - a tool of a set added with [`Registry::add_tool_set`](crate::Registry::add_tool_set): the
//!   set's own lane, so the tools of one MCP server never wait on the built-in Bash;
//! - a tool registered directly in a [`Registry`](crate::Registry): the registry's lane;
//! - a tool of a [`ToolSnapshot`](crate::ToolSnapshot) made with
//!   [`ToolSnapshot::from_tools`](crate::ToolSnapshot::from_tools), which knows no sets: the
//!   executor's lane.
//!
//! Waiting is fair (first come, first served), is not counted by the
//! [`Timeout`](crate::Timeout) middleware (which runs inside the lane), and stops at once when
//! the call is cancelled. A call made from inside a call that holds a lane (a tool that awaits
//! another tool's call through the executor) does not wait for that lane again, which would
//! wait forever; a tool must not wait, from a task it spawned, for a call of its own set.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Mutex;
use toolbelt_core::{ToolContext, ToolError};

/// One lane: at most one call not declared concurrency-safe runs on it at a time.
pub(crate) struct Lane {
    /// Never reused, so a nested call can tell which lanes its callers hold.
    id: u64,
    turn: Mutex<()>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").field("id", &self.id).finish()
    }
}

tokio::task_local! {
    /// The lanes held by the calls the future being polled runs inside. Scoped to that
    /// future, not to its task: the calls of one batch run as futures of one task, and only
    /// a call's own future (and what it awaits) may pass its lane.
    static HELD: Held;
}

/// A few lane ids, copied into each nested scope (no allocation per call). Nesting deeper
/// than this is not recorded: such a call waits for its lane like any other.
#[derive(Clone, Copy, Default)]
struct Held {
    ids: [u64; 4],
    len: usize,
}

impl Held {
    fn contains(&self, id: u64) -> bool {
        self.ids[..self.len].contains(&id)
    }

    fn with(mut self, id: u64) -> Self {
        if self.len < self.ids.len() {
            self.ids[self.len] = id;
            self.len += 1;
        }
        self
    }
}

impl Lane {
    /// A new lane.
    pub(crate) fn new() -> Arc<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Arc::new(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            turn: Mutex::new(()),
        })
    }

    /// Runs `work` on this lane: waits for the lane's turn (unless `work` is nested in a call
    /// that holds it already) and holds it until `work` is done. Waiting ends with
    /// [`ToolError::Cancelled`] when `ctx` is cancelled.
    pub(crate) async fn run<T>(
        &self,
        ctx: &ToolContext,
        work: impl Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        let held = HELD.try_with(|held| *held).unwrap_or_default();
        if held.contains(self.id) {
            return work.await;
        }
        // Uncontended, the lock is taken at once; otherwise wait in line (the lock is fair)
        // or until the call is cancelled.
        let _turn = match self.turn.try_lock() {
            Ok(turn) => turn,
            Err(_) => tokio::select! {
                biased;
                () = ctx.cancelled() => return Err(ToolError::Cancelled),
                turn = self.turn.lock() => turn,
            },
        };
        HELD.scope(held.with(self.id), work).await
    }
}
