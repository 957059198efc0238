//! DuckDuckGo: the HTML results page as a [`SearchProvider`], and the `duckduckgo_search`
//! tool over the Instant Answer API (falling back to the results page when the API has
//! nothing to say).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError};

use super::dom::{self, Handle, attribute, has_class, text_of};
use super::http::{DEFAULT_USER_AGENT, Endpoint};
use super::search::{SearchProvider, SearchRequest, SearchResult, dedup_results};

/// DuckDuckGo's HTML results page (no JavaScript needed).
pub const DUCKDUCKGO_HTML_URL: &str = "https://html.duckduckgo.com/html/";
/// DuckDuckGo's Instant Answer API.
pub const DUCKDUCKGO_API_URL: &str = "https://api.duckduckgo.com/";
/// The default time limit of one DuckDuckGo request.
pub const DEFAULT_DUCKDUCKGO_TIMEOUT: Duration = Duration::from_secs(15);
/// The most results `duckduckgo_search` returns by default.
pub const DEFAULT_DUCKDUCKGO_RESULTS: usize = 5;

/// The [`SearchProvider`] that reads DuckDuckGo's HTML results page: result links are
/// unwrapped from DuckDuckGo's redirect (`uddg=`), ads skipped and duplicates removed.
#[derive(Debug, Clone)]
pub struct DuckDuckGoHtml {
    endpoint: Endpoint,
}

impl DuckDuckGoHtml {
    /// The public results page, default user agent, 15 s timeout.
    pub fn new() -> Result<Self, ToolError> {
        Ok(Self {
            endpoint: Endpoint::new(
                "DuckDuckGo",
                DUCKDUCKGO_HTML_URL,
                DEFAULT_DUCKDUCKGO_TIMEOUT,
            )?,
        })
    }

    /// Queries another address (a test server, a proxy); the query goes in its `q` parameter.
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.url = url.into();
        self
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

    /// Uses another HTTP client (for proxies or TLS settings).
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.endpoint.client = client;
        self
    }
}

#[async_trait]
impl SearchProvider for DuckDuckGoHtml {
    fn name(&self) -> &str {
        "duckduckgo"
    }

    async fn search(
        &self,
        ctx: &ToolContext,
        request: &SearchRequest,
    ) -> Result<Vec<SearchResult>, ToolError> {
        let page = self
            .endpoint
            .get_text(ctx, &[("q", request.query.as_str())])
            .await?;
        let mut results = parse_results_page(&page)?;
        results.truncate(request.max_results);
        Ok(results)
    }
}

/// Reads the results of a DuckDuckGo HTML results page, in page order, without ads or
/// duplicates. A bot-check page is an error.
pub fn parse_results_page(html: &str) -> Result<Vec<SearchResult>, ToolError> {
    let document = dom::parse_html(html);
    if dom::find_element(&document, &|n| has_class(n, "anomaly-modal__modal")).is_some() {
        return Err(ToolError::failed(
            "DuckDuckGo answered with a bot check instead of results; try again later or \
             configure another search provider",
        ));
    }
    let blocks = dom::find_all(&document, &|n| has_class(n, "result"));
    let results = blocks
        .iter()
        .filter(|block| !has_class(block, "result--ad"))
        .filter_map(read_result)
        .collect();
    Ok(dedup_results(results))
}

fn read_result(block: &Handle) -> Option<SearchResult> {
    let link = dom::find_element(block, &|n| has_class(n, "result__a"))?;
    let url = unwrap_result_link(&attribute(&link, "href")?)?;
    let title = text_of(&link);
    let snippet = dom::find_element(block, &|n| has_class(n, "result__snippet"))
        .map(|n| text_of(&n))
        .unwrap_or_default();
    (!title.is_empty()).then_some(SearchResult {
        title,
        url,
        snippet,
    })
}

