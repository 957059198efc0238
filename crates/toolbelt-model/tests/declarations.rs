//! Schemas that are hard to translate (`$ref` and `$defs`, recursion, `allOf`, `type`
//! arrays, `patternProperties`, `oneOf` and `const`, a root `oneOf`) shaped for each dialect, checked by
//! the providers' own Python packages (tests/peers/check_declarations.py: google-genai's
//! `FunctionDeclaration`, the OpenAI SDK's strict-schema pass).
//!
//! Needs the venv tests/peers/.venv with `google-genai` and `openai`; fails loudly without.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use toolbelt_core::Declaration;
use toolbelt_model::{ToolDialect, strip_added_nulls, wire_tools};

const INSTALL_HINT: &str =
    "run `bash .ci/install-peers` (the venv tests/peers/.venv with tests/peers/requirements.txt)";

fn hard_declarations() -> Vec<Declaration> {
    let schemas = [
        (
            "refs",
            json!({"type": "object", "$defs": {"Point": {"type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"]}},
            "properties": {"from": {"$ref": "#/$defs/Point"}, "to": {"$ref": "#/$defs/Point"}},
            "required": ["from"]}),
        ),
        (
            "tree",
            json!({"type": "object", "$defs": {"Node": {"type": "object",
            "properties": {"label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["label"]}},
            "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"]}),
        ),
        (
            "merged",
            json!({"type": "object", "allOf": [
            {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer", "minimum": 0}}}]}),
        ),
        (
            "arrays",
            json!({"type": "object", "properties": {
            "id": {"type": ["string", "integer"]},
            "note": {"type": ["string", "null"], "maxLength": 80}}}),
        ),
        (
            "env",
            json!({"type": "object", "properties": {"vars": {"type": "object",
            "patternProperties": {"^[A-Z_]+$": {"type": "string"}},
            "additionalProperties": false}}}),
        ),
        (
            "mode",
            json!({"type": "object", "properties": {
            "mode": {"oneOf": [{"const": "text"}, {"const": "bytes"}]},
            "format": {"type": "string", "format": "uri", "pattern": "^https://"}}}),
        ),
        ("weird.name-1", json!({"type": "object", "properties": {}})),
        (
            "either",
            json!({"type": "object", "properties": {"limit": {"type": "integer"}},
            "oneOf": [
                {"properties": {"path": {"type": "string"}}, "required": ["path"]},
                {"properties": {"url": {"type": "string", "format": "uri"}}, "required": ["url"]}]}),
        ),
    ];
    schemas
        .into_iter()
        .map(|(name, schema)| {
            Declaration::new(name, "A hard schema")
                .unwrap()
                .with_input_schema(schema)
                .unwrap()
        })
        .collect()
}

#[test]
fn hard_schemas_pass_the_providers_own_packages_in_every_dialect() {
    let declarations = hard_declarations();
    let mut dialects = serde_json::Map::new();
    for dialect in [
        ToolDialect::Gemini,
        ToolDialect::OpenAiStrict,
        ToolDialect::OpenAiResponses,
    ] {
        let wire = wire_tools(dialect, &declarations);
        assert_eq!(wire.tools.len(), declarations.len(), "none left out");
        dialects.insert(dialect.as_str().into(), Value::Array(wire.tools));
    }
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers");
    let python = peers.join(".venv/bin/python");
    assert!(python.exists(), "no {}; {INSTALL_HINT}", python.display());
    let file =
        std::env::temp_dir().join(format!("toolbelt-declarations-{}.json", std::process::id()));
    std::fs::write(&file, Value::Object(dialects).to_string()).unwrap();
    let out = Command::new(python)
        .arg(peers.join("check_declarations.py"))
        .arg(&file)
        .output()
        .expect("run python");
    let _ = std::fs::remove_file(&file);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !report.contains("ModuleNotFoundError"),
        "{report}\n{INSTALL_HINT}"
    );
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("checked 24 declarations, 0 failures"),
        "{report}"
    );
}

#[test]
fn what_a_schema_cannot_say_is_stated_in_the_description() {
    let wire = wire_tools(ToolDialect::Gemini, &hard_declarations());
    let env = wire.tools.iter().find(|t| t["name"] == "env").unwrap();
    assert!(env.to_string().contains("^[A-Z_]+$"), "{env}");
    let strict = wire_tools(ToolDialect::OpenAiStrict, &hard_declarations());
    let mode = strict
        .tools
        .iter()
        .find(|t| t["function"]["name"] == "mode")
        .unwrap();
    assert!(
        mode["function"]["description"]
            .as_str()
            .unwrap()
            .contains("uri"),
        "{mode}"
    );
    assert_eq!(strict.original("weird_name-1"), "weird.name-1");
}

#[test]
fn a_root_one_of_becomes_one_object_with_its_alternatives_stated() {
    for dialect in [
        ToolDialect::OpenAiStrict,
        ToolDialect::Anthropic,
        ToolDialect::Gemini,
    ] {
        let wire = wire_tools(dialect, &hard_declarations());
        let either = wire
            .tools
            .iter()
            .find(|t| t["name"] == "either" || t["function"]["name"] == "either")
            .unwrap();
        let text = either.to_string();
        assert!(!text.contains("oneOf"), "{dialect:?}: {text}");
        assert!(
            text.contains("exactly one of these sets: (path) or (url)"),
            "{dialect:?}: {text}"
        );
        for property in ["path", "url", "limit"] {
            assert!(
                text.contains(&format!("\"{property}\"")),
                "{dialect:?}: {text}"
            );
        }
    }
}

#[test]
fn a_tool_whose_arguments_cannot_be_one_object_is_left_out_with_a_warning() {
    let declarations = vec![
        Declaration::new("fs.read", "Reads").unwrap(),
        Declaration::new("word", "Takes one string")
            .unwrap()
            .with_input_schema(json!({"type": "string"}))
            .unwrap(),
        Declaration::new("mixed", "An object or a list")
            .unwrap()
            .with_input_schema(json!({"anyOf": [{"type": "object"}, {"type": "array"}]}))
            .unwrap(),
    ];
    for dialect in [
        ToolDialect::OpenAiStrict,
        ToolDialect::OpenAiResponses,
        ToolDialect::Anthropic,
        ToolDialect::Gemini,
    ] {
        let wire = wire_tools(dialect, &declarations);
        assert_eq!(wire.tools.len(), 1, "{dialect:?}: only fs.read goes out");
        let left_out: Vec<_> = wire
            .warnings
            .iter()
            .filter(|w| w.contains("is left out"))
            .collect();
        assert_eq!(left_out.len(), 2, "{dialect:?}: {:?}", wire.warnings);
        assert!(
            left_out[0].starts_with("tool word is left out"),
            "{left_out:?}"
        );
        assert!(left_out[0].contains("not one object"), "{left_out:?}");
        let renamed = wire.warnings.iter().find(|w| w.contains("is sent to"));
        match dialect {
            // Gemini allows a `.` in a name.
            ToolDialect::Gemini => assert!(renamed.is_none(), "{:?}", wire.warnings),
            _ => assert!(
                renamed.is_some_and(|w| w.contains("fs.read") && w.contains("fs_read")),
                "{dialect:?}: {:?}",
                wire.warnings
            ),
        }
    }
}

#[test]
fn strict_nulls_come_back_out_of_the_arguments() {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"},
        "limit": {"type": "integer"}}, "required": ["path"]});
    assert_eq!(
        strip_added_nulls(r#"{"path":"a","limit":null}"#, &schema),
        r#"{"path":"a"}"#
    );
}
