//! `toolbelt tools list --json --dialect …` prints the `tools` array each provider's request
//! carries, and every built-in tool's declaration passes the providers' own Python packages:
//! google-genai's `FunctionDeclaration` (it forbids fields outside Gemini's schema subset) and
//! the OpenAI SDK's strict-schema pass (it must find nothing to add); Anthropic's by the rules
//! its API enforces. So do the tools of two real MCP servers, `server-everything` from npm
//! and the Python SDK fixture server, shaped by the same code on their way to a model.
//!
//! Needs the venv tests/peers/.venv with `google-genai` and `openai`, and the npm peers;
//! fails loudly without.

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
    listing_with(dialect, dir.path(), &[]).0
}

/// `toolbelt tools list --json [--dialect D] EXTRA…` in `dir`: the JSON and the stderr.
fn listing_with(dialect: &str, dir: &std::path::Path, extra: &[&str]) -> (Value, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolbelt"));
    command.current_dir(dir).args(["tools", "list", "--json"]);
    if !dialect.is_empty() {
        command.args(["--dialect", dialect]);
    }
    let out = command.args(extra).output().expect("run toolbelt");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json = serde_json::from_slice(&out.stdout).expect("the listing is JSON");
    (json, stderr)
}

/// An `mcpServers` file in `dir` with server-everything (stdio) and the Python SDK fixture
/// server.
fn real_servers(dir: &std::path::Path) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let everything =
        root.join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.is_file(),
        "no {}; install it with `cd tests/peers && npm ci`",
        everything.display()
    );
    let fixture = root.join("crates/toolbelt-mcp/tests/fixtures/py_server.py");
    let config = json!({"mcpServers": {
        "everything": {"command": "node", "args": [everything, "stdio"]},
        "py": {"command": toolbelt_testkit::python(), "args": [fixture, "stdio"]},
    }});
    let path = dir.join("mcp.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path.display().to_string()
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
        "anthropic": listing("anthropic"),
    });
    let (code, report) = check(&dialects);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains(", 0 failures"), "{report}");
}

#[test]
fn the_tools_of_real_mcp_servers_pass_in_every_dialect() {
    let dir = tempfile::tempdir().unwrap();
    let config = real_servers(dir.path());
    let extra = ["--mcp-config", config.as_str()];
    let (plain, _) = listing_with("", dir.path(), &extra);
    let names: Vec<&str> = plain
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in ["echo", "weather"] {
        assert!(
            names.iter().any(|n| n.ends_with(tool)),
            "{tool} from the servers: {names:?}"
        );
    }
    let mut dialects = serde_json::Map::new();
    for dialect in ["gemini", "openai-strict", "openai-responses", "anthropic"] {
        let (mut tools, stderr) = listing_with(dialect, dir.path(), &extra);
        if dialect == "gemini" {
            tools = tools[0]["functionDeclarations"].take();
        }
        assert!(!stderr.contains("left out"), "{dialect}: {stderr}");
        assert_eq!(
            tools.as_array().unwrap().len(),
            names.len(),
            "{dialect}: every tool goes out"
        );
        dialects.insert(dialect.into(), tools);
    }
    let (code, report) = check(&Value::Object(dialects));
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report.contains(&format!(
            "checked {} declarations, 0 failures",
            names.len() * 4
        )),
        "{report}"
    );
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
    // Anthropic: a dotted name, and alternatives at the top level of input_schema.
    let dialects = json!({"anthropic": [
        {"name": "fs.read", "input_schema": {"type": "object"}},
        {"name": "either", "input_schema": {"type": "object",
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}},
    ]});
    let (code, report) = check(&dialects);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("anthropic fs.read: name"), "{report}");
    assert!(
        report.contains("anthropic either: input_schema has oneOf"),
        "{report}"
    );
}
