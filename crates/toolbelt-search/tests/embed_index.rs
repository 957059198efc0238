//! EmbeddingIndex over a real HTTP embedder (the scripted server's word-hash vectors): what a
//! sync embeds and reuses, what search returns, what a failed sync keeps; the SQLite cache
//! across reopening, and its errors for files that are not a cache or are locked.

use crate::embed_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use embed_support::{Counting, catalog};
use toolbelt_model::testing::ScriptedServer;
use toolbelt_search::embed::{Embedder, EmbeddingIndex, MemoryVectorStore, OpenAiEmbedder};
use toolbelt_search::{SearchError, ToolDoc};

async fn server_embedder() -> (ScriptedServer, Arc<Counting>) {
    let server = ScriptedServer::start([]).await.unwrap();
    let embedder = Counting::new(Arc::new(OpenAiEmbedder::new(server.base_url(), "hash")));
    (server, embedder)
}

async fn top(index: &EmbeddingIndex, query: &str) -> String {
    index.search(query, 1).await.unwrap()[0].name.clone()
}

#[tokio::test]
async fn search_ranks_by_similarity_and_bounds_k() {
    let (_server, embedder) = server_embedder().await;
    let mut index = EmbeddingIndex::new(embedder.clone(), Arc::new(MemoryVectorStore::new()));
    assert!(index.search("anything", 3).await.unwrap().is_empty());
    assert_eq!(
        embedder.calls(),
        0,
        "an empty index does not embed the query"
    );

    let stats = index.sync(&catalog()).await.unwrap();
    assert_eq!((stats.added, stats.embedded, stats.reused), (12, 12, 0));
    assert_eq!(
        top(&index, "weather forecast temperature in a city").await,
        "get_weather"
    );
    assert_eq!(top(&index, "send an email message").await, "send_email");

    let hits = index.search("file", 100).await.unwrap();
    assert_eq!(hits.len(), 12);
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "best first"
    );
    assert!(hits.iter().all(|h| (-1.0..=1.0001).contains(&h.score)));
    assert!(index.search("file", 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_second_sync_embeds_nothing_and_a_changed_tool_is_embedded_again() {
    let (_server, embedder) = server_embedder().await;
    let mut index =
        EmbeddingIndex::new(embedder.clone(), Arc::new(MemoryVectorStore::new())).batch_size(5);
    index.sync(&catalog()).await.unwrap();
    assert_eq!(
        (embedder.texts(), embedder.calls()),
        (12, 3),
        "batches of 5"
    );

    let stats = index.sync(&catalog()).await.unwrap();
    assert_eq!((stats.embedded, stats.reused, stats.changed), (0, 12, 0));
    assert_eq!(embedder.texts(), 12, "nothing embedded again");

    let mut changed = catalog();
    changed[3].description = "Look up stock prices for a ticker symbol.".into();
    let stats = index.sync(&changed).await.unwrap();
    assert_eq!((stats.embedded, stats.reused, stats.changed), (1, 11, 1));
    assert_eq!(embedder.texts(), 13);
    assert_eq!(
        top(&index, "stock prices for a ticker symbol").await,
        "get_weather"
    );
}

#[tokio::test]
async fn vanished_tools_leave_the_results_and_come_back_without_embedding() {
    let (_server, embedder) = server_embedder().await;
    let mut index = EmbeddingIndex::new(embedder.clone(), Arc::new(MemoryVectorStore::new()));
    let all = catalog();
    index.sync(&all).await.unwrap();

    let without: Vec<ToolDoc> = all
        .iter()
        .filter(|d| d.name != "send_email")
        .cloned()
        .collect();
    let stats = index.sync(&without).await.unwrap();
    assert_eq!((stats.removed, stats.embedded), (1, 0));
    assert_eq!(index.len(), 11);
    let hits = index.search("send an email message", 12).await.unwrap();
    assert!(hits.iter().all(|h| h.name != "send_email"), "{hits:?}");

    let stats = index.sync(&all).await.unwrap();
    assert_eq!((stats.added, stats.embedded, stats.reused), (1, 0, 12));
    assert_eq!(
        embedder.texts(),
        12 + 1,
        "only the query was embedded since"
    );
}

/// Passes calls through until the `fail_at`-th (1-based), which fails.
struct FailOnCall {
    inner: Arc<dyn Embedder>,
    calls: AtomicUsize,
    fail_at: usize,
}

#[async_trait::async_trait]
impl Embedder for FailOnCall {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, SearchError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
            return Err(SearchError::Embedder("server went away".into()));
        }
        self.inner.embed(texts).await
    }
}

