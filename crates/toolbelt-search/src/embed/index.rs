//! [`EmbeddingIndex`]: the live tools' vectors, kept in step with a tool list through a cache.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Embedder, StoredVector, VectorStore, check_vectors, normalized};
use crate::{Hit, SearchError, SyncStats, ToolDoc};

/// How many texts go to the embedder in one call during [`EmbeddingIndex::sync`]. Each batch
/// is stored as soon as it is embedded, so a sync that fails half-way keeps what it paid for.
const DEFAULT_BATCH: usize = 32;

/// What the cache key adds to the embedder's model id: the version of the recipe that turns a
/// [`ToolDoc`] into the embedded text ([`ToolDoc::embedding_text`]). The content hash covers
/// the declaration, not the text made from it, so when the recipe changes this must too, or
/// caches written by an older build would hand back vectors of other texts.
const TEXT_RECIPE: &str = "text2";

/// Progress of a [`sync`](EmbeddingIndex::sync)'s embedding: tools embedded so far and how
/// many need embedding in this sync (the cached ones are not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncProgress {
    /// Tools embedded so far in this sync.
    pub embedded: usize,
    /// Tools this sync embeds in all.
    pub total: usize,
}

/// Called with the progress of a sync's embedding; see [`EmbeddingIndex::on_progress`].
pub type ProgressFn = Arc<dyn Fn(SyncProgress) + Send + Sync>;

/// One live tool: its content hash and its vector scaled to length 1.
#[derive(Debug)]
struct Entry {
    content_hash: String,
    unit: Vec<f32>,
}

/// Ranks tools by the cosine similarity of their embedding to a query's.
///
/// The vectors of the live tools are held in memory (384 floats per tool for MiniLM: about
/// 2 MB for 1,400 tools) and searched by brute force, which is linear in the number of tools
/// and plenty fast for thousands. The [`VectorStore`] is only the cache behind them.
pub struct EmbeddingIndex {
    embedder: Arc<dyn Embedder>,
    store: Arc<dyn VectorStore>,
    batch: usize,
    live: HashMap<String, Entry>,
    /// The dimension of every live vector (None while the index is empty).
    dims: Option<usize>,
    progress: Option<ProgressFn>,
}

impl std::fmt::Debug for EmbeddingIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingIndex")
            .field("model_id", &self.embedder.model_id())
            .field("tools", &self.live.len())
            .field("dims", &self.dims)
            .finish()
    }
}

impl EmbeddingIndex {
    /// An empty index embedding with `embedder` and caching in `store`.
    pub fn new(embedder: Arc<dyn Embedder>, store: Arc<dyn VectorStore>) -> Self {
        Self {
            embedder,
            store,
            batch: DEFAULT_BATCH,
            live: HashMap::new(),
            dims: None,
            progress: None,
        }
    }

    /// Calls `report` during each [`sync`](Self::sync) that embeds anything: once before the
    /// first batch (`embedded` 0) and after every batch. A cold build of hundreds of tools
    /// takes seconds to minutes on a CPU, so a caller can show how far it got; the library
    /// itself prints nothing.
    pub fn on_progress(mut self, report: impl Fn(SyncProgress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(report));
        self
    }

