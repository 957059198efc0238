//! Progress of calls in flight: rmcp puts a progress token on every request; for a call
//! whose context watches progress ([`ToolContext::wants_progress`]) the server's
//! `notifications/progress` for that token are handed to the context's sink while the call
//! runs.
//!
//! rmcp handles each notification in a task of its own, so a report sent just before the
//! result can be handled just after it; the call yields once before closing its route to
//! let such a report through. Reports for a finished call are dropped (a server relaying
//! them would break the protocol's rule that progress ends with the request).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use toolbelt_core::{ProgressUpdate, ToolContext};

/// The calls of one tool set that wait for progress, by token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, ToolContext>>,
}

/// Keeps a route open while its call runs; dropping it closes the route, so late
/// notifications for a finished call are ignored.
pub(crate) struct ProgressRoute {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl ProgressRoutes {
    /// Opens a route from `token` (the one rmcp put on the request) to `ctx`, when `ctx`
    /// watches progress.
    pub fn open(
        self: &Arc<Self>,
        ctx: &ToolContext,
        token: ProgressToken,
    ) -> Option<ProgressRoute> {
        if !ctx.wants_progress() {
            return None;
        }
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), ctx.clone());
        Some(ProgressRoute {
            routes: self.clone(),
            token,
        })
    }

    /// Hands one notification to the call it belongs to, if that call still runs.
    pub fn deliver(&self, params: ProgressNotificationParam) {
        let ctx = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&params.progress_token)
            .cloned();
        let Some(ctx) = ctx else {
            tracing::debug!(token = ?params.progress_token, "progress for no running call; ignored");
            return;
        };
        let mut update = ProgressUpdate::new(params.progress);
        update.total = params.total;
        update.message = params.message;
        ctx.report_progress(update);
    }
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.token);
    }
}
