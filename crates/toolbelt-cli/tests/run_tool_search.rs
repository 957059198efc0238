//! `toolbelt run --tool-search METHOD --max-tools N` and `--defer-tools` against the scripted
//! model server: what the model is offered, read from the requests it received.

use crate::run_support;

use std::path::Path;

use run_support::*;
use toolbelt_model::testing::{Reply, ScriptedServer};

#[tokio::test]
async fn bm25_offers_only_the_best_matching_tools() {
    let dir = project();
    let server = ScriptedServer::start([Reply::text("ok")]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "find the files whose names match a glob pattern"])
        .args(["--tool-search", "bm25", "--max-tools", "2", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
    let offered = server.requests()[0].tool_names();
    assert_eq!(offered.len(), 2, "{offered:?}");
    assert!(offered.contains(&"Glob".to_string()), "{offered:?}");
}

#[tokio::test]
async fn llm_asks_the_model_which_tools_to_offer_first() {
    let dir = project();
    let server = ScriptedServer::start([Reply::text(r#"["Grep"]"#), Reply::text("ok")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "where is needle mentioned?"])
        .args(["--tool-search", "llm", "--max-tools", "1", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ok\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The search call: no tools offered, the tool list in its prompt.
    assert!(requests[0].tool_names().is_empty());
    let prompt = requests[0].messages().last().unwrap()["content"].to_string();
    assert!(
        prompt.contains("- Read:") && prompt.contains("where is needle mentioned?"),
        "{prompt}"
    );
    assert_eq!(requests[1].tool_names(), vec!["Grep"]);
}

/// An `mcpServers` file in `dir` with the Python SDK fixture server (`weather`, `add`, …).
fn mcp_config(dir: &Path) -> String {
    let server =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../toolbelt-mcp/tests/fixtures/py_server.py");
    assert!(server.exists(), "{} is missing", server.display());
    let config = serde_json::json!({"mcpServers": {
        "py": {"command": toolbelt_testkit::python(), "args": [server, "stdio"]}
    }});
    let path = dir.join("mcp.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn defer_tools_hides_the_mcp_tools_until_tool_search_loads_one() {
    let dir = project();
    let config = mcp_config(dir.path());
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "tool_search", r#"{"query":"weather in a city"}"#),
        Reply::tool_call("c2", "weather", r#"{"city":"Oslo"}"#),
        Reply::text("sunny"),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args([
            "run",
            "weather in Oslo?",
            "--defer-tools",
            "--yes",
            "--mcp-config",
            &config,
        ])
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(text(&out.stdout), "sunny\n");

    let requests = server.requests();
    let first = requests[0].tool_names();
    // The built-in tools and tool_search; none of the server's.
    for name in ["Read", "Grep", "tool_search"] {
        assert!(first.contains(&name.to_string()), "{name}: {first:?}");
    }
    for name in ["weather", "add", "echo"] {
        assert!(!first.contains(&name.to_string()), "{name}: {first:?}");
    }
    let second = requests[1].tool_names();
    assert!(
        second.contains(&"weather".to_string()),
        "{second:?} {:?} {stderr}",
        tool_contents(&requests[1])
    );
    assert_eq!(second.len(), first.len() + 1, "{second:?}");
    assert!(
        tool_contents(&requests[2])[1].contains("Oslo"),
        "{:?}",
        tool_contents(&requests[2])
    );
}

#[tokio::test]
async fn bad_tool_search_flags_are_usage_errors() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    for args in [
        vec!["--max-tools", "3"],
        vec!["--tool-search", "bm25", "--max-tools", "0"],
        vec!["--tool-search", "semantic"],
    ] {
        let mut command = toolbelt(&server, dir.path());
        command.args(["run", "hi"]).args(&args);
        let out = output(command, "").await;
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn tools_search_with_the_llm_method_ranks_what_the_model_names() {
    let dir = project();
    let catalog = dir.path().join("catalog.json");
    let tools = serde_json::json!([
        {"name": "get_weather", "description": "Weather for a city", "parameters": {"type": "object"}},
        {"name": "send_email", "description": "Sends an email", "parameters": {"type": "object"}},
        {"name": "play_music", "description": "Plays a song", "parameters": {"type": "object"}},
    ]);
    std::fs::write(&catalog, tools.to_string()).unwrap();
    let server =
        ScriptedServer::start([Reply::text(r#"["send_email", "invented", "get_weather"]"#)])
            .await
            .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args([
            "tools",
            "search",
            "mail Ada the forecast",
            "--method",
            "llm",
            "--top",
            "2",
            "--json",
        ])
        .arg("--catalog")
        .arg(&catalog);
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        hits,
        serde_json::json!([{"name": "send_email", "score": 1.0}, {"name": "get_weather", "score": 0.5}])
    );
    let prompt = server.requests()[0].messages().last().unwrap()["content"].to_string();
    assert!(
        prompt.contains("- play_music: Plays a song") && prompt.contains("mail Ada the forecast"),
        "{prompt}"
    );
}
