//! `toolbelt serve` as a faithful relay of an aggregated server (the Python SDK fixture
//! server): tools listed as that server lists them (absent annotations stay absent, `title`
//! and `_meta` kept, a missing description stays missing), a result with a content block of an unknown
//! type passed on, and JSON-RPC's -32602 for a `tools/call` whose params are malformed, over
//! stdio and HTTP. The JSON-RPC is written by hand so nothing between the test and the wire
//! normalises it.

use crate::serve_support;

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};
use serve_support::*;

/// A served directory whose `mcp.json` aggregates the Python fixture server alone.
fn served_with_py() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = json!({"mcpServers": {"py": {"command": toolbelt_testkit::python(), "args": [py_server(), "stdio"]}}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let args = vec![
        "serve".into(),
        "--dir".into(),
        dir.path().display().to_string(),
        "--mcp-config".into(),
        dir.path().join("mcp.json").display().to_string(),
    ];
    (dir, args)
}

fn py_server() -> String {
    let path = workspace().join("crates/toolbelt-mcp/tests/fixtures/py_server.py");
    assert!(path.exists(), "the Python fixture server is missing");
    path.display().to_string()
}

fn find<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {tools:?}"))
}

#[test]
fn aggregated_tools_are_listed_as_their_server_lists_them() {
    let mut direct = RawStdio::start(toolbelt_testkit::python(), &[py_server(), "stdio".into()]);
    let upstream = direct.tools();
    let (_dir, args) = served_with_py();
    let mut serve = RawStdio::start(toolbelt(), &args);
    serve.wait_for_upstreams();
    let relayed = serve.tools();

    // `add`: no annotations; `titled`: a title and a `_meta`, no description, no annotations; `echo` and
    // `mixed`: some hints declared, the others not.
    for name in ["add", "titled", "echo", "mixed"] {
        let (up, re) = (find(&upstream, name), find(&relayed, name));
        for field in ["title", "description", "annotations", "_meta"] {
            assert_eq!(
                up.get(field),
                re.get(field),
                "{name}.{field}: upstream {up}\nrelayed {re}"
            );
        }
    }
    // The cases the loop covers are really there.
    assert!(find(&relayed, "add").get("annotations").is_none());
    assert_eq!(find(&relayed, "titled")["title"], "A Titled Tool");
    assert!(find(&relayed, "titled").get("description").is_none());
    assert_eq!(
        find(&relayed, "titled")["_meta"],
        json!({"fixture/owner": "toolbelt-tests"})
    );
    assert_eq!(
        find(&relayed, "echo")["annotations"],
        json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false})
    );
}

#[test]
fn an_unknown_content_block_does_not_fail_the_call() {
    let (_dir, args) = served_with_py();
    let mut serve = RawStdio::start(toolbelt(), &args);
    serve.wait_for_upstreams();
    let answer = serve.request("tools/call", json!({"name": "video", "arguments": {}}));
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    let content = result["content"].as_array().expect("content");
    let texts: Vec<&str> = content.iter().filter_map(|b| b["text"].as_str()).collect();
    assert_eq!(content.len(), 3, "{answer}");
    assert_eq!(texts[0], "before the video");
    assert_eq!(texts[2], "after the video");
    // The unknown block is kept, as its raw JSON.
    let kept: Value = serde_json::from_str(texts[1]).expect("the block's JSON");
    assert_eq!(
        kept,
        json!({"type": "video", "mimeType": "video/mp4", "data": "AAAA"})
    );
}

/// Malformed `tools/call` params and the words the error message must contain.
fn bad_calls() -> Vec<(Value, &'static str)> {
    vec![
        (json!({"arguments": {}}), "\"name\""),
        (
            json!({"name": "Read", "arguments": ["a", "b"]}),
            "\"arguments\" must be an object",
        ),
        (json!({"name": 7}), "\"name\" must be a string"),
    ]
}

fn assert_invalid_params(answer: &Value, expect: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tools/call") && message.contains(expect),
        "{message:?} should name tools/call and say {expect:?}"
    );
}

#[test]
fn malformed_call_params_get_invalid_params_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = RawStdio::start(
        toolbelt(),
        &[
            "serve".into(),
            "--dir".into(),
            dir.path().display().to_string(),
        ],
    );
    for (params, expect) in bad_calls() {
        let answer = serve.request("tools/call", params);
        assert_invalid_params(&answer, expect);
    }
    // Without params at all.
    let answer = serve.request_raw(json!({"jsonrpc": "2.0", "method": "tools/call"}));
    assert_invalid_params(&answer, "\"name\"");
    // An unknown method is still -32601, and says which.
    let answer = serve.request("no/such/method", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no/such/method")
    );
    // The session still works.
    assert!(!serve.tools().is_empty());
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error_over_stdio_without_a_storm() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = RawStdio::start(
        toolbelt(),
        &[
            "serve".into(),
            "--stdio".into(),
            "--dir".into(),
            dir.path().display().to_string(),
        ],
    );
    serve.send_line("this is not json");
    let answer = serve.next_message();
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Parse error"),
        "{answer}"
    );
    // A burst of garbage (a peer echoing errors back) is answered a bounded number of times,
    // and the session goes on: the ping after it is answered.
    for _ in 0..200 {
        serve.send_line("{not json either");
    }
    let ping = serve.request("ping", json!({}));
    assert!(ping.get("result").is_some(), "{ping}");
    // The parse errors are written beside rmcp's own answers, so the ping's may come first:
    // ping again until they are in (or a generous time has passed).
    let mut answered = serve.skipped().len();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while answered == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let ping = serve.request("ping", json!({}));
        assert!(ping.get("result").is_some(), "{ping}");
        answered += serve.skipped().len();
    }
    assert!(
        (1..200).contains(&answered),
        "{answered} parse errors answered for 200 bad lines"
    );
    // A line of JSON split by nothing else still works, and so does a blank line.
    serve.send_line("");
    assert!(!serve.tools().is_empty());
}

/// One raw HTTP POST to `/mcp`; returns the response head and the JSON-RPC message in its
/// body (plain JSON or the `data:` of an SSE event carrying an id).
fn post(authority: &str, headers: &[(&str, &str)], body: &Value) -> (String, Option<Value>) {
    let mut stream = send_post(authority, headers, &body.to_string());
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).to_string();
    let (head, rest) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let message = rest
        .lines()
        .map(|line| line.trim_start_matches("data:").trim())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|value| value.get("id").is_some());
    (head.to_string(), message)
}

fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

#[test]
fn malformed_call_params_get_invalid_params_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        Path::new(dir.path()).display().to_string(),
        "--no-auth".into(),
    ]);
    let at = server.authority();
    let (head, init) = post(
        &at,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    assert!(init.is_some_and(|i| i.get("result").is_some()), "{head}");
    let session = session_id(&head);
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-06-18"),
    ];
    post(
        &at,
        &headers,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    for (n, (params, expect)) in bad_calls().into_iter().enumerate() {
        let (head, answer) = post(
            &at,
            &headers,
            &json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call", "params": params}),
        );
        let answer = answer.unwrap_or_else(|| panic!("no JSON-RPC answer: {head}"));
        assert_eq!(answer["id"], 10 + n);
        assert_invalid_params(&answer, expect);
    }
}
