//! Web tools: `WebFetch`, `WebSearch` and `duckduckgo_search` (the `web` feature, on by
//! default).
//!
//! - **WebFetch** `{url, prompt}` GETs a page through [`WebFetcher`]: a time limit covering
//!   redirects and body, a body limit enforced while streaming (default 1 MiB; the rest is
//!   never downloaded), HTML converted to Markdown without scripts, styles and navigation,
//!   other text passed through, binary refused. Same-host redirects are followed (up to 5,
//!   each one checked again); a redirect to another host is returned as a notice with the new
//!   URL, for the model to fetch explicitly. [`DomainPolicy`] allows and blocks domains (block
//!   first). The SSRF guard ([`AddressPolicy`]) is on by default: loopback, private,
//!   link-local, unique-local and metadata addresses are refused *after* DNS resolution, inside
//!   the client's resolver, so the address checked is the address connected to; allow ranges
//!   explicitly to reach them. `prompt` goes to a [`ContentProcessor`] when one is set (the
//!   agent layer implements it with a model); without one the content is returned, cut to
//!   [`WebFetchOptions::max_content_chars`] with a marker.
//! - **WebSearch** `{query, allowed_domains, blocked_domains}` asks a [`SearchProvider`]:
//!   [`DuckDuckGoHtml`] (the default) or [`SearxngProvider`], or your own. Duplicates are
//!   removed and the call's domain filter applied (giving both lists is an error).
//! - **duckduckgo_search** `{query}` asks DuckDuckGo's Instant Answer API for a summary and up
//!   to 5 related results, and reads the HTML results page instead when the API has nothing.
//!
//! All three are in a [`BuiltinToolSet`](crate::BuiltinToolSet) by default, like Claude Code's
//! WebFetch and WebSearch: an agent with file and shell tools usually needs the web too, and
//! the SSRF guard makes the default safe to hand to a model. Turn them off with
//! [`WebOptions::disabled`] (or build without the `web` feature).
//!
//! Every address is configurable, so tests point the tools at a server on 127.0.0.1:
//!
//! ```
//! use toolbelt_builtin::web::{AddressPolicy, DuckDuckGoOptions, WebFetchOptions, WebOptions};
//!
//! let web = WebOptions::default()
//!     .with_fetch(
//!         WebFetchOptions::default()
//!             .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap())),
//!     )
//!     .with_duckduckgo(
//!         DuckDuckGoOptions::default()
//!             .with_api_url("http://127.0.0.1:8080/")
//!             .with_html_url("http://127.0.0.1:8080/html/"),
//!     );
//! let tools = toolbelt_builtin::web::tools(&web).unwrap();
//! let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
//! assert_eq!(names, ["WebFetch", "WebSearch", "duckduckgo_search"]);
//! ```

mod address;
mod convert;
mod dom;
mod domain;
mod duckduckgo;
mod fetch;
mod http;
mod markdown;
mod search;
mod searxng;

use std::sync::Arc;

use toolbelt_core::{DynTool, ToolError};

pub use address::{
    AddressKind, AddressPolicy, BlockedAddress, BlockedHost, GuardedResolver, METADATA_ADDRESS,
    classify,
};
pub use domain::{DomainPolicy, DomainRefusal, DomainRule};
pub use duckduckgo::{
    DEFAULT_DUCKDUCKGO_RESULTS, DEFAULT_DUCKDUCKGO_TIMEOUT, DUCKDUCKGO_API_URL,
    DUCKDUCKGO_HTML_URL, DuckDuckGo, DuckDuckGoAnswer, DuckDuckGoHtml, DuckDuckGoOptions,
    duckduckgo_tool, parse_instant_answer, parse_results_page,
};
pub use fetch::{
    ContentProcessor, DEFAULT_FETCH_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_REDIRECTS, FetchOutcome, FetchedPage, WebFetchOptions, WebFetcher, web_fetch_tool,
};
pub use http::DEFAULT_USER_AGENT;
pub use ipnet::IpNet;
pub use search::{
    DEFAULT_MAX_RESULTS, DynSearchProvider, SearchProvider, SearchRequest, SearchResult,
    WebSearchOptions, dedup_results, web_search_tool,
};
pub use searxng::{DEFAULT_SEARXNG_TIMEOUT, SearxngProvider, parse_searxng};

/// The web tools' section of [`BuiltinOptions`](crate::BuiltinOptions).
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// Whether the three web tools are in the set (default true).
    pub enabled: bool,
    /// WebFetch: domain and address policy, limits, content processor.
    pub fetch: WebFetchOptions,
    /// WebSearch: provider and result count. Without a provider, WebSearch reads
    /// DuckDuckGo's results page with the [`WebOptions::duckduckgo`] settings (address, user
    /// agent, client, timeout).
    pub search: WebSearchOptions,
    /// duckduckgo_search: API and results page addresses, user agent, client, timeout.
    pub duckduckgo: DuckDuckGoOptions,
}

impl Default for WebOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            fetch: WebFetchOptions::default(),
            search: WebSearchOptions::default(),
            duckduckgo: DuckDuckGoOptions::default(),
        }
    }
}

impl WebOptions {
    /// No web tools.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Configures WebFetch.
    pub fn with_fetch(mut self, fetch: WebFetchOptions) -> Self {
        self.fetch = fetch;
        self
    }

    /// Configures WebSearch.
    pub fn with_search(mut self, search: WebSearchOptions) -> Self {
        self.search = search;
        self
    }

    /// Configures duckduckgo_search (and WebSearch's default provider).
    pub fn with_duckduckgo(mut self, duckduckgo: DuckDuckGoOptions) -> Self {
        self.duckduckgo = duckduckgo;
        self
    }
}

/// The web tools `options` asks for: WebFetch, WebSearch and duckduckgo_search, or none.
pub fn tools(options: &WebOptions) -> Result<Vec<DynTool>, ToolError> {
    if !options.enabled {
        return Ok(Vec::new());
    }
    let provider: DynSearchProvider = match &options.search.provider {
        Some(provider) => provider.clone(),
        None => {
            let ddg = &options.duckduckgo;
            let mut html = DuckDuckGoHtml::new()?
                .with_base_url(ddg.html_url.clone())
                .with_user_agent(ddg.user_agent.clone())
                .with_timeout(ddg.timeout);
            if let Some(client) = &ddg.client {
                html = html.with_client(client.clone());
            }
            Arc::new(html)
        }
    };
    Ok(vec![
        web_fetch_tool(options.fetch.clone())?,
        web_search_tool(provider, options.search.max_results)?,
        duckduckgo_tool(options.duckduckgo.clone())?,
    ])
}
