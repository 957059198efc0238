//! `toolbelt tools list --json --dialect …` prints the `tools` array each provider's request
//! carries, and every built-in tool's declaration passes the providers' own Python packages:
//! google-genai's `FunctionDeclaration` (it forbids fields outside Gemini's schema subset) and
//! the OpenAI SDK's strict-schema pass (it must find nothing to add).
//!
//! Needs the venv tests/peers/.venv with `google-genai` and `openai`; fails loudly without.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

const INSTALL_HINT: &str =
    "run `bash .ci/install-peers` (the venv tests/peers/.venv with tests/peers/requirements.txt)";

fn peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers")
}

fn listing(dialect: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir.path())
        .args(["tools", "list", "--json", "--dialect", dialect])
        .output()
        .expect("run toolbelt");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the listing is JSON")
}

/// Runs tests/peers/check_declarations.py on `{dialect: [tool, …]}`: exit code and report.
fn check(dialects: &Value) -> (Option<i32>, String) {
    let python = peers().join(".venv/bin/python");
    assert!(python.exists(), "no {}; {INSTALL_HINT}", python.display());
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), dialects.to_string()).unwrap();
    let out = Command::new(python)
        .arg(peers().join("check_declarations.py"))
        .arg(file.path())
        .output()
        .expect("run python");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !report.contains("ModuleNotFoundError"),
        "{report}\n{INSTALL_HINT}"
    );
    (out.status.code(), report)
}

#[test]
fn each_dialect_lists_the_tools_in_its_requests_shape() {
    let chat = listing("openai");
    let read = chat
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "Read")
        .expect("Read in the chat completions listing");
    assert_eq!(read["type"], "function");
    assert!(read["function"]["parameters"]["properties"]["file_path"].is_object());
    let strict = listing("openai-strict");
    assert!(
        strict
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["function"]["strict"] == true)
    );
    let responses = listing("openai-responses");
    for tool in responses.as_array().unwrap() {
        if tool["name"] == "apply_patch" {
            // Freeform: the model writes the patch itself, in the patch grammar.
            assert_eq!(tool["type"], "custom", "{tool}");
            assert_eq!(tool["format"]["syntax"], "lark", "{tool}");
        } else {
            assert!(tool["name"].is_string() && tool["strict"] == true, "{tool}");
        }
    }
    let anthropic = listing("anthropic");
    assert!(
        anthropic
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["input_schema"]["type"] == "object")
    );
    let gemini = listing("gemini");
    assert_eq!(gemini.as_array().unwrap().len(), 1, "{gemini}");
    assert!(gemini[0]["functionDeclarations"].as_array().unwrap().len() >= 7);
    // An unknown dialect is refused with the names that exist.
    let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .args(["tools", "list", "--json", "--dialect", "cohere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("openai-strict"));
}

#[test]
fn every_built_in_declaration_passes_the_providers_own_packages() {
    let gemini = listing("gemini")[0]["functionDeclarations"].clone();
    let dialects = json!({
        "gemini": gemini,
        "openai-strict": listing("openai-strict"),
        "openai-responses": listing("openai-responses"),
    });
    let (code, report) = check(&dialects);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains(", 0 failures"), "{report}");
}

#[test]
fn the_checker_refuses_what_the_providers_refuse() {
    // The harness must be able to fail: declarations as they went out before shaping.
    let raw = json!({"type": "object", "properties": {
        "mode": {"const": "text"}, "limit": {"type": "integer"}}, "required": []});
    let dialects = json!({
        "gemini": [{"name": "t", "description": "d", "parameters": raw}],
        "openai-strict": [{"type": "function", "function": {"name": "t", "parameters": raw,
            "strict": true}}],
    });
    let (code, report) = check(&dialects);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("gemini t:"), "{report}");
    assert!(report.contains("openai-strict t:"), "{report}");
    // A custom tool in the Chat Completions shape, or with a grammar of no known syntax.
    let dialects = json!({"openai-responses": [
        {"type": "custom", "custom": {"name": "p"}, "name": "p"},
        {"type": "custom", "name": "q", "format": {"type": "grammar", "syntax": "ebnf",
            "definition": "start: x"}},
    ]});
    let (code, report) = check(&dialects);
    assert_eq!(code, Some(1), "{report}");
    assert!(
        report.contains("openai-responses p: unknown key custom"),
        "{report}"
    );
    assert!(report.contains("openai-responses q:"), "{report}");
}
