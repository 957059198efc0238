//! Helpers: a folder of documents and a small embedder whose vectors are known.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use toolbelt_knowledge::{Chunk, KnowledgeBase, MemoryStore, Source};
use toolbelt_search::SearchError;
use toolbelt_search::embed::Embedder;

/// Writes `files` (relative path, content) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// The chunks of one document, indexed alone.
pub async fn chunks_of(name: &str, content: &str) -> Vec<Chunk> {
    chunks_with(name, content, toolbelt_knowledge::ChunkOptions::default()).await
}

/// The chunks of one document with `options`.
pub async fn chunks_with(
    name: &str,
    content: &str,
    options: toolbelt_knowledge::ChunkOptions,
) -> Vec<Chunk> {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[(name, content)]);
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new())).with_chunking(options);
    base.index(&[Source::new(dir.path().join(name).to_string_lossy())])
        .await
        .unwrap();
    base_chunks(&base).await
}

/// Every chunk of the base, in id order of position.
pub async fn base_chunks(base: &KnowledgeBase) -> Vec<Chunk> {
    base.chunks().await.unwrap()
}

/// Maps each word to a dimension of a 32-dimension vector, with synonyms sharing one, so a
/// query can be near a chunk it shares no word with. Counts the texts it embeds.
pub struct SynonymEmbedder {
    pub texts: AtomicUsize,
    groups: HashMap<&'static str, usize>,
}

impl SynonymEmbedder {
    pub fn new() -> Arc<Self> {
        let mut groups = HashMap::new();
        for (i, words) in [
            &["car", "automobile", "vehicle", "cars"][..],
            &["rollback", "revert", "undo"][..],
            &["money", "payment", "invoice", "billing"][..],
        ]
        .iter()
        .enumerate()
        {
            for w in *words {
                groups.insert(*w, i);
            }
        }
        Arc::new(SynonymEmbedder {
            texts: AtomicUsize::new(0),
            groups,
        })
    }

    pub fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Embedder for SynonymEmbedder {
    fn model_id(&self) -> &str {
        "synonyms-32"
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, SearchError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 32];
                v[31] = 0.01; // never all zero
                for word in t.split(|c: char| !c.is_alphanumeric()) {
                    let word = word.to_lowercase();
                    if word.is_empty() {
                        continue;
                    }
                    let dim = match self.groups.get(word.as_str()) {
                        Some(g) => *g,
                        None => 3 + (word.bytes().map(usize::from).sum::<usize>() % 28),
                    };
                    v[dim] += 1.0;
                }
                v
            })
            .collect())
    }
}
