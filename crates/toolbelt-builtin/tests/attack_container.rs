//! The container sandbox (`SandboxMode::Container`, bubblewrap) attacked from inside: writes
//! outside the base, the host's home, the host's loopback network, a host process's signals,
//! processes left behind. Needs `/usr/bin/bwrap` (Debian's bubblewrap, installed by
//! `.ci/install-peers`) and unprivileged user namespaces; without them the tests fail with
//! the install hint.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use toolbelt_builtin::shell::{Container, SandboxMode, ShellConfig};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{DynTool, ToolContext, ToolOutput};

/// A writable tool set in `dir` whose commands run in a container.
pub fn container_set(dir: &Path) -> BuiltinToolSet {
    BuiltinToolSet::new(
        BuiltinOptions::new(dir)
            .with_sandbox(SandboxMode::Container)
            .with_shell(ShellConfig::default().kill_grace(Duration::from_millis(300))),
    )
    .unwrap_or_else(|e| panic!("the container sandbox must work here: {e}"))
}

pub fn tool(set: &BuiltinToolSet, name: &str) -> DynTool {
    set.tool_list()
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool named {name}"))
        .clone()
}

pub async fn bash(set: &BuiltinToolSet, command: &str) -> ToolOutput {
    bash_with(set, json!({ "command": command })).await
}

/// A Bash call with these `arguments` (a timeout, a background run).
async fn bash_with(set: &BuiltinToolSet, arguments: serde_json::Value) -> ToolOutput {
    tool(set, "Bash")
        .call(ToolContext::for_call("test"), &arguments.to_string())
        .await
        .unwrap_or_else(|e| panic!("Bash refused {arguments}: {e}"))
}

/// Host processes whose command line contains `marker`.
fn host_processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) && toolbelt_testkit::is_running(pid) {
            found.push(pid);
        }
    }
    found
}

fn assert_none_left(marker: &str) {
    toolbelt_testkit::eventually(
        format!("no process running {marker:?}"),
        Duration::from_secs(10),
        || host_processes_with(marker).is_empty().then_some(()),
    );
}

#[tokio::test]
async fn attack_container_cannot_write_outside_the_base() {
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let escape = outside.path().join("escape.txt");
    let out = bash(
        &set,
        &format!(
            "echo in > inside.txt; mkdir -p {0}; echo out > {1}; echo sys > /usr/escape.txt; \
             echo etc > /etc/escape.txt; true",
            outside.path().display(),
            escape.display()
        ),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(base.path().join("inside.txt")).unwrap(),
        "in\n",
        "{}",
        out.llm_text()
    );
    assert!(!out.llm_text().contains("Killed"), "{}", out.llm_text());
    assert!(
        !escape.exists(),
        "a write outside the base reached the host"
    );
    assert!(!Path::new("/usr/escape.txt").exists());
    assert!(!Path::new("/etc/escape.txt").exists());
    assert!(
        out.llm_text().contains("Read-only file system"),
        "{}",
        out.llm_text()
    );
}

#[tokio::test]
async fn attack_container_cannot_read_the_host_home() {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let mut secret = tempfile::Builder::new()
        .prefix(".toolbelt-container-secret-")
        .tempfile_in(&home)
        .unwrap();
    secret.write_all(b"host-secret-7f3a\n").unwrap();
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let out = bash(
        &set,
        &format!(
            "cat {}; ls -a {}; echo home=$HOME",
            secret.path().display(),
            Path::new(&home).display()
        ),
    )
    .await;
    let text = out.llm_text();
    assert!(!text.contains("host-secret-7f3a"), "{text}");
    assert!(text.contains("No such file or directory"), "{text}");
    assert!(text.contains("home=/home/toolbelt"), "{text}");
}

#[tokio::test]
async fn attack_container_cannot_reach_a_host_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let out = bash(
        &set,
        &format!("echo hello > /dev/tcp/127.0.0.1/{port} && echo CONNECTED; true"),
    )
    .await;
    assert!(!out.llm_text().contains("CONNECTED"), "{}", out.llm_text());
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the host listener was reached: {other:?}"),
    }
}

