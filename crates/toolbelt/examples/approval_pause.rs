//! An approval that pauses a run and resumes it later: the permission rules ask about a
//! Write, nobody can be asked now, so the run stores the question (with the file's diff) in
//! the session and ends; a person's decision, given to a new runner over the same SQLite
//! file (as another process would), runs the call and the agent goes on.
//!
//! The model is a scripted OpenAI-compatible server on 127.0.0.1, so the example runs
//! offline.
//!
//! Run: `cargo run -p toolbelt --example approval_pause --features agent,builtin,sqlite`

use std::error::Error;
use std::path::Path;
use std::sync::Arc;

use toolbelt::DynToolSet;
use toolbelt::agent::{
    Decision, EventKind, LlmAgent, RunInput, RunOptions, Runner, SessionKey, SessionService,
    SqliteSessionService, pending_approvals,
};
use toolbelt::builtin::permission::{Fallback, PermissionRules};
use toolbelt::builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{OpenAiConfig, OpenAiModel};

/// A runner over an agent with the built-in tools in `work`, asking about anything that is
/// not read-only, its sessions in the SQLite file `db`.
fn runner(server: &ScriptedServer, work: &Path, db: &Path) -> Result<Runner, Box<dyn Error>> {
    let rules = PermissionRules::new(work).fallback(Fallback::AskUnlessReadOnly);
    let tools = BuiltinToolSet::new(BuiltinOptions::new(work))?;
    let agent = LlmAgent::builder("coder")
        .model(OpenAiModel::new(OpenAiConfig::new(
            server.base_url(),
            "scripted",
        ))?)
        .tool_set(Arc::new(tools) as DynToolSet)
        .configure_executor(move |b| b.permissions(Arc::new(rules)))
        .build()?;
    let sessions = Arc::new(SqliteSessionService::open(db)?);
    Ok(Runner::new("app", Arc::new(agent)).with_session_service(sessions))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let work = dir.path().join("work");
    std::fs::create_dir(&work)?;
    let db = dir.path().join("sessions.db");
    let server = ScriptedServer::start([
        Reply::tool_call(
            "call_1",
            "Write",
            r#"{"file_path":"TODO.md","content":"- ship it\n"}"#,
        ),
        Reply::text("TODO.md is written."),
    ])
    .await?;

    // The run pauses: the Write waits for a person.
    let first = runner(&server, &work, &db)?
        .run("me", "s1", "Start a TODO list", RunOptions::new())
        .collect_all()
        .await;
    assert!(
        first
            .iter()
            .any(|e| matches!(e.kind, EventKind::ApprovalRequested { .. }))
    );
    assert!(!work.join("TODO.md").exists());

    // Later: what the person is shown comes from the stored session alone.
    let stored = SqliteSessionService::open(&db)?
        .events(&SessionKey::new("app", "me", "s1"))
        .await?;
    for call in pending_approvals(&stored) {
        println!(
            "{} wants to run {} because {}:",
            call.author, call.name, call.reason
        );
        println!("{}", call.preview.unwrap_or(call.arguments));
    }

    // The decision resumes the session in a new runner (another process would do the same).
    let resumed = runner(&server, &work, &db)?
        .run(
            "me",
            "s1",
            RunInput::resume(),
            RunOptions::new().decide("call_1", Decision::Approve),
        )
        .collect_all()
        .await;
    for event in &resumed {
        if let EventKind::ModelResponse { message, .. } = &event.kind {
            println!("answer: {}", message.content);
        }
    }
    assert_eq!(
        std::fs::read_to_string(work.join("TODO.md"))?,
        "- ship it\n"
    );
    println!("approved and run once: TODO.md holds {:?}", "- ship it");
    Ok(())
}
