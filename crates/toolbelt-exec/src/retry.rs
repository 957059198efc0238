//! The retry middleware: when to try again comes from [`RetryPolicy`] (the schedule model
//! calls use too, computed by `backon`); whether a failed tool call is worth trying again is
//! decided here, from the error's kind and the tool's idempotence.
//!
//! Retrying runs a tool again, so it must do no harm. The default rule retries only
//! [transient](ToolError::is_transient) errors (a connection reset, an unexpected EOF): the
//! call most likely never took effect. An error whose outcome is unknown (an MCP server that
//! died mid-call: it may or may not have run) is not transient and is never retried by the
//! default rule. A tool declared `idempotent: Some(false)` (a payment, an append) is not
//! retried at all unless [`Retry::retry_non_idempotent`] says so; tools that declare nothing,
//! as most function tools do, are retried on transient errors.

use std::sync::Arc;

use async_trait::async_trait;
use toolbelt_core::{RetryPolicy, ToolContext, ToolError, ToolOutput};

use crate::{Middleware, Next, ToolRequest};

/// What `retry_on` sees about a failed attempt.
#[derive(Debug, Clone, Copy)]
pub struct RetryInfo<'a> {
    /// The call's context: its invocation (an agent run puts its `Invocation` there, so a
    /// rule can read the agent's name or the session), cancellation and extensions.
    pub ctx: &'a ToolContext,
    /// The tool's name.
    pub tool_name: &'a str,
    /// The call's `tool_call_id`.
    pub call_id: &'a str,
    /// Which attempt just failed (1 for the first call).
    pub attempt: u32,
    /// The error, when the attempt failed with one.
    pub error: Option<&'a ToolError>,
    /// The output, when the tool returned one (a result-level failure, see `result_error`).
    pub output: Option<&'a ToolOutput>,
    /// Whether the tool returned an output marked `is_error` (a result-level failure).
    pub result_error: bool,
}

/// Decides whether a failed attempt is retried.
pub type RetryOn = Arc<dyn Fn(&RetryInfo<'_>) -> bool + Send + Sync>;

/// The default, conservative rule: retry transient errors only
/// ([`ToolError::is_transient`]: unexpected EOF, connection reset or aborted, a broken pipe,
/// a transport timeout). Never cancellation, the call's own timeout or deadline, an unknown
/// outcome, bad arguments, rejections, panics, or result-level failures.
pub fn default_retry_on(info: &RetryInfo<'_>) -> bool {
    info.error.is_some_and(ToolError::is_transient)
}

/// Retries failed calls on the schedule of a [`RetryPolicy`].
///
/// Waits between attempts end early, with [`ToolError::Cancelled`], if the call is
/// cancelled. Placed outside [`Timeout`](crate::Timeout), every attempt gets its own time
/// limit. A streaming tool called in a streamed batch is not retried: its chunks have
/// already reached the caller, and a second attempt would send them again.
///
/// ```
/// use std::time::Duration;
/// use toolbelt_core::RetryPolicy;
/// use toolbelt_exec::{Retry, default_retry_on};
///
/// let retry = Retry::new(RetryPolicy {
///     max_retries: 2,
///     min_delay: Duration::from_millis(200),
///     ..RetryPolicy::default()
/// })
/// // Also retry results the tool itself marked as failed.
/// .retry_on(|info| default_retry_on(info) || info.result_error);
/// assert_eq!(retry.policy().max_retries, 2);
/// ```
#[derive(Clone, Default)]
pub struct Retry {
    policy: RetryPolicy,
    retry_on: Option<RetryOn>,
    retry_non_idempotent: bool,
}

impl std::fmt::Debug for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retry")
            .field("policy", &self.policy)
            .field("retry_on", &self.retry_on.as_ref().map(|_| "custom"))
            .field("retry_non_idempotent", &self.retry_non_idempotent)
            .finish()
    }
}

impl Retry {
    /// Retries on `policy`'s schedule, with the default rule ([`default_retry_on`]).
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            retry_on: None,
            retry_non_idempotent: false,
        }
    }

    /// Uses `retry_on` to decide which failures are retried (start from
    /// [`default_retry_on`] and add conditions).
    pub fn retry_on(
        mut self,
        retry_on: impl Fn(&RetryInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_on = Some(Arc::new(retry_on));
        self
    }

    /// Retries tools declared `idempotent: Some(false)` too (default off: see the module
    /// docs). Tools that declare nothing are retried either way.
    pub fn retry_non_idempotent(mut self, on: bool) -> Self {
        self.retry_non_idempotent = on;
        self
    }

    /// The schedule.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    fn should_retry(&self, info: &RetryInfo<'_>) -> bool {
        match &self.retry_on {
            Some(retry_on) => retry_on(info),
            None => default_retry_on(info),
        }
    }
}

#[async_trait]
impl Middleware for Retry {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let declared_unsafe = req.tool.declaration().meta.idempotent == Some(false);
        let streamed = req.chunks.is_some() && req.tool.is_streaming();
        if streamed || (declared_unsafe && !self.retry_non_idempotent) {
            return next.run(ctx, req).await;
        }
        let mut delays = self.policy.delays();
        let mut attempt = 1;
        loop {
            let result = next.run(ctx.clone(), req.clone()).await;
            if ctx.is_cancelled() {
                return result;
            }
            let info = RetryInfo {
                ctx: &ctx,
                tool_name: req.tool_name(),
                call_id: &req.call_id,
                attempt,
                error: result.as_ref().err(),
                output: result.as_ref().ok(),
                result_error: result.as_ref().is_ok_and(|out| out.is_error),
            };
            let failed = info.error.is_some() || info.result_error;
            if !failed || !self.should_retry(&info) {
                return result;
            }
            let Some(delay) = delays.next() else {
                return result;
            };
            attempt += 1;
            tracing::debug!(
                tool = req.tool_name(),
                call_id = &*req.call_id,
                attempt,
                delay_ms = delay.as_millis() as u64,
                "retrying a failed tool call"
            );
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = ctx.cancelled() => return Err(ToolError::Cancelled),
            }
        }
    }
}
