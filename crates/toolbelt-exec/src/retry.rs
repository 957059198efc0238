//! The retry middleware and its policy.
//!
//! Retrying runs a tool again, so it is only safe for calls whose repetition does no harm.
//! By default only tools declared idempotent (`meta.idempotent`) are retried: a payment or a
//! write that timed out on the way back may already have happened, and running it again
//! pays or writes twice unless the tool uses an idempotency key or another way to
//! deduplicate. [`RetryPolicy::retry_non_idempotent`] lifts the restriction for callers that
//! know better.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use toolbelt_core::{ToolContext, ToolError, ToolOutput};

use crate::{Middleware, Next, ToolRequest};

/// What `retry_on` sees about a failed attempt.
#[derive(Debug, Clone, Copy)]
pub struct RetryInfo<'a> {
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
/// a transport timeout). Never cancellation, the call's own timeout or deadline, bad
/// arguments, rejections, panics, or result-level failures.
pub fn default_retry_on(info: &RetryInfo<'_>) -> bool {
    info.error.is_some_and(ToolError::is_transient)
}

/// How a failed call is retried.
///
/// ```
/// use std::time::Duration;
/// use toolbelt_exec::RetryPolicy;
///
/// let policy = RetryPolicy {
///     max_attempts: 3,
///     initial_interval: Duration::from_millis(200),
///     backoff_factor: 2.0,
///     max_interval: Duration::from_secs(2),
///     jitter: false,
///     ..RetryPolicy::default()
/// };
/// assert_eq!(policy.delay_before(2), Duration::from_millis(200));
/// assert_eq!(policy.delay_before(3), Duration::from_millis(400));
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    /// Total attempts, including the first call. 1 (or 0) means no retry. Default 3.
    pub max_attempts: u32,
    /// The wait before the second attempt. Default 200 ms.
    pub initial_interval: Duration,
    /// Each following wait is the previous one times this factor. Default 2.0.
    pub backoff_factor: f64,
    /// No wait is longer than this. Default 2 s.
    pub max_interval: Duration,
    /// Randomize each wait to between half and all of its computed length, so many callers
    /// that failed together do not retry together. Default on.
    pub jitter: bool,
    /// Decides whether a failure is retried; `None` means [`default_retry_on`].
    pub retry_on: Option<RetryOn>,
    /// Retry tools that are not declared idempotent too. Default off (see the module docs).
    pub retry_non_idempotent: bool,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("initial_interval", &self.initial_interval)
            .field("backoff_factor", &self.backoff_factor)
            .field("max_interval", &self.max_interval)
            .field("jitter", &self.jitter)
            .field("retry_on", &self.retry_on.as_ref().map(|_| "custom"))
            .field("retry_non_idempotent", &self.retry_non_idempotent)
            .finish()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_interval: Duration::from_millis(200),
            backoff_factor: 2.0,
            max_interval: Duration::from_secs(2),
            jitter: true,
            retry_on: None,
            retry_non_idempotent: false,
        }
    }
}

impl RetryPolicy {
    /// Uses `retry_on` to decide which failures are retried (start from
    /// [`default_retry_on`] and add conditions).
    pub fn retry_on(
        mut self,
        retry_on: impl Fn(&RetryInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retry_on = Some(Arc::new(retry_on));
        self
    }

    /// The wait before attempt `attempt` (2 for the first retry), without jitter:
    /// `initial_interval × backoff_factor^(attempt − 2)`, at most `max_interval`.
    pub fn delay_before(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(2).min(64) as i32;
        let factor = if self.backoff_factor.is_finite() && self.backoff_factor > 0.0 {
            self.backoff_factor
        } else {
            1.0
        };
        let seconds = self.initial_interval.as_secs_f64() * factor.powi(exponent);
        let capped = seconds.min(self.max_interval.as_secs_f64());
        Duration::try_from_secs_f64(capped.max(0.0)).unwrap_or(self.max_interval)
    }

    /// The wait before attempt `attempt`, with jitter when enabled.
    pub fn jittered_delay_before(&self, attempt: u32) -> Duration {
        let delay = self.delay_before(attempt);
        if !self.jitter {
            return delay;
        }
        // A random fraction in [0.5, 1.0] from the standard library's random hasher keys.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let fraction = 0.5 + (random >> 11) as f64 / (1u64 << 53) as f64 / 2.0;
        delay.mul_f64(fraction)
    }

    fn should_retry(&self, info: &RetryInfo<'_>) -> bool {
        match &self.retry_on {
            Some(retry_on) => retry_on(info),
            None => default_retry_on(info),
        }
    }
}

/// Retries failed calls according to a [`RetryPolicy`].
///
/// Only tools declared idempotent are retried unless the policy says otherwise. Waits
/// between attempts end early, with [`ToolError::Cancelled`], if the call is cancelled.
/// Placed outside [`Timeout`](crate::Timeout), every attempt gets its own time limit.
#[derive(Debug, Clone, Default)]
pub struct Retry {
    policy: RetryPolicy,
}

impl Retry {
    /// Retries with `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
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
        let policy = &self.policy;
        let retryable = policy.retry_non_idempotent || req.tool.declaration().meta.is_idempotent();
        let max_attempts = if retryable {
            policy.max_attempts.max(1)
        } else {
            1
        };
        let mut attempt = 1;
        loop {
            let result = next.run(ctx.clone(), req.clone()).await;
            if attempt >= max_attempts || ctx.is_cancelled() {
                return result;
            }
            let info = RetryInfo {
                tool_name: req.tool_name(),
                call_id: &req.call_id,
                attempt,
                error: result.as_ref().err(),
                output: result.as_ref().ok(),
                result_error: result.as_ref().is_ok_and(|out| out.is_error),
            };
            let failed = info.error.is_some() || info.result_error;
            if !failed || !policy.should_retry(&info) {
                return result;
            }
            attempt += 1;
            let delay = policy.jittered_delay_before(attempt);
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
