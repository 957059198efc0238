//! The execution filter: some calls are not run by the agent but handed back to the caller
//! (a client that runs `ask_user` itself, here by answering for the user), and the run is
//! resumed with the caller's results as `tool` messages.
//!
//! The model is a scripted OpenAI-compatible server on 127.0.0.1, so the example runs
//! offline.
//!
//! Run: `cargo run -p toolbelt --example hand_back_calls --features agent`

use std::error::Error;
use std::sync::Arc;

use toolbelt::agent::{EventKind, LlmAgent, RunInput, RunOptions, Runner};
use toolbelt::exec::ExecutionFilter;
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{Message, OpenAiConfig, OpenAiModel};
use toolbelt::{FunctionTool, ToolContext, ToolError};

/// Arguments of `ask_user`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Question {
    /// What to ask.
    question: String,
}

/// Declared so the model may call it; the caller runs it (the filter hands it back).
async fn ask_user(_ctx: ToolContext, q: Question) -> Result<String, ToolError> {
    Err(ToolError::failed(format!(
        "{:?} is for the caller to answer (run with the execution filter)",
        q.question
    )))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "ask_user", r#"{"question":"Which city?"}"#),
        Reply::text("Booking a table in Lyon."),
    ])
    .await?;
    let agent = LlmAgent::builder("booker")
        .model(OpenAiModel::new(OpenAiConfig::new(
            server.base_url(),
            "scripted",
        ))?)
        .tool(FunctionTool::new(
            "ask_user",
            "Asks the user a question",
            ask_user,
        )?)
        .build()?;
    let runner = Runner::new("hand-back", Arc::new(agent));
    let options =
        || RunOptions::new().execution_filter(ExecutionFilter::pending_names(["ask_user"]));

    // The run stops with the call handed back, not run.
    let mut answers = Vec::new();
    for event in runner
        .run("me", "s", "Book a table for two", options())
        .collect_all()
        .await
    {
        if let EventKind::PendingToolCalls { calls } = &event.kind {
            for call in calls {
                println!("handed back: {}({})", call.name, call.arguments);
                // The caller runs the call its own way and answers with the same id.
                answers.push(Message::tool(&call.id, &call.name, "Lyon"));
            }
        }
    }
    // The next run starts from those results and the model goes on.
    for event in runner
        .run("me", "s", RunInput(answers), options())
        .collect_all()
        .await
    {
        if let EventKind::ModelResponse { message, .. } = &event.kind {
            println!("model: {}", message.content);
        }
    }
    Ok(())
}
