//! Attacks on the shell tools' promises, with real processes on the running kernel (issue 13,
//! items 7, 8 and 10): no process a command starts outlives its call, whatever it does to
//! escape (`setsid`, `setsid -f`, `set -m` jobs, a daemon that forks twice and calls
//! `setsid()`), under both containments; no secret of the parent's environment reaches a
//! command; and the sandbox denies writes outside its area, every kind of network access, and
//! signals to processes outside it.
//!
//! Survivors are checked through `/proc` (a zombie counts as gone). The kernel features these
//! tests need (cgroup v2 with `cgroup.kill`, Landlock ABI 6+, seccomp) are present on the
//! machines CI runs on; where one is missing the test fails with the reason.

use crate::shell_support;

use std::io::ErrorKind;
use std::path::Path;

use serde_json::json;
use shell_support::*;
use tokio_util::sync::CancellationToken;
use toolbelt_builtin::shell::{Containment, SandboxMode, ShellTools};
use toolbelt_core::{ToolContext, ToolError, ToolOutput};

const BOTH: [Containment; 2] = [Containment::Cgroup, Containment::Subreaper];

/// A daemon in the classic shape: fork, the parent exits, `setsid()`, fork again, the parent
/// exits; the grandchild writes its pid to `pids` and sleeps.
const DAEMON: &str = "import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
with open('pids', 'a') as f: f.write(f'{os.getpid()}\\n')
time.sleep(300)
";

/// Every way out of a process group at once; each escaper's pid ends up in `pids`, and the
/// command only ends once all four are written.
const ESCAPERS: &str = "setsid sleep 300 & echo $! >> pids
setsid -f sh -c 'echo $$ >> pids; exec sleep 300'
set -m; sleep 300 & echo $! >> pids; set +m
python3 daemon.py
until [ \"$(wc -l < pids)\" -ge 4 ]; do sleep 0.01; done
echo escaped";

/// Keeps the shell itself running after the escapers (bash would otherwise exec a last
/// simple command in place of itself).
const LINGER: &str = "sleep 300; echo never";

fn base_with_daemon() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("daemon.py"), DAEMON).unwrap();
    dir
}

fn killed(out: &ToolOutput) -> u64 {
    out.meta.as_ref().unwrap()["killed_processes"]
        .as_u64()
        .unwrap()
}

fn assert_all_gone(pids: &[u32], context: &str) {
    for &pid in pids {
        assert!(wait_until_gone(pid), "{context}: process {pid} survived");
    }
}

#[tokio::test]
async fn every_escaping_pattern_is_killed_when_the_command_exits() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        let out = run_bash(&shell, json!({"command": ESCAPERS})).await;
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        assert_all_gone(&pids, &format!("{containment:?}"));
        assert_eq!(
            out.llm_text(),
            "escaped\nExit code: 0\nKilled 4 processes the command left running.",
            "{containment:?}"
        );
        assert_eq!(killed(&out), 4, "{containment:?}");
    }
}

#[tokio::test]
async fn each_escaping_pattern_alone_leaves_no_survivor() {
    let patterns = [
        "setsid sleep 300 & echo $! >> pids",
        "setsid -f sh -c 'echo $$ >> pids; exec sleep 300'; until [ -s pids ]; do sleep 0.01; done",
        "set -m; sleep 300 & echo $! >> pids",
        "python3 daemon.py; until [ -s pids ]; do sleep 0.01; done",
    ];
    for containment in BOTH {
        for pattern in patterns {
            let dir = base_with_daemon();
            let shell = shell_with(dir.path(), containment, None);
            let out = run_bash(&shell, json!({"command": pattern})).await;
            let pids = read_pids(&dir.path().join("pids"), 1).await;
            assert_all_gone(&pids, &format!("{containment:?}, {pattern}"));
            assert_eq!(
                killed(&out),
                1,
                "{containment:?}, {pattern}: {}",
                out.llm_text()
            );
        }
    }
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_every_escaper() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        let command = format!("{ESCAPERS}\n{LINGER}");
        let out = run_bash(&shell, json!({"command": command, "timeout": 3000})).await;
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        assert_all_gone(&pids, &format!("{containment:?}"));
        assert!(out.is_error);
        let text = out.llm_text();
        // bash, its `sleep 300` and the four escapers.
        assert!(
            text.ends_with(
                "Command timed out after 3000 ms. Killed 6 processes (the command and \
                 everything it started)."
            ),
            "{containment:?}: {text}"
        );
    }
}

