//! `toolbelt serve` with permission rules: a call a rule asks about is asked of the calling
//! client through an MCP elicitation form (the Python SDK here), and runs only on its yes; a
//! client without elicitation gets the call refused with the reason.

use crate::serve_support;

use std::process::Command;

use serde_json::Value;
use serve_support::{client_script, run_client, toolbelt};

/// The client `scenario` of `py_approvals.py` against `serve --stdio --ask Write` in a new
/// folder; its report and the folder.
fn write_through_serve(scenario: &str) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(toolbelt_testkit::python());
    command
        .arg(client_script("py_approvals.py"))
        .arg(scenario)
        .arg(toolbelt())
        .args(["serve", "--stdio", "--ask", "Write", "--dir"])
        .arg(dir.path());
    (run_client(command), dir)
}

#[test]
fn an_asked_call_runs_once_the_client_approves_in_the_form() {
    let (report, dir) = write_through_serve("approve");
    assert_eq!(report["is_error"], false, "{report}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new.txt")).unwrap(),
        "hello\n"
    );
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.starts_with("Allow Write?"), "{message}");
    assert!(message.contains("+hello"), "the diff: {message}");
    assert!(message.contains("Asked because"), "{message}");
    assert_eq!(
        asked[0]["schema"]["properties"]["approve"]["type"],
        "boolean"
    );
}

#[test]
fn a_no_or_a_declined_form_refuses_the_call_and_says_why() {
    for (scenario, says) in [
        ("refuse", "not in this folder"),
        ("decline", "declined"),
        ("bare", "does not offer elicitation"),
    ] {
        let (report, dir) = write_through_serve(scenario);
        assert_eq!(report["is_error"], true, "{scenario}: {report}");
        let text = report["text"].as_str().unwrap();
        assert!(text.contains(says), "{scenario}: {text}");
        assert!(
            !dir.path().join("new.txt").exists(),
            "{scenario}: the call ran"
        );
        let asked = report["asked"].as_array().unwrap().len();
        assert_eq!(asked, usize::from(scenario != "bare"), "{scenario}");
    }
}
