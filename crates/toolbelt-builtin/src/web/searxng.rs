//! A [`SearchProvider`] for a self-hosted SearXNG instance, through its JSON API
//! (`/search?q=…&format=json`; the instance must list `json` in `search.formats`).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use toolbelt_core::{ToolContext, ToolError};

use super::dom::collapse_whitespace;
use super::http::Endpoint;
use super::search::{SearchProvider, SearchRequest, SearchResult, dedup_results};

/// The default time limit of one SearXNG request.
pub const DEFAULT_SEARXNG_TIMEOUT: Duration = Duration::from_secs(15);

/// Searches a SearXNG instance.
#[derive(Debug, Clone)]
pub struct SearxngProvider {
    endpoint: Endpoint,
}

impl SearxngProvider {
    /// The instance at `base_url` (for example `http://127.0.0.1:8888`; `/search` is added
    /// unless the URL ends with it).
    pub fn new(base_url: impl Into<String>) -> Result<Self, ToolError> {
        let base = base_url.into();
        let base = base.trim_end_matches('/');
        let url = if base.ends_with("/search") {
            base.to_string()
        } else {
            format!("{base}/search")
        };
        Ok(Self {
            endpoint: Endpoint::new("SearXNG", url, DEFAULT_SEARXNG_TIMEOUT)?,
        })
    }

    /// Sets the `User-Agent`.
    pub fn with_user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.endpoint.user_agent = user_agent.into();
        self
    }

    /// Sets the time limit of a request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.endpoint.timeout = timeout;
        self
    }

    /// Uses another HTTP client.
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.endpoint.client = client;
        self
    }
}

#[async_trait]
impl SearchProvider for SearxngProvider {
    fn name(&self) -> &str {
        "searxng"
    }

    async fn search(
        &self,
        ctx: &ToolContext,
        request: &SearchRequest,
    ) -> Result<Vec<SearchResult>, ToolError> {
        let body = self
            .endpoint
            .get_text(ctx, &[("q", request.query.as_str()), ("format", "json")])
            .await
            .map_err(|err| match err {
                ToolError::Failed(e) if e.to_string().contains("HTTP 403") => {
                    ToolError::failed(format!(
                        "{e} (does the instance allow the json format? add it to search.formats in \
                 its settings.yml)"
                    ))
                }
                other => other,
            })?;
        let mut results = parse_searxng(&body)?;
        results.truncate(request.max_results);
        Ok(results)
    }
}

/// Reads the results of a SearXNG JSON response, in its order, without duplicates.
pub fn parse_searxng(body: &str) -> Result<Vec<SearchResult>, ToolError> {
    let json: Value = serde_json::from_str(body)
        .map_err(|e| ToolError::failed(format!("SearXNG did not answer JSON: {e}")))?;
    let items = json
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| ToolError::failed("the SearXNG response has no results list"))?;
    let field = |item: &Value, key: &str| {
        collapse_whitespace(item.get(key).and_then(Value::as_str).unwrap_or(""))
    };
    let results = items
        .iter()
        .filter_map(|item| {
            let url = field(item, "url");
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return None;
            }
            let title = field(item, "title");
            Some(SearchResult {
                title: if title.is_empty() { url.clone() } else { title },
                url,
                snippet: field(item, "content"),
            })
        })
        .collect();
    Ok(dedup_results(results))
}