    /// Sets how many texts one embedder call gets during [`sync`](Self::sync) (default 32,
    /// at least 1).
    pub fn batch_size(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// The embedder's model id.
    pub fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    /// How many tools are live.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no tool is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Makes `docs` the live tools: a doc whose `(model id, content hash)` is already live or
    /// in the store is reused, every other one is embedded (in batches, each stored as soon as
    /// it is computed); tools missing from `docs` leave the live set (their vectors stay in
    /// the store, so they are not embedded again if they come back). With two docs of one
    /// name, the last wins.
    ///
    /// On error the live set is unchanged; batches embedded before the error stay cached.
    pub async fn sync(&mut self, docs: &[ToolDoc]) -> Result<SyncStats, SearchError> {
        let model_id = self.embedder.model_id().to_owned();
        let store_key = format!("{model_id}#{TEXT_RECIPE}");
        let mut latest: HashMap<&str, &ToolDoc> = HashMap::with_capacity(docs.len());
        for doc in docs {
            latest.insert(doc.name.as_str(), doc);
        }
        let mut stats = SyncStats::default();
        let mut next: HashMap<String, Entry> = HashMap::with_capacity(latest.len());
        let mut dims = None;
        // Docs in input order (deduplicated), so batches and errors are reproducible.
        let mut wanted: Vec<(&ToolDoc, String)> = Vec::new();
        let mut seen = HashSet::new();
        for doc in docs.iter().rev() {
            if seen.insert(doc.name.as_str()) {
                wanted.push((doc, doc.content_hash()));
            }
        }
        wanted.reverse();

        let mut missing: Vec<(&ToolDoc, String)> = Vec::new();
        for (doc, hash) in wanted {
            match self.live.get(&doc.name) {
                Some(entry) if entry.content_hash == hash => {
                    dims = Some(entry.unit.len());
                    stats.reused += 1;
                    next.insert(
                        doc.name.clone(),
                        Entry {
                            content_hash: hash,
                            unit: entry.unit.clone(),
                        },
                    );
                }
                other => {
                    if other.is_some() {
                        stats.changed += 1;
                    } else {
                        stats.added += 1;
                    }
                    missing.push((doc, hash));
                }
            }
        }
        stats.removed = self
            .live
            .keys()
            .filter(|name| !latest.contains_key(name.as_str()))
            .count();

        // The cache: vectors a previous sync or process already paid for.
        let hashes: Vec<String> = missing.iter().map(|(_, h)| h.clone()).collect();
        let mut cached = if hashes.is_empty() {
            HashMap::new()
        } else {
            self.store.get(&store_key, &hashes).await?
        };
        let mut to_embed: Vec<(&ToolDoc, String)> = Vec::new();
        for (doc, hash) in missing {
            match cached.remove(&hash) {
                Some(vector) if usable(&vector, dims) => {
                    dims = Some(vector.len());
                    stats.reused += 1;
                    next.insert(
                        doc.name.clone(),
                        Entry {
                            content_hash: hash,
                            unit: normalized(vector),
                        },
                    );
                }
                Some(_) => {
                    tracing::warn!(tool = %doc.name, model_id, "cached vector unusable (dimension or numbers): embedding again");
                    to_embed.push((doc, hash));
                }
                None => to_embed.push((doc, hash)),
            }
        }

        // Similar lengths in one call: a batch is padded to its longest text, and in catalog
        // order that wasted a third of the local model's work on BFCL (222k padded word
        // pieces instead of 142k for 114k real ones).
        let mut to_embed: Vec<(&ToolDoc, String, String)> = to_embed
            .into_iter()
            .map(|(doc, hash)| (doc, hash, doc.embedding_text()))
            .collect();
        to_embed.sort_by_key(|(_, _, text)| text.len());
        let total = to_embed.len();
        let report = |embedded: usize| {
            if let Some(report) = &self.progress
                && total > 0
            {
                report(SyncProgress { embedded, total });
            }
        };
        report(0);
        for chunk in to_embed.chunks(self.batch) {
            let texts: Vec<String> = chunk.iter().map(|(_, _, text)| text.clone()).collect();
            let vectors = self.embedder.embed(&texts).await?;
            check_vectors(&format!("embedder {model_id}"), texts.len(), &vectors, dims)?;
            dims = vectors.first().map(Vec::len).or(dims);
            let stored: Vec<StoredVector> = chunk
                .iter()
                .zip(vectors)
                .map(|((doc, hash, _), vector)| StoredVector {
                    name: doc.name.clone(),
                    content_hash: hash.clone(),
                    vector,
                })
                .collect();
            self.store.put(&store_key, &stored).await?;
            stats.embedded += stored.len();
            report(stats.embedded);
            for item in stored {
                next.insert(
                    item.name,
                    Entry {
                        content_hash: item.content_hash,
                        unit: normalized(item.vector),
                    },
                );
            }
        }

        // Vectors reused from the previous live set were checked against its dimension; a
        // fresh batch of another dimension (the server changed models under one name) would
        // make the set unrankable, so it is refused rather than mixed.
        if let Some(d) = dims
            && let Some((name, entry)) = next.iter().find(|(_, e)| e.unit.len() != d)
        {
            return Err(SearchError::Embedder(format!(
                "embedder {model_id} changed its output size: {name} has {} dimensions, others {d}",
                entry.unit.len()
            )));
        }
        self.live = next;
        self.dims = dims;
        Ok(stats)
    }

    /// The `k` live tools most similar to `query`, best first (score: cosine similarity in
    /// [-1, 1]; ties broken by name). An empty index returns no hits without calling the
    /// embedder.
    pub async fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, SearchError> {
        if self.live.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let model_id = self.embedder.model_id();
        let vectors = self.embedder.embed(&[query.to_owned()]).await?;
        check_vectors(&format!("embedder {model_id}"), 1, &vectors, self.dims)?;
        let query = normalized(vectors.into_iter().next().unwrap_or_default());
        let mut hits: Vec<Hit> = self
            .live
            .iter()
            .map(|(name, entry)| Hit {
                name: name.clone(),
                score: dot(&query, &entry.unit),
            })
            .collect();
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.name.cmp(&b.name));
        if hits.len() > k {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_by(order);
        Ok(hits)
    }
}

/// Whether a cached vector can join the live set: finite, not all zero, and of the live
/// dimension when one is known.
fn usable(vector: &[f32], dims: Option<usize>) -> bool {
    !vector.is_empty()
        && dims.is_none_or(|d| d == vector.len())
        && vector.iter().all(|x| x.is_finite())
        && vector.iter().any(|x| *x != 0.0)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
