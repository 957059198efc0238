//! Hybrid retrieval: embeddings fused with BM25, vectors cached by text, and BM25 alone said
//! so when there is no embedder.

use std::sync::Arc;

use toolbelt_knowledge::{KnowledgeBase, MemoryStore, RetrievalMode, Source, SqliteStore};
use toolbelt_search::embed::{MemoryVectorStore, SqliteVectorStore};

use crate::support::{SynonymEmbedder, write_files};

fn corpus(dir: &std::path::Path) {
    write_files(
        dir,
        &[
            (
                "garage.md",
                "# Garage\n\nPark the automobile inside overnight.\n",
            ),
            ("kitchen.md", "# Kitchen\n\nClean the oven every week.\n"),
            (
                "release.md",
                "# Releases\n\nTo revert a release, run the undo script.\n",
            ),
        ],
    );
}

#[tokio::test]
async fn embeddings_find_what_shares_no_word_with_the_query() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let bm25 = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    bm25.index(&[Source::new(dir.path().to_string_lossy())])
        .await
        .unwrap();
    let plain = bm25
        .search("where do I leave my car", 3, None)
        .await
        .unwrap();
    assert_eq!(plain.mode, RetrievalMode::Bm25Only);
    assert!(
        plain.hits.is_empty(),
        "BM25 shares no word: {:?}",
        plain.hits
    );

    let embedder = SynonymEmbedder::new();
    let hybrid = KnowledgeBase::new(Arc::new(MemoryStore::new()))
        .with_embedder(embedder.clone(), Arc::new(MemoryVectorStore::new()));
    let report = hybrid
        .index(&[Source::new(dir.path().to_string_lossy())])
        .await
        .unwrap();
    assert_eq!(report.embedded, 3);
    let results = hybrid
        .search("where do I leave my car", 3, None)
        .await
        .unwrap();
    assert_eq!(results.mode, RetrievalMode::Hybrid);
    assert!(results.hits[0].chunk.source.ends_with("garage.md"));
    // Both rankings agree on a query that shares words: the keyword hit stays first.
    let results = hybrid.search("clean oven", 3, None).await.unwrap();
    assert!(results.hits[0].chunk.source.ends_with("kitchen.md"));
}

#[tokio::test]
async fn vectors_are_cached_by_text_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let sources = [Source::new(dir.path().to_string_lossy())];
    let open = |embedder: Arc<SynonymEmbedder>| {
        KnowledgeBase::new(Arc::new(
            SqliteStore::open(db.path().join("kb.db")).unwrap(),
        ))
        .with_embedder(
            embedder,
            Arc::new(SqliteVectorStore::open(db.path().join("vectors.db")).unwrap()),
        )
    };
    let first = SynonymEmbedder::new();
    open(first.clone()).index(&sources).await.unwrap();
    assert_eq!(first.texts(), 3);

    // A new process: loading the base reuses every cached vector.
    let second = SynonymEmbedder::new();
    let base = open(second.clone());
    let hits = base.search("revert", 1, None).await.unwrap().hits;
    assert!(hits[0].chunk.source.ends_with("release.md"));
    assert_eq!(second.texts(), 1, "only the query is embedded");

    // One file changes: only its chunk is embedded.
    write_files(
        dir.path(),
        &[("kitchen.md", "# Kitchen\n\nClean the oven every day.\n")],
    );
    let report = base.index(&sources).await.unwrap();
    assert_eq!((report.changed, report.embedded), (1, 1));
}
