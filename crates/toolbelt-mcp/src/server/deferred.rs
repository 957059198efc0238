//! Deferred tools over MCP: a client is offered `tool_search` instead of the deferred tools;
//! the tools a search finds are added to that client's session's `tools/list`, and the
//! session is told with `notifications/tools/list_changed`.
//!
//! Deferring is about the client's context size, not permission: a deferred tool a client
//! calls by name without searching runs like any other visible tool. Hide a tool with
//! [`ToolServer::with_filter`](super::ToolServer::with_filter).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use toolbelt_core::{Declaration, ToolContext, ToolFilter, ToolOutput};
use toolbelt_exec::ToolSnapshot;

/// The name of the tool that finds deferred tools.
pub const TOOL_SEARCH: &str = "tool_search";
/// How many tools one search loads when the client gives no `limit`.
const DEFAULT_LIMIT: usize = 5;
/// The most tools one search loads.
const MAX_LIMIT: usize = 20;

/// Ranks deferred tools for a `tool_search` query: the names of the best matches among
/// `candidates`, best first, at most `limit`.
#[async_trait]
pub trait ToolRanker: Send + Sync {
    /// The best matches; an error is shown to the client as the search's failure.
    async fn rank(
        &self,
        query: &str,
        candidates: &[Declaration],
        limit: usize,
    ) -> Result<Vec<String>, String>;
}

/// Which tools are deferred and how they are found; given to
/// [`ToolServer::with_deferred_tools`](super::ToolServer::with_deferred_tools).
#[derive(Clone)]
pub(crate) struct Deferral {
    pub(crate) deferred: ToolFilter,
    pub(crate) ranker: Arc<dyn ToolRanker>,
    pub(crate) declaration: Declaration,
}

impl Deferral {
    pub(crate) fn new(deferred: ToolFilter, ranker: Arc<dyn ToolRanker>) -> Self {
        let declaration = Declaration::new(
            TOOL_SEARCH,
            "Searches for more tools. Only some tools are listed; many more are available on \
             demand. Describe the capability you need (e.g. \"take a browser screenshot\"); \
             the best matching tools are added to your tool list.",
        )
        .and_then(|d| {
            d.with_input_schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                              "description": format!("How many tools to load (default {DEFAULT_LIMIT}).")}
                },
                "required": ["query"]
            }))
        })
        .map(|d| d.read_only().concurrency_safe(true))
        // A constant name and schema, known to be valid.
        .unwrap_or_else(|e| unreachable!("tool_search declaration: {e}"));
        Self {
            deferred,
            ranker,
            declaration,
        }
    }
}

/// The deferred tools one client session has loaded.
pub(crate) type Loaded = Arc<Mutex<BTreeSet<String>>>;

/// The tools a session lists: the visible ones that are not deferred or were loaded, plus
/// `tool_search`; and the deferred ones still hidden.
pub(crate) fn split(
    deferral: &Deferral,
    loaded: &Loaded,
    ctx: &ToolContext,
    visible: &ToolSnapshot,
) -> (Vec<Declaration>, Vec<Declaration>) {
    let loaded = loaded.lock().unwrap_or_else(|p| p.into_inner());
    let mut listed = Vec::new();
    let mut hidden = Vec::new();
    for tool in visible.tools() {
        if tool.name() == TOOL_SEARCH {
            // Shadowed by the search.
            continue;
        }
        if deferral.deferred.allows(ctx, tool.as_ref()) && !loaded.contains(tool.name()) {
            hidden.push(tool.declaration().clone());
        } else {
            listed.push(tool.declaration().clone());
        }
    }
    listed.push(deferral.declaration.clone());
    (listed, hidden)
}

/// Runs a client's `tool_search(query, limit?)` over the hidden tools: loads the matches into
/// the session and says which; returns the names loaded (none when nothing changed).
pub(crate) async fn search(
    deferral: &Deferral,
    loaded: &Loaded,
    hidden: &[Declaration],
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> (ToolOutput, Vec<String>) {
    let query = arguments
        .and_then(|a| a.get("query"))
        .and_then(|q| q.as_str())
        .map(str::trim)
        .unwrap_or("");
    if query.is_empty() {
        return (
            ToolOutput::error(
                "tool_search needs a `query`: the capability you need, in a few words",
            ),
            Vec::new(),
        );
    }
    let limit = arguments
        .and_then(|a| a.get("limit"))
        .and_then(|l| l.as_u64())
        .map_or(DEFAULT_LIMIT, |l| (l as usize).clamp(1, MAX_LIMIT));
    if hidden.is_empty() {
        return (
            ToolOutput::text(
                "Every available tool is already listed; there is nothing more to search.",
            ),
            Vec::new(),
        );
    }
    let found = match deferral.ranker.rank(query, hidden, limit).await {
        Ok(found) => found,
        Err(error) => {
            return (
                ToolOutput::error(format!("the tool search failed: {error}")),
                Vec::new(),
            );
        }
    };
    let found: Vec<&Declaration> = found
        .iter()
        .filter_map(|name| hidden.iter().find(|d| d.name.as_str() == name))
        .take(limit)
        .collect();
    if found.is_empty() {
        return (
            ToolOutput::text(format!(
                "No tool matches {query:?}. Try other words for the capability you need."
            )),
            Vec::new(),
        );
    }
    let names: Vec<String> = found.iter().map(|d| d.name.to_string()).collect();
    loaded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(names.iter().cloned());
    let mut text = format!(
        "Added {} tool{} to your tool list:\n",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    for declaration in found {
        let line = declaration.description.lines().next().unwrap_or("").trim();
        text.push_str(&format!("- {}: {line}\n", declaration.name));
    }
    (ToolOutput::text(text.trim_end().to_string()), names)
}
