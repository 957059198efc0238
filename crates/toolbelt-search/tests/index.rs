//! ToolIndex (incremental sync, methods) and reciprocal rank fusion.

use serde_json::json;
use toolbelt_search::{
    Hit, Method, SearchError, SyncStats, ToolDoc, ToolIndex, reciprocal_rank_fusion,
};

fn hits(names: &[&str]) -> Vec<Hit> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| Hit {
            name: (*n).into(),
            score: 100.0 - i as f32,
        })
        .collect()
}

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn rrf_scores_are_sums_of_reciprocal_ranks() {
    let fused = reciprocal_rank_fusion(&[hits(&["a", "b", "c"]), hits(&["c", "a", "d"])], 60);
    // a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63
    assert_eq!(names(&fused), ["a", "c", "b", "d"]);
    let want = [
        1.0 / 61.0 + 1.0 / 62.0,
        1.0 / 63.0 + 1.0 / 61.0,
        1.0 / 62.0,
        1.0 / 63.0,
    ];
    for (hit, want) in fused.iter().zip(want) {
        assert!(
            (f64::from(hit.score) - want).abs() < 1e-6,
            "{hit:?} vs {want}"
        );
    }
}

#[test]
fn rrf_prefers_agreement_and_k_controls_how_much() {
    // "x" is first in one list only; "y" is second in both.
    let lists = [hits(&["x", "y"]), hits(&["z", "y"])];
    assert_eq!(reciprocal_rank_fusion(&lists, 60)[0].name, "y");
    // With k = 0 one first place (1/1) is worth as much as two second places (1/2 + 1/2):
    // x and y tie and go by name, z (1/1 too) follows.
    assert_eq!(names(&reciprocal_rank_fusion(&lists, 0)), ["x", "y", "z"]);
}

#[test]
fn rrf_handles_empty_lists_and_repeats() {
    assert!(reciprocal_rank_fusion(&[], 60).is_empty());
    assert!(reciprocal_rank_fusion(&[vec![], vec![]], 60).is_empty());
    // A name repeated within one list counts once, at its best rank.
    let fused = reciprocal_rank_fusion(&[hits(&["a", "a", "b"])], 60);
    assert_eq!(names(&fused), ["a", "b"]);
    assert!((f64::from(fused[1].score) - 1.0 / 63.0).abs() < 1e-6);
}

fn doc(name: &str, description: &str) -> ToolDoc {
    ToolDoc::new(name, description, json!({"type": "object"}))
}

#[tokio::test]
async fn sync_adds_changes_and_removes_incrementally() {
    let mut index = ToolIndex::new();
    let first = [
        doc("send_email", "Send an email"),
        doc("read_file", "Read a file"),
    ];
    let stats = index.sync(&first).await.unwrap();
    assert_eq!(
        stats,
        SyncStats {
            added: 2,
            ..SyncStats::default()
        }
    );
    assert_eq!(
        index.sync(&first).await.unwrap(),
        SyncStats::default(),
        "nothing changed"
    );

    // list_changed: read_file's description changed, send_email left, a new tool came.
    let second = [
        doc("read_file", "Open a document"),
        doc("post_message", "Post a chat message"),
    ];
    let stats = index.sync(&second).await.unwrap();
    assert_eq!((stats.added, stats.changed, stats.removed), (1, 1, 1));
    assert_eq!(index.len(), 2);

    let top = |hits: Vec<Hit>| hits.first().map(|h| h.name.clone());
    // send_email is gone; "email" now only reaches the chat tool through its synonym
    // "message".
    let names_for = |hits: Vec<Hit>| hits.into_iter().map(|h| h.name).collect::<Vec<_>>();
    assert_eq!(
        names_for(index.search("email", 5, Method::Bm25).await.unwrap()),
        ["post_message"]
    );
    assert_eq!(
        top(index.search("send", 5, Method::Bm25).await.unwrap()),
        None
    );
    assert_eq!(
        top(index
            .search("open the document", 5, Method::Bm25)
            .await
            .unwrap()),
        Some("read_file".into())
    );
    assert_eq!(
        top(index.search("chat message", 5, Method::Bm25).await.unwrap()),
        Some("post_message".into())
    );
}

#[tokio::test]
async fn duplicate_names_are_refused_and_change_nothing() {
    let mut index = ToolIndex::new();
    index.sync(&[doc("a", "alpha")]).await.unwrap();
    let err = index
        .sync(&[doc("b", "beta"), doc("b", "again")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("duplicate name \"b\""), "{err}");
    assert_eq!(index.len(), 1);
    assert_eq!(
        index.search("alpha", 1, Method::Bm25).await.unwrap()[0].name,
        "a"
    );
}

#[tokio::test]
async fn embedding_methods_without_an_embedder_are_a_clear_error() {
    let mut index = ToolIndex::new();
    index.sync(&[doc("a", "alpha")]).await.unwrap();
    for method in [Method::Embed, Method::Hybrid] {
        match index.search("alpha", 1, method).await {
            Err(SearchError::Embedder(m)) => assert_eq!(m, "no embedder configured"),
            other => panic!("{method}: {other:?}"),
        }
    }
    assert_eq!("hybrid".parse::<Method>().unwrap(), Method::Hybrid);
    assert!("llm".parse::<Method>().is_err());
}
