//! `toolbelt tools search`, run as a user runs it: the built binary over the built-in tools,
//! an MCP server's tools, and catalog files, with exit codes, stdout and stderr checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir)
        .env_remove("TOOLBELT_EMBEDDER_DIR")
        .args(args)
        .output()
        .expect("run toolbelt")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A catalog in OpenAI function form, names with dots as real catalogs have them.
fn write_catalog(dir: &Path) -> PathBuf {
    let path = dir.join("catalog.json");
    let catalog = json!([
        {"name": "math.factorial", "description": "Calculate the factorial of a given number.",
         "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}}},
        {"type": "function", "function": {"name": "weather.get_forecast",
         "description": "Weather forecast for a city for the next days.",
         "parameters": {"type": "object", "properties": {
             "city": {"type": "string"}, "days": {"type": "integer"}}}}},
        {"name": "calendar.create_event", "description": "Add an event to the user's calendar.",
         "parameters": {"type": "object", "properties": {
             "title": {"type": "string"}, "start": {"type": "string",
             "description": "Start time, ISO 8601"}}}},
        {"name": "stocks.quote", "description": "Latest share price of a listed company.",
         "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}}}
    ]);
    std::fs::write(&path, catalog.to_string()).unwrap();
    path
}

#[test]
fn a_query_over_a_catalog_finds_the_right_tool_first() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write_catalog(dir.path());
    let catalog = catalog.to_str().unwrap();

    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "will it rain in Oslo in the next days",
            "--catalog",
            catalog,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with(" 1. weather.get_forecast "), "{text}");
    assert!(first.contains("Weather forecast for a city"), "{text}");

    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "schedule a meeting event",
            "--catalog",
            catalog,
            "--json",
            "--top",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hits: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let hits = hits.as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 2, "{hits:?}");
    assert_eq!(hits[0]["name"], "calendar.create_event");
    assert!(hits[0]["score"].as_f64().unwrap() > 0.0);

    let out = run(
        dir.path(),
        &["tools", "search", "zzzz qqqq", "--catalog", catalog],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "no tool matches");
}

#[test]
fn queries_file_answers_every_line_in_order_in_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write_catalog(dir.path());
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(
        &queries,
        "{\"id\": \"q1\", \"query\": \"factorial of 5\"}\n\
         \n\
         {\"id\": 2, \"query\": \"price of AAPL shares\"}\n\
         {\"id\": \"q3\", \"query\": \"nothing here matches xyzzy\"}\n",
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "--catalog",
            catalog.to_str().unwrap(),
            "--queries",
            queries.to_str().unwrap(),
            "--top",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["id"], "q1");
    assert_eq!(lines[0]["results"][0]["name"], "math.factorial");
    assert_eq!(lines[1]["id"], 2, "ids come back as given");
    assert_eq!(lines[1]["results"][0]["name"], "stocks.quote");
    assert!(lines[1]["results"].as_array().unwrap().len() <= 3);
    assert_eq!(lines[2]["results"], json!([]));
}

#[test]
fn bad_input_is_a_usage_error_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write_catalog(dir.path());
    let catalog = catalog.to_str().unwrap();

    // A queries file with a bad third line: no result is printed for the good ones.
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(
        &queries,
        "{\"id\": 1, \"query\": \"factorial\"}\n{\"id\": 2, \"query\": \"weather\"}\n{\"id\": 3}\n",
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "--catalog",
            catalog,
            "--queries",
            queries.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("queries.jsonl:3"), "{}", stderr(&out));

    // A catalog with a duplicate name: the entry is named.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"[{"name": "a"}, {"name": "b"}, {"name": "a"}]"#).unwrap();
    let out = run(
        dir.path(),
        &["tools", "search", "x", "--catalog", bad.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("entry 2: duplicate name \"a\""),
        "{}",
        stderr(&out)
    );

    let out = run(
        dir.path(),
        &["tools", "search", "x", "--catalog", "no/such.json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such.json"), "{}", stderr(&out));

    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "x",
            "--catalog",
            catalog,
            "--method",
            "magic",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("expected bm25, embed or hybrid"),
        "{}",
        stderr(&out)
    );

    // Embeddings without an embedder say how to configure one.
    for method in ["embed", "hybrid"] {
        let out = run(
            dir.path(),
            &[
                "tools",
                "search",
                "x",
                "--catalog",
                catalog,
                "--method",
                method,
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{method}");
        assert!(
            stderr(&out).contains("--embedder-dir DIR (or $TOOLBELT_EMBEDDER_DIR)"),
            "{}",
            stderr(&out)
        );
    }

    // Neither a query nor --queries.
    let out = run(dir.path(), &["tools", "search", "--catalog", catalog]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn control_characters_in_catalog_text_do_not_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    std::fs::write(
        &path,
        json!([{"name": "evil\u{1b}]0;pwned\u{7}", "description": "clear \u{1b}[2J screen"}])
            .to_string(),
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "clear screen",
            "--catalog",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("evil\\u{1b}]0;pwned\\u{7}"), "{text:?}");
}

#[test]
fn built_in_tools_are_searched_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "run a shell command in the terminal",
            "--json",
            "--top",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hits: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let names: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|hit| hit["name"].as_str())
        .collect();
    // Both shell tools answer this question: the one-shot Bash and the terminal session.
    assert!(
        matches!(names.first(), Some(&"Bash" | &"exec_command")),
        "{hits}"
    );
    assert!(
        names.contains(&"Bash") && names.contains(&"exec_command"),
        "{hits}"
    );
}

/// The tools of an `--mcp-config` server are indexed next to the built-in ones.
#[test]
fn tools_of_configured_mcp_servers_are_searched() {
    let dir = tempfile::tempdir().unwrap();
    let entry = workspace()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the npm peer is missing; run `bash .ci/install-peers`"
    );
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"everything": {"command": "node", "args": [entry, "stdio"]}}})
            .to_string(),
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "tools",
            "search",
            "echo back the message",
            "--json",
            "--mcp-config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hits: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(hits[0]["name"], "echo", "{hits}");
}

/// The local embedder over a catalog: embed and hybrid both rank the right tool first.
#[cfg(feature = "local-embedder")]
#[test]
fn local_embedder_ranks_by_meaning() {
    let model = toolbelt_testkit::local_embedder_dir();
    let dir = tempfile::tempdir().unwrap();
    let catalog = write_catalog(dir.path());
    for method in ["embed", "hybrid"] {
        let out = run(
            dir.path(),
            &[
                "tools",
                "search",
                "is it going to be sunny tomorrow in Rome",
                "--json",
                "--catalog",
                catalog.to_str().unwrap(),
                "--method",
                method,
                "--embedder-dir",
                model.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{method}: {}", stderr(&out));
        let hits: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(hits[0]["name"], "weather.get_forecast", "{method}: {hits}");
    }
}
