//! `--sandbox container` through the built binary: the built-in tools run in one bubblewrap
//! container for the whole tool set, so a command and a file tool alike find no host file
//! outside `--dir`, no host process, no network and none of Toolbelt's own environment;
//! what a command leaves running is gone after the call; two calls share the container; and
//! the mode is said on stderr. Needs bubblewrap (`.ci/install-peers`); without it these tests
//! fail with the install hint.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output};

use crate::run_support::{output, tool_contents, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `toolbelt tools call Bash` with `command` in `base`, in the container sandbox.
fn container_bash(base: &Path, command: &str) -> Output {
    let args = serde_json::json!({ "command": command }).to_string();
    let out = container_call(base, "Bash", &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the command must run: {}",
        text(&out.stderr)
    );
    out
}

/// `toolbelt tools call TOOL ARGS` in `base`, in the container sandbox, with a secret in
/// Toolbelt's own environment; the container must start.
fn container_call(base: &Path, tool: &str, args: &str) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(base)
        .env("OPENAI_API_KEY", "sk-container-test-3f1e")
        .args([
            "tools",
            "call",
            tool,
            args,
            "--dir",
            ".",
            "--sandbox",
            "container",
        ])
        .output()
        .expect("run toolbelt");
    assert!(
        !text(&out.stderr).contains("--sandbox container:"),
        "the container sandbox must work here (install bubblewrap: apt-get install \
         bubblewrap): {}",
        text(&out.stderr)
    );
    out
}

#[test]
fn container_bash_cannot_see_a_host_file_outside_the_base() {
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut secret = tempfile::NamedTempFile::new_in(outside.path()).unwrap();
    secret.write_all(b"outside-secret-51c9\n").unwrap();
    std::fs::write(base.path().join("inside.txt"), "inside-b7\n").unwrap();

    let out = container_bash(
        base.path(),
        &format!("cat inside.txt; cat {}; echo done", secret.path().display()),
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("inside-b7"), "{stdout}");
    assert!(!stdout.contains("outside-secret-51c9"), "{stdout}");
    assert!(stdout.contains("No such file or directory"), "{stdout}");
}

#[test]
fn container_bash_sees_no_host_process() {
    let base = tempfile::tempdir().unwrap();
    let mut host = Command::new("sleep").arg("31744").spawn().unwrap();
    let out = container_bash(
        base.path(),
        &format!(
            "ls /proc/{} >/dev/null 2>&1 && echo VISIBLE; echo pid=$$",
            host.id()
        ),
    );
    host.kill().unwrap();
    host.wait().unwrap();
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("VISIBLE"), "{stdout}");
    // Inside: bwrap's init (pid 1), the tools' server, the shell and what it runs; the
    // host's hundreds of processes are not there.
    let pid: u32 = stdout
        .split("pid=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {stdout}"));
    assert!(pid < 20, "{stdout}");
}

#[test]
fn container_bash_has_no_network_and_the_mode_is_said_on_stderr() {
    let base = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = container_bash(
        base.path(),
        &format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED; true"),
    );
    assert!(
        !text(&out.stdout).contains("CONNECTED"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host listener was reached"
    );

    let listed = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(base.path())
        .args(["tools", "list", "--dir", ".", "--sandbox", "container"])
        .output()
        .expect("run toolbelt");
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    let stderr = text(&listed.stderr);
    assert!(
        stderr.contains("sandbox: container (bubblewrap"),
        "{stderr}"
    );
}

#[test]
fn a_file_tool_inside_finds_no_host_file_even_through_a_symlink() {
    let base = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "outside-secret-8d2a\n").unwrap();
    std::os::unix::fs::symlink(&secret, base.path().join("link.txt")).unwrap();

    for (tool, args) in [
        ("Read", serde_json::json!({ "file_path": secret })),
        ("Read", serde_json::json!({ "file_path": "link.txt" })),
        (
            "Grep",
            serde_json::json!({ "pattern": "outside-secret", "path": outside.path() }),
        ),
    ] {
        let out = container_call(base.path(), tool, &args.to_string());
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!all.contains("outside-secret-8d2a"), "{tool} {args}: {all}");
    }
    // A Write outside writes nothing there.
    let target = outside.path().join("planted.txt");
    let args = serde_json::json!({ "file_path": target, "content": "x" }).to_string();
    container_call(base.path(), "Write", &args);
    assert!(
        !target.exists(),
        "a Write inside the container reached the host"
    );
}

#[test]
fn toolbelt_s_own_secrets_are_not_readable_from_inside() {
    let base = tempfile::tempdir().unwrap();
    let out = container_bash(
        base.path(),
        "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo checked",
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("checked"), "{stdout}");
    assert!(!stdout.contains("sk-container-test-3f1e"), "{stdout}");
}

#[test]
fn a_process_a_command_leaves_running_inside_is_gone_after_the_call() {
    let base = tempfile::tempdir().unwrap();
    container_bash(
        base.path(),
        "setsid sleep 31746 >/dev/null 2>&1 < /dev/null & echo started",
    );
    // Ended with the call (or at the latest with the container, when toolbelt exits).
    toolbelt_testkit::eventually(
        "the command's leftover `sleep 31746` ending",
        std::time::Duration::from_secs(10),
        || running_with("sleep 31746").is_empty().then_some(()),
    );
}

/// The running processes whose command line contains `needle` (arguments joined by spaces).
fn running_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .filter(|pid| toolbelt_testkit::is_running(*pid))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_calls_of_one_run_share_one_container() {
    let dir = tempfile::tempdir().unwrap();
    // The start time of pid 1 inside (bwrap's init, the container itself), in clock ticks;
    // the pause keeps two containers started one after the other from sharing a tick.
    let init = r#"{"command":"sleep 0.1; cut -d' ' -f22 /proc/1/stat"}"#;
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", init),
        Reply::tool_call("call_2", "Bash", init),
        Reply::text("Same container."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args([
            "run",
            "check",
            "--approval",
            "never",
            "--sandbox",
            "container",
            "--dir",
        ])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests = server.requests();
    let first = tool_contents(&requests[1]);
    let second = tool_contents(&requests[2]);
    assert_eq!(first.len(), 1);
    assert!(first[0].contains("Exit code: 0"), "{first:?}");
    assert_eq!(second.len(), 2);
    assert_eq!(
        first[0], second[1],
        "each call ran in a container of its own"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_deny_keeps_grep_inside_the_container_out_of_the_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("secret")).unwrap();
    std::fs::write(dir.path().join("secret/keys.txt"), "needle-in-secret\n").unwrap();
    std::fs::write(dir.path().join("open.txt"), "needle-in-open\n").unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call(
            "call_1",
            "Grep",
            r#"{"pattern":"needle","output_mode":"content"}"#,
        ),
        Reply::text("Done."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args([
            "run",
            "find needles",
            "--approval",
            "never",
            "--sandbox",
            "container",
        ])
        .args(["--deny", "Read(./secret/**)", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let found = tool_contents(&server.requests()[1]);
    assert!(found[0].contains("needle-in-open"), "{found:?}");
    assert!(!found[0].contains("needle-in-secret"), "{found:?}");
}
