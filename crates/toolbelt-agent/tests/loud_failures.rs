//! Failures are loud and nothing is lost: a session store that fails (locked by another
//! connection, corrupted) ends the run with a session error the caller receives, before the
//! model is called when it fails at the start, and leaves the file as it was (a read-only one
//! is refused when opened); a
//! panicking agent, root or child, ends with a panic error and `RunCompleted`; sessions
//! stored in the old event format still load.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use toolbelt_agent::{
    Agent, AgentError, ErrorKind, Event, Invocation, RunOptions, Runner, SessionKey,
    SessionService, SqliteSessionService,
};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_model::Message;
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::agent_support;

use agent_support::*;

/// A session database with one finished run in it, written and closed.
async fn database_with_one_run(dir: &Path) -> PathBuf {
    let path = dir.join("sessions.db");
    let server = ScriptedServer::start([Reply::text("hello")]).await.unwrap();
    let sessions = Arc::new(SqliteSessionService::open(&path).unwrap());
    let agent = agent("a", &server, false).build().unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_session_service(sessions);
    let events = run(&runner, "s", "hi", RunOptions::new()).await;
    no_errors(&events);
    drop(runner);
    // Fold the write-ahead log into the main file, so the file alone is the database.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .unwrap();
    drop(conn);
    path
}

/// A run against the database at `path` whose model would answer "should not be asked".
async fn run_against(path: &Path) -> (ScriptedServer, Vec<Event>) {
    let server = ScriptedServer::start([Reply::text("should not be asked")])
        .await
        .unwrap();
    let sessions = Arc::new(SqliteSessionService::open(path).expect("the file opens"));
    let agent = agent("a", &server, false).build().unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_session_service(sessions);
    let events = run(&runner, "s", "again", RunOptions::new()).await;
    (server, events)
}

/// The run ended with exactly one session error, then `RunCompleted`, and nothing else
/// happened: no input was shown (it was not stored) and the model was never called.
fn ended_with_a_session_error_before_the_model(server: &ScriptedServer, events: &[Event]) {
    let types: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(types, ["error", "run_completed"], "{events:#?}");
    assert_eq!(errors(events)[0].0, ErrorKind::Session, "{events:#?}");
    assert!(server.requests().is_empty(), "the model was called");
}

#[tokio::test]
async fn a_database_locked_by_another_connection_is_a_session_error_before_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = database_with_one_run(dir.path()).await;
    let before = std::fs::read(&path).unwrap();

    // Another process holds the write lock for the whole run.
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let (server, events) = run_against(&path).await;
    ended_with_a_session_error_before_the_model(&server, &events);
    assert!(
        errors(&events)[0].1.contains("locked"),
        "the message says why: {events:#?}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is untouched"
    );
}

#[tokio::test]
async fn a_corrupted_database_is_a_session_error_before_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = database_with_one_run(dir.path()).await;
    // Garbage over every page but the first (which holds the header and the schema), as a
    // torn write or a bad disk leaves it: the file opens, its tables do not read.
    let mut bytes = std::fs::read(&path).unwrap();
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    assert!(bytes.len() > page, "more than one page");
    for (n, byte) in bytes[page..].iter_mut().enumerate() {
        *byte = (n * 31 % 251) as u8;
    }
    std::fs::write(&path, &bytes).unwrap();

    let (server, events) = run_against(&path).await;
    ended_with_a_session_error_before_the_model(&server, &events);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the file is untouched"
    );
}

#[tokio::test]
#[ignore = "root writes to read-only files: run as a non-root user (cargo test -- --ignored)"]
async fn a_read_only_database_is_refused_when_opened_and_left_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = database_with_one_run(dir.path()).await;
    let before = std::fs::read(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();

    // Opening sets the journal mode and the schema, which needs to write: a store that
    // cannot write is refused up front, before any run (and so before any model call).
    let opened = SqliteSessionService::open(&path);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let error = opened.expect_err("a read-only database is refused");
    assert!(matches!(error, AgentError::Session(_)), "{error:?}");
    assert!(error.to_string().contains("readonly"), "{error}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is untouched"
    );
}

