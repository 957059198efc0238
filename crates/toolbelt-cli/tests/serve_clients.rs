//! `toolbelt serve` driven by independent MCP clients: the Python `mcp` SDK over stdio and
//! streamable HTTP, and the TypeScript SDK from npm. Each lists the tools and calls Read, Grep
//! and tools of the aggregated servers (npm's everything server and a Python SDK server).

use crate::serve_support;

use serde_json::Value;
use serve_support::*;

/// What the Python client's `tour` scenario must see, over either transport.
fn assert_tour(report: &Value) {
    assert_eq!(report["list_changed_capability"], true, "{report}");

    // Declarations: annotations from the tools' behaviour hints.
    let tools = &report["tools"];
    let read = &tools["Read"];
    assert_eq!(read["read_only"], true, "{read}");
    assert_eq!(read["destructive"], false, "{read}");
    assert_eq!(read["idempotent"], true, "{read}");
    assert_eq!(read["open_world"], false, "{read}");
    assert_eq!(read["has_output_schema"], false, "{read}");
    let bash = &tools["Bash"];
    assert_eq!(bash["read_only"], false, "{bash}");
    assert_eq!(bash["destructive"], true, "{bash}");
    // Both aggregated servers offer `echo`: the one listed second is prefixed.
    assert!(
        tools.get("echo").is_some() && tools.get("py_echo").is_some(),
        "{tools}"
    );
    assert_eq!(tools["weather"]["has_output_schema"], true, "{tools}");
    for name in ["Grep", "Glob", "Write", "Edit", "get-sum", "add_tool"] {
        assert!(tools.get(name).is_some(), "{name} missing from {tools}");
    }

    // Built-in tools. Read attaches structured data but declares no output schema, so no
    // structuredContent is sent.
    assert_eq!(
        report["read"],
        serde_json::json!({"is_error": false, "text": "     1\thello world\n     2\tneedle here\n", "structured": null, "types": ["text"]})
    );
    assert_eq!(report["grep"]["is_error"], false);
    assert_eq!(report["grep"]["text"], "hello.txt:2:needle here");

    // Aggregated tools: the text once (not repeated), structuredContent when declared.
    assert_eq!(report["echo"]["text"], "Echo: through toolbelt", "{report}");
    assert_eq!(report["py_echo"]["text"], "prefixed", "{report}");
    assert_eq!(
        report["weather"]["structured"],
        serde_json::json!({"city": "Oslo", "temperature": 21.5, "conditions": "sunny"})
    );

    // Images and resource links are relayed as such, in order, without a text summary added.
    assert_eq!(
        report["image"]["types"],
        serde_json::json!(["text", "image", "text"]),
        "{report}"
    );
    assert_eq!(
        report["links"]["types"],
        serde_json::json!(["text", "resource_link", "resource_link"]),
        "{report}"
    );

    // Validation errors and result-level failures are results with isError; an unknown tool
    // is a JSON-RPC error.
    let invalid = &report["read_invalid"];
    assert_eq!(invalid["is_error"], true, "{invalid}");
    assert!(
        invalid["text"].as_str().unwrap().contains("file_path"),
        "{invalid}"
    );
    let missing = &report["read_missing"];
    assert_eq!(missing["is_error"], true, "{missing}");
    assert!(
        missing["text"].as_str().unwrap().contains("does not exist"),
        "{missing}"
    );
    assert_eq!(report["unknown"]["rpc_error"]["code"], -32602, "{report}");
}

#[test]
fn python_sdk_over_stdio_lists_and_calls_builtin_and_aggregated_tools() {
    let served = Served::new();
    let report = python_client("tour", &stdio_target(&served.serve_args()), &served, None);
    assert_tour(&report);
}

#[test]
fn python_sdk_over_streamable_http_lists_and_calls_builtin_and_aggregated_tools() {
    let served = Served::new();
    let mut args = served.serve_args();
    args.extend(["--token".into(), "tour-token".into()]);
    let mut server = HttpServe::start(&args);
    let target = vec!["http".to_string(), server.url.clone()];
    let report = python_client("tour", &target, &served, Some("tour-token"));
    assert_tour(&report);
    assert!(server.terminate().success());
}

