//! Faults: dead servers, restarted servers, silent servers, garbage and missing commands.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use toolbelt_core::{Tool, ToolContext, ToolSet};
use toolbelt_mcp::{ConnectionConfig, FailureKind, McpToolSet, Step, TransportConfig};

fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[tokio::test]
async fn a_killed_stdio_server_is_replaced_by_reconnect() {
    let set = McpToolSet::builder("py", python_stdio(None))
        .session_reconnect(2)
        .build()
        .unwrap();
    let echo = tool(&set, "echo").await;
    let first = set.process_id().unwrap();
    kill(first);
    let out = echo
        .call(ToolContext::for_call("c1"), r#"{"message":"back"}"#)
        .await
        .expect("the call succeeds through a reconnect");
    assert_eq!(out.llm_text(), "back");
    let second = set.process_id().unwrap();
    assert_ne!(first, second);
    assert_eq!(set.reconnect_count(), 1);
    set.close().await.unwrap();
    assert!(!process_exists(second));
}

#[tokio::test]
async fn without_reconnect_a_killed_stdio_server_is_a_connection_error() {
    let set = McpToolSet::new("py", python_stdio(None));
    let echo = tool(&set, "echo").await;
    kill(set.process_id().unwrap());
    let err = set
        .call(&ToolContext::new(), "echo", None)
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::Connection, "{err}");
    assert!(err.to_string().contains("\"py\""), "{err}");
    // Through the Tool interface it is a transient error, which the executor may retry.
    let err = echo
        .call(ToolContext::for_call("c"), r#"{"message":"x"}"#)
        .await;
    assert!(err.is_err());
    set.close().await.unwrap();
}

#[tokio::test]
async fn a_restarted_http_server_is_reached_again_through_reconnect() {
    let port = free_port();
    let mut server = HttpServer::python_on("streamable-http", port, None);
    let set = McpToolSet::builder("py-http", remote("http", port, "/mcp"))
        .session_reconnect(3)
        .build()
        .unwrap();
    let echo = tool(&set, "echo").await;
    assert_eq!(
        echo.call(ToolContext::for_call("c1"), r#"{"message":"one"}"#)
            .await
            .unwrap()
            .llm_text(),
        "one"
    );
    // The restarted server knows nothing of our session.
    server.stop();
    let _server = HttpServer::python_on("streamable-http", port, None);
    let out = echo
        .call(ToolContext::for_call("c2"), r#"{"message":"two"}"#)
        .await
        .expect("the call succeeds through a reconnect");
    assert_eq!(out.llm_text(), "two");
    assert!(set.reconnect_count() >= 1);
    set.close().await.unwrap();
}

#[tokio::test]
async fn a_restarted_sse_server_is_reached_again_through_reconnect() {
    let port = free_port();
    let mut server = HttpServer::python_on("sse", port, None);
    let set = McpToolSet::builder("py-sse", remote("sse", port, "/sse"))
        .session_reconnect(3)
        .build()
        .unwrap();
    let echo = tool(&set, "echo").await;
    server.stop();
    let _server = HttpServer::python_on("sse", port, None);
    let out = echo
        .call(ToolContext::for_call("c"), r#"{"message":"again"}"#)
        .await
        .expect("the call succeeds through a reconnect");
    assert_eq!(out.llm_text(), "again");
    set.close().await.unwrap();
}

#[tokio::test]
async fn a_stdio_server_that_never_answers_initialize_times_out_naming_the_server() {
    let config = ConnectionConfig::new(TransportConfig::stdio("sleep", ["30"]))
        .with_timeout(Duration::from_millis(500));
    let set = McpToolSet::new("silent", config);
    let err = set.init(&ToolContext::new()).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Timeout);
    assert_eq!(err.step, Step::Initialize);
    assert_eq!(
        err.to_string(),
        "MCP server \"silent\": initialize failed: timed out after 500ms"
    );
}

#[tokio::test]
async fn an_http_server_that_never_answers_initialize_times_out_naming_the_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept connections and hold them open without ever answering.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    for transport in ["http", "sse"] {
        let config = remote(transport, port, "/mcp").with_timeout(Duration::from_millis(500));
        let set = McpToolSet::new("mute", config);
        let err = set.init(&ToolContext::new()).await.unwrap_err();
        assert_eq!(err.kind, FailureKind::Timeout, "{transport}: {err}");
        assert!(
            err.to_string().starts_with("MCP server \"mute\": "),
            "{err}"
        );
    }
    holder.abort();
}

#[tokio::test]
async fn garbage_on_stdout_is_a_clear_protocol_error() {
    let config = ConnectionConfig::new(TransportConfig::stdio(
        "sh",
        ["-c", "echo 'Welcome to my server!'; sleep 30"],
    ))
    .with_timeout(Duration::from_secs(10));
    let set = McpToolSet::builder("chatty", config)
        .session_reconnect(3)
        .build()
        .unwrap();
    let err = set.init(&ToolContext::new()).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Protocol, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("chatty") && text.contains("not JSON-RPC"),
        "{text}"
    );
    assert!(text.contains("Welcome to my server!"), "{text}");
    assert_eq!(set.reconnect_count(), 0, "protocol errors are not retried");
}

#[tokio::test]
async fn a_missing_command_is_a_clear_configuration_error_and_not_retried() {
    let config = ConnectionConfig::new(TransportConfig::stdio(
        "definitely-not-a-real-mcp-server",
        Vec::<String>::new(),
    ));
    let set = McpToolSet::builder("ghost", config)
        .session_reconnect(5)
        .build()
        .unwrap();
    let err = set.init(&ToolContext::new()).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Configuration);
    assert_eq!(
        err.to_string(),
        "MCP server \"ghost\": connect failed: command \"definitely-not-a-real-mcp-server\" not found (is it installed and on PATH?)"
    );
    assert_eq!(set.reconnect_count(), 0);
}

