//! A skill's MCP endpoint becomes reachable through the broker tools once the skill is
//! loaded, and only the tools its allowed-tools lists (a FastMCP server from the Python SDK
//! over streamable HTTP on 127.0.0.1).

use crate::ext_support;

use toolbelt_agent::Extension;
use toolbelt_core::{DynTool, ToolContext};
use toolbelt_ext::{SkillsConfig, SkillsExtension};

fn tool(extension: &SkillsExtension, name: &str) -> DynTool {
    extension
        .tools()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(tool: &DynTool, args: serde_json::Value) -> toolbelt_core::ToolOutput {
    tool.call(ToolContext::new(), &args.to_string())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loaded_skills_mcp_endpoint_is_called_through_the_broker_within_allowed_tools() {
    let server = ext_support::PyServer::start();
    let skills = tempfile::tempdir().unwrap();
    ext_support::write_skill(
        skills.path(),
        "weather",
        &format!(
            "name: weather\ndescription: Weather forecasts.\nallowed-tools: [weather.forecast]\n\
             mcp:\n  weather:\n    url: {}",
            server.url()
        ),
        "Call weather.forecast with the city.",
    );
    let extension = SkillsExtension::new(SkillsConfig::new().folder(skills.path(), false));
    extension.init().await.unwrap();
    let names: Vec<String> = extension
        .tools()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "skill_load",
            "skill_read",
            "mcp_list_servers",
            "mcp_list_tools",
            "mcp_inspect_tools",
            "mcp_call"
        ]
    );
    let mcp_call = tool(&extension, "mcp_call");
    let forecast =
        serde_json::json!({"selector": "weather.forecast", "arguments": {"city": "Oslo"}});

    // Before the skill is loaded, the broker knows no server.
    let before = call(&mcp_call, forecast.clone()).await;
    assert!(before.is_error);
    assert!(
        before.llm_text().contains("skill_load first"),
        "{}",
        before.llm_text()
    );

    let loaded = call(
        &tool(&extension, "skill_load"),
        serde_json::json!({"name": "weather"}),
    )
    .await;
    assert!(!loaded.is_error, "{}", loaded.llm_text());
    assert!(
        loaded
            .llm_text()
            .contains("MCP servers now reachable with mcp_list_tools and mcp_call: weather")
    );

    let servers = call(&tool(&extension, "mcp_list_servers"), serde_json::json!({})).await;
    assert!(
        servers.llm_text().contains("\"weather\""),
        "{}",
        servers.llm_text()
    );

    let answer = call(&mcp_call, forecast).await;
    assert!(!answer.is_error, "{}", answer.llm_text());
    assert!(
        answer.llm_text().contains("sunny in Oslo"),
        "{}",
        answer.llm_text()
    );

    // A tool of the endpoint that allowed-tools leaves out: not listed, not callable.
    let listing = call(
        &tool(&extension, "mcp_list_tools"),
        serde_json::json!({"selector": "weather"}),
    )
    .await;
    assert!(!listing.is_error, "{}", listing.llm_text());
    assert!(
        listing.llm_text().contains("forecast"),
        "{}",
        listing.llm_text()
    );
    assert!(
        !listing.llm_text().contains("secret"),
        "{}",
        listing.llm_text()
    );
    for selector in ["weather.secret", "weather#tool=secret"] {
        let refused = call(
            &mcp_call,
            serde_json::json!({"selector": selector, "arguments": {}}),
        )
        .await;
        assert!(refused.is_error, "{selector}");
        assert!(
            refused
                .llm_text()
                .contains("not in skill weather's allowed-tools"),
            "{}",
            refused.llm_text()
        );
        assert!(!refused.llm_text().contains("you should not see this"));
    }
    let inspect = call(
        &tool(&extension, "mcp_inspect_tools"),
        serde_json::json!({"selector": "weather", "tools": ["forecast", "secret"]}),
    )
    .await;
    assert!(inspect.is_error, "{}", inspect.llm_text());

    // An ad-hoc URL is not reachable: only the skills' endpoints are.
    let ad_hoc = call(&mcp_call, serde_json::json!({"selector": format!("{}.forecast", server.url()), "arguments": {"city": "x"}})).await;
    assert!(ad_hoc.is_error, "{}", ad_hoc.llm_text());
    extension.close().await.unwrap();
}
