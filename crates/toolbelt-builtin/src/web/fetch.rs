//! `WebFetch`: GET a URL under a domain policy and the SSRF guard, follow same-host redirects,
//! and return the content as Markdown or text (or hand it to a [`ContentProcessor`]).

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::address::{AddressPolicy, GuardedResolver};
use super::convert::{self, ContentKind};
use super::domain::DomainPolicy;
use super::http::{self, DEFAULT_USER_AGENT};
use crate::fs::pdf;

/// The default largest body WebFetch reads: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// The default cap on the characters of content returned without a processor.
pub const DEFAULT_MAX_CONTENT_CHARS: usize = 100_000;
/// The default number of same-host redirects followed.
pub const DEFAULT_MAX_REDIRECTS: usize = 5;
/// The largest PDF WebFetch reads (a paper runs to a few MiB; a PDF cut short cannot be
/// read at all, so it gets more room than a page).
pub const MAX_PDF_BYTES: usize = 16 * 1024 * 1024;
/// The default time limit of one fetch, redirects and body included.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A page WebFetch read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPage {
    /// The URL the model asked for.
    pub requested_url: String,
    /// The URL the content came from (after same-host redirects).
    pub url: String,
    /// The HTTP status.
    pub status: u16,
    /// The media type the server declared (empty when none).
    pub media_type: String,
    /// The page's title, for HTML with a `<title>`.
    pub title: Option<String>,
    /// Markdown for HTML, the text itself otherwise.
    pub content: String,
    /// Whether the body was longer than the byte limit and cut there.
    pub body_truncated: bool,
    /// The bytes of body read.
    pub body_bytes: usize,
}

/// What a fetch ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// Content was read.
    Page(FetchedPage),
    /// The server redirected to another host; nothing was fetched from it.
    CrossHostRedirect {
        /// The URL that answered with the redirect.
        from: String,
        /// Where it points.
        to: String,
        /// The redirect status (301, 302, 303, 307, 308).
        status: u16,
    },
}

/// Answers WebFetch's `prompt` from a page's content: the agent layer implements it with a
/// (small, fast) model, so the main model reads an answer instead of a whole page.
#[async_trait]
pub trait ContentProcessor: Send + Sync + fmt::Debug {
    /// Returns what `prompt` asks of `page`. An error fails the call.
    async fn process(
        &self,
        ctx: &ToolContext,
        page: &FetchedPage,
        prompt: &str,
    ) -> Result<String, ToolError>;
}

/// WebFetch's configuration.
#[derive(Clone)]
pub struct WebFetchOptions {
    /// Which domains may be fetched (default: all).
    pub domains: DomainPolicy,
    /// Which addresses may be connected to (default: public addresses only).
    pub addresses: AddressPolicy,
    /// The time limit of a fetch, redirects and body included (default 30 s).
    pub timeout: Duration,
    /// The most body bytes read; the rest is never downloaded (default 1 MiB).
    pub max_body_bytes: usize,
    /// The most characters of content returned when no processor is set (default 100 000).
    pub max_content_chars: usize,
    /// The most same-host redirects followed (default 5).
    pub max_redirects: usize,
    /// The `User-Agent` sent.
    pub user_agent: String,
    /// Answers `prompt` from the content; without one the content itself is returned.
    pub processor: Option<Arc<dyn ContentProcessor>>,
}

impl fmt::Debug for WebFetchOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebFetchOptions")
            .field("domains", &self.domains)
            .field("addresses", &self.addresses)
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_content_chars", &self.max_content_chars)
            .field("max_redirects", &self.max_redirects)
            .field("user_agent", &self.user_agent)
            .field("processor", &self.processor)
            .finish()
    }
}

impl Default for WebFetchOptions {
    fn default() -> Self {
        Self {
            domains: DomainPolicy::default(),
            addresses: AddressPolicy::default(),
            timeout: DEFAULT_FETCH_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_content_chars: DEFAULT_MAX_CONTENT_CHARS,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            user_agent: DEFAULT_USER_AGENT.to_string(),
            processor: None,
        }
    }
}

impl WebFetchOptions {
    /// Sets the domain policy.
    pub fn with_domains(mut self, domains: DomainPolicy) -> Self {
        self.domains = domains;
        self
    }

    /// Sets the address policy (the SSRF guard).
    pub fn with_addresses(mut self, addresses: AddressPolicy) -> Self {
        self.addresses = addresses;
        self
    }

    /// Sets the time limit of a fetch.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the most body bytes read.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the most characters of content returned without a processor.
    pub fn with_max_content_chars(mut self, chars: usize) -> Self {
        self.max_content_chars = chars;
        self
    }

