//! HTTP plumbing shared by the web tools: bounded body reads, charset decoding, error text,
//! and racing a request against the call's cancellation and a timeout.

use std::future::Future;
use std::time::Duration;

use toolbelt_core::{ToolContext, ToolError};

use super::address::find_blocked_host;

/// The default `User-Agent` of every web tool.
pub const DEFAULT_USER_AGENT: &str = concat!(
    "Mozilla/5.0 (compatible; toolbelt/",
    env!("CARGO_PKG_VERSION"),
    "; +WebFetch)"
);

/// The most bytes of a search results page or API answer that are read.
pub(crate) const MAX_RESULTS_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// A response body read up to a limit.
#[derive(Debug)]
pub(crate) struct LimitedBody {
    pub bytes: Vec<u8>,
    /// The body had more bytes than the limit; the rest was never read.
    pub truncated: bool,
}

/// Reads at most `limit` bytes of the body, chunk by chunk, and stops reading (dropping the
/// connection) as soon as the limit is passed, so an endless body costs `limit` bytes.
pub(crate) async fn read_limited(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<LimitedBody, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(LimitedBody {
                bytes,
                truncated: true,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(LimitedBody {
        bytes,
        truncated: false,
    })
}

/// The charset parameter of a `Content-Type` value.
pub(crate) fn charset_of(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"'))
    })
}

/// Decodes text in its declared charset (UTF-8 when none or an unknown one is declared; a
/// byte-order mark wins). Invalid sequences become U+FFFD.
pub(crate) fn decode_text(bytes: &[u8], charset: Option<&str>) -> String {
    let encoding = charset
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    encoding.decode(bytes).0.into_owned()
}

pub(crate) use toolbelt_core::error_chain;

/// Turns a reqwest error into the matching [`ToolError`]: a refused address is a rejection,
/// a timeout a timeout, a connection failure transient, anything else a failure.
pub(crate) fn request_error(err: reqwest::Error, what: &str, timeout: Duration) -> ToolError {
    if let Some(blocked) = find_blocked_host(&err) {
        return ToolError::rejected(blocked.to_string());
    }
    if err.is_timeout() {
        return ToolError::Timeout { limit: timeout };
    }
    let message = format!("{what}: {}", error_chain(&err));
    if err.is_connect() {
        ToolError::Transient(message.into())
    } else {
        ToolError::failed(message)
    }
}

/// Runs `work` until it finishes, the call is cancelled or `timeout` passes.
pub(crate) async fn bounded<T>(
    ctx: &ToolContext,
    timeout: Duration,
    work: impl Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::select! {
        _ = ctx.cancelled() => Err(ToolError::Cancelled),
        result = tokio::time::timeout(timeout, work) => match result {
            Ok(result) => result,
            Err(_) => Err(ToolError::Timeout { limit: timeout }),
        },
    }
}

/// A service endpoint a developer configured (a search page, an API): its address, the
/// `User-Agent` sent, the time limit of a request and the HTTP client. No SSRF guard applies:
/// the developer chose the address, not the model.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// What the service is called in error messages.
    pub service: &'static str,
    pub url: String,
    pub user_agent: String,
    pub timeout: Duration,
    pub client: reqwest::Client,
}

impl Endpoint {
    /// An endpoint with the default user agent and a fresh client.
    pub fn new(
        service: &'static str,
        url: impl Into<String>,
        timeout: Duration,
    ) -> Result<Self, ToolError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| ToolError::failed(format!("could not build the HTTP client: {e}")))?;
        Ok(Self {
            service,
            url: url.into(),
            user_agent: DEFAULT_USER_AGENT.to_string(),
            timeout,
            client,
        })
    }

    /// GETs the endpoint with `query` parameters and returns the body as text; a non-success status is an error that quotes the body's start.
    pub async fn get_text(
        &self,
        ctx: &ToolContext,
        query: &[(&str, &str)],
    ) -> Result<String, ToolError> {
        let (service, timeout) = (self.service, self.timeout);
        let mut url = reqwest::Url::parse(&self.url).map_err(|e| {
            ToolError::failed(format!(
                "the {service} URL {:?} is not valid: {e}",
                self.url
            ))
        })?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        bounded(ctx, timeout, async {
            let mut response = self
                .client
                .get(url)
                .header(reqwest::header::USER_AGENT, &self.user_agent)
                .timeout(timeout)
                .send()
                .await
                .map_err(|e| request_error(e, &format!("{service} request failed"), timeout))?;
            let status = response.status();
            let charset = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(charset_of)
                .map(str::to_string);
            let body = read_limited(&mut response, MAX_RESULTS_PAGE_BYTES)
                .await
                .map_err(|e| {
                    request_error(
                        e,
                        &format!("reading the {service} response failed"),
                        timeout,
                    )
                })?;
            let text = decode_text(&body.bytes, charset.as_deref());
            if !status.is_success() {
                let start = toolbelt_core::text::shorten(&text, 300);
                return Err(ToolError::failed(format!(
                    "{service} answered HTTP {status}: {}",
                    start.trim()
                )));
            }
            Ok(text)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charset_is_read_from_the_content_type() {
        assert_eq!(
            charset_of("text/html; charset=ISO-8859-1"),
            Some("ISO-8859-1")
        );
        assert_eq!(charset_of("text/html;Charset=\"utf-8\""), Some("utf-8"));
        assert_eq!(charset_of("text/html"), None);
    }

    #[test]
    fn declared_charsets_are_decoded() {
        assert_eq!(decode_text(b"caf\xe9", Some("latin1")), "café");
        assert_eq!(decode_text("café".as_bytes(), None), "café");
        assert_eq!(
            decode_text("café".as_bytes(), Some("no-such-charset")),
            "café"
        );
    }
}
