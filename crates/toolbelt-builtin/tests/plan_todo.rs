//! TodoWrite (issue 32, item 3): Claude Code's shape, each call replacing the list, kept per
//! session (per ReadScope), shown to the user as a checklist, offered in read-only mode,
//! bounded.

use crate::files_support;

use files_support::{call, call_ok, set_on};
use serde_json::{Value, json};
use toolbelt_builtin::fs::ReadScope;
use toolbelt_builtin::plan::TodoStatus;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{Tool, ToolContext, ToolOutput};

fn todos(items: &[(&str, &str, &str)]) -> Value {
    let items: Vec<Value> = items
        .iter()
        .map(|(content, status, active)| {
            json!({"content": content, "status": status, "activeForm": active})
        })
        .collect();
    json!({ "todos": items })
}

async fn call_in(set: &BuiltinToolSet, session: &str, args: Value) -> ToolOutput {
    let tool = set
        .tool_list()
        .iter()
        .find(|t| t.name() == "TodoWrite")
        .unwrap()
        .clone();
    let ctx = ToolContext::for_call("c").with_extension(ReadScope(session.into()));
    tool.call(ctx, &args.to_string()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_call_replaces_the_list_and_the_user_sees_a_checklist() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let first = todos(&[
        ("Run the tests", "in_progress", "Running the tests"),
        ("Fix the failures", "pending", "Fixing the failures"),
    ]);
    let out = call_ok(&set, "TodoWrite", first).await;
    assert!(
        out.llm_text()
            .starts_with("Todos have been modified successfully")
    );
    assert_eq!(out.user_text(), "▶ Running the tests\n☐ Fix the failures\n");
    assert_eq!(out.structured.as_ref().unwrap()["oldTodos"], json!([]));

    let second = todos(&[
        ("Run the tests", "completed", "Running the tests"),
        ("Fix the failures", "in_progress", "Fixing the failures"),
    ]);
    let out = call_ok(&set, "TodoWrite", second).await;
    assert_eq!(out.user_text(), "☑ Run the tests\n▶ Fixing the failures\n");
    let structured = out.structured.as_ref().unwrap();
    assert_eq!(structured["oldTodos"][0]["status"], "in_progress");
    assert_eq!(
        structured["newTodos"][1]["activeForm"],
        "Fixing the failures"
    );
    let kept = set.todos(None);
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0].status, TodoStatus::Completed);

    let out = call_ok(&set, "TodoWrite", json!({"todos": []})).await;
    assert_eq!(out.user_text(), "Todo list cleared\n");
    assert!(set.todos(None).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn each_session_has_its_own_list() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    call_in(&set, "a", todos(&[("Task of a", "pending", "Doing a")])).await;
    call_in(&set, "b", todos(&[("Task of b", "pending", "Doing b")])).await;
    assert_eq!(set.todos(Some("a"))[0].content, "Task of a");
    assert_eq!(set.todos(Some("b"))[0].content, "Task of b");
    assert!(set.todos(None).is_empty());
    let out = call_in(&set, "a", todos(&[("Next of a", "pending", "Doing next")])).await;
    assert_eq!(
        out.structured.as_ref().unwrap()["oldTodos"][0]["content"],
        "Task of a"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_lists_are_refused_and_read_only_sets_offer_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let out = call(&set, "TodoWrite", todos(&[("", "pending", "x")])).await;
    assert!(out.is_error && out.llm_text().contains("item 1 has an empty content"));
    let many: Vec<(&str, &str, &str)> = vec![("t", "pending", "t"); 201];
    let out = call(&set, "TodoWrite", todos(&many)).await;
    assert!(
        out.is_error && out.llm_text().contains("limit of 200"),
        "{}",
        out.llm_text()
    );
    let tool = set
        .tool_list()
        .iter()
        .find(|t| t.name() == "TodoWrite")
        .unwrap()
        .clone();
    let wrong = tool
        .call(
            ToolContext::new(),
            &todos(&[("t", "done", "t")]).to_string(),
        )
        .await;
    assert!(
        wrong.is_err(),
        "an unknown status is invalid arguments: {wrong:?}"
    );
    // One line per item, whatever the model put in it.
    let out = call_ok(&set, "TodoWrite", todos(&[("a\nb", "pending", "x")])).await;
    assert_eq!(out.user_text(), "☐ a b\n");

    let read_only =
        BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_read_only(true)).unwrap();
    let tool = read_only
        .tool_list()
        .iter()
        .find(|t| t.name() == "TodoWrite")
        .expect("TodoWrite is offered in read-only mode");
    assert!(tool.declaration().meta.is_read_only());
}
