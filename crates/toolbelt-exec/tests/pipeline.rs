//! The `invoke_tool` pipeline, step by step.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Trace, any_object, echo, tool};
use serde_json::json;
use toolbelt_core::{ToolContext, ToolError, ToolMeta, ToolOutput, async_trait};
use toolbelt_exec::{
    AfterAction, BeforeAction, Executor, HookCall, Middleware, Next, Registry, ToolCall,
    ToolRequest,
};

fn registry_with(tools: impl IntoIterator<Item = toolbelt_core::DynTool>) -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    registry.register_all(tools).unwrap();
    registry
}

/// A middleware that logs entering and leaving.
struct Logged(&'static str, Trace);

#[async_trait]
impl Middleware for Logged {
    async fn handle(
        &self,
        ctx: ToolContext,
        req: ToolRequest,
        next: Next<'_>,
    ) -> Result<ToolOutput, ToolError> {
        self.1.push(format!("{}:in:{}", self.0, req.tool_name()));
        let result = next.run(ctx, req).await;
        self.1.push(format!("{}:out", self.0));
        result
    }
}

fn traced_tool(name: &'static str, trace: &Trace) -> toolbelt_core::DynTool {
    let trace = trace.clone();
    tool(name, any_object(), ToolMeta::default(), move |_, _| {
        let trace = trace.clone();
        async move {
            trace.push(format!("tool:{name}"));
            Ok(ToolOutput::text(name))
        }
    })
}

#[tokio::test]
async fn hooks_and_middleware_run_in_the_documented_order() {
    let trace = Trace::default();
    let registry = registry_with([traced_tool("alpha", &trace), traced_tool("beta", &trace)]);
    let before = |label: &'static str, trace: &Trace| {
        let trace = trace.clone();
        move |_: &ToolContext, call: &HookCall<'_>| {
            trace.push(format!("{label}:{}", call.tool_name()));
            BeforeAction::Continue
        }
    };
    let after = |label: &'static str, trace: &Trace| {
        let trace = trace.clone();
        move |_: &ToolContext, call: &HookCall<'_>, _: &Result<ToolOutput, ToolError>| {
            trace.push(format!("{label}:{}", call.tool_name()));
            AfterAction::Keep
        }
    };
    let executor = Executor::builder(registry)
        // Added in a scrambled order on purpose: kinds, not insertion order, decide.
        .after_hook_for("alpha", after("after-tool", &trace))
        .before_hook(before("before-global-1", &trace))
        .after_hook(after("after-global", &trace))
        .before_hook_for("alpha", before("before-tool", &trace))
        .before_hook(before("before-global-2", &trace))
        .middleware(Logged("m1", trace.clone()))
        .middleware(Logged("m2", trace.clone()))
        .build();

    executor
        .invoke_tool(ToolContext::new(), "alpha", "{}")
        .await
        .unwrap();
    assert_eq!(
        trace.take(),
        [
            "before-tool:alpha",
            "before-global-1:alpha",
            "before-global-2:alpha",
            "m1:in:alpha",
            "m2:in:alpha",
            "tool:alpha",
            "m2:out",
            "m1:out",
            "after-global:alpha",
            "after-tool:alpha",
        ]
    );
    // beta has no tool-specific hooks: only the global ones run.
    executor
        .invoke_tool(ToolContext::new(), "beta", "{}")
        .await
        .unwrap();
    assert_eq!(
        trace.take(),
        [
            "before-global-1:beta",
            "before-global-2:beta",
            "m1:in:beta",
            "m2:in:beta",
            "tool:beta",
            "m2:out",
            "m1:out",
            "after-global:beta",
        ]
    );
}

