//! Tool search: an agent with forty tools offers the model only the few a question needs.
//!
//! BM25 over the tools' names and descriptions keeps the three best of each turn (no model
//! or embedder needed), and the `calendar_*` tools are deferred: they are not sent at all
//! until the model asks for them with the framework tool `tool_search`, which loads the
//! matches into the next request of the run.
//!
//! The model is a scripted OpenAI-compatible server on 127.0.0.1, so the example runs
//! offline; the tools each request offered are printed from what the server received.
//!
//! Run: `cargo run -p toolbelt --example tool_search --features agent`

use std::error::Error;
use std::sync::Arc;

use toolbelt::agent::tool_search::{Method, ToolSearch};
use toolbelt::agent::{LlmAgent, RunOptions, Runner};
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{OpenAiConfig, OpenAiModel};
use toolbelt::{DynTool, FunctionTool, ToolContext, ToolError, ToolFilter};

/// Arguments every tool of this example takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Input {
    /// What to act on.
    subject: String,
}

async fn done(_ctx: ToolContext, input: Input) -> Result<String, ToolError> {
    Ok(format!("done: {}", input.subject))
}

/// Forty tools of a workplace: mail, files, tickets, calendar and more.
fn workplace_tools() -> Result<Vec<DynTool>, ToolError> {
    let mut specs = vec![
        ("send_email", "Sends an email message to a person"),
        ("read_inbox", "Lists the newest email messages in the inbox"),
        ("file_upload", "Uploads a file to the shared drive"),
        ("ticket_open", "Opens a support ticket"),
        (
            "calendar_create_event",
            "Creates a calendar event with attendees",
        ),
        ("calendar_free_slots", "Finds free slots in the calendar"),
    ];
    let fillers: Vec<(String, String)> = (0..34)
        .map(|i| {
            (
                format!("report_{i}"),
                format!("Builds sales report number {i}"),
            )
        })
        .collect();
    specs.extend(fillers.iter().map(|(n, d)| (n.as_str(), d.as_str())));
    specs
        .into_iter()
        .map(|(name, description)| {
            FunctionTool::new(name, description, done).map(|t| Arc::new(t) as DynTool)
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let server = ScriptedServer::start([
        // Run 1: BM25 offers the mail tools for a mail question.
        Reply::tool_call("call_1", "send_email", r#"{"subject":"Lunch on Friday?"}"#),
        Reply::text("Sent."),
        // Run 2: the calendar tools are deferred; the model searches for them first.
        Reply::tool_call("call_2", "tool_search", r#"{"query":"calendar event"}"#),
        Reply::tool_call(
            "call_3",
            "calendar_create_event",
            r#"{"subject":"Team lunch"}"#,
        ),
        Reply::text("The lunch is in the calendar."),
    ])
    .await?;
    let search = ToolSearch::builder()
        .index(Method::Bm25)
        .max_tools(3)
        .defer(ToolFilter::new(|_, tool| {
            tool.name().starts_with("calendar_")
        }))
        .build()?;
    let agent = LlmAgent::builder("assistant")
        .model(OpenAiModel::new(OpenAiConfig::new(
            server.base_url(),
            "scripted",
        ))?)
        .tools(workplace_tools()?)
        .build()?;
    let runner = Runner::new("office", Arc::new(agent)).with_plugin(search.plugin());

    for (user, question) in [
        ("me", "Send an email to Bob about lunch on Friday"),
        ("me", "Put a team lunch event in the calendar"),
    ] {
        runner
            .run(user, question, question, RunOptions::new())
            .collect_all()
            .await;
    }

    let offered: Vec<Vec<String>> = server
        .requests()
        .iter()
        .map(|request| {
            let mut names = request.tool_names();
            names.sort();
            names
        })
        .collect();
    for (i, names) in offered.iter().enumerate() {
        println!("request {} offered: {}", i + 1, names.join(", "));
    }
    // Fail loudly if the selection stopped doing what this example shows.
    let has = |request: usize, name: &str| offered[request].iter().any(|n| n == name);
    if !has(0, "send_email") || offered[0].len() > 4 {
        return Err("the mail question was not offered send_email among a few tools".into());
    }
    if has(2, "calendar_create_event") || !has(2, "tool_search") {
        return Err("a deferred tool was sent before the model searched for it".into());
    }
    if !has(3, "calendar_create_event") {
        return Err("tool_search did not load the calendar tool".into());
    }
    Ok(())
}