#[tokio::test]
async fn cancelling_a_call_kills_every_escaper() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        let bash = tool(&shell, "Bash");
        let token = CancellationToken::new();
        let ctx = ToolContext::for_call("attack").with_cancellation(token.clone());
        let args = json!({"command": format!("{ESCAPERS}\n{LINGER}")}).to_string();
        let call = tokio::spawn(async move { bash.call(ctx, &args).await });
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        token.cancel();
        let result = call.await.unwrap();
        assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
        assert_all_gone(&pids, &format!("{containment:?}"));
    }
}

#[tokio::test]
async fn dropping_a_running_call_kills_every_escaper() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        let bash = tool(&shell, "Bash");
        let args = json!({"command": format!("{ESCAPERS}\n{LINGER}")}).to_string();
        let call = tokio::spawn(async move { bash.call(ToolContext::new(), &args).await });
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        call.abort();
        let _ = call.await;
        assert_all_gone(&pids, &format!("{containment:?}"));
    }
}

/// Polls the task's output (without blocking, bounded) until it contains `text`.
async fn wait_for_output(shell: &ShellTools, task: &str, text: &str) {
    let mut seen = String::new();
    for _ in 0..500 {
        let out = call(
            &tool(shell, "TaskOutput"),
            json!({"task_id": task, "block": false}),
        )
        .await
        .unwrap();
        seen.push_str(&out.llm_text());
        if seen.contains(text) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the task never printed {text:?}; its output: {seen}");
}

fn task_id(out: &ToolOutput) -> String {
    out.meta.as_ref().unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn task_stop_and_closing_the_set_kill_every_escaper_of_a_task() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        let bash = tool(&shell, "Bash");
        let command = format!("{ESCAPERS}\n{LINGER}");
        let first = call(
            &bash,
            json!({"command": command, "run_in_background": true}),
        )
        .await
        .unwrap();
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        // Stop the task once its shell sits in the lingering `sleep`: while it still runs the
        // wait loop, a short-lived `wc` or `sleep 0.01` may be counted too.
        wait_for_output(&shell, &task_id(&first), "escaped").await;
        let stopped = call(
            &tool(&shell, "TaskStop"),
            json!({"task_id": task_id(&first)}),
        )
        .await
        .unwrap();
        assert_all_gone(&pids, &format!("{containment:?}, TaskStop"));
        assert!(
            stopped
                .llm_text()
                .ends_with("Killed 6 processes (the task and everything it started)."),
            "{containment:?}: {}",
            stopped.llm_text()
        );

        std::fs::remove_file(dir.path().join("pids")).unwrap();
        call(
            &bash,
            json!({"command": command, "run_in_background": true}),
        )
        .await
        .unwrap();
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        shell.close().await;
        assert_all_gone(&pids, &format!("{containment:?}, close"));
    }
}

#[tokio::test]
async fn a_finished_task_reports_the_escapers_it_left() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        let started = run_bash(
            &shell,
            json!({"command": ESCAPERS, "run_in_background": true}),
        )
        .await;
        let read = call(
            &tool(&shell, "TaskOutput"),
            json!({"task_id": task_id(&started)}),
        )
        .await
        .unwrap();
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        assert_all_gone(&pids, &format!("{containment:?}"));
        assert!(
            read.llm_text()
                .contains("completed (exit code 0). Killed 4 processes it left running.\nescaped"),
            "{containment:?}: {}",
            read.llm_text()
        );
    }
}

