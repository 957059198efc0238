//! The built-in middleware: timeout, retry and audit.

use crate::common;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{any_object, executor_with, tool};
use toolbelt_core::{DynTool, FunctionTool, Tool, ToolContext, ToolError, ToolMeta, ToolOutput};
use toolbelt_exec::{
    Audit, AuditOutcome, AuditRecord, Retry, RetryPolicy, Timeout, ToolCall, default_retry_on,
    redact_secrets,
};

#[tokio::test(start_paused = true)]
async fn timeout_cancels_the_token_of_a_tool_that_waits_on_it() {
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let saw = saw_cancel.clone();
    let slow = tool("slow", any_object(), ToolMeta::default(), move |ctx, _| {
        let saw = saw.clone();
        async move {
            assert!(ctx.deadline().is_some(), "the timeout sets a deadline");
            tokio::select! {
                () = ctx.cancelled() => {
                    saw.store(true, Ordering::SeqCst);
                    Err(ToolError::Cancelled)
                }
                () = tokio::time::sleep(Duration::from_secs(3600)) => Ok(ToolOutput::text("finished")),
            }
        }
    });
    let executor = executor_with([slow], |b| {
        b.middleware(Timeout::new(Duration::from_millis(50)))
    });
    let err = executor
        .invoke_tool(ToolContext::new(), "slow", "{}")
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::Timeout { limit } if limit == Duration::from_millis(50)),
        "{err:?}"
    );
    assert_eq!(err.for_model(), "Error: tool call timed out after 50ms");
    assert!(
        saw_cancel.load(Ordering::SeqCst),
        "the tool saw its token cancelled"
    );
}

#[tokio::test(start_paused = true)]
async fn timeout_limits_can_differ_per_tool_and_fast_calls_pass() {
    let sleeper = |name: &str| {
        tool(name, any_object(), ToolMeta::default(), |_, _| async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(ToolOutput::text("done"))
        })
    };
    let executor = executor_with([sleeper("build"), sleeper("lint")], |b| {
        b.middleware(
            Timeout::new(Duration::from_secs(1)).for_tool("build", Duration::from_secs(10)),
        )
    });
    assert_eq!(
        executor
            .invoke_tool(ToolContext::new(), "build", "{}")
            .await
            .unwrap()
            .llm_text(),
        "done"
    );
    let err = executor
        .invoke_tool(ToolContext::new(), "lint", "{}")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }));
}

/// A tool that fails with `error()` for the first `failures` attempts, then succeeds.
fn failing_then_ok(
    name: &str,
    idempotent: Option<bool>,
    failures: u32,
    error: fn() -> ToolError,
    attempts: &Arc<AtomicU32>,
) -> DynTool {
    let attempts = attempts.clone();
    let meta = ToolMeta {
        idempotent,
        ..ToolMeta::default()
    };
    tool(name, any_object(), meta, move |_, _| {
        let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n <= failures {
                Err(error())
            } else {
                Ok(ToolOutput::text(format!("ok after {n}")))
            }
        }
    })
}

fn reset() -> ToolError {
    ToolError::failed(io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection reset by peer",
    ))
}

/// Retries with waits of 100 ms, 200 ms, then 250 ms, for `max_attempts` attempts in all.
fn policy(max_attempts: usize) -> RetryPolicy {
    RetryPolicy {
        max_retries: max_attempts - 1,
        min_delay: Duration::from_millis(100),
        factor: 2.0,
        max_delay: Duration::from_millis(250),
        jitter: false,
        ..RetryPolicy::default()
    }
}

