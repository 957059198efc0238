//! A graph offered to an LLM agent as an `AgentTool`: the agent calls it, the graph runs
//! its own model ⇄ tools loop on its own scripted server, and its answer is the tool result.

use std::sync::Arc;

use toolbelt_agent::{AgentTool, LlmAgent, RunOptions, Runner};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_graph::ToolsNode;
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::graph_support::{NoArgs, agent_loop, answer, assert_no_errors, model, results};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_calls_a_graph_as_a_tool_and_gets_its_answer() {
    let graph_server = ScriptedServer::start([
        Reply::tool_call("g1", "lookup", "{}"),
        Reply::text("the graph found 42"),
    ])
    .await
    .unwrap();
    let lookup = FunctionTool::new(
        "lookup",
        "Looks it up",
        |_ctx: ToolContext, _: NoArgs| async { Ok::<_, ToolError>("42") },
    )
    .unwrap();
    let tools = ToolsNode::builder().tool(lookup).build().unwrap();
    let graph = agent_loop("research", &graph_server, tools);

    let outer_server = ScriptedServer::start([
        Reply::tool_call("c1", "research", r#"{"request":"what is the answer?"}"#),
        Reply::text("research says 42"),
    ])
    .await
    .unwrap();
    let coordinator = LlmAgent::builder("coordinator")
        .instruction("Delegate.")
        .model(model(&outer_server))
        .tool(AgentTool::new(Arc::new(graph)).unwrap())
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(coordinator));
    let events = runner
        .run("u1", "s1", "ask research", RunOptions::new())
        .collect_all()
        .await;
    assert_no_errors(&events);
    assert_eq!(answer(&events), "research says 42");

    let outer = outer_server.requests();
    assert_eq!(
        outer[0].tool_names(),
        ["research"],
        "the graph is declared as a tool"
    );
    let tool_message = outer[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("the graph's result went back to the coordinator");
    assert_eq!(tool_message["tool_call_id"], "c1");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap_or_default()
            .contains("the graph found 42"),
        "{tool_message}"
    );

    let inner = graph_server.requests();
    assert_eq!(inner.len(), 2, "the graph ran its own loop");
    let user: Vec<&str> = inner[0]
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        user,
        ["what is the answer?"],
        "the request is the graph's input"
    );
    let research = results(&events);
    assert!(
        research.iter().any(|r| r.call_id == "c1" && !r.is_error),
        "{research:?}"
    );
}
