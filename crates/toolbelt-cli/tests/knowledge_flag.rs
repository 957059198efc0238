//! `--knowledge PATH` on `run`, `chat` and `serve`: the sources indexed on start into the
//! SQLite base in `--dir`, the two knowledge tools offered (to the agent as framework tools,
//! over MCP by serve), against the scripted model server and the Python MCP SDK client.

use crate::run_support;
use crate::serve_support;

use std::path::Path;

use run_support::*;
use serde_json::Value;
use toolbelt_model::testing::{Reply, ScriptedServer};

/// A project with `docs/ops.md` (a Rollback section) beside run_support's `notes.txt`.
fn docs_project() -> tempfile::TempDir {
    let dir = project();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(
        dir.path().join("docs/ops.md"),
        "# Ops\n\n## Rollback\n\nRun `make rollback` to restore the previous release.\n",
    )
    .unwrap();
    dir
}

fn run_with_knowledge(server: &ScriptedServer, dir: &Path, prompt: &str) -> std::process::Command {
    let mut command = toolbelt(server, dir);
    command
        .args(["run", prompt, "--knowledge", "docs", "--tools", "Read"])
        .arg("--dir")
        .arg(dir);
    command
}

#[tokio::test]
async fn run_offers_both_knowledge_tools_through_a_tools_filter_and_answers_with_citations() {
    let dir = docs_project();
    let server = ScriptedServer::start([
        Reply::tool_call(
            "c1",
            "knowledge_search",
            r#"{"query":"roll back a release"}"#,
        ),
        Reply::tool_call(
            "c2",
            "agentic_knowledge_search",
            r#"{"query":"rollback","filter":{"nope":"x"}}"#,
        ),
        Reply::text("run make rollback"),
    ])
    .await
    .unwrap();
    let out = output(
        run_with_knowledge(&server, dir.path(), "how do I roll back?"),
        "",
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(text(&out.stdout), "run make rollback\n");
    assert!(
        stderr
            .contains("toolbelt: knowledge: 1 files (1 added, 0 changed, 0 unchanged, 0 removed)"),
        "{stderr}"
    );
    assert!(dir.path().join(".toolbelt/knowledge.db").is_file());

    let requests = server.requests();
    // `--tools Read` keeps Read; the framework's knowledge tools stay whatever the filter.
    let offered = requests[0].tool_names();
    for name in ["Read", "knowledge_search", "agentic_knowledge_search"] {
        assert!(offered.contains(&name.to_string()), "{name}: {offered:?}");
    }
    assert!(!offered.contains(&"Bash".to_string()), "{offered:?}");
    let results = tool_contents(&requests[2]);
    assert!(
        results[0].contains("docs/ops.md:3-5") && results[0].contains("make rollback"),
        "{results:?}"
    );
    // A filter on an undeclared field is an error the model sees.
    assert!(results[1].contains("nope"), "{results:?}");
    assert!(!results[1].contains("make rollback"), "{results:?}");
}

#[tokio::test]
async fn a_second_start_rechunks_only_what_changed() {
    let dir = docs_project();
    let server =
        ScriptedServer::start([Reply::text("one"), Reply::text("two"), Reply::text("three")])
            .await
            .unwrap();
    for expected in [
        "1 files (1 added, 0 changed, 0 unchanged, 0 removed)",
        "1 files (0 added, 0 changed, 1 unchanged, 0 removed)",
    ] {
        let out = output(run_with_knowledge(&server, dir.path(), "hi"), "").await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
        assert!(stderr.contains(expected), "{expected}:\n{stderr}");
    }
    std::fs::write(
        dir.path().join("docs/ops.md"),
        "# Ops\n\nNothing to roll back.\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("docs/new.md"), "# New\n\nA new page.\n").unwrap();
    let out = output(run_with_knowledge(&server, dir.path(), "hi"), "").await;
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("2 files (1 added, 1 changed, 0 unchanged, 0 removed)"),
        "{stderr}"
    );
    // The base the CLI's own `knowledge status` reads is the same file.
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir.path())
        .args(["knowledge", "status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["documents"], 2);
}

#[tokio::test]
async fn chat_gets_the_tools_and_a_named_db_file() {
    let dir = docs_project();
    let db = dir.path().join("elsewhere/kb.db");
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "knowledge_search", r#"{"query":"rollback"}"#),
        Reply::text("found it"),
    ])
    .await
    .unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["chat", "--knowledge", "docs/*.md", "--knowledge-db"])
        .arg(&db)
        .arg("--dir")
        .arg(dir.path());
    let out = output(command, "how do I roll back?\n").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(
        text(&out.stdout).contains("found it"),
        "{}",
        text(&out.stdout)
    );
    assert!(db.is_file());
    assert!(!dir.path().join(".toolbelt/knowledge.db").exists());
    let results = tool_contents(&server.requests()[1]);
    assert!(results[0].contains("docs/ops.md:3-5"), "{results:?}");
}