#[test]
fn python_client_receives_progress_notifications_during_a_long_call() {
    let served = Served::new();
    let mut args = served.serve_args();
    args.extend(["--heartbeat".into(), "0.2".into()]);
    let report = python_client("progress", &stdio_target(&args), &served, None);
    assert_eq!(report["result"]["is_error"], false, "{report}");
    assert!(
        report["result"]["text"]
            .as_str()
            .unwrap()
            .starts_with("done")
    );
    let updates = report["updates"].as_array().unwrap();
    assert!(
        !updates.is_empty(),
        "no progress notification arrived: {report}"
    );
    let values: Vec<f64> = updates
        .iter()
        .map(|u| u["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {values:?}"
    );
    assert!(
        updates[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("running for")
    );
}

#[test]
fn a_python_client_cancellation_kills_the_running_bash_command() {
    let served = Served::new();
    let report = python_client("cancel", &stdio_target(&served.serve_args()), &served, None);
    let shell = report["shell_pid"].as_u64().unwrap() as u32;
    let sleep = report["sleep_pid"].as_u64().unwrap() as u32;
    assert!(
        wait_gone(shell),
        "the shell {shell} survived the cancellation"
    );
    assert!(
        wait_gone(sleep),
        "its child {sleep} survived the cancellation"
    );
    // The cancelled call got no response, and the session kept working.
    assert_eq!(report["outcome"], serde_json::json!({}), "{report}");
    assert_eq!(report["read_after_cancel"]["is_error"], false, "{report}");
}

#[test]
fn a_cancellation_reaches_the_aggregated_server_running_the_call() {
    let served = Served::new();
    let report = python_client(
        "cancel_aggregated",
        &stdio_target(&served.serve_args()),
        &served,
        None,
    );
    assert_eq!(report["marker"], "cancelled", "{report}");
    assert_eq!(report["outcome"], serde_json::json!({}), "{report}");
}

fn assert_list_changed(report: &Value) {
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let (before, after) = (names("before"), names("after"));
    assert!(!before.iter().any(|n| n == "late_tool"), "{before:?}");
    assert!(after.iter().any(|n| n == "late_tool"), "{after:?}");
    assert_eq!(report["late"]["text"], "I am late_tool", "{report}");
}

#[test]
fn clients_hear_list_changed_when_an_aggregated_server_adds_a_tool() {
    let served = Served::new();
    let report = python_client(
        "list_changed",
        &stdio_target(&served.serve_args()),
        &served,
        None,
    );
    assert_list_changed(&report);
}

#[test]
fn http_clients_hear_list_changed_on_their_session_stream() {
    let served = Served::new();
    // No token given: the one the server generated and printed is the way in.
    let mut server = HttpServe::start(&served.serve_args());
    let target = vec!["http".to_string(), server.url.clone()];
    let token = server.token.clone().expect("a generated token was printed");
    let report = python_client("list_changed", &target, &served, Some(&token));
    assert_list_changed(&report);
    assert!(server.terminate().success());
}

fn typescript_client(target: &[String], served: &Served, token: Option<&str>) -> Value {
    let mut command = std::process::Command::new("node");
    command
        .arg(client_script("ts_client.cjs"))
        .arg(peers())
        .args(target)
        .env("TOOLBELT_TEST_DIR", served.path());
    if let Some(token) = token {
        command.env("TOOLBELT_TEST_TOKEN", token);
    }
    let sdk = peers().join("node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.exists(),
        "the npm peer @modelcontextprotocol/sdk is missing; run `bash .ci/install-peers`"
    );
    run_client(command)
}

fn assert_typescript_report(report: &Value) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for name in ["Read", "Grep", "Bash", "echo", "py_echo", "get-sum"] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    assert_eq!(
        report["read"]["text"],
        "     1\thello world\n     2\tneedle here\n"
    );
    assert_eq!(report["grep"]["text"], "hello.txt:2:needle here");
    assert_eq!(report["echo"]["text"], "Echo: from node");
    // The AbortSignal made the SDK send notifications/cancelled: the command is gone.
    assert!(
        report["cancelled_call"]
            .as_str()
            .unwrap()
            .starts_with("rejected"),
        "{report}"
    );
    for key in ["shell_pid", "sleep_pid"] {
        let pid = report[key].as_u64().unwrap() as u32;
        assert!(wait_gone(pid), "{key} {pid} survived the cancellation");
    }
    assert_eq!(report["read_after_cancel"]["is_error"], false);
}

#[test]
fn typescript_sdk_over_stdio_calls_tools_and_cancels_a_bash_call() {
    let served = Served::new();
    let report = typescript_client(&stdio_target(&served.serve_args()), &served, None);
    assert_typescript_report(&report);
}

#[test]
fn typescript_sdk_over_streamable_http_calls_tools_and_cancels_a_bash_call() {
    let served = Served::new();
    let mut args = served.serve_args();
    args.extend(["--token".into(), "ts-token".into()]);
    let mut server = HttpServe::start(&args);
    let target = vec!["http".to_string(), server.url.clone()];
    let report = typescript_client(&target, &served, Some("ts-token"));
    assert_typescript_report(&report);
    assert!(server.terminate().success());
}
