//! Incremental indexing by content hash, the walk's rules, and every store.

use std::sync::Arc;

use toolbelt_knowledge::{
    ChunkStore, IndexReport, KnowledgeBase, MemoryStore, Source, SqliteStore,
};

use crate::support::{base_chunks, write_files};

fn sources(dir: &std::path::Path) -> Vec<Source> {
    vec![Source::new(dir.to_string_lossy())]
}

async fn best_source(base: &KnowledgeBase, query: &str) -> Option<String> {
    let hits = base.search(query, 1, None).await.unwrap().hits;
    hits.first().map(|h| {
        let s = &h.chunk.source;
        s[s.rfind('/').unwrap() + 1..].to_owned()
    })
}

/// Changes, additions and deletions are seen by the next index and by search, with `store`.
pub async fn incremental_updates_with(store: Arc<dyn ChunkStore>) {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("a.md", "# Alpha\n\nThe aardvark eats ants.\n"),
            ("b.md", "# Beta\n\nThe badger digs burrows.\n"),
        ],
    );
    let base = KnowledgeBase::new(store.clone());
    let first = base.index(&sources(dir.path())).await.unwrap();
    assert_eq!(
        (
            first.files,
            first.added,
            first.changed,
            first.unchanged,
            first.removed
        ),
        (2, 2, 0, 0, 0)
    );
    assert_eq!(
        best_source(&base, "aardvark").await.as_deref(),
        Some("a.md")
    );

    // Nothing changed: nothing re-chunked.
    let again = base.index(&sources(dir.path())).await.unwrap();
    assert_eq!((again.unchanged, again.added, again.changed), (2, 0, 0));

    // b.md changes, a.md is deleted, c.md appears.
    write_files(
        dir.path(),
        &[
            ("b.md", "# Beta\n\nThe beaver builds dams.\n"),
            ("c.md", "# Gamma\n\nThe camel crosses deserts.\n"),
        ],
    );
    std::fs::remove_file(dir.path().join("a.md")).unwrap();
    let update = base.index(&sources(dir.path())).await.unwrap();
    assert_eq!(
        (
            update.added,
            update.changed,
            update.unchanged,
            update.removed,
            update.chunks
        ),
        (1, 1, 0, 1, 2)
    );
    assert_eq!(best_source(&base, "aardvark").await, None);
    assert_eq!(best_source(&base, "badger").await, None);
    assert_eq!(best_source(&base, "beaver").await.as_deref(), Some("b.md"));
    assert_eq!(best_source(&base, "camel").await.as_deref(), Some("c.md"));
    let stored = store.documents().await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored.keys().all(|k| !k.ends_with("a.md")));
}

#[tokio::test]
async fn memory_store_follows_changes_additions_and_deletions() {
    incremental_updates_with(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn sqlite_store_follows_changes_additions_and_deletions() {
    let file = tempfile::tempdir().unwrap();
    incremental_updates_with(Arc::new(
        SqliteStore::open(file.path().join("kb.db")).unwrap(),
    ))
    .await;
}

#[tokio::test]
async fn a_reopened_sqlite_base_searches_at_once_and_rechunks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    let path = db.path().join("kb.db");
    write_files(
        dir.path(),
        &[
            ("guide.md", "# Guide\n\nThe quokka smiles.\n"),
            ("notes.txt", "A pangolin rolls into a ball.\n"),
        ],
    );
    let before = {
        let base = KnowledgeBase::new(Arc::new(SqliteStore::open(&path).unwrap()));
        base.index(&sources(dir.path())).await.unwrap();
        base_chunks(&base).await
    };
    // Another process: a new base on the same file.
    let base = KnowledgeBase::new(Arc::new(SqliteStore::open(&path).unwrap()));
    assert_eq!(
        best_source(&base, "pangolin").await.as_deref(),
        Some("notes.txt")
    );
    assert_eq!(base_chunks(&base).await, before);
    let status = base.status().await.unwrap();
    assert_eq!((status.documents, status.chunks), (2, 2));
    let report = base.index(&sources(dir.path())).await.unwrap();
    assert_eq!((report.unchanged, report.added, report.changed), (2, 0, 0));
}

#[test]
fn sqlite_store_refuses_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "this is not a database, just some text long enough to have a header",
    )
    .unwrap();
    let err = SqliteStore::open(&text).unwrap_err().to_string();
    assert!(err.contains("not a database"), "{err}");

    let other = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE t (x)").unwrap();
    drop(conn);
    let err = SqliteStore::open(&other).unwrap_err().to_string();
    assert!(err.contains("not a Toolbelt knowledge base"), "{err}");
    // And it was not written into.
    let conn = rusqlite::Connection::open(&other).unwrap();
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn gitignored_hidden_binary_and_oversized_files_are_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    // `ignore` reads .gitignore inside a git repository only.
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    write_files(
        dir.path(),
        &[
            (".gitignore", "build/\n"),
            ("build/out.md", "# Out\n\nignored walrus\n"),
            (".hidden/secret.md", "hidden walrus\n"),
            ("photo.png", "not indexed walrus"),
            ("kept.md", "# Kept\n\nThe walrus is kept.\n"),
        ],
    );
    std::fs::write(dir.path().join("blob.txt"), b"walrus\0\x01\x02").unwrap();
    let big = "walrus ".repeat((toolbelt_knowledge::MAX_FILE_BYTES as usize) / 7 + 10);
    std::fs::write(dir.path().join("big.txt"), big).unwrap();
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    let report: IndexReport = base.index(&sources(dir.path())).await.unwrap();
    assert_eq!(report.files, 1);
    assert_eq!((report.skipped_binary, report.skipped_large), (1, 1));
    let hits = base.search("walrus", 10, None).await.unwrap().hits;
    assert_eq!(hits.len(), 1);
    assert!(hits[0].chunk.source.ends_with("kept.md"));
}

#[tokio::test]
async fn globs_select_files_and_source_fields_reach_chunks() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("docs/a.md", "# A\n\nlemur\n"),
            ("docs/deep/b.md", "# B\n\nlemur\n"),
            ("docs/c.txt", "lemur\n"),
        ],
    );
    let glob = format!("{}/docs/**/*.md", dir.path().display());
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    let report = base
        .index(&[Source::new(glob).with_field("origin", "handbook")])
        .await
        .unwrap();
    assert_eq!(report.files, 2);
    let chunks = base_chunks(&base).await;
    assert!(chunks.iter().all(|c| c.source.ends_with(".md")));
    assert!(chunks.iter().all(|c| c.fields["origin"] == "handbook"));

    let missing = base
        .index(&[Source::new(dir.path().join("nope").to_string_lossy())])
        .await;
    let err = missing.unwrap_err().to_string();
    assert!(err.starts_with("source ") && err.contains("nope"), "{err}");
    let bad = base
        .index(&[Source::new(format!("{}/[z-a]*.md", dir.path().display()))])
        .await;
    assert!(bad.unwrap_err().to_string().contains("bad glob"));
}

#[tokio::test]
async fn changing_chunk_options_rechunks_every_file() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[("a.md", "# A\n\nokapi\n")]);
    let store: Arc<dyn ChunkStore> = Arc::new(MemoryStore::new());
    KnowledgeBase::new(store.clone())
        .index(&sources(dir.path()))
        .await
        .unwrap();
    let report = KnowledgeBase::new(store)
        .with_chunking(toolbelt_knowledge::ChunkOptions {
            max_chars: 500,
            overlap_chars: 0,
        })
        .index(&sources(dir.path()))
        .await
        .unwrap();
    assert_eq!(report.changed, 1);
}