#[tokio::test(start_paused = true)]
async fn retry_retries_transient_errors_with_backoff_and_counts_attempts() {
    let attempts = Arc::new(AtomicU32::new(0));
    let executor = executor_with(
        [failing_then_ok("fetch", Some(true), 2, reset, &attempts)],
        |b| b.middleware(Retry::new(policy(5))),
    );
    let started = tokio::time::Instant::now();
    let out = executor
        .invoke_tool(ToolContext::new(), "fetch", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "ok after 3");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    // Paused time advances by the waits, 100 ms then 200 ms (the timer may round each up to
    // its next millisecond tick).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited <= Duration::from_millis(302),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_gives_up_after_max_attempts_including_the_first() {
    let attempts = Arc::new(AtomicU32::new(0));
    let executor = executor_with(
        [failing_then_ok("fetch", Some(true), 10, reset, &attempts)],
        |b| b.middleware(Retry::new(policy(3))),
    );
    let err = executor
        .invoke_tool(ToolContext::new(), "fetch", "{}")
        .await
        .unwrap_err();
    assert!(err.is_transient());
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_stops_on_non_transient_errors() {
    for error in [
        (|| ToolError::failed("disk full")) as fn() -> ToolError,
        || ToolError::Cancelled,
        || ToolError::Timeout {
            limit: Duration::from_secs(1),
        },
        || ToolError::invalid_arguments("bad"),
        || ToolError::failed(io::Error::new(io::ErrorKind::PermissionDenied, "denied")),
    ] {
        let attempts = Arc::new(AtomicU32::new(0));
        let executor = executor_with(
            [failing_then_ok("fetch", Some(true), 10, error, &attempts)],
            |b| b.middleware(Retry::new(policy(5))),
        );
        let err = executor
            .invoke_tool(ToolContext::new(), "fetch", "{}")
            .await
            .unwrap_err();
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            1,
            "{err:?} must not be retried"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retry_leaves_result_level_failures_alone_by_default() {
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = attempts.clone();
    let soft = tool(
        "soft",
        any_object(),
        ToolMeta {
            idempotent: Some(true),
            ..ToolMeta::default()
        },
        move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::error("no such file")) }
        },
    );
    let executor = executor_with([soft], |b| b.middleware(Retry::new(policy(4))));
    let out = executor
        .invoke_tool(ToolContext::new(), "soft", "{}")
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_tool_declared_not_idempotent_is_retried_only_when_opted_in() {
    let attempts = Arc::new(AtomicU32::new(0));
    let executor = executor_with(
        [failing_then_ok("pay", Some(false), 1, reset, &attempts)],
        |b| b.middleware(Retry::new(policy(3))),
    );
    assert!(
        executor
            .invoke_tool(ToolContext::new(), "pay", "{}")
            .await
            .is_err()
    );
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "a payment is not retried by default"
    );

    let attempts = Arc::new(AtomicU32::new(0));
    let executor = executor_with(
        [failing_then_ok("pay", Some(false), 1, reset, &attempts)],
        |b| b.middleware(Retry::new(policy(3)).retry_non_idempotent(true)),
    );
    assert!(
        executor
            .invoke_tool(ToolContext::new(), "pay", "{}")
            .await
            .is_ok()
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

/// Function tools declare no idempotence; a transient failure of theirs is retried.
#[tokio::test(start_paused = true)]
async fn a_function_tool_that_declares_nothing_is_retried_on_transient_errors() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct NoArgs {}
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = attempts.clone();
    let flaky = FunctionTool::new("flaky", "Fails twice", move |_: ToolContext, _: NoArgs| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n <= 2 {
                Err(reset())
            } else {
                Ok(format!("ok after {n}"))
            }
        }
    })
    .unwrap();
    assert_eq!(flaky.declaration().meta.idempotent, None);
    let executor = executor_with([Arc::new(flaky) as DynTool], |b| {
        b.middleware(Retry::new(policy(3)))
    });
    let out = executor
        .invoke_tool(ToolContext::new(), "flaky", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "ok after 3");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);

    // The same tool's non-transient failure is not retried.
    let attempts = Arc::new(AtomicU32::new(0));
    let executor = executor_with(
        [failing_then_ok(
            "fetch",
            None,
            5,
            || ToolError::failed("disk full"),
            &attempts,
        )],
        |b| b.middleware(Retry::new(policy(3))),
    );
    assert!(
        executor
            .invoke_tool(ToolContext::new(), "fetch", "{}")
            .await
            .is_err()
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_custom_retry_on_sees_the_attempt_and_can_retry_result_failures() {
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = attempts.clone();
    let soft = tool(
        "soft",
        any_object(),
        ToolMeta {
            idempotent: Some(true),
            ..ToolMeta::default()
        },
        move |_, _| {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                Ok(if n < 3 {
                    ToolOutput::error("busy")
                } else {
                    ToolOutput::text("ok")
                })
            }
        },
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let retry = Retry::new(policy(5)).retry_on(move |info| {
        log.lock().unwrap().push((
            info.tool_name.to_string(),
            info.call_id.to_string(),
            info.attempt,
        ));
        default_retry_on(info) || info.result_error
    });
    let executor = executor_with([soft], |b| b.middleware(retry));
    let result = executor
        .execute(ToolContext::new(), &ToolCall::new("c42", "soft", "{}"))
        .await;
    assert_eq!(result.model_text(), "ok");
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("soft".to_string(), "c42".to_string(), 1),
            ("soft".to_string(), "c42".to_string(), 2)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn cancellation_during_a_retry_wait_ends_the_call() {
    let attempts = Arc::new(AtomicU32::new(0));
    let long_waits = RetryPolicy {
        min_delay: Duration::from_secs(60),
        max_delay: Duration::from_secs(60),
        ..policy(5)
    };
    let executor = executor_with(
        [failing_then_ok("fetch", Some(true), 10, reset, &attempts)],
        |b| b.middleware(Retry::new(long_waits)),
    );
    let ctx = ToolContext::new();
    let token = ctx.cancellation().clone();
    let call = ToolCall::new("c", "fetch", "{}");
    let (result, ()) = tokio::join!(executor.execute(ctx, &call), async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        token.cancel();
    });
    assert!(
        matches!(result.result, Err(ToolError::Cancelled)),
        "{:?}",
        result.result
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[test]
fn redaction_replaces_secret_values_at_any_depth() {
    let args = serde_json::json!({
        "url": "http://127.0.0.1/x",
        "api_key": "sk-123",
        "headers": {"Authorization": "Bearer abc", "Accept": "text/html"},
        "accounts": [{"user": "ada", "password": "hunter2", "accessToken": "t"}],
        "client_secret": {"nested": "deep"}
    });
    assert_eq!(
        redact_secrets(&args),
        serde_json::json!({
            "url": "http://127.0.0.1/x",
            "api_key": "[REDACTED]",
            "headers": {"Authorization": "[REDACTED]", "Accept": "text/html"},
            "accounts": [{"user": "ada", "password": "[REDACTED]", "accessToken": "[REDACTED]"}],
            "client_secret": "[REDACTED]"
        })
    );
}

mod capture {
    //! A tracing layer that keeps the fields of every event.
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, Layer};

    pub type Events = Arc<Mutex<Vec<(String, BTreeMap<String, String>)>>>;

    pub struct Capture(pub Events);

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_string(), value.to_string());
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.0.insert(field.name().to_string(), value.to_string());
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .insert(field.name().to_string(), format!("{value:?}"));
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Capture {
        fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            self.0
                .lock()
                .unwrap()
                .push((event.metadata().target().to_string(), fields));
        }
    }
}

