//! Metadata filters: checked against the declared fields, evaluated on chunk metadata, and
//! hostile values treated as data.

use std::sync::Arc;

use serde_json::{Value, json};
use toolbelt_knowledge::{
    FieldSpec, FieldType, KnowledgeBase, KnowledgeError, MemoryStore, Source,
};

use crate::support::write_files;

async fn base() -> (tempfile::TempDir, KnowledgeBase) {
    base_on(Arc::new(MemoryStore::new())).await
}

/// The filter corpus indexed into `store`.
pub async fn base_on(
    store: Arc<dyn toolbelt_knowledge::ChunkStore>,
) -> (tempfile::TempDir, KnowledgeBase) {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            (
                "docs/billing.md",
                "---\nteam: payments\nyear: 2024\ntags: [invoice, money]\n---\n# Billing\n\nInvoices are sent monthly.\n",
            ),
            (
                "docs/deploy.md",
                "---\nteam: platform\nyear: 2022\n---\n# Deploy\n\nInvoices of the cloud provider arrive monthly too.\n",
            ),
            (
                "src/invoice.rs",
                "pub fn send_invoice() {\n    // monthly invoices\n}\n",
            ),
        ],
    );
    let base = KnowledgeBase::new(store)
        .with_field(FieldSpec::new("team", FieldType::String, "owning team"))
        .with_field(FieldSpec::new("year", FieldType::Number, "year written"))
        .with_field(FieldSpec::new("tags", FieldType::StringList, "topics"));
    base.index(&[Source::new(dir.path().to_string_lossy())])
        .await
        .unwrap();
    (dir, base)
}

async fn sources(base: &KnowledgeBase, filter: Value) -> Vec<String> {
    let filter = base.parse_filter(&filter).unwrap();
    let mut out: Vec<String> = base
        .search("monthly invoices", 10, Some(&filter))
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| {
            let s = h.chunk.source;
            s[s.rfind("/docs/").or(s.rfind("/src/")).unwrap() + 1..].to_owned()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn filters_select_by_builtin_and_user_fields() {
    let (_dir, base) = base().await;
    assert_eq!(
        sources(&base, json!({"team": "payments"})).await,
        ["docs/billing.md"]
    );
    assert_eq!(
        sources(&base, json!({"kind": "code"})).await,
        ["src/invoice.rs"]
    );
    assert_eq!(
        sources(&base, json!({"year": {"$gte": 2023}})).await,
        ["docs/billing.md"]
    );
    assert_eq!(
        sources(&base, json!({"tags": {"$contains": "money"}})).await,
        ["docs/billing.md"]
    );
    assert_eq!(
        sources(
            &base,
            json!({"$or": [{"team": "platform"}, {"kind": "code"}]})
        )
        .await,
        ["docs/deploy.md", "src/invoice.rs"]
    );
    assert_eq!(
        sources(&base, json!({"$not": {"kind": "markdown"}})).await,
        ["src/invoice.rs"]
    );
    assert_eq!(
        sources(
            &base,
            json!({"heading": "Deploy", "team": {"$in": ["platform", "x"]}})
        )
        .await,
        ["docs/deploy.md"]
    );
    assert_eq!(
        sources(
            &base,
            json!({"source": {"$contains": "/docs/"}, "year": {"$lt": 2023}})
        )
        .await,
        ["docs/deploy.md"]
    );
}

#[tokio::test]
async fn injection_shaped_values_are_plain_data() {
    injection_shaped_values_are_plain_data_on(Arc::new(MemoryStore::new())).await;
}

/// Hostile filter values and queries on a base over `store`: data, never query text.
pub async fn injection_shaped_values_are_plain_data_on(
    store: Arc<dyn toolbelt_knowledge::ChunkStore>,
) {
    let (_dir, base) = base_on(store).await;
    for hostile in [
        "' OR 1=1 --",
        "payments' OR team LIKE '%",
        "\"; DROP TABLE chunks; --",
        "$where: function() { return true }",
        "../../etc/passwd",
    ] {
        assert!(
            sources(&base, json!({"team": hostile})).await.is_empty(),
            "{hostile}"
        );
        // As a query, the same text is words to rank, never an error.
        base.search(hostile, 5, None).await.unwrap();
    }
    // Operators smuggled in as values stay values.
    assert!(
        sources(&base, json!({"team": {"$eq": "{\"$ne\": null}"}}))
            .await
            .is_empty()
    );
}

fn filter_error(base: &KnowledgeBase, filter: Value) -> String {
    match base.parse_filter(&filter) {
        Err(KnowledgeError::Filter(message)) => message,
        other => panic!("{filter} was accepted: {other:?}"),
    }
}

#[tokio::test]
async fn malformed_filters_are_errors_that_name_what_is_allowed() {
    let (_dir, base) = base().await;
    let e = filter_error(&base, json!({"owner": "x"}));
    assert!(
        e.contains("unknown field \"owner\"") && e.contains("team"),
        "{e}"
    );
    let e = filter_error(&base, json!({"team": {"$regex": ".*"}}));
    assert!(
        e.contains("unknown operator \"$regex\"") && e.contains("$prefix"),
        "{e}"
    );
    let e = filter_error(&base, json!({"year": {"$prefix": "20"}}));
    assert!(e.contains("$prefix does not apply to year"), "{e}");
    let e = filter_error(&base, json!({"year": "2024"}));
    assert!(e.contains("year is a number; got a string"), "{e}");
    let e = filter_error(&base, json!({"team": {"$in": "payments"}}));
    assert!(e.contains("takes a list"), "{e}");
    let e = filter_error(&base, json!({"$where": "1"}));
    assert!(e.contains("unknown combinator"), "{e}");
    let e = filter_error(&base, json!(["team", "payments"]));
    assert!(e.contains("JSON object"), "{e}");
    let e = filter_error(&base, json!({}));
    assert!(e.contains("empty"), "{e}");
    let e = filter_error(&base, json!({"team": "x".repeat(600)}));
    assert!(e.contains("longer than 512"), "{e}");
    // Depth and size bounds.
    let mut deep = json!({"team": "x"});
    for _ in 0..20 {
        deep = json!({"$not": deep});
    }
    assert!(filter_error(&base, deep).contains("deeper than 8"));
    let many: Vec<Value> = (0..65).map(|i| json!({"year": i})).collect();
    assert!(filter_error(&base, json!({"$or": many})).contains("1 to 64"));
    let wide: Vec<Value> = (0..40)
        .map(|i| json!({"year": {"$gt": i, "$lt": i + 5}}))
        .collect();
    assert!(filter_error(&base, json!({"$and": wide})).contains("more than 64 conditions"));
    // A long field name is cut in the error.
    let e = filter_error(&base, json!({"y".repeat(5000): 1}));
    assert!(e.len() < 400, "{} bytes", e.len());
}