/// The target of a result link: DuckDuckGo wraps it as `//<its host>/l/?uddg=<target>&rut=…`;
/// ad links (`/y.js`) are dropped; direct links are kept. Only http(s) targets count.
fn unwrap_result_link(href: &str) -> Option<String> {
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else {
        href.to_string()
    };
    let url = reqwest::Url::parse(&absolute).ok()?;
    let target = match url.query_pairs().find(|(k, _)| k == "uddg") {
        Some((_, target)) => reqwest::Url::parse(&target).ok()?,
        None if url.path().ends_with("/y.js") => return None,
        None => url,
    };
    matches!(target.scheme(), "http" | "https").then(|| target.to_string())
}

/// What `duckduckgo_search` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DuckDuckGoAnswer {
    /// The query as searched.
    pub query: String,
    /// Where the answer came from: `instant_answer` (the Instant Answer API) or
    /// `web_results` (the HTML results page, used when the API had nothing).
    pub source: String,
    /// The topic the instant answer is about (may be empty).
    pub heading: String,
    /// A direct answer, abstract or definition (may be empty).
    pub summary: String,
    /// Where the summary comes from (may be empty).
    pub summary_url: String,
    /// Related results, at most five by default.
    pub results: Vec<SearchResult>,
}

/// Options of `duckduckgo_search`.
#[derive(Debug, Clone)]
pub struct DuckDuckGoOptions {
    /// The Instant Answer API's address (default [`DUCKDUCKGO_API_URL`]).
    pub api_url: String,
    /// The HTML results page used as the fallback (default [`DUCKDUCKGO_HTML_URL`]).
    pub html_url: String,
    /// The `User-Agent` sent.
    pub user_agent: String,
    /// The HTTP client; `None` builds a default one.
    pub client: Option<reqwest::Client>,
    /// The time limit of each request (default 15 s).
    pub timeout: Duration,
    /// The most results returned (default 5).
    pub max_results: usize,
}

impl Default for DuckDuckGoOptions {
    fn default() -> Self {
        Self {
            api_url: DUCKDUCKGO_API_URL.to_string(),
            html_url: DUCKDUCKGO_HTML_URL.to_string(),
            user_agent: DEFAULT_USER_AGENT.to_string(),
            client: None,
            timeout: DEFAULT_DUCKDUCKGO_TIMEOUT,
            max_results: DEFAULT_DUCKDUCKGO_RESULTS,
        }
    }
}

impl DuckDuckGoOptions {
    /// Sets the Instant Answer API's address.
    pub fn with_api_url(mut self, url: impl Into<String>) -> Self {
        self.api_url = url.into();
        self
    }

    /// Sets the fallback results page's address.
    pub fn with_html_url(mut self, url: impl Into<String>) -> Self {
        self.html_url = url.into();
        self
    }

    /// Sets the `User-Agent`.
    pub fn with_user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Uses another HTTP client.
    pub fn with_client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Sets the time limit of each request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// The engine behind `duckduckgo_search`.
#[derive(Debug, Clone)]
pub struct DuckDuckGo {
    max_results: usize,
    api: Endpoint,
    fallback: DuckDuckGoHtml,
}

impl DuckDuckGo {
    /// Builds the client (unless one was given).
    pub fn new(options: DuckDuckGoOptions) -> Result<Self, ToolError> {
        let mut api = Endpoint::new(
            "the DuckDuckGo Instant Answer API",
            options.api_url,
            options.timeout,
        )?;
        api.user_agent = options.user_agent.clone();
        if let Some(client) = options.client {
            api.client = client;
        }
        let fallback = DuckDuckGoHtml::new()?
            .with_base_url(options.html_url)
            .with_user_agent(options.user_agent)
            .with_timeout(options.timeout)
            .with_client(api.client.clone());
        Ok(Self {
            max_results: options.max_results,
            api,
            fallback,
        })
    }

