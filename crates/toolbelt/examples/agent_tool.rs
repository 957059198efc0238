//! Agents as tools: a coordinator that hands maths to a math agent and file questions to a
//! files agent, each offered to it as an [`AgentTool`].
//!
//! The three agents talk to scripted OpenAI-compatible servers on 127.0.0.1, so the example
//! runs offline; point `OpenAiConfig` at a real endpoint to use a real model.
//!
//! Run: `cargo run -p toolbelt --example agent_tool`

use std::error::Error;
use std::sync::Arc;

use futures::StreamExt;
use toolbelt::agent::{AgentTool, EventKind, InnerTextMode, LlmAgent, RunOptions, Runner};
use toolbelt::builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{GenerationConfig, OpenAiConfig, OpenAiModel};
use toolbelt::{DynToolSet, FunctionTool, ToolContext, ToolError};

/// Arguments of `multiply`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Factors {
    /// The first factor.
    a: f64,
    /// The second factor.
    b: f64,
}

async fn multiply(_ctx: ToolContext, f: Factors) -> Result<f64, ToolError> {
    Ok(f.a * f.b)
}

/// A streaming model served by `server`.
fn model(server: &ScriptedServer) -> Result<OpenAiModel, Box<dyn Error>> {
    Ok(OpenAiModel::new(OpenAiConfig::new(
        server.base_url(),
        "scripted",
    ))?)
}

fn streaming() -> GenerationConfig {
    GenerationConfig {
        stream: true,
        ..GenerationConfig::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("notes.txt"),
        "Budget: 25 crates of 4 apples each.\n",
    )?;

    // What each model will answer, in order.
    let math_server = ScriptedServer::start([
        Reply::tool_call("m1", "multiply", r#"{"a":25,"b":4}"#),
        Reply::text("25 × 4 = 100"),
    ])
    .await?;
    let files_server = ScriptedServer::start([
        Reply::tool_call("f1", "Read", r#"{"file_path":"notes.txt"}"#),
        Reply::text("notes.txt: 25 crates of 4 apples each."),
    ])
    .await?;
    let coordinator_server = ScriptedServer::start([
        Reply::tool_call(
            "c1",
            "files_agent",
            r#"{"request":"What does notes.txt say?"}"#,
        ),
        Reply::tool_call("c2", "math_agent", r#"{"request":"What is 25 times 4?"}"#),
        Reply::text("You have 100 apples."),
    ])
    .await?;

    // 1) Reusable specialists.
    let math = LlmAgent::builder("math_agent")
        .description("Solves arithmetic problems.")
        .instruction("You are a maths expert. Use multiply for products.")
        .model(model(&math_server)?)
        .generation_config(streaming())
        .tool(FunctionTool::new(
            "multiply",
            "Multiplies two numbers",
            multiply,
        )?)
        .build()?;
    let files = LlmAgent::builder("files_agent")
        .description("Answers questions about the files in the project directory.")
        .instruction("You read files to answer questions about them.")
        .model(model(&files_server)?)
        .generation_config(streaming())
        .tool_set(Arc::new(BuiltinToolSet::new(BuiltinOptions::new(dir.path()))?) as DynToolSet)
        .build()?;

    // 2) Wrapped as tools: the math agent's progress is shown without its text (the
    //    coordinator sums up anyway); the files agent's answer streams through.
    let math_tool = AgentTool::new(Arc::new(math))?
        .skip_summarization(false)
        .stream_inner(true)
        .inner_text_mode(InnerTextMode::Exclude);
    let files_tool = AgentTool::new(Arc::new(files))?.stream_inner(true);

    // 3) The coordinator uses them like any tool.
    let coordinator = LlmAgent::builder("coordinator")
        .instruction("Delegate maths to math_agent and file questions to files_agent.")
        .model(model(&coordinator_server)?)
        .generation_config(streaming())
        .tool(math_tool)
        .tool(files_tool)
        .build()?;
    let runner = Runner::new("agent-tool-example", Arc::new(coordinator));

    let mut events = runner.run(
        "user",
        "session",
        "How many apples do I have?",
        RunOptions::new(),
    );
    while let Some(event) = events.next().await {
        // Events forwarded from a child carry the id of the call that runs it.
        let from = match &event.tool_call_id {
            Some(call) => format!("  [{} via {call}]", event.author),
            None => format!("[{}]", event.author),
        };
        match &event.kind {
            // A chat UI would print `ModelDelta`s as they stream (the child's too, under its
            // call); the complete responses below repeat them, one line each.
            EventKind::ModelResponse { message, .. } => {
                for call in &message.tool_calls {
                    println!("{from} calls {}({})", call.name, call.arguments);
                }
                if !message.content.is_empty() {
                    println!("{from} says: {}", message.content);
                }
            }
            EventKind::ToolResult { result } => {
                println!("{from} {} returned: {}", result.name, result.content.trim())
            }
            EventKind::Error { kind, message } => println!("{from} error ({kind:?}): {message}"),
            EventKind::RunCompleted => break,
            _ => {}
        }
    }
    Ok(())
}
