//! The broker against HTTP servers reached as ad-hoc URLs: the Python echo fixture
//! (`tests/fixtures/broker_echo_server.py`) over streamable HTTP and SSE, and raw loopback
//! listeners for the cases where no connection may happen or no answer comes.

use crate::broker_support;
use crate::common;

use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolbelt_core::{Tool, ToolContext, ToolError, ToolSet};
use toolbelt_mcp::broker::{
    AdHocTransport, BrokerError, BrokerErrorRequest, ErrorDecision, HeaderInjectRequest, McpBroker,
    McpBrokerBuilder, Phase, Url,
};

use broker_support::{call, content, echo_server, injector, inspect, list};

/// The user the host application is acting for, as it would put it in the context.
struct CurrentUser(&'static str);

type Seen = Arc<Mutex<Vec<HeaderInjectRequest>>>;

/// A broker allowing ad-hoc URLs on 127.0.0.1 only, whose injector sends the current
/// user's tenant and records what it was asked.
fn loopback_broker(seen: &Seen) -> McpBrokerBuilder {
    let seen = seen.clone();
    McpBroker::builder()
        .allow_ad_hoc_http(true)
        .url_allow_list(|url: &Url| url.host_str() == Some("127.0.0.1"))
        .header_injector(injector(move |ctx, request| {
            seen.lock().unwrap().push(request.clone());
            let tenant = ctx.get::<CurrentUser>().map(|u| u.0.to_string());
            Ok(tenant
                .map(|t| vec![("X-Tenant".to_string(), t)])
                .unwrap_or_default())
        }))
}

fn as_user(user: &'static str) -> ToolContext {
    ToolContext::new().with_extension(CurrentUser(user))
}

/// A loopback listener that counts nothing but can say whether anyone connected.
fn silent_listener() -> (TcpListener, String) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    (listener, url)
}

fn nobody_connected(listener: &TcpListener) -> bool {
    matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_ad_hoc_url_is_listed_and_called_with_the_injected_header() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let seen = Seen::default();
    let broker = loopback_broker(&seen).build().unwrap();
    let ctx = as_user("alice");

    let listing = broker.list_tools(&ctx, list(&url)).await.unwrap();
    assert_eq!(listing.server, url);
    let names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "echo", "header", "ns.lookup", "sleep"]);
    let header = listing.tools.iter().find(|t| t.name == "header").unwrap();
    assert_eq!(header.selector, format!("{url}.header"));
    assert_eq!(header.signature, "header(name: string) -> {result: string}");
    let lookup = listing
        .tools
        .iter()
        .find(|t| t.name == "ns.lookup")
        .unwrap();
    assert_eq!(lookup.selector, format!("{url}.ns.lookup"));
    assert!(
        lookup
            .signature
            .starts_with("ns.lookup(key: string, exact?: boolean)"),
        "{}",
        lookup.signature
    );

    // The server sees the header the host injected for this user.
    let out = broker
        .call(&ctx, call(&header.selector, json!({"name": "x-tenant"})))
        .await
        .unwrap();
    assert!(!out.is_error);
    let result = &out.structured.as_ref().unwrap()["structured_content"]["result"];
    assert_eq!(result, "alice");

    // A dotted tool name through a URL selector, and the unambiguous fragment form.
    let out = broker
        .call(&ctx, call(&lookup.selector, json!({"key": "k"})))
        .await
        .unwrap();
    assert!(out.llm_text().contains("value of k"), "{}", out.llm_text());
    let out = broker
        .call(
            &ctx,
            call(&format!("{url}#tool=add"), json!({"a": 2, "b": 3})),
        )
        .await
        .unwrap();
    assert!(out.llm_text().contains('5'), "{}", out.llm_text());

    let seen = seen.lock().unwrap().clone();
    let phases: Vec<Phase> = seen.iter().map(|r| r.phase).collect();
    assert_eq!(
        phases,
        [
            Phase::ListTools,
            Phase::CallTool,
            Phase::CallTool,
            Phase::CallTool
        ]
    );
    assert!(seen.iter().all(|r| r.is_ad_hoc && r.target == url));
    assert_eq!(seen[1].tool.as_deref(), Some("header"));
    assert_eq!(seen[1].selector, format!("{url}.header"));
    assert_eq!(seen[3].tool.as_deref(), Some("add"));
    // Same user, same headers: one connection for everything.
    assert_eq!(broker.pool_stats().opened, 1);
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_injector_is_told_about_inspection_and_its_headers_win_over_the_models() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let seen = Seen::default();
    let broker = loopback_broker(&seen).build().unwrap();
    let ctx = as_user("bob");

    let mut args = inspect(&url, &["header"]);
    args.include_output_schema = Some(true);
    let details = broker.inspect_tools(&ctx, args).await.unwrap();
    assert!(details.tools[0].output_schema.is_some());
    assert_eq!(seen.lock().unwrap()[0].phase, Phase::InspectTools);
    assert_eq!(seen.lock().unwrap()[0].tool, None);

    // The model's own headers reach the server; a model cannot impersonate another tenant.
    let mut args = call(&format!("{url}.header"), json!({"name": "x-trace"}));
    args.headers = Some(
        [
            ("X-Trace".to_string(), "t-1".to_string()),
            ("x-tenant".to_string(), "mallory".to_string()),
        ]
        .into(),
    );
    let out = broker.call(&ctx, args.clone()).await.unwrap();
    assert!(content_or_structured(&out).contains("t-1"));
    args.arguments = json!({"name": "x-tenant"}).as_object().cloned().unwrap();
    let out = broker.call(&ctx, args).await.unwrap();
    assert!(
        content_or_structured(&out).contains("bob"),
        "{:?}",
        out.structured
    );
    broker.close().await.unwrap();
}

