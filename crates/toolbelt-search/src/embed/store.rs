//! [`VectorStore`]: the embedding cache, keyed by `(model id, content hash)`.
//!
//! A store only remembers vectors; which tools are live and how they rank is the
//! [`EmbeddingIndex`](super::EmbeddingIndex)'s business. So a store can be shared by several
//! indexes and processes, and a tool that disappears and comes back is not embedded again.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::SearchError;

/// One cached vector: the tool it was computed for, the tool's content hash and the vector.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVector {
    /// The tool's name (informational: the key is the content hash, which covers the name).
    pub name: String,
    /// [`ToolDoc::content_hash`](crate::ToolDoc::content_hash) of the embedded doc.
    pub content_hash: String,
    /// The vector as the embedder returned it.
    pub vector: Vec<f32>,
}

/// A cache of tool vectors keyed by `(model id, content hash)`.
#[async_trait::async_trait]
pub trait VectorStore: Send + Sync {
    /// The stored vectors of `model_id` among `content_hashes`, keyed by content hash; hashes
    /// with nothing stored are absent from the map.
    async fn get(
        &self,
        model_id: &str,
        content_hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, SearchError>;

    /// Stores vectors for `model_id`, replacing any with the same content hash.
    async fn put(&self, model_id: &str, vectors: &[StoredVector]) -> Result<(), SearchError>;
}

/// A [`VectorStore`] in memory, for one process.
#[derive(Debug, Default)]
pub struct MemoryVectorStore {
    vectors: RwLock<HashMap<(String, String), Vec<f32>>>,
}

impl MemoryVectorStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many vectors are stored (all models).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(String, String), Vec<f32>>> {
        // The map is never left half-updated (one insert at a time), so a panic elsewhere
        // while the lock was held does not make it wrong.
        self.vectors.read().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait::async_trait]
impl VectorStore for MemoryVectorStore {
    async fn get(
        &self,
        model_id: &str,
        content_hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, SearchError> {
        let vectors = self.read();
        let mut key = (model_id.to_owned(), String::new());
        let mut found = HashMap::new();
        for hash in content_hashes {
            hash.clone_into(&mut key.1);
            if let Some(vector) = vectors.get(&key) {
                found.insert(hash.clone(), vector.clone());
            }
        }
        Ok(found)
    }

    async fn put(&self, model_id: &str, vectors: &[StoredVector]) -> Result<(), SearchError> {
        let mut map = self.vectors.write().unwrap_or_else(|p| p.into_inner());
        for stored in vectors {
            map.insert(
                (model_id.to_owned(), stored.content_hash.clone()),
                stored.vector.clone(),
            );
        }
        Ok(())
    }
}
