//! `--knowledge PATH` on `run`, `chat` and `serve` (and `ui`, which takes `run`'s flags):
//! the files, folders and globs given are indexed on start into the SQLite knowledge base
//! `toolbelt knowledge index` writes (`.toolbelt/knowledge.db` in `--dir`, or
//! `--knowledge-db FILE`), and the two knowledge tools search it.
//!
//! Indexing is incremental, as `knowledge index` is: a second start re-chunks only the files
//! that changed, and removes from the base the files no longer named. A spinner shows on
//! stderr while it runs when stderr is a terminal; one summary line follows either way (on
//! stderr: a run's stdout carries the answer, serve's stdio carries the protocol).
//!
//! `--knowledge-rewrite` has the model rewrite each question of the two tools into a search
//! query first ([`ModelQueryRewriter`]): the run's model on `run` and `chat`, the model the
//! environment configures on `serve` (which has no model of its own). A failed rewrite
//! searches the question as asked, and the tool result says so.
//!
//! An agent (`run`, `chat`) gets the tools as framework tools ([`KnowledgeArgs::plugin`]):
//! no `--tools` filter removes them and no MCP server's tool can take their names. `serve`
//! registers them as direct tools of its registry ([`KnowledgeArgs::tools`]), which the
//! aggregated servers' tools never displace (a clash renames the server's tool).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use toolbelt::DynTool;
use toolbelt::agent::Plugin;
use toolbelt::model::{DynModel, OpenAiModel};
use toolbelt_knowledge::{
    KnowledgeBase, KnowledgeToolOptions, ModelQueryRewriter, Source, knowledge_plugin,
    knowledge_tools,
};

use super::fetch::web_fetch_source;
use super::{open_base, shown};
use crate::common::CliError;
use crate::progress::Progress;

/// The knowledge base file in `--dir` when `--knowledge-db` is not given.
const DEFAULT_DB: &str = ".toolbelt/knowledge.db";

/// The knowledge flags `run`, `chat` and `serve` share.
#[derive(Args, Debug, Clone, Default)]
pub struct KnowledgeArgs {
    /// Give the model the knowledge_search and agentic_knowledge_search tools over these
    /// files, folders (.gitignore honoured), globs or web pages (https://…, read by
    /// WebFetch, public addresses only), indexed on start (repeatable;
    /// incremental: only what changed since the last start is chunked again).
    #[arg(long = "knowledge", value_name = "PATH")]
    pub knowledge: Vec<String>,
    /// The knowledge base file --knowledge indexes into (SQLite; default
    /// .toolbelt/knowledge.db in --dir), or a PostgreSQL URL (feature postgres). It holds
    /// exactly the --knowledge sources afterwards.
    #[arg(long, value_name = "FILE", requires = "knowledge")]
    pub knowledge_db: Option<PathBuf>,
    /// Have the model rewrite each knowledge search's question into a search query first
    /// (run and chat: the run's model; serve: the model OPENAI_BASE_URL / TOOLBELT_MODEL
    /// configure). A failed rewrite searches the question as asked, and says so.
    #[arg(long, requires = "knowledge")]
    pub knowledge_rewrite: bool,
}

impl KnowledgeArgs {
    /// Whether `--knowledge` was given.
    pub fn enabled(&self) -> bool {
        !self.knowledge.is_empty()
    }

    /// The knowledge base file for the project directory `dir`.
    fn db(&self, dir: &Path) -> PathBuf {
        self.knowledge_db
            .clone()
            .unwrap_or_else(|| dir.join(DEFAULT_DB))
    }

    /// Opens the base and indexes the sources into it; `None` without `--knowledge`.
    /// `progress` is the command's status line (drawn only on a terminal); `model` rewrites
    /// the questions with `--knowledge-rewrite`.
    async fn index(
        &self,
        dir: &Path,
        progress: &Progress,
        model: Option<DynModel>,
    ) -> Result<Option<Arc<KnowledgeBase>>, CliError> {
        if !self.enabled() {
            return Ok(None);
        }
        let db = self.db(dir);
        let mut base = open_base(&db, true)
            .await?
            .with_url_fetcher(Arc::new(web_fetch_source(&[])?));
        if let Some(model) = model.filter(|_| self.knowledge_rewrite) {
            base = base.with_query_rewriter(Arc::new(ModelQueryRewriter::new(model)));
        }
        let sources: Vec<Source> = self.knowledge.iter().map(Source::new).collect();
        progress.spin(format!("indexing knowledge: {}", self.knowledge.join(" ")));
        let report = base.index(&sources).await;
        progress.hide();
        let report = report.map_err(|e| CliError::failed(format!("--knowledge: {e}")))?;
        eprintln!(
            "toolbelt: knowledge: {} files ({} added, {} changed, {} unchanged, {} removed), \
             {} chunks in {}; {}",
            report.files,
            report.added,
            report.changed,
            report.unchanged,
            report.removed,
            report.chunks,
            shown(&db),
            base.mode().describe()
        );
        if report.files == 0 {
            eprintln!("toolbelt: warning: --knowledge found no files to index");
        }
        Ok(Some(Arc::new(base)))
    }

    /// The knowledge plugin for an agent's runner (see the module docs); `None` without
    /// `--knowledge`. `model` is the run's, for `--knowledge-rewrite`.
    pub async fn plugin(
        &self,
        dir: &Path,
        progress: &Progress,
        model: &DynModel,
    ) -> Result<Option<Plugin>, CliError> {
        let Some(base) = self.index(dir, progress, Some(model.clone())).await? else {
            return Ok(None);
        };
        knowledge_plugin(base, KnowledgeToolOptions::default())
            .map(Some)
            .map_err(|e| CliError::failed(e.to_string()))
    }

    /// The two tools for serve's registry (see the module docs); empty without
    /// `--knowledge`.
    pub async fn tools(&self, dir: &Path, progress: &Progress) -> Result<Vec<DynTool>, CliError> {
        let model = if self.knowledge_rewrite && self.enabled() {
            let model = OpenAiModel::from_env().map_err(|e| {
                CliError::usage(format!(
                    "--knowledge-rewrite on serve asks the model the environment configures: {e}"
                ))
            })?;
            Some(Arc::new(model) as DynModel)
        } else {
            None
        };
        let Some(base) = self.index(dir, progress, model).await? else {
            return Ok(Vec::new());
        };
        knowledge_tools(base, KnowledgeToolOptions::default())
            .map_err(|e| CliError::failed(e.to_string()))
    }
}