#[tokio::test]
async fn a_failed_sync_keeps_the_live_set_and_the_batches_already_paid_for() {
    let (_server, counting) = server_embedder().await;
    let store = Arc::new(MemoryVectorStore::new());
    let all = catalog();
    let mut index = EmbeddingIndex::new(counting.clone(), store.clone()).batch_size(4);
    index.sync(&all[..2]).await.unwrap();

    // Second sync: batches of 4 for the 10 new tools; the second batch fails.
    let failing = Arc::new(FailOnCall {
        inner: counting.clone(),
        calls: AtomicUsize::new(0),
        fail_at: 2,
    });
    let mut flaky = EmbeddingIndex::new(failing, store.clone()).batch_size(4);
    flaky.sync(&all[..2]).await.unwrap();
    let error = flaky.sync(&all).await.unwrap_err();
    assert!(error.to_string().contains("server went away"), "{error}");
    assert_eq!(flaky.len(), 2, "the live set is unchanged");
    assert_eq!(
        store.len(),
        6,
        "the first batch of the failed sync was stored"
    );

    let stats = index.sync(&all).await.unwrap();
    assert_eq!((stats.embedded, stats.reused), (6, 6));
}

#[tokio::test]
async fn duplicate_names_keep_the_last_doc() {
    let (_server, embedder) = server_embedder().await;
    let mut index = EmbeddingIndex::new(embedder, Arc::new(MemoryVectorStore::new()));
    let docs = vec![
        ToolDoc::new("lookup", "Get the weather forecast", serde_json::json!({})),
        ToolDoc::new(
            "lookup",
            "Translate text into French",
            serde_json::json!({}),
        ),
        ToolDoc::new("other", "Send an email", serde_json::json!({})),
    ];
    index.sync(&docs).await.unwrap();
    assert_eq!(index.len(), 2);
    let score =
        |hits: Vec<toolbelt_search::Hit>| hits.iter().find(|h| h.name == "lookup").unwrap().score;
    let last = score(index.search("translate text into french", 2).await.unwrap());
    let first = score(index.search("get the weather forecast", 2).await.unwrap());
    assert!(
        last > first,
        "the last description was embedded ({last} vs {first})"
    );
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use toolbelt_search::embed::SqliteVectorStore;

    #[tokio::test]
    async fn the_cache_survives_reopening_and_is_per_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.db");
        let (server, embedder) = server_embedder().await;
        {
            let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
            let mut index = EmbeddingIndex::new(embedder.clone(), store);
            assert_eq!(index.sync(&catalog()).await.unwrap().embedded, 12);
        }
        let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
        let mut index = EmbeddingIndex::new(embedder.clone(), store.clone());
        let stats = index.sync(&catalog()).await.unwrap();
        assert_eq!((stats.embedded, stats.reused), (0, 12));
        assert_eq!(embedder.texts(), 12);
        assert_eq!(top(&index, "send an email message").await, "send_email");

        // Another model never reuses these vectors.
        let other = Counting::new(Arc::new(OpenAiEmbedder::new(server.base_url(), "other")));
        let mut index = EmbeddingIndex::new(other.clone(), store);
        assert_eq!(index.sync(&catalog()).await.unwrap().embedded, 12);
    }

    #[tokio::test]
    async fn a_malformed_row_is_embedded_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.db");
        let (_server, embedder) = server_embedder().await;
        let docs = catalog();
        {
            let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
            EmbeddingIndex::new(embedder.clone(), store)
                .sync(&docs)
                .await
                .unwrap();
        }
        let conn = rusqlite::Connection::open(&path).unwrap();
        let changed = conn
            .execute(
                "UPDATE vectors SET vector = x'010203' WHERE content_hash = ?1",
                [docs[0].content_hash()],
            )
            .unwrap();
        assert_eq!(changed, 1);
        drop(conn);
        let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
        let stats = EmbeddingIndex::new(embedder.clone(), store)
            .sync(&docs)
            .await
            .unwrap();
        assert_eq!((stats.embedded, stats.reused), (1, 11));
    }

    #[test]
    fn a_file_that_is_not_a_cache_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.db");
        let bytes = b"this is not an SQLite database, it is a text file of some length ".repeat(64);
        std::fs::write(&garbage, &bytes).unwrap();
        let error = SqliteVectorStore::open(&garbage).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, SearchError::Store(_)), "{message}");
        assert!(message.contains("garbage.db"), "names the file: {message}");
        assert!(message.contains("not a database"), "{message}");
        assert_eq!(
            std::fs::read(&garbage).unwrap(),
            bytes,
            "the file is untouched"
        );

        let foreign = dir.path().join("foreign.db");
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me');")
            .unwrap();
        drop(conn);
        let message = SqliteVectorStore::open(&foreign).unwrap_err().to_string();
        assert!(message.contains("another program"), "{message}");
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            tables, 1,
            "no table was added to the other program's database"
        );
    }

    #[tokio::test]
    async fn a_write_locked_by_another_process_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.db");
        let (_server, embedder) = server_embedder().await;
        let store = Arc::new(SqliteVectorStore::open(&path).unwrap());
        // Another connection (as another process would) holds the write lock.
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder
            .execute_batch("BEGIN IMMEDIATE; DELETE FROM vectors;")
            .unwrap();
        let mut index = EmbeddingIndex::new(embedder, store);
        let error = index.sync(&catalog()).await.unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, SearchError::Store(_)), "{message}");
        assert!(message.contains("locked"), "{message}");
        assert!(index.is_empty());
        holder.execute_batch("ROLLBACK").unwrap();
        assert_eq!(index.sync(&catalog()).await.unwrap().reused, 0);
    }
}
