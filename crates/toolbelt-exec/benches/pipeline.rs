//! Per-call overhead of the executor pipeline against a direct call, and batch throughput.
//!
//! Run: `cargo bench -p toolbelt-exec --bench pipeline -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
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

fn noop() -> DynTool {
    noop_declared("noop", true)
}

/// A no-op named `name`, declared concurrency-safe or not (an unsafe call takes its lane).
fn noop_declared(name: &str, concurrency_safe: bool) -> DynTool {
    let declaration = Declaration::new(name, "Does nothing")
        .and_then(|d| {
            d.with_input_schema(json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["path"]
            }))
        })
        .expect("valid declaration")
        .concurrency_safe(concurrency_safe);
    Arc::new(Noop { declaration })
}

const ARGS: &str = r#"{"path":"src/lib.rs","limit":10}"#;

fn full_pipeline(registry: Arc<Registry>) -> Executor {
    Executor::builder(registry)
        .validate_arguments(true)
        .before_hook(|_: &ToolContext, _: &HookCall<'_>| BeforeAction::Continue)
        .after_hook(
            |_: &ToolContext, _: &HookCall<'_>, _: &Result<ToolOutput, ToolError>| {
                AfterAction::Keep
            },
        )
        .middleware(Timeout::new(Duration::from_secs(30)))
        .build()
}

fn per_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let tool = noop();
    let registry = Arc::new(Registry::new());
    registry.register_arc(tool.clone()).expect("register");
    registry
        .register_arc(noop_declared("noop_unsafe", false))
        .expect("register");
    let executor = full_pipeline(registry);
    let call = ToolCall::new("call_1", "noop", ARGS);
    let unsafe_call = ToolCall::new("call_1", "noop_unsafe", ARGS);

    let mut group = c.benchmark_group("per_call");
    group.bench_function("direct_tool_call", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                tool.call(ToolContext::for_call("call_1"), black_box(ARGS))
                    .await
                    .expect("ok"),
            )
        })
    });
    group.bench_function("full_pipeline", |b| {
        b.to_async(&rt).iter(|| async {
            let result = executor.execute(ToolContext::new(), black_box(&call)).await;
            black_box(result.result.expect("ok"))
        })
    });
    // Not declared concurrency-safe: the call also takes its lane (uncontended here).
    group.bench_function("full_pipeline_exclusive", |b| {
        b.to_async(&rt).iter(|| async {
            let result = executor
                .execute(ToolContext::new(), black_box(&unsafe_call))
                .await;
            black_box(result.result.expect("ok"))
        })
    });
    group.finish();
}

fn batch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let registry = Arc::new(Registry::new());
    registry.register_arc(noop()).expect("register");
    let executor = full_pipeline(registry);
    let options = BatchOptions::new().mode(ExecutionMode::Parallel);

    let mut group = c.benchmark_group("parallel_batch");
    for size in [1usize, 8, 64] {
        let calls: Vec<ToolCall> = (0..size)
            .map(|i| ToolCall::new(format!("call_{i}"), "noop", ARGS))
            .collect();
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &calls, |b, calls| {
            b.to_async(&rt).iter(|| async {
                black_box(
                    executor
                        .execute_batch(&ToolContext::new(), calls, &options)
                        .await,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, per_call, batch);
criterion_main!(benches);