#[tokio::test]
async fn refused_connections_are_connection_errors() {
    let port = free_port();
    let set = McpToolSet::new("nobody", remote("http", port, "/mcp"));
    let err = set.init(&ToolContext::new()).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Connection, "{err}");
    let set = McpToolSet::new("nobody", remote("sse", port, "/sse"));
    let err = set.init(&ToolContext::new()).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Connection, "{err}");
}

#[tokio::test]
async fn reconnect_attempts_out_of_range_are_refused() {
    let err = McpToolSet::builder("x", python_stdio(None))
        .session_reconnect(11)
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("between 1 and 10"), "{err}");
}

/// How many calls run at once after the session was lost.
const PARALLEL_CALLS: usize = 16;

/// Runs [`PARALLEL_CALLS`] echo calls at once and checks that every one succeeds with its
/// own answer.
async fn parallel_echoes(echo: &Arc<dyn Tool>) {
    let calls = (0..PARALLEL_CALLS).map(|i| {
        let echo = echo.clone();
        tokio::spawn(async move {
            let args = serde_json::json!({ "message": format!("call {i}") }).to_string();
            let out = echo
                .call(ToolContext::for_call(format!("c{i}")), &args)
                .await;
            (i, out)
        })
    });
    for joined in futures::future::join_all(calls).await {
        let (i, out) = joined.expect("the call task finished");
        let out = out.unwrap_or_else(|err| panic!("call {i} failed: {err}"));
        assert_eq!(out.llm_text(), format!("call {i}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_after_a_stdio_server_died_share_one_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let config = python_stdio(None).with_env("TOOLBELT_SESSION_LOG", log.display().to_string());
    let set = McpToolSet::builder("py", config)
        .session_reconnect(3)
        .build()
        .unwrap();
    let echo = tool(&set, "echo").await;
    assert_eq!(sessions_logged(&log), 1);
    let first = set.process_id().unwrap();
    kill(first);

    parallel_echoes(&echo).await;
    assert_eq!(set.reconnect_count(), 1, "one reconnect for all the calls");
    assert_eq!(sessions_logged(&log), 2, "one new server process");
    let second = set.process_id().unwrap();
    set.close().await.unwrap();
    assert!(!process_exists(second));
}

async fn parallel_calls_after_an_http_restart(transport: &str, path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let env = [("TOOLBELT_SESSION_LOG", log.display().to_string())];
    let port = free_port();
    let mut server = HttpServer::python_with_env(transport, port, &env);
    let set = McpToolSet::builder("py-remote", remote(transport, port, path))
        .session_reconnect(3)
        .build()
        .unwrap();
    let echo = tool(&set, "echo").await;
    assert_eq!(sessions_logged(&log), 1);
    // The restarted server knows nothing of our session.
    server.stop();
    let _server = HttpServer::python_with_env(transport, port, &env);

    parallel_echoes(&echo).await;
    assert_eq!(set.reconnect_count(), 1, "one reconnect for all the calls");
    assert_eq!(sessions_logged(&log), 2, "one new session");
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_after_a_streamable_http_restart_share_one_reconnect() {
    parallel_calls_after_an_http_restart("streamable-http", "/mcp").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_after_an_sse_restart_share_one_reconnect() {
    parallel_calls_after_an_http_restart("sse", "/sse").await;
}
