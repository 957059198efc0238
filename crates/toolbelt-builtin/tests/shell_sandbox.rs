//! The Landlock sandbox, on the running kernel.

mod shell_support;

use std::sync::Arc;

use serde_json::json;
use shell_support::*;
use toolbelt_builtin::shell::{LandlockSandbox, SandboxError, ShellConfig, ShellTools};

/// The sandbox, or `None` (with the reason printed) where the kernel lacks Landlock.
fn sandbox_or_skip(deny_network: bool) -> Option<LandlockSandbox> {
    let built = LandlockSandbox::new().and_then(|s| s.deny_network(deny_network).checked());
    match built {
        Ok(sandbox) => Some(sandbox),
        Err(SandboxError::Unsupported(reason)) => {
            eprintln!("skipped: this kernel lacks Landlock: {reason}");
            None
        }
        Err(other) => panic!("unexpected sandbox error: {other}"),
    }
}

#[tokio::test]
async fn sandbox_allows_writes_inside_and_blocks_writes_outside() {
    let Some(sandbox) = sandbox_or_skip(false) else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("readable.txt"), "visible\n").unwrap();
    let shell = ShellTools::sandboxed(ShellConfig::new(base.path()), Arc::new(sandbox)).unwrap();
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
    let Some(sandbox) = sandbox_or_skip(false) else {
        return;
    };
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let shell = ShellTools::sandboxed(ShellConfig::new(base.path()), Arc::new(sandbox)).unwrap();
    let target = outside.path().join("escape.txt");
    let started = call(
        &tool(&shell, "Bash"),
        json!({"command": format!("echo x > {}", target.display()), "run_in_background": true}),
    )
    .await
    .unwrap();
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
async fn sandbox_can_forbid_network_connections() {
    let Some(sandbox) = sandbox_or_skip(true) else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = tempfile::tempdir().unwrap();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let open = shell_in(base.path());
    let allowed = call(&tool(&open, "Bash"), json!({"command": command}))
        .await
        .unwrap();
    assert_eq!(allowed.llm_text(), "connected\nExit code: 0");

    let confined = ShellTools::sandboxed(ShellConfig::new(base.path()), Arc::new(sandbox)).unwrap();
    let denied = call(&tool(&confined, "Bash"), json!({"command": command}))
        .await
        .unwrap();
    assert!(
        !denied.llm_text().contains("connected\n"),
        "{}",
        denied.llm_text()
    );
    assert_ne!(denied.meta.unwrap()["exit_code"], 0);
}
