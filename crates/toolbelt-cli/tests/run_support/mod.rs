//! What the `run` / `chat` end-to-end tests share: the built binary pointed at a scripted
//! OpenAI-compatible server, a project directory, running the binary with piped or terminal
//! input, and reading what the model was sent.

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use toolbelt_model::testing::{RecordedRequest, ScriptedServer};

/// The binary, configured for `server` through the environment, working in `dir`.
pub fn toolbelt(server: &ScriptedServer, dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .current_dir(dir)
        .env("OPENAI_BASE_URL", server.base_url())
        .env("TOOLBELT_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_LOG");
    command
}

/// Runs `command` with `stdin` piped in, off the runtime that serves the model.
pub async fn output(mut command: Command, stdin: &str) -> Output {
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start toolbelt");
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(stdin.as_bytes()).expect("write stdin");
        drop(pipe);
        child.wait_with_output().expect("wait for toolbelt")
    })
    .await
    .expect("join")
}

/// Runs `command` with a pseudo-terminal as its stdin (so it can ask for approval) and
/// `typed` already typed into it; stdout and stderr are pipes.
pub async fn output_on_terminal(mut command: Command, typed: &str) -> Output {
    let typed = typed.to_string();
    tokio::task::spawn_blocking(move || {
        let (mut master, slave) = open_pty();
        // The terminal echoes what is typed back to the master: drain it so it never fills.
        let mut echo = master.try_clone().expect("clone the pty master");
        let drain = std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = echo.read_to_end(&mut sink);
        });
        master
            .write_all(typed.as_bytes())
            .expect("type into the terminal");
        command
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = command.spawn().expect("start toolbelt");
        // The child holds the terminal now; our copy of the slave end goes with `command`.
        drop(command);
        let out = child.wait_with_output().expect("wait for toolbelt");
        drop(master);
        let _ = drain.join();
        out
    })
    .await
    .expect("join")
}

/// Runs `command` with a pseudo-terminal as its stdout and stderr, as in a terminal
/// window, and stdin empty; returns the exit status and every byte the terminal showed
/// (the terminal turns each `\n` into `\r\n`).
pub async fn output_to_terminal(mut command: Command) -> (std::process::ExitStatus, Vec<u8>) {
    tokio::task::spawn_blocking(move || {
        let (mut master, slave) = open_pty();
        let err = slave.try_clone().expect("clone the pty slave");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(slave))
            .stderr(Stdio::from(err));
        let mut child = command.spawn().expect("start toolbelt");
        // The child holds the terminal now; with our copies gone, reading ends (EIO) when
        // the child and everything it started have closed it.
        drop(command);
        let reader = std::thread::spawn(move || {
            let mut shown = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match master.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => shown.extend_from_slice(&chunk[..n]),
                }
            }
            shown
        });
        let status = child.wait().expect("wait for toolbelt");
        (status, reader.join().expect("the terminal reader"))
    })
    .await
    .expect("join")
}

/// Runs `command` in a terminal window: stdin, stdout and stderr are one pseudo-terminal,
/// `typed` is typed into it before the command starts; returns the exit status and every
/// byte the terminal showed, as [`output_to_terminal`] does.
pub async fn session_on_terminal(
    mut command: Command,
    typed: &str,
) -> (std::process::ExitStatus, Vec<u8>) {
    let typed = typed.to_string();
    tokio::task::spawn_blocking(move || {
        let (mut master, slave) = open_pty();
        master
            .write_all(typed.as_bytes())
            .expect("type into the terminal");
        let out = slave.try_clone().expect("clone the pty slave");
        let err = slave.try_clone().expect("clone the pty slave");
        command
            .stdin(Stdio::from(slave))
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let mut child = command.spawn().expect("start toolbelt");
        drop(command);
        let reader = std::thread::spawn(move || {
            let mut shown = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match master.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => shown.extend_from_slice(&chunk[..n]),
                }
            }
            shown
        });
        let status = child.wait().expect("wait for toolbelt");
        (status, reader.join().expect("the terminal reader"))
    })
    .await
    .expect("join")
}

/// What a terminal emulator (pyte, a VT100/xterm emulator from PyPI in the test venv) shows
/// after receiving `bytes`: the screen's lines, trailing blanks removed. What a person
/// reads, escape sequences applied, rather than the bytes that were sent.
pub fn screen(bytes: &[u8]) -> Vec<String> {
    const SCRIPT: &str = r#"
import sys, pyte
screen = pyte.Screen(220, 200)
stream = pyte.ByteStream(screen)
stream.feed(sys.stdin.buffer.read())
for line in screen.display:
    print(line.rstrip())
"#;
    let mut child = Command::new(toolbelt_testkit::python())
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pyte failed (install it with .ci/install-peers, tests/peers/requirements.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// A new pseudo-terminal: (master, slave), neither the controlling terminal of this process.
pub fn open_pty() -> (File, OwnedFd) {
    // SAFETY: plain libc calls on descriptors this function owns; every result is checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master = File::from_raw_fd(master);
        use std::os::fd::AsRawFd;
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0, "grantpt");
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(
            slave >= 0,
            "open the pty slave: {}",
            std::io::Error::last_os_error()
        );
        (master, OwnedFd::from_raw_fd(slave))
    }
}

/// Bytes as text, for assertions.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temp directory holding `notes.txt` ("alpha\nbeta\n").
pub fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    dir
}

/// The contents of the role=tool messages of a request.
pub fn tool_contents(request: &RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `dir/name` as a JSON string body (without quotes).
pub fn path_arg(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().replace('\\', "\\\\")
}

/// Arguments of a Read call of `name` in `dir`.
pub fn read_file(dir: &Path, name: &str) -> String {
    format!(r#"{{"file_path":"{}"}}"#, path_arg(dir, name))
}

/// Arguments of a Write call creating `new.txt` with "hello".
pub fn write_new_file(dir: &Path) -> String {
    format!(
        r#"{{"file_path":"{}","content":"hello"}}"#,
        path_arg(dir, "new.txt")
    )
}