#[tokio::test]
async fn audit_records_name_call_id_size_duration_and_outcome_with_secrets_redacted() {
    use tracing_subscriber::layer::SubscriberExt;

    let events: capture::Events = Default::default();
    let subscriber = tracing_subscriber::registry().with(capture::Capture(events.clone()));
    let _guard = tracing::subscriber::set_default(subscriber);
    // Another test's thread may have registered the audit callsite while no subscriber was
    // listening and cached "never" for it; ask every callsite again now that one listens.
    tracing::callsite::rebuild_interest_cache();

    let records = Arc::new(Mutex::new(Vec::<AuditRecord>::new()));
    let sink = records.clone();
    let login = tool("login", any_object(), ToolMeta::default(), |_, _| async {
        Ok(ToolOutput::text("welcome"))
    });
    let executor = executor_with([login], |b| {
        b.middleware(
            Audit::new()
                .include_arguments(true)
                .with_sink(move |r| sink.lock().unwrap().push(r.clone())),
        )
    });
    let args = r#"{"user":"ada","password":"hunter2","api_key":"sk-live-123"}"#;
    let result = executor
        .execute(ToolContext::new(), &ToolCall::new("call_1", "login", args))
        .await;
    assert!(result.is_success());

    let events = events.lock().unwrap();
    let (_, fields) = events
        .iter()
        .find(|(target, _)| target == "toolbelt::audit")
        .expect("an audit event was recorded");
    assert_eq!(fields["tool"], "login");
    assert_eq!(fields["call_id"], "call_1");
    assert_eq!(fields["argument_bytes"], args.len().to_string());
    assert_eq!(fields["outcome"], "success");
    assert!(fields.contains_key("duration_us"));
    let recorded = &fields["arguments"];
    assert!(
        !recorded.contains("hunter2") && !recorded.contains("sk-live-123"),
        "{recorded}"
    );
    assert!(
        recorded.contains("[REDACTED]") && recorded.contains("ada"),
        "{recorded}"
    );

    let records = records.lock().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, AuditOutcome::Success);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(records[0].arguments.as_deref().unwrap())
            .unwrap(),
        serde_json::json!({"user": "ada", "password": "[REDACTED]", "api_key": "[REDACTED]"})
    );
}

