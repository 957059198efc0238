//! URL sources of a knowledge base, read through the WebFetch tool: its address guard
//! (loopback, private and link-local addresses refused unless `--allow-address` names them,
//! checked where the connection is made), its size and time limits, HTML converted to
//! Markdown and a PDF's text taken page by page.

use toolbelt::ToolContext;
use toolbelt::builtin::web::{AddressPolicy, FetchOutcome, IpNet, WebFetchOptions, WebFetcher};
use toolbelt_knowledge::{DocKind, FetchedDocument, UrlFetcher};

use crate::common::CliError;

/// Reads URL sources with WebFetch.
pub struct WebFetchSource {
    fetcher: WebFetcher,
}

impl WebFetchSource {
    /// A fetcher whose guard also lets through the ranges in `allowed` (`--allow-address`).
    pub fn new(allowed: &[String]) -> Result<Self, CliError> {
        let mut addresses = AddressPolicy::default();
        for range in allowed {
            let net: IpNet = range
                .parse()
                .or_else(|_| range.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    CliError::usage(format!(
                        "--allow-address {range:?}: not an address or a range (127.0.0.1, 10.0.0.0/8)"
                    ))
                })?;
            addresses = addresses.allow(net);
        }
        let options = WebFetchOptions::default().with_addresses(addresses);
        let fetcher = WebFetcher::new(options)
            .map_err(|e| CliError::failed(format!("the URL fetcher: {e}")))?;
        Ok(Self { fetcher })
    }
}

#[toolbelt::async_trait]
impl UrlFetcher for WebFetchSource {
    async fn fetch(&self, url: &str) -> Result<FetchedDocument, String> {
        match self.fetcher.fetch(&ToolContext::new(), url).await {
            Ok(FetchOutcome::Page(page)) if (200..300).contains(&page.status) => {
                let mut text = page.content;
                if let Some(title) = page.title.filter(|_| !text.starts_with("# ")) {
                    // The page's title heads its first section, so a passage's citation
                    // says which page it came from.
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