#[tokio::test]
async fn a_rejecting_before_hook_stops_the_call_before_the_tool_runs() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let registry = registry_with([tool(
        "delete_all",
        any_object(),
        ToolMeta::default(),
        move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("deleted")) }
        },
    )]);
    let later_hook_ran = Arc::new(AtomicUsize::new(0));
    let later = later_hook_ran.clone();
    let saw_rejection = Arc::new(AtomicUsize::new(0));
    let saw = saw_rejection.clone();
    let executor = Executor::builder(registry)
        .before_hook_for("delete_all", |_: &ToolContext, _: &HookCall<'_>| {
            BeforeAction::Reject("deleting everything needs approval".into())
        })
        .before_hook(move |_: &ToolContext, _: &HookCall<'_>| {
            later.fetch_add(1, Ordering::SeqCst);
            BeforeAction::Continue
        })
        .after_hook(
            move |_: &ToolContext, _: &HookCall<'_>, result: &Result<ToolOutput, ToolError>| {
                if matches!(result, Err(ToolError::Rejected { .. })) {
                    saw.fetch_add(1, Ordering::SeqCst);
                }
                AfterAction::Keep
            },
        )
        .build();

    let err = executor
        .invoke_tool(ToolContext::new(), "delete_all", "{}")
        .await
        .unwrap_err();
    match &err {
        ToolError::Rejected { reason } => assert_eq!(reason, "deleting everything needs approval"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(
        err.for_model(),
        "Error: tool call rejected: deleting everything needs approval"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the tool must not run");
    assert_eq!(
        later_hook_ran.load(Ordering::SeqCst),
        0,
        "later before hooks must not run"
    );
    assert_eq!(
        saw_rejection.load(Ordering::SeqCst),
        1,
        "after hooks see the rejection"
    );
}

#[tokio::test]
async fn a_before_hook_can_replace_the_arguments() {
    let executor = Executor::builder(registry_with([echo("echo")]))
        .before_hook(|_: &ToolContext, call: &HookCall<'_>| {
            let mut args: serde_json::Value = serde_json::from_str(call.arguments).unwrap();
            args["path"] = json!("/sandbox/a.txt");
            BeforeAction::ReplaceArguments(args.to_string())
        })
        .build();
    let out = executor
        .invoke_tool(ToolContext::new(), "echo", r#"{"path":"/etc/passwd"}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), r#"{"path":"/sandbox/a.txt"}"#);
}

#[tokio::test]
async fn a_before_hook_can_answer_in_place_of_the_tool() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let registry = registry_with([tool(
        "weather",
        any_object(),
        ToolMeta::default(),
        move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("live")) }
        },
    )]);
    let executor = Executor::builder(registry)
        .before_hook(|_: &ToolContext, _: &HookCall<'_>| {
            BeforeAction::Respond(ToolOutput::text("cached: sunny"))
        })
        .build();
    let out = executor
        .invoke_tool(ToolContext::new(), "weather", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "cached: sunny");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_after_hook_sees_the_result_and_can_replace_it() {
    let failing = tool("flaky", any_object(), ToolMeta::default(), |_, _| async {
        Err(ToolError::failed("backend down"))
    });
    let executor = Executor::builder(registry_with([echo("echo"), failing]))
        .after_hook(
            |_: &ToolContext, _: &HookCall<'_>, result: &Result<ToolOutput, ToolError>| match result
            {
                Ok(out) => {
                    AfterAction::Replace(Ok(ToolOutput::text(format!("[{}]", out.llm_text()))))
                }
                Err(err) => AfterAction::Replace(Ok(ToolOutput::error(format!("handled: {err}")))),
            },
        )
        .build();
    let out = executor
        .invoke_tool(ToolContext::new(), "echo", r#"{"a":1}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), r#"[{"a":1}]"#);
    let out = executor
        .invoke_tool(ToolContext::new(), "flaky", "{}")
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(out.llm_text(), "handled: backend down");
}

#[tokio::test]
async fn an_unknown_tool_fails_with_up_to_three_close_names() {
    let registry = registry_with(["Read", "read_file", "ReadDir", "Grep", "Write"].map(echo));
    let executor = Executor::new(registry);
    let err = executor
        .invoke_tool(ToolContext::new(), "reed", "{}")
        .await
        .unwrap_err();
    match &err {
        ToolError::UnknownTool { name, suggestions } => {
            assert_eq!(name, "reed");
            assert_eq!(suggestions, &["Read"]);
        }
        other => panic!("expected an unknown tool, got {other:?}"),
    }
    let err = executor
        .invoke_tool(ToolContext::new(), "read", "{}")
        .await
        .unwrap_err();
    match &err {
        ToolError::UnknownTool { suggestions, .. } => {
            assert_eq!(suggestions, &["Read", "ReadDir", "read_file"]);
        }
        other => panic!("expected an unknown tool, got {other:?}"),
    }
    let err = executor
        .invoke_tool(ToolContext::new(), "launch_rocket", "{}")
        .await
        .unwrap_err();
    assert_eq!(err.for_model(), r#"Error: unknown tool "launch_rocket""#);
}

fn address_tool() -> toolbelt_core::DynTool {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "address": {
                "type": "object",
                "properties": {
                    "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                    "tags": {"type": "array", "items": {"type": "integer"}}
                },
                "required": ["zip"]
            }
        },
        "required": ["name", "address"]
    });
    tool("save_address", schema, ToolMeta::default(), |_, _| async {
        Ok(ToolOutput::text("saved"))
    })
}

