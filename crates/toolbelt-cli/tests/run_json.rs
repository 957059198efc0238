//! `toolbelt run --json`: stdout carries the run's events, one JSON object per line, in the
//! `toolbelt::agent::Event` serde form (a stable format scripts parse), and nothing else.

use crate::run_support;

use run_support::{output, project, read_file, text, toolbelt};
use toolbelt::agent::{ErrorKind, Event, EventKind};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// Every stdout line parsed back into an event; each must also serialize back to the same
/// JSON (so nothing on the line is lost or renamed).
fn events(stdout: &str) -> Vec<Event> {
    assert!(stdout.ends_with('\n'), "{stdout:?}");
    stdout
        .lines()
        .map(|line| {
            let event: Event =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not an event ({e}): {line}"));
            let written: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_value(&event).unwrap(), written, "{line}");
            event
        })
        .collect()
}

/// The `type` of each event, deltas left out (how many arrive depends on the stream).
fn types(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| e.kind.type_name())
        .filter(|t| *t != "model_delta")
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn json_prints_every_event_of_a_tool_round_one_per_line() {
    let dir = project();
    let args = read_file(dir.path(), "notes.txt");
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &args),
        Reply::text("The notes say alpha, then beta."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "What do my notes say?", "--json", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = events(&text(&out.stdout));

    assert_eq!(
        types(&events),
        [
            "user_input",
            "model_response",
            "tool_result",
            "model_response",
            "run_completed"
        ],
        "{events:#?}"
    );
    let EventKind::UserInput { message } = &events[0].kind else {
        unreachable!()
    };
    assert_eq!(message.content, "What do my notes say?");
    let calls = events.iter().find_map(|e| match &e.kind {
        EventKind::ModelResponse { message, .. } if !message.tool_calls.is_empty() => {
            Some(&message.tool_calls)
        }
        _ => None,
    });
    let calls = calls.expect("a response with the tool call");
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_1", "Read")
    );
    let result = events.iter().find_map(Event::tool_result).unwrap();
    assert_eq!(
        (result.call_id.as_str(), result.is_error),
        ("call_1", false)
    );
    assert!(result.content.contains("alpha"), "{result:?}");

    // The answer streamed as deltas, and they add up to the final message.
    let last_response = events
        .iter()
        .rposition(|e| matches!(e.kind, EventKind::ModelResponse { .. }))
        .unwrap();
    let streamed: String = events[..last_response]
        .iter()
        .rev()
        .take_while(|e| matches!(e.kind, EventKind::ModelDelta { .. }))
        .map(Event::delta_text)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert_eq!(streamed, "The notes say alpha, then beta.");
    assert_eq!(
        events[last_response].message().unwrap().content,
        "The notes say alpha, then beta."
    );
    assert!(events.iter().all(|e| e.parent_invocation_id.is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn json_ends_a_failed_run_with_an_error_event_then_completion_and_exits_1() {
    let dir = project();
    let server = ScriptedServer::start([Reply::status(400, "context length exceeded")])
        .await
        .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hello", "--json", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let events = events(&text(&out.stdout));
    assert_eq!(types(&events), ["user_input", "error", "run_completed"]);
    let (kind, message) = events[1].error().unwrap();
    assert_eq!(kind, ErrorKind::Model);
    assert!(message.contains("context length exceeded"), "{message}");
}

#[test]
fn the_readme_shows_one_valid_line_per_event_type() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("the workspace README");
    let section = &readme[readme.find("## Run an agent").expect("the section")..];
    let start = section.find("```json\n").expect("the example block") + "```json\n".len();
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let mut documented: Vec<&str> = events(block).iter().map(|e| e.kind.type_name()).collect();
    documented.sort();
    documented.dedup();
    let every_type = [
        "approval_decided",
        "approval_requested",
        "error",
        "model_delta",
        "model_response",
        "pending_tool_calls",
        "run_completed",
        "tool_chunk",
        "tool_input",
        "tool_pending",
        "tool_progress",
        "tool_result",
        "user_input",
        "warning",
    ];
    assert_eq!(documented, every_type);
}
