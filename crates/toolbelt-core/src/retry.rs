//! [`RetryPolicy`]: how often and how long to wait before trying again, the one retry
//! schedule shared by model calls (`toolbelt-model`) and tool calls (`toolbelt-exec`'s retry
//! middleware).
//!
//! The policy says only *when*; *whether* a failure is worth retrying is decided where the
//! failure is understood (an HTTP status for a model call, a tool's idempotence and error
//! kind for a tool call).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Retries with exponential backoff: up to `max_retries` retries after the first attempt,
/// waiting `min_delay`, then `factor` times longer each time, at most `max_delay`, each wait
/// randomised when `jitter` is on.
///
/// ```
/// use std::time::Duration;
/// use toolbelt_core::RetryPolicy;
///
/// let policy = RetryPolicy {
///     max_retries: 3,
///     min_delay: Duration::from_millis(100),
///     jitter: false,
///     ..RetryPolicy::default()
/// };
/// let delays: Vec<u128> = policy.delays().map(|d| d.as_millis()).collect();
/// assert_eq!(delays, [100, 200, 400]);
/// assert_eq!(RetryPolicy::none().delays().count(), 0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying). Default 3.
    pub max_retries: usize,
    /// The first wait. Default 500 ms.
    pub min_delay: Duration,
    /// The longest computed wait. Default 20 s.
    pub max_delay: Duration,
    /// Each wait is the previous one times this factor. Default 2.
    pub factor: f32,
    /// Randomise each wait (adds up to one more computed delay), so callers that failed
    /// together do not retry together. Default on.
    pub jitter: bool,
    /// The longest wait a server may ask for (HTTP `Retry-After`), so a hostile or confused
    /// server cannot park the caller for hours. Default 60 s.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            factor: 2.0,
            jitter: true,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// `max_retries` retries with the default waits.
    pub fn retries(max_retries: usize) -> Self {
        Self {
            max_retries,
            ..Self::default()
        }
    }

    /// The waits, one per retry, as `backon` computes them.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        self.backoff().build()
    }

    /// The schedule as a `backon` builder, for `backon::Retryable`.
    pub fn backoff(&self) -> ExponentialBuilder {
        let factor = if self.factor.is_finite() && self.factor >= 1.0 {
            self.factor
        } else {
            1.0
        };
        let builder = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(factor)
            .with_max_times(self.max_retries);
        if self.jitter {
            builder.with_jitter()
        } else {
            builder
        }
    }

    /// The wait before the next attempt when a server asked for `asked` (capped at
    /// [`RetryPolicy::max_retry_after`]), else `computed`.
    pub fn delay_for(&self, asked: Option<Duration>, computed: Duration) -> Duration {
        match asked {
            Some(asked) => asked.min(self.max_retry_after),
            None => computed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_by_the_factor_up_to_the_cap() {
        let policy = RetryPolicy {
            max_retries: 5,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            factor: 2.0,
            jitter: false,
            ..RetryPolicy::default()
        };
        let delays: Vec<u128> = policy.delays().map(|d| d.as_millis()).collect();
        assert_eq!(delays, [100, 200, 300, 300, 300]);
    }

    #[test]
    fn jitter_stays_within_one_extra_delay() {
        let policy = RetryPolicy {
            max_retries: 50,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(100),
            ..RetryPolicy::default()
        };
        for delay in policy.delays() {
            assert!(delay >= Duration::from_millis(100) && delay <= Duration::from_millis(200));
        }
    }

    #[test]
    fn a_server_cannot_ask_for_more_than_the_cap() {
        let policy = RetryPolicy::default();
        let computed = Duration::from_millis(7);
        assert_eq!(policy.delay_for(None, computed), computed);
        assert_eq!(
            policy.delay_for(Some(Duration::from_secs(2)), computed),
            Duration::from_secs(2)
        );
        assert_eq!(
            policy.delay_for(Some(Duration::from_secs(99_999)), computed),
            policy.max_retry_after
        );
    }
}
