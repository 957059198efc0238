//! `toolbelt run` and `toolbelt chat` end to end: the built binary against the scripted
//! OpenAI-compatible server on 127.0.0.1, with the built-in tools on a real temp directory.

use crate::run_support;

use std::process::{Command, Stdio};

use run_support::{output, path_arg, project, read_file, text, tool_contents, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

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
async fn parallel_calls_without_streaming_report_every_call_and_answer_in_call_order() {
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
    // One line per call, printed as that call ends (so in completion order).
    assert_eq!(lines.len(), 2, "{stderr}");
    for name in ["notes.txt", "more.txt"] {
        assert!(lines.iter().any(|l| l.contains(name)), "{stderr}");
    }
    // The model gets the results in its call order.
    let requests = server.requests();
    assert_ne!(requests[0].body["stream"], true);
    let results = tool_contents(&requests[1]);
    assert!(
        results[0].contains("alpha") && results[1].contains("gamma"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_stops_the_run_kills_the_command_a_tool_started_and_exits_130() {
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
        .args(["run", "sleep a while", "--yes", "--dir"])
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
    assert_eq!(out.status.code(), Some(130), "SIGINT exits 130:\n{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    // The sleeper is gone (killed with its process group; reaped by init once orphaned).
    toolbelt_testkit::eventually_async(
        "the command the tool started ending with toolbelt",
        std::time::Duration::from_secs(5),
        || (!toolbelt_testkit::is_running(sleeper as u32)).then_some(()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn text_written_between_tool_calls_goes_to_stderr_and_only_the_answer_to_stdout() {
    for stream in [true, false] {
        let dir = project();
        let server = ScriptedServer::start([
            Reply::Message {
                content: "Let me look at the notes first.".into(),
                tool_calls: vec![toolbelt_model::ToolCall::new(
                    "call_1",
                    "Read",
                    read_file(dir.path(), "notes.txt"),
                )],
            },
            Reply::text("They say alpha and beta."),
        ])
        .await
        .unwrap();
        let mut command = toolbelt(&server, dir.path());
        command
            .args(["run", "what do my notes say?", "--dir"])
            .arg(dir.path());
        if !stream {
            command.arg("--no-stream");
        }
        let out = output(command, "").await;
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        // `toolbelt run … > answer.txt` holds the answer alone.
        assert_eq!(stdout, "They say alpha and beta.\n", "stream: {stream}");
        let said = stderr
            .lines()
            .position(|l| l == "Let me look at the notes first.")
            .unwrap_or_else(|| panic!("the text between calls is not on stderr:\n{stderr}"));
        let tool_line = stderr
            .lines()
            .position(|l| l.starts_with("✓ Read("))
            .unwrap();
        assert!(said < tool_line, "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_and_exclude_tools_narrow_what_the_model_is_offered() {
    let dir = project();
    let server = ScriptedServer::start([Reply::text("ok"), Reply::text("ok")])
        .await
        .unwrap();
    let mut only = toolbelt(&server, dir.path());
    only.args(["run", "hi", "--tools", "Read,Grep", "--dir"])
        .arg(dir.path());
    let out = output(only, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut without = toolbelt(&server, dir.path());
    without
        .args(["run", "hi", "--exclude-tools", "Bash,Write", "--dir"])
        .arg(dir.path());
    let out = output(without, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let requests = server.requests();
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert_eq!(offered, ["Grep", "Read"]);
    let offered = requests[1].tool_names();
    assert!(offered.iter().any(|t| t == "Read"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t == "Bash" || t == "Write"),
        "{offered:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn repair_json_lets_a_call_with_almost_json_arguments_run() {
    // Single quotes and a trailing comma: not JSON, but clearly meant.
    for repair in [false, true] {
        let dir = project();
        let args = format!("{{'file_path': '{}',}}", path_arg(dir.path(), "notes.txt"));
        let server = ScriptedServer::start([
            Reply::tool_call("call_1", "Read", &args),
            Reply::text("done"),
        ])
        .await
        .unwrap();
        let mut command = toolbelt(&server, dir.path());
        command.args(["run", "read it", "--dir"]).arg(dir.path());
        if repair {
            command.arg("--repair-json");
        }
        let out = output(command, "").await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let result = tool_contents(&server.requests()[1]).remove(0);
        assert_eq!(
            result.contains("alpha"),
            repair,
            "repair {repair}: {result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_a_tool_returns_gets_a_note_on_its_line() {
    let dir = project();
    std::fs::write(dir.path().join("dot.png"), ONE_PIXEL_PNG).unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &read_file(dir.path(), "dot.png")),
        Reply::text("A dot."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "look at dot.png", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("✓ Read("))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("[image image/png, "), "{line}");
}

/// A 1×1 PNG.
const ONE_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xff, 0xff, 0x3f,
    0x00, 0x05, 0xfe, 0x02, 0xfe, 0xa7, 0x35, 0x81, 0x84, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Every row of the SQLite file at `db`, as SQL (read by another process: Python's sqlite3).
fn dump(db: &std::path::Path) -> String {
    let out = Command::new(toolbelt_testkit::python())
        .args([
            "-c",
            "import sqlite3, sys; print('\\n'.join(sqlite3.connect(sys.argv[1]).iterdump()))",
        ])
        .arg(db)
        .output()
        .expect("python3 is needed to read the session file");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_file_locked_by_another_process_fails_the_run_before_the_model_is_called() {
    let dir = project();
    let db = dir.path().join("sessions.db");
    let server = ScriptedServer::start([Reply::text("Hello Ada.")])
        .await
        .unwrap();
    let run = |prompt: &str| {
        let mut command = toolbelt(&server, dir.path());
        command
            .args(["run", prompt, "--session-id", "s1", "--session"])
            .arg(&db)
            .arg("--dir")
            .arg(dir.path());
        command
    };
    let out = output(run("I am Ada."), "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = dump(&db);

    // Another process holds the write lock for as long as its stdin stays open.
    let mut holder = Command::new(toolbelt_testkit::python())
        .args([
            "-c",
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             sys.stdin.read()\n",
        ])
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");

    let out = output(run("Who am I?"), "").await;
    drop(holder.stdin.take());
    holder.wait().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("locked"),
        "the message names the cause:\n{stderr}"
    );
    assert_eq!(server.requests().len(), 1, "the model must not be called");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_eq!(dump(&db), before, "the stored conversation changed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_session_file_fails_the_run_and_is_left_as_it_was() {
    let dir = project();
    let db = dir.path().join("sessions.db");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&db, &garbage).unwrap();
    let server = ScriptedServer::start([Reply::text("never sent")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hello", "--session"])
        .arg(&db)
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--session") && stderr.contains("sessions.db"),
        "{stderr}"
    );
    assert!(server.requests().is_empty(), "the model must not be called");
    assert_eq!(std::fs::read(&db).unwrap(), garbage, "the file was changed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_server_that_never_answers_fails_the_run_within_the_given_limits() {
    let dir = project();
    // Connections complete (the kernel accepts them) but nothing ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .current_dir(dir.path())
        .env("OPENAI_BASE_URL", &url)
        .env("TOOLBELT_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .args([
            "run",
            "hello",
            "--request-timeout",
            "1",
            "--max-retries",
            "0",
            "--dir",
        ])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("start toolbelt");
        toolbelt_testkit::wait_or_kill(&mut child, std::time::Duration::from_secs(60))?;
        Some(child.wait_with_output().unwrap())
    })
    .await
    .unwrap()
    .expect("toolbelt run still waited for the dead server after 60 s");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("toolbelt: error:"), "{stderr}");
    assert!(out.stdout.is_empty());
    drop(silent);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_at_the_token_limit_is_a_warning_on_stderr() {
    let dir = project();
    let server = ScriptedServer::start([Reply::truncated("The notes say alp")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "what do my notes say?", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "The notes say alp\n");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("toolbelt: warning: "))
        .unwrap_or_else(|| panic!("no warning in:\n{stderr}"));
    assert!(
        warning.contains("length") || warning.contains("limit"),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_at_the_chat_prompt_leaves_with_130() {
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["chat", "--dir"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        // stdin stays open and silent: chat waits at its prompt.
        let mut child = command.spawn().expect("start toolbelt");
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        // The sandbox line comes once the tools are open, just before the prompt.
        std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(line.contains("sandbox"), "{line}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: sending a signal to the child we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        toolbelt_testkit::wait_or_kill(&mut child, std::time::Duration::from_secs(30))
    })
    .await
    .unwrap()
    .expect("chat did not leave within 30 s of SIGINT");
    assert_eq!(out.code(), Some(130));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_slash_commands_are_answered_by_chat_and_never_sent_to_the_model() {
    let dir = project();
    let store = dir.path().join("sessions.db");
    let server = ScriptedServer::start([Reply::text("hi"), Reply::text("hi again")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["chat", "--session"])
        .arg(&store)
        .arg("--dir")
        .arg(dir.path());
    let typed = "/help\n/tools\n/model\n/frobnicate now\nhello\n/clear\nagain\n/sessions\n\
                 /resume nope\n/exit\nnot sent\n";
    let out = output(command, typed).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("/resume ID"), "/help: {stderr}");
    let tools = stderr
        .lines()
        .find(|l| l.ends_with(" tools: ") || l.contains(" tools: "));
    assert!(
        tools.is_some_and(|l| l.contains("Read") && l.contains("Grep")),
        "{stderr}"
    );
    assert!(stderr.contains("model: "), "{stderr}");
    assert!(stderr.contains("unknown command /frobnicate"), "{stderr}");
    assert!(stderr.contains("no stored session nope"), "{stderr}");

    // Two messages reached the model, each in its own session: /clear began a new one.
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    let sent = |i: usize| requests[i].body["messages"].to_string();
    assert!(
        sent(0).contains("hello") && !sent(0).contains("/help") && !sent(0).contains("frobnicate"),
        "{}",
        sent(0)
    );
    assert!(
        sent(1).contains("again") && !sent(1).contains("hello"),
        "{}",
        sent(1)
    );
    // /sessions listed both by their first prompt, the newest (current) one first and
    // marked; /exit left before "not sent".
    let listed: Vec<&str> = stderr.lines().filter(|l| l.contains(" events, ")).collect();
    assert_eq!(listed.len(), 2, "{stderr}");
    assert!(
        listed[0].contains("  again  ") && listed[0].ends_with(" (this one)"),
        "{stderr}"
    );
    assert!(
        listed[1].contains("  hello  ") && !listed[1].ends_with(" (this one)"),
        "{stderr}"
    );
    assert!(!sent(1).contains("not sent"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_models_escape_sequences_reach_a_terminal_escaped_and_a_pipe_as_written() {
    // A model repeating a hostile page: clear the screen, then pass itself off as Toolbelt.
    let answer = "done\x1b[2J\x1b[Htoolbelt: all checks passed\tok";
    let dir = project();
    let server = ScriptedServer::start([Reply::text(answer), Reply::text(answer)])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["run", "Summarise", "--dir"]).arg(dir.path());
    let (status, shown) = run_support::output_to_terminal(command).await;
    assert!(status.success());
    let shown = text(&shown);
    assert!(
        shown.contains(r"done\x1b[2J\x1b[Htoolbelt: all checks passed"),
        "escaped on the terminal: {shown:?}"
    );
    assert!(!shown.contains("\x1b[2J"), "no raw clear-screen: {shown:?}");
    assert!(shown.contains("passed\tok"), "a tab stays a tab: {shown:?}");

    let mut piped = toolbelt(&server, dir.path());
    piped.args(["run", "Summarise", "--dir"]).arg(dir.path());
    let out = output(piped, "").await;
    assert_eq!(
        text(&out.stdout),
        format!("{answer}\n"),
        "a pipe gets the bytes"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_model_file_runs_an_agent_without_a_key_and_says_when_it_runs_out() {
    let dir = project();
    let script = dir.path().join("demo.toml");
    std::fs::write(
        &script,
        "[[reply]]\ntool_calls = [{ name = \"Read\", arguments = { file_path = \"notes.txt\" } }]\n\
         [[reply]]\ntext = \"Your notes list alpha, then beta.\"\n",
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let scripted = || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolbelt"));
        command
            .current_dir(dir.path())
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TOOLBELT_MODEL")
            .env_remove("TOOLBELT_LOG")
            .args(["run", "What do my notes say?", "--model", &model, "--dir"])
            .arg(dir.path());
        command
    };
    let out = output(scripted(), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "Your notes list alpha, then beta.\n");
    // The scripted call ran the real tool on the real file.
    assert!(
        stderr.contains("✓ Read(") && stderr.contains("alpha"),
        "{stderr}"
    );

    // A script that runs out says so, naming the file, and the run fails.
    std::fs::write(
        &script,
        "[[reply]]\ntool_calls = [{ name = \"Read\", arguments = { file_path = \"notes.txt\" } }]\n",
    )
    .unwrap();
    let out = output(scripted(), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("demo.toml has no more replies"), "{stderr}");

    // A mistake in the script is a usage error with its line.
    std::fs::write(&script, "[[reply]]\nbogus = 1\n").unwrap();
    let out = output(scripted(), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown field `bogus`") && stderr.contains("line 2"),
        "{stderr}"
    );
}
