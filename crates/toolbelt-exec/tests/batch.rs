//! Scheduling batches of tool calls.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Probe, any_object, echo, probed, tool};
use toolbelt_core::{ToolContext, ToolError, ToolMeta, ToolOutput};
use toolbelt_exec::{
    BatchItem, BatchOptions, CallResult, ExecutionFilter, ExecutionMode, Executor, Registry,
    ToolCall,
};

/// Runs the batch [safe_a, safe_b, undeclared, unsafe, safe_c] (two safe tools, one
/// undeclared, one unsafe and a third safe one) in `mode`, checks that every call was done
/// and answered in order, and returns the probe they all reported to.
async fn run_mixed_batch(mode: ExecutionMode) -> Arc<Probe> {
    let probe = Arc::new(Probe::default());
    let registry = Arc::new(Registry::new());
    registry
        .register_all([
            probed("safe_a", Some(true), &probe),
            probed("safe_b", Some(true), &probe),
            probed("undeclared", None, &probe),
            probed("unsafe", Some(false), &probe),
            probed("safe_c", Some(true), &probe),
        ])
        .unwrap();
    let calls: Vec<ToolCall> = ["safe_a", "safe_b", "undeclared", "unsafe", "safe_c"]
        .iter()
        .enumerate()
        .map(|(i, name)| ToolCall::new(format!("call_{i}"), *name, "{}"))
        .collect();
    let items = Executor::new(registry)
        .execute_batch(&ToolContext::new(), &calls, &BatchOptions::new().mode(mode))
        .await;
    assert_eq!(items.len(), calls.len());
    for (item, call) in items.iter().zip(&calls) {
        assert_eq!(item.call_id(), call.id);
        let done = item.as_done().expect("executed");
        assert_eq!(done.model_text(), format!("{} done", call.name));
    }
    probe
}

/// A registry of tools `names`, each declared concurrency-safe and reporting to the probe
/// returned with it.
fn safe_probed<const N: usize>(names: [&str; N]) -> (Arc<Probe>, Arc<Registry>) {
    let probe = Arc::new(Probe::default());
    let registry = Arc::new(Registry::new());
    registry
        .register_all(names.map(|name| probed(name, Some(true), &probe)))
        .unwrap();
    (probe, registry)
}

#[tokio::test]
async fn serial_mode_runs_one_call_at_a_time_in_order() {
    let probe = run_mixed_batch(ExecutionMode::Serial).await;
    assert_eq!(probe.max_overall(), 1);
    assert_eq!(
        probe.started(),
        ["safe_a", "safe_b", "undeclared", "unsafe", "safe_c"]
    );
}

#[tokio::test]
async fn parallel_mode_pools_everything_not_declared_unsafe() {
    let probe = run_mixed_batch(ExecutionMode::Parallel).await;
    // safe_a, safe_b and the undeclared tool overlap ...
    assert_eq!(probe.seen_by("safe_a"), 3);
    assert_eq!(probe.seen_by("undeclared"), 3);
    // ... the unsafe one is a barrier and runs alone, and safe_c runs after it.
    assert_eq!(probe.seen_by("unsafe"), 1);
    assert_eq!(probe.seen_by("safe_c"), 1);
    assert_eq!(probe.started()[3..], ["unsafe", "safe_c"]);
}

#[tokio::test]
async fn mixed_mode_pools_only_calls_declared_safe() {
    let probe = run_mixed_batch(ExecutionMode::Mixed).await;
    assert_eq!(probe.seen_by("safe_a"), 2);
    assert_eq!(probe.seen_by("safe_b"), 2);
    assert_eq!(probe.seen_by("undeclared"), 1);
    assert_eq!(probe.seen_by("unsafe"), 1);
    assert_eq!(probe.seen_by("safe_c"), 1);
}

#[tokio::test]
async fn the_concurrency_limit_caps_the_pool() {
    let (probe, registry) = safe_probed(["safe"]);
    let executor = Executor::builder(registry)
        .mode(ExecutionMode::Parallel)
        .concurrency_limit(3)
        .build();
    let calls: Vec<ToolCall> = (0..10)
        .map(|i| ToolCall::new(format!("c{i}"), "safe", "{}"))
        .collect();
    let items = executor
        .execute_batch(&ToolContext::new(), &calls, &BatchOptions::new())
        .await;
    assert!(items.iter().all(|i| i.as_done().unwrap().is_success()));
    assert_eq!(probe.max_overall(), 3);

    // Per batch, the limit can be lifted (0 = unlimited).
    let (probe_unlimited, registry) = safe_probed(["safe"]);
    let executor = Executor::builder(registry)
        .mode(ExecutionMode::Parallel)
        .concurrency_limit(3)
        .build();
    executor
        .execute_batch(
            &ToolContext::new(),
            &calls,
            &BatchOptions::new().concurrency_limit(0),
        )
        .await;
    assert_eq!(probe_unlimited.max_overall(), 10);
}

