//! The PostgreSQL store (feature `postgres`) passes the bodies the memory and SQLite stores
//! pass, each test in a schema of its own on the server `.ci/start-services` runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use toolbelt_knowledge::{KnowledgeBase, PostgresStore, Source, VectorColumn};

use crate::support::{SynonymEmbedder, write_files};

fn url() -> String {
    toolbelt_testkit::service_url(
        "TOOLBELT_TEST_POSTGRES_URL",
        "postgres://toolbelt:toolbelt@127.0.0.1:5432/toolbelt",
    )
}

fn unique_schema() -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "tb_kb_{:x}_{:x}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

async fn store(schema: &str) -> PostgresStore {
    PostgresStore::open_in_schema(&url(), schema).await.unwrap()
}

#[tokio::test]
async fn postgres_store_follows_changes_additions_and_deletions() {
    let store = store(&unique_schema()).await;
    crate::index::incremental_updates_with(Arc::new(store)).await;
}

#[tokio::test]
async fn injection_shaped_filter_values_are_plain_data_on_postgres() {
    let store = store(&unique_schema()).await;
    crate::filter::injection_shaped_values_are_plain_data_on(Arc::new(store)).await;
}

#[tokio::test]
async fn a_reopened_postgres_base_reuses_its_chunks_and_cached_vectors() {
    let schema = unique_schema();
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("garage.md", "# Garage\n\nPark the automobile inside.\n"),
            (
                "release.md",
                "# Releases\n\nTo revert a release, run the undo script.\n",
            ),
        ],
    );
    let sources = [Source::new(dir.path().to_string_lossy())];
    let first = SynonymEmbedder::new();
    let store = Arc::new(store(&schema).await);
    KnowledgeBase::new(store.clone())
        .with_embedder(first.clone(), store.clone())
        .index(&sources)
        .await
        .unwrap();
    assert_eq!(first.texts(), 2);

    // Another process: the same schema, opened again.
    let second = SynonymEmbedder::new();
    let store = Arc::new(self::store(&schema).await);
    // This server's pgvector availability decides the column; both kinds round-trip.
    assert!(matches!(
        store.vector_column(),
        VectorColumn::PgVector | VectorColumn::RealArray
    ));
    let base = KnowledgeBase::new(store.clone()).with_embedder(second.clone(), store);
    let hits = base.search("undo", 1, None).await.unwrap().hits;
    assert!(hits[0].chunk.source.ends_with("release.md"));
    assert_eq!(second.texts(), 1, "only the query is embedded");
    let report = base.index(&sources).await.unwrap();
    assert_eq!((report.unchanged, report.embedded), (2, 0));
}

#[tokio::test]
async fn a_bad_schema_name_and_a_dead_server_are_clear_errors() {
    let err = PostgresStore::open_in_schema(&url(), "x\"; DROP SCHEMA public; --")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("ASCII letters"), "{err}");
    let err = PostgresStore::open("postgres://nobody:x@127.0.0.1:1/none")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("knowledge store: postgres: "), "{err}");
}
