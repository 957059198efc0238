//! [`KnowledgeBase`]: sources in, ranked chunks with citations out.
//!
//! The chunks live in a [`ChunkStore`]; what is searched is held in memory beside it: a
//! [`Bm25Index`] over every chunk's [`search_text`](Chunk::search_text) and, with an
//! embedder, each chunk's unit vector. [`KnowledgeBase::index`] reads the sources, hashes
//! each file (bytes, kind, fields and chunk options), and re-chunks only the files whose hash
//! differs from the stored one; stored files no longer among the sources are removed. The
//! in-memory indexes follow the same changes, so an update costs what changed, not the corpus.
//!
//! Embeddings go through toolbelt-search's [`Embedder`] and [`VectorStore`] cache, keyed by
//! the hash of the embedded text: a chunk that moved or whose file changed elsewhere is not
//! embedded again. Without an embedder the base ranks by BM25 alone and every result says so
//! ([`RetrievalMode::Bm25Only`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::RwLock;
use toolbelt_search::embed::{Embedder, StoredVector, VectorStore};
use toolbelt_search::{Bm25Index, DEFAULT_RRF_K, Hit, SearchError, ToolDoc, weighted_rank_fusion};

use crate::KnowledgeError;
use crate::chunk::DocKind;
use crate::chunk::{Chunk, ChunkOptions, Document, chunk_document};
use crate::filter::{FieldSpec, Filter, builtin_fields};
use crate::rewrite::{QueryRewrite, QueryRewriter, rewrite_with};
use crate::source::{
    Body, LoadedFile, MAX_PDF_BYTES, Source, UrlFetcher, fetch_urls, load, sha256_hex,
};
use crate::store::ChunkStore;

/// Names the chunking recipe in every file hash: a build that chunks differently re-chunks.
const CHUNKER_VERSION: &str = "chunker1";
/// Added to the embedder's model id in the vector cache: the recipe of the embedded text.
const TEXT_RECIPE: &str = "knowledge1";
/// Texts per embedder call.
const EMBED_BATCH: usize = 32;
/// How many candidates each ranking hands to fusion, at least.
const MIN_CANDIDATES: usize = 50;

/// How a search ranked its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalMode {
    /// BM25 alone: no embedder is configured.
    Bm25Only,
    /// BM25 and embedding similarity, fused by reciprocal rank.
    Hybrid,
}

impl RetrievalMode {
    /// One line for the model and the user.
    pub fn describe(self) -> &'static str {
        match self {
            RetrievalMode::Bm25Only => {
                "keyword search (BM25) only: no embedder is configured, so results match words, not meaning"
            }
            RetrievalMode::Hybrid => "hybrid search: BM25 and embeddings, fused by rank",
        }
    }
}

/// Reorders the fused candidates of a search (a cross-encoder, a model call); see
/// [`KnowledgeBase::with_reranker`].
#[async_trait::async_trait]
pub trait Reranker: Send + Sync {
    /// `hits` best first as fused; returns them in the reranker's order (it may drop some).
    async fn rerank(
        &self,
        query: &str,
        hits: Vec<KnowledgeHit>,
    ) -> Result<Vec<KnowledgeHit>, KnowledgeError>;
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeHit {
    /// The chunk.
    pub chunk: Chunk,
    /// Its score under the mode that ranked it (BM25, or fused rank); higher is better.
    pub score: f32,
}

/// What a search returned, and how it ranked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResults {
    /// How the hits were ranked.
    pub mode: RetrievalMode,
    /// Best first.
    pub hits: Vec<KnowledgeHit>,
}

/// What [`KnowledgeBase::index`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IndexReport {
    /// Files read from the sources.
    pub files: usize,
    /// Files new to the store.
    pub added: usize,
    /// Files whose content changed, re-chunked.
    pub changed: usize,
    /// Files unchanged since the last index (not chunked again).
    pub unchanged: usize,
    /// Stored files no longer among the sources, removed.
    pub removed: usize,
    /// Files skipped as larger than the limit.
    pub skipped_large: usize,
    /// Files skipped as binary.
    pub skipped_binary: usize,
    /// Files that could not be read as their kind (a broken, encrypted or over-slow PDF);
    /// each is logged, and any earlier version of it removed from the base.
    pub skipped_unreadable: usize,
    /// Chunks in the base after indexing.
    pub chunks: usize,
    /// Chunks embedded in this run (the rest came from the cache or needed none).
    pub embedded: usize,
}