#[tokio::test]
async fn a_store_that_fails_mid_run_ends_the_run_with_a_session_error_the_caller_sees() {
    let dir = tempfile::tempdir().unwrap();
    let path = database_with_one_run(dir.path()).await;
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "lock_the_store", "{}"),
        Reply::text("should not be asked"),
    ])
    .await
    .unwrap();
    // The tool takes the database's write lock (as another process would) and keeps it, so
    // storing its own result fails.
    let holder: Arc<Mutex<Option<rusqlite::Connection>>> = Arc::default();
    let lock = {
        let (holder, path) = (holder.clone(), path.clone());
        FunctionTool::new(
            "lock_the_store",
            "Locks the session store",
            move |_ctx: ToolContext, _: Args| {
                let (holder, path) = (holder.clone(), path.clone());
                async move {
                    let conn = rusqlite::Connection::open(&path).unwrap();
                    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
                    *holder.lock().unwrap() = Some(conn);
                    Ok::<_, ToolError>("locked")
                }
            },
        )
        .unwrap()
    };
    let sessions = Arc::new(SqliteSessionService::open(&path).unwrap());
    let agent = agent("a", &server, false).tool(lock).build().unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_session_service(sessions.clone());
    let events = run(&runner, "s", "lock it", RunOptions::new()).await;

    let types: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(
        types,
        ["user_input", "model_response", "error", "run_completed"],
        "the result could not be stored, so it is not shown; the error is"
    );
    assert_eq!(errors(&events)[0].0, ErrorKind::Session);
    assert_eq!(server.requests().len(), 1, "the model was not asked again");
    drop(holder.lock().unwrap().take());
    // What was shown is stored: the input and the response, not the unstored result.
    let stored = sessions
        .events(&SessionKey::new("app", "user", "s"))
        .await
        .unwrap();
    let stored_ids: Vec<&str> = stored.iter().map(|e| e.id.as_str()).collect();
    assert!(stored_ids.contains(&events[1].id.as_str()));
    assert!(!stored.iter().any(|e| e.tool_result().is_some()));
}

/// An agent that panics when run.
struct Panicking;

#[async_trait]
impl Agent for Panicking {
    fn name(&self) -> &str {
        "panicking"
    }
    fn description(&self) -> &str {
        "panics"
    }
    async fn run(&self, _inv: Invocation) -> Result<(), AgentError> {
        panic!("the agent has a bug");
    }
}

#[tokio::test]
async fn a_panicking_root_agent_ends_with_a_panic_error_and_run_completed() {
    let runner = Runner::new("app", Arc::new(Panicking));
    let events = run(&runner, "s", "hi", RunOptions::new()).await;
    let types: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(types, ["user_input", "error", "run_completed"]);
    let (kind, message) = &errors(&events)[0];
    assert_eq!(*kind, ErrorKind::Panic);
    assert!(message.contains("the agent has a bug"), "{message}");
}

#[tokio::test]
async fn a_panicking_child_invocation_ends_with_a_panic_error_and_run_completed() {
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "delegate", "{}"),
        Reply::text("the helper failed"),
    ])
    .await
    .unwrap();
    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let delegate = {
        let seen = seen.clone();
        FunctionTool::new(
            "delegate",
            "Runs a child agent",
            move |ctx: ToolContext, _: Args| {
                let seen = seen.clone();
                async move {
                    let inv = Invocation::from_context(&ctx).expect("inside a run");
                    let child = inv.child("panicking");
                    let events = child
                        .run_child(Arc::new(Panicking), vec![Message::user("go")])
                        .collect_all()
                        .await;
                    let text = events
                        .iter()
                        .map(|e| e.kind.type_name())
                        .collect::<Vec<_>>()
                        .join(",");
                    seen.lock().unwrap().extend(events);
                    Ok::<_, ToolError>(text)
                }
            },
        )
        .unwrap()
    };
    let runner = app_runner(agent("boss", &server, false).tool(delegate));
    let events = run(&runner, "s", "delegate", RunOptions::new()).await;
    no_errors(&events);

    let child = seen.lock().unwrap().clone();
    let types: Vec<&str> = child.iter().map(|e| e.kind.type_name()).collect();
    assert_eq!(types, ["user_input", "error", "run_completed"]);
    assert_eq!(errors(&child)[0].0, ErrorKind::Panic);
    let parent = &events[0].invocation_id;
    assert!(
        child
            .iter()
            .all(|e| e.parent_invocation_id.as_deref() == Some(parent.as_str()))
    );
    // The parent run went on: the model read what the child's run came to.
    assert_eq!(
        results(&events)[0].content,
        "user_input,error,run_completed"
    );
    assert_eq!(final_answer(&events), "the helper failed");
}