    /// Sets the content processor that answers `prompt`.
    pub fn with_processor(mut self, processor: Arc<dyn ContentProcessor>) -> Self {
        self.processor = Some(processor);
        self
    }
}

/// Fetches URLs under [`WebFetchOptions`]; the engine behind the WebFetch tool, usable on
/// its own.
///
/// Its HTTP client follows no redirects itself (each hop is checked here) and, when the
/// SSRF guard is on, resolves names through a [`GuardedResolver`] and ignores proxy
/// settings, so the address checked is the address connected to.
#[derive(Debug, Clone)]
pub struct WebFetcher {
    options: WebFetchOptions,
    client: reqwest::Client,
}

impl WebFetcher {
    /// Builds the fetcher and its HTTP client.
    pub fn new(options: WebFetchOptions) -> Result<Self, ToolError> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(options.user_agent.clone())
            .connect_timeout(options.timeout.min(Duration::from_secs(10)));
        if options.addresses.is_guarded() {
            builder = builder
                .no_proxy()
                .dns_resolver(GuardedResolver::new(options.addresses.clone()));
        }
        let client = builder
            .build()
            .map_err(|e| ToolError::failed(format!("could not build the HTTP client: {e}")))?;
        Ok(Self { options, client })
    }

    /// The configuration.
    pub fn options(&self) -> &WebFetchOptions {
        &self.options
    }

    /// Fetches `url`, following same-host redirects, within the timeout and the call's
    /// cancellation.
    ///
    /// Errors: an invalid URL is [`ToolError::InvalidArguments`]; a refused domain or address
    /// is [`ToolError::Rejected`]; running out of time is [`ToolError::Timeout`].
    pub async fn fetch(&self, ctx: &ToolContext, url: &str) -> Result<FetchOutcome, ToolError> {
        let start = parse_url(url)?;
        let timeout = self.options.timeout;
        http::bounded(ctx, timeout, self.fetch_from(url, start)).await
    }

    async fn fetch_from(&self, requested: &str, start: Url) -> Result<FetchOutcome, ToolError> {
        let timeout = self.options.timeout;
        let mut url = start;
        let mut redirects = 0;
        loop {
            self.check_target(&url)?;
            let mut response = self
                .client
                .get(url.clone())
                .header(
                    ACCEPT,
                    "text/html, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.5",
                )
                .send()
                .await
                .map_err(|e| http::request_error(e, &format!("fetching {url} failed"), timeout))?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                let location = location.to_str().map_err(|_| {
                    ToolError::failed(format!("{url} redirected to a Location that is not text"))
                })?;
                let next = url.join(location).map_err(|e| {
                    ToolError::failed(format!(
                        "{url} redirected to an invalid URL {location:?}: {e}"
                    ))
                })?;
                if !matches!(next.scheme(), "http" | "https") {
                    return Err(ToolError::rejected(format!(
                        "{url} redirected to {next}, which is not an http or https URL"
                    )));
                }
                if !same_host(&url, &next) {
                    return Ok(FetchOutcome::CrossHostRedirect {
                        from: url.to_string(),
                        to: next.to_string(),
                        status: status.as_u16(),
                    });
                }
                if redirects == self.options.max_redirects {
                    return Err(ToolError::failed(format!(
                        "too many redirects: {requested} still redirects after {redirects} hops \
                         (last to {next})"
                    )));
                }
                redirects += 1;
                url = next;
                continue;
            }
            return self
                .read_page(requested, &url, &mut response)
                .await
                .map(FetchOutcome::Page);
        }
    }

    /// Refuses a URL whose host the domain policy refuses, or whose IP literal the guard
    /// refuses (names are checked by the resolver when connecting).
    fn check_target(&self, url: &Url) -> Result<(), ToolError> {
        let host = url
            .host_str()
            .ok_or_else(|| ToolError::invalid_arguments(format!("{url} has no host")))?;
        self.options
            .domains
            .check(host)
            .map_err(|refusal| ToolError::rejected(refusal.to_string()))?;
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            self.options.addresses.check(ip).map_err(|blocked| {
                ToolError::rejected(format!(
                    "{blocked}; fetching internal addresses is not allowed"
                ))
            })?;
        }
        Ok(())
    }

    async fn read_page(
        &self,
        requested: &str,
        url: &Url,
        response: &mut reqwest::Response,
    ) -> Result<FetchedPage, ToolError> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let media_type = convert::media_type(&content_type);
        let declared = convert::kind_of_media_type(&media_type);
        let declared_pdf = media_type == "application/pdf";
        if declared == Some(ContentKind::Binary) && !declared_pdf {
            return Err(binary_refusal(url, &media_type));
        }
        let limit = if declared_pdf {
            self.options.max_body_bytes.max(MAX_PDF_BYTES)
        } else {
            self.options.max_body_bytes
        };
        let body = http::read_limited(response, limit).await.map_err(|e| {
            http::request_error(e, &format!("reading {url} failed"), self.options.timeout)
        })?;
        let kind = declared.unwrap_or_else(|| convert::sniff(&body.bytes));
        let pdf = declared_pdf || (kind == ContentKind::Binary && pdf::is_pdf(&body.bytes));
        if kind == ContentKind::Binary && !pdf {
            return Err(binary_refusal(url, "undeclared binary data"));
        }
        let (title, content) = if pdf {
            (None, pdf_text(url, &body, limit).await?)
        } else {
            let text = http::decode_text(&body.bytes, http::charset_of(&content_type));
            if kind == ContentKind::Html {
                let page = convert_off_runtime(text).await?;
                (page.title, page.markdown)
            } else {
                (None, text)
            }
        };
        Ok(FetchedPage {
            requested_url: requested.to_string(),
            url: url.to_string(),
            status: response.status().as_u16(),
            media_type,
            title,
            content,
            body_truncated: body.truncated,
            body_bytes: body.bytes.len(),
        })
    }
}