    /// Asks the Instant Answer API; when it fails or has nothing usable, reads the HTML
    /// results page instead.
    pub async fn search(
        &self,
        ctx: &ToolContext,
        query: &str,
    ) -> Result<DuckDuckGoAnswer, ToolError> {
        let query = query.trim();
        if query.is_empty() {
            return Err(ToolError::invalid_arguments(
                "query is empty: say what to search for",
            ));
        }
        let max = self.max_results;
        let api_failure = match self.instant_answer(ctx, query).await {
            Ok(answer) if !answer.summary.is_empty() || !answer.results.is_empty() => {
                return Ok(answer);
            }
            Ok(_) => None,
            Err(err @ (ToolError::Cancelled | ToolError::InvalidArguments { .. })) => {
                return Err(err);
            }
            Err(err) => Some(err),
        };
        let request = SearchRequest {
            query: query.to_string(),
            max_results: max,
        };
        let results = match (self.fallback.search(ctx, &request).await, api_failure) {
            (Ok(results), _) => results,
            (Err(ToolError::Cancelled), _) => return Err(ToolError::Cancelled),
            (Err(page), Some(api)) => {
                return Err(ToolError::failed(format!(
                    "DuckDuckGo search failed: the Instant Answer API: {api}; the results \
                     page: {page}"
                )));
            }
            (Err(page), None) => return Err(page),
        };
        Ok(DuckDuckGoAnswer {
            query: query.to_string(),
            source: "web_results".to_string(),
            heading: String::new(),
            summary: String::new(),
            summary_url: String::new(),
            results,
        })
    }