/// What the base holds; see [`KnowledgeBase::status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Stored files.
    pub documents: usize,
    /// Stored chunks.
    pub chunks: usize,
    /// How searches rank.
    pub mode: RetrievalMode,
    /// The embedder's model id, when there is one.
    pub embedder: Option<String>,
}

struct Embedding {
    embedder: Arc<dyn Embedder>,
    cache: Arc<dyn VectorStore>,
}

/// The searchable copy of the store, in memory.
#[derive(Default)]
struct Live {
    loaded: bool,
    chunks: HashMap<String, Chunk>,
    by_source: BTreeMap<String, Vec<String>>,
    bm25: Bm25Index,
    /// Unit vectors by chunk id (with an embedder).
    vectors: HashMap<String, Vec<f32>>,
}

impl Live {
    fn remove_source(&mut self, source: &str) {
        for id in self.by_source.remove(source).unwrap_or_default() {
            self.chunks.remove(&id);
            self.bm25.remove(&id);
            self.vectors.remove(&id);
        }
    }

    fn add(&mut self, chunk: Chunk) {
        self.bm25.upsert(&ToolDoc::new(
            chunk.id.clone(),
            chunk.search_text(),
            serde_json::Value::Null,
        ));
        self.by_source
            .entry(chunk.source.clone())
            .or_default()
            .push(chunk.id.clone());
        self.chunks.insert(chunk.id.clone(), chunk);
    }
}

/// A knowledge base; see the [module docs](self) and the crate example.
pub struct KnowledgeBase {
    store: Arc<dyn ChunkStore>,
    embedding: Option<Embedding>,
    options: ChunkOptions,
    fields: Vec<FieldSpec>,
    reranker: Option<Arc<dyn Reranker>>,
    rewriter: Option<Arc<dyn QueryRewriter>>,
    url_fetcher: Option<Arc<dyn UrlFetcher>>,
    live: RwLock<Live>,
}

