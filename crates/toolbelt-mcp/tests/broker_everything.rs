//! The broker against the npm `server-everything`, configured by name over stdio: the
//! discovery flow, its errors, and the life of pooled connections.

use crate::broker_support;
use crate::common;

use std::time::Duration;

use serde_json::json;
use toolbelt_core::{Tool, ToolContext, ToolError, ToolSet};
use toolbelt_mcp::broker::{AdHocTransport, BrokerError, ListToolsArgs, McpBroker};
use toolbelt_mcp::{ConnectionConfig, McpServersFile, TransportConfig};

use broker_support::{call, content, inspect, list};
use common::{eventually, everything_stdio, process_exists};

fn broker() -> McpBroker {
    McpBroker::builder()
        .server(
            "everything",
            everything_stdio().with_description("The MCP reference server's test tools"),
        )
        .build()
        .expect("a valid broker")
}

fn pid_of(broker: &McpBroker, target: &str) -> u32 {
    broker
        .connections()
        .into_iter()
        .find(|c| c.target == target)
        .and_then(|c| c.pid)
        .unwrap_or_else(|| panic!("no open connection to {target}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_discovers_inspects_and_calls_a_tool_of_a_named_stdio_server() {
    let broker = broker();
    let ctx = ToolContext::new();

    let servers = broker.list_servers();
    assert_eq!(servers.servers.len(), 1);
    assert_eq!(servers.servers[0].name, "everything");
    assert_eq!(servers.servers[0].transport, "stdio");
    assert_eq!(
        servers.servers[0].description.as_deref(),
        Some("The MCP reference server's test tools")
    );

    let listing = broker.list_tools(&ctx, list("everything")).await.unwrap();
    assert_eq!(listing.server, "everything");
    let names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "tools are sorted by name");
    let sum = listing.tools.iter().find(|t| t.name == "get-sum").unwrap();
    assert_eq!(sum.selector, "everything.get-sum");
    assert!(
        sum.signature.starts_with("get-sum(a: number, b: number)"),
        "{}",
        sum.signature
    );
    let echo = listing.tools.iter().find(|t| t.name == "echo").unwrap();
    assert!(
        echo.signature.starts_with("echo(message: string)"),
        "{}",
        echo.signature
    );
    assert!(
        echo.description
            .as_deref()
            .is_some_and(|d| !d.contains('\n'))
    );

    // Duplicates are removed; the order asked is kept; output schemas only on request.
    let details = broker
        .inspect_tools(&ctx, inspect("everything", &["get-sum", "echo", "get-sum"]))
        .await
        .unwrap();
    let names: Vec<&str> = details.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["get-sum", "echo"]);
    assert_eq!(details.tools[0].input_schema["required"], json!(["a", "b"]));
    assert!(details.tools.iter().all(|t| t.output_schema.is_none()));
    let mut with_output = inspect("everything", &["get-structured-content"]);
    with_output.include_output_schema = Some(true);
    let details = broker.inspect_tools(&ctx, with_output).await.unwrap();
    assert!(details.tools[0].output_schema.is_some());

    let out = broker
        .call(&ctx, call("everything.get-sum", json!({"a": 2, "b": 40})))
        .await
        .unwrap();
    assert!(!out.is_error);
    assert!(content(&out).contains("42"), "{}", content(&out));

    // Structured results come back as structured_content instead of text.
    let out = broker
        .call(
            &ctx,
            call(
                "everything.get-structured-content",
                json!({"location": "New York"}),
            ),
        )
        .await
        .unwrap();
    let structured = out.structured.unwrap();
    assert!(
        structured["structured_content"]["temperature"].is_number(),
        "{structured}"
    );
    assert!(structured.get("content").is_none(), "{structured}");

    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_four_tools_work_through_the_tool_interface() {
    let broker = broker();
    let tools = broker.tools(&ToolContext::new()).await.unwrap();
    let by_name = |name: &str| tools.iter().find(|t| t.name() == name).unwrap().clone();

    let out = by_name("mcp_list_servers")
        .call(ToolContext::for_call("c1"), "")
        .await
        .unwrap();
    assert!(
        out.llm_text().contains(r#""name":"everything""#),
        "{}",
        out.llm_text()
    );

    let out = by_name("mcp_list_tools")
        .call(ToolContext::for_call("c2"), r#"{"selector":"everything"}"#)
        .await
        .unwrap();
    assert!(
        out.llm_text().contains("everything.echo"),
        "{}",
        out.llm_text()
    );

    let out = by_name("mcp_call")
        .call(
            ToolContext::for_call("c3"),
            r#"{"selector":"everything.echo","arguments":{"message":"via the broker"}}"#,
        )
        .await
        .unwrap();
    assert!(
        out.llm_text().contains("via the broker"),
        "{}",
        out.llm_text()
    );

    // A missing required argument is a fixable mistake naming each missing property.
    let err = by_name("mcp_call")
        .call(
            ToolContext::for_call("c4"),
            r#"{"selector":"everything.get-sum","arguments":{}}"#,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
    assert!(
        err.to_string().contains("everything.get-sum: a, b"),
        "{err}"
    );

    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_tools_are_listed_together_and_missing_arguments_are_named() {
    let broker = broker();
    let ctx = ToolContext::new();

    let err = broker
        .inspect_tools(&ctx, inspect("everything", &["echo", "nope", "Echo"]))
        .await
        .unwrap_err();
    match &err {
        BrokerError::UnknownTools {
            target,
            unknown,
            available,
        } => {
            assert_eq!(target, "everything");
            // Names are exact and case-sensitive: "Echo" is not "echo".
            assert_eq!(unknown, &["nope", "Echo"]);
            assert!(available.iter().any(|t| t == "echo"));
        }
        other => panic!("expected UnknownTools, got {other:?}"),
    }
    assert!(err.to_string().contains(r#"named "nope", "Echo""#), "{err}");

    let err = broker
        .inspect_tools(&ctx, inspect("everything", &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::NoToolsNamed), "{err}");

    let err = broker
        .call(&ctx, call("everything.nope", json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::UnknownTools { .. }), "{err}");

    let err = broker
        .call(&ctx, call("everything.get-sum", json!({"b": 1})))
        .await
        .unwrap_err();
    match err {
        BrokerError::MissingArguments { selector, missing } => {
            assert_eq!(selector, "everything.get-sum");
            assert_eq!(missing, ["a"]);
        }
        other => panic!("expected MissingArguments, got {other:?}"),
    }

    let err = broker
        .call(&ctx, call("elsewhere.echo", json!({})))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("known servers: everything"),
        "{err}"
    );
    let err = broker
        .list_tools(&ctx, list("everything.echo"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("names a tool"), "{err}");

    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn named_servers_ignore_the_models_transport_and_headers() {
    let broker = broker();
    let args = ListToolsArgs {
        selector: "everything".into(),
        transport: Some(AdHocTransport::Sse),
        headers: Some([("Authorization".to_string(), "Bearer stolen".to_string())].into()),
    };
    let listing = broker.list_tools(&ToolContext::new(), args).await.unwrap();
    assert!(listing.tools.iter().any(|t| t.name == "echo"));
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_longest_configured_server_name_wins_for_dotted_names() {
    // "acme" is never started: its command does not exist, so reaching it would fail.
    let broker = McpBroker::builder()
        .server(
            "acme",
            ConnectionConfig::new(TransportConfig::stdio("toolbelt-no-such-command", [""; 0])),
        )
        .server("acme.tools", everything_stdio())
        .build()
        .unwrap();
    let ctx = ToolContext::new();
    let listing = broker.list_tools(&ctx, list("acme.tools")).await.unwrap();
    let echo = listing.tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.selector, "acme.tools.echo");
    let out = broker
        .call(&ctx, call("acme.tools.echo", json!({"message": "dotted"})))
        .await
        .unwrap();
    assert!(content(&out).contains("dotted"));
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_come_from_an_mcp_servers_file() {
    let entry = common::everything_entry();
    let file = McpServersFile::parse(&format!(
        r#"{{"mcpServers": {{"everything": {{"command": "node", "args": [{:?}, "stdio"]}}}}}}"#,
        entry.display().to_string()
    ))
    .unwrap();
    let broker = McpBroker::builder()
        .servers_from_file(&file)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(broker.list_servers().servers[0].name, "everything");
    assert!(broker.list_servers().servers[0].description.is_none());
    let out = broker
        .call(
            &ToolContext::new(),
            call("everything.echo", json!({"message": "from a file"})),
        )
        .await
        .unwrap();
    assert!(content(&out).contains("from a file"));
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_connection_serves_every_operation_on_a_target() {
    let broker = broker();
    let ctx = ToolContext::new();
    broker.list_tools(&ctx, list("everything")).await.unwrap();
    let pid = pid_of(&broker, "everything");
    broker
        .inspect_tools(&ctx, inspect("everything", &["echo"]))
        .await
        .unwrap();
    broker
        .call(&ctx, call("everything.echo", json!({"message": "again"})))
        .await
        .unwrap();
    assert_eq!(pid_of(&broker, "everything"), pid);
    assert_eq!(broker.pool_stats().opened, 1);
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_the_broker_ends_its_servers_and_later_operations_fail() {
    let broker = broker();
    let ctx = ToolContext::new();
    broker.list_tools(&ctx, list("everything")).await.unwrap();
    let pid = pid_of(&broker, "everything");
    broker.close().await.unwrap();
    assert!(
        !process_exists(pid),
        "the server process {pid} outlived the broker"
    );
    assert!(broker.connections().is_empty());
    let err = broker
        .list_tools(&ctx, list("everything"))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::Closed), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_least_recently_used_connection_is_closed_to_make_room() {
    let broker = McpBroker::builder()
        .server("first", everything_stdio())
        .server("second", everything_stdio())
        .max_connections(1)
        .build()
        .unwrap();
    let ctx = ToolContext::new();
    broker.list_tools(&ctx, list("first")).await.unwrap();
    let first = pid_of(&broker, "first");
    broker.list_tools(&ctx, list("second")).await.unwrap();
    let open: Vec<String> = broker.connections().into_iter().map(|c| c.target).collect();
    assert_eq!(open, ["second"]);
    assert_eq!(broker.pool_stats().evicted, 1);
    assert!(
        eventually(Duration::from_secs(15), || !process_exists(first)).await,
        "the evicted server {first} is still running"
    );
    // Using the evicted server again opens a new connection (and evicts the other).
    broker.list_tools(&ctx, list("first")).await.unwrap();
    assert_ne!(pid_of(&broker, "first"), first);
    assert_eq!(broker.pool_stats().opened, 3);
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let broker = McpBroker::builder()
        .server("everything", everything_stdio())
        .idle_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    broker
        .list_tools(&ToolContext::new(), list("everything"))
        .await
        .unwrap();
    let pid = pid_of(&broker, "everything");
    assert!(
        eventually(Duration::from_secs(20), || broker.connections().is_empty()
            && !process_exists(pid))
        .await,
        "the idle connection was not closed"
    );
    assert_eq!(broker.pool_stats().idle_closed, 1);
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_fails_clearly_and_keeps_no_slot() {
    let broker = McpBroker::builder()
        .server(
            "broken",
            ConnectionConfig::new(TransportConfig::stdio("toolbelt-no-such-command", [""; 0])),
        )
        .build()
        .unwrap();
    let err = broker
        .list_tools(&ToolContext::new(), list("broken"))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::Remote(_)), "{err:?}");
    assert!(err.to_string().contains("broken"), "{err}");
    assert!(broker.connections().is_empty());
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_evicted_connection_is_closed_only_after_its_running_call_ends() {
    let broker = McpBroker::builder()
        .server("first", everything_stdio())
        .server("second", everything_stdio())
        .max_connections(1)
        .build()
        .unwrap();
    let slow = {
        let broker = broker.clone();
        tokio::spawn(async move {
            broker
                .call(
                    &ToolContext::new(),
                    call(
                        "first.trigger-long-running-operation",
                        json!({"duration": 3, "steps": 3}),
                    ),
                )
                .await
        })
    };
    // The process exists once the call holds its connection (it connects under its lease).
    assert!(
        eventually(Duration::from_secs(20), || broker
            .connections()
            .iter()
            .any(|c| c.target == "first" && c.pid.is_some()))
        .await
    );
    let first = pid_of(&broker, "first");
    broker
        .list_tools(&ToolContext::new(), list("second"))
        .await
        .unwrap();
    assert_eq!(broker.pool_stats().evicted, 1);
    // Evicted from the pool, yet its call runs to the end.
    let out = slow
        .await
        .unwrap()
        .expect("the running call survives eviction");
    assert!(!out.is_error, "{}", out.llm_text());
    assert!(
        eventually(Duration::from_secs(15), || !process_exists(first)).await,
        "the evicted server {first} is still running after its call ended"
    );
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_executor_validates_and_runs_the_broker_tools() {
    use std::sync::Arc;
    use toolbelt_exec::{Executor, Registry, ToolSetRefresh};

    let broker = broker();
    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(Arc::new(broker.clone()), ToolSetRefresh::Cached)
        .unwrap();
    registry.snapshot(&ToolContext::new()).await;
    let executor = Executor::new(registry);

    // Strict-mode models send every optional field, as null.
    let out = executor
        .invoke_tool(
            ToolContext::for_call("c1"),
            "mcp_call",
            r#"{"selector":"everything.echo","arguments":{"message":"hi"},"transport":null,"headers":null}"#,
        )
        .await
        .unwrap();
    assert!(out.llm_text().contains("hi"), "{}", out.llm_text());
    let out = executor
        .invoke_tool(
            ToolContext::for_call("c2"),
            "mcp_inspect_tools",
            r#"{"selector":"everything","tools":["echo"],"include_output_schema":null}"#,
        )
        .await
        .unwrap();
    assert!(
        out.llm_text().contains("input_schema"),
        "{}",
        out.llm_text()
    );

    // Unknown fields are refused by the strict schema before the broker runs.
    let err = executor
        .invoke_tool(
            ToolContext::for_call("c3"),
            "mcp_list_tools",
            r#"{"selector":"everything","server":"everything"}"#,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("server"), "{err}");
    let err = executor
        .invoke_tool(
            ToolContext::for_call("c4"),
            "mcp_call",
            r#"{"selector":"everything.echo"}"#,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("arguments"), "{err}");
    broker.close().await.unwrap();
}
