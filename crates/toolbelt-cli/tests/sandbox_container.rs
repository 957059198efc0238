//! `--sandbox container` through the built binary: `tools call Bash` runs the command in a
//! bubblewrap container (a host file outside `--dir` is not there, host processes are not
//! visible, the network is off), and the mode is said on stderr. Needs bubblewrap
//! (`.ci/install-peers`); without it these tests fail with the install hint.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `toolbelt tools call Bash` with `command` in `base`, in the container sandbox.
fn container_bash(base: &Path, command: &str) -> Output {
    let args = serde_json::json!({ "command": command }).to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(base)
        .args([
            "tools",
            "call",
            "Bash",
            &args,
            "--dir",
            ".",
            "--sandbox",
            "container",
        ])
        .output()
        .expect("run toolbelt");
    assert_eq!(
        out.status.code(),
        Some(0),
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
    // bwrap's init is pid 1 inside, the shell the first process it starts.
    assert!(stdout.contains("pid=2"), "{stdout}");
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
