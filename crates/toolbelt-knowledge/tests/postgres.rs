//! The PostgreSQL store (feature `postgres`) passes the bodies the memory and SQLite stores
//! pass, each test in a schema of its own on the server `.ci/start-services` runs, dropped when
//! the test ends (also when it fails).

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

/// A schema of the test's own, dropped (with its tables) when this is dropped: at the end of
/// the test, or while a failed assertion unwinds.
struct TestSchema(String);

impl TestSchema {
    fn new() -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        TestSchema(format!(
            "tb_kb_{:x}_{:x}_{}",
            std::process::id(),
            nanos,
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn name(&self) -> &str {
        &self.0
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // The test's runtime may be the one unwinding: a thread and a runtime of its own.
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                let connection = tokio::spawn(connection);
                let done = client.batch_execute(&sql).await.map_err(|e| e.to_string());
                drop(client);
                let _ = connection.await;
                done
            })
        })
        .join();
        // Never a panic here: this may run while a failed assertion unwinds.
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("warning: schema {} was not dropped: {error}", self.0),
            Err(_) => eprintln!("warning: dropping schema {} panicked", self.0),
        }
    }
}

async fn store(schema: &TestSchema) -> PostgresStore {
    PostgresStore::open_in_schema(&url(), schema.name())
        .await
        .unwrap()
}

#[tokio::test]
async fn postgres_store_follows_changes_additions_and_deletions() {
    let schema = TestSchema::new();
    crate::index::incremental_updates_with(Arc::new(store(&schema).await)).await;
}

#[tokio::test]
async fn injection_shaped_filter_values_are_plain_data_on_postgres() {
    let schema = TestSchema::new();
    crate::filter::injection_shaped_values_are_plain_data_on(Arc::new(store(&schema).await)).await;
}

#[tokio::test]
async fn a_reopened_postgres_base_reuses_its_chunks_and_cached_vectors() {
    let schema = TestSchema::new();
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

/// Set to 1 where pgvector is installed (the server must have it, and the test fails
/// without it); elsewhere the test checks the `real[]` fallback.
const PGVECTOR_EXPECTED: &str = "TOOLBELT_TEST_PGVECTOR";

#[tokio::test]
async fn vectors_are_in_pgvectors_type_exactly_when_the_server_has_the_extension() {
    let (client, connection) = tokio_postgres::connect(&url(), tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {}: {e} (run .ci/start-services)", url()));
    let connection = tokio::spawn(connection);
    let available = client
        .query_opt(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'",
            &[],
        )
        .await
        .unwrap()
        .is_some();
    if std::env::var(PGVECTOR_EXPECTED).is_ok_and(|v| v == "1") {
        assert!(
            available,
            "{PGVECTOR_EXPECTED}=1 but this PostgreSQL server has no pgvector extension: \
             install pgvector for this server's PostgreSQL version (built from its sources \
             with that version's pg_config: Debian bookworm's archive has no package) and \
             restart the server"
        );
    }
    let schema = TestSchema::new();
    let store = store(&schema).await;
    let column: String = client
        .query_one(
            "SELECT udt_name::text FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = 'toolbelt_kb_vectors' AND column_name = 'vector'",
            &[&schema.name()],
        )
        .await
        .unwrap()
        .get(0);
    if available {
        assert_eq!(store.vector_column(), VectorColumn::PgVector);
        assert_eq!(column, "vector");
    } else {
        assert_eq!(store.vector_column(), VectorColumn::RealArray);
        assert_eq!(column, "_float4");
    }
    // Vectors round-trip through the column either way.
    use toolbelt_search::embed::{StoredVector, VectorStore};
    let stored = StoredVector {
        name: "a".into(),
        content_hash: "h1".into(),
        vector: vec![0.5, -1.25, 3.0],
    };
    store.put("m", std::slice::from_ref(&stored)).await.unwrap();
    let back = store.get("m", &["h1".to_string()]).await.unwrap();
    assert_eq!(back["h1"], stored.vector);
    drop(client);
    let _ = connection.await;
}
