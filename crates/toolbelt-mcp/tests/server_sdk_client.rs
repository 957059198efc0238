//! The server half in process: a registry with a streaming tool and a typed tool (with an
//! output schema) served over streamable HTTP, driven by the Python `mcp` SDK client. Chunks
//! of the streaming call arrive as progress notifications; the typed tool's result carries
//! `structuredContent` that the SDK validates against the declared schema.
#![cfg(feature = "server")]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolbelt_core::schemars::{self, JsonSchema};
use toolbelt_core::{FunctionTool, StreamChunk, StreamingFunctionTool, ToolContext, ToolError};
use toolbelt_exec::{Executor, Registry};
use toolbelt_mcp::server::{CancellationToken, HttpServeOptions, HttpServer, ToolServer};

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "schemars")]
struct CountArgs {
    /// How far to count.
    to: u32,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "schemars")]
struct StatsArgs {
    /// The text to measure.
    text: String,
}

#[derive(Serialize, JsonSchema)]
#[schemars(crate = "schemars")]
struct Stats {
    words: usize,
    longest: usize,
}

async fn stats(_ctx: ToolContext, args: StatsArgs) -> Result<Stats, ToolError> {
    let words: Vec<&str> = args.text.split_whitespace().collect();
    Ok(Stats {
        words: words.len(),
        longest: words.iter().map(|w| w.len()).max().unwrap_or(0),
    })
}

fn registry() -> Arc<Registry> {
    let registry = Registry::new();
    registry
        .register(
            StreamingFunctionTool::new(
                "count",
                "Counts to a number, one chunk per step",
                |_ctx: ToolContext, args: CountArgs, tx| async move {
                    for i in 1..=args.to {
                        if tx.send(StreamChunk::new(format!("{i} "))).await.is_err() {
                            break;
                        }
                    }
                    Ok::<(), ToolError>(())
                },
            )
            .unwrap(),
        )
        .unwrap();
    registry
        .register(FunctionTool::new("stats", "Counts the words of a text", stats).unwrap())
        .unwrap();
    Arc::new(registry)
}

#[test]
fn streaming_chunks_become_progress_and_typed_results_structured_content() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = ToolServer::new(Arc::new(Executor::new(registry())));
    let (http, url) = runtime.block_on(async {
        let http = HttpServer::bind(
            "127.0.0.1:0".parse().unwrap(),
            server,
            HttpServeOptions::default(),
        )
        .await
        .unwrap();
        let url = http.url().unwrap();
        (http, url)
    });
    let stop = CancellationToken::new();
    let serving = runtime.spawn(http.run(stop.clone()));

    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../toolbelt-cli/tests/clients/py_client.py");
    let output = Command::new(toolbelt_testkit::python())
        .arg(script)
        .args(["streaming", "http", &url])
        .output()
        .unwrap();
    stop.cancel();
    runtime.block_on(serving).unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();

    assert_eq!(report["count"]["text"], "1 2 3 ", "{report}");
    let updates = report["updates"].as_array().unwrap();
    assert!(updates.len() >= 3, "one notification per chunk: {report}");
    let values: Vec<f64> = updates
        .iter()
        .map(|u| u["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");

    assert_eq!(report["stats_has_output_schema"], true);
    assert_eq!(report["count_has_output_schema"], false);
    assert_eq!(
        report["stats"]["structured"],
        serde_json::json!({"words": 3, "longest": 3})
    );
    assert_eq!(report["stats"]["is_error"], false);
}
