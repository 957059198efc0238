//! The web UI in a real headless Chromium (the distribution's `chromium`, driven by
//! playwright-core from `tests/ui/browser.mjs`): a run made by another `toolbelt run
//! --session` process appears live with its model and tool cards in order, an Edit's diff and
//! a Read image render, a failing tool shows its error, markup in a result stays text, a run
//! started from the chat box completes, and the page logs no errors.
//!
//! With `TOOLBELT_UI_SCREENSHOTS=1` the script saves screenshots of the main views to
//! `docs/ui-*.png` (the README's "Web UI" section shows them).

mod ui_support;

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

#[tokio::test(flavor = "multi_thread")]
async fn a_live_run_and_a_chat_run_render_in_chromium() {
    let chromium = require(Path::new("/usr/bin/chromium"), "Chromium (apt: chromium)");
    let playwright = require(
        &workspace().join("tests/peers/node_modules/playwright-core/index.mjs"),
        "the npm peer playwright-core",
    );
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
    let screenshots = std::env::var_os("TOOLBELT_UI_SCREENSHOTS")
        .filter(|v| !v.is_empty() && v != "0")
        .map(|_| workspace().join("docs"));
    let mut node = Command::new("node");
    node.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/browser.mjs"))
        .env("UI_URL", format!("{}?token={TOKEN}", ui.base))
        .env("PLAYWRIGHT_CORE", &playwright)
        .env("CHROMIUM", &chromium)
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

    // The page is open and following before the run starts, so what it shows came live.
    loop {
        match next(&mut said) {
            Some(line) if line == "READY" => break,
            Some(_) => continue,
            None => panic!(
                "the browser script never got ready:\n{}\n{}",
                said.join("\n"),
                ui.stderr()
            ),
        }
    }
    let (code, stderr) = run_in_session(&server, d, &file, "Look at my files", &[]).await;
    assert_eq!(code, Some(0), "{stderr}");

    while next(&mut said).is_some() {}
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
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
}
