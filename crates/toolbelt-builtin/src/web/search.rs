//! `WebSearch`: a [`SearchProvider`] answers the query; the tool removes duplicates, applies
//! the call's domain filters and formats the results.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::domain::{DomainRule, parse_rules};

/// The default number of results WebSearch returns.
pub const DEFAULT_MAX_RESULTS: usize = 10;

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SearchResult {
    /// The page's title.
    pub title: String,
    /// The page's URL.
    pub url: String,
    /// A short extract of the page (may be empty).
    pub snippet: String,
}

/// What a provider is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// The query text.
    pub query: String,
    /// How many results are wanted; a provider may return fewer or more.
    pub max_results: usize,
}

/// A web search backend (DuckDuckGo's HTML results page, a SearXNG instance, or your own).
#[async_trait]
pub trait SearchProvider: Send + Sync + fmt::Debug {
    /// A short name for logs and result metadata.
    fn name(&self) -> &str;

    /// Runs the query. No results is `Ok(vec![])`, not an error.
    async fn search(
        &self,
        ctx: &ToolContext,
        request: &SearchRequest,
    ) -> Result<Vec<SearchResult>, ToolError>;
}

/// A shared search provider.
pub type DynSearchProvider = Arc<dyn SearchProvider>;

/// Removes results whose URL was already seen (ignoring a fragment and a trailing slash),
/// keeping the first.
pub fn dedup_results(results: Vec<SearchResult>) -> Vec<SearchResult> {
    let mut seen = HashSet::new();
    results
        .into_iter()
        .filter(|r| {
            let key = r
                .url
                .split('#')
                .next()
                .unwrap_or("")
                .trim_end_matches('/')
                .to_string();
            seen.insert(key)
        })
        .collect()
}

/// The host of a result URL, if it has one.
fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()?
        .host_str()
        .map(|h| h.to_string())
}

/// A call's domain filter: only allowed domains, or every domain but the blocked ones.
#[derive(Debug)]
enum DomainFilter {
    None,
    Allow(Vec<DomainRule>),
    Block(Vec<DomainRule>),
}

impl DomainFilter {
    fn from_args(allowed: &[String], blocked: &[String]) -> Result<Self, ToolError> {
        let allowed: Vec<&String> = allowed.iter().filter(|d| !d.trim().is_empty()).collect();
        let blocked: Vec<&String> = blocked.iter().filter(|d| !d.trim().is_empty()).collect();
        match (allowed.is_empty(), blocked.is_empty()) {
            (true, true) => Ok(Self::None),
            (false, false) => Err(ToolError::invalid_arguments(
                "give either allowed_domains or blocked_domains, not both",
            )),
            (false, true) => Ok(Self::Allow(
                parse_rules(allowed).map_err(ToolError::invalid_arguments)?,
            )),
            (true, false) => Ok(Self::Block(
                parse_rules(blocked).map_err(ToolError::invalid_arguments)?,
            )),
        }
    }

    fn keeps(&self, result: &SearchResult) -> bool {
        let host = host_of(&result.url);
        match (self, host) {
            (Self::None, _) => true,
            (Self::Allow(rules), Some(host)) => rules.iter().any(|r| r.matches(&host)),
            (Self::Block(rules), Some(host)) => !rules.iter().any(|r| r.matches(&host)),
            (_, None) => false,
        }
    }
}

/// WebSearch's configuration.
#[derive(Debug, Clone)]
pub struct WebSearchOptions {
    /// The backend; `None` means DuckDuckGo's HTML results page with default settings.
    pub provider: Option<DynSearchProvider>,
    /// The most results returned (default [`DEFAULT_MAX_RESULTS`]).
    pub max_results: usize,
}

impl Default for WebSearchOptions {
    fn default() -> Self {
        Self {
            provider: None,
            max_results: DEFAULT_MAX_RESULTS,
        }
    }
}

impl WebSearchOptions {
    /// Uses `provider` for searches.
    pub fn with_provider(mut self, provider: DynSearchProvider) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Sets the most results returned.
    pub fn with_max_results(mut self, max_results: usize) -> Self {
        self.max_results = max_results;
        self
    }
}

