//! [`SearchError`]: what can go wrong while indexing or searching tools.

/// What went wrong while indexing or searching tools.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// A catalog file or tool list could not be read or parsed.
    #[error("catalog: {0}")]
    Catalog(String),
    /// The embedder failed (model folder, server, shape of its answer).
    #[error("embedder: {0}")]
    Embedder(String),
    /// The vector store failed.
    #[error("vector store: {0}")]
    Store(String),
}
