//! Code that calls tools: `execute_code` programs call the allowed tools as functions, each
//! call through a real executor (its hooks see every call), in the workspace-write sandbox.

use std::sync::Arc;

use serde_json::json;
use toolbelt_builtin::code::CodeToolAccess;
use toolbelt_builtin::shell::SandboxMode;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{ToolContext, ToolOutput};
use toolbelt_exec::{BeforeAction, Executor, HookCall, Registry};

/// A built-in set in `dir` (workspace-write sandbox) whose programs may call `access`, the
/// executor over it (bound to the set), and how many calls its before hook saw, by tool.
struct Rig {
    executor: Executor,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
}

async fn rig(dir: &std::path::Path, access: CodeToolAccess) -> Rig {
    let set = BuiltinToolSet::new(
        BuiltinOptions::new(dir)
            .with_sandbox(SandboxMode::WorkspaceWrite)
            .with_code_tools(access),
    )
    .unwrap_or_else(|e| panic!("this kernel must enforce the workspace-write sandbox: {e}"));
    let registry = Arc::new(Registry::new());
    registry
        .add_tool_set(Arc::new(set.clone()), toolbelt_exec::ToolSetRefresh::Cached)
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let executor = Executor::builder(registry)
        .before_hook(move |_: &ToolContext, call: &HookCall<'_>| {
            log.lock().unwrap().push(call.tool_name().to_string());
            if call.tool_name() == "Write" {
                BeforeAction::Reject("writing is not allowed from code in this test".into())
            } else {
                BeforeAction::Continue
            }
        })
        .build();
    set.bind_tool_caller(Arc::new(executor.downgrade()));
    // The registry resolves a set's tools from its last listing, as a run's snapshot makes.
    executor.registry().snapshot(&ToolContext::new()).await;
    Rig { executor, seen }
}

async fn run(rig: &Rig, language: &str, code: &str) -> ToolOutput {
    rig.executor
        .invoke_tool(
            ToolContext::for_call("call_1"),
            "execute_code",
            &json!({"language": language, "code": code}).to_string(),
        )
        .await
        .unwrap_or_else(|e| panic!("execute_code failed: {e}"))
}

