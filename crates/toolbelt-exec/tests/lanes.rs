//! Calls of tools not declared concurrency-safe never overlap on one tool set, whichever way
//! they reach the executor; concurrency-safe calls never wait for them.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{any_object, tool};
use futures::future::join_all;
use tokio::sync::{Barrier, Notify};
use toolbelt_core::{
    DynTool, StaticToolSet, ToolContext, ToolError, ToolMeta, ToolOutput, ToolSet,
};
use toolbelt_exec::{
    BatchOptions, ExecutionMode, Executor, Registry, ToolCall, ToolSetRefresh, ToolSnapshot,
};

/// A generous bound on anything that should finish at once (the tests never measure time).
const NO_HANG: Duration = Duration::from_secs(20);

/// Counts calls in flight and the most seen at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
    calls: AtomicUsize,
}

impl InFlight {
    /// Enters, stays a while so that an overlapping call would be seen, leaves.
    async fn visit(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        for _ in 0..4 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

fn meta(concurrency_safe: Option<bool>) -> ToolMeta {
    ToolMeta {
        concurrency_safe,
        ..ToolMeta::default()
    }
}

/// A tool that visits `counter`.
fn counted(name: &str, concurrency_safe: Option<bool>, counter: &Arc<InFlight>) -> DynTool {
    let counter = counter.clone();
    tool(name, any_object(), meta(concurrency_safe), move |_, _| {
        let counter = counter.clone();
        async move {
            counter.visit().await;
            Ok(ToolOutput::text("done"))
        }
    })
}

/// A registry holding `tools` as one tool set named `name`, listed.
async fn registry_with_set(name: &str, tools: Vec<DynTool>) -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    add_set(&registry, name, tools).await;
    registry
}

async fn add_set(registry: &Registry, name: &str, tools: Vec<DynTool>) {
    let set: Arc<dyn ToolSet> = Arc::new(StaticToolSet::new(name, tools));
    registry
        .add_tool_set(set, ToolSetRefresh::Cached)
        .expect("add the set");
    registry
        .refresh_tool_set(&ToolContext::new(), name)
        .await
        .expect("list the set");
}

/// Runs `calls` at once, each as its own `execute` (as `toolbelt serve` does per request),
/// on a multi-threaded runtime.
async fn execute_at_once(executor: &Executor, calls: Vec<ToolCall>) -> Vec<bool> {
    let tasks = calls.into_iter().map(|call| {
        let executor = executor.clone();
        tokio::spawn(async move { executor.execute(ToolContext::new(), &call).await })
    });
    let results = tokio::time::timeout(NO_HANG, join_all(tasks))
        .await
        .expect("the calls finish");
    results
        .into_iter()
        .map(|joined| joined.expect("no panic").is_success())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unsafe_calls_of_one_set_never_overlap_when_requests_run_at_once() {
    let unsafe_calls = Arc::new(InFlight::default());
    let registry = registry_with_set(
        "files",
        vec![
            counted("edit", Some(false), &unsafe_calls),
            counted("undeclared", None, &unsafe_calls),
        ],
    )
    .await;
    let executor = Executor::new(registry);
    let calls = (0..16)
        .map(|i| {
            let name = if i % 2 == 0 { "edit" } else { "undeclared" };
            ToolCall::new(format!("c{i}"), name, "{}")
        })
        .collect();
    let results = execute_at_once(&executor, calls).await;
    assert!(results.iter().all(|ok| *ok));
    assert_eq!(unsafe_calls.calls.load(Ordering::SeqCst), 16);
    assert_eq!(
        unsafe_calls.most(),
        1,
        "two unsafe calls of one set overlapped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrency_safe_calls_still_run_in_parallel_beside_an_unsafe_one() {
    // Four safe calls that only finish once all four are inside at the same time, while an
    // unsafe call of the same set holds the lane until they are done.
    let inside = Arc::new(Barrier::new(4));
    let safe = {
        let inside = inside.clone();
        tool("read", any_object(), meta(Some(true)), move |_, _| {
            let inside = inside.clone();
            async move {
                inside.wait().await;
                Ok(ToolOutput::text("read"))
            }
        })
    };
    let release = Arc::new(Notify::new());
    let holding = Arc::new(AtomicBool::new(false));
    let unsafe_tool = {
        let (release, holding) = (release.clone(), holding.clone());
        tool("edit", any_object(), meta(Some(false)), move |_, _| {
            let (release, holding) = (release.clone(), holding.clone());
            async move {
                holding.store(true, Ordering::SeqCst);
                release.notified().await;
                Ok(ToolOutput::text("edited"))
            }
        })
    };
    let registry = registry_with_set("files", vec![safe, unsafe_tool]).await;
    let executor = Executor::new(registry);

    let edit = {
        let executor = executor.clone();
        tokio::spawn(async move {
            let call = ToolCall::new("edit", "edit", "{}");
            executor.execute(ToolContext::new(), &call).await
        })
    };
    while !holding.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    let reads = (0..4)
        .map(|i| ToolCall::new(format!("r{i}"), "read", "{}"))
        .collect();
    let results = execute_at_once(&executor, reads).await;
    assert!(results.iter().all(|ok| *ok), "the safe calls ran together");
    release.notify_one();
    let edited = tokio::time::timeout(NO_HANG, edit).await.expect("finishes");
    assert!(edited.expect("no panic").is_success());
}

#[tokio::test]
async fn a_parallel_batch_runs_undeclared_tools_of_one_set_one_at_a_time() {
    // A snapshot made from a list of tools (as the agent makes one) knows no sets: its
    // undeclared tools share the executor's lane, safe ones share the pool freely.
    let unsafe_calls = Arc::new(InFlight::default());
    let safe_calls = Arc::new(InFlight::default());
    let snapshot = ToolSnapshot::from_tools([
        counted("undeclared_a", None, &unsafe_calls),
        counted("undeclared_b", None, &unsafe_calls),
        counted("safe", Some(true), &safe_calls),
    ]);
    let executor = Executor::new(Arc::new(Registry::new()));
    let calls: Vec<ToolCall> = [
        "undeclared_a",
        "safe",
        "undeclared_b",
        "safe",
        "undeclared_a",
    ]
    .iter()
    .enumerate()
    .map(|(i, name)| ToolCall::new(format!("c{i}"), *name, "{}"))
    .collect();
    let options = BatchOptions::new()
        .mode(ExecutionMode::Parallel)
        .snapshot(snapshot);
    let items = executor
        .execute_batch(&ToolContext::new(), &calls, &options)
        .await;
    assert!(items.iter().all(|i| i.as_done().unwrap().is_success()));
    assert_eq!(unsafe_calls.most(), 1, "undeclared calls overlapped");
    assert_eq!(safe_calls.most(), 2, "the safe calls shared the pool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unsafe_calls_of_different_sets_do_not_wait_for_each_other() {
    // Each side only finishes once both are inside: they must overlap.
    let both = Arc::new(Barrier::new(2));
    let side = |name: &str| {
        let both = both.clone();
        tool(name, any_object(), meta(Some(false)), move |_, _| {
            let both = both.clone();
            async move {
                both.wait().await;
                Ok(ToolOutput::text("done"))
            }
        })
    };
    let registry = registry_with_set("builtin", vec![side("Bash")]).await;
    add_set(&registry, "server", vec![side("query")]).await;
    let executor = Executor::new(registry);
    let calls = vec![
        ToolCall::new("1", "Bash", "{}"),
        ToolCall::new("2", "query", "{}"),
    ];
    assert_eq!(execute_at_once(&executor, calls).await, [true, true]);
}

#[tokio::test]
async fn a_call_waiting_for_the_lane_can_be_cancelled() {
    let release = Arc::new(Notify::new());
    let holding = Arc::new(AtomicBool::new(false));
    let second_ran = Arc::new(AtomicBool::new(false));
    let holder = {
        let (release, holding) = (release.clone(), holding.clone());
        tool("holder", any_object(), meta(Some(false)), move |_, _| {
            let (release, holding) = (release.clone(), holding.clone());
            async move {
                holding.store(true, Ordering::SeqCst);
                release.notified().await;
                Ok(ToolOutput::text("held"))
            }
        })
    };
    let waiter = {
        let ran = second_ran.clone();
        tool("waiter", any_object(), meta(None), move |_, _| {
            let ran = ran.clone();
            async move {
                ran.store(true, Ordering::SeqCst);
                Ok(ToolOutput::text("ran"))
            }
        })
    };
    let registry = registry_with_set("files", vec![holder, waiter]).await;
    let executor = Executor::new(registry);

    let first = {
        let executor = executor.clone();
        tokio::spawn(async move {
            let call = ToolCall::new("1", "holder", "{}");
            executor.execute(ToolContext::new(), &call).await
        })
    };
    while !holding.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    let ctx = ToolContext::new();
    let token = ctx.cancellation().clone();
    let second = {
        let executor = executor.clone();
        tokio::spawn(async move {
            let call = ToolCall::new("2", "waiter", "{}");
            executor.execute(ctx, &call).await
        })
    };
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(!second_ran.load(Ordering::SeqCst), "it waits for the lane");
    token.cancel();
    let second = tokio::time::timeout(NO_HANG, second)
        .await
        .expect("the cancelled call returns while the lane is still held")
        .expect("no panic");
    assert!(matches!(second.result, Err(ToolError::Cancelled)));
    assert!(
        !second_ran.load(Ordering::SeqCst),
        "a cancelled call never runs"
    );

    release.notify_one();
    let first = tokio::time::timeout(NO_HANG, first)
        .await
        .expect("finishes");
    assert!(first.expect("no panic").is_success());
    // The lane is free again.
    let third = tokio::time::timeout(
        NO_HANG,
        executor.execute(ToolContext::new(), &ToolCall::new("3", "waiter", "{}")),
    )
    .await
    .expect("the lane was released");
    assert!(third.is_success());
}

#[tokio::test]
async fn a_tool_calling_a_tool_of_its_own_set_through_the_executor_does_not_wait_forever() {
    let executor_cell: Arc<OnceLock<Executor>> = Arc::new(OnceLock::new());
    let outer = {
        let cell = executor_cell.clone();
        tool("outer", any_object(), meta(Some(false)), move |ctx, _| {
            let cell = cell.clone();
            async move {
                let executor = cell.get().expect("set").clone();
                let inner = executor
                    .execute(ctx, &ToolCall::new("inner", "inner", "{}"))
                    .await;
                Ok(ToolOutput::text(format!(
                    "outer saw: {}",
                    inner.model_text()
                )))
            }
        })
    };
    let inner = tool("inner", any_object(), meta(None), |_, _| async {
        Ok(ToolOutput::text("inner done"))
    });
    let registry = registry_with_set("files", vec![outer, inner]).await;
    let executor = Executor::new(registry);
    executor_cell.set(executor.clone()).expect("once");
    let result = tokio::time::timeout(
        NO_HANG,
        executor.execute(ToolContext::new(), &ToolCall::new("1", "outer", "{}")),
    )
    .await
    .expect("a nested call on the held lane does not deadlock");
    assert_eq!(result.model_text(), "outer saw: inner done");
}
