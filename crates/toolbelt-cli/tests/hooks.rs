//! Command hooks from the settings files in `toolbelt run`: the user's own file's hooks run,
//! the project's only with `--project-hooks`.

use crate::run_support;

use std::path::Path;

use run_support::{output, project, text, tool_contents, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// A `PreToolUse` hook on Write: blocks a `*.lock` file, telling the model why.
const NO_LOCK_FILES: &str = r#"{"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command",
  "command": "if grep -q '\\.lock\"'; then echo 'lock files are generated, not written' >&2; exit 2; fi"}]}]}}"#;

/// A hook that leaves a mark where it ran.
const MARKS: &str = r#"{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "touch hook-ran"}]}]}}"#;

fn write_call(dir: &Path, name: &str) -> Reply {
    let path = dir.join(name).display().to_string();
    let arguments = serde_json::json!({"file_path": path, "content": "x"}).to_string();
    Reply::tool_call("call_1", "Write", &arguments)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_users_hook_blocks_a_write_and_the_model_reads_why() {
    let dir = project();
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("toolbelt")).unwrap();
    std::fs::write(config.path().join("toolbelt/settings.json"), NO_LOCK_FILES).unwrap();
    let server = ScriptedServer::start([
        write_call(dir.path(), "Cargo.lock"),
        Reply::text("I left the lock file alone."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .env("XDG_CONFIG_HOME", config.path())
        .args(["run", "pin the versions", "--yes", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !dir.path().join("Cargo.lock").exists(),
        "the hook did not block"
    );
    let told = tool_contents(&server.requests()[1]);
    assert!(told[0].contains("lock files are generated"), "{told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_projects_hooks_run_only_with_project_hooks() {
    let dir = project();
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".toolbelt")).unwrap();
    std::fs::write(dir.path().join(".toolbelt/settings.json"), MARKS).unwrap();
    let server = ScriptedServer::start([
        write_call(dir.path(), "a.txt"),
        Reply::text("Done."),
        write_call(dir.path(), "b.txt"),
        Reply::text("Done."),
    ])
    .await
    .unwrap();
    let run = |trust: bool| {
        let mut command = toolbelt(&server, dir.path());
        command
            .env("XDG_CONFIG_HOME", config.path())
            .args(["run", "write", "--yes", "--dir"])
            .arg(dir.path());
        if trust {
            command.arg("--project-hooks");
        }
        command
    };
    let untrusted = output(run(false), "").await;
    let stderr = text(&untrusted.stderr);
    assert_eq!(untrusted.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("not run without --project-hooks"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("hook-ran").exists(),
        "a project's hook ran untrusted"
    );
    assert!(dir.path().join("a.txt").exists());

    let trusted = output(run(true), "").await;
    assert_eq!(trusted.status.code(), Some(0), "{}", text(&trusted.stderr));
    assert!(
        dir.path().join("hook-ran").exists(),
        "the trusted hook did not run"
    );
}
