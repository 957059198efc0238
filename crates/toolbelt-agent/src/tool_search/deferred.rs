//! Deferred tools: recognising them, and the `tool_search` tool that loads them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use serde_json::json;
use toolbelt_core::{Declaration, DynTool, Tool, ToolContext, ToolError, ToolOutput};

use super::{Inner, RunStates};
use crate::Invocation;

/// The name of the framework tool that finds and loads deferred tools.
pub const TOOL_SEARCH: &str = "tool_search";
/// How many tools one `tool_search` call loads when the model gives no `limit`.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// The most tools one `tool_search` call loads.
pub const MAX_SEARCH_LIMIT: usize = 20;

/// A declaration seen as a tool, so a [`ToolFilter`](toolbelt_core::ToolFilter) can judge it;
/// never called.
pub(super) struct DeclarationView<'a>(pub(super) &'a Declaration);

#[async_trait]
impl Tool for DeclarationView<'_> {
    fn declaration(&self) -> &Declaration {
        self.0
    }

    async fn call(&self, _ctx: ToolContext, _args: &str) -> Result<ToolOutput, ToolError> {
        Err(ToolError::failed(
            "a declaration seen by a deferral filter cannot be called",
        ))
    }
}

/// Whether the request's `declaration` is one of `listed`, the tools of the set `set`: the
/// same name (or `{set}_{name}`, the registry's name on a clash) and the same description.
pub(super) fn from_set(declaration: &Declaration, set: &str, listed: &[DynTool]) -> bool {
    let name = declaration.name.as_str();
    listed.iter().any(|tool| {
        let own = tool.name();
        let renamed = name
            .strip_prefix(set)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|rest| rest == own);
        (name == own || renamed) && tool.declaration().description == declaration.description
    })
}

/// `tool_search(query, limit?)`: ranks the deferred tools the latest request left out,
/// returns the best matches and loads them into the run's next requests.
pub(super) struct SearchTool {
    declaration: Declaration,
    inner: Arc<Inner>,
}

impl SearchTool {
    pub(super) fn new(inner: Arc<Inner>) -> Self {
        let declaration = Declaration::new(
            TOOL_SEARCH,
            "Searches for more tools. Only some tools are loaded; many more are available \
             on demand. Describe the capability you need (e.g. \"create a GitHub issue\", \
             \"take a browser screenshot\"); the best matching tools are returned and can be \
             called from your next step.",
        )
        .and_then(|d| {
            d.with_input_schema(json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What the tool should do, in a few words."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_LIMIT,
                        "description": format!("How many tools to load (default {DEFAULT_SEARCH_LIMIT}).")
                    }
                },
                "required": ["query"]
            }))
        })
        .map(|d| d.read_only().concurrency_safe(true))
        // The name and schema above are constants known to be valid.
        .unwrap_or_else(|e| unreachable!("tool_search declaration: {e}"));
        Self { declaration, inner }
    }
}

#[async_trait]
impl Tool for SearchTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        #[derive(serde::Deserialize)]
        struct Args {
            query: String,
            limit: Option<usize>,
        }
        let args: Args = toolbelt_core::decode_args(args, &self.declaration)?;
        let limit = args
            .limit
            .unwrap_or(DEFAULT_SEARCH_LIMIT)
            .clamp(1, MAX_SEARCH_LIMIT);
        let inv = Invocation::from_context(&ctx)
            .ok_or_else(|| ToolError::failed("tool_search only works inside an agent run"))?;
        let hidden: HashMap<String, String> = RunStates::with(inv, self.inner.id, |state| {
            state.hidden.iter().cloned().collect()
        });
        if hidden.is_empty() {
            return Ok(ToolOutput::text(
                "Every available tool is already loaded; there is nothing more to search.",
            ));
        }
        let everything = self.inner.indexed.load(Ordering::Relaxed).max(hidden.len());
        let hits = self
            .inner
            .index
            .lock()
            .await
            .search(&args.query, everything, self.inner.deferred_method)
            .await
            .map_err(|e| ToolError::failed(format!("the tool search failed: {e}")))?;
        let found: Vec<String> = hits
            .into_iter()
            .filter(|hit| matches(hit, self.inner.deferred_method))
            .map(|hit| hit.name)
            .filter(|name| hidden.contains_key(name))
            .take(limit)
            .collect();
        if found.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No tool matches {:?}. Try other words for the capability you need.",
                args.query
            )));
        }
        RunStates::with(inv, self.inner.id, |state| {
            for name in &found {
                state.loaded.insert(name.clone());
            }
            state.hidden.retain(|(n, _)| !found.contains(n));
        });
        let mut text = format!(
            "Loaded {} tool{}; call {} from your next step:\n",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            if found.len() == 1 { "it" } else { "them" },
        );
        for name in &found {
            let description = hidden.get(name).map_or("", String::as_str);
            text.push_str(&format!("- {name}: {description}\n"));
        }
        Ok(ToolOutput::text(text.trim_end().to_string()))
    }
}

/// Whether a hit matched at all: BM25 gives a tool sharing no word with the query a score
/// of 0 (ranked last, but not a match); ranks from embeddings always count.
pub(super) fn matches(hit: &toolbelt_search::Hit, method: toolbelt_search::Method) -> bool {
    method != toolbelt_search::Method::Bm25 || hit.score > 0.0
}
