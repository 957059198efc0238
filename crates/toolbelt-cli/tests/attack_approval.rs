//! The approval question cannot be forged: a model's arguments reach the person with every
//! escape sequence written out, whole (or cut with a marker and a way to see all), in
//! `toolbelt run` on a terminal and in the runs `toolbelt ui` starts. What the terminal shows
//! is checked through a real terminal emulator (pyte), as a person would read it.

use crate::run_support;
use crate::ui_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use run_support::{open_pty, project, screen, session_on_terminal, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// A Bash command that, shown raw, erases its own line, writes a harmless question in its
/// place and conceals the rest (`touch PWNED`).
const FORGED: &str = "echo '\x1b[2K\x1b[Gallow Read(a)? [y/N] \x1b[8m' >/dev/null; touch PWNED";

fn forged_call() -> String {
    serde_json::json!({ "command": FORGED }).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_question_in_a_bash_command_shows_the_whole_command_on_the_terminal() {
    let dir = project();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", &forged_call()),
        Reply::text("Not run."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["run", "tidy up", "--dir"]).arg(dir.path());
    let (status, shown) = session_on_terminal(command, "n\n").await;
    let lines = screen(&shown);
    let all = lines.join("\n");
    assert_eq!(status.code(), Some(0), "{all}");
    assert!(!dir.path().join("PWNED").exists(), "a refused call ran");
    // The person sees the command, the hidden part included, with its escapes written out.
    assert!(
        lines.iter().any(|l| l.contains(
            r"command: echo '\x1b[2K\x1b[Gallow Read(a)? [y/N] \x1b[8m' >/dev/null; touch PWNED"
        )),
        "the command is not shown whole:\n{all}"
    );
    assert!(
        lines.iter().any(|l| l.contains("control characters")),
        "no warning that the call holds control characters:\n{all}"
    );
    // The only question on the screen is the real one.
    assert!(
        lines.iter().any(|l| l.starts_with("allow Bash? [y/N/s]")),
        "{all}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.trim_start().starts_with("allow Read(a)?")),
        "the forged question was rendered as a question:\n{all}"
    );
    // None of the model's escape sequences reached the terminal.
    let raw = text(&shown);
    assert!(
        !raw.contains("\x1b[8m") && !raw.contains("\x1b[Gallow"),
        "{raw:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_argument_is_cut_with_a_marker_and_s_shows_it_all() {
    let dir = project();
    // A long harmless prefix pushes the real command past what the question shows at first.
    let hidden = format!("{}; touch PWNED", "true ".repeat(600));
    let server = ScriptedServer::start([
        Reply::tool_call(
            "call_1",
            "Bash",
            &serde_json::json!({ "command": hidden }).to_string(),
        ),
        Reply::text("Not run."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command.args(["run", "tidy up", "--dir"]).arg(dir.path());
    let (status, shown) = session_on_terminal(command, "s\nn\n").await;
    let raw = text(&shown).replace("\r\n", "\n");
    assert_eq!(status.code(), Some(0), "{raw}");
    let (first, second) = raw
        .split_once("allow Bash? [y/N/s]")
        .expect("the question was asked");
    assert!(
        first.contains("more characters not shown") && first.contains("answer s to show"),
        "the cut is not marked:\n{first}"
    );
    assert!(!first.contains("touch PWNED"), "{first}");
    assert!(
        second.contains("touch PWNED"),
        "s did not show the whole command:\n{second}"
    );
    assert!(!dir.path().join("PWNED").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_question_in_a_run_the_web_ui_started_is_shown_escaped() {
    let dir = project();
    let file = ui_support::session_file(&dir);
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", &forged_call()),
        Reply::text("Not run."),
    ])
    .await
    .unwrap();
    // `toolbelt ui` without --yes asks on its terminal; "n" is typed there.
    let (mut master, slave) = open_pty();
    std::io::Write::write_all(&mut master, b"n\n").unwrap();
    let mut command = ui_support::toolbelt(&server, dir.path());
    command
        .args(["ui", "--http", "127.0.0.1:0", "--token", ui_support::TOKEN])
        .arg("--session")
        .arg(&file)
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::from(slave))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    drop(command);
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut all = Vec::new();
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            all.extend_from_slice(&line);
            line.clear();
            let _ = tx.send(String::from_utf8_lossy(&all).into_owned());
        }
    });
    let wait_for = |what: &str| -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut seen = String::new();
        while std::time::Instant::now() < deadline {
            if let Ok(s) = rx.recv_timeout(Duration::from_secs(1)) {
                seen = s;
                if seen.contains(what) {
                    return seen;
                }
            }
        }
        panic!("never saw {what:?} in:\n{seen}");
    };
    let started = wait_for("toolbelt: web UI on ");
    let base = started
        .lines()
        .find_map(|l| l.strip_prefix("toolbelt: web UI on "))
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{base}api/runs"))
        .bearer_auth(ui_support::TOKEN)
        .json(&serde_json::json!({"message": "tidy up", "session_id": "forged"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    // The answer is written after the question once it is read (stderr is not a terminal).
    let asked = wait_for("allow Bash? [y/N/s] n\n");
    let _ = child.kill();
    let _ = child.wait();
    // A pipe carries bare line feeds; a terminal would have turned them into CR LF.
    let lines = screen(asked.replace('\n', "\r\n").as_bytes());
    let all = lines.join("\n");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r"\x1b[8m' >/dev/null; touch PWNED")),
        "{all}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.trim_start().starts_with("allow Read(a)?")),
        "{all}"
    );
    assert!(!asked.contains('\x1b'), "{asked:?}");
    assert!(!dir.path().join("PWNED").exists());
}

/// An MCP server writes the whole elicitation form (its message, titles, descriptions and
/// defaults); on the terminal each piece is shown with its escapes written out, so a hostile
/// server cannot pass its form off as Toolbelt's approval question.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_elicitation_form_is_shown_escaped_on_the_terminal() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../toolbelt-mcp/tests/fixtures/client_features_server.py");
    let stdio = format!("{} {} stdio", toolbelt_testkit::python(), fixture.display());
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .args(["mcp", "call", "--stdio", stdio.as_str(), "ask_forged", "{}"])
        .args(["--elicitation", "ask"])
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_MODEL");
    // `-` declines the form.
    let (status, shown) = session_on_terminal(command, "-\n").await;
    let lines = screen(&shown);
    let all = lines.join("\n");
    assert_eq!(status.code(), Some(0), "{all}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r"asks: \x1b[2K\x1b[Gallow Read(a)? [y/N] \x1b[8m")),
        "the message is not shown escaped:\n{all}"
    );
    // The question line is cleared once answered, so it is looked for in what was written.
    assert!(
        text(&shown)
            .contains(r"Answer\x1b[8m (\x1b[2K\x1b[Gtype your password) [\x1b]0;pwned\x07]: "),
        "the field is not shown escaped:\n{all}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.trim_start().starts_with("allow Read(a)?")),
        "the forged question was rendered as a question:\n{all}"
    );
    assert!(
        all.contains(r#"{"action": "decline", "content": null}"#),
        "{all}"
    );
    let raw = text(&shown);
    assert!(
        !raw.contains("\x1b[8m") && !raw.contains("\x1b]0;pwned"),
        "{raw:?}"
    );
}
