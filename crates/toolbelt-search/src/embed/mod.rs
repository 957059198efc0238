//! Embeddings: the [`Embedder`] trait, its implementations and vector stores.
//!
//! (Filled in by the embeddings helper.)