#[tokio::test]
async fn a_session_stored_in_the_old_event_format_still_loads_and_replays_valid_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    drop(SqliteSessionService::open(&path).unwrap());
    // Rows as the version before the event enum wrote them: a question, a call (with the
    // broken arguments that version replayed as they were), its result, the answer.
    let old = [
        (
            "user_input",
            r#"{"id":"e1","invocation_id":"i","author":"user","object":"user_input","response":{"id":"","model":"","partial":false,"message":{"role":"user","content":"What is 2*3?"}},"done":true,"timestamp_ms":1}"#,
        ),
        (
            "chat_completion",
            r#"{"id":"e2","invocation_id":"i","author":"a","object":"chat_completion","response":{"id":"r","model":"m","partial":false,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"multiply","arguments":"{\"a\":2,\"b\":3"}}]}},"done":true,"timestamp_ms":2}"#,
        ),
        (
            "tool_response",
            r#"{"id":"e3","invocation_id":"i","author":"a","object":"tool_response","tool_results":[{"call_id":"call_1","name":"multiply","content":"6.0","is_error":false,"duration_ms":0}],"done":true,"timestamp_ms":3}"#,
        ),
        (
            "chat_completion",
            r#"{"id":"e4","invocation_id":"i","author":"a","object":"chat_completion","response":{"id":"r","model":"m","partial":false,"message":{"role":"assistant","content":"6"}},"done":true,"timestamp_ms":4}"#,
        ),
        ("mystery", r#"{"written by":"a future version"}"#),
    ];
    let conn = rusqlite::Connection::open(&path).unwrap();
    for (n, (object, body)) in old.iter().enumerate() {
        conn.execute(
            "INSERT INTO events (app, user_id, session_id, event_id, invocation_id, author,
                                 object, body, timestamp_ms)
             VALUES ('app', 'user', 's', ?1, 'i', 'a', ?2, ?3, ?4)",
            rusqlite::params![format!("e{n}"), object, body, n as i64],
        )
        .unwrap();
    }
    drop(conn);

    let server = ScriptedServer::start([Reply::text("You asked for 2 times 3.")])
        .await
        .unwrap();
    // It refuses unparsable arguments in the history, as vLLM does.
    server.set_strict(true);
    let sessions = Arc::new(SqliteSessionService::open(&path).unwrap());
    let agent = agent("a", &server, false).build().unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_session_service(sessions);
    let events = run(&runner, "s", "What did I ask?", RunOptions::new()).await;
    no_errors(&events);
    let request = &server.requests()[0];
    assert_eq!(
        roles(request),
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "the old conversation is replayed, the unreadable row skipped"
    );
    assert_eq!(tool_messages(request), [("call_1".into(), "6.0".into())]);
    let replayed = request.messages()[2]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap()
        .to_string();
    let replayed: serde_json::Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(
        replayed[toolbelt_agent::history::MALFORMED_ARGUMENTS_KEY],
        r#"{"a":2,"b":3"#
    );
    let types: Vec<&str> = runner
        .sessions()
        .events(&SessionKey::new("app", "user", "s"))
        .await
        .unwrap()
        .iter()
        .map(|e| e.kind.type_name())
        .collect();
    assert_eq!(
        &types[..4],
        [
            "user_input",
            "model_response",
            "tool_result",
            "model_response"
        ]
    );
}
