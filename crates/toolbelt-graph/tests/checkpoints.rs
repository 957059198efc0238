//! Checkpoints in the SQLite session store, across processes: a run interrupts for a
//! person's approval and another process resumes it with the answer; a process that dies
//! mid-graph is resumed by another from the last checkpoint, without running the finished
//! steps' tool calls again.
//!
//! The other process is this test binary again, running the ignored `child` test with the
//! database, the role and the scripted server's address in its environment.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use toolbelt_agent::session::SqliteSessionService;
use toolbelt_agent::{EventKind, RunOptions};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_graph::{END, Graph, ModelNode, START, StateGraph, ToolsNode};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{OpenAiConfig, OpenAiModel};

use crate::graph_support::{
    Chat, ChatUpdate, NoArgs, assert_no_errors, ended, last_state, run, runner,
};

const DB: &str = "GRAPH_TEST_DB";
const ROLE: &str = "GRAPH_TEST_ROLE";
const DIR: &str = "GRAPH_TEST_DIR";
const MODEL_URL: &str = "GRAPH_TEST_MODEL_URL";

/// Appends `line` to the file `name` in `dir` (what the nodes did, across processes).
fn log(dir: &Path, name: &str, line: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// draft → approve (asks a person) → publish.
fn approval_graph(dir: PathBuf) -> Graph<Chat> {
    let (d1, d2) = (dir.clone(), dir);
    StateGraph::<Chat>::new("approval")
        .function("draft", move |_ctx| {
            log(&d1, "draft.log", "drafted");
            async { Ok(ChatUpdate::default().note("release notes v1".into())) }
        })
        .function("approve", |ctx| async move {
            let answer = ctx.interrupt(json!({"approve": ctx.state().note}))?;
            let answer = answer.as_str().unwrap_or_default().to_string();
            Ok(ChatUpdate::default().note(format!("{} approved: {answer}", ctx.state().note)))
        })
        .function("publish", move |_ctx| {
            log(&d2, "publish.log", "published");
            async { Ok(ChatUpdate::default().steps(1)) }
        })
        .edge(START, "draft")
        .edge("draft", "approve")
        .edge("approve", "publish")
        .edge("publish", END)
        .answer(|chat: &Chat| Some(chat.note.clone()))
        .build()
        .unwrap()
}

/// model → tools (`record`, logged) → finish → END; `finish` kills the process when `crash`.
fn crash_graph(model_url: &str, dir: PathBuf, crash: bool) -> Graph<Chat> {
    let record = {
        let dir = dir.clone();
        FunctionTool::new("record", "Records", move |ctx: ToolContext, _: NoArgs| {
            let dir = dir.clone();
            async move {
                log(&dir, "record.log", ctx.call_id().unwrap_or("?"));
                Ok::<_, ToolError>("recorded")
            }
        })
        .unwrap()
    };
    let tools = ToolsNode::builder().tool(record).build().unwrap();
    let model = OpenAiModel::new(OpenAiConfig::new(model_url, "scripted")).unwrap();
    StateGraph::<Chat>::new("crashy")
        .node("model", ModelNode::new(model).tools_from(&tools))
        .node("tools", tools)
        .function("finish", move |_ctx| {
            if crash {
                // A real crash: no destructor, no flush, no goodbye.
                std::process::exit(3);
            }
            async { Ok(ChatUpdate::default().note("finished".into())) }
        })
        .edge(START, "model")
        .edge("model", "tools")
        .edge("tools", "finish")
        .edge("finish", END)
        .build()
        .unwrap()
}

/// Runs the ignored `child` test in a new process of this binary, in `role`.
fn spawn_child(role: &str, db: &Path, dir: &Path, model_url: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["checkpoints::child", "--exact", "--ignored", "--nocapture"])
        .env(ROLE, role)
        .env(DB, db)
        .env(DIR, dir)
        .env(MODEL_URL, model_url)
        .output()
        .expect("the test binary runs as a child")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the other checkpoint tests (they set its environment)"]
async fn child() {
    // Started by hand without the environment it has nothing to do.
    let (Ok(role), Ok(db), Ok(dir)) = (std::env::var(ROLE), std::env::var(DB), std::env::var(DIR))
    else {
        return;
    };
    let dir = PathBuf::from(dir);
    let sessions = Arc::new(SqliteSessionService::open(&db).unwrap());
    match role.as_str() {
        "resume" => {
            let events = run(&runner(approval_graph(dir), sessions), "yes, ship it").await;
            assert_no_errors(&events);
            assert_eq!(
                ended(&events),
                ["approve", "publish"],
                "draft is not run again"
            );
            let chat: Chat = last_state(&events);
            assert_eq!(chat.note, "release notes v1 approved: yes, ship it");
        }
        "crash" => {
            let url = std::env::var(MODEL_URL).unwrap();
            run(&runner(crash_graph(&url, dir, true), sessions), "record it").await;
            unreachable!("finish kills the process");
        }
        other => panic!("unknown role {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_is_resumed_with_the_answer_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let sessions = Arc::new(SqliteSessionService::open(&db).unwrap());
    let events = run(
        &runner(approval_graph(dir.path().into()), sessions),
        "draft it",
    )
    .await;
    assert_no_errors(&events);
    assert_eq!(ended(&events), ["draft"]);
    let interrupted: Vec<(String, serde_json::Value)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Interrupted { node, question } => Some((node.clone(), question.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        interrupted,
        [(
            "approve".to_string(),
            json!({"approve": "release notes v1"})
        )]
    );
    assert!(
        lines(dir.path(), "publish.log").is_empty(),
        "nothing published before approval"
    );

    let output = spawn_child("resume", &db, dir.path(), "");
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "the resuming process failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        lines(dir.path(), "draft.log"),
        ["drafted"],
        "drafted once, over both processes"
    );
    assert_eq!(lines(dir.path(), "publish.log"), ["published"]);

    // The store, read here again, ends finished; a third run starts afresh from that state.
    let sessions = Arc::new(SqliteSessionService::open(&db).unwrap());
    let events = run(
        &runner(approval_graph(dir.path().into()), sessions),
        "again",
    )
    .await;
    assert_eq!(
        ended(&events),
        ["draft"],
        "a finished graph starts over at START"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_graph_resumes_at_the_last_checkpoint_without_rerunning_tool_calls() {
    let server = ScriptedServer::start([Reply::tool_call("rec1", "record", "{}")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let output = spawn_child("crash", &db, dir.path(), &server.base_url());
    assert_eq!(
        output.status.code(),
        Some(3),
        "the child died in finish: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        lines(dir.path(), "record.log"),
        ["rec1"],
        "the tool ran in the child"
    );

    let sessions = Arc::new(SqliteSessionService::open(&db).unwrap());
    let graph = crash_graph(&server.base_url(), dir.path().into(), false);
    let events = run_resume(&runner(graph, sessions)).await;
    assert_no_errors(&events);
    assert_eq!(
        ended(&events),
        ["finish"],
        "model and tools are not run again"
    );
    assert_eq!(
        lines(dir.path(), "record.log"),
        ["rec1"],
        "the tool call is not repeated"
    );
    assert_eq!(server.requests().len(), 1, "the model is not called again");
    let chat: Chat = last_state(&events);
    assert_eq!(chat.note, "finished");
    let tool_messages = chat
        .messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .count();
    assert_eq!(tool_messages, 1, "the checkpoint kept the tool's result");
}

/// A run with no new input (resuming).
async fn run_resume(runner: &toolbelt_agent::Runner) -> Vec<toolbelt_agent::Event> {
    crate::graph_support::run_with(runner, "", RunOptions::new()).await
}
