//! Static headers per server and the per-request header injector, seen by a real HTTP server
//! (the Python fixture's `header` tool echoes a header of the request that carried the call).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use futures::FutureExt;
use toolbelt_core::{ToolContext, ToolError, ToolSet};
use toolbelt_exec::{Executor, Registry, ToolSetRefresh};
use toolbelt_mcp::{ConnectionConfig, FailureKind, McpToolSet};

/// The signed-in user of a request, as an application would put it in the context.
#[derive(Clone)]
struct User(&'static str);

/// Asks the server which value the request carrying this call had for `header`.
async fn header_seen(executor: &Executor, ctx: ToolContext, header: &str) -> String {
    let args = serde_json::json!({ "name": header }).to_string();
    executor
        .invoke_tool(ctx, "header", &args)
        .await
        .expect("the header tool runs")
        .llm_text()
}

async fn static_and_injected_headers_reach_the_server(transport: &str, path: &str) {
    let server = HttpServer::python(transport);
    let config: ConnectionConfig = remote(transport, server.port, path)
        .with_header("X-Team", "blue")
        .with_header("X-Region", "north");
    let injected = Arc::new(AtomicUsize::new(0));
    let counter = injected.clone();
    let set = McpToolSet::builder("py", config)
        .header_injector(move |ctx: &ToolContext| {
            counter.fetch_add(1, Ordering::Relaxed);
            let user = ctx.get::<User>().map(|u| u.0);
            async move {
                let mut headers = Vec::new();
                if let Some(user) = user {
                    headers.push(("X-User".to_string(), user.to_string()));
                    // A per-request header wins over the static one of the same name.
                    if user == "carol" {
                        headers.push(("X-Region".to_string(), "south".to_string()));
                    }
                }
                Ok(headers)
            }
            .boxed()
        })
        .build()
        .unwrap();
    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(Arc::new(set.clone()), ToolSetRefresh::Cached)
        .unwrap();
    registry.snapshot(&ToolContext::new()).await;
    let executor = Executor::new(registry);

    let alice = ToolContext::for_call("a").with_extension(User("alice"));
    assert_eq!(
        header_seen(&executor, alice.clone(), "x-user").await,
        "alice"
    );
    assert_eq!(header_seen(&executor, alice, "x-team").await, "blue");
    let bob = ToolContext::for_call("b").with_extension(User("bob"));
    assert_eq!(header_seen(&executor, bob.clone(), "x-user").await, "bob");
    assert_eq!(header_seen(&executor, bob, "x-region").await, "north");
    let carol = ToolContext::for_call("c").with_extension(User("carol"));
    assert_eq!(header_seen(&executor, carol, "x-region").await, "south");
    // No user, no per-request header; the static ones stay.
    let nobody = ToolContext::for_call("d");
    assert_eq!(header_seen(&executor, nobody.clone(), "x-user").await, "");
    assert_eq!(header_seen(&executor, nobody, "x-team").await, "blue");
    // The injector ran per request, and the private `_meta` entry that carries its headers
    // to the transport never reaches the server.
    assert!(injected.load(Ordering::Relaxed) >= 7);
    let keys = executor
        .invoke_tool(
            ToolContext::for_call("e").with_extension(User("erin")),
            "meta_keys",
            "{}",
        )
        .await
        .unwrap()
        .llm_text();
    assert!(keys.contains("progressToken"), "{keys}");
    assert!(!keys.contains("request-headers"), "{keys}");
    set.close().await.unwrap();
}

#[tokio::test]
async fn static_and_injected_headers_reach_a_streamable_http_server() {
    static_and_injected_headers_reach_the_server("streamable-http", "/mcp").await;
}

#[tokio::test]
async fn static_and_injected_headers_reach_an_sse_server() {
    static_and_injected_headers_reach_the_server("sse", "/sse").await;
}

/// Starts the fixture requiring `Authorization: Bearer s3cret`.
fn guarded_server(transport: &str) -> HttpServer {
    HttpServer::python_with_env(
        transport,
        free_port(),
        &[(
            "TOOLBELT_REQUIRE_HEADER",
            "Authorization: Bearer s3cret".to_string(),
        )],
    )
}

async fn token_checks(transport: &str, path: &str) {
    let server = guarded_server(transport);

    // A static Authorization header gets in.
    let config = remote(transport, server.port, path).with_header("Authorization", "Bearer s3cret");
    let set = McpToolSet::new("guarded", config);
    let out = set
        .call(
            &ToolContext::new(),
            "echo",
            Some(serde_json::from_str(r#"{"message":"in"}"#).unwrap()),
        )
        .await
        .expect("authorized");
    assert_eq!(out.llm_text(), "in");
    set.close().await.unwrap();

    // So does a token chosen by the injector for the connecting context.
    let set = McpToolSet::builder("guarded", remote(transport, server.port, path))
        .header_injector(|ctx: &ToolContext| {
            let token = ctx.get::<User>().map(|u| format!("Bearer {}", u.0));
            async move {
                Ok(token
                    .map(|t| ("Authorization".to_string(), t))
                    .into_iter()
                    .collect())
            }
            .boxed()
        })
        .build()
        .unwrap();
    let ctx = ToolContext::new().with_extension(User("s3cret"));
    set.init(&ctx).await.expect("authorized by the injector");
    set.close().await.unwrap();

    // A wrong token is a configuration error: reported at once, never retried.
    let config = remote(transport, server.port, path).with_header("Authorization", "Bearer nope");
    let set = McpToolSet::builder("guarded", config)
        .session_reconnect(5)
        .build()
        .unwrap();
    let err = set.init(&ToolContext::new()).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Configuration, "{err}");
    assert!(err.to_string().contains("\"guarded\""), "{err}");
    assert!(err.to_string().contains("401"), "{err}");
    assert_eq!(set.reconnect_count(), 0);
}

#[tokio::test]
async fn a_bearer_token_opens_a_guarded_streamable_http_server_and_a_wrong_one_is_not_retried() {
    token_checks("streamable-http", "/mcp").await;
}

#[tokio::test]
async fn a_bearer_token_opens_a_guarded_sse_server_and_a_wrong_one_is_not_retried() {
    token_checks("sse", "/sse").await;
}

#[tokio::test]
async fn a_failing_injector_fails_the_call_with_a_clear_error() {
    let server = HttpServer::python("streamable-http");
    let set = McpToolSet::builder("py", remote("http", server.port, "/mcp"))
        .header_injector(|ctx: &ToolContext| {
            let signed_in = ctx.get::<User>().is_some();
            async move {
                if signed_in {
                    Ok(Vec::new())
                } else {
                    Err(ToolError::failed("nobody is signed in"))
                }
            }
            .boxed()
        })
        .build()
        .unwrap();
    set.init(&ToolContext::new().with_extension(User("x")))
        .await
        .unwrap();
    let err = set
        .call(&ToolContext::new(), "echo", None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("header injector failed")
            && err.to_string().contains("nobody is signed in"),
        "{err}"
    );
    set.close().await.unwrap();
}
