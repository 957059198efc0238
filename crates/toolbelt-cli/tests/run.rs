//! `toolbelt run` and `toolbelt chat` end to end: the built binary against the scripted
//! OpenAI-compatible server on 127.0.0.1, with the built-in tools on a real temp directory.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};

/// The binary, configured for `server` through the environment, working in `dir`.
fn toolbelt(server: &ScriptedServer, dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .current_dir(dir)
        .env("OPENAI_BASE_URL", server.base_url())
        .env("TOOLBELT_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_LOG");
    command
}

/// Runs `command` with `stdin` as its input, off the runtime that serves the model.
async fn output(mut command: Command, stdin: &str) -> Output {
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    dir
}

fn tool_contents(request: &RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn path_arg(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().replace('\\', "\\\\")
}

/// Arguments of a Write call creating `new.txt` with "hello".
fn write_new_file(dir: &Path) -> String {
    format!(
        r#"{{"file_path":"{}","content":"hello"}}"#,
        path_arg(dir, "new.txt")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn run_streams_the_answer_after_a_tool_call_on_the_directory() {
    let dir = project();
    let args = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &args),
        Reply::text("The notes say alpha, then beta."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What do my notes say?", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");

    // Only the answer on stdout, streamed and ended with a newline.
    assert_eq!(stdout, "The notes say alpha, then beta.\n");
    // One compact line per tool call on stderr: name, short arguments, duration, preview.
    let line = stderr
        .lines()
        .find(|l| l.contains("Read(file_path="))
        .unwrap_or_else(|| panic!("no tool line in:\n{stderr}"));
    assert!(line.starts_with('✓'), "{line}");
    assert!(
        line.contains("notes.txt") && line.contains(" ms → "),
        "{line}"
    );
    assert!(
        line.contains("alpha"),
        "the preview shows the result: {line}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["stream"], true);
    let offered = requests[0].tool_names();
    for tool in ["Read", "Write", "Edit", "Glob", "Grep", "Bash"] {
        assert!(
            offered.iter().any(|t| t == tool),
            "{tool} not offered: {offered:?}"
        );
    }
    let results = tool_contents(&requests[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("alpha") && results[0].contains("beta"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_without_a_model_names_the_variables_to_set_and_exits_2() {
    let dir = project();
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .current_dir(dir.path())
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_MODEL")
        .args(["run", "hello"]);
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    for variable in ["OPENAI_BASE_URL", "OPENAI_API_KEY", "TOOLBELT_MODEL"] {
        assert!(
            stderr.contains(variable),
            "{variable} not named in:\n{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_failure_is_reported_and_exits_1() {
    let dir = project();
    let server = ScriptedServer::start([Reply::status(400, "context length exceeded")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["run", "hello", "--dir"]).arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("context length exceeded"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_file_lets_a_later_run_resume_the_conversation() {
    let dir = project();
    let db = dir.path().join("sessions.db");
    let server = ScriptedServer::start([Reply::text("Hello Ada."), Reply::text("You are Ada.")])
        .await
        .unwrap();
    for prompt in ["I am Ada.", "Who am I?"] {
        let mut command = toolbelt(&server, dir.path());
        command
            .args(["run", prompt, "--session-id", "s1", "--session"])
            .arg(&db)
            .arg("--dir")
            .arg(dir.path());
        let out = output(command, "").await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--session-id s1"));
    }
    let second = &server.requests()[1];
    let said: Vec<&str> = second
        .messages()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(said, ["I am Ada.", "Hello Ada.", "Who am I?"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_asks_before_a_destructive_tool_and_respects_a_no() {
    let dir = project();
    let args = write_new_file(dir.path());
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Write", &args),
        Reply::text("Understood, I did not write it."),
        Reply::text("Bye."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["chat", "--dir"]).arg(dir.path());
    // The message, the answer to the approval question, a second message.
    let out = output(command, "write new.txt\nn\nthanks\n").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let question = stderr
        .lines()
        .find(|l| l.starts_with("allow Write("))
        .unwrap_or_default();
    assert!(
        question.contains("new.txt") && question.ends_with("[y/N] n"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("new.txt").exists(),
        "a refused call must not run"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("✗ Write(")),
        "{stderr}"
    );
    assert_eq!(stdout, "Understood, I did not write it.\nBye.\n");
    let refusal = tool_contents(&server.requests()[1]);
    assert!(refusal[0].contains("did not allow"), "{refusal:?}");
    assert_eq!(
        server.requests().len(),
        3,
        "the third line was a new message"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_runs_destructive_tools_after_a_yes_or_with_yes_flag() {
    for (flag, input) in [(None, "write it\ny\n"), (Some("--yes"), "write it\n")] {
        let dir = project();
        let args = write_new_file(dir.path());
        let server = ScriptedServer::start([
            Reply::tool_call("call_1", "Write", &args),
            Reply::text("Written."),
        ])
        .await
        .unwrap();
        let mut command = toolbelt(&server, dir.path());
        command.args(["chat", "--dir"]).arg(dir.path());
        command.args(flag);
        let out = output(command, input).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new.txt")).unwrap(),
            "hello"
        );
        assert_eq!(stderr.contains("allow Write("), flag.is_none(), "{stderr}");
        assert_eq!(text(&out.stdout), "Written.\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_calls_without_streaming_report_every_call_in_order() {
    let dir = project();
    std::fs::write(dir.path().join("more.txt"), "gamma\n").unwrap();
    let notes = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let more = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "more.txt"));
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ("c1", "Read", notes.as_str()),
            ("c2", "Read", more.as_str()),
        ]),
        Reply::text("alpha, beta and gamma"),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "read both", "--parallel", "--no-stream", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "alpha, beta and gamma\n");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("✓ Read("))
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].contains("notes.txt") && lines[1].contains("more.txt"),
        "{stderr}"
    );
    let requests = server.requests();
    assert_ne!(requests[0].body["stream"], true);
    let results = tool_contents(&requests[1]);
    assert!(
        results[0].contains("alpha") && results[1].contains("gamma"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_stops_the_run_and_kills_the_command_a_tool_started() {
    let dir = project();
    // The shell becomes `sleep` (exec) after writing its pid, so the pid is the sleeper's.
    let server = ScriptedServer::start([Reply::tool_call(
        "call_1",
        "Bash",
        r#"{"command":"echo $$ > sleeper.pid && exec sleep 30"}"#,
    )])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "sleep a while", "--dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let pid_file = dir.path().join("sleeper.pid");
    let out = tokio::task::spawn_blocking(move || {
        let child = command.spawn().expect("start toolbelt");
        let mut sleeper = None;
        for _ in 0..500 {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok())
            {
                sleeper = Some(pid);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let sleeper = sleeper.expect("the tool's command started");
        // SAFETY: sending a signal to the child we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        (child.wait_with_output().expect("wait"), sleeper)
    })
    .await
    .unwrap();
    let (out, sleeper) = out;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    // The sleeper is gone (killed with its process group; reaped by init once orphaned).
    let proc_dir = format!("/proc/{sleeper}");
    let mut gone = false;
    for _ in 0..250 {
        let state = std::fs::read_to_string(format!("{proc_dir}/stat")).unwrap_or_default();
        if state.is_empty() || state.contains(") Z ") {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(gone, "the command the tool started outlived toolbelt");
}
