//! The timeout middleware.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use toolbelt_core::{ToolContext, ToolError, ToolOutput};

use crate::interrupt::own_token;
use crate::{Middleware, Next, ToolRequest};

/// Limits how long a call may run.
///
/// The call runs with a cancellation token of its own (the caller's cancellation is forwarded
/// to it) and a deadline. When the limit passes, that token is cancelled, so the tool sees it (through
/// [`ToolContext::cancelled`] or a token it passed on), the tool gets a short grace period
/// (250 ms by default) to stop, and the call fails with
/// [`ToolError::Timeout`] naming the limit. A tool that never looks at its token cannot be
/// stopped mid-computation: it is dropped at its next `.await` after the grace period.
#[derive(Debug, Clone)]
pub struct Timeout {
    limit: Duration,
    per_tool: HashMap<String, Duration>,
    grace: Duration,
}

impl Timeout {
    /// A `limit` for every tool.
    pub fn new(limit: Duration) -> Self {
        Self {
            limit,
            per_tool: HashMap::new(),
            grace: Duration::from_millis(250),
        }
    }

    /// A different limit for the tool named `tool`.
    pub fn for_tool(mut self, tool: impl Into<String>, limit: Duration) -> Self {
        self.per_tool.insert(tool.into(), limit);
        self
    }

    /// How long a tool may take to stop after its token was cancelled.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The limit for the tool named `tool`.
    pub fn limit_for(&self, tool: &str) -> Duration {
        self.per_tool.get(tool).copied().unwrap_or(self.limit)
    }
}

#[async_trait]
impl Middleware for Timeout {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let limit = self.limit_for(req.tool_name());
        // A token of this attempt's own (see `own_token`): a retry around this middleware
        // gets a fresh one per attempt, and a timeout cancels this attempt only.
        let (ctx, caller, own) = own_token(ctx);
        let ctx = match Instant::now().checked_add(limit) {
            Some(deadline) => ctx.with_deadline(deadline),
            None => ctx,
        };
        let mut work = std::pin::pin!(next.run(ctx, req));
        tokio::select! {
            biased;
            result = &mut work => result,
            () = tokio::time::sleep(limit) => {
                own.cancel();
                let _ = tokio::time::timeout(self.grace, &mut work).await;
                Err(ToolError::Timeout { limit })
            }
            () = caller.cancelled() => {
                own.cancel();
                let _ = tokio::time::timeout(self.grace, &mut work).await;
                Err(ToolError::Cancelled)
            }
        }
    }
}
