//! `toolbelt serve` passes an aggregated server's requests to its client on to its own
//! client: a Python SDK client (`clients/py_client_features.py`) ← serve ← the Python SDK
//! client-features fixture server, whose tools elicit (a form, a URL), sample and list roots
//! in the middle of a call. The client's callbacks must receive the requests as the server
//! sent them and their answers must reach the server (its tools echo them back); a client
//! that offers none of it gets a clear error in the tool's result, and the server's roots
//! are serve's `--dir`. With two clients on one HTTP server, a request goes to the client
//! whose call made it, never to the other one.

use crate::serve_support;

use std::process::Command;

use serde_json::{Value, json};
use serve_support::*;

/// A directory holding an `mcp.json` that aggregates the client-features fixture as `cf`,
/// and the `--mcp-config` flag naming it.
pub(crate) fn client_features_config() -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = workspace().join("crates/toolbelt-mcp/tests/fixtures/client_features_server.py");
    assert!(
        fixture.exists(),
        "the client-features fixture server is missing"
    );
    let config = json!({"mcpServers": {"cf": {
        "command": toolbelt_testkit::python(), "args": [fixture.display().to_string(), "stdio"]
    }}});
    std::fs::write(dir.path().join("mcp.json"), config.to_string()).unwrap();
    let flags = vec![
        "--mcp-config".into(),
        dir.path().join("mcp.json").display().to_string(),
    ];
    (dir, flags)
}

/// A served directory aggregating the client-features fixture, and the `serve` flags.
fn served() -> (tempfile::TempDir, Vec<String>) {
    let (dir, flags) = client_features_config();
    let mut args = vec![
        "serve".to_string(),
        "--dir".into(),
        dir.path().display().to_string(),
    ];
    args.extend(flags);
    (dir, args)
}

fn client(scenario: &str, target: &[String], token: Option<&str>) -> Value {
    let mut command = Command::new(toolbelt_testkit::python());
    command
        .arg(client_script("py_client_features.py"))
        .arg(scenario)
        .args(target);
    if let Some(token) = token {
        command.env("TOOLBELT_TEST_TOKEN", token);
    }
    run_client(command)
}

/// A tool's text result as JSON (the fixture's tools answer with JSON).
fn answer(result: &Value) -> Value {
    assert_eq!(result["is_error"], false, "the call failed: {result}");
    serde_json::from_str(result["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {result}"))
}

/// What the `offered` scenario must have seen, over either transport.
pub(crate) fn assert_relayed_to_the_client(report: &Value) {
    let results = &report["results"];
    let seen = &report["seen"];

    // Form elicitation: the client got the server's message and schema; its answer is the
    // tool's result.
    assert_eq!(
        answer(&results["profile"]),
        json!({"action": "accept", "content": {"name": "Grace", "age": 85}}),
        "{report}"
    );
    let form = &seen["elicitations"][0];
    assert_eq!(form["message"], "Who are you?");
    assert_eq!(
        form["schema_fields"],
        json!(["age", "name", "nickname", "plan", "score", "subscribe"])
    );
    // URL elicitation: the URL arrived, the client's decline went back.
    assert_eq!(answer(&results["url"])["action"], "decline", "{report}");
    assert_eq!(
        seen["elicitations"][1]["url"],
        "https://example.invalid/login"
    );

    // Sampling: the conversation and its parameters arrived unchanged; the client's model
    // answered.
    assert_eq!(
        answer(&results["summary"]),
        json!({"model": "client-model", "text": "shortened by the client", "stop": "endTurn"}),
        "{report}"
    );
    assert_eq!(
        seen["samplings"],
        json!([{
            "messages": ["a long text to shorten"],
            "system_prompt": "You summarize.",
            "max_tokens": 77,
            "hints": ["small-model"],
        }])
    );

    // Roots: the client's own, not serve's directory.
    assert_eq!(
        answer(&results["roots"]),
        json!([{"uri": "file:///client/workspace/", "name": "client-root"}]),
        "{report}"
    );
    assert_eq!(seen["roots_lists"], 1);
    // The client's roots/list_changed reached the server.
    assert_eq!(results["roots_changed"], 1, "{report}");
}

