//! Command hooks from a settings file, around real built-in tools on a real directory: one
//! that blocks writes to `*.lock`, one that rewrites an argument, one that hangs past its
//! timeout (and leaves nothing running), one that exits 1, and PostToolUse hooks.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{ToolContext, ToolError, ToolSet};
use toolbelt_exec::{Executor, Registry, ToolSetRefresh};
use toolbelt_ext::{CommandHooks, CommandHooksBuilder};
use toolbelt_testkit::{is_running, pids_in, python, wait_until_gone};

fn hooks(dir: &Path, settings: serde_json::Value) -> CommandHooks {
    let mut builder = CommandHooksBuilder::new(dir);
    builder
        .add_settings(&settings.to_string(), Path::new("settings.json"))
        .unwrap();
    builder.build(None)
}

async fn executor(dir: &Path, hooks: CommandHooks) -> Executor {
    let set: Arc<dyn ToolSet> = Arc::new(BuiltinToolSet::new(BuiltinOptions::new(dir)).unwrap());
    let registry = Arc::new(Registry::new());
    registry.add_tool_set(set, ToolSetRefresh::Cached).unwrap();
    registry
        .refresh_tool_set(&ToolContext::new(), "builtin")
        .await
        .unwrap();
    Executor::builder(registry)
        .before_hook(hooks.clone())
        .after_hook(hooks)
        .build()
}

async fn call(exec: &Executor, tool: &str, args: serde_json::Value) -> Result<String, ToolError> {
    exec.invoke_tool(ToolContext::for_call("c1"), tool, &args.to_string())
        .await
        .map(|out| out.llm_text())
}

fn pre(matcher: &str, command: &str, timeout: u64) -> serde_json::Value {
    json!({"hooks": {"PreToolUse": [{"matcher": matcher,
        "hooks": [{"type": "command", "command": command, "timeout": timeout}]}]}})
}

