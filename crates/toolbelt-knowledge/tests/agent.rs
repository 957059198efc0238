//! The knowledge tools as framework tools of an agent run: offered through every tool
//! filter, and their names refused as an agent's own tools.

use std::sync::Arc;

use toolbelt_agent::{LlmAgent, RunOptions, Runner};
use toolbelt_core::ToolFilter;
use toolbelt_knowledge::{
    KnowledgeAgentExt, KnowledgeBase, KnowledgeToolOptions, MemoryStore, Source, knowledge_plugin,
    knowledge_search_tool,
};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{OpenAiConfig, OpenAiModel};

use crate::support::write_files;

async fn base() -> (tempfile::TempDir, Arc<KnowledgeBase>) {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[(
            "ops.md",
            "# Ops\n\n## Rollback\n\nRun `make rollback` to restore the previous release.\n",
        )],
    );
    let base = KnowledgeBase::new(Arc::new(MemoryStore::new()));
    base.index(&[Source::new(dir.path().to_string_lossy())])
        .await
        .unwrap();
    (dir, Arc::new(base))
}

fn model(server: &ScriptedServer) -> OpenAiModel {
    OpenAiModel::new(OpenAiConfig::new(server.base_url(), "scripted")).unwrap()
}

#[tokio::test]
async fn the_plugins_tools_survive_every_filter_and_answer_the_model() {
    let (_dir, base) = base().await;
    let server = ScriptedServer::start([
        Reply::tool_call(
            "k1",
            "knowledge_search",
            r#"{"query":"rollback a release"}"#,
        ),
        Reply::tool_call(
            "k2",
            "agentic_knowledge_search",
            r#"{"query":"rollback","filter":{"owner":"' OR 1=1 --"}}"#,
        ),
        Reply::text("run make rollback"),
    ])
    .await
    .unwrap();
    let agent = LlmAgent::builder("ops")
        .instruction("Answer from the knowledge base.")
        .model(model(&server))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent))
        .with_plugin(knowledge_plugin(base, KnowledgeToolOptions::default()).unwrap());
    let options = RunOptions::new().tool_filter(ToolFilter::include_names(["nothing"]));
    let events = runner
        .run("user", "s", "how do I roll back?", options)
        .collect_all()
        .await;
    let requests = server.requests();
    assert_eq!(
        requests[0].tool_names(),
        ["agentic_knowledge_search", "knowledge_search"]
    );
    let results: Vec<_> = events.iter().filter_map(|e| e.tool_result()).collect();
    assert_eq!(results.len(), 2, "{events:#?}");
    assert!(
        results[0].content.contains("ops.md:3-5 — Ops > Rollback"),
        "{}",
        results[0].content
    );
    assert!(
        results[1].content.contains("unknown field \"owner\""),
        "{}",
        results[1].content
    );
}

#[tokio::test]
async fn an_agents_own_tool_may_not_take_a_knowledge_tools_name() {
    let (_dir, base) = base().await;
    let server = ScriptedServer::start([]).await.unwrap();
    let tool = knowledge_search_tool(base, KnowledgeToolOptions::default()).unwrap();
    let built = LlmAgent::builder("ops")
        .model(model(&server))
        .tools([tool])
        .build();
    let Err(error) = built else {
        panic!("a reserved name is refused");
    };
    let error = error.to_string();
    assert!(error.contains("reserved for the framework"), "{error}");
}

#[tokio::test]
async fn the_builders_knowledge_reaches_that_agent_alone_through_its_filter() {
    let (_dir, base) = base().await;
    let server = ScriptedServer::start([
        Reply::tool_call("k1", "knowledge_search", r#"{"query":"rollback"}"#),
        Reply::tool_call("t1", "transfer_to_agent", r#"{"agent_name":"helper"}"#),
        Reply::text("the helper answers"),
    ])
    .await
    .unwrap();
    let helper = LlmAgent::builder("helper")
        .description("Helps")
        .model(model(&server))
        .build()
        .unwrap();
    let agent = LlmAgent::builder("ops")
        .model(model(&server))
        .tool_filter(ToolFilter::include_names(["nothing"]))
        .sub_agent(Arc::new(helper))
        .knowledge(base)
        .unwrap()
        .build()
        .unwrap();
    let events = Runner::new("app", Arc::new(agent))
        .run("user", "s", "how do I roll back?", RunOptions::new())
        .collect_all()
        .await;
    let requests = server.requests();
    assert_eq!(
        requests[0].tool_names(),
        [
            "agentic_knowledge_search",
            "knowledge_search",
            "transfer_to_agent"
        ]
    );
    let results: Vec<_> = events.iter().filter_map(|e| e.tool_result()).collect();
    assert!(
        results[0].content.contains("ops.md:3-5 — Ops > Rollback"),
        "{}",
        results[0].content
    );
    // The sub-agent was not given the base.
    let helper_tools = requests[2].tool_names();
    assert!(
        !helper_tools.iter().any(|t| t.contains("knowledge")),
        "{helper_tools:?}"
    );
}