#[test]
fn elicitation_sampling_and_roots_reach_the_client_over_stdio() {
    let (_dir, args) = served();
    let report = client("offered", &stdio_target(&args), None);
    assert_relayed_to_the_client(&report);
}

#[test]
fn elicitation_sampling_and_roots_reach_the_client_over_http() {
    let (_dir, args) = served();
    let server = HttpServe::start(&args);
    let token = server.token.clone().expect("a generated token");
    let target = vec!["http".to_string(), server.url.clone()];
    let report = client("offered", &target, Some(&token));
    assert_relayed_to_the_client(&report);
}

#[test]
fn a_request_goes_to_the_client_whose_call_made_it_not_to_the_latest_or_a_capable_one() {
    let (_dir, args) = served();
    let server = HttpServe::start(&args);
    let token = server.token.clone().expect("a generated token");
    let target = vec!["http".to_string(), server.url.clone()];
    let report = client("two_clients", &target, Some(&token));
    // The bare client's call: an error for it, and the other client was never asked.
    assert_eq!(report["from_bare"]["is_error"], true, "{report}");
    assert_eq!(report["asked_after_bare"], 0, "{report}");
    // The offering client's call reaches its own callback, though it connected first.
    assert_eq!(
        answer(&report["from_offering"]),
        json!({"action": "accept", "content": {"name": "Offering"}}),
        "{report}"
    );
    assert_eq!(report["asked"], json!(["Who are you?"]));
}

#[test]
fn a_client_without_the_capabilities_gets_a_clear_error_and_roots_are_the_served_dir() {
    let (dir, args) = served();
    let report = client("bare", &stdio_target(&args), None);
    let results = &report["results"];
    for (tool, feature) in [
        ("profile", "elicitation"),
        ("url", "URL elicitation"),
        ("summary", "sampling"),
    ] {
        let result = &results[tool];
        assert_eq!(result["is_error"], true, "{tool}: {report}");
        let text = result["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("does not offer {feature}")),
            "{tool}: the error should say the client does not offer {feature}: {text}"
        );
    }
    // A temp directory's path needs no percent-encoding.
    let root = format!(
        "file://{}/",
        std::fs::canonicalize(dir.path()).unwrap().display()
    );
    assert_eq!(
        answer(&results["roots"]),
        json!([{"uri": root, "name": null}]),
        "{report}"
    );
}

/// An aggregated server's sampling tool loop through serve: a client declaring
/// `sampling.tools` gets the tools and the server's tool results and its `tool_use` reaches
/// the server; a client declaring plain sampling is never sent tools, the server is told why.
#[test]
fn sampling_with_tools_reaches_only_a_client_that_declared_it() {
    let (_dir, args) = served();
    let report = client("sampling_tools", &stdio_target(&args), None);
    let rounds = answer(&report["with_tools"])["rounds"].clone();
    assert_eq!(rounds[0]["stop"], "toolUse", "{report}");
    assert_eq!(
        rounds[0]["content"],
        json!([{"type": "tool_use", "id": "use-1", "name": "get_weather",
                "input": {"city": "Oslo"}}]),
        "{report}"
    );
    assert_eq!(rounds[1]["stop"], "endTurn", "{report}");
    assert_eq!(
        rounds[1]["content"][0]["text"], "read: Oslo: 18 C, cloudy",
        "{report}"
    );
    let seen = report["seen"].as_array().unwrap();
    assert_eq!(
        seen.len(),
        2,
        "the plain client was asked nothing: {report}"
    );
    assert_eq!(seen[0]["tools"], json!(["get_weather"]), "{report}");
    assert_eq!(seen[0]["mode"], "auto", "{report}");
    assert_eq!(seen[1]["last"][0]["type"], "tool_result", "{report}");
    assert_eq!(seen[1]["last"][0]["toolUseId"], "use-1", "{report}");

    let without = &report["without"];
    assert_eq!(without["is_error"], true, "{report}");
    assert!(
        without["text"]
            .as_str()
            .unwrap()
            .contains("does not offer sampling with tools"),
        "{report}"
    );
}
