//! Instruction counts of the executor pipeline, for a machine whose timings are noisy (shared
//! cores): run N calls of one path under callgrind and divide. Instruction counts do not
//! depend on what else the machine is doing.
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target/bench cargo bench --workspace --bench pipeline_instructions --no-run
//! B=$(ls -t /work/target/bench/release/deps/pipeline_instructions-* | grep -v '\.d$' | head -1)
//! for path in direct full safe batch stream; do for n in 0 20000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null $B $path $n 2>&1 | grep refs
//! done; done
//! ```
//!
//! Instructions per call = (refs at 20000 − refs at 0) / 20000. `full` calls a tool that is
//! not declared concurrency-safe (it takes its lane), `safe` the same tool declared safe,
//! `batch` runs Parallel batches of 8 calls of the safe tool (N calls in all), `stream` the
//! same batches through `execute_batch_stream`. `cargo bench` runs it with a small N and
//! prints wall-clock time per call, which is only indicative.

use std::hint::black_box;

use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolbelt_core::{Declaration, DynTool, Tool, ToolContext, ToolError, ToolOutput, async_trait};
use toolbelt_exec::{
    AfterAction, BatchOptions, BeforeAction, ExecutionMode, Executor, HookCall, Registry, Timeout,
    ToolCall,
};

/// A tool that does nothing, so only the machinery around it is measured.
struct Noop {
    declaration: Declaration,
}

#[async_trait]
impl Tool for Noop {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }
    async fn call(&self, _ctx: ToolContext, _args: &str) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

const ARGS: &str = r#"{"path":"src/lib.rs","limit":10}"#;

fn main() {
    // `cargo bench` passes `--bench`; take the first two plain words as path and count.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let path = words.first().map(String::as_str).unwrap_or("both");
    let count: u32 = words.get(1).and_then(|n| n.parse().ok()).unwrap_or(100_000);

    let declaration = Declaration::new("noop", "Does nothing")
        .and_then(|d| {
            d.with_input_schema(json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["path"]
            }))
        })
        .expect("valid declaration");
    let mut safe_declaration = declaration.clone().concurrency_safe(true);
    safe_declaration.name = toolbelt_core::ToolName::new("noop_safe").expect("valid name");
    let tool: DynTool = Arc::new(Noop { declaration });
    let registry = Arc::new(Registry::new());
    registry.register_arc(tool.clone()).expect("register");
    registry
        .register_arc(Arc::new(Noop {
            declaration: safe_declaration,
        }))
        .expect("register");
    let executor = Executor::builder(registry)
        .validate_arguments(true)
        .before_hook(|_: &ToolContext, _: &HookCall<'_>| BeforeAction::Continue)
        .after_hook(
            |_: &ToolContext, _: &HookCall<'_>, _: &Result<ToolOutput, ToolError>| {
                AfterAction::Keep
            },
        )
        .middleware(Timeout::new(Duration::from_secs(30)))
        .build();
    let call = ToolCall::new("call_1", "noop", ARGS);
    let safe_call = ToolCall::new("call_1", "noop_safe", ARGS);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");

    rt.block_on(async {
        if path == "direct" || path == "both" {
            let started = Instant::now();
            for _ in 0..count {
                let out = tool
                    .call(ToolContext::for_call("call_1"), black_box(ARGS))
                    .await;
                black_box(out.expect("ok"));
            }
            report("direct Tool::call", started, count);
        }
        if path == "full" || path == "both" {
            let started = Instant::now();
            for _ in 0..count {
                let result = executor.execute(ToolContext::new(), black_box(&call)).await;
                black_box(result.result.expect("ok"));
            }
            report("full pipeline", started, count);
        }
        if path == "batch" || path == "both" {
            // One Parallel batch of 8 calls per iteration; counted per call.
            let calls: Vec<ToolCall> = (0..8)
                .map(|i| ToolCall::new(format!("call_{i}"), "noop_safe", ARGS))
                .collect();
            let options = BatchOptions::new().mode(ExecutionMode::Parallel);
            let started = Instant::now();
            for _ in 0..count / 8 {
                let items = executor
                    .execute_batch(&ToolContext::new(), black_box(&calls), &options)
                    .await;
                black_box(items);
            }
            report("Parallel batch of 8, per call", started, count / 8 * 8);
        }
        if path == "stream" || path == "both" {
            // The same batches through execute_batch_stream, every event read.
            let calls: Vec<ToolCall> = (0..8)
                .map(|i| ToolCall::new(format!("call_{i}"), "noop_safe", ARGS))
                .collect();
            let options = BatchOptions::new().mode(ExecutionMode::Parallel);
            let started = Instant::now();
            for _ in 0..count / 8 {
                let ctx = ToolContext::new();
                let mut events = executor.execute_batch_stream(&ctx, black_box(&calls), &options);
                while let Some(event) = events.next().await {
                    black_box(event);
                }
            }
            report(
                "streamed Parallel batch of 8, per call",
                started,
                count / 8 * 8,
            );
        }
        if path == "safe" || path == "both" {
            let started = Instant::now();
            for _ in 0..count {
                let result = executor
                    .execute(ToolContext::new(), black_box(&safe_call))
                    .await;
                black_box(result.result.expect("ok"));
            }
            report("full pipeline, concurrency-safe tool", started, count);
        }
    });
}

fn report(what: &str, started: Instant, count: u32) {
    if count > 0 {
        let per_call = started.elapsed().as_nanos() / u128::from(count);
        println!("{what}: {per_call} ns per call over {count} calls");
    }
}
