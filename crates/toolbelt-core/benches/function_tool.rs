//! The cost of calling a typed function tool through `Arc<dyn Tool>` (decode + call + encode)
//! beside calling the same async fn directly.
//!
//! Futures are polled with `futures::executor::block_on` (the tool needs no runtime), so the
//! difference between the two numbers is the cost of the dynamic, typed path itself.
//!
//! Run: `cargo bench -p toolbelt-core --bench function_tool`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError};

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: f64,
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: f64,
}

async fn add(_ctx: ToolContext, args: AddArgs) -> Result<Sum, ToolError> {
    Ok(Sum {
        sum: args.a + args.b,
    })
}

fn bench(c: &mut Criterion) {
    let tool: DynTool = Arc::new(FunctionTool::new("add", "Adds", add).unwrap());
    let ctx = ToolContext::for_call("call_1");
    let raw = r#"{"a": 1.5, "b": 2.25}"#;

    let mut group = c.benchmark_group("function_tool");
    group.bench_function("dyn_tool_call", |b| {
        b.iter(|| {
            futures::executor::block_on(async {
                let out = tool.call(ctx.clone(), black_box(raw)).await.unwrap();
                black_box(out)
            })
        })
    });
    group.bench_function("direct_async_fn", |b| {
        b.iter(|| {
            futures::executor::block_on(async {
                let out = add(
                    ctx.clone(),
                    AddArgs {
                        a: black_box(1.5),
                        b: black_box(2.25),
                    },
                )
                .await
                .unwrap();
                black_box(out)
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
