//! The MCP config and result cache extensions on a real agent: an `mcpServers` file's server
//! becomes a tool set the model calls; Read's second identical call is answered from the
//! cache.

use crate::ext_support;

use std::sync::Arc;

use toolbelt_agent::{
    EventKind, Extension, ExtensionError, Extensions, LlmAgent, RunOptions, Runner,
};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_exec::ResultCache;
use toolbelt_ext::{CacheExtension, McpExtension};
use toolbelt_model::testing::{Reply, ScriptedServer};

fn tool_results(events: &[toolbelt_agent::Event]) -> Vec<toolbelt_agent::ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { result } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_servers_file_becomes_tool_sets_the_model_calls() {
    let server = ext_support::PyServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"weather": {"url": server.url()}}}).to_string(),
    )
    .unwrap();
    let model = ScriptedServer::start([
        Reply::tool_call("call_1", "forecast", r#"{"city":"Bergen"}"#),
        Reply::text("Sunny."),
    ])
    .await
    .unwrap();
    let extensions =
        Extensions::init([Arc::new(McpExtension::load(&config).unwrap()) as Arc<dyn Extension>])
            .await
            .unwrap();
    let agent = LlmAgent::builder("assistant")
        .model(ext_support::model(model.base_url()))
        .with_extensions(&extensions)
        .build()
        .unwrap();
    let events = Runner::new("app", Arc::new(agent))
        .run("u", "s", "weather in Bergen?", RunOptions::new())
        .collect_all()
        .await;
    extensions.close().await.unwrap();
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert!(!results[0].is_error, "{}", results[0].content);
    assert_eq!(results[0].content, "sunny in Bergen");
    assert!(
        model.requests()[0]
            .tool_names()
            .contains(&"forecast".to_string())
    );
}

#[tokio::test]
async fn an_unusable_mcp_entry_fails_init_naming_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(&config, r#"{"mcpServers": {"broken": {"args": ["x"]}}}"#).unwrap();
    let error =
        Extensions::init([Arc::new(McpExtension::load(&config).unwrap()) as Arc<dyn Extension>])
            .await
            .unwrap_err();
    assert!(matches!(&error, ExtensionError::Init { name, .. } if name == "mcp"));
    assert!(error.to_string().contains("broken"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cache_extension_answers_a_repeated_read_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\n").unwrap();
    let read = r#"{"file_path":"notes.txt"}"#;
    let model = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", read),
        Reply::tool_call("call_2", "Read", read),
        Reply::text("alpha"),
    ])
    .await
    .unwrap();
    let cache = ResultCache::new();
    let extensions =
        Extensions::init([Arc::new(CacheExtension::new(cache.clone())) as Arc<dyn Extension>])
            .await
            .unwrap();
    let builtin =
        BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_read_only(true)).unwrap();
    let agent = LlmAgent::builder("assistant")
        .model(ext_support::model(model.base_url()))
        .tool_set(Arc::new(builtin))
        .with_extensions(&extensions)
        .build()
        .unwrap();
    let events = Runner::new("app", Arc::new(agent))
        .run("u", "s", "read twice", RunOptions::new())
        .collect_all()
        .await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].content, results[1].content);
    assert!(results[0].content.contains("alpha"));
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits), (1, 1), "{stats:?}");
}