#[tokio::test]
async fn group_limits_cap_calls_of_one_group() {
    let (probe, registry) = safe_probed(["fetch", "read"]);
    let executor = Executor::new(registry);
    let calls: Vec<ToolCall> = (0..6)
        .map(|i| {
            ToolCall::new(
                format!("c{i}"),
                if i % 2 == 0 { "fetch" } else { "read" },
                "{}",
            )
        })
        .collect();
    let options = BatchOptions::new()
        .mode(ExecutionMode::Parallel)
        .group_limit("fetch", 1);
    executor
        .execute_batch(&ToolContext::new(), &calls, &options)
        .await;
    // The three reads overlap with each other and with one fetch at a time.
    assert_eq!(probe.max_overall(), 4);

    // Groups can be anything, for example "network" for all tools of a server.
    let (probe, registry) = safe_probed(["fetch", "read"]);
    let executor = Executor::new(registry);
    let options = BatchOptions::new()
        .mode(ExecutionMode::Parallel)
        .group_by(|_, _| Some("everything".into()))
        .group_limit("everything", 2);
    executor
        .execute_batch(&ToolContext::new(), &calls, &options)
        .await;
    assert_eq!(probe.max_overall(), 2);
}

#[tokio::test]
async fn a_panicking_or_failing_call_does_not_stop_its_siblings() {
    let registry = Arc::new(Registry::new());
    registry
        .register_all([
            echo("echo"),
            tool("boom", any_object(), ToolMeta::default(), |_, _| async {
                tokio::task::yield_now().await;
                panic!("boom");
            }),
            tool("fails", any_object(), ToolMeta::default(), |_, _| async {
                Err(ToolError::failed("disk full"))
            }),
        ])
        .unwrap();
    let executor = Executor::new(registry);
    let calls = [
        ToolCall::new("1", "echo", r#"{"n":1}"#),
        ToolCall::new("2", "boom", "{}"),
        ToolCall::new("3", "fails", "{}"),
        ToolCall::new("4", "nope", "{}"),
        ToolCall::new("5", "echo", r#"{"n":5}"#),
    ];
    for mode in [
        ExecutionMode::Serial,
        ExecutionMode::Parallel,
        ExecutionMode::Mixed,
    ] {
        let items = executor
            .execute_batch(&ToolContext::new(), &calls, &BatchOptions::new().mode(mode))
            .await;
        let texts: Vec<String> = items
            .iter()
            .map(|i| i.as_done().unwrap().model_text())
            .collect();
        assert_eq!(
            texts,
            [
                r#"{"n":1}"#,
                "Error: tool panicked: boom",
                "Error: disk full",
                r#"Error: unknown tool "nope""#,
                r#"{"n":5}"#,
            ],
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn the_execution_filter_hands_calls_back_as_pending() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let registry = Arc::new(Registry::new());
    registry
        .register_all([
            echo("echo"),
            tool("deploy", any_object(), ToolMeta::default(), move |_, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok(ToolOutput::text("deployed")) }
            }),
        ])
        .unwrap();
    let executor = Executor::new(registry);
    let calls = [
        ToolCall::new("1", "echo", "{}"),
        ToolCall::new("2", "deploy", "{}"),
        // A tool only the client knows: pending, not "unknown".
        ToolCall::new("3", "client_pick_color", "{}"),
    ];
    let filter = ExecutionFilter::new(|call, tool| tool.is_some() && call.name != "deploy");
    let items = executor
        .execute_batch(
            &ToolContext::new(),
            &calls,
            &BatchOptions::new()
                .filter(filter)
                .mode(ExecutionMode::Parallel),
        )
        .await;
    assert!(items[0].as_done().unwrap().is_success());
    assert_eq!(items[1].as_pending(), Some(&calls[1]));
    assert_eq!(items[2].as_pending(), Some(&calls[2]));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "pending calls do not run");

    let items = executor
        .execute_batch(
            &ToolContext::new(),
            &calls,
            &BatchOptions::new().filter(ExecutionFilter::pending_names(["echo"])),
        )
        .await;
    assert!(items[0].is_pending());
    assert!(items[1].as_done().unwrap().is_success());
    assert!(matches!(
        items[2].as_done().unwrap().result,
        Err(ToolError::UnknownTool { .. })
    ));
}

#[tokio::test]
async fn cancelling_the_batch_cancels_every_running_call() {
    let saw = Arc::new(AtomicUsize::new(0));
    let waits = {
        let saw = saw.clone();
        tool(
            "waits",
            any_object(),
            ToolMeta {
                concurrency_safe: Some(true),
                ..ToolMeta::default()
            },
            move |ctx, _| {
                let saw = saw.clone();
                async move {
                    ctx.cancelled().await;
                    saw.fetch_add(1, Ordering::SeqCst);
                    Err(ToolError::Cancelled)
                }
            },
        )
    };
    let registry = Arc::new(Registry::new());
    registry.register_all([waits]).unwrap();
    let executor = Executor::new(registry);
    let calls: Vec<ToolCall> = (0..4)
        .map(|i| ToolCall::new(format!("c{i}"), "waits", "{}"))
        .collect();
    let ctx = ToolContext::new();
    let token = ctx.cancellation().clone();
    let options = BatchOptions::new().mode(ExecutionMode::Parallel);
    let (items, ()) = tokio::join!(executor.execute_batch(&ctx, &calls, &options), async move {
        tokio::task::yield_now().await;
        token.cancel();
    });
    assert_eq!(
        saw.load(Ordering::SeqCst),
        4,
        "every running call saw its token"
    );
    for item in &items {
        let done = item.as_done().unwrap();
        assert!(matches!(done.result, Err(ToolError::Cancelled)));
        assert_eq!(done.model_text(), "Error: tool execution was interrupted");
    }

    // In serial mode, the calls not started yet are cancelled without running.
    let saw_before = saw.load(Ordering::SeqCst);
    let ctx = ToolContext::new();
    let token = ctx.cancellation().clone();
    let options = BatchOptions::new().mode(ExecutionMode::Serial);
    let (items, ()) = tokio::join!(executor.execute_batch(&ctx, &calls, &options), async move {
        tokio::task::yield_now().await;
        token.cancel();
    });
    assert_eq!(
        saw.load(Ordering::SeqCst) - saw_before,
        1,
        "only the running call ran"
    );
    assert!(
        items
            .iter()
            .all(|i| matches!(i.as_done().unwrap().result, Err(ToolError::Cancelled)))
    );
}

#[tokio::test]
async fn a_batch_resolves_names_in_the_given_snapshot() {
    let registry = Arc::new(Registry::new());
    registry
        .register_all([echo("echo"), echo("secret_tool")])
        .unwrap();
    let executor = Executor::new(registry.clone());
    let ctx = ToolContext::new();
    let visible = registry.snapshot(&ctx).await.filtered(
        &ctx,
        &toolbelt_core::ToolFilter::exclude_names(["secret_tool"]),
    );
    let calls = [
        ToolCall::new("1", "secret_tool", "{}"),
        ToolCall::new("2", "echo", "{}"),
    ];
    let items = executor
        .execute_batch(&ctx, &calls, &BatchOptions::new().snapshot(visible))
        .await;
    assert!(matches!(
        items[0].as_done().unwrap().result,
        Err(ToolError::UnknownTool { .. })
    ));
    assert!(items[1].as_done().unwrap().is_success());
}

/// Runs `call` as a batch of one and returns its result.
async fn run(executor: &Executor, call: &ToolCall, options: BatchOptions) -> CallResult {
    let calls = std::slice::from_ref(call);
    let items = executor
        .execute_batch(&ToolContext::new(), calls, &options)
        .await;
    match items.into_iter().next() {
        Some(BatchItem::Done(result)) => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

#[tokio::test]
async fn per_run_repair_and_validation_override_the_config_and_fall_back_to_it() {
    let strict = tool(
        "strict",
        serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        ToolMeta::default(),
        |_, args| async move { Ok(ToolOutput::text(args)) },
    );
    let registry = Arc::new(Registry::new());
    registry.register_arc(strict).unwrap();
    let broken = ToolCall::new("c1", "strict", "{n: 1,}");
    let wrong_type = ToolCall::new("c1", "strict", r#"{"n":"one"}"#);

    // The config says no repair: a run that sets nothing gets none, a run that asks gets it.
    let no_repair = Executor::new(registry.clone());
    let result = run(&no_repair, &broken, BatchOptions::new()).await;
    assert!(
        matches!(result.result, Err(ToolError::InvalidArguments { .. })),
        "{result:?}"
    );
    let result = run(&no_repair, &broken, BatchOptions::new().repair_json(true)).await;
    assert_eq!(result.model_text(), r#"{"n":1}"#);
    assert!(result.was_repaired());

    // The config says repair: a run that sets nothing repairs, a run that says no does not.
    let repairing = Executor::builder(registry.clone())
        .repair_json(true)
        .build();
    assert!(
        run(&repairing, &broken, BatchOptions::new())
            .await
            .was_repaired()
    );
    let result = run(&repairing, &broken, BatchOptions::new().repair_json(false)).await;
    assert!(matches!(
        result.result,
        Err(ToolError::InvalidArguments { .. })
    ));

    // Validation the same way.
    let validating = Executor::new(registry.clone());
    let result = run(&validating, &wrong_type, BatchOptions::new()).await;
    assert!(matches!(
        result.result,
        Err(ToolError::SchemaViolation { .. })
    ));
    let result = run(
        &validating,
        &wrong_type,
        BatchOptions::new().validate_arguments(false),
    )
    .await;
    assert_eq!(result.model_text(), r#"{"n":"one"}"#);
    let lax = Executor::builder(registry)
        .validate_arguments(false)
        .build();
    let result = run(
        &lax,
        &wrong_type,
        BatchOptions::new().validate_arguments(true),
    )
    .await;
    assert!(matches!(
        result.result,
        Err(ToolError::SchemaViolation { .. })
    ));
}

#[tokio::test]
async fn a_run_that_sets_no_mode_gets_the_executors_mode() {
    let (probe, registry) = safe_probed(["a", "b"]);
    let calls = [
        ToolCall::new("c1", "a", "{}"),
        ToolCall::new("c2", "b", "{}"),
    ];
    let parallel = Executor::builder(registry)
        .mode(ExecutionMode::Parallel)
        .build();

    parallel
        .execute_batch(&ToolContext::new(), &calls, &BatchOptions::new())
        .await;
    assert_eq!(
        probe.max_overall(),
        2,
        "the executor's Parallel mode applies"
    );

    let (probe_serial, registry) = safe_probed(["a", "b"]);
    let parallel = Executor::builder(registry)
        .mode(ExecutionMode::Parallel)
        .build();
    parallel
        .execute_batch(
            &ToolContext::new(),
            &calls,
            &BatchOptions::new().mode(ExecutionMode::Serial),
        )
        .await;
    assert_eq!(
        probe_serial.max_overall(),
        1,
        "the run's Serial mode overrides it"
    );
}

#[tokio::test]
async fn a_turn_past_the_call_cap_runs_the_first_calls_and_answers_the_rest_with_why() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let registry = Arc::new(Registry::new());
    registry
        .register(tool(
            "count",
            any_object(),
            ToolMeta {
                concurrency_safe: Some(true),
                ..ToolMeta::default()
            },
            move |_, _| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(ToolOutput::text("ok"))
                }
            },
        ))
        .unwrap();
    let cap = toolbelt_exec::DEFAULT_MAX_BATCH_CALLS;
    let calls: Vec<ToolCall> = (0..cap + 44)
        .map(|i| ToolCall::new(format!("call_{i}"), "count", "{}"))
        .collect();
    let items = Executor::new(registry)
        .execute_batch(
            &ToolContext::new(),
            &calls,
            &BatchOptions::new().mode(ExecutionMode::Parallel),
        )
        .await;
    assert_eq!(ran.load(Ordering::SeqCst), cap);
    assert_eq!(items.len(), calls.len());
    for (i, (item, call)) in items.iter().zip(&calls).enumerate() {
        assert_eq!(item.call_id(), call.id);
        let BatchItem::Done(CallResult { result, .. }) = item else {
            panic!("call {i} was handed back");
        };
        if i < cap {
            assert!(result.is_ok(), "{i}: {result:?}");
        } else {
            let err = result.as_ref().unwrap_err();
            assert!(matches!(err, ToolError::Rejected { .. }), "{err:?}");
            assert!(err.to_string().contains(&format!("at most {cap}")), "{err}");
        }
    }
}
