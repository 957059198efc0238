//! Approvals that pause a run and resume it: the built-in tools under real permission rules,
//! a session in a real SQLite file, and every resume through a new runner over that file (as
//! another process would do it), against the scripted model server.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolbelt_agent::{
    Decision, Event, EventKind, LlmAgent, RunInput, RunOptions, Runner, SessionKey, SessionService,
    SqliteSessionService, pending_approvals,
};
use toolbelt_builtin::permission::{Fallback, PermissionRules};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::DynToolSet;
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::agent_support::{model, persistent_types, results, roles, tool_messages};

/// A runner over a `coder` agent with the built-in tools in `dir`, under rules that let it
/// read and ask about everything else (Claude Code's default mode), with its session in the
/// SQLite file `db`. Nobody can be asked at run time: the run pauses.
fn coder(server: &ScriptedServer, dir: &Path, db: &Path) -> Runner {
    let rules = PermissionRules::new(dir).fallback(Fallback::AskUnlessReadOnly);
    let builtin = BuiltinToolSet::new(BuiltinOptions::new(dir)).unwrap();
    let agent = LlmAgent::builder("coder")
        .model(model(server))
        .tool_set(Arc::new(builtin) as DynToolSet)
        .configure_executor(move |b| b.permissions(Arc::new(rules)))
        .build()
        .unwrap();
    let sessions = Arc::new(SqliteSessionService::open(db).unwrap());
    Runner::new("app", Arc::new(agent)).with_session_service(sessions)
}

async fn run(runner: &Runner, input: impl Into<RunInput>, options: RunOptions) -> Vec<Event> {
    let events = runner.run("u", "s", input, options).collect_all().await;
    assert!(events.last().is_some_and(Event::is_run_completed));
    events
}

async fn stored(db: &Path) -> Vec<Event> {
    let sessions = SqliteSessionService::open(db).unwrap();
    sessions
        .events(&SessionKey::new("app", "u", "s"))
        .await
        .unwrap()
}

/// A temporary folder with the session file `sessions.db` and the tools' folder `work`
/// (holding `readme.txt`).
fn folders() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("readme.txt"), "read me\n").unwrap();
    let db = dir.path().join("sessions.db");
    (dir, work, db)
}

