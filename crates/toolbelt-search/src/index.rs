//! [`ToolIndex`]: the one entry point for callers — BM25 always, embeddings when configured.

use std::collections::{HashMap, HashSet};

use crate::SearchError;
use crate::bm25::Bm25Index;
use crate::doc::{Hit, ToolDoc};
use crate::embed::EmbeddingIndex;
use crate::fuse::weighted_rank_fusion;

/// How a [`ToolIndex`] ranks tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Method {
    /// BM25 over names, descriptions and parameters; needs no model.
    Bm25,
    /// Cosine similarity of embeddings; needs an embedder.
    Embed,
    /// Reciprocal rank fusion of BM25 and embeddings, the embedding ranking weighted twice
    /// and `k` = 10 (chosen on BFCL's dev queries only; see BENCHMARKS.md); needs an
    /// embedder.
    Hybrid,
}

impl Method {
    /// The method's name as written on command lines (`bm25`, `embed`, `hybrid`).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Bm25 => "bm25",
            Method::Embed => "embed",
            Method::Hybrid => "hybrid",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Method {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, SearchError> {
        match s {
            "bm25" => Ok(Method::Bm25),
            "embed" => Ok(Method::Embed),
            "hybrid" => Ok(Method::Hybrid),
            other => Err(SearchError::Catalog(format!(
                "unknown search method {other:?} (expected bm25, embed or hybrid)"
            ))),
        }
    }
}

/// What one [`ToolIndex::sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Tools that were not indexed before.
    pub added: usize,
    /// Tools whose declaration changed (re-indexed).
    pub changed: usize,
    /// Tools no longer in the set (dropped).
    pub removed: usize,
    /// Tools whose embedding was computed by the embedder in this sync.
    pub embedded: usize,
    /// Tools whose embedding came from the cache.
    pub reused: usize,
}

/// How many candidates each ranking contributes to a hybrid fusion, at least.
const HYBRID_DEPTH: usize = 50;
/// The weight of the embedding ranking against BM25's in a hybrid fusion. On BFCL's dev
/// queries equal weights (k = 60) reached recall@5 0.943, twice the weight with k = 10 0.958:
/// the embeddings catch paraphrases BM25 misses, and BM25 still breaks their near-ties.
const HYBRID_EMBED_WEIGHT: f64 = 2.0;
/// The `k` of the hybrid fusion: smaller than the usual 60, so a list's top ranks count more.
const HYBRID_RRF_K: f64 = 10.0;

/// A searchable set of tools: BM25 always, embeddings when configured.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use toolbelt_search::{Method, ToolDoc, ToolIndex};
/// use serde_json::json;
///
/// let mut index = ToolIndex::new();
/// let docs = [
///     ToolDoc::new("read_file", "Read a text file from disk", json!({})),
///     ToolDoc::new("get_weather", "Current weather for a city", json!({})),
/// ];
/// let stats = index.sync(&docs).await?;
/// assert_eq!(stats.added, 2);
/// let hits = index.search("what is the weather in Paris", 1, Method::Bm25).await?;
/// assert_eq!(hits[0].name, "get_weather");
/// # Ok::<(), toolbelt_search::SearchError>(())
/// # }).unwrap();
/// ```
#[derive(Default)]
pub struct ToolIndex {
    bm25: Bm25Index,
    /// Content hash per indexed tool, to tell changed tools from unchanged ones.
    hashes: HashMap<String, String>,
    embeddings: Option<EmbeddingIndex>,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.hashes.len())
            .field(
                "embedder",
                &self.embeddings.as_ref().map(EmbeddingIndex::model_id),
            )
            .finish()
    }
}

impl ToolIndex {
    /// An empty index ranking by BM25 only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds embeddings, enabling [`Method::Embed`] and [`Method::Hybrid`]. Every
    /// [`sync`](Self::sync) hands the whole tool list to them (they reuse what they hold), so
    /// tools synced before this call are embedded at the next sync.
    pub fn with_embeddings(mut self, embeddings: EmbeddingIndex) -> Self {
        self.embeddings = Some(embeddings);
        self
    }

    /// Whether embeddings are configured.
    pub fn has_embeddings(&self) -> bool {
        self.embeddings.is_some()
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Incremental: adds new docs, re-indexes docs whose content_hash changed, removes missing ones.
    ///
    /// Two docs with the same name are an error, and nothing is changed. With embeddings,
    /// they are synced first (unchanged tools reuse cached vectors: `embedded`/`reused` say
    /// how many of each); if embedding fails, the error is returned and BM25 is unchanged
    /// too, so both rankings always cover the same tools.
    pub async fn sync(&mut self, docs: &[ToolDoc]) -> Result<SyncStats, SearchError> {
        let mut names = HashSet::with_capacity(docs.len());
        for (i, doc) in docs.iter().enumerate() {
            if !names.insert(doc.name.as_str()) {
                return Err(SearchError::Catalog(format!(
                    "tool {i}: duplicate name {:?}",
                    doc.name
                )));
            }
        }
        let mut stats = SyncStats::default();
        if let Some(embeddings) = &mut self.embeddings {
            let embedded = embeddings.sync(docs).await?;
            stats.embedded = embedded.embedded;
            stats.reused = embedded.reused;
        }
        let gone: Vec<String> = self
            .hashes
            .keys()
            .filter(|name| !names.contains(name.as_str()))
            .cloned()
            .collect();
        for name in gone {
            self.bm25.remove(&name);
            self.hashes.remove(&name);
            stats.removed += 1;
        }
        for doc in docs {
            let hash = doc.content_hash();
            match self.hashes.get(&doc.name) {
                Some(old) if *old == hash => continue,
                Some(_) => stats.changed += 1,
                None => stats.added += 1,
            }
            self.bm25.upsert(doc);
            self.hashes.insert(doc.name.clone(), hash);
        }
        Ok(stats)
    }

    /// The best `k` tools for `query` by `method`, best first.
    ///
    /// Embed/Hybrid without embeddings configured is SearchError::Embedder("no embedder configured").
    pub async fn search(
        &self,
        query: &str,
        k: usize,
        method: Method,
    ) -> Result<Vec<Hit>, SearchError> {
        match method {
            Method::Bm25 => Ok(self.bm25.search(query, k)),
            Method::Embed => self.embeddings()?.search(query, k).await,
            Method::Hybrid => {
                let embeddings = self.embeddings()?;
                let depth = k.max(HYBRID_DEPTH);
                let lexical = self.bm25.search(query, depth);
                let semantic = embeddings.search(query, depth).await?;
                let mut fused = weighted_rank_fusion(
                    &[(&lexical, 1.0), (&semantic, HYBRID_EMBED_WEIGHT)],
                    HYBRID_RRF_K,
                );
                fused.truncate(k);
                Ok(fused)
            }
        }
    }

    fn embeddings(&self) -> Result<&EmbeddingIndex, SearchError> {
        self.embeddings.as_ref().ok_or_else(no_embedder)
    }
}

fn no_embedder() -> SearchError {
    SearchError::Embedder("no embedder configured".into())
}