    async fn instant_answer(
        &self,
        ctx: &ToolContext,
        query: &str,
    ) -> Result<DuckDuckGoAnswer, ToolError> {
        let body = self
            .api
            .get_text(
                ctx,
                &[
                    ("q", query),
                    ("format", "json"),
                    ("no_html", "1"),
                    ("no_redirect", "1"),
                    ("skip_disambig", "1"),
                ],
            )
            .await?;
        let json: Value = serde_json::from_str(&body).map_err(|e| {
            ToolError::failed(format!("the Instant Answer API did not answer JSON: {e}"))
        })?;
        Ok(parse_instant_answer(query, &json, self.max_results))
    }
}

/// Reads an Instant Answer API response: the first of the answer, abstract and definition
/// as the summary; results, then related topics (groups flattened), as results.
pub fn parse_instant_answer(query: &str, json: &Value, max_results: usize) -> DuckDuckGoAnswer {
    let text = |key: &str| {
        json.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let (summary, summary_url) = [
        ("Answer", ""),
        ("AbstractText", "AbstractURL"),
        ("Abstract", "AbstractURL"),
        ("Definition", "DefinitionURL"),
    ]
    .iter()
    .map(|(body, url)| {
        (
            text(body),
            if url.is_empty() {
                String::new()
            } else {
                text(url)
            },
        )
    })
    .find(|(body, _)| !body.is_empty())
    .unwrap_or_default();
    let mut topics = Vec::new();
    for key in ["Results", "RelatedTopics"] {
        if let Some(items) = json.get(key).and_then(Value::as_array) {
            for item in items {
                match item.get("Topics").and_then(Value::as_array) {
                    Some(group) => topics.extend(group.iter()),
                    None => topics.push(item),
                }
            }
        }
    }
    let results = dedup_results(topics.into_iter().filter_map(read_topic).collect())
        .into_iter()
        .take(max_results)
        .collect();
    DuckDuckGoAnswer {
        query: query.to_string(),
        source: "instant_answer".to_string(),
        heading: text("Heading"),
        summary: dom::collapse_whitespace(&summary),
        summary_url,
        results,
    }
}

/// One topic: the title is the text of the link in `Result`, the snippet what `Text` says
/// beyond the title.
fn read_topic(topic: &Value) -> Option<SearchResult> {
    let url = topic.get("FirstURL")?.as_str()?.trim();
    if url.is_empty() {
        return None;
    }
    let text = dom::collapse_whitespace(topic.get("Text").and_then(Value::as_str).unwrap_or(""));
    let anchor = topic
        .get("Result")
        .and_then(Value::as_str)
        .and_then(anchor_text)
        .filter(|t| !t.is_empty());
    let (title, snippet) = match anchor {
        Some(title) => {
            let rest = text.strip_prefix(title.as_str()).unwrap_or(&text);
            let snippet = rest.trim_start_matches([' ', '-', '–', ',', ':']).trim();
            (
                title.clone(),
                if snippet == title {
                    String::new()
                } else {
                    snippet.to_string()
                },
            )
        }
        None => match text.split_once(" - ") {
            Some((title, snippet)) => (title.to_string(), snippet.to_string()),
            None => (text.clone(), String::new()),
        },
    };
    (!title.is_empty()).then(|| SearchResult {
        title,
        url: url.to_string(),
        snippet,
    })
}

/// The text inside the first `<a …>…</a>` of an HTML fragment.
fn anchor_text(html: &str) -> Option<String> {
    let open = html.find("<a")?;
    let inner_start = open + html[open..].find('>')? + 1;
    let inner_end = inner_start + html[inner_start..].find("</a>")?;
    let fragment = dom::parse_html(&html[inner_start..inner_end]);
    Some(text_of(&fragment))
}

/// Arguments of `duckduckgo_search`.
#[derive(Debug, Deserialize, JsonSchema)]
struct DuckDuckGoArgs {
    /// What to search for.
    query: String,
}

const DESCRIPTION: &str = "Searches DuckDuckGo for factual and encyclopedic information: \
returns a summary (a direct answer, an abstract or a definition, when DuckDuckGo has one) \
and up to 5 related results with titles, URLs and snippets. When there is no instant answer \
it returns ordinary web results instead.";

/// Builds the `duckduckgo_search` tool.
pub fn duckduckgo_tool(options: DuckDuckGoOptions) -> Result<DynTool, ToolError> {
    let engine = Arc::new(DuckDuckGo::new(options)?);
    let tool = FunctionTool::new(
        "duckduckgo_search",
        DESCRIPTION,
        move |ctx, args: DuckDuckGoArgs| {
            let engine = engine.clone();
            async move { engine.search(&ctx, &args.query).await }
        },
    )?
    .map_declaration(|d| d.read_only().open_world().concurrency_safe(true));
    Ok(Arc::new(tool))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_links_are_unwrapped_and_ads_dropped() {
        assert_eq!(
            unwrap_result_link("//duck.test/l/?uddg=https%3A%2F%2Fa.test%2Fx%3Fy%3D1&rut=abc")
                .as_deref(),
            Some("https://a.test/x?y=1")
        );
        assert_eq!(
            unwrap_result_link("https://a.test/direct").as_deref(),
            Some("https://a.test/direct")
        );
        assert_eq!(
            unwrap_result_link("//duck.test/y.js?ad_domain=a.test&u3=x"),
            None
        );
        assert_eq!(
            unwrap_result_link("//duck.test/l/?uddg=javascript%3Aalert(1)"),
            None
        );
    }

    #[test]
    fn topics_split_into_title_and_snippet() {
        let answer = parse_instant_answer(
            "q",
            &json!({
                "Heading": "H",
                "AbstractText": "",
                "Definition": "A definition.",
                "DefinitionURL": "https://d.test/",
                "RelatedTopics": [
                    {"FirstURL": "https://a.test/A", "Result": "<a href=\"https://a.test/A\">A thing</a>The first thing.", "Text": "A thing The first thing."},
                    {"Name": "Group", "Topics": [
                        {"FirstURL": "https://b.test/B", "Text": "B - the second"}
                    ]},
                    {"FirstURL": "", "Text": "no url"}
                ]
            }),
            5,
        );
        assert_eq!(answer.summary, "A definition.");
        assert_eq!(answer.summary_url, "https://d.test/");
        assert_eq!(answer.results.len(), 2);
        assert_eq!(answer.results[0].title, "A thing");
        assert_eq!(answer.results[0].snippet, "The first thing.");
        assert_eq!(answer.results[1].title, "B");
        assert_eq!(answer.results[1].snippet, "the second");
    }
}
