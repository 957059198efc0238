//! The executor as a `ToolCaller`: a tool's own calls pass the whole pipeline.

use crate::common;

use common::{echo, executor_with};
use toolbelt_core::{ToolCaller, ToolContext, ToolError};
use toolbelt_exec::{BeforeAction, HookCall};

#[tokio::test]
async fn a_call_through_the_caller_meets_the_hooks_and_the_validation() {
    let executor = executor_with([echo("echo"), echo("secret")], |b| {
        b.before_hook_for("secret", |_: &ToolContext, _: &HookCall<'_>| {
            BeforeAction::Reject("not from code".into())
        })
    });
    let caller: &dyn ToolCaller = &executor;
    let out = caller
        .call_tool(ToolContext::new(), "echo", r#"{"a":1}"#)
        .await
        .unwrap();
    assert_eq!(out.llm_text(), r#"{"a":1}"#);
    let rejected = caller
        .call_tool(ToolContext::new(), "secret", "{}")
        .await
        .unwrap_err();
    assert!(matches!(rejected, ToolError::Rejected { .. }), "{rejected}");
    assert!(rejected.to_string().contains("not from code"), "{rejected}");
    let unknown = caller
        .call_tool(ToolContext::new(), "nope", "{}")
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("nope"), "{unknown}");
    let malformed = caller
        .call_tool(ToolContext::new(), "echo", "{oops")
        .await
        .unwrap_err();
    assert!(
        matches!(malformed, ToolError::InvalidArguments { .. }),
        "{malformed}"
    );
}

#[tokio::test]
async fn a_weak_handle_calls_while_the_executor_lives_and_fails_after() {
    let executor = executor_with([echo("echo")], |b| b);
    let weak = executor.downgrade();
    let out = weak
        .call_tool(ToolContext::new(), "echo", "{}")
        .await
        .unwrap();
    assert_eq!(out.llm_text(), "{}");
    drop(executor);
    let gone = weak
        .call_tool(ToolContext::new(), "echo", "{}")
        .await
        .unwrap_err();
    assert!(gone.to_string().contains("gone"), "{gone}");
}