impl std::fmt::Debug for KnowledgeBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeBase")
            .field(
                "embedder",
                &self.embedding.as_ref().map(|e| e.embedder.model_id()),
            )
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl KnowledgeBase {
    /// A base keeping its chunks in `store`, ranking by BM25 until an embedder is added.
    pub fn new(store: Arc<dyn ChunkStore>) -> Self {
        KnowledgeBase {
            store,
            embedding: None,
            options: ChunkOptions::default(),
            fields: builtin_fields(),
            reranker: None,
            rewriter: None,
            url_fetcher: None,
            live: RwLock::new(Live::default()),
        }
    }

    /// Ranks by BM25 and `embedder`'s vectors (hybrid), caching vectors in `cache` (a
    /// `SqliteVectorStore` keeps them across processes).
    pub fn with_embedder(
        mut self,
        embedder: Arc<dyn Embedder>,
        cache: Arc<dyn VectorStore>,
    ) -> Self {
        self.embedding = Some(Embedding { embedder, cache });
        self
    }

    /// Sets the chunk sizes (changing them re-chunks every file at the next index).
    pub fn with_chunking(mut self, options: ChunkOptions) -> Self {
        self.options = options;
        self
    }

    /// Declares a user field the model may filter on (front matter or source fields). Only
    /// declared fields pass [`Filter::parse`].
    pub fn with_field(mut self, field: FieldSpec) -> Self {
        self.fields.retain(|f| f.name != field.name);
        self.fields.push(field);
        self
    }

    /// Reads URL sources through `fetcher` (without one, indexing a URL source fails).
    pub fn with_url_fetcher(mut self, fetcher: Arc<dyn UrlFetcher>) -> Self {
        self.url_fetcher = Some(fetcher);
        self
    }

    /// Reorders the fused candidates of every search.
    pub fn with_reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.reranker = Some(reranker);
        self
    }

    /// Rewrites the knowledge tools' question into a search query before each search (see
    /// [`QueryRewriter`]); [`search`](Self::search) itself searches what it is given.
    pub fn with_query_rewriter(mut self, rewriter: Arc<dyn QueryRewriter>) -> Self {
        self.rewriter = Some(rewriter);
        self
    }

    /// What to search for `question`: the rewriter's query, or the question itself when no
    /// rewriter is set or the rewrite failed (the result says which, and why).
    pub async fn rewrite_query(&self, question: &str) -> QueryRewrite {
        match &self.rewriter {
            None => QueryRewrite::AsAsked,
            Some(rewriter) => rewrite_with(rewriter.as_ref(), question).await,
        }
    }

    /// The fields a filter may use: the built-in ones, then the declared ones.
    pub fn fields(&self) -> &[FieldSpec] {
        &self.fields
    }

    /// How searches rank.
    pub fn mode(&self) -> RetrievalMode {
        if self.embedding.is_some() {
            RetrievalMode::Hybrid
        } else {
            RetrievalMode::Bm25Only
        }
    }

    /// Parses a filter against this base's fields.
    pub fn parse_filter(&self, value: &serde_json::Value) -> Result<Filter, KnowledgeError> {
        Filter::parse(value, &self.fields)
    }

    /// Makes `sources` the base's content: new and changed files are chunked (and embedded),
    /// unchanged ones kept, stored files no longer among them removed.
    ///
    /// On a store error the run stops; the files done before it stay done, and the next run
    /// picks up the rest.
    pub async fn index(&self, sources: &[Source]) -> Result<IndexReport, KnowledgeError> {
        let salt = format!(
            "{CHUNKER_VERSION}:{}:{}",
            self.options.max_chars, self.options.overlap_chars
        );
        let fetched = fetch_urls(sources, &salt, self.url_fetcher.as_deref()).await?;
        let sources = sources.to_vec();
        let (mut files, skipped) = tokio::task::spawn_blocking(move || load(&sources, &salt))
            .await
            .map_err(|e| KnowledgeError::Store(format!("reading sources failed: {e}")))??;
        files.extend(fetched.files);
        let mut live = self.live.write().await;
        self.ensure_loaded(&mut live).await?;
        let stored = self.store.documents().await?;
        let mut report = IndexReport {
            files: files.len(),
            skipped_large: skipped.too_large + fetched.too_large,
            skipped_binary: skipped.binary,
            skipped_unreadable: fetched.failed.len(),
            ..IndexReport::default()
        };
        // A page that could not be fetched now keeps what was stored of it.
        let mut seen: std::collections::HashSet<&str> =
            fetched.failed.iter().map(String::as_str).collect();
        let mut fresh: Vec<Chunk> = Vec::new();
        for file in &files {
            seen.insert(file.key.as_str());
            let was_stored = match stored.get(&file.key) {
                Some(hash) if *hash == file.hash => {
                    report.unchanged += 1;
                    continue;
                }
                Some(_) => true,
                None => false,
            };
            let (text, pages) = match document_text(file).await {
                Ok(read) => read,
                Err(message) => {
                    tracing::warn!(source = %file.key, "skipped: {message}");
                    report.skipped_unreadable += 1;
                    if was_stored {
                        self.store.remove(&file.key).await?;
                        live.remove_source(&file.key);
                    }
                    continue;
                }
            };
            if was_stored {
                report.changed += 1;
            } else {
                report.added += 1;
            }
            let chunks = chunk_document(
                &Document {
                    source: &file.key,
                    kind: file.kind,
                    text: &text,
                    fields: &file.fields,
                    pages: &pages,
                },
                self.options,
            );
            self.store.replace(&file.key, &file.hash, &chunks).await?;
            live.remove_source(&file.key);
            for chunk in &chunks {
                live.add(chunk.clone());
            }
            fresh.extend(chunks);
        }
        for source in stored.keys() {
            if !seen.contains(source.as_str()) {
                self.store.remove(source).await?;
                live.remove_source(source);
                report.removed += 1;
            }
        }
        report.embedded = self.embed(&mut live, &fresh).await?;
        report.chunks = live.chunks.len();
        Ok(report)
    }

    /// What the base holds.
    pub async fn status(&self) -> Result<Status, KnowledgeError> {
        let mut live = self.live.write().await;
        self.ensure_loaded(&mut live).await?;
        Ok(Status {
            documents: live.by_source.len(),
            chunks: live.chunks.len(),
            mode: self.mode(),
            embedder: self
                .embedding
                .as_ref()
                .map(|e| e.embedder.model_id().to_owned()),
        })
    }

    /// Every chunk, by source, in document order.
    pub async fn chunks(&self) -> Result<Vec<Chunk>, KnowledgeError> {
        let mut live = self.live.write().await;
        self.ensure_loaded(&mut live).await?;
        Ok(live
            .by_source
            .values()
            .flatten()
            .filter_map(|id| live.chunks.get(id).cloned())
            .collect())
    }

    /// The best `k` chunks for `query` among those `filter` passes, best first.
    pub async fn search(
        &self,
        query: &str,
        k: usize,
        filter: Option<&Filter>,
    ) -> Result<SearchResults, KnowledgeError> {
        {
            let live = self.live.read().await;
            if !live.loaded {
                drop(live);
                let mut live = self.live.write().await;
                self.ensure_loaded(&mut live).await?;
            }
        }
        let live = self.live.read().await;
        let mode = self.mode();
        if k == 0 || live.chunks.is_empty() {
            return Ok(SearchResults {
                mode,
                hits: Vec::new(),
            });
        }
        let depth = (k * 4).max(MIN_CANDIDATES);
        let passes =
            |id: &str| filter.is_none_or(|f| live.chunks.get(id).is_some_and(|c| f.matches(c)));
        // With a filter, BM25 ranks every matching chunk so the filter cannot empty the top.
        let bm25_k = if filter.is_some() {
            live.chunks.len()
        } else {
            depth
        };
        let bm25: Vec<Hit> = live
            .bm25
            .search(query, bm25_k)
            .into_iter()
            .filter(|h| passes(&h.name))
            .take(depth)
            .collect();
        let ranked: Vec<Hit> = match &self.embedding {
            None => bm25,
            Some(embedding) => {
                let vectors = embedding.embedder.embed(&[query.to_owned()]).await?;
                let query_vector = vectors
                    .into_iter()
                    .next()
                    .filter(|v| !v.is_empty() && v.iter().all(|x| x.is_finite()))
                    .ok_or_else(|| {
                        KnowledgeError::Embedding(SearchError::Embedder(
                            "the embedder returned no usable query vector".into(),
                        ))
                    })?;
                let unit = normalized(query_vector);
                let mut similar: Vec<Hit> = live
                    .vectors
                    .iter()
                    .filter(|(id, v)| v.len() == unit.len() && passes(id))
                    .map(|(id, v)| Hit {
                        name: id.clone(),
                        score: v.iter().zip(&unit).map(|(a, b)| a * b).sum(),
                    })
                    .collect();
                let order =
                    |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.name.cmp(&b.name));
                if similar.len() > depth {
                    similar.select_nth_unstable_by(depth - 1, order);
                    similar.truncate(depth);
                }
                similar.sort_by(order);
                weighted_rank_fusion(&[(&bm25, 1.0), (&similar, 1.0)], DEFAULT_RRF_K as f64)
            }
        };
        let keep = if self.reranker.is_some() { depth } else { k };
        let mut hits: Vec<KnowledgeHit> = ranked
            .into_iter()
            .take(keep)
            .filter_map(|h| {
                live.chunks.get(&h.name).map(|c| KnowledgeHit {
                    chunk: c.clone(),
                    score: h.score,
                })
            })
            .collect();
        drop(live);
        if let Some(reranker) = &self.reranker {
            hits = reranker.rerank(query, hits).await?;
        }
        hits.truncate(k);
        Ok(SearchResults { mode, hits })
    }

    /// Loads the store into memory once (a base opened on an existing file).
    async fn ensure_loaded(&self, live: &mut Live) -> Result<(), KnowledgeError> {
        if live.loaded {
            return Ok(());
        }
        let chunks = self.store.chunks().await?;
        let mut fresh = Live {
            loaded: true,
            ..Live::default()
        };
        for chunk in &chunks {
            fresh.add(chunk.clone());
        }
        self.embed(&mut fresh, &chunks).await?;
        *live = fresh;
        Ok(())
    }

    /// Puts the vectors of `chunks` into `live`: from the cache when it has them, embedded
    /// (and cached) otherwise. Returns how many were embedded.
    async fn embed(&self, live: &mut Live, chunks: &[Chunk]) -> Result<usize, KnowledgeError> {
        let Some(embedding) = &self.embedding else {
            return Ok(0);
        };
        if chunks.is_empty() {
            return Ok(0);
        }
        let key = format!("{}#{TEXT_RECIPE}", embedding.embedder.model_id());
        let texts: Vec<(String, String, String)> = chunks
            .iter()
            .map(|c| {
                let text = c.search_text();
                (c.id.clone(), sha256_hex(&[text.as_bytes()]), text)
            })
            .collect();
        let hashes: Vec<String> = texts.iter().map(|(_, h, _)| h.clone()).collect();
        let cached = embedding.cache.get(&key, &hashes).await?;
        let mut missing = Vec::new();
        for (id, hash, text) in &texts {
            match cached.get(hash) {
                Some(v) if usable(v) => {
                    live.vectors.insert(id.clone(), normalized(v.clone()));
                }
                _ => missing.push((id, hash, text)),
            }
        }
        let mut embedded = 0;
        for batch in missing.chunks(EMBED_BATCH) {
            let inputs: Vec<String> = batch.iter().map(|(_, _, t)| (*t).clone()).collect();
            let vectors = embedding.embedder.embed(&inputs).await?;
            if vectors.len() != inputs.len() || !vectors.iter().all(|v| usable(v)) {
                return Err(KnowledgeError::Embedding(SearchError::Embedder(format!(
                    "embedder {} returned {} vectors for {} texts, or unusable ones",
                    embedding.embedder.model_id(),
                    vectors.len(),
                    inputs.len()
                ))));
            }
            let stored: Vec<StoredVector> = batch
                .iter()
                .zip(&vectors)
                .map(|((id, hash, _), v)| StoredVector {
                    name: (*id).clone(),
                    content_hash: (*hash).clone(),
                    vector: v.clone(),
                })
                .collect();
            embedding.cache.put(&key, &stored).await?;
            for ((id, _, _), v) in batch.iter().zip(vectors) {
                live.vectors.insert((*id).clone(), normalized(v));
            }
            embedded += batch.len();
        }
        Ok(embedded)
    }
}

