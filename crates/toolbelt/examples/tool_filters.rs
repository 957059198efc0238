//! The spec's tool examples, in one run: a tool that reads its `tool_call_id`, a filter on
//! the agent (what it may ever see), a filter per run (what this request may use), and a
//! filter that reads the agent's name from the invocation, as the spec's per-agent example.
//!
//! The model is a scripted OpenAI-compatible server on 127.0.0.1, so the example runs
//! offline; each request's offered tools are printed from what the server received.
//!
//! Run: `cargo run -p toolbelt --example tool_filters --features agent`

use std::error::Error;
use std::sync::Arc;

use toolbelt::agent::{EventKind, Invocation, LlmAgent, RunOptions, Runner};
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{OpenAiConfig, OpenAiModel};
use toolbelt::{FunctionTool, ToolContext, ToolError, ToolFilter};

/// Arguments of `note`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Note {
    /// What to write down.
    text: String,
}

/// Writes a note and says which call wrote it: the id ties a result to the model's call.
async fn note(ctx: ToolContext, note: Note) -> Result<String, ToolError> {
    let call = ctx.call_id().unwrap_or("(no id)");
    Ok(format!("noted {:?} (call {call})", note.text))
}

async fn nothing(_ctx: ToolContext, _note: Note) -> Result<String, ToolError> {
    Ok("done".into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = ScriptedServer::start([
        Reply::tool_call("call_42", "note", r#"{"text":"buy milk"}"#),
        Reply::text("Noted."),
        Reply::text("Only search was offered."),
        Reply::text("I can only read."),
    ])
    .await?;

    // Agents named `reader` never see tools that change anything: the filter reads the
    // agent's name from the invocation in the tool context.
    let per_agent_name = ToolFilter::new(|ctx, tool| {
        let reader = Invocation::from_context(ctx).is_some_and(|inv| inv.agent_name() == "reader");
        !(reader && tool.name() == "delete")
    });
    // Two agents with the same tools and the same filter: `delete` only for agents not
    // named reader.
    let build = |name: &str| -> Result<LlmAgent, Box<dyn Error>> {
        Ok(LlmAgent::builder(name)
            .model(OpenAiModel::new(OpenAiConfig::new(
                server.base_url(),
                "scripted",
            ))?)
            .tool(FunctionTool::new("note", "Writes a note", note)?)
            .tool(FunctionTool::new("search", "Searches the notes", nothing)?)
            .tool(FunctionTool::new("delete", "Deletes a note", nothing)?)
            .tool_filter(per_agent_name.clone())
            .build()?)
    };
    let runner = Runner::new("filters", Arc::new(build("assistant")?));

    // Run 1: every tool the agent allows; the model calls `note` with id call_42.
    for event in runner
        .run("me", "s", "Remember to buy milk", RunOptions::new())
        .collect_all()
        .await
    {
        if let EventKind::ToolResult { result } = &event.kind {
            println!(
                "{} answered {}: {}",
                result.name, result.call_id, result.content
            );
        }
    }
    // Run 2: this request may only search (a per-run filter narrows the agent's).
    let only_search = RunOptions::new().tool_filter(ToolFilter::include_names(["search"]));
    runner
        .run("me", "s", "Find my notes", only_search)
        .collect_all()
        .await;

    // Run 3: the agent named reader.
    Runner::new("filters", Arc::new(build("reader")?))
        .run("me", "s2", "What can you do?", RunOptions::new())
        .collect_all()
        .await;

    for (run, request) in [(1, 0), (2, 2), (3, 3)] {
        let mut offered = server.requests()[request].tool_names();
        offered.sort();
        println!("run {run} offered: {}", offered.join(", "));
    }
    Ok(())
}
