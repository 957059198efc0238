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

/// The user's settings with `hooks` in `config/toolbelt/settings.json`.
fn user_settings(hooks: &str) -> tempfile::TempDir {
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("toolbelt")).unwrap();
    std::fs::write(config.path().join("toolbelt/settings.json"), hooks).unwrap();
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn user_prompt_submit_hooks_refuse_a_prompt_or_add_context() {
    let hooks = r#"{"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "if grep -q secret; then echo 'no secrets in prompts' >&2; exit 2; fi"},
        {"type": "command", "command": "echo 'The release is on Friday.'"}]}]}}"#;
    let config = user_settings(hooks);
    let dir = project();
    let server = ScriptedServer::start([Reply::text("Noted.")])
        .await
        .unwrap();
    let run = |prompt: &str| {
        let mut command = toolbelt(&server, dir.path());
        command
            .env("XDG_CONFIG_HOME", config.path())
            .args(["run", prompt, "--dir"])
            .arg(dir.path());
        command
    };
    let refused = output(run("here is my secret token"), "").await;
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("no secrets in prompts"));
    assert!(
        server.requests().is_empty(),
        "a refused prompt reached the model"
    );

    let sent = output(run("when do we ship?"), "").await;
    assert_eq!(sent.status.code(), Some(0), "{}", text(&sent.stderr));
    let messages = server.requests()[0].messages().to_vec();
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["when do we ship?", "The release is on Friday."]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_hook_sends_the_agent_on_once_and_then_lets_it_end() {
    let hooks = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command",
        "command": "if grep -q '\"stop_hook_active\":false'; then echo 'run the tests first' >&2; exit 2; fi"}]}]}}"#;
    let config = user_settings(hooks);
    let dir = project();
    let server = ScriptedServer::start([Reply::text("Done."), Reply::text("Tests pass.")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .env("XDG_CONFIG_HOME", config.path())
        .args(["run", "fix it", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("a Stop hook sends the agent on: run the tests first"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 2, "one more turn, then the end");
    let last = server.requests()[1].messages().last().cloned().unwrap();
    assert_eq!(last["content"], "run the tests first");
    assert!(text(&out.stdout).contains("Tests pass."));
}

/// A `UserPromptSubmit` hook refusing prompts that mention a secret and adding a line of
/// context to the others, and a `Stop` hook sending the agent on once.
const PROMPT_AND_STOP: &str = r#"{"hooks": {
    "UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "if grep -q secret; then echo 'no secrets in prompts' >&2; exit 2; fi"},
        {"type": "command", "command": "echo 'The release is on Friday.'"}]}],
    "Stop": [{"hooks": [{"type": "command",
        "command": "if grep -q '\"stop_hook_active\":false'; then echo 'run the tests first' >&2; exit 2; fi"}]}]}}"#;

#[tokio::test(flavor = "multi_thread")]
async fn chat_runs_the_prompt_and_stop_hooks_on_each_line() {
    let config = user_settings(PROMPT_AND_STOP);
    let dir = project();
    let server = ScriptedServer::start([Reply::text("Noted."), Reply::text("Tests pass.")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .env("XDG_CONFIG_HOME", config.path())
        .args(["chat", "--dir"])
        .arg(dir.path());
    let out = output(command, "here is my secret\nwhen do we ship?\n").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "the prompt was not sent: a UserPromptSubmit hook refused it: no secrets in prompts"
        ),
        "{stderr}"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "the refused line never reached the model"
    );
    let users: Vec<&str> = requests[0]
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["when do we ship?", "The release is on Friday."]);
    assert!(
        stderr.contains("a Stop hook sends the agent on: run the tests first"),
        "{stderr}"
    );
    let last = requests[1].messages().last().cloned().unwrap();
    assert_eq!(last["content"], "run the tests first");
    assert!(
        stdout.contains("Noted.") && stdout.contains("Tests pass."),
        "{stdout}"
    );
}
