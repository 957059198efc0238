//! The web UI in a real headless Chromium (the distribution's `chromium`, driven by
//! playwright-core from `tests/ui/browser.mjs`): a run made by another `toolbelt run
//! --session` process appears live (its session listed by its first prompt) with its model and
//! tool cards in order, an Edit's diff and a Read image render, a failing tool shows its
//! error, markup in a result stays text, a run started from the chat box completes, and the
//! page logs no errors.
//!
//! A stored run whose agent handed over to a sub-agent shows one run with the sub-agent's
//! invocation nested under its parent's.
//!
//! A run stored before the page opens is in its first paint (with every API request
//! refused): the model's Markdown laid out, markup from the model, a tool and the session's
//! title inert, counts in the singular for one, and the header and session list fixed while
//! the run pane scrolls.
//!
//! With `TOOLBELT_UI_SCREENSHOTS=1` the script saves screenshots of the main views to
//! `docs/ui-*.png` (the README's "Web UI" section shows them).

use crate::ui_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use toolbelt_model::testing::{Reply, ScriptedServer};
use ui_support::{TOKEN, Ui, path_arg, project, run_in_session, session_file};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn require(path: &Path, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is missing at {}; run `bash .ci/install-peers`",
        path.display()
    );
    path.to_path_buf()
}

