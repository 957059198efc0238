//! Tool search on the command line: `--tool-search METHOD`, `--max-tools N` and
//! `--defer-tools` for `run` and `chat` (a [`ToolSearch`] plugin on the runner), and the
//! ranker behind `serve --defer-tools`.
//!
//! `--defer-tools` defers every tool of the `--mcp-config` servers and keeps the built-in
//! tools: the model gets a `tool_search` tool to load the others when it needs them.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use clap::{Args, ValueEnum};
use toolbelt::agent::Runner;
use toolbelt::agent::tool_search::{DEFAULT_MAX_TOOLS, Method, ToolSearch};
use toolbelt::model::DynModel;
use toolbelt::search::{ToolDoc, ToolIndex};
use toolbelt::{Declaration, ToolContext, ToolFilter, ToolSet};

use crate::common::{CliError, Toolbox};

/// How `--tool-search` picks the tools of each question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchMethod {
    /// BM25 over names, descriptions and parameters: no model needed.
    Bm25,
    /// Embeddings of the tools and the question (a local embedder).
    Embed,
    /// BM25 and embeddings, fused by rank.
    Hybrid,
    /// The model itself reads the tool list and names the tools to keep (one extra call per
    /// question).
    Llm,
}

/// The tool search flags of `run` and `chat`.
#[derive(Args, Debug, Clone)]
pub struct ToolSearchArgs {
    /// Offer the model only the tools a search picks for each question (framework tools
    /// always stay): `bm25` (no model), `embed` or `hybrid` (a local embedder), `llm` (one
    /// call to the model per question).
    #[arg(long, value_name = "METHOD", value_enum)]
    pub tool_search: Option<SearchMethod>,
    /// With --tool-search: the most tools kept per question.
    #[arg(long, value_name = "N", requires = "tool_search", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_tools: Option<u16>,
    /// Send the MCP servers' tools only when the model asks for them: it gets a
    /// `tool_search` tool that finds and loads them (the built-in tools are always sent).
    #[arg(long)]
    pub defer_tools: bool,
}

impl ToolSearchArgs {
    /// Checks the flags before anything is opened: a method this build cannot run is a
    /// usage error.
    pub fn check(&self) -> Result<(), CliError> {
        match self.tool_search {
            Some(method @ (SearchMethod::Embed | SearchMethod::Hybrid)) => {
                Err(CliError::usage(format!(
                    "--tool-search {}: embeddings are not available to run and chat in this build; \
                     use bm25 or llm",
                    method
                        .to_possible_value()
                        .map_or("?".into(), |v| v.get_name().to_string())
                )))
            }
            _ => Ok(()),
        }
    }

    /// `runner` with the tool search plugin the flags ask for (unchanged without them).
    /// `model` answers the `llm` method's question. Call [`ToolSearchArgs::check`] first.
    pub async fn apply(&self, runner: Runner, model: DynModel, toolbox: &Toolbox) -> Runner {
        if self.tool_search.is_none() && !self.defer_tools {
            return runner;
        }
        let mut builder = ToolSearch::builder()
            .max_tools(self.max_tools.map_or(DEFAULT_MAX_TOOLS, usize::from))
            // A failed search must not stop a command-line run: every tool is offered that
            // turn and a warning says why.
            .fail_open(true);
        builder = match self.tool_search {
            Some(SearchMethod::Llm) => builder.llm_arc(model),
            Some(SearchMethod::Bm25) => builder.index(Method::Bm25),
            Some(SearchMethod::Embed) => builder.index(Method::Embed),
            Some(SearchMethod::Hybrid) => builder.index(Method::Hybrid),
            None => builder,
        };
        if self.defer_tools {
            builder = builder.defer(not_builtin(toolbox).await);
        }
        match builder.build() {
            Ok(search) => runner.with_plugin(search.plugin()),
            // `check` refused what the builder would.
            Err(err) => {
                eprintln!("toolbelt: warning: no tool search: {err}");
                runner
            }
        }
    }
}

/// The tools that are not built in: the `--mcp-config` servers' (built-in tools keep their
/// names on a clash, so a name is enough).
pub async fn not_builtin(toolbox: &Toolbox) -> ToolFilter {
    let builtin: HashSet<String> = match toolbox.builtin.tools(&ToolContext::new()).await {
        Ok(tools) => tools.iter().map(|t| t.name().to_string()).collect(),
        Err(_) => HashSet::new(),
    };
    ToolFilter::new(move |_, tool| !builtin.contains(tool.name()))
}

/// `serve --defer-tools`'s ranker: BM25 over the deferred tools, updated incrementally as
/// the aggregated servers' lists change.
#[derive(Default)]
pub struct Bm25Ranker {
    index: tokio::sync::Mutex<ToolIndex>,
}

#[async_trait]
impl toolbelt::mcp::server::ToolRanker for Bm25Ranker {
    async fn rank(
        &self,
        query: &str,
        candidates: &[Declaration],
        limit: usize,
    ) -> Result<Vec<String>, String> {
        let docs: Vec<ToolDoc> = candidates.iter().map(ToolDoc::from_declaration).collect();
        let mut index = self.index.lock().await;
        index.sync(&docs).await.map_err(|e| e.to_string())?;
        let hits = index
            .search(query, limit, Method::Bm25)
            .await
            .map_err(|e| e.to_string())?;
        // A tool sharing no word with the query scores 0: not a match.
        Ok(hits
            .into_iter()
            .filter(|hit| hit.score > 0.0)
            .map(|hit| hit.name)
            .collect())
    }
}

/// The ranker as the server takes it.
pub fn ranker() -> Arc<dyn toolbelt::mcp::server::ToolRanker> {
    Arc::new(Bm25Ranker::default())
}
