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

/// The embedder flags pointing at the scripted server's `/v1/embeddings` (its vectors: one
/// dimension per hashed word) and a cache file in `dir`.
fn embedder_flags(server: &ScriptedServer, dir: &Path) -> Vec<String> {
    vec![
        "--embedder-url".into(),
        server.base_url(),
        "--embedder-model".into(),
        "hashed".into(),
        "--embedding-cache".into(),
        dir.join("embeddings.sqlite").display().to_string(),
    ]
}

/// The tools `toolbelt tools search` ranks first for `query` by `method` over the same
/// built-in tools: what `run` must offer.
async fn tools_search_top(
    server: &ScriptedServer,
    dir: &Path,
    cache: &Path,
    query: &str,
    method: &str,
    k: usize,
) -> Vec<String> {
    let mut command = toolbelt(server, dir);
    command
        .args(["tools", "search", query, "--json", "--method", method])
        .args(["--top", &k.to_string()])
        .args(embedder_flags(server, cache))
        .arg("--dir")
        .arg(dir);
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", text(&out.stderr));
    let hits: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut names: Vec<String> = hits
        .iter()
        .map(|h| h["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// How many texts the `/v1/embeddings` requests so far carried, and the last request's.
fn embedded_texts(server: &ScriptedServer) -> (usize, Vec<String>) {
    let requests = server.embedding_requests();
    let inputs = |r: &toolbelt_model::testing::RecordedRequest| -> Vec<String> {
        r.body["input"]
            .as_array()
            .map(|a| a.iter().map(|t| t.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let total = requests.iter().map(|r| inputs(r).len()).sum();
    (total, requests.last().map(inputs).unwrap_or_default())
}

#[tokio::test]
async fn embed_and_hybrid_offer_what_the_embeddings_pick_and_a_second_run_embeds_only_the_question()
{
    let dir = project();
    let question = "replace an exact string with another in a file";
    for method in ["embed", "hybrid"] {
        let server = ScriptedServer::start([Reply::text("ok"), Reply::text("ok")])
            .await
            .unwrap();
        let cache = tempfile::tempdir().unwrap();
        let run = || {
            let mut command = toolbelt(&server, dir.path());
            command
                .args(["run", question, "--tool-search", method, "--max-tools", "3"])
                .args(embedder_flags(&server, cache.path()))
                .arg("--dir")
                .arg(dir.path());
            command
        };
        let out = output(run(), "").await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{method}: {}",
            text(&out.stderr)
        );
        let (first_total, last) = embedded_texts(&server);
        // Every built-in tool was embedded, then the question.
        assert!(first_total > 10, "{method}: {first_total} texts embedded");
        assert_eq!(last, [question], "{method}");
        let mut offered = server.requests()[0].tool_names();
        offered.sort();
        assert_eq!(offered.len(), 3, "{method}: {offered:?}");
        assert!(
            offered.contains(&"Edit".to_string()),
            "{method}: {offered:?}"
        );

        // The second process finds every tool in the cache file: only the question is sent.
        let out = output(run(), "").await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{method}: {}",
            text(&out.stderr)
        );
        let (second_total, last) = embedded_texts(&server);
        assert_eq!(
            second_total,
            first_total + 1,
            "{method}: tools embedded again"
        );
        assert_eq!(last, [question], "{method}");
        let mut again = server.requests()[1].tool_names();
        again.sort();
        assert_eq!(again, offered, "{method}");

        // The tools `tools search` ranks first over the same tools and cache.
        let top = tools_search_top(&server, dir.path(), cache.path(), question, method, 3).await;
        assert_eq!(top, offered, "{method}");
    }
}

#[tokio::test]
async fn embed_without_an_embedder_is_a_usage_error_before_the_model_is_asked() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hi", "--tool-search", "hybrid"])
        .env_remove("TOOLBELT_EMBEDDER_DIR");
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--tool-search hybrid needs an embedder: --embedder-dir DIR"),
        "{}",
        text(&out.stderr)
    );
    assert!(server.requests().is_empty());
}

/// The local all-MiniLM-L6-v2 (the PyPI package's folder): the model picks by meaning, and a
/// second process reads every tool's vector from the cache file.
#[cfg(feature = "local-embedder")]
#[tokio::test]
async fn local_embedder_hybrid_offers_the_right_tool_and_reuses_the_cache() {
    let dir = project();
    let cache = tempfile::tempdir().unwrap();
    let model = toolbelt_testkit::local_embedder_dir();
    let server = ScriptedServer::start([Reply::text("ok"), Reply::text("ok")])
        .await
        .unwrap();
    let run = || {
        let mut command = toolbelt(&server, dir.path());
        command
            .args([
                "run",
                "change one exact string into another inside a source file",
            ])
            .args([
                "--tool-search",
                "hybrid",
                "--max-tools",
                "3",
                "--embedder-dir",
            ])
            .arg(&model)
            .arg("--embedding-cache")
            .arg(cache.path().join("embeddings.sqlite"))
            .arg("--dir")
            .arg(dir.path())
            .env("TOOLBELT_LOG", "toolbelt::tool_search=debug");
        command
    };
    // The index is built before the run: the first process embeds every tool, the second
    // finds every vector in the cache file.
    let ready = |stderr: &str| -> String {
        stderr
            .lines()
            .find(|line| line.contains("tool embeddings ready"))
            .unwrap_or_else(|| panic!("no index build logged:\n{stderr}"))
            .to_string()
    };
    let out = output(run(), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let offered = server.requests()[0].tool_names();
    assert_eq!(offered.len(), 3, "{offered:?}");
    assert!(offered.contains(&"Edit".to_string()), "{offered:?}");
    let first = ready(&stderr);
    assert!(
        first.contains("reused=0") && !first.contains("embedded=0"),
        "{first}"
    );

    let out = output(run(), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let second = ready(&stderr);
    assert!(
        second.contains("embedded=0") && !second.contains("reused=0"),
        "{second}"
    );
    assert_eq!(server.requests()[1].tool_names(), offered);
}
