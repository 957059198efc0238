//! The prompt bytes tool search saves per turn (BENCHMARKS.md, "Tool search"): `toolbelt run`
//! with the built-in tools and real MCP servers, against the scripted model server; the size
//! of the `tools` array in the request body the server received, with every tool, with each
//! method at `--max-tools` 5 and 10, and with `--defer-tools`.
//!
//! ```text
//! TOOLBELT_BENCH_MCP_CONFIG=/tmp/bench-peers/mcp.json \
//!   cargo test -p toolbelt-cli --test cli tool_search_prompt_bytes:: -- --ignored --nocapture
//! ```
//! Without the variable, the servers in `tests/peers` (everything, filesystem, Playwright).

use crate::run_support;

use std::path::Path;

use run_support::*;
use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};

/// Questions a coding or browsing agent gets; BM25's pick (and so the bytes) depends on them.
const QUESTIONS: &[&str] = &[
    "take a screenshot of the login page in the browser",
    "find every TODO in the Rust files and list them",
    "create a GitHub issue about the failing build",
    "remember that Ada prefers short answers",
    "what time is it in Tokyo?",
];

fn peers_config(dir: &Path) -> String {
    if let Ok(path) = std::env::var("TOOLBELT_BENCH_MCP_CONFIG") {
        return path;
    }
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/node_modules");
    let script = |p: &str| {
        let path = peers.join(p);
        assert!(
            path.exists(),
            "{} is missing; run `bash .ci/install-peers`",
            path.display()
        );
        path.display().to_string()
    };
    let config = serde_json::json!({"mcpServers": {
        "everything": {"command": "node", "args": [script("@modelcontextprotocol/server-everything/dist/index.js")]},
        "filesystem": {"command": "node", "args": [script("@modelcontextprotocol/server-filesystem/dist/index.js"), dir]},
        "playwright": {"command": "node", "args": [script("@playwright/mcp/cli.js"), "--headless"]},
    }});
    let path = dir.join("mcp.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
}

fn tools_bytes(request: &RecordedRequest) -> usize {
    request.body.get("tools").map_or(0, |t| t.to_string().len())
}

fn body_bytes(request: &RecordedRequest) -> usize {
    request.body.to_string().len()
}

/// Runs `toolbelt run QUESTION FLAGS…` with `replies`; the requests the model received.
async fn requests(
    config: &str,
    dir: &Path,
    question: &str,
    flags: &[&str],
    replies: Vec<Reply>,
) -> Vec<RecordedRequest> {
    let server = ScriptedServer::start(replies).await.unwrap();
    let mut command = toolbelt(&server, dir);
    command
        .args(["run", question, "--yes", "--mcp-config", config])
        .args(flags)
        .arg("--dir")
        .arg(dir);
    let out = output(command, "").await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{flags:?}: {}",
        text(&out.stderr)
    );
    server.requests()
}

fn row(label: &str, tools: usize, bytes: usize, all: usize, extra: &str) {
    let saved = all.saturating_sub(bytes);
    println!(
        "| {label} | {tools} | {bytes} | ~{} | {saved} (~{} tokens, {:.0}%) | {extra} |",
        bytes / 4,
        saved / 4,
        100.0 * saved as f64 / all as f64
    );
}

#[tokio::test]
#[ignore = "benchmark: prints the prompt bytes table of BENCHMARKS.md (needs the MCP peers)"]
async fn prompt_bytes_per_turn_by_method() {
    let dir = project();
    let config = peers_config(dir.path());

    let all = requests(
        &config,
        dir.path(),
        QUESTIONS[0],
        &[],
        vec![Reply::text("ok")],
    )
    .await;
    let names = all[0].tool_names();
    let all_bytes = tools_bytes(&all[0]);
    println!("tools offered without search: {}", names.len());
    println!("| method | tools sent | tools bytes | ≈ tokens (bytes/4) | saved per turn | note |");
    println!("|---|---|---|---|---|---|");
    row("all tools", names.len(), all_bytes, all_bytes, "");

    for max in [5usize, 10] {
        let max_text = max.to_string();
        let mut total = 0;
        for question in QUESTIONS {
            let flags = ["--tool-search", "bm25", "--max-tools", &max_text];
            let got = requests(
                &config,
                dir.path(),
                question,
                &flags,
                vec![Reply::text("ok")],
            )
            .await;
            total += tools_bytes(&got[0]);
        }
        let mean = total / QUESTIONS.len();
        row(
            &format!("bm25, max {max}"),
            max,
            mean,
            all_bytes,
            &format!("mean of {} questions", QUESTIONS.len()),
        );

        // The search model names the first `max` tools; its own request is the extra cost.
        let chosen: Vec<&String> = names.iter().take(max).collect();
        let answer = serde_json::to_string(&chosen).unwrap();
        let flags = ["--tool-search", "llm", "--max-tools", &max_text];
        let got = requests(
            &config,
            dir.path(),
            QUESTIONS[0],
            &flags,
            vec![Reply::text(answer), Reply::text("ok")],
        )
        .await;
        let search_request = body_bytes(&got[0]);
        row(
            &format!("llm, max {max}"),
            max,
            tools_bytes(&got[1]),
            all_bytes,
            &format!("plus one search request of {search_request} bytes per question"),
        );
    }

    let got = requests(
        &config,
        dir.path(),
        QUESTIONS[0],
        &["--defer-tools"],
        vec![Reply::text("ok")],
    )
    .await;
    row(
        "--defer-tools",
        got[0].tool_names().len(),
        tools_bytes(&got[0]),
        all_bytes,
        "built-ins + tool_search; found tools added when loaded",
    );
    let flags = ["--defer-tools", "--tool-search", "bm25", "--max-tools", "5"];
    let got = requests(
        &config,
        dir.path(),
        QUESTIONS[1],
        &flags,
        vec![Reply::text("ok")],
    )
    .await;
    row(
        "--defer-tools + bm25, max 5",
        got[0].tool_names().len(),
        tools_bytes(&got[0]),
        all_bytes,
        "",
    );
}
