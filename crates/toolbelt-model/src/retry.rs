//! When and how long to wait before retrying a failed model call.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use reqwest::header::HeaderMap;

/// Retries of rate-limited (429) and failed (5xx, connection) model calls.
///
/// Delays grow exponentially with jitter from `min_delay` to `max_delay`; a server's
/// `Retry-After` (seconds) or `retry-after-ms` header replaces the computed delay, capped at
/// `max_retry_after` so a hostile or confused server cannot park the caller for hours.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: usize,
    /// The first delay.
    pub min_delay: Duration,
    /// The longest computed delay.
    pub max_delay: Duration,
    /// The longest delay a `Retry-After` header may ask for.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
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

    /// The computed delays, one per retry.
    pub(crate) fn delays(&self) -> impl Iterator<Item = Duration> + use<> {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_retries)
            .with_jitter()
            .build()
    }

    /// The delay before the next attempt: the server's wish when it stated one, else the
    /// computed one.
    pub(crate) fn delay_for(&self, headers: Option<&HeaderMap>, computed: Duration) -> Duration {
        match headers.and_then(retry_after) {
            Some(asked) => asked.min(self.max_retry_after),
            None => computed,
        }
    }
}

/// The delay a response's `retry-after-ms` or `Retry-After` header asks for. Only the
/// delta-seconds form of `Retry-After` is understood; an HTTP date falls back to backoff.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1000.0);
    }
    header("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(duration_from_secs)
}

fn duration_from_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_seconds_and_milliseconds_are_honoured_and_capped() {
        let policy = RetryPolicy::default();
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(
            policy.delay_for(Some(&headers), Duration::from_secs(9)),
            Duration::from_secs(2)
        );
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(
            policy.delay_for(Some(&headers), Duration::ZERO),
            Duration::from_millis(150)
        );
        headers.remove("retry-after-ms");
        headers.insert("retry-after", HeaderValue::from_static("99999"));
        assert_eq!(
            policy.delay_for(Some(&headers), Duration::ZERO),
            policy.max_retry_after
        );
    }

    #[test]
    fn unparseable_retry_after_falls_back_to_backoff() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        let computed = Duration::from_millis(700);
        assert_eq!(
            RetryPolicy::default().delay_for(Some(&headers), computed),
            computed
        );
        headers.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(
            RetryPolicy::default().delay_for(Some(&headers), computed),
            computed
        );
    }

    #[test]
    fn the_policy_yields_one_delay_per_retry() {
        let policy = RetryPolicy {
            max_retries: 4,
            ..RetryPolicy::default()
        };
        assert_eq!(policy.delays().count(), 4);
        assert_eq!(RetryPolicy::none().delays().count(), 0);
    }
}
