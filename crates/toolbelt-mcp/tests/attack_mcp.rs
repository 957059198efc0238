//! Attacks on the MCP client's promises (issue 13): a call is never run twice by accident when
//! its server dies mid-call, and closing a stdio server leaves none of its processes behind.
//!
//! The servers are real: the Python SDK fixture over stdio, SSE and streamable HTTP. Its
//! `append_then_exit` tool appends a line to a file and, the first time, kills its own
//! process before answering, so the file tells how many times the call reached a server.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use toolbelt_core::{JsonObject, ToolContext, ToolError, ToolSet};
use toolbelt_exec::{Executor, Registry, Retry, RetryPolicy, ToolCall, ToolSetRefresh};
use toolbelt_mcp::{ConnectionConfig, FailureKind, McpToolSet, TransportConfig};

/// The lines the fixture appended: one per time a call reached a server.
fn runs(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn path_args(file: &Path) -> Option<JsonObject> {
    json!({"path": file.display().to_string()})
        .as_object()
        .cloned()
}

/// A set with reconnects on, connected and listed (so the tools' annotations are known).
async fn connected(name: &str, config: ConnectionConfig) -> McpToolSet {
    let set = McpToolSet::builder(name, config)
        .session_reconnect(3)
        .build()
        .unwrap();
    set.init(&ToolContext::new()).await.expect("connect");
    set
}

async fn a_server_dying_mid_call_ran_it_once(set: &McpToolSet) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.log");
    let err = set
        .call(&ToolContext::new(), "append_then_exit", path_args(&file))
        .await
        .expect_err("the server died before answering");
    assert_eq!(err.kind, FailureKind::UnknownOutcome, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("connection was lost while the call was in flight")
            && text.contains("may or may not have run"),
        "{text}"
    );
    assert_eq!(runs(&file), 1, "the call reached a server exactly once");
    assert_eq!(set.reconnect_count(), 0, "nothing was sent again");
}

#[tokio::test]
async fn a_stdio_server_dying_mid_call_ran_it_once_and_the_outcome_is_unknown() {
    let set = connected("py", python_stdio(None)).await;
    a_server_dying_mid_call_ran_it_once(&set).await;
    // The set recovers: the next call gets a new server.
    let out = set
        .call(
            &ToolContext::new(),
            "echo",
            json!({"message": "after"}).as_object().cloned(),
        )
        .await
        .expect("the next call reconnects");
    assert_eq!(out.llm_text(), "after");
    assert_eq!(set.reconnect_count(), 1);
    set.close().await.unwrap();
}

#[tokio::test]
async fn a_streamable_http_server_dying_mid_call_ran_it_once_and_the_outcome_is_unknown() {
    let _server = HttpServer::python_on("streamable-http", free_port(), None);
    let set = connected("py-http", remote("http", _server.port, "/mcp")).await;
    a_server_dying_mid_call_ran_it_once(&set).await;
    set.close().await.unwrap();
}

#[tokio::test]
async fn an_sse_server_dying_mid_call_ran_it_once_and_the_outcome_is_unknown() {
    let _server = HttpServer::python_on("sse", free_port(), None);
    let set = connected("py-sse", remote("sse", _server.port, "/sse")).await;
    a_server_dying_mid_call_ran_it_once(&set).await;
    set.close().await.unwrap();
}

/// Waits (bounded) until our child `pid` has exited with all its threads, so that its end
/// of the pipes is closed (see [`is_running`]).
async fn exited(pid: u32) {
    let gone = eventually(Duration::from_secs(15), || !is_running(pid)).await;
    assert!(gone, "the server {pid} did not die");
}

fn add_args() -> Option<JsonObject> {
    json!({"a": 2, "b": 3}).as_object().cloned()
}

#[tokio::test]
async fn a_call_that_never_reached_a_dead_stdio_server_is_sent_to_a_new_one() {
    let set = connected("py", python_stdio(None)).await;
    let first = set.process_id().unwrap();
    kill(first);
    exited(first).await;
    // `add` is not idempotent; it was never written to the dead server, so it is safe.
    let out = set
        .call(&ToolContext::new(), "add", add_args())
        .await
        .expect("sent to a new server");
    assert_eq!(out.llm_text(), "5");
    assert_eq!(set.reconnect_count(), 1);
    set.close().await.unwrap();
}

