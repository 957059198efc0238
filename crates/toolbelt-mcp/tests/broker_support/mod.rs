//! Helpers of the broker tests: the Python echo server and short ways to run operations.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use toolbelt_core::ToolOutput;
use toolbelt_mcp::broker::{CallArgs, InspectToolsArgs, ListToolsArgs};

use super::common::{HttpServer, free_port, python_fixture};

/// The broker echo fixture over `transport` (`streamable-http` or `sse`) on a free port.
pub fn echo_server(transport: &str) -> HttpServer {
    // Fails the test with the install command when the `mcp` SDK is missing.
    python_fixture();
    let port = free_port();
    let mut command = Command::new(toolbelt_testkit::python());
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broker_echo_server.py"))
        .arg(transport)
        .arg(port.to_string());
    HttpServer::start(command, port)
}

/// `mcp_list_tools` arguments for `selector`.
pub fn list(selector: &str) -> ListToolsArgs {
    ListToolsArgs {
        selector: selector.to_string(),
        ..ListToolsArgs::default()
    }
}

/// `mcp_inspect_tools` arguments for `selector` and `tools`.
pub fn inspect(selector: &str, tools: &[&str]) -> InspectToolsArgs {
    InspectToolsArgs {
        selector: selector.to_string(),
        tools: tools.iter().map(|t| t.to_string()).collect(),
        ..InspectToolsArgs::default()
    }
}

/// `mcp_call` arguments for `selector` with `arguments` (a JSON object).
pub fn call(selector: &str, arguments: Value) -> CallArgs {
    CallArgs {
        selector: selector.to_string(),
        arguments: arguments
            .as_object()
            .cloned()
            .expect("arguments are an object"),
        ..CallArgs::default()
    }
}

/// The `content` text of an `mcp_call` output.
pub fn content(out: &ToolOutput) -> String {
    let structured = out
        .structured
        .as_ref()
        .expect("mcp_call returns structured output");
    structured["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What a header injector returns.
pub type InjectedHeaders =
    futures::future::BoxFuture<'static, Result<Vec<(String, String)>, toolbelt_core::ToolError>>;

/// A header injector from a function that decides at once (the broker's hook is async).
pub fn injector(
    decide: impl Fn(
        &toolbelt_core::ToolContext,
        &toolbelt_mcp::broker::HeaderInjectRequest,
    ) -> Result<Vec<(String, String)>, toolbelt_core::ToolError>
    + Send
    + Sync
    + 'static,
) -> impl Fn(&toolbelt_core::ToolContext, &toolbelt_mcp::broker::HeaderInjectRequest) -> InjectedHeaders
+ Send
+ Sync
+ 'static {
    move |ctx, request| {
        let decided = decide(ctx, request);
        Box::pin(async move { decided })
    }
}