#[tokio::test]
async fn dropping_the_set_kills_every_escaper_of_its_tasks() {
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, None);
        run_bash(
            &shell,
            json!({"command": format!("{ESCAPERS}\n{LINGER}"), "run_in_background": true}),
        )
        .await;
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        drop(shell);
        // The test's own thread blocks here: the backstop may not need the runtime.
        assert_all_gone(&pids, &format!("{containment:?}"));
    }
}

#[tokio::test]
async fn killing_the_supervisor_is_reported_not_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_with(dir.path(), Containment::Subreaper, None);
    let out = run_bash(
        &shell,
        json!({"command": "setsid sleep 300 & echo $! >> pids; kill -9 $PPID"}),
    )
    .await;
    let pids = read_pids(&dir.path().join("pids"), 1).await;
    let text = out.llm_text();
    // Without a sandbox the command could kill its supervisor; the escaped sleep is then out
    // of reach, and the result must not claim otherwise.
    for pid in &pids {
        // SAFETY: kill(2) on the test's own escaped process.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    assert!(
        text.contains("could not be tracked and may still be running"),
        "{text}"
    );
}

#[tokio::test]
async fn in_the_sandbox_the_supervisor_cannot_be_killed() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_with(
        dir.path(),
        Containment::Subreaper,
        Some(SandboxMode::WorkspaceWrite),
    );
    let out = run_bash(
        &shell,
        json!({"command": "setsid sleep 300 & echo $! >> pids; kill -9 $PPID; echo after"}),
    )
    .await;
    let pids = read_pids(&dir.path().join("pids"), 1).await;
    assert_all_gone(&pids, "sandboxed subreaper");
    let text = out.llm_text();
    assert!(text.contains("Operation not permitted"), "{text}");
    assert!(
        text.ends_with("after\nExit code: 0\nKilled 1 process the command left running."),
        "{text}"
    );
}

/// Runs `env` through Bash in a child process whose environment holds secrets, and checks the
/// output. The child is this test binary itself, re-run with a marker variable: environment
/// variables cannot be set in this process without racing the other tests' threads.
#[tokio::test]
async fn secrets_in_the_parent_environment_never_reach_bash() {
    const CHILD: &str = "TOOLBELT_ATTACK_ENV_CHILD";
    if std::env::var_os(CHILD).is_some() {
        // The child's part: print what a command sees.
        let dir = tempfile::tempdir().unwrap();
        let shell = shell_in(dir.path());
        let out = run_bash(&shell, json!({"command": "env"})).await;
        println!("<<<ENV\n{}\nENV>>>", out.llm_text());
        return;
    }
    let secrets = [
        ("TOOLBELT_SERVE_TOKEN", "attack-serve-token"),
        ("OPENAI_API_KEY", "attack-openai-key"),
        ("MY_SECRET", "attack-my-secret"),
        ("PGPASSWORD", "attack-pg-password"),
        ("GITHUB_TOKEN", "attack-github-token"),
        ("AWS_SECRET_ACCESS_KEY", "attack-aws-secret"),
        ("Lowercase_Api_Key", "attack-lowercase-key"),
    ];
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            toolbelt_testkit::test_name(
                module_path!(),
                "secrets_in_the_parent_environment_never_reach_bash",
            )
            .as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .envs(secrets)
        .env("EDITOR", "attack-not-on-the-allow-list")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the child failed: {stdout}");
    let env = stdout
        .split("<<<ENV\n")
        .nth(1)
        .and_then(|rest| rest.split("\nENV>>>").next())
        .unwrap_or_else(|| panic!("no env output from the child: {stdout}"));
    assert!(env.contains("\nPATH=") || env.starts_with("PATH="), "{env}");
    for (name, value) in secrets {
        assert!(!env.contains(value), "{name} reached the command:\n{env}");
    }
    assert!(!env.contains("attack-not-on-the-allow-list"), "{env}");
}

