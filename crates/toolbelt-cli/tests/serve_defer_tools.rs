//! `toolbelt serve --defer-tools`, driven by the Python `mcp` SDK: clients are offered
//! `tool_search` instead of the aggregated servers' tools; a search loads what it finds into
//! that client's session only, and the client hears `notifications/tools/list_changed`.

use crate::serve_support;

use std::process::Command;

use serde_json::Value;
use serve_support::*;

fn client(target: &[String], served: &Served, token: Option<&str>) -> Value {
    let mut command = Command::new(toolbelt_testkit::python());
    command
        .arg(client_script("py_defer_tools.py"))
        .args(target)
        .env("TOOLBELT_TEST_DIR", served.path());
    if let Some(token) = token {
        command.env("TOOLBELT_TEST_TOKEN", token);
    }
    run_client(command)
}

fn names(report: &Value, key: &str) -> Vec<String> {
    report[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {report}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// What every transport must show: built-ins and tool_search listed, aggregated tools not;
/// after the search, the found tool listed and callable.
fn assert_search_loads_the_tool(report: &Value) {
    let before = names(report, "before");
    for name in ["Read", "Grep", "Bash", "tool_search"] {
        assert!(
            before.iter().any(|n| n == name),
            "{name} missing: {before:?}"
        );
    }
    for aggregated in ["get-sum", "echo", "py_echo", "weather", "add_tool"] {
        assert!(
            !before.iter().any(|n| n == aggregated),
            "{aggregated} listed: {before:?}"
        );
    }
    let search = &report["search"];
    assert_eq!(search["is_error"], false, "{report}");
    assert!(
        search["text"].as_str().unwrap().contains("- get-sum:"),
        "{report}"
    );

    let after = names(report, "after");
    let mut expected = before.clone();
    expected.push("get-sum".into());
    expected.sort();
    assert_eq!(after, expected);
    assert_eq!(report["sum"]["is_error"], false, "{report}");
    assert!(
        report["sum"]["text"].as_str().unwrap().contains('5'),
        "{report}"
    );
}

#[test]
fn over_stdio_tool_search_adds_the_found_tool_to_the_list_and_says_list_changed() {
    let served = Served::new();
    let mut args = served.serve_args();
    args.push("--defer-tools".into());
    let report = client(&stdio_target(&args), &served, None);
    assert_search_loads_the_tool(&report);
}

#[test]
fn over_http_a_search_loads_tools_into_its_own_session_only() {
    let served = Served::new();
    let mut args = served.serve_args();
    args.extend([
        "--defer-tools".into(),
        "--token".into(),
        "defer-token".into(),
    ]);
    let mut server = HttpServe::start(&args);
    let target = vec!["http".to_string(), server.url.clone()];
    let report = client(&target, &served, Some("defer-token"));
    assert_search_loads_the_tool(&report);
    // A second session starts with the deferred tools hidden again.
    assert_eq!(names(&report, "other_session"), names(&report, "before"));
    assert!(server.terminate().success());
}

/// The search by meaning: `--tool-search embed` with the local all-MiniLM-L6-v2 finds the
/// same tool for the same question, and builds its index from the aggregated servers.
#[cfg(feature = "local-embedder")]
#[test]
fn a_search_by_local_embeddings_loads_the_tool_it_finds() {
    let served = Served::new();
    let cache = tempfile::tempdir().unwrap();
    let mut args = served.serve_args();
    args.extend([
        "--defer-tools".into(),
        "--tool-search".into(),
        "embed".into(),
    ]);
    args.push("--embedder-dir".into());
    args.push(toolbelt_testkit::local_embedder_dir().display().to_string());
    args.push("--embedding-cache".into());
    args.push(cache.path().join("embeddings.sqlite").display().to_string());
    let report = client(&stdio_target(&args), &served, None);
    assert_search_loads_the_tool(&report);
    assert!(
        cache.path().join("embeddings.sqlite").is_file(),
        "the tools' vectors are cached"
    );
}
