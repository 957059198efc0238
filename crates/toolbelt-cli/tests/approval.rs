//! Approval of tool calls in `toolbelt run` and `toolbelt chat`: asked on the terminal
//! (a pseudo-terminal here, as a person's shell would give), refused with a message when
//! there is no terminal to ask on, skipped with `--yes` or `--approval never`.

use crate::run_support;

use std::path::Path;
use std::time::Duration;

use run_support::{
    output, output_on_terminal, project, read_file, text, tool_contents, toolbelt, write_new_file,
};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// A server whose model asks to Write `new.txt`, then answers `answer`.
async fn write_then(dir: &Path, answer: &str) -> ScriptedServer {
    ScriptedServer::start([
        Reply::tool_call("call_1", "Write", &write_new_file(dir)),
        Reply::text(answer),
    ])
    .await
    .unwrap()
}

fn written(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("new.txt")).ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_asks_on_the_terminal_and_a_no_refuses_the_call() {
    let dir = project();
    let server = write_then(dir.path(), "Understood, I did not write it.").await;
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "write new.txt", "--dir"])
        .arg(dir.path());
    let out = output_on_terminal(command, "n\n").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
    assert!(
        stderr.lines().any(|l| l == "allow Write? [y/N/s] n"),
        "no question in:\n{stderr}"
    );
    // Each argument on a line of its own, whole.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("  file_path: ") && l.ends_with("/new.txt")),
        "{stderr}"
    );
    assert!(stderr.lines().any(|l| l == "  content: hello"), "{stderr}");
    assert_eq!(written(dir.path()), None, "a refused call must not run");
    assert!(
        stderr.lines().any(|l| l.starts_with("✗ Write(")),
        "{stderr}"
    );
    let refusal = tool_contents(&server.requests()[1]);
    assert!(refusal[0].contains("did not allow"), "{refusal:?}");
    assert_eq!(stdout, "Understood, I did not write it.\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_runs_the_call_after_a_yes_on_the_terminal() {
    let dir = project();
    let server = write_then(dir.path(), "Written.").await;
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "write new.txt", "--dir"])
        .arg(dir.path());
    let out = output_on_terminal(command, "y\n").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
    assert!(stderr.contains("allow Write?"), "{stderr}");
    assert_eq!(written(dir.path()).as_deref(), Some("hello"));
    assert!(
        stderr.lines().any(|l| l.starts_with("✓ Write(")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn yes_and_approval_never_run_the_call_without_asking() {
    for flags in [&["--yes"][..], &["--approval", "never"]] {
        let dir = project();
        let server = write_then(dir.path(), "Written.").await;
        let mut command = toolbelt(&server, dir.path());
        command
            .args(["run", "write new.txt", "--dir"])
            .arg(dir.path());
        command.args(flags);
        let out = output(command, "").await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{flags:?}: {stderr}");
        assert!(!stderr.contains("allow Write?"), "{stderr}");
        assert_eq!(written(dir.path()).as_deref(), Some("hello"), "{flags:?}");
        assert_eq!(text(&out.stdout), "Written.\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_terminal_a_call_that_needs_approval_is_refused_and_said() {
    let dir = project();
    let server = write_then(dir.path(), "I could not write it.").await;
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "write new.txt", "--dir"])
        .arg(dir.path());
    // A piped "y" is data, not a person's answer.
    let out = output(command, "y\n").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
    assert!(
        stderr.contains("refused Write(") && stderr.contains("not a terminal"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--yes"),
        "the message says how to allow it: {stderr}"
    );
    assert_eq!(written(dir.path()), None, "a refused call must not run");
    let refusal = tool_contents(&server.requests()[1]);
    assert!(
        refusal[0].contains("did not allow") && refusal[0].contains("nobody could be asked"),
        "{refusal:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_write_lets_read_only_tools_run_and_always_asks_for_them_too() {
    for (flags, asked) in [(&[][..], false), (&["--approval", "always"][..], true)] {
        let dir = project();
        let server = ScriptedServer::start([
            Reply::tool_call("call_1", "Read", &read_file(dir.path(), "notes.txt")),
            Reply::text("alpha"),
        ])
        .await
        .unwrap();
        let mut command = toolbelt(&server, dir.path());
        command
            .args(["run", "read the notes", "--dir"])
            .arg(dir.path());
        command.args(flags);
        let out = output_on_terminal(command, "n\n").await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
        assert_eq!(stderr.contains("allow Read?"), asked, "{flags:?}: {stderr}");
        let result = tool_contents(&server.requests()[1]).remove(0);
        assert_eq!(result.contains("beta"), !asked, "{flags:?}: {result}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_asks_on_the_terminal_and_respects_a_no() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Write", &write_new_file(dir.path())),
        Reply::text("Understood, I did not write it."),
        Reply::text("Bye."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["chat", "--dir"]).arg(dir.path());
    // The message, the answer to the approval question, a second message, leaving.
    let out = output_on_terminal(command, "write new.txt\nn\nthanks\n/exit\n").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
    assert!(stderr.contains("allow Write?"), "{stderr}");
    assert_eq!(written(dir.path()), None, "a refused call must not run");
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
async fn chat_runs_the_call_after_a_yes_and_with_yes_never_asks() {
    for (flag, typed) in [
        (None, "write it\ny\n/exit\n"),
        (Some("--yes"), "write it\n/exit\n"),
    ] {
        let dir = project();
        let server = write_then(dir.path(), "Written.").await;
        let mut command = toolbelt(&server, dir.path());
        command.args(["chat", "--dir"]).arg(dir.path());
        command.args(flag);
        let out = output_on_terminal(command, typed).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
        assert_eq!(written(dir.path()).as_deref(), Some("hello"), "{flag:?}");
        assert_eq!(stderr.contains("allow Write?"), flag.is_none(), "{stderr}");
        assert_eq!(text(&out.stdout), "Written.\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_chat_refuses_calls_that_need_approval_even_if_a_line_says_yes() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Write", &write_new_file(dir.path())),
        Reply::text("I could not write it."),
        Reply::text("Yes what?"),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["chat", "--dir"]).arg(dir.path());
    let out = output(command, "write new.txt\ny\n").await;
    let stderr = text(&out.stderr);
    assert_eq!(
        written(dir.path()),
        None,
        "a piped line approved a write:\n{stderr}"
    );
    assert!(stderr.contains("not a terminal"), "{stderr}");
    // The "y" was the next message, not an answer.
    assert_eq!(server.requests().len(), 3, "{stderr}");
}

/// `toolbelt run` in `dir` with the session file `sessions.db` there and session `s1`, then
/// `extra` arguments.
fn stored_run(server: &ScriptedServer, dir: &Path, extra: &[&str]) -> std::process::Command {
    let mut command = toolbelt(server, dir);
    command
        .arg("run")
        .args(extra)
        .arg("--dir")
        .arg(dir)
        .arg("--session")
        .arg(dir.join("sessions.db"))
        .args(["--session-id", "s1"]);
    command
}

/// `toolbelt run --continue` in `dir` with the session file `sessions.db` there (its latest
/// session), then `extra` arguments.
fn continued_run(server: &ScriptedServer, dir: &Path, extra: &[&str]) -> std::process::Command {
    let mut command = toolbelt(server, dir);
    command
        .args(["run", "--continue"])
        .args(extra)
        .arg("--dir")
        .arg(dir)
        .arg("--session")
        .arg(dir.join("sessions.db"));
    command
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_terminal_a_stored_session_pauses_and_a_later_approve_runs_the_call() {
    let dir = project();
    let server = write_then(dir.path(), "Written.").await;
    let out = output(stored_run(&server, dir.path(), &["write new.txt"]), "y\n").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "paused: {stderr}");
    assert!(
        stderr.contains("toolbelt: call call_1 awaits approval (asked because"),
        "{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l == "  │ +hello"),
        "the diff: {stderr}"
    );
    assert!(
        stderr.contains("--session-id s1 --approve CALL") && stderr.contains("in: call_1"),
        "how to resume: {stderr}"
    );
    assert_eq!(
        written(dir.path()),
        None,
        "nothing runs before the decision"
    );
    assert_eq!(server.requests().len(), 1);

    // Another process, later: the decision alone resumes the run.
    let resumed = output(
        stored_run(&server, dir.path(), &["--approve", "call_1"]),
        "",
    )
    .await;
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert_eq!(written(dir.path()).as_deref(), Some("hello"));
    assert_eq!(text(&resumed.stdout), "Written.\n");
    assert!(
        stderr.lines().any(|l| l.starts_with("✓ Write(")),
        "{stderr}"
    );

    // The same decision again is refused, and runs nothing.
    std::fs::remove_file(dir.path().join("new.txt")).unwrap();
    let again = output(
        stored_run(&server, dir.path(), &["--approve", "call_1"]),
        "",
    )
    .await;
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("no approval of agent"));
    assert_eq!(written(dir.path()), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_call_can_be_denied_with_a_reason_or_run_with_edited_arguments() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Write", &write_new_file(dir.path())),
        Reply::text("Fine, not written."),
        Reply::tool_call("call_2", "Write", &write_new_file(dir.path())),
        Reply::text("Written as you said."),
    ])
    .await
    .unwrap();
    let paused = output(stored_run(&server, dir.path(), &["write it"]), "").await;
    assert_eq!(paused.status.code(), Some(3), "{}", text(&paused.stderr));
    let denied = output(
        stored_run(
            &server,
            dir.path(),
            &["--reject", "call_1=not in this repo"],
        ),
        "",
    )
    .await;
    assert_eq!(denied.status.code(), Some(0), "{}", text(&denied.stderr));
    assert_eq!(written(dir.path()), None);
    let told = tool_contents(&server.requests()[1]);
    assert!(
        told[0].contains("The user says: not in this repo"),
        "{told:?}"
    );

    let paused = output(stored_run(&server, dir.path(), &["try again"]), "").await;
    assert_eq!(paused.status.code(), Some(3), "{}", text(&paused.stderr));
    let edit = dir.path().join("edit.json");
    let arguments = write_new_file(dir.path()).replace("hello", "edited by a person");
    std::fs::write(&edit, arguments).unwrap();
    let flag = format!("call_2={}", edit.display());
    let edited = output(stored_run(&server, dir.path(), &["--edit", &flag]), "").await;
    assert_eq!(edited.status.code(), Some(0), "{}", text(&edited.stderr));
    assert_eq!(written(dir.path()).as_deref(), Some("edited by a person"));

    // Bad decisions are usage errors before anything starts.
    std::fs::write(&edit, "[1, 2]").unwrap();
    for bad in [
        vec!["--edit", &flag],
        vec!["--edit", "call_2"],
        vec!["--approve", "x", "--reject", "x"],
    ] {
        let out = output(stored_run(&server, dir.path(), &bad), "").await;
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
    let no_prompt = output(stored_run(&server, dir.path(), &[]), "").await;
    assert_eq!(no_prompt.status.code(), Some(2));
    assert!(text(&no_prompt.stderr).contains("give a prompt, or decisions"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_call_whose_process_was_killed_mid_call_is_never_run_again() {
    let dir = project();
    let command = r#"{"command":"echo $$ > pid; echo ran >> count.txt; exec sleep 41.5"}"#;
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", command),
        Reply::text("I will check count.txt before anything else."),
    ])
    .await
    .unwrap();
    let paused = output(stored_run(&server, dir.path(), &["count"]), "").await;
    assert_eq!(paused.status.code(), Some(3), "{}", text(&paused.stderr));

    // Approved, started, and killed without a word while the command runs.
    let mut resume = stored_run(&server, dir.path(), &["--approve", "call_1"]);
    let mut child = resume
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let count = dir.path().join("count.txt");
    toolbelt_testkit::eventually("the approved command ran", Duration::from_secs(30), || {
        count.exists().then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();

    // The next run (a new message, no decision) tells the model the outcome is unknown,
    // and does not run the call again.
    let next = output(stored_run(&server, dir.path(), &["what happened?"]), "").await;
    assert_eq!(next.status.code(), Some(0), "{}", text(&next.stderr));
    let told = tool_contents(&server.requests()[1]);
    assert!(
        told[0].contains("whether it took effect is unknown"),
        "{told:?}"
    );
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "ran\n");
    // A SIGKILLed toolbelt cannot end what it started (see SECURITY.md's process limits):
    // the test ends the command itself.
    let pid = std::fs::read_to_string(dir.path().join("pid")).unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status();
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_always_runs_the_call_and_writes_a_rule_that_stops_the_next_question() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", r#"{"command":"echo first > first.txt"}"#),
        Reply::text("Ran it."),
        Reply::tool_call(
            "call_2",
            "Bash",
            r#"{"command":"echo second > second.txt"}"#,
        ),
        Reply::text("Ran it without asking."),
    ])
    .await
    .unwrap();
    let paused = output(stored_run(&server, dir.path(), &["run echo"]), "").await;
    assert_eq!(paused.status.code(), Some(3), "{}", text(&paused.stderr));
    let always = stored_run(&server, dir.path(), &["--approve-always", "call_1"]);
    let out = output(always, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("allowed from now on") && stderr.contains("Bash(echo:*)"),
        "{stderr}"
    );
    assert!(dir.path().join("first.txt").exists());
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".toolbelt/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        settings["permissions"]["allow"],
        serde_json::json!(["Bash(echo:*)"])
    );

    // A later run, another session: the rule lets the same kind of command run unasked.
    let mut next = toolbelt(&server, dir.path());
    next.args(["run", "again", "--dir"]).arg(dir.path());
    let again = output(next, "").await;
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(
        dir.path().join("second.txt").exists(),
        "the allowed command ran"
    );

    // An id the session does not wait on is a usage error, and writes nothing.
    let wrong = output(
        stored_run(&server, dir.path(), &["--approve-always", "nope"]),
        "",
    )
    .await;
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_result_for_a_call_the_session_does_not_await_is_a_usage_error() {
    // The flag refuses what would be lost: a result no call of the session waits for.
    let dir = project();
    let server = ScriptedServer::start([]).await.unwrap();
    let file = dir.path().join("result.txt");
    std::fs::write(&file, "done").unwrap();
    let flag = format!("call_9={}", file.display());
    for bad in [
        vec!["--tool-result", flag.as_str()],
        vec!["--tool-result", "call_9"],
    ] {
        let out = output(stored_run(&server, dir.path(), &bad), "").await;
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
    let out = output(
        stored_run(&server, dir.path(), &["--tool-result", &flag]),
        "",
    )
    .await;
    assert!(
        text(&out.stderr).contains("awaits no result of that call"),
        "{}",
        text(&out.stderr)
    );
    assert!(server.requests().is_empty());
}

/// An agents file whose agent may ask the finance team (an external tool) for a refund.
const REFUND_AGENTS: &str = r#"
[[agents]]
name = "clerk"
description = "Handles refunds"
tools = ["request_refund", "Read"]

[[external_tools]]
name = "request_refund"
description = "Asks the finance team to refund an order"
parameters = { type = "object", properties = { order = { type = "string" } }, required = ["order"] }
status = "sent to the finance team"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_external_tool_pauses_the_run_until_a_later_process_supplies_its_result() {
    let dir = project();
    std::fs::write(dir.path().join("agents.toml"), REFUND_AGENTS).unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "request_refund", r#"{"order":"A-17"}"#),
        Reply::text("The refund of A-17 was granted."),
    ])
    .await
    .unwrap();
    let agents = dir.path().join("agents.toml");
    let agents = agents.to_str().unwrap();
    let flags = ["--agents", agents, "--approval", "never"];

    let first = output(
        stored_run(
            &server,
            dir.path(),
            &[&["refund order A-17"][..], &flags].concat(),
        ),
        "",
    )
    .await;
    let stderr = text(&first.stderr);
    assert_eq!(first.status.code(), Some(3), "paused: {stderr}");
    assert!(
        stderr.contains("--session-id s1 --tool-result CALL=FILE") && stderr.contains("in: call_1"),
        "how to resume: {stderr}"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        1,
        "the model waits for the result: {stderr}"
    );
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert_eq!(offered, ["Read", "request_refund"]);

    // Another process, later, with --continue: the result alone resumes the run, and the
    // model reads it as the call's result.
    let result = dir.path().join("result.txt");
    std::fs::write(&result, "granted: 42 EUR back").unwrap();
    let flag = format!("call_1={}", result.display());
    let resumed = continued_run(
        &server,
        dir.path(),
        &[&["--tool-result", &flag][..], &flags].concat(),
    );
    let resumed = output(resumed, "").await;
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&resumed.stdout), "The refund of A-17 was granted.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    assert_eq!(tool_contents(&requests[1]), ["granted: 42 EUR back"]);

    // Supplied once: the session waits for nothing more.
    let again = output(
        stored_run(
            &server,
            dir.path(),
            &[&["--tool-result", &flag][..], &flags].concat(),
        ),
        "",
    )
    .await;
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("awaits no result of that call"));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn continue_resumes_the_latest_paused_session_with_a_decision() {
    let dir = project();
    let server = write_then(dir.path(), "Written.").await;
    let out = output(stored_run(&server, dir.path(), &["write new.txt"]), "").await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));

    let resumed = output(
        continued_run(&server, dir.path(), &["--approve", "call_1"]),
        "",
    )
    .await;
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("continuing session s1"), "{stderr}");
    assert_eq!(written(dir.path()).as_deref(), Some("hello"));

    // A decision with neither --session-id nor --continue names no session: a usage error.
    let mut unnamed = toolbelt(&server, dir.path());
    unnamed.args(["run", "--approve", "call_1"]);
    let unnamed = output(unnamed, "").await;
    assert_eq!(unnamed.status.code(), Some(2), "{}", text(&unnamed.stderr));
    assert!(text(&unnamed.stderr).contains("--continue"));
}
