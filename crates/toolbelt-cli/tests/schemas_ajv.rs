//! Every built-in tool's schema, as `toolbelt tools list --json` declares it, compiles under
//! Ajv in strict mode (the validator of the TypeScript MCP SDK and the inspector) with only the
//! standard formats known, and accepts an example call; optional properties carry no `null`
//! union (the inspector coerces arguments by type and cannot coerce to a union).
//!
//! Needs node and the npm peers (`bash .ci/install-peers`); fails loudly without them.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const INSTALL_HINT: &str =
    "run `bash .ci/install-peers` (node and the npm packages in tests/peers, ajv among them)";

fn peers() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers")
}

/// The declarations of the built-in tools, as a client sees them.
fn declarations() -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir.path())
        .args(["tools", "list", "--json"])
        .output()
        .expect("run toolbelt");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: Value = serde_json::from_slice(&out.stdout).expect("the listing is JSON");
    listing.as_array().expect("a list of tools").clone()
}

/// Runs `tests/peers/ajv_strict.mjs` on `tools` and `examples`: its exit code and report.
fn ajv_strict(tools: &[Value], examples: &Value) -> (Option<i32>, String) {
    let script = peers().join("ajv_strict.mjs");
    let ajv = peers().join("node_modules/ajv/package.json");
    let formats = peers().join("node_modules/ajv-formats/package.json");
    assert!(
        ajv.exists() && formats.exists(),
        "the npm peers ajv and ajv-formats are missing; {INSTALL_HINT}"
    );
    let mut child = Command::new("node")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run node ({err}); {INSTALL_HINT}"));
    let input = json!({"tools": tools, "examples": examples}).to_string();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("wait for node");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), report)
}

/// One realistic call per built-in tool, using optional numeric and enum arguments where the
/// tool has them (the ones a null union or a non-standard format used to spoil).
fn examples() -> Value {
    json!({
        "Bash": {"command": "ls -l", "description": "List files", "timeout": 5000,
                 "run_in_background": false},
        "Edit": {"file_path": "notes.txt", "old_string": "alpha", "new_string": "gamma",
                 "replace_all": true},
        "Glob": {"pattern": "**/*.rs", "path": "src"},
        "Grep": {"pattern": "fn \\w+", "path": "src", "glob": "*.rs", "output_mode": "content",
                 "-A": 2, "-B": 1, "-C": 0, "-i": true, "-n": true, "head_limit": 50,
                 "offset": 10, "multiline": false, "type": "rust", "context": 3},
        "NotebookEdit": {"notebook_path": "a.ipynb", "cell_id": "1", "cell_type": "markdown",
                         "edit_mode": "insert", "new_source": "# Title"},
        "Read": {"file_path": "notes.txt", "offset": 2, "limit": 10},
        "execute_code": {"language": "python", "code": "print(1)", "timeout": 5000,
                         "session": true, "restart": false},
        "TaskOutput": {"task_id": "task-1", "block": true, "timeout": 1000},
        "TaskStop": {"task_id": "task-1"},
        "TodoWrite": {"todos": [{"content": "Run the tests", "status": "in_progress",
                                 "activeForm": "Running the tests"}]},
        "apply_patch": {"input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"},
        "exec_command": {"cmd": "python3 -i", "workdir": "src", "yield_time_ms": 1000,
                         "max_output_tokens": 2000},
        "write_stdin": {"session_id": 1, "chars": "print(1)\n", "yield_time_ms": 250,
                        "max_output_tokens": 2000, "close": false},
        "WebFetch": {"url": "https://example.com/", "prompt": "What is this page about?"},
        "WebSearch": {"query": "rust json schema", "allowed_domains": ["docs.rs"]},
        "Write": {"file_path": "out.txt", "content": "hello\n"},
        "duckduckgo_search": {"query": "rust json schema"}
    })
}

#[test]
fn every_built_in_schema_compiles_under_ajv_strict_and_accepts_an_example() {
    let tools = declarations();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for core in [
        "Bash",
        "Edit",
        "Glob",
        "Grep",
        "NotebookEdit",
        "Read",
        "Write",
    ] {
        assert!(names.contains(&core), "{core} missing from {names:?}");
    }
    let (code, report) = ajv_strict(&tools, &examples());
    assert_eq!(
        code,
        Some(0),
        "Ajv strict refused a schema or an example:\n{report}"
    );
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok ")).count(),
        tools.len(),
        "{report}"
    );
}

#[test]
fn the_checker_refuses_a_non_standard_format_and_a_wrong_argument_type() {
    // The harness itself must be able to fail: schemas as they were before (format "uint"),
    // and an example a coercing client would have sent as a string.
    let tools = vec![
        json!({"name": "Old", "input_schema": {"type": "object", "properties": {
            "limit": {"type": ["integer", "null"], "format": "uint", "minimum": 0}}}}),
        json!({"name": "Typed", "input_schema": {"type": "object", "properties": {
            "offset": {"type": "integer", "minimum": 0}}}}),
    ];
    let examples = json!({"Old": {}, "Typed": {"offset": "2"}});
    let (code, report) = ajv_strict(&tools, &examples);
    assert_eq!(code, Some(1), "{report}");
    assert!(
        report.contains("FAIL Old") && report.contains("unknown format \"uint\""),
        "{report}"
    );
    assert!(
        report.contains("FAIL Typed") && report.contains("example rejected"),
        "{report}"
    );
}

#[test]
fn optional_properties_are_typed_without_a_null_union() {
    for tool in declarations() {
        let name = tool["name"].as_str().unwrap_or_default().to_owned();
        for schema in [&tool["input_schema"], &tool["output_schema"]] {
            let required: Vec<&Value> = schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .collect();
            let Some(properties) = schema["properties"].as_object() else {
                continue;
            };
            for (property, sub) in properties {
                if required.contains(&&Value::String(property.clone())) {
                    continue;
                }
                let types = match &sub["type"] {
                    Value::Array(types) => types.clone(),
                    other => vec![other.clone()],
                };
                let null_branch = sub["anyOf"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .chain(sub["oneOf"].as_array().into_iter().flatten())
                    .any(|branch| branch["type"] == "null");
                assert!(
                    !types.contains(&json!("null"))
                        && !null_branch
                        && sub.get("default") != Some(&Value::Null),
                    "{name}.{property} is optional yet typed with null: {sub}"
                );
            }
        }
    }
}

#[test]
fn an_explicit_null_for_an_optional_property_still_means_not_given() {
    // The schemas no longer say `null`, but models send it: the executor's validation and the
    // tool's decoding both take it as "not given".
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    for (tool, args, expected) in [
        (
            "Read",
            r#"{"file_path": "notes.txt", "offset": null, "limit": null}"#,
            "alpha",
        ),
        (
            "Grep",
            r#"{"pattern": "beta", "output_mode": null, "-A": null, "head_limit": null}"#,
            "notes.txt",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
            .current_dir(dir.path())
            .args(["tools", "call", tool, args])
            .output()
            .expect("run toolbelt");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{tool} {args}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(expected), "{tool} {args}: {stdout}");
    }
    // A null where a value is required is still refused, with the property named.
    let out = Command::new(env!("CARGO_BIN_EXE_toolbelt"))
        .current_dir(dir.path())
        .args(["tools", "call", "Read", r#"{"file_path": null}"#])
        .output()
        .expect("run toolbelt");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("file_path"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
