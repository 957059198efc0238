//! Toolbelt against itself: our own `McpToolSet` (the client half) over `toolbelt serve` (the
//! server half), over stdio and streamable HTTP; plus the stdio discipline (nothing but
//! protocol on stdout) and the `--tools` / `--exclude-tools` filters.

use crate::serve_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serve_support::*;
use toolbelt::exec::{Executor, Registry, ToolSetRefresh};
use toolbelt::mcp::{ConnectionConfig, McpToolSet, TransportConfig};
use toolbelt::{ToolContext, ToolSet};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Lists through the set, calls Read and Grep through an executor, then cancels a long Bash
/// call (the set sends notifications/cancelled) and checks its processes are gone.
async fn round_trip(set: McpToolSet, served: &Served) {
    let ctx = ToolContext::new();
    set.init(&ctx)
        .await
        .expect("toolbelt serve answers initialize");
    let tools = set.tools(&ctx).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    for name in ["Read", "Grep", "Glob", "Bash"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let read = tools.iter().find(|t| t.name() == "Read").unwrap();
    assert!(
        read.declaration().meta.is_read_only(),
        "annotations survive the round trip"
    );
    assert_eq!(read.declaration().meta.destructive, Some(false));

    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(Arc::new(set.clone()), ToolSetRefresh::Cached)
        .unwrap();
    registry.snapshot(&ctx).await;
    let executor = Executor::new(registry);
    let out = executor
        .invoke_tool(ToolContext::new(), "Read", r#"{"file_path": "hello.txt"}"#)
        .await
        .unwrap();
    assert!(!out.is_error);
    assert_eq!(out.llm_text(), "     1\thello world\n     2\tneedle here\n");
    let out = executor
        .invoke_tool(
            ToolContext::new(),
            "Grep",
            r#"{"pattern": "needle", "output_mode": "content"}"#,
        )
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "hello.txt:2:needle here");
    // Our executor validates before sending; past it (a direct call), the server's own
    // validation answers with a result-level failure, not a protocol error.
    let mut bad = toolbelt::JsonObject::new();
    bad.insert("file_path".into(), serde_json::json!(7));
    let out = set
        .call(&ToolContext::new(), "Read", Some(bad))
        .await
        .expect("a result, not a protocol error");
    assert!(out.is_error, "{out:?}");
    assert!(out.llm_text().contains("file_path"), "{}", out.llm_text());

    // Cancel a long Bash call from the client side.
    let call_ctx = ToolContext::new();
    let token = call_ctx.cancellation().clone();
    let command =
        r#"{"command": "sleep 300 & echo $! > rt_sleep.pid; echo $$ > rt_shell.pid; wait"}"#;
    let running = tokio::spawn({
        let executor = executor.clone();
        async move { executor.invoke_tool(call_ctx, "Bash", command).await }
    });
    let sleep_pid = wait_for_pid(&served.path().join("rt_sleep.pid")).await;
    let shell_pid = wait_for_pid(&served.path().join("rt_shell.pid")).await;
    assert!(is_running(sleep_pid));
    token.cancel();
    let outcome = running.await.unwrap();
    assert!(
        outcome.is_err(),
        "a cancelled call is not a success: {outcome:?}"
    );
    assert!(wait_gone(shell_pid), "the shell {shell_pid} survived");
    assert!(wait_gone(sleep_pid), "the sleep {sleep_pid} survived");

    set.close().await.unwrap();
}

async fn wait_for_pid(path: &std::path::Path) -> u32 {
    let what = format!("{}", path.display());
    toolbelt_testkit::eventually_async(what, Duration::from_secs(30), || {
        toolbelt_testkit::pids_in(path, 1)
    })
    .await[0]
}

#[test]
fn our_mcp_tool_set_round_trips_through_toolbelt_serve_over_stdio() {
    let served = Served::new();
    let args = vec![
        "serve".to_string(),
        "--dir".into(),
        served.path().display().to_string(),
    ];
    let config = ConnectionConfig::new(TransportConfig::stdio(toolbelt(), args))
        .with_timeout(Duration::from_secs(60));
    let set = McpToolSet::new("self", config);
    runtime().block_on(round_trip(set, &served));
}

#[test]
fn our_mcp_tool_set_round_trips_through_toolbelt_serve_over_http() {
    let served = Served::new();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        served.path().display().to_string(),
        "--token".into(),
        "rt".into(),
    ]);
    let config = ConnectionConfig::new(TransportConfig::streamable_http(server.url.clone()))
        .with_header("Authorization", "Bearer rt")
        .with_timeout(Duration::from_secs(60));
    let set = McpToolSet::new("self", config);
    runtime().block_on(round_trip(set, &served));
}

