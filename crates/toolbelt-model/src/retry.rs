//! Retrying: what a server asks (the `Retry-After` and `retry-after-ms` headers) and how a
//! caller hears of a retry ([`RetryObserver`]).
//!
//! The schedule itself is [`toolbelt_core::RetryPolicy`], shared with tool calls; which
//! failures are retried is decided in `openai.rs`, where they are understood.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::ModelError;

/// A failed attempt that is about to be retried, as told to a [`RetryObserver`].
#[derive(Debug)]
#[non_exhaustive]
pub struct RetryNotice<'a> {
    /// The attempt that failed, counting from 1.
    pub attempt: usize,
    /// The most attempts the retry policy allows (its retries and the first attempt); a
    /// timed-out attempt is retried once at most, so fewer may be made.
    pub max_attempts: usize,
    /// Why the attempt failed.
    pub error: &'a ModelError,
    /// The wait before the next attempt (the server's `Retry-After` when it sent one).
    pub delay: Duration,
}

/// Hears of each retry of a model call before its wait starts, so a caller can show why
/// it waits ("attempt 2 of 4 failed with 429; next in 4.0 s"); the client itself prints
/// nothing. It runs on the task making the call: keep it short and never block in it.
///
/// ```
/// use toolbelt_model::{OpenAiConfig, RetryObserver};
/// let config = OpenAiConfig::new("http://127.0.0.1:8000/v1", "qwen3").with_retry_observer(
///     RetryObserver::new(|notice| {
///         eprintln!(
///             "attempt {} of {} failed ({}); next in {:.1} s",
///             notice.attempt,
///             notice.max_attempts,
///             notice.error,
///             notice.delay.as_secs_f64()
///         )
///     }),
/// );
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct RetryObserver(Arc<dyn Fn(&RetryNotice<'_>) + Send + Sync>);

impl RetryObserver {
    /// An observer calling `f` for each retry.
    pub fn new(f: impl Fn(&RetryNotice<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub(crate) fn notify(&self, notice: &RetryNotice<'_>) {
        (self.0)(notice);
    }
}

impl fmt::Debug for RetryObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryObserver(..)")
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
    use toolbelt_core::RetryPolicy;

    #[test]
    fn retry_after_seconds_and_milliseconds_are_honoured_and_capped() {
        let policy = RetryPolicy::default();
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.remove("retry-after-ms");
        headers.insert("retry-after", HeaderValue::from_static("99999"));
        assert_eq!(
            policy.delay_for(retry_after(&headers), Duration::ZERO),
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
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("NaN"));
        assert_eq!(retry_after(&headers), None);
    }
}
