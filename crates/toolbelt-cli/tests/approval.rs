//! Approval of tool calls in `toolbelt run` and `toolbelt chat`: asked on the terminal
//! (a pseudo-terminal here, as a person's shell would give), refused with a message when
//! there is no terminal to ask on, skipped with `--yes` or `--approval never`.

use crate::run_support;

use std::path::Path;

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
