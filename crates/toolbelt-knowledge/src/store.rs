//! [`ChunkStore`]: where a knowledge base keeps its documents' hashes and chunks, so a second
//! run re-chunks only what changed.
//!
//! A store holds, per source, the content hash it was chunked from and its chunks. It is not
//! searched: the knowledge base loads the chunks once into its in-memory BM25 and vector
//! indexes and keeps them in step with every [`replace`](ChunkStore::replace) and
//! [`remove`](ChunkStore::remove). So a store needs no query language, and a filter never
//! reaches one.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::KnowledgeError;
use crate::chunk::Chunk;

/// Documents' hashes and chunks, by source.
#[async_trait::async_trait]
pub trait ChunkStore: Send + Sync {
    /// Every stored source and the content hash its chunks were made from.
    async fn documents(&self) -> Result<BTreeMap<String, String>, KnowledgeError>;

    /// Replaces the chunks of `source` (made from content of `hash`) in one step: a reader
    /// sees the old chunks or the new ones, never a mix.
    async fn replace(
        &self,
        source: &str,
        hash: &str,
        chunks: &[Chunk],
    ) -> Result<(), KnowledgeError>;

    /// Removes `source` and its chunks (nothing when it is not stored).
    async fn remove(&self, source: &str) -> Result<(), KnowledgeError>;

    /// Every stored chunk, by source, in chunk order.
    async fn chunks(&self) -> Result<Vec<Chunk>, KnowledgeError>;
}

/// A [`ChunkStore`] in memory: an index that lives as long as the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    docs: Mutex<BTreeMap<String, (String, Vec<Chunk>)>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, Vec<Chunk>)>> {
        // Every change is one insert or remove, so a panic elsewhere cannot leave it half-done.
        self.docs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait::async_trait]
impl ChunkStore for MemoryStore {
    async fn documents(&self) -> Result<BTreeMap<String, String>, KnowledgeError> {
        Ok(self
            .lock()
            .iter()
            .map(|(k, (h, _))| (k.clone(), h.clone()))
            .collect())
    }

    async fn replace(
        &self,
        source: &str,
        hash: &str,
        chunks: &[Chunk],
    ) -> Result<(), KnowledgeError> {
        self.lock()
            .insert(source.to_owned(), (hash.to_owned(), chunks.to_vec()));
        Ok(())
    }

    async fn remove(&self, source: &str) -> Result<(), KnowledgeError> {
        self.lock().remove(source);
        Ok(())
    }

    async fn chunks(&self) -> Result<Vec<Chunk>, KnowledgeError> {
        Ok(self
            .lock()
            .values()
            .flat_map(|(_, chunks)| chunks.iter().cloned())
            .collect())
    }
}