#[tokio::test]
async fn validation_lists_every_violation_with_its_json_path() {
    let executor = Executor::new(registry_with([address_tool()]));
    let err = executor
        .invoke_tool(
            ToolContext::new(),
            "save_address",
            r#"{"address": {"zip": "12ab", "tags": [1, "two"]}}"#,
        )
        .await
        .unwrap_err();
    let ToolError::SchemaViolation { violations } = &err else {
        panic!("expected a schema violation, got {err:?}");
    };
    assert_eq!(violations.len(), 3, "{violations:?}");
    assert!(
        violations
            .iter()
            .any(|v| v.starts_with("/: ") && v.contains("\"name\"")),
        "{violations:?}"
    );
    assert!(
        violations.iter().any(|v| v.starts_with("/address/zip: ")),
        "{violations:?}"
    );
    assert!(
        violations
            .iter()
            .any(|v| v.starts_with("/address/tags/1: ")),
        "{violations:?}"
    );

    let ok = executor
        .invoke_tool(
            ToolContext::new(),
            "save_address",
            r#"{"name":"Ada","address":{"zip":"12345"}}"#,
        )
        .await
        .unwrap();
    assert_eq!(ok.llm_text(), "saved");
}

/// OpenAI strict mode declares every optional property required and nullable, so a model
/// answers `null` for "not given": the tool sees the arguments it declared, the property
/// absent.
#[tokio::test]
async fn strict_mode_nulls_for_optional_properties_reach_the_tool_as_absent() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "limit": {"type": "integer"},
            "inner": {"type": "object", "properties": {"depth": {"type": "integer"}}}
        },
        "required": ["path"]
    });
    let echo_args = tool("read", schema, ToolMeta::default(), |_, args| async move {
        Ok(ToolOutput::text(args))
    });
    for repair in [false, true] {
        let executor = Executor::builder(registry_with([echo_args.clone()]))
            .repair_json(repair)
            .build();
        let out = executor
            .invoke_tool(
                ToolContext::new(),
                "read",
                r#"{"path":"a","limit":null,"inner":{"depth":null}}"#,
            )
            .await
            .unwrap();
        let seen: serde_json::Value = serde_json::from_str(&out.llm_text()).unwrap();
        assert_eq!(seen, json!({"path": "a", "inner": {}}), "repair {repair}");
        // A null for a required property is still a violation.
        let err = executor
            .invoke_tool(ToolContext::new(), "read", r#"{"path":null}"#)
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::SchemaViolation { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn validation_can_be_turned_off() {
    let executor = Executor::builder(registry_with([address_tool()]))
        .validate_arguments(false)
        .build();
    let out = executor
        .invoke_tool(ToolContext::new(), "save_address", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "saved");
}

#[tokio::test]
async fn a_replaced_tool_is_validated_against_its_new_schema() {
    let registry = registry_with([tool(
        "t",
        json!({"type":"object","properties":{"a":{"type":"string"}}}),
        ToolMeta::default(),
        |_, _| async { Ok(ToolOutput::text("v1")) },
    )]);
    let executor = Executor::new(registry.clone());
    assert!(
        executor
            .invoke_tool(ToolContext::new(), "t", r#"{"a":"x"}"#)
            .await
            .is_ok()
    );
    registry.replace(tool(
        "t",
        json!({"type":"object","properties":{"a":{"type":"integer"}}}),
        ToolMeta::default(),
        |_, _| async { Ok(ToolOutput::text("v2")) },
    ));
    let err = executor
        .invoke_tool(ToolContext::new(), "t", r#"{"a":"x"}"#)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::SchemaViolation { .. }), "{err:?}");
    let out = executor
        .invoke_tool(ToolContext::new(), "t", r#"{"a":1}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "v2");
}

#[tokio::test]
async fn broken_json_is_an_invalid_arguments_error_when_repair_is_off() {
    let executor = Executor::new(registry_with([echo("echo")]));
    let err = executor
        .invoke_tool(ToolContext::new(), "echo", "{path: 'a'}")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err:?}");
}

#[tokio::test]
async fn repair_fixes_common_model_mistakes_and_records_it() {
    let executor = Executor::builder(registry_with([echo("echo")]))
        .repair_json(true)
        .build();
    let cases = [
        ("{path: \"a.txt\"}", json!({"path": "a.txt"})),
        ("{'path': 'a.txt'}", json!({"path": "a.txt"})),
        (
            "{\"path\": \"a.txt\", \"n\": [1, 2,],}",
            json!({"path": "a.txt", "n": [1, 2]}),
        ),
        (
            "{\"path\": \"a.txt\", \"content\": \"hel",
            json!({"path": "a.txt", "content": "hel"}),
        ),
    ];
    for (broken, expected) in cases {
        let result = executor
            .execute(ToolContext::new(), &ToolCall::new("c", "echo", broken))
            .await;
        let out = result
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("{broken}: {e}"));
        let seen: serde_json::Value = serde_json::from_str(&out.llm_text()).unwrap();
        assert_eq!(seen, expected, "{broken}");
        let repaired = result
            .repaired_arguments
            .as_deref()
            .expect("the repair is recorded");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(repaired).unwrap(),
            expected
        );
    }
}

#[tokio::test]
async fn repair_never_touches_valid_json() {
    let executor = Executor::builder(registry_with([echo("echo")]))
        .repair_json(true)
        .build();
    let valid = "{ \"b\" : 2,\n  \"a\": \"x\\u00e9\" }";
    let result = executor
        .execute(ToolContext::new(), &ToolCall::new("c", "echo", valid))
        .await;
    assert_eq!(
        result.result.unwrap().llm_text(),
        valid,
        "the tool gets the text byte for byte"
    );
    assert!(result.repaired_arguments.is_none());
}

#[tokio::test]
async fn empty_arguments_mean_an_empty_object() {
    let executor = Executor::new(registry_with([echo("echo"), address_tool()]));
    let out = executor
        .invoke_tool(ToolContext::new(), "echo", "")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "");
    let err = executor
        .invoke_tool(ToolContext::new(), "save_address", "  ")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::SchemaViolation { .. }), "{err:?}");
}

