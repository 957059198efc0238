//! Permission rules in `toolbelt run`: from `--allow` / `--deny` and from the settings files
//! in `--dir` (`.toolbelt/settings.json`, `.claude/settings.json`) and the user's config
//! directory; a broken settings file stops the command with its name.

use crate::run_support;

use std::path::Path;

use run_support::{output, project, text, tool_contents, toolbelt};
use serde_json::json;
use toolbelt_model::testing::{Reply, ScriptedServer};

/// A server whose model calls `tool` with `args` once, then answers "done".
async fn calls(tool: &str, args: serde_json::Value) -> ScriptedServer {
    ScriptedServer::start([
        Reply::tool_call("call_1", tool, &args.to_string()),
        Reply::text("done"),
    ])
    .await
    .unwrap()
}

/// `toolbelt run` in `dir`, with a config directory of its own (no user settings leak in).
fn run_in(
    server: &ScriptedServer,
    dir: &Path,
    config: &Path,
    extra: &[&str],
) -> std::process::Command {
    let mut command = toolbelt(server, dir);
    command
        .env("XDG_CONFIG_HOME", config)
        .args(["run", "go", "--dir"])
        .arg(dir)
        .args(extra);
    command
}

fn settings(dir: &Path, file: &str, value: serde_json::Value) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, value.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deny_flag_refuses_a_command_hidden_behind_wrappers_even_with_yes() {
    let dir = project();
    let config = tempfile::tempdir().unwrap();
    let server = calls("Bash", json!({"command": "env X=1 sh -c 'rm notes.txt'"})).await;
    let out = output(
        run_in(
            &server,
            dir.path(),
            config.path(),
            &["--yes", "--deny", "Bash(rm:*)"],
        ),
        "",
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        dir.path().join("notes.txt").exists(),
        "the denied command ran"
    );
    let told = tool_contents(&server.requests()[1]);
    assert!(told[0].contains("Bash(rm:*)"), "{told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allow_rule_in_the_project_settings_runs_a_command_without_a_terminal() {
    let dir = project();
    let config = tempfile::tempdir().unwrap();
    settings(
        dir.path(),
        ".toolbelt/settings.json",
        json!({"permissions": {"allow": ["Bash(touch:*)"]}}),
    );
    let server = calls("Bash", json!({"command": "touch made.txt"})).await;
    let out = output(run_in(&server, dir.path(), config.path(), &[]), "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        dir.path().join("made.txt").exists(),
        "{}",
        text(&out.stderr)
    );

    // Without the rule the same call needs approval, and nobody can be asked on a pipe.
    std::fs::remove_file(dir.path().join("made.txt")).unwrap();
    std::fs::remove_file(dir.path().join(".toolbelt/settings.json")).unwrap();
    let server = calls("Bash", json!({"command": "touch made.txt"})).await;
    let out = output(run_in(&server, dir.path(), config.path(), &[]), "").await;
    assert!(!dir.path().join("made.txt").exists());
    assert!(
        text(&out.stderr).contains("needs approval"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_deny_in_claude_settings_keeps_grep_out_of_the_folder() {
    let dir = project();
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("secrets")).unwrap();
    std::fs::write(dir.path().join("secrets/key.txt"), "alpha secret\n").unwrap();
    settings(
        dir.path(),
        ".claude/settings.json",
        json!({"permissions": {"deny": ["Read(./secrets/**)"]}}),
    );
    let server = calls("Grep", json!({"pattern": "alpha"})).await;
    let out = output(run_in(&server, dir.path(), config.path(), &[]), "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let told = tool_contents(&server.requests()[1]);
    assert!(told[0].contains("notes.txt"), "{told:?}");
    assert!(!told[0].contains("secrets"), "{told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn user_settings_apply_and_a_broken_file_stops_the_command_with_its_name() {
    let dir = project();
    let config = tempfile::tempdir().unwrap();
    settings(
        config.path(),
        "toolbelt/settings.json",
        json!({"permissions": {"deny": ["Read(notes.txt)"]}}),
    );
    let server = calls("Read", json!({"file_path": "notes.txt"})).await;
    let out = output(run_in(&server, dir.path(), config.path(), &[]), "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let told = tool_contents(&server.requests()[1]);
    assert!(
        told[0].contains("Read(notes.txt)") && !told[0].contains("alpha"),
        "{told:?}"
    );

    settings(
        dir.path(),
        ".claude/settings.json",
        json!({"permissions": {"deny": ["Bash(ls"]}}),
    );
    let server = ScriptedServer::start([Reply::text("never asked")])
        .await
        .unwrap();
    let out = output(run_in(&server, dir.path(), config.path(), &[]), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(".claude/settings.json") && stderr.contains("Bash(ls"),
        "{stderr}"
    );
    assert!(
        server.requests().is_empty(),
        "the model ran despite the broken settings"
    );

    std::fs::remove_file(dir.path().join(".claude/settings.json")).unwrap();
    let out = output(
        run_in(
            &server,
            dir.path(),
            config.path(),
            &["--allow", "Glob(src/**)"],
        ),
        "",
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Glob(src/**)"), "{stderr}");
    assert!(server.requests().is_empty());
}
