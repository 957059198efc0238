//! Attacks on "no lost update" through the binary: Edits pipelined to `toolbelt serve --stdio`
//! without waiting for answers, and two `toolbelt tools call` processes sharing one
//! `--session`. Every change reported as done must be in the file; the others must say why
//! they were refused. Plus: a `--session` save that fails leaves no temp file behind.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolbelt_testkit::assert_no_lost_update;

const TRIALS: usize = 50;

/// A generous bound on one answer (never a timing assertion: only a guard against a hang).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

fn toolbelt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolbelt"))
}

fn original_text() -> &'static str {
    "line 0 original\nline 1 original\nline 2 original\n"
}

fn edit_args(file: &str, line: usize) -> Value {
    json!({
        "file_path": file,
        "old_string": format!("line {line} original"),
        "new_string": format!("line {line} EDITED"),
    })
}

/// `toolbelt serve --stdio` on `dir`, initialized, with its answers collected by id.
struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<Value>,
    waiting: HashMap<u64, Value>,
}

impl StdioServer {
    fn start(dir: &Path) -> Self {
        let mut child = toolbelt()
            .args(["serve", "--stdio", "--dir"])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start toolbelt serve --stdio");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let message: Value = serde_json::from_str(&line).expect("stdout is JSON-RPC");
                if message.get("id").is_some() && tx.send(message).is_err() {
                    break;
                }
            }
        });
        let mut server = Self {
            child,
            stdin,
            answers,
            waiting: HashMap::new(),
        };
        server.send(&[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "attack", "version": "1"}}}),
        ]);
        server.answer(0);
        server.send(&[json!({"jsonrpc": "2.0", "method": "notifications/initialized"})]);
        server
    }

    /// Writes `messages` in one write, without waiting for any answer.
    fn send(&mut self, messages: &[Value]) {
        let text: String = messages.iter().map(|m| format!("{m}\n")).collect();
        self.stdin.write_all(text.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer to request `id`.
    fn answer(&mut self, id: u64) -> Value {
        loop {
            if let Some(answer) = self.waiting.remove(&id) {
                return answer;
            }
            let message = self
                .answers
                .recv_timeout(ANSWER_WITHIN)
                .expect("toolbelt serve answers");
            let got = message["id"].as_u64().expect("a numeric id");
            self.waiting.insert(got, message);
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call_request(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

/// (success, text) of a tools/call answer.
fn call_outcome(answer: &Value) -> (bool, String) {
    let result = &answer["result"];
    assert!(result.is_object(), "a tool result: {answer}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (result["isError"] != json!(true), text)
}

#[test]
fn edits_pipelined_to_serve_over_stdio_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = StdioServer::start(dir.path());
    let mut id = 1;
    for trial in 0..TRIALS {
        let name = format!("trial{trial}.txt");
        let file = dir.path().join(&name);
        std::fs::write(&file, original_text()).unwrap();
        server.send(&[call_request(id, "Read", json!({"file_path": name}))]);
        let (read_ok, text) = call_outcome(&server.answer(id));
        assert!(read_ok, "{text}");

        // Two Edits of different lines, written at once; the answers are awaited after.
        let (first, second) = (id + 1, id + 2);
        server.send(&[
            call_request(first, "Edit", edit_args(&name, 0)),
            call_request(second, "Edit", edit_args(&name, 2)),
        ]);
        let results: Vec<(usize, bool, String)> = [(0, first), (2, second)]
            .into_iter()
            .map(|(line, id)| {
                let (ok, text) = call_outcome(&server.answer(id));
                (line, ok, text)
            })
            .collect();
        let landed = assert_no_lost_update(&file, &results);
        assert_eq!(landed, 2, "trial {trial}: {results:?}");
        id += 3;
    }
}

fn tools_call(dir: &Path, session: &Path, tool: &str, arguments: &Value) -> Command {
    let mut command = toolbelt();
    command
        .current_dir(dir)
        .args(["tools", "call", tool])
        .arg(arguments.to_string())
        .arg("--session")
        .arg(session);
    command
}

fn outcome_of(line: usize, out: &Output) -> (usize, bool, String) {
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "exit {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = if code == Some(0) {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    (line, code == Some(0), text)
}

#[test]
fn two_cli_processes_sharing_a_session_never_lose_an_edit() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.json");
    let file = dir.path().join("shared.txt");
    for trial in 0..TRIALS {
        std::fs::write(&file, original_text()).unwrap();
        let read = tools_call(
            dir.path(),
            &session,
            "Read",
            &json!({"file_path": "shared.txt"}),
        )
        .output()
        .unwrap();
        assert_eq!(read.status.code(), Some(0));

        let edits: Vec<(usize, Child)> = [0, 2]
            .into_iter()
            .map(|line| {
                let child =
                    tools_call(dir.path(), &session, "Edit", &edit_args("shared.txt", line))
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                (line, child)
            })
            .collect();
        let results: Vec<(usize, bool, String)> = edits
            .into_iter()
            .map(|(line, child)| outcome_of(line, &child.wait_with_output().unwrap()))
            .collect();
        let landed = assert_no_lost_update(&file, &results);
        // The session lock serializes the two: the second sees the first's write recorded.
        assert_eq!(landed, 2, "trial {trial}: {results:?}");
    }
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn a_session_save_that_fails_leaves_no_temp_file_and_the_old_session() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.json");
    // A long name makes the saved session larger than the file size limit below.
    let name = format!("{}.txt", "n".repeat(200));
    std::fs::write(dir.path().join(&name), "text\n").unwrap();
    std::fs::write(&session, r#"{"files":{}}"#).unwrap();

    let mut read = tools_call(dir.path(), &session, "Read", &json!({"file_path": name}));
    // SAFETY: between fork and exec, only async-signal-safe calls (signal, setrlimit).
    unsafe {
        read.pre_exec(|| {
            // Writing past 128 bytes fails with EFBIG (as a full disk fails with ENOSPC)
            // instead of killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 128,
                rlim_max: 128,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = read.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the failed save is reported: {stderr}"
    );
    assert!(stderr.contains("--session"), "{stderr}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "a temp file was left: {names:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&session).unwrap(),
        r#"{"files":{}}"#,
        "the old session is intact"
    );
}
