//! `--sandbox off|read-only|workspace-write` and the environment of Bash, through the built
//! binary: the default confines Bash to `--dir`, the mode in effect is said on stderr, and no
//! secret of the CLI's environment reaches a command. (The kernel of the machines CI runs on
//! offers Landlock; the default being workspace-write is part of what is checked.)

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn toolbelt(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command.current_dir(dir);
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tools call Bash` with `command` in `base`, plus `flags`.
fn bash(base: &Path, command: &str, flags: &[&str]) -> Output {
    let args = serde_json::json!({ "command": command }).to_string();
    toolbelt(base)
        .args(["tools", "call", "Bash", &args, "--dir", "."])
        .args(flags)
        .output()
        .expect("run toolbelt")
}

fn listed_tools(base: &Path, flags: &[&str]) -> (Vec<String>, String) {
    let out = toolbelt(base)
        .args(["tools", "list", "--json", "--dir", "."])
        .args(flags)
        .output()
        .expect("run toolbelt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    (names, text(&out.stderr))
}

#[test]
fn by_default_bash_writes_only_beneath_the_base_dir() {
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escape.txt");
    let command = format!("echo in > inside.txt; echo out > {}", target.display());

    let out = bash(base.path(), &command, &[]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Permission denied"), "{stdout}");
    assert!(base.path().join("inside.txt").exists());
    assert!(!target.exists(), "the default sandbox let a write escape");

    let out = bash(base.path(), &command, &["--sandbox", "off"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(target.exists(), "--sandbox off still confined the write");
}

#[test]
fn the_read_only_sandbox_denies_writes_in_the_base_dir_too() {
    let base = tempfile::tempdir().unwrap();
    for flags in [&["--sandbox", "read-only"][..], &["--read-only"][..]] {
        let out = bash(
            base.path(),
            "echo x > new.txt; cat /etc/passwd >/dev/null && echo read",
            flags,
        );
        let stdout = text(&out.stdout);
        assert!(stdout.contains("Permission denied"), "{flags:?}: {stdout}");
        assert!(stdout.contains("read"), "{flags:?}: {stdout}");
        assert!(!base.path().join("new.txt").exists(), "{flags:?}");
    }
}

#[test]
fn read_only_keeps_bash_under_the_sandbox_and_drops_it_without_one() {
    let base = tempfile::tempdir().unwrap();
    let (names, stderr) = listed_tools(base.path(), &["--read-only"]);
    for kept in ["Read", "Bash", "TaskOutput", "TaskStop"] {
        assert!(names.iter().any(|n| n == kept), "{kept}: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "Write"), "{names:?}");
    assert!(
        stderr.contains("sandbox: read-only (Landlock ABI "),
        "{stderr}"
    );

    let (names, stderr) = listed_tools(base.path(), &["--read-only", "--sandbox", "off"]);
    for dropped in ["Bash", "TaskOutput", "TaskStop", "Write"] {
        assert!(!names.iter().any(|n| n == dropped), "{dropped}: {names:?}");
    }
    assert!(stderr.contains("Bash is not offered"), "{stderr}");
}

#[test]
fn the_mode_in_effect_is_said_on_stderr() {
    let base = tempfile::tempdir().unwrap();
    let (_, stderr) = listed_tools(base.path(), &[]);
    assert!(
        stderr.contains("sandbox: workspace-write (Landlock ABI "),
        "{stderr}"
    );
    assert!(stderr.contains("network off"), "{stderr}");
    let (_, stderr) = listed_tools(base.path(), &["--sandbox", "off"]);
    assert!(stderr.contains("sandbox: off"), "{stderr}");

    // serve says it too (it exits when its stdin closes).
    let out = toolbelt(base.path())
        .args(["serve", "--dir", ".", "--sandbox", "read-only"])
        .stdin(Stdio::null())
        .output()
        .expect("run toolbelt serve");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("sandbox: read-only (Landlock ABI "),
        "{stderr}"
    );
}

#[test]
fn an_unknown_mode_is_a_usage_error() {
    let base = tempfile::tempdir().unwrap();
    let out = bash(base.path(), "true", &["--sandbox", "strict"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("off, read-only, workspace-write or container"),
        "{stderr}"
    );
}

#[test]
fn the_sandbox_turns_the_network_off() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = tempfile::tempdir().unwrap();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let out = bash(base.path(), &command, &[]);
    assert!(
        !text(&out.stdout).contains("connected\n"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        listener.accept().err().map(|e| e.kind()),
        Some(std::io::ErrorKind::WouldBlock)
    );
}

#[test]
fn secrets_in_the_cli_environment_never_reach_bash() {
    let base = tempfile::tempdir().unwrap();
    let secrets = [
        ("TOOLBELT_SERVE_TOKEN", "cli-serve-token"),
        ("OPENAI_API_KEY", "cli-openai-key"),
        ("MY_SECRET", "cli-my-secret"),
        ("DB_PASSWORD", "cli-db-password"),
    ];
    let args = serde_json::json!({ "command": "env" }).to_string();
    let out = toolbelt(base.path())
        .args(["tools", "call", "Bash", &args, "--dir", "."])
        .envs(secrets)
        .output()
        .expect("run toolbelt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let env = text(&out.stdout);
    assert!(env.contains("PATH="), "{env}");
    for (name, value) in secrets {
        assert!(!env.contains(value), "{name} reached Bash:\n{env}");
    }
}
