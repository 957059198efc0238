//! Tool search: pick the few tools a turn needs from hundreds.
//!
//! An agent connected to several MCP servers sees hundreds of tools, and every declaration
//! costs prompt tokens and accuracy. This crate ranks tools against a query so a caller can
//! send only the best few:
//!
//! - [`Bm25Index`]: an in-process inverted index over each tool's name (split on case, digits
//!   and separators: [`tokenize`]), description and parameter names and descriptions,
//!   matched by exact word, by [`stem`] and by [`synonyms`], each at a lower weight than the
//!   one before. No model, about 10 µs per query over 1,400 tools (BENCHMARKS.md, "Tool
//!   search").
//! - [`embed`]: embeddings of the same text ([`ToolDoc::embedding_text`]) by an
//!   OpenAI-compatible server or a local model, cached by [`ToolDoc::content_hash`].
//! - [`reciprocal_rank_fusion`]: hybrid ranking of both by rank alone.
//! - [`ToolIndex`]: the one entry point — [`ToolIndex::sync`] follows a changing tool set
//!   incrementally (MCP `list_changed`), [`ToolIndex::search`] ranks by a [`Method`].
//! - [`parse_catalog`]: tools from an OpenAI function list or an MCP `tools/list` result.
//!
//! BM25 over two tools:
//!
//! ```
//! use serde_json::json;
//! use toolbelt_search::{Bm25Index, ToolDoc};
//!
//! let mut index = Bm25Index::new();
//! index.upsert(&ToolDoc::new(
//!     "fs.read_file",
//!     "Read the contents of a file.",
//!     json!({"type": "object", "properties": {"path": {"type": "string"}}}),
//! ));
//! index.upsert(&ToolDoc::new(
//!     "getCurrentWeather",
//!     "Current conditions for a location.",
//!     json!({"type": "object", "properties": {"city": {"type": "string"}}}),
//! ));
//! let hits = index.search("what's the weather in Paris?", 5);
//! assert_eq!(hits[0].name, "getCurrentWeather");
//! assert_eq!(hits.len(), 1); // the other tool shares no word with the query
//! ```

mod bm25;
mod catalog;
mod doc;
pub mod embed;
mod error;
mod fuse;
mod index;
pub mod stem;
pub mod synonyms;
pub mod tokenize;

pub use bm25::Bm25Index;
#[doc(hidden)]
pub use bm25::{Stemming, Tuning};
pub use catalog::parse_catalog;
pub use doc::{Hit, ToolDoc};
pub use error::SearchError;
pub use fuse::{DEFAULT_RRF_K, reciprocal_rank_fusion, weighted_rank_fusion};
pub use index::{Method, SyncStats, ToolIndex};