#[tokio::test]
async fn a_panicking_tool_becomes_a_panicked_error() {
    let boom = tool("boom", any_object(), ToolMeta::default(), |_, _| async {
        if true {
            panic!("kaboom");
        }
        Ok(ToolOutput::text("unreachable"))
    });
    let executor = Executor::new(registry_with([boom]));
    let err = executor
        .invoke_tool(ToolContext::new(), "boom", "{}")
        .await
        .unwrap_err();
    match err {
        ToolError::Panicked(message) => assert_eq!(message, "kaboom"),
        other => panic!("expected a panic error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_panicking_hook_becomes_a_panicked_error() {
    let executor = Executor::builder(registry_with([echo("echo")]))
        .before_hook(|_: &ToolContext, _: &HookCall<'_>| -> BeforeAction { panic!("hook bug") })
        .build();
    let err = executor
        .invoke_tool(ToolContext::new(), "echo", "{}")
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::Panicked(ref m) if m == "hook bug"),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_tool_sees_its_call_id_and_name() {
    let who = tool(
        "who",
        any_object(),
        ToolMeta::default(),
        |ctx, _| async move {
            Ok(ToolOutput::text(format!(
                "{}/{}",
                ctx.call_id().unwrap_or("-"),
                ctx.tool_name().unwrap_or("-")
            )))
        },
    );
    let executor = Executor::new(registry_with([who]));
    let result = executor
        .execute(ToolContext::new(), &ToolCall::new("call_9", "who", "{}"))
        .await;
    assert_eq!(result.call_id, "call_9");
    assert_eq!(result.model_text(), "call_9/who");
    let out = executor
        .invoke_tool(ToolContext::for_call("call_7"), "who", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "call_7/who");
}

#[tokio::test]
async fn cancelling_the_caller_interrupts_the_call() {
    let waits = tool(
        "waits",
        any_object(),
        ToolMeta::default(),
        |ctx, _| async move {
            ctx.cancelled().await;
            Err(ToolError::Cancelled)
        },
    );
    let executor = Executor::new(registry_with([waits]));
    let ctx = ToolContext::new();
    let token = ctx.cancellation().clone();
    let waits_call = ToolCall::new("c1", "waits", "{}");
    let call = executor.execute(ctx, &waits_call);
    let (result, ()) = tokio::join!(call, async move { token.cancel() });
    assert!(matches!(result.result, Err(ToolError::Cancelled)));
    assert_eq!(result.model_text(), "Error: tool execution was interrupted");

    let cancelled = ToolContext::new();
    cancelled.cancellation().cancel();
    let err = executor
        .invoke_tool(cancelled, "waits", "{}")
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Cancelled));
}

#[tokio::test]
async fn results_carry_output_for_the_model_and_for_the_user() {
    let dual = tool("dual", any_object(), ToolMeta::default(), |_, _| async {
        Ok(ToolOutput::text("3 files changed").with_user_text("3 files changed\n+++ b/x"))
    });
    let executor = Executor::new(registry_with([dual]));
    let result = executor
        .execute(ToolContext::new(), &ToolCall::new("c", "dual", "{}"))
        .await;
    assert!(result.is_success());
    assert_eq!(result.model_text(), "3 files changed");
    assert_eq!(result.user_text(), "3 files changed\n+++ b/x");
}