/// Fifty files, every third with a TODO.
fn fifty_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..50 {
        let body = if i % 3 == 0 {
            format!("fn f{i}() {{}}\n// TODO: finish f{i}\n")
        } else {
            format!("fn f{i}() {{}}\n")
        };
        std::fs::write(dir.path().join(format!("f{i:02}.rs")), body).unwrap();
    }
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_calls_tools_over_fifty_files_and_only_its_print_returns() {
    let dir = fifty_files();
    let rig = rig(
        dir.path(),
        CodeToolAccess::Only(vec!["Glob".into(), "Read".into()]),
    )
    .await;
    let code = "\
files = tools.Glob(pattern='*.rs').split('\\n')
todo = [f for f in files if 'TODO' in tools.Read(file_path=f)]
print(len(files), 'files,', len(todo), 'with a TODO')
";
    let out = run(&rig, "python", code).await;
    let text = out.llm_text();
    assert_eq!(text, "50 files, 17 with a TODO\nExit code: 0");
    assert_eq!(out.meta.unwrap()["tool_calls"], 51);
    let seen = rig.seen.lock().unwrap().clone();
    assert_eq!(seen.iter().filter(|t| *t == "Read").count(), 50, "{seen:?}");
    assert_eq!(seen.iter().filter(|t| *t == "Glob").count(), 1, "{seen:?}");
    assert_eq!(seen.iter().filter(|t| *t == "execute_code").count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_call_raises_tool_error_with_the_reason_inside_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let rig = rig(dir.path(), CodeToolAccess::All).await;
    let code = "\
try:
    tools.Write(file_path='x.txt', content='hi')
except ToolError as e:
    print('refused:', e)
try:
    tools.execute_code(language='python', code='print(1)')
except ToolError as e:
    print('refused:', e)
try:
    tools.NoSuchTool()
except ToolError as e:
    print('unknown:', 'NoSuchTool' in str(e))
r = tools.Bash(command='exit 4')
print('bash exit', r.structured['exit_code'])
";
    let text = run(&rig, "python", code).await.llm_text();
    assert!(
        text.contains("refused: ") && text.contains("writing is not allowed from code"),
        "{text}"
    );
    assert!(
        text.contains("refused: execute_code cannot be called from code"),
        "{text}"
    );
    assert!(text.contains("unknown: True"), "{text}");
    assert!(text.contains("bash exit 4"), "{text}");
    assert!(!dir.path().join("x.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn javascript_programs_call_tools_too_and_the_allow_list_holds() {
    let dir = fifty_files();
    let rig = rig(dir.path(), CodeToolAccess::Only(vec!["Grep".into()])).await;
    let code = "\
const hits = tools.Grep({pattern: 'TODO', output_mode: 'files_with_matches'});
console.log(hits.split('\\n').filter(Boolean).length, 'files');
try { tools.Read({file_path: 'f00.rs'}); } catch (e) { console.log(e instanceof ToolError, e.message); }
";
    let text = run(&rig, "javascript", code).await.llm_text();
    assert!(text.starts_with("17 files\n"), "{text}");
    assert!(
        text.contains("true Read is not one of the tools this code may call (Grep)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_description_lists_the_signatures_of_the_callable_built_in_tools() {
    let dir = tempfile::tempdir().unwrap();
    let rig = rig(dir.path(), CodeToolAccess::Only(vec!["Grep".into()])).await;
    let snapshot = rig.executor.registry().snapshot(&ToolContext::new()).await;
    let description = &snapshot
        .get("execute_code")
        .expect("execute_code is offered")
        .declaration()
        .description;
    assert!(
        description.contains("tools.Grep(pattern: str"),
        "{description}"
    );
    assert!(!description.contains("tools.Read("), "{description}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_bound_executor_a_call_says_why_and_without_access_there_are_no_tools() {
    let dir = tempfile::tempdir().unwrap();
    let unbound = BuiltinToolSet::new(
        BuiltinOptions::new(dir.path())
            .with_sandbox(SandboxMode::WorkspaceWrite)
            .with_code_tools(CodeToolAccess::All),
    )
    .unwrap();
    let code = "try:\n    tools.Glob(pattern='*')\nexcept ToolError as e:\n    print(e)\n";
    let out =
        crate::files_support::run_code(&unbound, json!({"language": "python", "code": code})).await;
    assert!(
        out.llm_text()
            .contains("did not connect execute_code to its executor"),
        "{}",
        out.llm_text()
    );
    // Off by default: `tools` is not defined at all.
    let plain = crate::files_support::set_on(dir.path());
    let out =
        crate::files_support::run_code(&plain, json!({"language": "python", "code": code})).await;
    assert!(out.llm_text().contains("NameError"), "{}", out.llm_text());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_or_malformed_request_is_refused_and_the_channel_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let rig = rig(dir.path(), CodeToolAccess::All).await;
    let code = "\
import json, os
req = open(os.environ['TOOLBELT_TOOL_REQUESTS'], 'w')
res = open(os.environ['TOOLBELT_TOOL_RESULTS'])
req.write('x' * (2 * 1024 * 1024) + '\\n'); req.flush()
print(json.loads(res.readline())['error'])
req.write('{not json\\n'); req.flush()
print(json.loads(res.readline())['error'].split(':')[0])
print(tools.Glob(pattern='*.none') or 'still answering')
";
    let text = run(&rig, "python", code).await.llm_text();
    assert!(
        text.contains("a tool request may be at most 1048576 bytes"),
        "{text}"
    );
    assert!(text.contains("the request is not valid JSON"), "{text}");
    assert!(!text.contains("Traceback"), "{text}");
}
