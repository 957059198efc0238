//! The two tools: citations, the size budget, the mode line, and filter errors the model sees.

use std::sync::Arc;

use serde_json::json;
use toolbelt_core::{Tool, ToolContext, ToolError};
use toolbelt_knowledge::{
    AGENTIC_KNOWLEDGE_SEARCH, FieldSpec, FieldType, KNOWLEDGE_SEARCH, KnowledgeBase,
    KnowledgeToolOptions, MemoryStore, Source, knowledge_tools,
};

use crate::support::write_files;

async fn tools(options: KnowledgeToolOptions) -> (tempfile::TempDir, Vec<toolbelt_core::DynTool>) {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            (
                "runbook.md",
                "---\nteam: sre\n---\n# Runbook\n\n## Paging\n\nWhen paged, acknowledge within five minutes.\n\n## Escalation\n\nEscalate a page to the duty manager after thirty minutes.\n",
            ),
            (
                "notes.txt",
                "Paging etiquette: never page twice for one alert.\n",
            ),
        ],
    );
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new())).with_field(FieldSpec::new(
        "team",
        FieldType::String,
        "owning team",
    ));
    base.index(&[Source::new(dir.path().to_string_lossy())])
        .await
        .unwrap();
    let tools = knowledge_tools(Arc::new(base), options).unwrap();
    (dir, tools)
}

async fn call(tool: &toolbelt_core::DynTool, args: serde_json::Value) -> Result<String, ToolError> {
    tool.call(ToolContext::for_call("c1"), &args.to_string())
        .await
        .map(|out| out.llm_text())
}

#[tokio::test]
async fn knowledge_search_answers_with_citations_and_says_how_it_ranked() {
    let (_dir, tools) = tools(KnowledgeToolOptions::default()).await;
    assert_eq!(tools[0].name(), KNOWLEDGE_SEARCH);
    assert_eq!(tools[1].name(), AGENTIC_KNOWLEDGE_SEARCH);
    assert!(tools[0].declaration().description.contains("BM25"));
    let text = call(&tools[0], json!({"query": "who do I escalate a page to?"}))
        .await
        .unwrap();
    assert!(
        text.starts_with("Ranking: keyword search (BM25) only"),
        "{text}"
    );
    let first = text.lines().find(|l| l.starts_with("[1] ")).unwrap();
    assert!(
        first.ends_with("runbook.md:10-12 — Runbook > Escalation"),
        "{first}"
    );
    assert!(text.contains("duty manager"));
}

#[tokio::test]
async fn answers_stay_within_the_size_budget() {
    let options = KnowledgeToolOptions {
        max_chars: 220,
        ..KnowledgeToolOptions::default()
    };
    let (_dir, tools) = tools(options).await;
    let text = call(&tools[0], json!({"query": "page paging paged", "k": 10}))
        .await
        .unwrap();
    assert!(
        text.chars().count() <= 220 + 80,
        "{} chars: {text}",
        text.chars().count()
    );
    assert!(
        text.contains("left out to stay within the size budget"),
        "{text}"
    );

    let tiny = KnowledgeToolOptions {
        max_chars: 120,
        ..KnowledgeToolOptions::default()
    };
    let (_dir, tools) = self::tools(tiny).await;
    let text = call(&tools[0], json!({"query": "escalate duty manager"}))
        .await
        .unwrap();
    assert!(
        text.contains("[… passage cut to the size budget]"),
        "{text}"
    );
}

#[tokio::test]
async fn the_agentic_tool_filters_and_reports_bad_filters_to_the_model() {
    let (_dir, tools) = tools(KnowledgeToolOptions::default()).await;
    let agentic = &tools[1];
    let description = &agentic.declaration().description;
    assert!(
        description.contains("- team (String): owning team"),
        "{description}"
    );
    assert!(description.contains("$prefix"));

    let text = call(
        agentic,
        json!({"query": "page", "filter": {"kind": "text"}}),
    )
    .await
    .unwrap();
    assert!(
        text.contains("notes.txt:1") && !text.contains("runbook.md"),
        "{text}"
    );
    let text = call(agentic, json!({"query": "page", "filter": {"team": "sre"}}))
        .await
        .unwrap();
    assert!(
        !text.contains("notes.txt") && text.contains("runbook.md"),
        "{text}"
    );

    let err = call(
        agentic,
        json!({"query": "page", "filter": {"owner": "sre"}}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
    assert!(err.to_string().contains("unknown field \"owner\""), "{err}");
    let err = call(
        agentic,
        json!({"query": "page", "filter": "team = 'sre' OR 1=1"}),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("JSON object"), "{err}");

    let err = call(&tools[0], json!({"query": "   "})).await.unwrap_err();
    assert!(err.to_string().contains("query is empty"), "{err}");
    let err = call(&tools[0], json!({"query": "x".repeat(3000)}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("longer than 2000"), "{err}");
}