#[tokio::test]
async fn a_hook_blocks_writes_to_lock_files_and_the_model_reads_why() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"input=$(cat); case "$input" in *'.lock"'*) echo "lock files are generated: run cargo update" >&2; exit 2;; esac"#;
    let exec = executor(dir.path(), hooks(dir.path(), pre("Write|Edit", script, 10))).await;
    let error = call(
        &exec,
        "Write",
        json!({"file_path": "Cargo.lock", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, ToolError::Rejected { .. }), "{error:?}");
    assert!(error.to_string().contains("run cargo update"), "{error}");
    assert!(!dir.path().join("Cargo.lock").exists());
    call(
        &exec,
        "Write",
        json!({"file_path": "notes.txt", "content": "x"}),
    )
    .await
    .unwrap();
    assert!(dir.path().join("notes.txt").exists());
    // The matcher is the whole name: a Read is not a Write.
    call(&exec, "Read", json!({"file_path": "notes.txt"}))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_hook_rewrites_an_argument() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{} -c 'import json,sys; c=json.load(sys.stdin); i=c[\"tool_input\"]; \
         i[\"content\"]=i[\"content\"].upper(); assert c[\"hook_event_name\"]==\"PreToolUse\"; \
         print(json.dumps({{\"hookSpecificOutput\": {{\"hookEventName\": \"PreToolUse\", \
         \"permissionDecision\": \"allow\", \"updatedInput\": i}}}}))'",
        python()
    );
    let exec = executor(dir.path(), hooks(dir.path(), pre("Write", &script, 20))).await;
    call(
        &exec,
        "Write",
        json!({"file_path": "a.txt", "content": "quiet"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "QUIET"
    );
}

#[tokio::test]
async fn a_hook_that_hangs_past_its_timeout_fails_the_call_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "echo $$ > {p}; setsid sleep 300 & echo $! >> {p}; sleep 300",
        p = pids.display()
    );
    let exec = executor(dir.path(), hooks(dir.path(), pre("", &script, 1))).await;
    let error = call(
        &exec,
        "Write",
        json!({"file_path": "b.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("timed out after 1 s"), "{error}");
    assert!(
        !dir.path().join("b.txt").exists(),
        "a hook that cannot answer allows nothing"
    );
    let started = pids_in(&pids, 2).expect("the hook wrote its pids");
    for pid in started {
        assert!(
            wait_until_gone(pid, Duration::from_secs(5)),
            "process {pid} of the hook outlived it (running: {})",
            is_running(pid)
        );
    }
}

#[tokio::test]
async fn a_hook_that_exits_1_or_prints_garbage_fails_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let exec = executor(
        dir.path(),
        hooks(
            dir.path(),
            pre("Write", "echo 'checker crashed' >&2; exit 1", 10),
        ),
    )
    .await;
    let error = call(
        &exec,
        "Write",
        json!({"file_path": "c.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("exited with 1")
            && error.to_string().contains("checker crashed"),
        "{error}"
    );
    assert!(!dir.path().join("c.txt").exists());

    let exec = executor(
        dir.path(),
        hooks(dir.path(), pre("Write", "echo looks fine to me", 10)),
    )
    .await;
    let error = call(
        &exec,
        "Write",
        json!({"file_path": "c.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("not a JSON object"), "{error}");
    assert!(!dir.path().join("c.txt").exists());

    let deny = r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "not in this folder"}}'"#;
    let exec = executor(dir.path(), hooks(dir.path(), pre("Write", deny, 10))).await;
    let error = call(
        &exec,
        "Write",
        json!({"file_path": "c.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("not in this folder"), "{error}");
    // `ask` with nobody to ask refuses.
    let ask = r#"echo '{"hookSpecificOutput": {"permissionDecision": "ask"}}'"#;
    let exec = executor(dir.path(), hooks(dir.path(), pre("Write", ask, 10))).await;
    let error = call(
        &exec,
        "Write",
        json!({"file_path": "c.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("nobody could be asked"),
        "{error}"
    );
    assert!(!dir.path().join("c.txt").exists());
}

#[tokio::test]
async fn post_tool_use_hooks_see_the_result_and_can_object_or_add_context() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\n").unwrap();
    let seen = dir.path().join("seen.json");
    let settings = json!({"hooks": {"PostToolUse": [
        {"matcher": "Read", "hooks": [{"type": "command", "command": format!(
            "cat > {}; echo '{{\"hookSpecificOutput\": {{\"additionalContext\": \"remember the style guide\"}}}}'",
            seen.display())}]},
        {"matcher": "Write", "hooks": [{"type": "command", "command": "echo 'formatter failed on it' >&2; exit 2"}]}
    ]}});
    let exec = executor(dir.path(), hooks(dir.path(), settings)).await;
    let read = call(&exec, "Read", json!({"file_path": "notes.txt"}))
        .await
        .unwrap();
    assert!(
        read.contains("alpha") && read.ends_with("remember the style guide"),
        "{read}"
    );
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_input"]["file_path"], "notes.txt");
    assert!(
        input["tool_response"]["content"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );

    let out = exec
        .invoke_tool(
            ToolContext::for_call("c2"),
            "Write",
            &json!({"file_path": "new.txt", "content": "x"}).to_string(),
        )
        .await
        .unwrap();
    assert!(
        out.is_error && out.llm_text().contains("formatter failed on it"),
        "{}",
        out.llm_text()
    );
    assert!(
        dir.path().join("new.txt").exists(),
        "the tool ran before the hook objected"
    );
}

#[test]
fn bad_hook_settings_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, needle) in [
        (pre("Write(", "true", 10), "matcher"),
        (pre("Write", "true", 0), "timeout"),
        (
            json!({"hooks": {"PreToolUse": [{"matcher": "", "hooks": [{"type": "prompt", "command": "x"}]}]}}),
            "prompt",
        ),
        (json!({"hooks": {"PreToolUse": "x"}}), "settings.json"),
    ] {
        let mut builder = CommandHooksBuilder::new(dir.path());
        let error = builder
            .add_settings(&bad.to_string(), Path::new("settings.json"))
            .unwrap_err()
            .to_string();
        assert!(error.contains(needle), "{error}");
    }
    let mut builder = CommandHooksBuilder::new(dir.path());
    builder
        .add_settings(
            &json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "true"}]}]}})
                .to_string(),
            Path::new("s.json"),
        )
        .unwrap();
    assert_eq!(builder.build(None).unsupported(), ["SessionStart (s.json)"]);
}

#[tokio::test]
async fn a_matcher_names_a_servers_tools_as_claude_code_does() {
    use toolbelt_core::{DynTool, FunctionTool, StaticToolSet};
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Nothing {}
    let dir = tempfile::tempdir().unwrap();
    let tool = |name: &str| -> DynTool {
        Arc::new(
            FunctionTool::new(name, "does it", |_ctx: ToolContext, _: Nothing| async {
                Ok::<_, ToolError>("done")
            })
            .unwrap(),
        )
    };
    let registry = Arc::new(Registry::new());
    for (set, name) in [("github", "create_issue"), ("notes", "add_note")] {
        let set: Arc<dyn ToolSet> = Arc::new(StaticToolSet::new(set, vec![tool(name)]));
        let name = set.name().to_string();
        registry.add_tool_set(set, ToolSetRefresh::Cached).unwrap();
        registry
            .refresh_tool_set(&ToolContext::new(), &name)
            .await
            .unwrap();
    }
    let hooks = hooks(
        dir.path(),
        pre("mcp__github__.*", "echo 'no issues today' >&2; exit 2", 10),
    );
    let exec = Executor::builder(registry).before_hook(hooks).build();
    let blocked = call(&exec, "create_issue", json!({})).await.unwrap_err();
    assert!(blocked.to_string().contains("no issues today"), "{blocked}");
    assert_eq!(call(&exec, "add_note", json!({})).await.unwrap(), "done");
}
