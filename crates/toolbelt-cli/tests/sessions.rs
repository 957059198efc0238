//! `toolbelt sessions list|show|rm` and `chat --continue` / `run --continue` end to end: the
//! built binary over a real SQLite session file (and Redis and PostgreSQL, with features
//! `redis` and `postgres`), the conversations written by real `chat` and `run` processes
//! against the scripted model server.

use crate::run_support;

use std::path::Path;
use std::process::Command;

use run_support::{output, path_arg, project, text, toolbelt};
use toolbelt_model::testing::{Reply, ScriptedServer};

/// `toolbelt chat --session STORE` with `typed` on stdin, to its end; returns (code, stderr).
async fn chat(
    server: &ScriptedServer,
    dir: &Path,
    store: &str,
    typed: &str,
    extra: &[&str],
) -> (Option<i32>, String) {
    let mut command = toolbelt(server, dir);
    command
        .args(["chat", "--session", store, "--dir"])
        .arg(dir)
        .args(extra);
    let out = output(command, typed).await;
    (out.status.code(), text(&out.stderr))
}

/// `toolbelt sessions ARGS --session STORE` (no model needed); returns (code, stdout, stderr).
async fn sessions(dir: &Path, store: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command
        .current_dir(dir)
        .arg("sessions")
        .args(args)
        .args(["--session", store])
        .env_remove("TOOLBELT_LOG");
    let out = output(command, "").await;
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The session id a `chat` or `run` printed in its resume hint.
fn session_id_in(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session hint in:\n{stderr}"))
        .to_string()
}

fn store_in(dir: &tempfile::TempDir) -> String {
    dir.path()
        .join("sessions.db")
        .to_string_lossy()
        .into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_list_shows_every_chat_by_its_first_prompt_newest_first() {
    let dir = project();
    let store = store_in(&dir);
    let server =
        ScriptedServer::start([Reply::text("one"), Reply::text("two"), Reply::text("three")])
            .await
            .unwrap();
    let (code, first) = chat(
        &server,
        dir.path(),
        &store,
        "How do I build this project?\nand a second prompt\n",
        &[],
    )
    .await;
    assert_eq!(code, Some(0), "{first}");
    let (code, second) = chat(&server, dir.path(), &store, "Where are the tests?\n", &[]).await;
    assert_eq!(code, Some(0), "{second}");
    let (first, second) = (session_id_in(&first), session_id_in(&second));

    let (code, stdout, stderr) = sessions(dir.path(), &store, &["list"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    // The newest first; each by its id and its first prompt, on one line.
    assert!(lines[0].starts_with(&second), "{stdout}");
    assert!(lines[0].contains("Where are the tests?"), "{stdout}");
    assert!(lines[1].starts_with(&first), "{stdout}");
    assert!(lines[1].contains("How do I build"), "{stdout}");
    assert!(
        !lines[1].contains("second prompt"),
        "only the first prompt: {stdout}"
    );
    assert!(lines[1].contains(" events"), "{stdout}");

    let (code, stdout, stderr) = sessions(dir.path(), &store, &["list", "--json"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let listed: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(listed[0]["session_id"], second.as_str(), "{listed}");
    assert_eq!(listed[0]["title"], "Where are the tests?", "{listed}");
    assert_eq!(listed[1]["session_id"], first.as_str(), "{listed}");
    assert!(listed[1]["updated_ms"].as_u64().unwrap() > 0, "{listed}");
    assert!(listed[1]["events"].as_u64().unwrap() >= 4, "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_show_prints_the_conversation_with_its_tool_calls() {
    let dir = project();
    let store = store_in(&dir);
    let read = format!(r#"{{"file_path":"{}"}}"#, path_arg(dir.path(), "notes.txt"));
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", &read),
        Reply::text("The notes say alpha, then beta."),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args([
            "run",
            "What do my notes say?",
            "--session-id",
            "s1",
            "--session",
            &store,
            "--dir",
        ])
        .arg(dir.path());
    let out = output(command, "").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let (code, stdout, stderr) = sessions(dir.path(), &store, &["show", "s1"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{stdout}"))
    };
    // In the conversation's order: the prompt, the call, its result, the answer.
    let prompt = at("user: What do my notes say?");
    let call = at("→ Read(");
    let result = at("✓ Read: ");
    let answer = at("The notes say alpha, then beta.");
    assert!(
        prompt < call && call < result && result < answer,
        "{stdout}"
    );

    // --json: every stored event whole, one object a line, as `run --json` prints them.
    let (code, stdout, stderr) = sessions(dir.path(), &store, &["show", "s1", "--json"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"user_input"), "{kinds:?}");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool_result in {kinds:?}"));
    assert_eq!(result["result"]["call_id"], "call_1", "{result}");
    assert!(
        result["result"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("alpha")),
        "the whole result, not a preview: {result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_rm_deletes_and_an_unknown_id_is_a_usage_error() {
    let dir = project();
    let store = store_in(&dir);
    let server = ScriptedServer::start([Reply::text("hi")]).await.unwrap();
    let (code, stderr) = chat(&server, dir.path(), &store, "hello\n", &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let id = session_id_in(&stderr);

    let (code, stdout, stderr) = sessions(dir.path(), &store, &["rm", &id]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), format!("deleted session {id}"));
    let (code, stdout, stderr) = sessions(dir.path(), &store, &["list"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "", "nothing left: {stdout}");
    assert!(stderr.contains("no stored sessions"), "{stderr}");

    // Gone: a second rm, and show, name the id and how to list the sessions (exit code 2).
    for verb in ["rm", "show"] {
        let (code, _, stderr) = sessions(dir.path(), &store, &[verb, &id]).await;
        assert_eq!(code, Some(2), "{verb}: {stderr}");
        assert!(
            stderr.contains(&format!("no stored session {id}")) && stderr.contains("sessions list"),
            "{verb}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_continue_goes_on_with_the_latest_session() {
    let dir = project();
    let store = store_in(&dir);
    let server = ScriptedServer::start([
        Reply::text("old answer"),
        Reply::text("Nice to meet you, Ada."),
        Reply::text("Your name is Ada."),
    ])
    .await
    .unwrap();
    let (code, stderr) = chat(&server, dir.path(), &store, "an older chat\n", &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = chat(&server, dir.path(), &store, "My name is Ada.\n", &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let latest = session_id_in(&stderr);

    let (code, stderr) = chat(
        &server,
        dir.path(),
        &store,
        "What is my name?\n",
        &["--continue"],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("continuing session {latest} (My name is Ada.)")),
        "{stderr}"
    );
    assert_eq!(session_id_in(&stderr), latest, "{stderr}");
    // The model was sent the earlier turn of that session, and nothing of the older one.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let sent = requests[2].body["messages"].to_string();
    assert!(
        sent.contains("My name is Ada.")
            && sent.contains("Nice to meet you, Ada.")
            && sent.contains("What is my name?"),
        "{sent}"
    );
    assert!(!sent.contains("an older chat"), "{sent}");

    // --continue names the session itself.
    let (code, stderr) = chat(
        &server,
        dir.path(),
        &store,
        "",
        &["--continue", "--session-id", "x"],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--session-id"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn continue_on_an_empty_store_starts_a_chat_and_fails_a_run() {
    let dir = project();
    let store = store_in(&dir);
    let server = ScriptedServer::start([Reply::text("hello there")])
        .await
        .unwrap();
    let (code, stderr) = chat(&server, dir.path(), &store, "hi\n", &["--continue"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("no stored session to continue; starting a new one"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 1, "{stderr}");

    let other = tempfile::tempdir().unwrap();
    let empty = store_in(&other);
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "go on", "--continue", "--session", &empty, "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--continue: the --session store holds no session yet"),
        "{stderr}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "the model was not asked: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_title_with_an_escape_sequence_is_shown_escaped() {
    let dir = project();
    let store = store_in(&dir);
    let server = ScriptedServer::start([Reply::text("ok"), Reply::text("ok")])
        .await
        .unwrap();
    let (code, stderr) = chat(
        &server,
        dir.path(),
        &store,
        "\x1b[2K\x1b[31mred\u{202e} alert\n/sessions\n",
        &[],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    // /sessions in the chat: the title written out, never sent to the terminal raw.
    let listed = stderr
        .lines()
        .find(|l| l.ends_with(" (this one)"))
        .unwrap_or_else(|| panic!("no /sessions line in:\n{stderr}"));
    assert!(
        listed.contains(r"\x1b[2K\x1b[31mred\u{202e} alert"),
        "{listed}"
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\u{202e}'),
        "{stderr:?}"
    );

    for args in [&["list"][..], &["show", &session_id_in(&stderr)][..]] {
        let (code, stdout, stderr) = sessions(dir.path(), &store, args).await;
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            stdout.contains(r"\x1b[31mred\u{202e} alert"),
            "{args:?}: {stdout}"
        );
        assert!(
            !stdout.contains('\x1b') && !stdout.contains('\u{202e}'),
            "{args:?}: {stdout:?}"
        );
    }
}

/// `list`, `show` and `rm` on the server store `url`: the session of this test, by its id,
/// among whatever else the server holds; the URL (which may hold a password) never printed.
#[cfg(any(feature = "redis", feature = "postgres"))]
async fn list_show_rm_on(url: &str) {
    let dir = project();
    let server = ScriptedServer::start([Reply::text("first answer")])
        .await
        .unwrap();
    let tag = format!("{:x}", std::process::id());
    let prompt = format!("server prompt {tag}");
    let (code, stderr) = chat(&server, dir.path(), url, &format!("{prompt}\n"), &[]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let id = session_id_in(&stderr);

    let (code, stdout, stderr) = sessions(dir.path(), url, &["list", "--json"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let listed: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let mine = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not in {listed}"));
    assert_eq!(mine["title"], prompt.as_str());

    let (code, stdout, stderr) = sessions(dir.path(), url, &["show", &id]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("user: {prompt}")) && stdout.contains("first answer"),
        "{stdout}"
    );

    let (code, _, stderr) = sessions(dir.path(), url, &["rm", &id]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let (code, _, stderr) = sessions(dir.path(), url, &["rm", &id]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("no stored session {id}")),
        "{stderr}"
    );
    assert!(!stderr.contains("://"), "{stderr}");
}

/// Redis, as `.ci/start-services` runs it.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread")]
async fn sessions_list_show_and_rm_over_redis() {
    list_show_rm_on(&toolbelt_testkit::service_url(
        "TOOLBELT_TEST_REDIS_URL",
        "redis://127.0.0.1:6379",
    ))
    .await;
}

/// PostgreSQL, as `.ci/start-services` runs it.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread")]
async fn sessions_list_show_and_rm_over_postgres() {
    list_show_rm_on(&toolbelt_testkit::service_url(
        "TOOLBELT_TEST_POSTGRES_URL",
        "postgres://toolbelt:toolbelt@127.0.0.1:5432/toolbelt",
    ))
    .await;
}
