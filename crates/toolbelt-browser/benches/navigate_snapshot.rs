//! Browser navigate + snapshot latency on a local page: Toolbelt's browser tools against
//! Playwright MCP (`@playwright/mcp`, driven over MCP stdio) on the same Chromium, in one run.
//!
//! `cargo bench -p toolbelt-browser --bench navigate_snapshot` (needs `.ci/install-peers`:
//! Chromium and the npm peers). `TOOLBELT_BENCH_ROUNDS` sets the rounds (default 30).
//! Cold start (first navigate, browser launch included) is reported apart from the warm rounds.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use toolbelt_browser::{BrowserOptions, BrowserToolSet};
use toolbelt_builtin::web::AddressPolicy;
use toolbelt_core::{ToolContext, ToolSet};

fn page() -> String {
    let mut body = String::from(
        "<h1>Benchmark page</h1><form><label>Query <input name=q></label>\
         <button>Search</button></form><ul>",
    );
    for i in 0..200 {
        body.push_str(&format!(
            "<li><a href=\"/item/{i}\">Item {i}</a> with some descriptive text number {i}</li>"
        ));
    }
    body.push_str("</ul>");
    format!("<!doctype html><html><head><title>Bench</title></head><body>{body}</body></html>")
}

fn chromium() -> PathBuf {
    std::env::var_os("TOOLBELT_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

fn summary(name: &str, cold: Duration, mut rounds: Vec<Duration>) {
    rounds.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = rounds[rounds.len() / 2];
    let p95 = rounds[((rounds.len() as f64) * 0.95).ceil() as usize - 1];
    println!(
        "{name:<28} cold {:>8.1} ms | navigate+snapshot median {:>7.1} ms  p95 {:>7.1} ms  (n={})",
        ms(cold),
        ms(median),
        ms(p95),
        rounds.len()
    );
}

async fn ours(base: &str, rounds: usize) {
    let started = Instant::now();
    let set = BrowserToolSet::new(
        BrowserOptions::default()
            .with_chromium(chromium())
            .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap())),
    );
    let tools = set.tools(&ToolContext::for_call("list")).await.unwrap();
    let tool = |name: &str| tools.iter().find(|t| t.name() == name).unwrap().clone();
    let (navigate, snapshot) = (tool("browser_navigate"), tool("browser_snapshot"));
    let args = |i: usize| json!({"url": format!("{base}/?round={i}")}).to_string();
    navigate
        .call(ToolContext::for_call("cold"), &args(0))
        .await
        .unwrap();
    let cold = started.elapsed();
    let mut times = Vec::new();
    for i in 1..=rounds {
        let start = Instant::now();
        navigate
            .call(ToolContext::for_call("n"), &args(i))
            .await
            .unwrap();
        let out = snapshot
            .call(ToolContext::for_call("s"), "{}")
            .await
            .unwrap();
        times.push(start.elapsed());
        assert!(out.llm_text().contains("Item 199"));
    }
    summary("toolbelt-browser", cold, times);
    set.close().await.unwrap();
}

struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    next: u64,
}

impl Mcp {
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = self
                .stdout
                .next_line()
                .await
                .unwrap()
                .expect("server exited");
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{message}");
                return message["result"].clone();
            }
        }
    }

    async fn call(&mut self, name: &str, arguments: Value) -> String {
        let result = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        assert_ne!(result["isError"], json!(true), "{result}");
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

async fn playwright(base: &str, rounds: usize) {
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers");
    let cli = peers.join("node_modules/@playwright/mcp/cli.js");
    assert!(
        cli.is_file(),
        "@playwright/mcp is missing: run `bash .ci/install-peers`"
    );
    // Playwright MCP writes page snapshots to files; keep them out of the source tree.
    let output = std::env::temp_dir().join(format!("toolbelt-bench-pw-{}", std::process::id()));
    let started = Instant::now();
    let mut child = Command::new("node")
        .arg(&cli)
        .arg("--output-dir")
        .arg(&output)
        .arg("--executable-path")
        .arg(chromium())
        .args(["--headless", "--isolated", "--no-sandbox"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut mcp = Mcp {
        child,
        stdin,
        stdout,
        next: 0,
    };
    mcp.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "0"}}),
    )
    .await;
    mcp.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let url = |i: usize| json!({"url": format!("{base}/?round={i}")});
    mcp.call("browser_navigate", url(0)).await;
    let cold = started.elapsed();
    let mut times = Vec::new();
    for i in 1..=rounds {
        let start = Instant::now();
        mcp.call("browser_navigate", url(i)).await;
        let text = mcp.call("browser_snapshot", json!({})).await;
        times.push(start.elapsed());
        assert!(text.contains("Item 199"), "{text}");
    }
    summary("@playwright/mcp (stdio)", cold, times);
    let _ = mcp.call("browser_close", json!({})).await;
    let _ = mcp.child.kill().await;
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("TOOLBELT_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let html = page();
    let router = Router::new().route("/", get(move || async move { Html(html) }));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    println!("navigate + snapshot of a local page (200 links, a form), {rounds} rounds each");
    // Alternate the order between runs by environment, so neither always goes first.
    if std::env::var_os("TOOLBELT_BENCH_PLAYWRIGHT_FIRST").is_some() {
        playwright(&base, rounds).await;
        ours(&base, rounds).await;
    } else {
        ours(&base, rounds).await;
        playwright(&base, rounds).await;
    }
}
