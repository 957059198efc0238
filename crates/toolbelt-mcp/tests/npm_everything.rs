//! Against `@modelcontextprotocol/server-everything` from npm over stdio, SSE and streamable
//! HTTP: listing, arguments, images, structured results, isError, timeouts and close.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use toolbelt_core::{ContentBlock, Tool, ToolContext, ToolError, ToolSet};
use toolbelt_mcp::{ConnectionConfig, McpToolSet};

/// Everything a user relies on, against one running server.
async fn exercise(config: ConnectionConfig) {
    let set = McpToolSet::new("everything", config);
    set.init(&ToolContext::new()).await.expect("init");

    let names = tool_names(&set).await;
    for expected in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected} missing from {names:?}"
        );
    }

    // Arguments pass through.
    let echo = tool(&set, "echo").await;
    assert!(
        echo.declaration()
            .required_properties()
            .contains(&"message")
    );
    let out = echo
        .call(ToolContext::for_call("c1"), r#"{"message":"hello"}"#)
        .await
        .unwrap();
    assert!(out.llm_text().contains("hello"), "{}", out.llm_text());
    assert!(!out.is_error);

    let sum = tool(&set, "get-sum").await;
    let out = sum
        .call(ToolContext::for_call("c2"), r#"{"a":2,"b":40}"#)
        .await
        .unwrap();
    assert!(out.llm_text().contains("42"), "{}", out.llm_text());

    // An image result.
    let image = tool(&set, "get-tiny-image").await;
    let out = image.call(ToolContext::for_call("c3"), "").await.unwrap();
    let png = out.blocks.iter().find_map(|b| match b {
        ContentBlock::Image { mime_type, data } => Some((mime_type.clone(), data.len())),
        _ => None,
    });
    let (mime, len) = png.expect("an image block");
    assert_eq!(mime, "image/png");
    assert!(len > 0);

    // A structured result.
    let structured = tool(&set, "get-structured-content").await;
    let out = structured
        .call(ToolContext::for_call("c4"), r#"{"location":"New York"}"#)
        .await
        .unwrap();
    let value = out.structured.expect("structured content");
    assert!(value.get("temperature").is_some(), "{value}");

    // isError: arguments the server rejects come back as a result-level failure.
    let out = sum
        .call(ToolContext::for_call("c5"), r#"{"a":"two","b":1}"#)
        .await
        .unwrap();
    assert!(out.is_error, "{out:?}");

    // A long call is cut off by the context's deadline and returns in time.
    let long = tool(&set, "trigger-long-running-operation").await;
    let ctx =
        ToolContext::for_call("c6").with_deadline(Instant::now() + Duration::from_millis(300));
    let err = long
        .call(ctx, r#"{"duration":30,"steps":3}"#)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    // The session is still usable afterwards.
    let out = echo
        .call(
            ToolContext::for_call("c7"),
            &json!({"message": "after"}).to_string(),
        )
        .await
        .unwrap();
    assert!(out.llm_text().contains("after"));

    let pid = set.process_id();
    set.close().await.unwrap();
    if let Some(pid) = pid {
        assert!(
            !process_exists(pid),
            "the server process {pid} is still there"
        );
    }
    // A closed set says so.
    let err = echo
        .call(ToolContext::for_call("c8"), r#"{"message":"x"}"#)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
}

#[tokio::test]
async fn everything_server_over_stdio() {
    exercise(everything_stdio()).await;
}

#[tokio::test]
async fn everything_server_over_sse() {
    let server = HttpServer::everything("sse");
    exercise(remote("sse", server.port, "/sse")).await;
}

#[tokio::test]
async fn everything_server_over_streamable_http() {
    let server = HttpServer::everything("streamableHttp");
    exercise(remote("http", server.port, "/mcp")).await;
}

#[tokio::test]
async fn stdio_close_reaps_a_server_that_ignores_stdin_eof() {
    let set = McpToolSet::new("everything", everything_stdio());
    set.init(&ToolContext::new()).await.unwrap();
    let pid = set.process_id().expect("a child pid");
    assert!(process_exists(pid));
    set.close().await.unwrap();
    assert!(!process_exists(pid), "pid {pid} left behind");
    // Closing twice is fine.
    set.close().await.unwrap();
}