/// The three calls of the first turn: a Write and a Bash the rules ask about, and a Read
/// they allow.
fn three_calls() -> Reply {
    Reply::tool_calls([
        (
            "w1",
            "Write",
            r#"{"file_path":"notes.txt","content":"from the model\n"}"#,
        ),
        ("r1", "Read", r#"{"file_path":"readme.txt"}"#),
        ("b1", "Bash", r#"{"command":"touch made-by-bash"}"#),
    ])
}

#[tokio::test]
async fn a_paused_run_resumes_in_a_new_runner_with_an_edit_and_a_denial() {
    let (_dir, work, db) = folders();
    let server = ScriptedServer::start([three_calls(), Reply::text("Done.")])
        .await
        .unwrap();

    let first = run(&coder(&server, &work, &db), "Take notes", RunOptions::new()).await;
    assert_eq!(
        persistent_types(&first),
        [
            "user_input",
            "model_response",
            "approval_requested",
            "tool_result",
            "approval_requested",
            "run_completed"
        ],
        "the allowed Read ran, the two asked calls wait"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "the run ended without asking the model"
    );
    assert!(!work.join("notes.txt").exists());
    assert!(!work.join("made-by-bash").exists());

    // What a person is shown, read from the stored session alone.
    let pending = pending_approvals(&stored(&db).await);
    let asked: Vec<_> = pending.iter().map(|p| p.call_id.as_str()).collect();
    assert_eq!(asked, ["w1", "b1"]);
    assert_eq!(pending[0].author, "coder");
    assert!(
        pending[0]
            .preview
            .as_deref()
            .is_some_and(|p| p.contains("+from the model")),
        "the Write's diff: {:?}",
        pending[0].preview
    );
    assert_eq!(pending[1].preview.as_deref(), Some("$ touch made-by-bash"));
    assert!(pending[1].reason.contains("Bash"), "{}", pending[1].reason);

    let decisions = RunOptions::new()
        .decide(
            "w1",
            Decision::Edit {
                arguments: json!({"file_path": "notes.txt", "content": "from the person\n"}),
            },
        )
        .decide(
            "b1",
            Decision::Deny {
                message: Some("no shell today".into()),
            },
        );
    let second = run(&coder(&server, &work, &db), RunInput::resume(), decisions).await;
    assert_eq!(
        persistent_types(&second),
        [
            "approval_decided",
            "approval_decided",
            "tool_result",
            "tool_result",
            "model_response",
            "run_completed"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "from the person\n",
        "the person's arguments ran"
    );
    assert!(
        !work.join("made-by-bash").exists(),
        "the denied call never ran"
    );
    let bash = results(&second)
        .into_iter()
        .find(|r| r.call_id == "b1")
        .unwrap();
    assert!(bash.is_error);

    // The model hears about every call of its turn, in its order, with what happened.
    let request = &server.requests()[1];
    assert_eq!(
        roles(request),
        ["user", "assistant", "tool", "tool", "tool"]
    );
    let answers = tool_messages(request);
    let ids: Vec<_> = answers.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["w1", "r1", "b1"]);
    assert!(
        answers[0]
            .1
            .starts_with("(The user changed this call's arguments"),
        "{}",
        answers[0].1
    );
    assert!(answers[1].1.contains("read me"), "{}", answers[1].1);
    assert!(answers[2].1.contains("The user says: no shell today"));
    assert!(pending_approvals(&stored(&db).await).is_empty());
}

#[tokio::test]
async fn an_approved_call_runs_once_and_a_second_decision_for_it_is_refused() {
    let (_dir, work, db) = folders();
    let server = ScriptedServer::start([three_calls(), Reply::text("Done.")])
        .await
        .unwrap();
    run(&coder(&server, &work, &db), "Go", RunOptions::new()).await;

    // Only the Write is decided: the Bash left without a decision is not approved.
    let approve = || RunOptions::new().decide("w1", Decision::Approve);
    let resumed = run(&coder(&server, &work, &db), RunInput::resume(), approve()).await;
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "from the model\n"
    );
    let bash = results(&resumed)
        .into_iter()
        .find(|r| r.call_id == "b1")
        .unwrap();
    assert!(bash.is_error && bash.content.contains("was not approved"));
    assert!(!work.join("made-by-bash").exists());

    // A second approval of the same call (a double click, a retried request) runs nothing.
    std::fs::write(work.join("notes.txt"), "changed since\n").unwrap();
    let again = run(&coder(&server, &work, &db), RunInput::resume(), approve()).await;
    let error = again
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Error { message, .. } => Some(message.clone()),
            _ => None,
        })
        .expect("a stray decision is an error");
    assert!(error.contains("call w1"), "{error}");
    assert_eq!(
        std::fs::read_to_string(work.join("notes.txt")).unwrap(),
        "changed since\n"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "the refused resume asked no model"
    );
}

#[tokio::test]
async fn an_approved_call_whose_run_died_mid_call_is_reported_unknown_and_never_rerun() {
    let (_dir, work, db) = folders();
    let server = ScriptedServer::start([three_calls(), Reply::text("Checked.")])
        .await
        .unwrap();
    run(&coder(&server, &work, &db), "Go", RunOptions::new()).await;

    // What a process killed right after storing its decisions leaves behind: the decisions,
    // and no results (the call may have run or not).
    let key = SessionKey::new("app", "u", "s");
    let sessions = SqliteSessionService::open(&db).unwrap();
    let invocation = stored(&db).await[0].invocation_id.clone();
    for (id, name, decision) in [
        ("w1", "Write", Decision::Approve),
        ("b1", "Bash", Decision::Approve),
    ] {
        let kind = EventKind::ApprovalDecided {
            call_id: id.into(),
            name: name.into(),
            decision,
        };
        let event = Event::new(invocation.clone(), None, "coder", kind);
        sessions.append_event(&key, &event).await.unwrap();
    }

    let resumed = run(
        &coder(&server, &work, &db),
        RunInput::resume(),
        RunOptions::new(),
    )
    .await;
    let outcomes: Vec<_> = results(&resumed)
        .into_iter()
        .map(|r| (r.call_id.clone(), r.is_error, r.content.contains("unknown")))
        .collect();
    assert_eq!(
        outcomes,
        [("w1".into(), true, true), ("b1".into(), true, true)]
    );
    assert!(
        !work.join("notes.txt").exists(),
        "the Write was not run again"
    );
    assert!(!work.join("made-by-bash").exists(), "nor the Bash");
    assert_eq!(server.requests().len(), 2, "the model then hears about it");
}