#[tokio::test]
async fn a_missing_source_stops_the_run_before_the_model_is_called() {
    let dir = project();
    let server = ScriptedServer::start([Reply::text("never")]).await.unwrap();
    let mut command = toolbelt(&server, dir.path());
    command
        .args(["run", "hi", "--knowledge", "no-such-folder", "--dir"])
        .arg(dir.path());
    let out = output(command, "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(stderr.contains("no-such-folder"), "{stderr}");
    assert!(server.requests().is_empty());
}

/// The Python SDK client of `py_knowledge.py` against `target`.
fn knowledge_client(target: &[String]) -> Value {
    let mut command = std::process::Command::new(toolbelt_testkit::python());
    command
        .arg(serve_support::client_script("py_knowledge.py"))
        .args(target);
    serve_support::run_client(command)
}

fn assert_knowledge_report(report: &Value) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for name in ["knowledge_search", "agentic_knowledge_search", "Read"] {
        assert!(tools.contains(&name), "{name}: {tools:?}");
    }
    assert_eq!(report["search"]["isError"], false, "{report}");
    let text = report["search"]["text"].as_str().unwrap();
    assert!(
        text.contains("docs/ops.md:3-5") && text.contains("make rollback"),
        "{text}"
    );
    assert_eq!(report["bad_filter"]["isError"], true, "{report}");
    let filtered = report["filtered"]["text"].as_str().unwrap();
    assert!(filtered.contains("docs/ops.md"), "{filtered}");
}

#[test]
fn serve_offers_the_knowledge_tools_over_stdio_to_the_python_sdk() {
    let dir = docs_project();
    let docs = dir.path().join("docs").display().to_string();
    let target = serve_support::stdio_target(&[
        "serve".into(),
        "--dir".into(),
        dir.path().display().to_string(),
        "--knowledge".into(),
        docs,
    ]);
    assert_knowledge_report(&knowledge_client(&target));
    assert!(dir.path().join(".toolbelt/knowledge.db").is_file());
}

#[test]
fn serve_offers_the_knowledge_tools_over_streamable_http() {
    let dir = docs_project();
    let docs = dir.path().join("docs").display().to_string();
    let serve = serve_support::HttpServe::start(&[
        "serve".into(),
        "--dir".into(),
        dir.path().display().to_string(),
        "--knowledge".into(),
        docs,
        "--no-auth".into(),
    ]);
    let report = knowledge_client(&["http".into(), serve.url.clone()]);
    assert_knowledge_report(&report);
}

/// `run --knowledge docs --knowledge-rewrite`, asking how to undo a deploy.
fn run_rewriting(server: &ScriptedServer, dir: &Path) -> std::process::Command {
    let mut command = run_with_knowledge(server, dir, "how do I undo a bad deploy?");
    command.arg("--knowledge-rewrite");
    command
}

#[tokio::test]
async fn knowledge_rewrite_searches_the_query_the_runs_model_wrote() {
    let dir = docs_project();
    let server = ScriptedServer::start([
        // The question shares no word with docs/ops.md; the rewrite does.
        Reply::tool_call(
            "c1",
            "knowledge_search",
            r#"{"query":"how do I undo a bad deploy?"}"#,
        ),
        Reply::text("rollback previous release"),
        Reply::text("run make rollback"),
    ])
    .await
    .unwrap();
    let out = output(run_rewriting(&server, dir.path()), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(text(&out.stdout), "run make rollback\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // The rewrite: the run's model, asked the tool's question alone, offered no tools.
    let rewrite = requests[1].messages();
    assert_eq!(rewrite.len(), 2, "{rewrite:?}");
    assert_eq!(rewrite[1]["content"], "how do I undo a bad deploy?");
    assert!(requests[1].tool_names().is_empty());
    let results = tool_contents(&requests[2]);
    assert!(
        results[0].contains("Searched for: \"rollback previous release\""),
        "{results:?}"
    );
    assert!(results[0].contains("docs/ops.md:3-5"), "{results:?}");
}

#[tokio::test]
async fn a_failed_knowledge_rewrite_searches_the_question_and_says_so() {
    let dir = docs_project();
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "knowledge_search", r#"{"query":"rollback"}"#),
        Reply::status(400, "no such model"),
        Reply::text("run make rollback"),
    ])
    .await
    .unwrap();
    let out = output(run_rewriting(&server, dir.path()), "").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    let results = tool_contents(&server.requests()[2]);
    assert!(
        results[0].contains("Query rewriting failed (the model failed: ")
            && results[0].contains("searched for the question as asked."),
        "{results:?}"
    );
    assert!(results[0].contains("docs/ops.md:3-5"), "{results:?}");
}

#[test]
fn serve_knowledge_rewrite_without_a_model_is_a_usage_error() {
    let dir = docs_project();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir.path())
        .args(["serve", "--knowledge", "docs", "--knowledge-rewrite"])
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("TOOLBELT_MODEL")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(
        stderr.contains("--knowledge-rewrite on serve asks the model the environment configures"),
        "{stderr}"
    );
    assert!(!dir.path().join(".toolbelt/knowledge.db").exists());
}