/// The pages one PDF may yield to a knowledge base, and the characters.
const PDF_LIMITS: toolbelt_pdf::Limits = toolbelt_pdf::Limits {
    max_pages: 2_000,
    max_chars: 4 << 20,
    time_limit: std::time::Duration::from_secs(60),
};

/// A file's text, and for a PDF where each page starts in it (page number, 0-based line).
async fn document_text(
    file: &LoadedFile,
) -> Result<(std::borrow::Cow<'_, str>, Vec<(u32, usize)>), String> {
    let path = match &file.body {
        Body::Text(text) => return Ok((std::borrow::Cow::Borrowed(text), Vec::new())),
        Body::Pdf(path) => path.clone(),
    };
    debug_assert_eq!(file.kind, DocKind::Pdf);
    // Read again (the walk kept only its hash); bounded as the walk bounds it.
    let bytes = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_PDF_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if bytes.len() as u64 > MAX_PDF_BYTES {
            return Err(format!("grew past {MAX_PDF_BYTES} bytes while indexing"));
        }
        Ok(bytes)
    })
    .await
    .map_err(|e| format!("reading the PDF failed: {e}"))??;
    let pdf = toolbelt_pdf::extract(bytes, None, PDF_LIMITS).await?;
    if pdf.truncated {
        tracing::warn!(
            source = %file.key,
            "only the first {} pages of {} are indexed (the PDF limits)",
            pdf.pages.len(),
            pdf.page_count
        );
    }
    let mut text = String::new();
    let mut starts = Vec::with_capacity(pdf.pages.len());
    let mut line = 0usize;
    for (number, page) in &pdf.pages {
        starts.push((*number, line));
        let page = page.trim_end();
        text.push_str(page);
        text.push('\n');
        line += page.matches('\n').count() + 1;
    }
    Ok((std::borrow::Cow::Owned(text), starts))
}

/// Finite, not empty, not all zero: a vector that has a direction.
fn usable(v: &[f32]) -> bool {
    !v.is_empty() && v.iter().all(|x| x.is_finite()) && v.iter().any(|x| *x != 0.0)
}

fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
    v
}
