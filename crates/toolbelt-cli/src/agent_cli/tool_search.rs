//! Tool search on the command line: `--tool-search METHOD`, `--max-tools N` and
//! `--defer-tools` for `run` and `chat` (a [`ToolSearch`] plugin on the runner), and the
//! ranker behind `serve --defer-tools`.
//!
//! `--defer-tools` defers every tool of the `--mcp-config` servers and keeps the built-in
//! tools: the model gets a `tool_search` tool to load the others when it needs them.
//!
//! `embed` and `hybrid` take the embedder flags of `tools search` ([`EmbedderArgs`]) and
//! cache the tools' vectors on disk, so only the first run over a tool set embeds it.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use clap::{Args, ValueEnum};
use toolbelt::agent::Runner;
use toolbelt::agent::tool_search::{DEFAULT_MAX_TOOLS, Method, ToolSearch};
use toolbelt::model::DynModel;
use toolbelt::search::embed::EmbeddingIndex;
use toolbelt::search::{ToolDoc, ToolIndex};
use toolbelt::{Declaration, ToolContext, ToolFilter, ToolSet};

use crate::common::{CliError, Toolbox};
use crate::progress::Progress;
use crate::tools_search::EmbedderArgs;

/// How `--tool-search` picks the tools of each question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchMethod {
    /// BM25 over names, descriptions and parameters: no model needed.
    Bm25,
    /// Embeddings of the tools and the question (--embedder-dir or --embedder-url).
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
    /// always stay): `bm25` (no model), `embed` or `hybrid` (an embedder: --embedder-dir or
    /// --embedder-url), `llm` (one call to the model per question).
    #[arg(long, value_name = "METHOD", value_enum)]
    pub tool_search: Option<SearchMethod>,
    /// With --tool-search: the most tools kept per question.
    #[arg(long, value_name = "N", requires = "tool_search", value_parser = clap::value_parser!(u16).range(1..))]
    pub max_tools: Option<u16>,
    /// Send the MCP servers' tools only when the model asks for them: it gets a
    /// `tool_search` tool that finds and loads them (the built-in tools are always sent).
    #[arg(long)]
    pub defer_tools: bool,
    #[command(flatten)]
    pub embedder: EmbedderArgs,
}

impl ToolSearchArgs {
    /// Checks the flags before anything is opened: `embed` and `hybrid` need an embedder.
    pub fn check(&self) -> Result<(), CliError> {
        match self.tool_search {
            Some(method @ (SearchMethod::Embed | SearchMethod::Hybrid)) => self
                .embedder
                .check(&format!("--tool-search {}", name(method))),
            _ => Ok(()),
        }
    }

    /// `runner` with the tool search plugin the flags ask for (unchanged without them).
    /// `model` answers the `llm` method's question. Call [`ToolSearchArgs::check`] first.
    /// Fails when the embedder cannot be loaded.
    /// `progress` is the run's status line, which shows a cold index build.
    pub async fn apply(
        &self,
        runner: Runner,
        model: DynModel,
        toolbox: &Toolbox,
        progress: &Progress,
    ) -> Result<Runner, CliError> {
        if self.tool_search.is_none() && !self.defer_tools {
            return Ok(runner);
        }
        let mut builder = ToolSearch::builder()
            .max_tools(self.max_tools.map_or(DEFAULT_MAX_TOOLS, usize::from))
            // A failed search must not stop a command-line run: every tool is offered that
            // turn and a warning says why.
            .fail_open(true);
        builder = match self.tool_search {
            Some(SearchMethod::Llm) => builder.llm_arc(model),
            Some(SearchMethod::Bm25) => builder.index(Method::Bm25),
            Some(method @ (SearchMethod::Embed | SearchMethod::Hybrid)) => {
                let flag = format!("--tool-search {}", name(method));
                let embeddings = prepared(self.embedder.index(&flag)?, toolbox, progress).await;
                let method = match method {
                    SearchMethod::Embed => Method::Embed,
                    _ => Method::Hybrid,
                };
                builder.index(method).embeddings(embeddings)
            }
            None => builder,
        };
        if self.defer_tools {
            builder = builder.defer(not_builtin(toolbox).await);
        }
        match builder.build() {
            Ok(search) => Ok(runner.with_plugin(search.plugin())),
            // `check` refused what the builder would.
            Err(err) => Err(CliError::usage(format!("tool search: {err}"))),
        }
    }
}

