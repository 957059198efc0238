//! The status line of `toolbelt run` on a terminal: the waits for the model and its retries
//! are shown while they last and cleared before the answer, a tool that runs long shows its
//! elapsed seconds, and none of it reaches a pipe or `--json` output. The built binary runs
//! on a real pseudo-terminal against the scripted model server on 127.0.0.1.

use crate::run_support;

use run_support::{output, output_to_terminal, project, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

const ANSWER: &str = "The notes say alpha, then beta.";

/// Bytes only a status line writes: a carriage return that is not part of a newline, and
/// the escape sequence that clears a line.
fn progress_bytes(shown: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    if shown.replace("\r\n", "\n").contains('\r') {
        found.push("a bare \\r");
    }
    if shown.contains('\x1b') {
        found.push("an escape sequence");
    }
    found
}

/// What a terminal showed of `command`, run on one to its successful end.
async fn shown_on_a_terminal(command: std::process::Command) -> String {
    let (status, shown) = output_to_terminal(command).await;
    let shown = text(&shown);
    assert!(
        status.success(),
        "{status}; the terminal showed:\n{shown:?}"
    );
    shown
}

/// A model server that answers 429 with `Retry-After: secs` twice, then `ANSWER`.
async fn rate_limited_twice(secs: &str) -> ScriptedServer {
    ScriptedServer::start([
        Reply::rate_limited(secs),
        Reply::rate_limited(secs),
        Reply::text(ANSWER),
    ])
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_shows_the_model_retries_then_the_whole_answer() {
    let dir = project();
    let server = rate_limited_twice("2").await;
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What do my notes say?", "--dir"])
        .arg(dir.path());
    let shown = shown_on_a_terminal(command).await;
    assert_eq!(server.requests().len(), 3);

    // During each retry's wait, the line says why and counts down. (The plain "waiting for
    // the model…" between them may last less than a redraw: not asserted.)
    for retry in [
        "model: HTTP 429, retry 1/3 in ",
        "model: HTTP 429, retry 2/3 in ",
    ] {
        assert!(shown.contains(retry), "{retry:?} not shown in:\n{shown:?}");
    }
    // The line is cleared before the answer streams, and nothing touches the answer after:
    // the terminal ends with the whole answer on a line of its own.
    let at = shown.find(ANSWER).unwrap_or_else(|| {
        panic!("the answer is not shown whole in:\n{shown:?}");
    });
    assert!(
        shown[..at].ends_with("\r\x1b[2K"),
        "the status line was not cleared before the answer:\n{shown:?}"
    );
    assert_eq!(&shown[at..], format!("{ANSWER}\r\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn piped_output_carries_no_progress_and_the_same_answer() {
    let dir = project();
    let server = rate_limited_twice("1").await;
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What do my notes say?", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(server.requests().len(), 3, "both 429s were retried");
    assert_eq!(stdout, format!("{ANSWER}\n"));
    assert_eq!(progress_bytes(&stdout), Vec::<&str>::new(), "{stdout:?}");
    assert_eq!(progress_bytes(&stderr), Vec::<&str>::new(), "{stderr:?}");
    assert!(!stderr.contains("retry"), "{stderr:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn json_output_on_a_terminal_carries_no_progress() {
    let dir = project();
    let server = rate_limited_twice("1").await;
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What do my notes say?", "--json", "--dir"])
        .arg(dir.path());
    let shown = shown_on_a_terminal(command).await;
    assert_eq!(progress_bytes(&shown), Vec::<&str>::new(), "{shown:?}");
    // Every line is one JSON event (stdout) or a message of toolbelt's own (stderr), the
    // answer among the events.
    for line in shown.lines().map(|l| l.trim_end_matches('\r')) {
        if !line.starts_with("toolbelt: ") {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("not a JSON event ({e}): {line:?}"));
        }
    }
    assert!(shown.contains(ANSWER), "{shown:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_that_runs_long_shows_it_still_runs_with_its_elapsed_seconds() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", r#"{"command":"sleep 3"}"#),
        Reply::text(ANSWER),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "Wait a little.", "--yes", "--dir"])
        .arg(dir.path());
    let shown = shown_on_a_terminal(command).await;
    // While it runs, the line names the call and counts its seconds; when it ends, its
    // result line replaces the status line.
    assert!(
        shown.contains("Bash(command=sleep 3) 1 s") || shown.contains("Bash(command=sleep 3) 2 s"),
        "no elapsed time shown for the running call in:\n{shown:?}"
    );
    assert!(
        shown.contains("\r\x1b[2K✓ Bash(command=sleep 3) "),
        "{shown:?}"
    );
    assert!(shown.ends_with(&format!("{ANSWER}\r\n")), "{shown:?}");
}
