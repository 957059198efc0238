//! Query rewriting (feature `rewrite`): the tools' question rewritten by a model (the
//! scripted OpenAI-compatible server) before the base is searched, and the question searched
//! as asked, saying so, when the rewrite fails.

use std::sync::Arc;

use serde_json::json;
use toolbelt_core::{DynTool, Tool, ToolContext};
use toolbelt_knowledge::{
    KnowledgeBase, KnowledgeToolOptions, MAX_REWRITE_TOKENS, MemoryStore, ModelQueryRewriter,
    QueryRewrite, Source, knowledge_tools,
};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{OpenAiConfig, OpenAiModel, RetryPolicy};

use crate::support::write_files;

/// A question that shares no word with the runbook's rollback section.
const QUESTION: &str = "how do I undo a bad deploy?";

/// A base of two documents, with the scripted server's model as rewriter when given one.
async fn base(rewriter: Option<&ScriptedServer>) -> (tempfile::TempDir, Arc<KnowledgeBase>) {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            (
                "ops.md",
                "# Ops\n\n## Rollback\n\nRun `make rollback` to restore the previous release.\n",
            ),
            ("billing.md", "# Billing\n\nInvoices go out monthly.\n"),
        ],
    );
    let mut base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    if let Some(server) = rewriter {
        // No retries: a refused rewrite falls back at once.
        let config =
            OpenAiConfig::new(server.base_url(), "scripted").with_retry(RetryPolicy::none());
        let model = OpenAiModel::new(config).unwrap();
        base = base.with_query_rewriter(Arc::new(ModelQueryRewriter::new(Arc::new(model))));
    }
    base.index(&[Source::new(dir.path().to_string_lossy())])
        .await
        .unwrap();
    (dir, Arc::new(base))
}

fn tools(base: Arc<KnowledgeBase>) -> Vec<DynTool> {
    knowledge_tools(base, KnowledgeToolOptions::default()).unwrap()
}

async fn call(tool: &DynTool, args: serde_json::Value) -> String {
    tool.call(ToolContext::for_call("c1"), &args.to_string())
        .await
        .unwrap()
        .llm_text()
}

#[tokio::test]
async fn the_rewritten_query_is_what_is_searched() {
    // As asked, the question finds nothing: no word of it is in the base.
    let (_dir, plain) = base(None).await;
    let text = call(&tools(plain)[0], json!({"query": QUESTION})).await;
    assert!(text.contains("No passage matched."), "{text}");
    assert!(!text.contains("Searched for"), "{text}");

    let server = ScriptedServer::start([Reply::text("\"rollback previous release\"\n")])
        .await
        .unwrap();
    let (_dir, base) = base(Some(&server)).await;
    let text = call(&tools(base)[0], json!({"query": QUESTION})).await;
    assert!(
        text.contains(
            "Searched for: \"rollback previous release\" (the question rewritten by the model)."
        ),
        "{text}"
    );
    let first = text.lines().find(|l| l.starts_with("[1] ")).unwrap();
    assert!(first.ends_with("ops.md:3-5 — Ops > Rollback"), "{text}");

    // One bounded request: the instruction, the question, a capped answer.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert_eq!(body["max_tokens"], json!(MAX_REWRITE_TOKENS), "{body}");
    assert_eq!(body["stream"], json!(false), "{body}");
    let messages = requests[0].messages();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["content"], QUESTION);
    assert!(requests[0].tool_names().is_empty());
}

#[tokio::test]
async fn a_failed_rewrite_searches_the_question_as_asked_and_says_why() {
    let server = ScriptedServer::start([
        Reply::status(400, "model not loaded"),
        Reply::text("   \n\n"),
        Reply::text("rollback ".repeat(60)),
    ])
    .await
    .unwrap();
    let (_dir, base) = base(Some(&server)).await;
    let tools = tools(base);
    let refused = call(&tools[0], json!({"query": "rollback"})).await;
    let empty = call(&tools[1], json!({"query": "rollback"})).await;
    let rambling = call(&tools[0], json!({"query": "rollback"})).await;
    for (text, reason) in [
        (&refused, "the model failed: "),
        (&empty, "the rewrite is empty"),
        (
            &rambling,
            "the rewrite is 539 characters long, more than 300",
        ),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with("Query rewriting failed ("))
            .unwrap_or_else(|| panic!("no fallback line in {text}"));
        assert!(line.contains(reason), "{reason}: {line}");
        assert!(
            line.ends_with("); searched for the question as asked."),
            "{line}"
        );
        // The question itself was searched, and found its passage.
        assert!(text.contains("ops.md:3-5 — Ops > Rollback"), "{text}");
    }
    assert!(refused.contains("model not loaded"), "{refused}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn without_a_rewriter_the_question_is_searched_as_asked() {
    let (_dir, base) = base(None).await;
    assert_eq!(base.rewrite_query(QUESTION).await, QueryRewrite::AsAsked);
    assert_eq!(QueryRewrite::AsAsked.query(QUESTION), QUESTION);
}
