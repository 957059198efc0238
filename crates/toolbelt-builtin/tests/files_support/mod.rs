//! Helpers shared by the file and search tool tests: a tool set on a temp directory and a
//! way to call its tools by name.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{Tool, ToolContext, ToolOutput};

/// A tool set confined to `dir`.
pub fn set_on(dir: &Path) -> BuiltinToolSet {
    BuiltinToolSet::new(BuiltinOptions::new(dir)).expect("tool set builds")
}

/// Calls `name` with `args` (a JSON value) and returns its output.
pub async fn call(set: &BuiltinToolSet, name: &str, args: Value) -> ToolOutput {
    let tool = set
        .tool_list()
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .clone();
    tool.call(ToolContext::for_call("test"), &args.to_string())
        .await
        .expect("tool call returns an output")
}

/// Calls `name` and asserts it succeeded.
pub async fn call_ok(set: &BuiltinToolSet, name: &str, args: Value) -> ToolOutput {
    let out = call(set, name, args).await;
    assert!(!out.is_error, "{name} failed: {}", out.llm_text());
    out
}

/// Calls `name` and asserts it failed with a message containing `needle`.
pub async fn call_err(set: &BuiltinToolSet, name: &str, args: Value, needle: &str) -> String {
    let out = call(set, name, args).await;
    assert!(
        out.is_error,
        "{name} should have failed: {}",
        out.llm_text()
    );
    let text = out.llm_text();
    assert!(text.contains(needle), "{text:?} should contain {needle:?}");
    text
}
