//! [`WebFetchSource`] (feature `web`): URL sources read through the WebFetch tool's fetcher.
//!
//! What WebFetch checks applies to a knowledge base's pages too: its address guard
//! (loopback, private and link-local addresses refused unless the [`AddressPolicy`] allows
//! them, checked where the connection is made, after DNS), its domain policy, its size and
//! time limits; HTML comes back as Markdown, headed here by the page's title so a passage's
//! citation says which page it came from, and a PDF as its text. A redirect to another host
//! is not followed (the caller names that URL instead), and a status outside 2xx is a
//! failed fetch, which keeps what the base stored of the page.

use toolbelt_builtin::web::{AddressPolicy, FetchOutcome, WebFetchOptions, WebFetcher};
use toolbelt_core::{ToolContext, ToolError};

use crate::chunk::DocKind;
use crate::source::{FetchedDocument, UrlFetcher};

/// Reads URL sources with WebFetch's fetcher; see the [module docs](self).
pub struct WebFetchSource {
    fetcher: WebFetcher,
}

impl std::fmt::Debug for WebFetchSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchSource").finish_non_exhaustive()
    }
}

impl WebFetchSource {
    /// WebFetch's defaults, with `addresses` as the address guard
    /// (`AddressPolicy::default()` refuses every non-public address).
    pub fn new(addresses: AddressPolicy) -> Result<Self, ToolError> {
        Self::with_options(WebFetchOptions::default().with_addresses(addresses))
    }

    /// WebFetch under `options` (its domain policy, limits and address guard).
    pub fn with_options(options: WebFetchOptions) -> Result<Self, ToolError> {
        Ok(WebFetchSource {
            fetcher: WebFetcher::new(options)?,
        })
    }
}

#[async_trait::async_trait]
impl UrlFetcher for WebFetchSource {
    async fn fetch(&self, url: &str) -> Result<FetchedDocument, String> {
        match self.fetcher.fetch(&ToolContext::new(), url).await {
            Ok(FetchOutcome::Page(page)) if (200..300).contains(&page.status) => {
                let mut text = page.content;
                if let Some(title) = page.title.filter(|_| !text.starts_with("# ")) {
                    text = format!("# {title}\n\n{text}");
                }
                Ok(FetchedDocument {
                    text,
                    kind: DocKind::Markdown,
                })
            }
            Ok(FetchOutcome::Page(page)) => Err(format!("HTTP {}", page.status)),
            Ok(FetchOutcome::CrossHostRedirect { to, .. }) => Err(format!(
                "redirected to another host ({to}); name that URL instead"
            )),
            Err(error) => Err(error.to_string()),
        }
    }
}
