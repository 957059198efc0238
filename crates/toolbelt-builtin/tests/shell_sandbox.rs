//! The Landlock sandbox, on the running kernel.

use crate::shell_support;

use std::sync::Arc;

use serde_json::json;
use shell_support::*;
use toolbelt_builtin::shell::{
    LandlockSandbox, SandboxError, SandboxMode, ShellConfig, ShellTools,
};

/// The sandbox for `mode`; this kernel must enforce it (CI's does).
fn sandbox(mode: SandboxMode) -> LandlockSandbox {
    LandlockSandbox::new(mode)
        .unwrap_or_else(|e| panic!("this kernel must enforce the {mode} sandbox: {e}"))
}

#[tokio::test]
async fn sandbox_allows_writes_inside_and_blocks_writes_outside() {
    let sandbox = sandbox(SandboxMode::WorkspaceWrite);
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("readable.txt"), "visible\n").unwrap();
    let shell = ShellTools::new(ShellConfig::new(base.path()).sandbox(Arc::new(sandbox))).unwrap();
    let bash = tool(&shell, "Bash");

    let inside = call(
        &bash,
        json!({"command": "echo in > inside.txt && cat inside.txt"}),
    )
    .await
    .unwrap();
    assert_eq!(inside.llm_text(), "in\nExit code: 0");

    let target = outside.path().join("escape.txt");
    let command = format!(
        "cat {}/readable.txt; echo out > {}",
        outside.path().display(),
        target.display()
    );
    let blocked = call(&bash, json!({"command": command})).await.unwrap();
    let text = blocked.llm_text();
    assert!(text.starts_with("visible\n"), "reads stay allowed: {text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert_eq!(blocked.meta.unwrap()["exit_code"], 1);
    assert!(!target.exists(), "the sandbox let a write escape");

    let temp = call(
        &bash,
        json!({"command": "mktemp && echo null > /dev/null && echo ok"}),
    )
    .await
    .unwrap();
    assert!(
        temp.llm_text()
            .starts_with(&shell.temp_dir().display().to_string()),
        "{}",
        temp.llm_text()
    );
    assert!(
        temp.llm_text().ends_with("ok\nExit code: 0"),
        "{}",
        temp.llm_text()
    );
}

#[tokio::test]
async fn background_tasks_are_sandboxed_too() {
    let sandbox = sandbox(SandboxMode::WorkspaceWrite);
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let shell = ShellTools::new(ShellConfig::new(base.path()).sandbox(Arc::new(sandbox))).unwrap();
    let target = outside.path().join("escape.txt");
    let started = run_bash(
        &shell,
        json!({"command": format!("echo x > {}", target.display()), "run_in_background": true}),
    )
    .await;
    let id = started.meta.unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = call(&tool(&shell, "TaskOutput"), json!({"task_id": id}))
        .await
        .unwrap();
    assert!(
        out.llm_text().contains("Permission denied"),
        "{}",
        out.llm_text()
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn the_network_can_be_allowed_in_the_sandbox() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = tempfile::tempdir().unwrap();
    let sandbox = sandbox(SandboxMode::WorkspaceWrite)
        .allow_network(true)
        .unwrap();
    assert!(!sandbox.denies_network());
    let shell = ShellTools::new(ShellConfig::new(base.path()).sandbox(Arc::new(sandbox))).unwrap();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let out = run_bash(&shell, json!({"command": command})).await;
    assert_eq!(out.llm_text(), "connected\nExit code: 0");
}

#[test]
fn modes_parse_print_and_describe_themselves() {
    for mode in [
        SandboxMode::Off,
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::Container,
    ] {
        assert_eq!(mode.to_string().parse::<SandboxMode>(), Ok(mode));
    }
    assert!(
        "none"
            .parse::<SandboxMode>()
            .unwrap_err()
            .contains("off, read-only, workspace-write or container")
    );
    let summary = sandbox(SandboxMode::ReadOnly).summary();
    assert!(summary.starts_with("read-only (Landlock ABI "), "{summary}");
    assert!(summary.contains("network off"), "{summary}");
    assert!(matches!(
        LandlockSandbox::new(SandboxMode::Off),
        Err(SandboxError::Setup(_))
    ));
    assert_eq!(SandboxMode::best_available(), SandboxMode::WorkspaceWrite);
}