/// The sandboxed and the unsandboxed shell in one base dir: each sandbox test runs its attack
/// on both, so that it shows the attack works without the sandbox and fails with it.
fn open_and_sandboxed(base: &Path, mode: SandboxMode) -> (ShellTools, ShellTools) {
    (
        shell_with(base, Containment::Auto, None),
        shell_with(base, Containment::Auto, Some(mode)),
    )
}

async fn bash(shell: &ShellTools, command: &str) -> ToolOutput {
    call(&tool(shell, "Bash"), json!({"command": command}))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_sandbox_denies_every_kind_of_write_outside_the_base() {
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, "original\n").unwrap();
    let (_, sandboxed) = open_and_sandboxed(base.path(), SandboxMode::WorkspaceWrite);
    let o = outside.path().display();
    let attacks = [
        format!("echo pwned > {o}/new.txt"),
        format!("echo pwned >> {o}/victim.txt"),
        format!("truncate -s 0 {o}/victim.txt"),
        format!("rm {o}/victim.txt"),
        format!("mv {o}/victim.txt {o}/moved.txt"),
        format!("mkdir {o}/dir"),
        format!("ln -s /etc/passwd {o}/link"),
        format!("ln -s {o} escape && echo pwned > escape/via-link.txt"),
        format!("mv {o}/victim.txt ./stolen.txt"),
        format!("cd {o}/.. && echo pwned > {o}/relative.txt"),
    ];
    for attack in &attacks {
        let out = bash(&sandboxed, attack).await;
        assert_ne!(
            out.meta.as_ref().unwrap()["exit_code"],
            0,
            "{attack}: {}",
            out.llm_text()
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "original\n");
    let mut left: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["victim.txt"]);
}

#[tokio::test]
async fn the_sandbox_denies_tcp_connects() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = tempfile::tempdir().unwrap();
    let (open, sandboxed) = open_and_sandboxed(base.path(), SandboxMode::WorkspaceWrite);
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    assert_eq!(
        bash(&open, &command).await.llm_text(),
        "connected\nExit code: 0"
    );
    let _ = listener.accept().unwrap();

    let denied = bash(&sandboxed, &command).await;
    assert!(
        denied.llm_text().contains("Operation not permitted"),
        "{}",
        denied.llm_text()
    );
    let accepted = listener.accept();
    assert_eq!(
        accepted.err().map(|e| e.kind()),
        Some(ErrorKind::WouldBlock),
        "a sandboxed connect reached the listener"
    );
}

#[tokio::test]
async fn the_sandbox_denies_udp_sends() {
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver.set_nonblocking(true).unwrap();
    let port = receiver.local_addr().unwrap().port();
    let base = tempfile::tempdir().unwrap();
    let (open, sandboxed) = open_and_sandboxed(base.path(), SandboxMode::WorkspaceWrite);
    let command = format!("echo leaked > /dev/udp/127.0.0.1/{port} && echo sent");
    let mut buf = [0u8; 64];

    assert_eq!(bash(&open, &command).await.llm_text(), "sent\nExit code: 0");
    // A local datagram is queued before the send returns, so it is there now.
    assert_eq!(receiver.recv(&mut buf).unwrap(), 7);

    let denied = bash(&sandboxed, &command).await;
    assert!(
        denied.llm_text().contains("Operation not permitted"),
        "{}",
        denied.llm_text()
    );
    let received = receiver.recv(&mut buf);
    assert_eq!(
        received.err().map(|e| e.kind()),
        Some(ErrorKind::WouldBlock),
        "a sandboxed datagram arrived"
    );
}

