//! A tool set built over a `Workspace` other than the default: every tool (files, search,
//! commands, the read-before-write record) moves with it.

use std::path::Path;

use serde_json::{Value, json};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet, Workspace};
use toolbelt_core::{ToolContext, ToolOutput};

async fn call(set: &BuiltinToolSet, name: &str, args: Value) -> ToolOutput {
    let tool = set
        .tool_list()
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool named {name}"))
        .clone();
    let out = tool
        .call(ToolContext::for_call("test"), &args.to_string())
        .await
        .unwrap_or_else(|e| panic!("{name} refused {args}: {e}"));
    assert!(!out.is_error, "{name} {args}: {}", out.llm_text());
    out
}

/// Write, Read, Edit, Glob, Grep and Bash all act in `root` (and nowhere else).
async fn every_tool_acts_in(set: &BuiltinToolSet, root: &Path) {
    call(
        set,
        "Write",
        json!({"file_path": "moved.txt", "content": "needle one\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("moved.txt")).unwrap(),
        "needle one\n"
    );
    let read = call(set, "Read", json!({"file_path": "moved.txt"})).await;
    assert_eq!(read.llm_text(), "     1\tneedle one\n");
    call(
        set,
        "Edit",
        json!({"file_path": "moved.txt", "old_string": "one", "new_string": "two"}),
    )
    .await;
    let glob = call(set, "Glob", json!({"pattern": "*.txt"})).await;
    assert!(glob.llm_text().contains("moved.txt"), "{}", glob.llm_text());
    let grep = call(
        set,
        "Grep",
        json!({"pattern": "needle two", "output_mode": "content"}),
    )
    .await;
    assert!(grep.llm_text().contains("moved.txt"), "{}", grep.llm_text());
    let bash = call(set, "Bash", json!({"command": "pwd; cat moved.txt"})).await;
    assert_eq!(
        bash.llm_text(),
        format!("{}\nneedle two\nExit code: 0", root.display())
    );
}

#[tokio::test]
async fn a_workspace_on_another_root_moves_every_tool() {
    let named = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let workspace = Workspace::local(other.path()).unwrap();
    let root = workspace.base_dir().to_path_buf();
    let set =
        BuiltinToolSet::new(BuiltinOptions::new(named.path()).with_workspace(workspace)).unwrap();
    assert_eq!(set.base_dir(), root);
    every_tool_acts_in(&set, &root).await;
    assert_eq!(std::fs::read_dir(named.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_container_workspace_moves_every_tool_and_runs_commands_inside() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::container(dir.path(), true)
        .unwrap_or_else(|e| panic!("the container sandbox must work here: {e}"));
    let root = workspace.base_dir().to_path_buf();
    let set = BuiltinToolSet::new(BuiltinOptions::default().with_workspace(workspace)).unwrap();
    assert_eq!(set.workspace().kind(), "container");
    assert_eq!(
        set.shell_sandbox(),
        Some(toolbelt_builtin::shell::SandboxMode::Container)
    );
    every_tool_acts_in(&set, &root).await;
    let inside = call(&set, "Bash", json!({"command": "hostname; echo $HOME"})).await;
    assert_eq!(inside.llm_text(), "toolbelt\n/home/toolbelt\nExit code: 0");
}

#[tokio::test]
async fn a_read_only_container_keeps_bash_but_not_writes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kept.txt"), "kept\n").unwrap();
    let set = BuiltinToolSet::new(
        BuiltinOptions::new(dir.path())
            .with_read_only(true)
            .with_sandbox(toolbelt_builtin::shell::SandboxMode::Container),
    )
    .unwrap();
    assert!(set.tool_list().iter().all(|t| t.name() != "Write"));
    let out = call(
        &set,
        "Bash",
        json!({"command": "cat kept.txt; echo gone > kept.txt; true"}),
    )
    .await;
    assert!(out.llm_text().starts_with("kept\n"), "{}", out.llm_text());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("kept.txt")).unwrap(),
        "kept\n"
    );
}