/// Sends JSON-RPC lines to `toolbelt serve --stdio` and returns every stdout line and the
/// stderr text, after closing stdin (which ends the server).
fn raw_stdio(extra: &[&str], requests: &[&str]) -> (Vec<String>, String) {
    let served = Served::new();
    let mut child = Command::new(toolbelt())
        .args(["serve", "--stdio", "--log-level", "debug", "--dir"])
        .arg(served.path())
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = stdout.lines();
    let mut out = Vec::new();
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        if request.contains("\"id\"") {
            // Wait for the answer before the next request.
            loop {
                let line = lines.next().expect("a response").unwrap();
                let is_response = line.contains("\"result\"") || line.contains("\"error\"");
                out.push(line);
                if is_response {
                    break;
                }
            }
        }
    }
    drop(stdin);
    out.extend(lines.map_while(Result::ok));
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "serve --stdio exited with {}",
        output.status
    );
    (out, String::from_utf8_lossy(&output.stderr).to_string())
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

#[test]
fn stdio_mode_writes_only_protocol_to_stdout_and_logs_to_stderr() {
    let (stdout, stderr) = raw_stdio(&[], &[INITIALIZE, INITIALIZED, LIST]);
    assert!(stdout.len() >= 2, "{stdout:?}");
    for line in &stdout {
        let message: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    assert!(stdout.iter().any(|l| l.contains("\"Read\"")), "{stdout:?}");
    // --log-level debug logged something, and all of it went to stderr.
    assert!(!stderr.trim().is_empty(), "no logs at debug level");
}

#[test]
fn tools_and_exclude_tools_narrow_what_is_served() {
    let call_grep = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Grep","arguments":{"pattern":"x"}}}"#;
    let call_typo = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"Grepp","arguments":{}}}"#;
    let (stdout, _) = raw_stdio(
        &["--tools", "Read,Glob,Grep", "--exclude-tools", "Grep"],
        &[INITIALIZE, INITIALIZED, LIST, call_grep, call_typo],
    );
    let listing: serde_json::Value = serde_json::from_str(
        stdout
            .iter()
            .find(|l| l.contains("\"id\":2"))
            .expect("a tools/list answer"),
    )
    .unwrap();
    let mut names: Vec<&str> = listing["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["Glob", "Read"]);
    let refused: serde_json::Value =
        serde_json::from_str(stdout.iter().find(|l| l.contains("\"id\":3")).unwrap()).unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // No "did you mean" that would name a hidden tool.
    let typo: serde_json::Value =
        serde_json::from_str(stdout.iter().find(|l| l.contains("\"id\":4")).unwrap()).unwrap();
    assert_eq!(typo["error"]["message"], "unknown tool \"Grepp\"", "{typo}");
}

#[test]
fn sigterm_ends_a_stdio_server_whose_client_keeps_stdin_open() {
    let served = Served::new();
    let mut child = Command::new(toolbelt())
        .args(served.serve_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    stdin.flush().unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("\"result\""), "{answer}");
    signal(child.id(), "TERM");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve --stdio did not exit on SIGTERM while its stdin stayed open");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exited with {status}");
    drop(stdin);
}

#[test]
fn http_only_flags_are_refused_in_stdio_mode() {
    let output = Command::new(toolbelt())
        .args(["serve", "--stdio", "--token", "t"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--http only"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn read_only_serves_no_file_changing_tools() {
    let (stdout, _) = raw_stdio(&["--read-only"], &[INITIALIZE, INITIALIZED, LIST]);
    let listing: serde_json::Value =
        serde_json::from_str(stdout.iter().find(|l| l.contains("\"id\":2")).unwrap()).unwrap();
    let names: Vec<&str> = listing["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"Read") && names.contains(&"Grep"),
        "{names:?}"
    );
    for writer in ["Write", "Edit", "NotebookEdit"] {
        assert!(
            !names.contains(&writer),
            "{writer} served in --read-only: {names:?}"
        );
    }
}
