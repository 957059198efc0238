//! The agent loop as a graph: a model node ⇄ a tools node, with `tools_condition` routing
//! to the tools while the model calls them and to END when it answers.
//!
//! Runs offline against the scripted OpenAI-compatible server:
//! `cargo run -p toolbelt-graph --example graph_agent_loop`.

use std::sync::Arc;

use toolbelt_agent::{EventKind, RunOptions, Runner};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_graph::{END, ModelNode, START, StateGraph, ToolsNode, state, tools_condition};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{Message, OpenAiConfig, OpenAiModel};

state! {
    /// The conversation.
    struct Chat => ChatUpdate {
        messages: Vec<Message> => Messages,
    }
}

/// Arguments of `multiply`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Factors {
    /// The first factor.
    a: f64,
    /// The second factor.
    b: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The model's script: call multiply, then answer with its result.
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "multiply", r#"{"a": 6, "b": 7}"#),
        Reply::text("6 × 7 = 42"),
    ])
    .await?;
    let model = OpenAiModel::new(OpenAiConfig::new(server.base_url(), "scripted"))?;

    let multiply = FunctionTool::new(
        "multiply",
        "Multiplies two numbers",
        |_ctx: ToolContext, f: Factors| async move { Ok::<_, ToolError>(f.a * f.b) },
    )?;
    let tools = ToolsNode::builder().tool(multiply).parallel(true).build()?;
    let model = ModelNode::new(model)
        .instruction("You are a calculator.")
        .tools_from(&tools);
    let graph = StateGraph::<Chat>::new("calculator")
        .node("model", model)
        .node("tools", tools)
        .edge(START, "model")
        .conditional_edge("model", ["tools", END], tools_condition("tools"))
        .edge("tools", "model")
        .build()?;
    println!("{}", graph.mermaid());

    let runner = Runner::new("example", Arc::new(graph));
    let events = runner
        .run("user", "session", "What is 6 times 7?", RunOptions::new())
        .collect_all()
        .await;
    for event in &events {
        match &event.kind {
            EventKind::NodeEnded { node, step, .. } => println!("step {step}: {node} ended"),
            EventKind::ToolResult { result } => println!("  {} -> {}", result.name, result.content),
            EventKind::ModelResponse { message, .. } if !message.content.is_empty() => {
                println!("answer: {}", message.content);
            }
            EventKind::Error { message, .. } => return Err(message.clone().into()),
            _ => {}
        }
    }
    Ok(())
}
