//! What a server asks about retrying: the `Retry-After` and `retry-after-ms` headers.
//!
//! The schedule itself is [`toolbelt_core::RetryPolicy`], shared with tool calls; which
//! failures are retried is decided in `openai.rs`, where they are understood.

use std::time::Duration;

use reqwest::header::HeaderMap;

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
