//! A workflow with a person's approval in the middle: draft → approve → publish. The
//! approve node interrupts; the run ends with an `interrupted` event and a checkpoint in the
//! session store; the next run of the session (here the same process, but any process with
//! the same store will do) resumes the node with the answer and goes on to publish.
//!
//! `cargo run -p toolbelt-graph --example graph_approval`

use std::sync::Arc;

use serde_json::json;
use toolbelt_agent::session::SqliteSessionService;
use toolbelt_agent::{Event, EventKind, RunOptions, Runner};
use toolbelt_graph::{END, START, StateGraph, state};

state! {
    /// A release and what became of it.
    struct Release => ReleaseUpdate {
        notes: String,
        approved: bool,
        published: bool,
    }
}

fn report(events: &[Event]) {
    for event in events {
        match &event.kind {
            EventKind::NodeEnded { node, update, .. } => println!("  {node} ended: {update}"),
            EventKind::Interrupted { node, question } => println!("  {node} asks: {question}"),
            EventKind::ModelResponse { message, .. } => println!("  answer: {}", message.content),
            EventKind::Error { message, .. } => println!("  error: {message}"),
            _ => {}
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let graph = StateGraph::<Release>::new("release")
        .function("draft", |_ctx| async {
            Ok(ReleaseUpdate::default().notes("v2: faster graphs".into()))
        })
        .function("approve", |ctx| async move {
            // The first time this returns Interrupted (and `?` passes it on); on resume it
            // returns the person's answer.
            let answer = ctx.interrupt(json!({"approve these notes?": ctx.state().notes}))?;
            let yes = answer
                .as_str()
                .is_some_and(|a| a.trim().eq_ignore_ascii_case("yes"));
            Ok(ReleaseUpdate::default().approved(yes))
        })
        .function("publish", |_ctx| async {
            Ok(ReleaseUpdate::default().published(true))
        })
        .edge(START, "draft")
        .edge("draft", "approve")
        .conditional_edge("approve", ["publish", END], |r: &Release| {
            if r.approved {
                "publish".into()
            } else {
                END.into()
            }
        })
        .edge("publish", END)
        .answer(|r: &Release| Some(format!("published: {}", r.published)))
        .build()?;

    let dir = tempfile::tempdir()?;
    let sessions = Arc::new(SqliteSessionService::open(dir.path().join("sessions.db"))?);
    let runner = Runner::new("example", Arc::new(graph)).with_session_service(sessions);

    println!("run 1:");
    let events = runner.run(
        "user",
        "release-42",
        "prepare the release",
        RunOptions::new(),
    );
    report(&events.collect_all().await);
    println!("run 2 (the person answers):");
    let events = runner.run("user", "release-42", "yes", RunOptions::new());
    report(&events.collect_all().await);
    Ok(())
}
