//! The approval question cannot be forged: a model's arguments reach the person with every
//! escape sequence written out, whole (or cut with a marker and a way to see all), in
//! `toolbelt run` on a terminal; the runs `toolbelt ui` starts wait whole for the page. What
//! the terminal shows is checked through a real terminal emulator (pyte), as a person would
//! read it.

use crate::run_support;
use crate::ui_support;

use std::time::Duration;

use run_support::{project, screen, session_on_terminal, text, toolbelt};
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

/// A run the web UI started pauses for the page (which writes every argument as text, never
/// markup or escapes) instead of asking on a terminal: the stored question holds the whole
/// command, nothing ran, and the page's denial ends it.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_question_in_a_run_the_web_ui_started_waits_whole_for_the_page() {
    use toolbelt::agent::{SessionKey, SessionService, SqliteSessionService, pending_approvals};
    let dir = project();
    let file = ui_support::session_file(&dir);
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Bash", &forged_call()),
        Reply::text("Not run."),
    ])
    .await
    .unwrap();
    let ui = ui_support::Ui::start_asking(&server, dir.path(), &file, &[]);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let post = |path: &str, body: serde_json::Value| {
        client
            .post(format!("{}{path}", ui.base))
            .bearer_auth(ui_support::TOKEN)
            .json(&body)
            .send()
    };
    let started = post(
        "api/runs",
        serde_json::json!({"message": "tidy up", "session_id": "forged"}),
    )
    .await
    .unwrap();
    assert_eq!(started.status(), 202);
    let store = SqliteSessionService::open(&file).unwrap();
    let key = SessionKey::new("toolbelt", "local", "forged");
    let limit = Duration::from_secs(30);
    let asked =
        toolbelt_testkit::eventually_await("the run paused for the page", limit, async || {
            pending_approvals(&store.events(&key).await.unwrap()).pop()
        })
        .await;
    assert_eq!(
        asked.preview.as_deref(),
        Some(format!("$ {FORGED}").as_str())
    );
    assert!(!dir.path().join("PWNED").exists());

    let deny =
        serde_json::json!({"session_id": "forged", "decisions": {"call_1": {"decision": "deny"}}});
    // Refused (409) while the paused run is still winding down.
    toolbelt_testkit::eventually_await("the page's decision was taken", limit, async || {
        let answer = post("api/decisions", deny.clone()).await.unwrap();
        (answer.status() == 202).then_some(())
    })
    .await;
    let result = toolbelt_testkit::eventually_await("the denial's result", limit, async || {
        store
            .events(&key)
            .await
            .unwrap()
            .into_iter()
            .find_map(|e| match e.kind {
                toolbelt::agent::EventKind::ToolResult { result } => Some(result),
                _ => None,
            })
    })
    .await;
    assert!(
        result.is_error && result.content.contains("denied"),
        "{result:?}"
    );
    assert!(!dir.path().join("PWNED").exists(), "a denied call ran");
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
