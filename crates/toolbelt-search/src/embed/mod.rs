//! Embeddings: turn tool docs and queries into vectors, cache them, rank tools by cosine.
//!
//! - [`Embedder`] turns texts into vectors: [`OpenAiEmbedder`] calls an OpenAI-compatible
//!   `/embeddings` endpoint; `LocalEmbedder` (feature `local-embedder`) runs a BERT-family
//!   sentence-transformers model folder on the CPU, never downloading anything.
//! - [`VectorStore`] caches vectors by `(model id, content hash)`: [`MemoryVectorStore`] for
//!   one process, `SqliteVectorStore` (feature `sqlite`) in a file that outlives it.
//! - [`EmbeddingIndex`] ties them together: [`EmbeddingIndex::sync`] embeds only the docs whose
//!   `(model id, content hash)` is not cached yet, so an unchanged tool is never embedded twice
//!   (across processes with the SQLite store) and a changed one always is;
//!   [`EmbeddingIndex::search`] ranks the live tools by cosine similarity to the query.
//!
//! ```
//! use std::sync::Arc;
//! use toolbelt_search::ToolDoc;
//! use toolbelt_search::embed::{EmbeddingIndex, MemoryVectorStore, OpenAiEmbedder};
//!
//! # async fn demo() -> Result<(), toolbelt_search::SearchError> {
//! let embedder = OpenAiEmbedder::new("http://127.0.0.1:8000/v1", "text-embedding-3-small");
//! let mut index = EmbeddingIndex::new(Arc::new(embedder), Arc::new(MemoryVectorStore::new()));
//! let docs = vec![ToolDoc::new("read_file", "Read a file", serde_json::json!({}))];
//! let stats = index.sync(&docs).await?;
//! assert_eq!(stats.embedded + stats.reused, 1);
//! let hits = index.search("open a file", 5).await?;
//! # Ok(()) }
//! ```

mod index;
#[cfg(feature = "local-embedder")]
mod local;
mod openai;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;

pub use index::{EmbeddingIndex, ProgressFn, SyncProgress};
#[cfg(feature = "local-embedder")]
pub use local::{EMBEDDER_DIR_ENV, LocalEmbedder};
pub use openai::OpenAiEmbedder;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteVectorStore;
pub use store::{MemoryVectorStore, StoredVector, VectorStore};

use crate::SearchError;

/// Turns texts into vectors, one per text, in order.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// Names the model; part of every cache key, so a different model never reuses vectors.
    ///
    /// It must change whenever the vectors would: another model, other weights, another
    /// output size or sequence length.
    fn model_id(&self) -> &str;

    /// One vector per text, in the order of `texts`, all of one dimension.
    ///
    /// Callers may pass many texts at once; an implementation batches as its backend needs.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, SearchError>;
}

/// Checks what an embedder returned for `expected` texts: the count, one dimension for all
/// (`dims` if already known), finite numbers and a non-zero length (a zero vector has no
/// direction to rank by). `who` names the source in the error.
pub(crate) fn check_vectors(
    who: &str,
    expected: usize,
    vectors: &[Vec<f32>],
    dims: Option<usize>,
) -> Result<(), SearchError> {
    if vectors.len() != expected {
        return Err(SearchError::Embedder(format!(
            "{who} returned {} vectors for {expected} texts",
            vectors.len()
        )));
    }
    let dims = dims.or_else(|| vectors.first().map(Vec::len));
    for (i, vector) in vectors.iter().enumerate() {
        if Some(vector.len()) != dims || vector.is_empty() {
            return Err(SearchError::Embedder(format!(
                "{who} returned a vector of {} dimensions at position {i}, expected {}",
                vector.len(),
                dims.unwrap_or(0)
            )));
        }
        if let Some(bad) = vector.iter().position(|x| !x.is_finite()) {
            return Err(SearchError::Embedder(format!(
                "{who} returned a non-finite number ({}) at position {i}, dimension {bad}",
                vector[bad]
            )));
        }
        if vector.iter().all(|x| *x == 0.0) {
            return Err(SearchError::Embedder(format!(
                "{who} returned an all-zero vector at position {i}"
            )));
        }
    }
    Ok(())
}

/// `vector` scaled to length 1 (cosine similarity becomes a dot product). A vector of
/// length 0 is returned unchanged (callers reject those first).
pub(crate) fn normalized(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for x in &mut vector {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
    vector
}