/// Converts HTML on the blocking pool. The conversion's time counts against the fetch's
/// timeout like the download's: when the caller stops waiting (timeout, cancellation), the
/// dropped guard sets the stop flag and the conversion ends within a slice of its input.
async fn convert_off_runtime(html: String) -> Result<convert::MarkdownPage, ToolError> {
    /// Sets the flag when the waiting future is dropped, finished or not.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = stop.0.clone();
    tokio::task::spawn_blocking(move || convert::html_to_markdown(&html, &flag))
        .await
        .map_err(|e| ToolError::failed(format!("converting HTML failed: {e}")))?
        .map_err(|_| ToolError::failed("converting HTML was stopped"))
}

/// The text of a fetched PDF, page by page as Read shows it (up to Read's page and character
/// limits), within the PDF reader's time and memory bounds.
async fn pdf_text(url: &Url, body: &http::LimitedBody, limit: usize) -> Result<String, ToolError> {
    if body.truncated {
        return Err(ToolError::failed(format!(
            "{url} is a PDF larger than {} MiB; WebFetch reads only whole PDFs up to that size",
            limit >> 20
        )));
    }
    let text = pdf::extract(body.bytes.clone(), None)
        .await
        .map_err(|e| ToolError::failed(format!("{url} is a PDF that cannot be read: {e}")))?;
    let name = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .filter(|name| !name.is_empty())
        .unwrap_or("document.pdf");
    let mut out = pdf::render_pages(&text, name);
    if let Some((last, _)) = text.pages.last()
        && (text.truncated || *last < text.page_count)
    {
        out.push_str(&format!(
            "\n[showing pages {}-{last} of {}; save the PDF in the working directory and Read \
             it with pages to see the rest]\n",
            text.pages[0].0, text.page_count
        ));
    }
    Ok(out)
}

fn binary_refusal(url: &Url, what: &str) -> ToolError {
    ToolError::failed(format!(
        "{url} returned binary content ({what}); WebFetch reads only HTML and text"
    ))
}