/// The browser script, started against `ui` in `scenario`; `on_ready` runs when it prints
/// READY (the page is open and following). Panics with what it said unless it prints PASS.
async fn browse(ui: &Ui, scenario: &str, on_ready: impl AsyncFnOnce()) {
    let chromium = require(Path::new("/usr/bin/chromium"), "Chromium (apt: chromium)");
    let playwright = require(
        &workspace().join("tests/peers/node_modules/playwright-core/index.mjs"),
        "the npm peer playwright-core",
    );
    let screenshots = std::env::var_os("TOOLBELT_UI_SCREENSHOTS")
        .filter(|v| !v.is_empty() && v != "0")
        .map(|_| workspace().join("docs"));
    let mut node = Command::new("node");
    node.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/browser.mjs"))
        .env("UI_URL", format!("{}?token={TOKEN}", ui.base))
        .env("PLAYWRIGHT_CORE", &playwright)
        .env("CHROMIUM", &chromium)
        .env("SCENARIO", scenario)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(dir) = &screenshots {
        std::fs::create_dir_all(dir).unwrap();
        node.env("SCREENSHOTS", dir);
    }
    let mut node = node.spawn().expect("start node (Node.js 18 or later)");
    let lines = BufReader::new(node.stdout.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    // A line, or None when the script closed its output or said nothing for 3 minutes.
    let next = |said: &mut Vec<String>| {
        let line = rx.recv_timeout(Duration::from_secs(180)).ok();
        if let Some(line) = &line {
            said.push(line.clone());
        }
        line
    };
    let mut on_ready = Some(on_ready);
    while let Some(line) = next(&mut said) {
        if line == "READY"
            && let Some(on_ready) = on_ready.take()
        {
            on_ready().await;
        }
    }
    // Silent for minutes but alive: stop it rather than wait forever.
    if node.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_secs(5));
        if node.try_wait().unwrap().is_none() {
            let _ = node.kill();
        }
    }
    let status = node.wait().unwrap();
    assert!(
        status.success() && said.iter().any(|l| l == "PASS"),
        "the browser checks failed:\n{}\n--- toolbelt ui stderr ---\n{}",
        said.join("\n"),
        ui.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_run_and_a_chat_run_render_in_chromium() {
    let dir = project();
    let file = session_file(&dir);
    let d = dir.path();
    let read = |name: &str| format!(r#"{{"file_path":"{}"}}"#, path_arg(d, name));
    let edit = format!(
        r#"{{"file_path":"{}","old_string":"alpha","new_string":"gamma"}}"#,
        path_arg(d, "notes.txt")
    );
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ("call_notes", "Read", read("notes.txt").as_str()),
            ("call_pixel", "Read", read("pixel.png").as_str()),
        ]),
        Reply::tool_call("call_edit", "Edit", &edit),
        Reply::tool_call("call_missing", "Read", &read("missing.txt")),
        Reply::tool_call("call_payload", "Read", &read("payload.txt")),
        Reply::text("Done. <script>window.__pwned = 3</script>"),
        // The chat box's run.
        Reply::text("Hello from the chat box"),
    ])
    .await
    .unwrap();

    let ui = Ui::start(&server, d, &file, &[]);
    // The page is open and following before the run starts, so what it shows came live.
    browse(&ui, "live", async || {
        let (code, stderr) = run_in_session(&server, d, &file, "Look at my files", &[]).await;
        assert_eq!(code, Some(0), "{stderr}");
    })
    .await;
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agents_invocation_nests_under_its_parent_in_chromium() {
    use toolbelt::agent::{Event, EventKind, SessionKey, SessionService, SqliteSessionService};
    use toolbelt::model::{FinishReason, Message, ToolCall};

    let dir = project();
    let file = session_file(&dir);
    // A stored run as a transfer leaves it: the sub-agent's invocation names its parent.
    let store = SqliteSessionService::open(&file).unwrap();
    let key = SessionKey::new("toolbelt", "local", "tree");
    let root = |kind: EventKind| Event::new("i-root", None, "coordinator", kind);
    let child = |kind: EventKind| Event::new("i-child", Some("i-root".into()), "planner", kind);
    let ask = Message::assistant_tool_calls(
        "",
        vec![ToolCall::new(
            "call_t",
            "transfer_to_agent",
            r#"{"agent_name":"planner"}"#,
        )],
    );
    let events = [
        Event::new(
            "i-root",
            None,
            "user",
            EventKind::UserInput {
                message: Message::user("Plan a trip"),
            },
        ),
        root(EventKind::ModelResponse {
            message: ask,
            finish_reason: Some(FinishReason::ToolCalls),
            usage: None,
        }),
        root(EventKind::ToolResult {
            result: toolbelt::agent::ToolResult::new("call_t", "transfer_to_agent", "planner"),
        }),
        child(EventKind::ModelResponse {
            message: Message::assistant("Here is the plan"),
            finish_reason: Some(FinishReason::Stop),
            usage: None,
        }),
        child(EventKind::RunCompleted),
        root(EventKind::RunCompleted),
    ];
    for event in &events {
        store.append_event(&key, event).await.unwrap();
    }
    let server = ScriptedServer::start([]).await.unwrap();
    let ui = Ui::start(&server, dir.path(), &file, &[]);
    browse(&ui, "tree", async || {}).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_plan_panel_shows_the_last_task_list_todowrite_saved_in_chromium() {
    // A run that writes its plan, updates it, then sends a list TodoWrite refuses: the
    // panel shows the update (the task in progress by its activeForm, markup as text), not
    // the refused list.
    let dir = project();
    let file = session_file(&dir);
    let todo = |content: &str, status: &str, active: &str| serde_json::json!({"content": content, "status": status, "activeForm": active});
    let first = serde_json::json!({"todos": [
        todo("Read the notes", "pending", "Reading the notes"),
        todo("Fix the <img src=x onerror=window.__pwned=4> bug", "pending", "Fixing the bug"),
        todo("Run the tests", "pending", "Running the tests"),
    ]});
    let update = serde_json::json!({"todos": [
        todo("Read the notes", "completed", "Reading the notes"),
        todo("Fix the <img src=x onerror=window.__pwned=4> bug", "in_progress", "Fixing the <img src=x onerror=window.__pwned=5> bug"),
        todo("Run the tests", "pending", "Running the tests"),
    ]});
    let refused = serde_json::json!({"todos": [todo("", "pending", "")]});
    let server = ScriptedServer::start([
        Reply::tool_call("call_plan", "TodoWrite", &first.to_string()),
        Reply::tool_call("call_update", "TodoWrite", &update.to_string()),
        Reply::tool_call("call_refused", "TodoWrite", &refused.to_string()),
        Reply::text("Working on it."),
    ])
    .await
    .unwrap();
    let d = dir.path();
    let ui = Ui::start(&server, d, &file, &[]);
    browse(&ui, "plan", async || {
        let (code, stderr) = run_in_session(&server, d, &file, "Fix the bug", &[]).await;
        assert_eq!(code, Some(0), "{stderr}");
    })
    .await;
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_run_is_decided_with_the_pages_buttons_and_resumes_in_chromium() {
    let dir = project();
    let file = session_file(&dir);
    let d = dir.path();
    let write = |name: &str| {
        format!(
            r#"{{"file_path":"{}","content":"hello"}}"#,
            path_arg(d, name)
        )
    };
    let server = ScriptedServer::start([
        Reply::tool_calls([
            ("call_a", "Write", write("a.txt").as_str()),
            ("call_b", "Write", write("b.txt").as_str()),
        ]),
        Reply::text("One written, one refused."),
    ])
    .await
    .unwrap();
    // Paused by a `toolbelt run` without a terminal; the page resumes it.
    let (code, stderr) =
        ui_support::run_asking_in_session(&server, d, &file, "Write two files", &[]).await;
    assert_eq!(code, Some(3), "{stderr}");
    let ui = Ui::start_asking(&server, d, &file, &[]);
    browse(&ui, "approval", async || {}).await;
    assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "hello");
    assert!(!d.join("b.txt").exists(), "the denied Write never ran");
    let told = crate::run_support::tool_contents(&server.requests()[1]);
    assert!(told[1].contains("The user says: not that one"), "{told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graph_run_draws_its_path_and_its_question_is_answered_from_the_chat_box_in_chromium() {
    let dir = project();
    let file = session_file(&dir);
    let d = dir.path();
    let agents = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/release.toml");
    let agents = agents.to_str().unwrap();
    let write = format!(
        r#"{{"file_path":"{}","content":"v2 notes\n"}}"#,
        path_arg(d, "RELEASE.md")
    );
    let server = ScriptedServer::start([
        Reply::text("v2 notes <img src=x onerror=window.__pwned=6>"),
        Reply::tool_call("call_w", "Write", &write),
        Reply::text("Wrote RELEASE.md."),
    ])
    .await
    .unwrap();
    // Another process runs the graph to its question (exit 3: waiting for the answer).
    let (code, stderr) =
        run_in_session(&server, d, &file, "Notes for v2", &["--agents", agents]).await;
    assert_eq!(code, Some(3), "{stderr}");
    let ui = Ui::start(&server, d, &file, &["--agents", agents]);
    browse(&ui, "graph", async || {}).await;
    assert_eq!(
        std::fs::read_to_string(d.join("RELEASE.md")).unwrap(),
        "v2 notes\n"
    );
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
}

/// The model's Markdown for the page to lay out: long enough to scroll, with markup that must
/// stay text (the browser script checks both).
const MARKDOWN: &str = r#"# Release notes

Some **bold** and *slanted* words, and [the docs](https://example.com/docs).

- first item
- second with `code`
ITEMS
1. one
2. two

> a quote

## Details

```rust
fn main() {
    println!("<b>hi</b>");
}
```

Markup stays text: <img src=x onerror="window.__pwned = 8"> <script>window.__pwned = 9</script> [click me](javascript:window.__pwned=10)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_first_paint_shows_the_sessions_and_markdown_and_markup_stays_inert_in_chromium() {
    use toolbelt::agent::{Event, EventKind, SessionKey, SessionService, SqliteSessionService};
    use toolbelt::model::Message;

    let dir = project();
    let file = session_file(&dir);
    let d = dir.path();
    std::fs::write(d.join("one.txt"), "just one line\n").unwrap();
    // A session of one event, older than the run's.
    let store = SqliteSessionService::open(&file).unwrap();
    let lonely = SessionKey::new("toolbelt", "local", "lonely");
    let input = EventKind::UserInput {
        message: Message::user("An unanswered question"),
    };
    store
        .append_event(&lonely, &Event::new("i-lonely", None, "user", input))
        .await
        .unwrap();
    drop(store);

    let read = |name: &str| format!(r#"{{"file_path":"{}"}}"#, path_arg(d, name));
    let items: String = (3..=40).map(|n| format!("- item {n}\n")).collect();
    let server = ScriptedServer::start([
        Reply::tool_call("call_one", "Read", &read("one.txt")),
        Reply::tool_call("call_payload", "Read", &read("payload.txt")),
        Reply::text(MARKDOWN.replace("ITEMS\n", &items)),
    ])
    .await
    .unwrap();
    // The run happens before the page opens: what the page shows first came in its HTML.
    let (code, stderr) = run_in_session(
        &server,
        d,
        &file,
        "</script><script>window.__pwned = 7</script> notes",
        &[],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    let ui = Ui::start(&server, d, &file, &[]);
    browse(&ui, "markdown", async || {}).await;
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
}
