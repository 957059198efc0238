//! [`KnowledgeError`]: what can go wrong while indexing or searching a knowledge base.

use toolbelt_search::SearchError;

/// What went wrong while indexing or searching a knowledge base.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KnowledgeError {
    /// A source could not be read (missing path, bad glob, unreadable file).
    #[error("source {source_name}: {message}")]
    Source {
        /// The path, glob or URL as the caller gave it.
        source_name: String,
        /// What went wrong.
        message: String,
    },
    /// The chunk store failed or holds data it cannot read.
    #[error("knowledge store: {0}")]
    Store(String),
    /// The embedder or the embedding cache failed.
    #[error(transparent)]
    Embedding(#[from] SearchError),
    /// A metadata filter names an undeclared field, an unknown operator, a value of the wrong
    /// type, or is too large; the message is written for the model to correct its call.
    #[error("filter: {0}")]
    Filter(String),
}

impl KnowledgeError {
    pub(crate) fn source(name: impl Into<String>, message: impl Into<String>) -> Self {
        KnowledgeError::Source {
            source_name: name.into(),
            message: message.into(),
        }
    }
}
