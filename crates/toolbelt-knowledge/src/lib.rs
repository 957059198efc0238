//! Knowledge tools: a knowledge base an agent searches with `knowledge_search` and
//! `agentic_knowledge_search`.
//!
//! - [`Source`]: files, folders (walked as ripgrep walks them, `.gitignore` honoured) and
//!   globs, with user fields.
//! - Chunking by structure (Markdown headings and code fences, source-code definitions,
//!   paragraphs, HTML headings and `<pre>`, PDF pages with the `pdf` feature), sizes and overlap set by [`ChunkOptions`]; every
//!   [`Chunk`] carries its source, title, heading path, line range and user fields (Markdown
//!   front matter and the source's fields).
//! - [`ChunkStore`]: [`MemoryStore`], [`SqliteStore`] (feature `sqlite`, on by default), and
//!   `PostgresStore` (feature `postgres`; also the embedding cache, in pgvector's type when the
//!   server has it).
//! - [`KnowledgeBase`]: incremental [`index`](KnowledgeBase::index) by content hash (a changed
//!   file is re-chunked, a deleted one removed, an unchanged one not read twice), ranking by
//!   toolbelt-search's BM25, fused with embedding similarity when an embedder is set
//!   (toolbelt-search's embedders and vector cache), an optional [`Reranker`], and an
//!   optional [`QueryRewriter`] that turns the tools' question into a search query first
//!   (`ModelQueryRewriter` asks a model, feature `rewrite`).
//!   Without an embedder it ranks by BM25 alone and says so ([`RetrievalMode`]).
//! - URL sources through any [`UrlFetcher`]; `WebFetchSource` (feature `web`) reads them with
//!   the WebFetch tool's guarded fetcher.
//! - [`Filter`]: the model's metadata filter, checked against declared [`FieldSpec`]s and
//!   evaluated in memory, never handed to a store as query text.
//! - [`knowledge_tools`]: the two tools, with citations, within a size budget;
//!   `knowledge_plugin` (feature `agent`) makes them framework tools of a toolbelt-agent run,
//!   and `KnowledgeAgentExt::knowledge` of one agent (`LlmAgent::builder(..).knowledge(base)?`).
//!
//! ```
//! use std::sync::Arc;
//! use toolbelt_knowledge::{KnowledgeBase, MemoryStore, RetrievalMode, Source};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(
//!     dir.path().join("deploy.md"),
//!     "# Deploying\n\n## Rollback\n\nRun `make rollback` to restore the previous release.\n",
//! )
//! .unwrap();
//! let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
//! let report = base.index(&[Source::new(dir.path().to_string_lossy())]).await?;
//! assert_eq!(report.added, 1);
//!
//! let results = base.search("how do I roll back a release?", 3, None).await?;
//! assert_eq!(results.mode, RetrievalMode::Bm25Only);
//! let best = &results.hits[0].chunk;
//! assert_eq!(best.heading_path, ["Deploying", "Rollback"]);
//! assert!(best.citation().ends_with("deploy.md:3-5"));
//! # Ok::<(), toolbelt_knowledge::KnowledgeError>(()) }).unwrap();
//! ```

mod base;
mod chunk;
mod error;
mod filter;
mod html;
#[cfg(feature = "agent")]
mod plugin;
#[cfg(feature = "postgres")]
mod postgres;
mod rewrite;
mod source;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod tools;
#[cfg(feature = "web")]
mod web;

pub use base::{
    IndexReport, KnowledgeBase, KnowledgeHit, Reranker, RetrievalMode, SearchResults, Status,
};
pub use chunk::{Chunk, ChunkOptions, DocKind};
pub use error::KnowledgeError;
pub use filter::{FieldSpec, FieldType, Filter};
#[cfg(feature = "agent")]
pub use plugin::{KnowledgeAgentExt, knowledge_plugin};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresStore, VectorColumn};
#[cfg(feature = "rewrite")]
pub use rewrite::ModelQueryRewriter;
pub use rewrite::{
    MAX_QUESTION_CHARS, MAX_REWRITE_CHARS, MAX_REWRITE_TOKENS, QueryRewrite, QueryRewriter,
    REWRITE_TIME_LIMIT,
};
pub use source::{FetchedDocument, MAX_FILE_BYTES, MAX_FILES, MAX_PDF_BYTES, Source, UrlFetcher};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{ChunkStore, MemoryStore};
pub use tools::{
    AGENTIC_KNOWLEDGE_SEARCH, KNOWLEDGE_SEARCH, KnowledgeToolOptions,
    agentic_knowledge_search_tool, knowledge_search_tool, knowledge_tools,
};
#[cfg(feature = "web")]
pub use web::WebFetchSource;