#[tokio::test]
async fn audit_leaves_arguments_out_by_default_and_names_error_kinds() {
    let records = Arc::new(Mutex::new(Vec::<AuditRecord>::new()));
    let sink = records.clone();
    let broken = tool("broken", any_object(), ToolMeta::default(), |_, _| async {
        Err(ToolError::failed("nope"))
    });
    let executor = executor_with([broken], |b| {
        b.middleware(Audit::new().with_sink(move |r| sink.lock().unwrap().push(r.clone())))
    });
    let _ = executor
        .invoke_tool(ToolContext::new(), "broken", r#"{"token":"x"}"#)
        .await;
    let records = records.lock().unwrap();
    assert_eq!(records[0].arguments, None);
    assert_eq!(records[0].argument_bytes, r#"{"token":"x"}"#.len());
    assert_eq!(records[0].outcome, AuditOutcome::Error("failed"));
}

/// What a retry rule may read: the run it belongs to, put in the call's context.
#[derive(Clone)]
struct RunOwner(&'static str);

#[tokio::test]
async fn a_retry_rule_reads_the_calls_context() {
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = attempts.clone();
    let flaky = tool("flaky", any_object(), ToolMeta::default(), move |_, _| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(ToolOutput::error("busy"))
        }
    });
    let policy = RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        ..RetryPolicy::default()
    };
    // Result-level failures are retried only for the agent named "patient".
    let retry = Retry::new(policy).retry_on(|info| {
        info.result_error && info.ctx.get::<RunOwner>().is_some_and(|o| o.0 == "patient")
    });
    let executor = executor_with([flaky], |b| b.middleware(retry));
    for (owner, expected) in [("hasty", 1), ("patient", 3)] {
        attempts.store(0, Ordering::SeqCst);
        let ctx = ToolContext::new().with_extension(RunOwner(owner));
        let _ = executor.invoke_tool(ctx, "flaky", "{}").await;
        assert_eq!(attempts.load(Ordering::SeqCst), expected, "{owner}");
    }
}