/// The method's name as typed.
fn name(method: SearchMethod) -> String {
    method
        .to_possible_value()
        .map_or_else(|| "?".into(), |v| v.get_name().to_string())
}

/// `embeddings` holding the vectors of every tool of `toolbox` before the run starts, so the
/// first question does not wait for a cold build in silence: a terminal shows
/// `embedding tools N/M` while the embedder works (nothing when every vector is cached). A
/// failure is a warning: the search then fails open, offering every tool, until the embedder
/// answers.
async fn prepared(
    embeddings: EmbeddingIndex,
    toolbox: &Toolbox,
    progress: &Progress,
) -> EmbeddingIndex {
    let line = progress.clone();
    let mut embeddings = embeddings.on_progress(move |p| {
        line.count("embedding tools", p.embedded as u64, p.total as u64);
    });
    let docs: Vec<ToolDoc> = toolbox
        .list(&ToolContext::new())
        .await
        .tools()
        .map(|t| ToolDoc::from_declaration(t.declaration()))
        .collect();
    let synced = embeddings.sync(&docs).await;
    progress.hide();
    match synced {
        Ok(stats) => tracing::debug!(
            target: "toolbelt::tool_search",
            embedded = stats.embedded,
            reused = stats.reused,
            "tool embeddings ready before the run"
        ),
        Err(err) => eprintln!("toolbelt: warning: the tools could not be embedded: {err}"),
    }
    embeddings
}

/// The tools that are not built in: the `--mcp-config` servers' (built-in tools keep their
/// names on a clash, so a name is enough).
pub async fn not_builtin(toolbox: &Toolbox) -> ToolFilter {
    let builtin: HashSet<String> = match toolbox.builtin_tools().tools(&ToolContext::new()).await {
        Ok(tools) => tools.iter().map(|t| t.name().to_string()).collect(),
        Err(_) => HashSet::new(),
    };
    ToolFilter::new(move |_, tool| !builtin.contains(tool.name()))
}

/// The flags of `serve --defer-tools --tool-search METHOD`: how its `tool_search` tool ranks
/// the deferred tools.
#[derive(Args, Debug, Clone)]
pub struct ServeSearchArgs {
    /// With --defer-tools: how `tool_search` ranks the hidden tools: `bm25` (default, no
    /// model), `embed` or `hybrid` (an embedder: --embedder-dir or --embedder-url).
    #[arg(long, value_name = "METHOD", requires = "defer_tools", value_parser = ["bm25", "embed", "hybrid"])]
    pub tool_search: Option<String>,
    #[command(flatten)]
    pub embedder: EmbedderArgs,
}

impl ServeSearchArgs {
    /// The ranker `tool_search` uses; the embedder is loaded (and its cache opened) now, so a
    /// bad folder is reported before the server starts.
    pub fn ranker(&self) -> Result<Arc<dyn toolbelt::mcp::server::ToolRanker>, CliError> {
        let method = match self.tool_search.as_deref() {
            Some("embed") => Method::Embed,
            Some("hybrid") => Method::Hybrid,
            _ => Method::Bm25,
        };
        let mut index = ToolIndex::new();
        if method != Method::Bm25 {
            index = index.with_embeddings(self.embedder.index(&format!("--tool-search {method}"))?);
        }
        Ok(Arc::new(IndexRanker {
            index: tokio::sync::Mutex::new(index),
            method,
        }))
    }
}

/// `serve --defer-tools`'s ranker: the index over the deferred tools, updated incrementally
/// as the aggregated servers' lists change (with embeddings, only new or changed tools are
/// embedded; the others come from the cache).
struct IndexRanker {
    index: tokio::sync::Mutex<ToolIndex>,
    method: Method,
}

#[async_trait]
impl toolbelt::mcp::server::ToolRanker for IndexRanker {
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
            .search(query, limit, self.method)
            .await
            .map_err(|e| e.to_string())?;
        // Under BM25 a tool sharing no word with the query scores 0: not a match. Embeddings
        // rank every tool; the limit bounds them.
        Ok(hits
            .into_iter()
            .filter(|hit| self.method != Method::Bm25 || hit.score > 0.0)
            .map(|hit| hit.name)
            .collect())
    }
}
