//! Helpers shared by the file, search and `execute_code` tests: a tool set on a temp
//! directory, ways to call its tools by name, and an executor caching their results.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::{Tool, ToolContext, ToolOutput, ToolSet};
use toolbelt_exec::{CACHE_META_KEY, Executor, Registry, ResultCache, ToolSetRefresh};

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

/// Runs `execute_code` with `args`; fails the test if the tool refuses the call.
pub async fn run_code(set: &BuiltinToolSet, args: Value) -> ToolOutput {
    let tool = set
        .tool_list()
        .iter()
        .find(|t| t.name() == "execute_code")
        .expect("execute_code is offered")
        .clone();
    tool.call(ToolContext::for_call("call_1"), &args.to_string())
        .await
        .expect("execute_code runs")
}

/// An executor over `sets` (each listed once) behind the result cache `cache`.
pub async fn cached_executor(
    sets: impl IntoIterator<Item = BuiltinToolSet>,
    cache: &ResultCache,
) -> Executor {
    let registry = Arc::new(Registry::new());
    for set in sets {
        let name = set.name().to_string();
        let set: Arc<dyn ToolSet> = Arc::new(set);
        registry
            .add_tool_set(set, ToolSetRefresh::Cached)
            .expect("add the set");
        registry
            .refresh_tool_set(&ToolContext::new(), &name)
            .await
            .expect("list the set");
    }
    Executor::builder(registry)
        .middleware(cache.clone())
        .build()
}

/// What the result cache did for `output` (`hit`, `miss`, ...), if it said.
pub fn cache_status(output: &ToolOutput) -> Option<&str> {
    output.meta.as_ref()?.get(CACHE_META_KEY)?.as_str()
}