#[tokio::test]
async fn the_sandbox_denies_unix_socket_connects_outside() {
    use std::os::linux::net::SocketAddrExt;
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let name = format!("toolbelt-attack-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let base = tempfile::tempdir().unwrap();
    let (open, sandboxed) = open_and_sandboxed(base.path(), SandboxMode::WorkspaceWrite);
    let connect = |target: String| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
             s.connect({target}); print('connected')\""
        )
    };
    let by_path = connect(format!("'{}'", path.display()));
    let by_name = connect(format!("b'\\\\0{name}'"));

    for command in [&by_path, &by_name] {
        let out = bash(&open, command).await;
        assert_eq!(out.llm_text(), "connected\nExit code: 0", "{command}");
    }
    assert!(listener.accept().is_ok());
    assert!(abstract_listener.accept().is_ok());

    for command in [&by_path, &by_name] {
        let out = bash(&sandboxed, command).await;
        assert!(
            out.llm_text().contains("PermissionError"),
            "{command}: {}",
            out.llm_text()
        );
    }
    for accepted in [listener.accept(), abstract_listener.accept()] {
        assert_eq!(
            accepted.err().map(|e| e.kind()),
            Some(ErrorKind::WouldBlock),
            "a sandboxed connect reached a socket outside"
        );
    }
}

#[tokio::test]
async fn the_sandbox_denies_signals_to_unrelated_processes() {
    let mut bystander = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = bystander.id();
    let base = tempfile::tempdir().unwrap();
    let (open, sandboxed) = open_and_sandboxed(base.path(), SandboxMode::WorkspaceWrite);

    let denied = bash(&sandboxed, &format!("kill -TERM {pid}")).await;
    assert!(
        denied.llm_text().contains("Operation not permitted"),
        "{}",
        denied.llm_text()
    );
    assert!(!process_is_gone(pid), "the sandbox let a signal out");

    let allowed = bash(&open, &format!("kill -TERM {pid}")).await;
    assert_eq!(allowed.llm_text(), "(no output)\nExit code: 0");
    let status = bystander.wait().unwrap();
    assert!(!status.success());
}

#[tokio::test]
async fn the_read_only_sandbox_denies_writes_in_the_base_but_not_in_its_temp_dir() {
    let base = tempfile::tempdir().unwrap();
    std::fs::write(base.path().join("kept.txt"), "original\n").unwrap();
    let (_, read_only) = open_and_sandboxed(base.path(), SandboxMode::ReadOnly);
    for attack in [
        "echo pwned > new.txt",
        "echo pwned >> kept.txt",
        "rm kept.txt",
        "mkdir sub",
        "truncate -s 0 kept.txt",
    ] {
        let out = bash(&read_only, attack).await;
        assert_ne!(
            out.meta.as_ref().unwrap()["exit_code"],
            0,
            "{attack}: {}",
            out.llm_text()
        );
    }
    assert_eq!(
        std::fs::read_to_string(base.path().join("kept.txt")).unwrap(),
        "original\n"
    );
    assert!(!base.path().join("new.txt").exists());
    let fine = bash(
        &read_only,
        "cat kept.txt && f=$(mktemp) && echo scratch > \"$f\" && cat \"$f\" && echo x > /dev/null",
    )
    .await;
    assert_eq!(fine.llm_text(), "original\nscratch\nExit code: 0");
}

#[tokio::test]
async fn a_sandboxed_command_is_killed_with_everything_it_started() {
    // The sandbox must not get in the way of the containment (nor the reverse).
    for containment in BOTH {
        let dir = base_with_daemon();
        let shell = shell_with(dir.path(), containment, Some(SandboxMode::WorkspaceWrite));
        let out = run_bash(&shell, json!({"command": ESCAPERS})).await;
        let pids = read_pids(&dir.path().join("pids"), 4).await;
        assert_all_gone(&pids, &format!("{containment:?}"));
        assert_eq!(killed(&out), 4, "{containment:?}: {}", out.llm_text());
    }
}
