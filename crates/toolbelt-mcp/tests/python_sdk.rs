//! Against a server written with the Python `mcp` SDK (tests/fixtures/py_server.py) over
//! stdio, SSE (whose endpoint path differs from the npm server's) and streamable HTTP.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use toolbelt_core::{ContentBlock, Tool, ToolContext, ToolError, ToolFilter, ToolSet};
use toolbelt_mcp::{ConnectionConfig, McpToolSet};

async fn exercise(config: ConnectionConfig, marker: &Path) {
    let set = McpToolSet::new("py", config);
    set.init(&ToolContext::new()).await.expect("init");

    // Arguments, and annotations mapped to hints.
    let echo = tool(&set, "echo").await;
    let meta = &echo.declaration().meta;
    assert_eq!(
        (meta.read_only, meta.idempotent, meta.open_world),
        (Some(true), Some(true), Some(false))
    );
    assert_eq!(
        meta.destructive, None,
        "a hint the server did not send stays undeclared"
    );
    let out = echo
        .call(ToolContext::for_call("c1"), r#"{"message":"hi there"}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "hi there");

    let add = tool(&set, "add").await;
    let out = add
        .call(ToolContext::for_call("c2"), r#"{"a":20,"b":22}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "42");

    // Image.
    let out = tool(&set, "tiny_image")
        .await
        .call(ToolContext::for_call("c3"), "{}")
        .await
        .unwrap();
    assert!(
        matches!(&out.blocks[..], [ContentBlock::Image { mime_type, .. }] if mime_type == "image/png"),
        "{out:?}"
    );

    // Structured.
    let out = tool(&set, "weather")
        .await
        .call(ToolContext::for_call("c4"), r#"{"city":"Paris"}"#)
        .await
        .unwrap();
    let structured = out.structured.expect("structured content");
    assert_eq!(structured["city"], "Paris");
    assert_eq!(structured["temperature"], 21.5);

    // isError.
    let out = tool(&set, "fail")
        .await
        .call(ToolContext::for_call("c5"), r#"{"reason":"disk on fire"}"#)
        .await
        .unwrap();
    assert!(out.is_error);
    assert!(
        out.llm_text().contains("disk on fire"),
        "{}",
        out.llm_text()
    );

    // Audio, resource link, embedded text and blob resources; a destructive tool.
    let mixed = tool(&set, "mixed").await;
    assert_eq!(mixed.declaration().meta.destructive, Some(true));
    let out = mixed.call(ToolContext::for_call("c6"), "").await.unwrap();
    assert!(
        matches!(&out.blocks[0], ContentBlock::Audio { mime_type, data } if mime_type == "audio/wav" && data == "UklGRg==")
    );
    assert!(
        matches!(&out.blocks[1], ContentBlock::ResourceLink { uri, name, .. } if uri == "file:///tmp/notes.txt" && name == "notes")
    );
    assert!(
        matches!(&out.blocks[2], ContentBlock::Resource { text: Some(t), .. } if t == "embedded text")
    );
    assert!(matches!(&out.blocks[3], ContentBlock::Resource { blob: Some(b), .. } if b == "AAEC"));

    // _meta reaches the output.
    let out = tool(&set, "with_meta")
        .await
        .call(ToolContext::for_call("c7"), "")
        .await
        .unwrap();
    assert_eq!(out.meta.expect("meta")["fixture/trace"], "abc123");

    // A long call times out and the server sees notifications/cancelled.
    let sleep = tool(&set, "sleep").await;
    let ctx =
        ToolContext::for_call("c8").with_deadline(Instant::now() + Duration::from_millis(300));
    let err = sleep.call(ctx, r#"{"seconds":30}"#).await.unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(marker)
            .is_ok_and(|s| s == "cancelled"))
        .await,
        "the server never saw the cancellation"
    );

    // Cancelling the context cancels the call too.
    let ctx = ToolContext::for_call("c9");
    let token = ctx.cancellation().clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let err = sleep.call(ctx, r#"{"seconds":30}"#).await.unwrap_err();
    assert!(matches!(err, ToolError::Cancelled), "{err}");
    canceller.await.unwrap();

    // tools/list_changed makes the next listing fresh.
    let out = tool(&set, "add_tool")
        .await
        .call(ToolContext::for_call("c10"), r#"{"name":"late_tool"}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "added late_tool");
    toolbelt_testkit::eventually_await(
        "the new tool showing up",
        Duration::from_secs(5),
        async || {
            let tools = set.tools(&ToolContext::new()).await.unwrap();
            tools.iter().any(|t| t.name() == "late_tool").then_some(())
        },
    )
    .await;
    let out = tool(&set, "late_tool")
        .await
        .call(ToolContext::for_call("c11"), "")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "I am late_tool");

    let pid = set.process_id();
    assert_eq!(pid.is_some(), set.config().transport.kind() == "stdio");
    set.close().await.unwrap();
    if let Some(pid) = pid {
        assert!(!process_exists(pid), "pid {pid} left behind");
    }
}

#[tokio::test]
async fn python_server_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    exercise(python_stdio(Some(&marker)), &marker).await;
}

#[tokio::test]
async fn python_server_over_sse() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    let server = HttpServer::python_on("sse", free_port(), Some(&marker));
    exercise(remote("sse", server.port, "/sse"), &marker).await;
}

#[tokio::test]
async fn python_server_over_streamable_http() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    let log = dir.path().join("sessions.log");
    let env = [
        ("TOOLBELT_CANCEL_MARKER", marker.display().to_string()),
        ("TOOLBELT_SESSION_LOG", log.display().to_string()),
    ];
    let server = HttpServer::python_with_env("streamable-http", free_port(), &env);
    exercise(remote("streamable-http", server.port, "/mcp"), &marker).await;
    // close() ended the session on the server (an HTTP DELETE), not just locally.
    assert_eq!(sessions_logged(&log), 1);
    assert_eq!(session_ends_logged(&log), 1);
}

#[tokio::test]
async fn prefix_and_filter_shape_what_is_listed() {
    let set = McpToolSet::builder("py", python_stdio(None))
        .prefix_tool_names(true)
        .filter(ToolFilter::include_names(["py_echo", "py_add"]))
        .build()
        .unwrap();
    let mut names = tool_names(&set).await;
    names.sort();
    assert_eq!(names, ["py_add", "py_echo"]);
    // The prefixed tool calls the server's own name.
    let echo = tool(&set, "py_echo").await;
    let out = echo
        .call(ToolContext::for_call("c"), r#"{"message":"x"}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "x");
    set.close().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_are_refused_before_reaching_the_server() {
    let set = McpToolSet::new("py", python_stdio(None));
    let echo = tool(&set, "echo").await;
    let err = echo
        .call(ToolContext::for_call("c"), "[1,2]")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    let err = echo
        .call(ToolContext::for_call("c"), "{not json")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not valid JSON"), "{err}");
    set.close().await.unwrap();
}