#[tokio::test]
async fn an_idempotent_tool_is_sent_again_after_its_server_died_mid_call() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.log");
    let set = connected("py", python_stdio(None)).await;
    let out = set
        .call(
            &ToolContext::new(),
            "append_then_exit_idempotent",
            path_args(&file),
        )
        .await
        .expect("declared idempotent: sent again to a new server");
    assert_eq!(out.llm_text(), "appended");
    assert_eq!(
        runs(&file),
        2,
        "once on the server that died, once on the new one"
    );
    assert_eq!(set.reconnect_count(), 1);
    set.close().await.unwrap();
}

/// Even an executor told to retry every transient failure of every tool does not run the
/// call again: an unknown outcome is a failure, not a transient error.
#[tokio::test]
async fn an_unknown_outcome_is_not_retried_by_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.log");
    let set = connected("py", python_stdio(None)).await;
    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(Arc::new(set.clone()), ToolSetRefresh::Cached)
        .unwrap();
    registry.snapshot(&ToolContext::new()).await;
    let policy = RetryPolicy {
        max_retries: 4,
        min_delay: Duration::from_millis(10),
        jitter: false,
        ..RetryPolicy::default()
    };
    let executor = Executor::builder(registry)
        .middleware(Retry::new(policy).retry_non_idempotent(true))
        .build();
    let args = json!({"path": file.display().to_string()}).to_string();
    let call = ToolCall::new("c1", "append_then_exit", args);
    let result = executor.execute(ToolContext::for_call("c1"), &call).await;
    let err = result.result.expect_err("the call's outcome is unknown");
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    assert!(err.to_string().contains("may or may not have run"), "{err}");
    assert_eq!(runs(&file), 1);
    set.close().await.unwrap();
}

/// SIGKILL with kill(1).
fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// A stdio server started with `TOOLBELT_HELPER_PID_FILE` starts `sleep 300` and never stops
/// it; returns the config and the file the helper's pid appears in.
fn server_with_helper(dir: &Path, wrapped: bool) -> (ConnectionConfig, std::path::PathBuf) {
    let pid_file = dir.join("helper.pid");
    let fixture = python_fixture().display().to_string();
    let transport = if wrapped {
        // A wrapper shell that stays (the server is its child, not an exec), as `npx` does.
        TransportConfig::stdio(
            "sh",
            [
                "-c".to_string(),
                format!(
                    "'{}' '{fixture}' stdio; echo wrapper done >&2",
                    toolbelt_testkit::python()
                ),
            ],
        )
    } else {
        TransportConfig::stdio(toolbelt_testkit::python(), [fixture, "stdio".to_string()])
    };
    let config = ConnectionConfig::new(transport)
        .with_timeout(Duration::from_secs(20))
        .with_env("TOOLBELT_HELPER_PID_FILE", pid_file.display().to_string());
    (config, pid_file)
}

#[tokio::test]
async fn a_helper_the_server_started_does_not_outlive_close() {
    let dir = tempfile::tempdir().unwrap();
    let (config, pid_file) = server_with_helper(dir.path(), false);
    let set = connected("helpful", config).await;
    let helper = pid_from(&pid_file).await;
    assert!(
        is_running(helper),
        "the helper {helper} runs while the server does"
    );
    set.close().await.unwrap();
    assert!(
        stops_running(helper).await,
        "the helper {helper} outlived the closed server"
    );
}

#[tokio::test]
async fn the_server_behind_a_wrapper_and_its_helper_do_not_outlive_close() {
    let dir = tempfile::tempdir().unwrap();
    let (config, pid_file) = server_with_helper(dir.path(), true);
    let set = connected("wrapped", config).await;
    let helper = pid_from(&pid_file).await;
    let server = set
        .call(&ToolContext::new(), "pid", None)
        .await
        .expect("the wrapped server answers")
        .llm_text()
        .trim()
        .parse::<u32>()
        .unwrap();
    let wrapper = set.process_id().unwrap();
    assert_ne!(server, wrapper, "the server runs behind the wrapper shell");
    set.close().await.unwrap();
    for (what, pid) in [("server", server), ("helper", helper)] {
        assert!(stops_running(pid).await, "the {what} {pid} outlived close");
    }
}

#[tokio::test]
async fn a_dropped_set_takes_the_helpers_of_its_server_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (config, pid_file) = server_with_helper(dir.path(), false);
    let set = connected("dropped", config).await;
    let helper = pid_from(&pid_file).await;
    drop(set);
    assert!(
        stops_running(helper).await,
        "the helper {helper} outlived its dropped set"
    );
}