/// Arguments of `WebSearch`.
#[derive(Debug, Deserialize, JsonSchema)]
struct WebSearchArgs {
    /// The search query.
    query: String,
    /// Only return results from these domains (`example.com` also covers its subdomains,
    /// `*.example.com` only the subdomains). Cannot be combined with blocked_domains.
    #[serde(default)]
    allowed_domains: Option<Vec<String>>,
    /// Never return results from these domains (same forms as allowed_domains). Cannot be
    /// combined with allowed_domains.
    #[serde(default)]
    blocked_domains: Option<Vec<String>>,
}

const DESCRIPTION: &str = "Searches the web and returns result titles, URLs and snippets. Use \
it for current information and for pages you do not know the URL of; then read a page with \
WebFetch. Results can be limited to some domains (allowed_domains) or exclude some \
(blocked_domains), not both at once.";

/// Builds the `WebSearch` tool over `provider`.
pub fn web_search_tool(
    provider: DynSearchProvider,
    max_results: usize,
) -> Result<DynTool, ToolError> {
    let tool = FunctionTool::returning_output("WebSearch", DESCRIPTION, move |ctx, args| {
        let provider = provider.clone();
        async move { web_search(provider.as_ref(), max_results, ctx, args).await }
    })?
    .map_declaration(|d| d.read_only().open_world().concurrency_safe(true));
    Ok(Arc::new(tool))
}

async fn web_search(
    provider: &dyn SearchProvider,
    max_results: usize,
    ctx: ToolContext,
    args: WebSearchArgs,
) -> Result<ToolOutput, ToolError> {
    let query = args.query.trim();
    if query.chars().count() < 2 {
        return Err(ToolError::invalid_arguments(
            "query must have at least 2 characters",
        ));
    }
    let filter = DomainFilter::from_args(
        args.allowed_domains.as_deref().unwrap_or_default(),
        args.blocked_domains.as_deref().unwrap_or_default(),
    )?;
    let request = SearchRequest {
        query: query.to_string(),
        // Ask for more when a filter will drop some.
        max_results: if matches!(filter, DomainFilter::None) {
            max_results
        } else {
            max_results.saturating_mul(3)
        },
    };
    let found = provider.search(&ctx, &request).await?;
    let results: Vec<SearchResult> = dedup_results(found)
        .into_iter()
        .filter(|r| filter.keeps(r))
        .take(max_results)
        .collect();
    let text = if results.is_empty() {
        format!("No results found for \"{query}\".")
    } else {
        let mut text = format!("Web search results for \"{query}\":\n");
        for (i, r) in results.iter().enumerate() {
            text.push_str(&format!("\n{}. {}\n   {}\n", i + 1, r.title, r.url));
            if !r.snippet.is_empty() {
                text.push_str(&format!("   {}\n", r.snippet));
            }
        }
        text.trim_end().to_string()
    };
    let mut out = ToolOutput::text(text);
    out.meta = json!({"provider": provider.name(), "results": results})
        .as_object()
        .cloned();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(url: &str) -> SearchResult {
        SearchResult {
            title: url.to_string(),
            url: url.to_string(),
            snippet: String::new(),
        }
    }

    #[test]
    fn duplicates_differing_by_fragment_or_slash_are_removed() {
        let results = dedup_results(vec![
            result("https://a.test/x"),
            result("https://a.test/x/"),
            result("https://a.test/x#part"),
            result("https://a.test/y"),
        ]);
        let urls: Vec<&str> = results.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["https://a.test/x", "https://a.test/y"]);
    }

    #[test]
    fn allow_and_block_filters_are_exclusive() {
        let both = DomainFilter::from_args(&["a.test".into()], &["b.test".into()]);
        assert!(matches!(both, Err(ToolError::InvalidArguments { .. })));
        let allow = DomainFilter::from_args(&["a.test".into()], &[]).unwrap();
        assert!(allow.keeps(&result("https://docs.a.test/")));
        assert!(!allow.keeps(&result("https://b.test/")));
        let block = DomainFilter::from_args(&[], &["*.a.test".into()]).unwrap();
        assert!(block.keeps(&result("https://a.test/")));
        assert!(!block.keeps(&result("https://docs.a.test/")));
    }
}