#[tokio::test]
async fn attack_container_cannot_signal_a_host_process() {
    let mut victim = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let out = bash(
        &set,
        &format!("kill -9 {0}; kill -9 -1; echo rc=$?", victim.id()),
    )
    .await;
    assert!(
        victim.try_wait().unwrap().is_none(),
        "a host process was killed from inside: {}",
        out.llm_text()
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[tokio::test]
async fn container_counts_only_the_processes_the_command_left_running() {
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    for _ in 0..5 {
        let quiet = bash(&set, "true").await;
        assert!(!quiet.llm_text().contains("Killed"), "{}", quiet.llm_text());
    }
    let out = bash(&set, "sleep 31733.5 & echo started").await;
    assert!(
        out.llm_text()
            .contains("Killed 1 process the command left running"),
        "{}",
        out.llm_text()
    );
    assert_none_left("sleep 31733.");
}

#[tokio::test]
async fn attack_container_leaves_no_process_after_a_timeout() {
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let out = bash_with(
        &set,
        json!({
            "command": "setsid sleep 31711.25 & (sleep 31711.5 &) ; sleep 31711.75",
            "timeout": 1000,
        }),
    )
    .await;
    assert!(out.is_error, "{}", out.llm_text());
    assert_none_left("sleep 31711.");
}

#[tokio::test]
async fn attack_container_leaves_no_process_after_the_tool_set_drops() {
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let out = bash_with(
        &set,
        json!({
            "command": "setsid sleep 31722.25 & sleep 31722.5",
            "run_in_background": true,
        }),
    )
    .await;
    assert!(!out.is_error, "{}", out.llm_text());
    toolbelt_testkit::eventually(
        "the background task is running",
        Duration::from_secs(10),
        || (!host_processes_with("sleep 31722.5").is_empty()).then_some(()),
    );
    drop(set);
    assert_none_left("sleep 31722.");
}

#[test]
fn container_without_bwrap_fails_with_the_install_hint() {
    let err = Container::with_bwrap("/nonexistent/bin/bwrap", true).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("apt-get install bubblewrap"), "{message}");
    assert!(message.contains("/nonexistent/bin/bwrap"), "{message}");
}

#[tokio::test]
async fn attack_container_cannot_connect_to_a_unix_socket_in_the_base() {
    // A host server's socket beneath the base is visible inside (the base is bound); the
    // network seccomp filter of the Landlock modes, applied by bwrap, refuses the connect.
    let base = tempfile::tempdir().unwrap();
    let listener = std::os::unix::net::UnixListener::bind(base.path().join("host.sock")).unwrap();
    listener.set_nonblocking(true).unwrap();
    let set = container_set(base.path());
    let out = bash(
        &set,
        "ls -l host.sock; python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); \
         s.connect(\"host.sock\"); print(\"CONNECTED\")'; \
         python3 -c 'import socket; socket.socket(socket.AF_INET); print(\"INET\")'; true",
    )
    .await;
    let text = out.llm_text();
    assert!(text.contains("host.sock"), "{text}");
    assert!(!text.contains("CONNECTED"), "{text}");
    assert!(!text.contains("INET"), "{text}");
    assert!(text.contains("PermissionError"), "{text}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the host socket was reached: {other:?}"),
    }
}

#[tokio::test]
async fn a_terminal_session_runs_in_the_container_too() {
    let base = tempfile::tempdir().unwrap();
    let set = container_set(base.path());
    let out = tool(&set, "exec_command")
        .call(
            ToolContext::for_call("test"),
            &json!({"cmd": "echo pid=$$ home=$HOME; test -t 0 && echo TERMINAL", "yield_time_ms": 5000})
                .to_string(),
        )
        .await
        .unwrap_or_else(|e| panic!("exec_command refused: {e}"));
    let text = out.llm_text();
    assert!(!out.is_error, "{text}");
    assert!(text.contains("pid=2 home=/home/toolbelt"), "{text}");
    assert!(text.contains("TERMINAL"), "{text}");
}