fn content_or_structured(out: &toolbelt_core::ToolOutput) -> String {
    let text = content(out);
    if text.is_empty() {
        out.structured.as_ref().unwrap().to_string()
    } else {
        text
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn different_users_never_share_a_connection() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let broker = loopback_broker(&Seen::default()).build().unwrap();
    let selector = format!("{url}.header");
    for user in ["alice", "bob", "alice"] {
        let out = broker
            .call(&as_user(user), call(&selector, json!({"name": "x-tenant"})))
            .await
            .unwrap();
        assert!(content_or_structured(&out).contains(user));
    }
    assert_eq!(broker.pool_stats().opened, 2);
    assert_eq!(broker.connections().len(), 2);
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_from_the_model_are_refused_before_connecting() {
    let (listener, url) = silent_listener();
    let broker = McpBroker::builder()
        .allow_ad_hoc_http(true)
        .deny_header("X-Tenant")
        .build()
        .unwrap();
    for name in ["Authorization", "COOKIE", "x-api-key", "x-tenant"] {
        let mut args = list(&url);
        args.headers = Some([(name.to_string(), "secret".to_string())].into());
        let err = broker
            .list_tools(&ToolContext::new(), args)
            .await
            .unwrap_err();
        assert!(
            matches!(err, BrokerError::ForbiddenHeader { .. }),
            "{name}: {err}"
        );
        let tool_error = ToolError::from(err);
        assert!(
            matches!(tool_error, ToolError::Rejected { .. }),
            "{tool_error:?}"
        );
    }
    assert!(nobody_connected(&listener));
    assert_eq!(broker.pool_stats().opened, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn ad_hoc_urls_are_off_by_default() {
    let (listener, url) = silent_listener();
    let broker = McpBroker::builder()
        .server("everything", common::everything_stdio())
        .build()
        .unwrap();
    let err = broker
        .list_tools(&ToolContext::new(), list(&url))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::AdHocDisabled { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("use a server name from mcp_list_servers (everything)"),
        "{err}"
    );
    let err = broker
        .call(&ToolContext::new(), call(&format!("{url}.echo"), json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::AdHocDisabled { .. }), "{err}");
    // Through the tool interface it is a rejection the model can read.
    let tools = broker.tools(&ToolContext::new()).await.unwrap();
    let err = tools[1]
        .call(ToolContext::new(), &json!({"selector": url}).to_string())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
    assert!(nobody_connected(&listener));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_allow_list_decides_before_any_connection() {
    let (listener, url) = silent_listener();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let broker = {
        let asked = asked.clone();
        McpBroker::builder()
            .allow_ad_hoc_http(true)
            .url_allow_list(move |url: &Url| {
                asked.lock().unwrap().push(url.to_string());
                url.path().starts_with("/allowed/")
            })
            .build()
            .unwrap()
    };
    let err = broker
        .list_tools(&ToolContext::new(), list(&url))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::UrlNotAllowed { .. }), "{err}");
    assert_eq!(*asked.lock().unwrap(), [url]);
    assert!(nobody_connected(&listener));
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_is_reachable_when_the_model_asks_for_it() {
    let server = echo_server("sse");
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let broker = loopback_broker(&Seen::default()).build().unwrap();
    let mut args = list(&url);
    args.transport = Some(AdHocTransport::Sse);
    let listing = broker.list_tools(&as_user("carol"), args).await.unwrap();
    assert!(listing.tools.iter().any(|t| t.name == "header"));
    let mut args = call(&format!("{url}.header"), json!({"name": "x-tenant"}));
    args.transport = Some(AdHocTransport::Sse);
    let out = broker.call(&as_user("carol"), args).await.unwrap();
    assert!(
        content_or_structured(&out).contains("carol"),
        "{:?}",
        out.structured
    );
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn urls_with_a_query_are_listed_in_the_fragment_form_and_still_callable() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/mcp?team=a", server.port);
    let broker = loopback_broker(&Seen::default()).build().unwrap();
    let listing = broker
        .list_tools(&ToolContext::new(), list(&url))
        .await
        .unwrap();
    let echo = listing.tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.selector, format!("{url}#tool=echo"));
    let out = broker
        .call(
            &ToolContext::new(),
            call(&echo.selector, json!({"message": "q"})),
        )
        .await
        .unwrap();
    assert!(content_or_structured(&out).contains('q'));
    // The dotted form is ambiguous here and refused with the way out.
    let err = broker
        .call(&ToolContext::new(), call(&format!("{url}.echo"), json!({})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("URL#tool=TOOL"), "{err}");
    broker.close().await.unwrap();
}

/// A broker whose interceptor turns a 401 into a message about the host application.
fn guarded_broker(
    decision: fn(String) -> ErrorDecision,
    calls: &Arc<Mutex<Vec<String>>>,
) -> McpBroker {
    let calls = calls.clone();
    McpBroker::builder()
        .allow_ad_hoc_http(true)
        .error_interceptor(
            move |_ctx: &ToolContext, request: &BrokerErrorRequest<'_>| {
                calls.lock().unwrap().push(format!(
                    "{} {:?}",
                    request.phase,
                    request.http_status()
                ));
                if request.http_status() == Some(401) {
                    decision("authorise the MCP server in the host application first".to_string())
                } else {
                    ErrorDecision::Pass
                }
            },
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_error_interceptor_wraps_a_401_for_the_model() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/locked/mcp", server.port);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let broker = guarded_broker(ErrorDecision::Wrap, &calls);

    let err = broker
        .list_tools(&ToolContext::new(), list(&url))
        .await
        .unwrap_err();
    match &err {
        BrokerError::Intercepted { message, source } => {
            assert_eq!(
                message,
                "authorise the MCP server in the host application first"
            );
            assert!(source.to_string().contains(&url), "{source}");
        }
        other => panic!("expected Intercepted, got {other:?}"),
    }
    assert_eq!(*calls.lock().unwrap(), ["list_tools Some(401)"]);
    // A failed connection keeps no slot.
    assert!(broker.connections().is_empty());

    let tools = broker.tools(&ToolContext::new()).await.unwrap();
    let err = tools[3]
        .call(
            ToolContext::new(),
            &json!({"selector": format!("{url}.echo"), "arguments": {}}).to_string(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.for_model(),
        "Error: authorise the MCP server in the host application first"
    );
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_error_interceptor_can_handle_a_401_as_a_result() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/locked/mcp", server.port);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let broker = guarded_broker(ErrorDecision::Handle, &calls);
    let tools = broker.tools(&ToolContext::new()).await.unwrap();
    let out = tools[1]
        .call(ToolContext::new(), &json!({"selector": url}).to_string())
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(
        out.llm_text(),
        "authorise the MCP server in the host application first"
    );
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_from_the_host_opens_the_guarded_server() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/locked/mcp", server.port);
    let broker = McpBroker::builder()
        .allow_ad_hoc_http(true)
        .header_injector(injector(|_ctx, request| {
            // Tokens only for the host the application trusts.
            let trusted = request.is_ad_hoc && request.target.starts_with("http://127.0.0.1:");
            Ok(if trusted {
                vec![("Authorization".into(), "Bearer open-sesame".into())]
            } else {
                Vec::new()
            })
        }))
        .build()
        .unwrap();
    let out = broker
        .call(
            &ToolContext::new(),
            call(&format!("{url}.header"), json!({"name": "authorization"})),
        )
        .await
        .unwrap();
    assert!(content_or_structured(&out).contains("Bearer open-sesame"));
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_header_injector_stops_the_operation() {
    let (listener, url) = silent_listener();
    let broker = McpBroker::builder()
        .allow_ad_hoc_http(true)
        .header_injector(injector(|_ctx, _request| {
            Err(ToolError::rejected("no session for this user"))
        }))
        .build()
        .unwrap();
    let err = broker
        .list_tools(&ToolContext::new(), list(&url))
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::HeaderInjector { .. }), "{err}");
    assert!(
        err.to_string().contains("no session for this user"),
        "{err}"
    );
    assert!(nobody_connected(&listener));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_is_bounded_by_the_operation_timeout() {
    // It accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let broker = McpBroker::builder()
        .allow_ad_hoc_http(true)
        .operation_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let err = broker
        .list_tools(&ToolContext::new(), list(&url))
        .await
        .unwrap_err();
    // Either the whole-operation bound or the connection's own step limit (the same 500 ms)
    // fires first; both say so.
    assert!(err.to_string().contains("timed out after 500ms"), "{err:?}");
    broker.close().await.unwrap();
    held.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_call_is_bounded_by_the_operation_timeout() {
    let server = echo_server("streamable-http");
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let broker = loopback_broker(&Seen::default())
        .operation_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let tools = broker.tools(&ToolContext::new()).await.unwrap();
    let err = tools[3]
        .call(
            ToolContext::new(),
            &json!({"selector": format!("{url}.sleep"), "arguments": {"seconds": 60}}).to_string(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err:?}");
    // The connection survives a timed-out call.
    let out = broker
        .call(
            &ToolContext::new(),
            call(&format!("{url}.echo"), json!({"message": "after"})),
        )
        .await
        .unwrap();
    assert!(content_or_structured(&out).contains("after"));
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_error_interceptor_sees_a_401_over_sse_too() {
    let server = echo_server("sse");
    let url = format!("http://127.0.0.1:{}/locked/sse", server.port);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let broker = guarded_broker(ErrorDecision::Wrap, &calls);
    let mut args = list(&url);
    args.transport = Some(AdHocTransport::Sse);
    let err = broker
        .list_tools(&ToolContext::new(), args)
        .await
        .unwrap_err();
    assert!(matches!(err, BrokerError::Intercepted { .. }), "{err:?}");
    assert_eq!(*calls.lock().unwrap(), ["list_tools Some(401)"]);
    broker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_named_http_server_gets_injected_headers_but_never_the_models() {
    let server = echo_server("streamable-http");
    let seen = Seen::default();
    let broker = loopback_broker(&seen)
        .allow_ad_hoc_http(false)
        .server(
            "echo",
            toolbelt_mcp::ConnectionConfig::new(toolbelt_mcp::TransportConfig::streamable_http(
                format!("http://127.0.0.1:{}/mcp", server.port),
            )),
        )
        .build()
        .unwrap();
    let ctx = as_user("dora");
    let out = broker
        .call(&ctx, call("echo.header", json!({"name": "x-tenant"})))
        .await
        .unwrap();
    assert!(content_or_structured(&out).contains("dora"));
    let mut args = call("echo.header", json!({"name": "x-trace"}));
    args.headers = Some([("X-Trace".to_string(), "from-the-model".to_string())].into());
    let out = broker.call(&ctx, args).await.unwrap();
    assert!(
        content_or_structured(&out).contains("(absent)"),
        "{:?}",
        out.structured
    );
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|r| !r.is_ad_hoc && r.target == "echo"),
        "{seen:?}"
    );
    broker.close().await.unwrap();
}