/// Parses and checks the URL a model gave.
fn parse_url(text: &str) -> Result<Url, ToolError> {
    let url = Url::parse(text.trim())
        .map_err(|e| ToolError::invalid_arguments(format!("{text:?} is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::invalid_arguments(format!(
            "{text:?} is not an http or https URL"
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ToolError::invalid_arguments(format!(
            "{text:?} has no host"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ToolError::invalid_arguments(
            "URLs with credentials in them are refused",
        ));
    }
    Ok(url)
}

/// Whether a redirect stays on the same host: same host name (a leading `www.` ignored) and
/// same port, or the upgrade of a default-port `http` URL to `https`.
fn same_host(from: &Url, to: &Url) -> bool {
    let bare = |url: &Url| {
        let host = url.host_str().unwrap_or("").to_ascii_lowercase();
        host.strip_prefix("www.")
            .map(str::to_string)
            .unwrap_or(host)
    };
    if bare(from) != bare(to) {
        return false;
    }
    from.port_or_known_default() == to.port_or_known_default()
        || (from.scheme() == "http"
            && to.scheme() == "https"
            && from.port().is_none()
            && to.port().is_none())
}

/// Arguments of `WebFetch`.
#[derive(Debug, Deserialize, JsonSchema)]
struct WebFetchArgs {
    /// The URL to fetch (http or https).
    url: String,
    /// What to find or answer in the page's content.
    prompt: String,
}

const DESCRIPTION_WITH_PROCESSOR: &str = "Fetches a URL (http or https) and answers the prompt \
from its content: HTML is converted to Markdown first, a PDF's text is taken page by page, \
other text is used as is, other binary content is refused. Redirects to the same host are followed; a redirect to another host is \
reported with the new URL, which you can then fetch with another call. Internal and private \
network addresses cannot be fetched.";

const DESCRIPTION_WITHOUT_PROCESSOR: &str = "Fetches a URL (http or https) and returns its \
content: HTML converted to Markdown, a PDF's text page by page, other text as is; other \
binary content is refused. Long \
content is cut with a marker; use the prompt to say what you are looking for, then read the \
returned content for it yourself. Redirects to the same host are followed; a redirect to \
another host is reported with the new URL, which you can then fetch with another call. \
Internal and private network addresses cannot be fetched.";

/// Builds the `WebFetch` tool.
pub fn web_fetch_tool(options: WebFetchOptions) -> Result<DynTool, ToolError> {
    let description = if options.processor.is_some() {
        DESCRIPTION_WITH_PROCESSOR
    } else {
        DESCRIPTION_WITHOUT_PROCESSOR
    };
    let fetcher = Arc::new(WebFetcher::new(options)?);
    let tool = FunctionTool::returning_output("WebFetch", description, move |ctx, args| {
        let fetcher = fetcher.clone();
        async move { web_fetch(&fetcher, ctx, args).await }
    })?
    .map_declaration(|d| d.read_only().open_world().concurrency_safe(true));
    Ok(Arc::new(tool))
}

async fn web_fetch(
    fetcher: &WebFetcher,
    ctx: ToolContext,
    args: WebFetchArgs,
) -> Result<ToolOutput, ToolError> {
    let page = match fetcher.fetch(&ctx, &args.url).await? {
        FetchOutcome::CrossHostRedirect { from, to, status } => {
            let mut out = ToolOutput::text(format!(
                "{from} redirected (HTTP {status}) to a different host: {to}\n\
                 It was not followed. To read it, call WebFetch again with url {to}."
            ));
            out.meta = json!({"redirect_url": to, "status": status})
                .as_object()
                .cloned();
            return Ok(out);
        }
        FetchOutcome::Page(page) => page,
    };
    let options = fetcher.options();
    let failed_status = !(200..300).contains(&page.status);
    let mut header = format!("URL: {}\n", page.url);
    if failed_status {
        header.push_str(&format!("HTTP status: {}\n", page.status));
    }
    if let Some(title) = &page.title {
        header.push_str(&format!("Title: {title}\n"));
    }
    if page.body_truncated {
        header.push_str(&format!(
            "Note: the page is larger than {} bytes; only its beginning was read.\n",
            options.max_body_bytes
        ));
    }
    let (body, omitted_chars) = match (&options.processor, failed_status) {
        (Some(processor), false) => (processor.process(&ctx, &page, &args.prompt).await?, 0),
        _ => convert::cut_to_limit(&page.content, options.max_content_chars),
    };
    let text = format!("{header}\n{body}");
    let mut out = if failed_status {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    };
    out.meta = json!({
        "url": page.url,
        "status": page.status,
        "media_type": page.media_type,
        "body_bytes": page.body_bytes,
        "body_truncated": page.body_truncated,
        "omitted_chars": omitted_chars,
    })
    .as_object()
    .cloned();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn same_host_means_same_name_and_port() {
        assert!(same_host(&url("http://a.test/x"), &url("http://a.test/y")));
        assert!(same_host(
            &url("http://a.test/"),
            &url("http://www.a.test/")
        ));
        assert!(same_host(&url("http://a.test/"), &url("https://a.test/")));
        assert!(!same_host(
            &url("http://a.test:8080/"),
            &url("http://a.test:9090/")
        ));
        assert!(!same_host(&url("http://a.test/"), &url("http://b.test/")));
        assert!(!same_host(
            &url("http://a.test/"),
            &url("http://evil.a.test/")
        ));
    }

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert!(parse_url("https://example.invalid/a").is_ok());
        for bad in [
            "ftp://example.invalid/",
            "file:///etc/passwd",
            "not a url",
            "http://u:p@example.invalid/",
        ] {
            assert!(
                matches!(parse_url(bad), Err(ToolError::InvalidArguments { .. })),
                "{bad}"
            );
        }
    }
}
