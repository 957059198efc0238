//! The MCP broker's basic flow: a model that sees four tools discovers a server, its tools,
//! one tool's schema, and calls it: `mcp_list_servers` → `mcp_list_tools` →
//! `mcp_inspect_tools` → `mcp_call`.
//!
//! The server is the MCP reference server `@modelcontextprotocol/server-everything`, run
//! over stdio by Node. Install it with `cd tests/peers && npm ci` (or point
//! `TOOLBELT_EVERYTHING_JS` at its `dist/index.js`).
//!
//! Run: `cargo run --example mcp_broker`

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolbelt::mcp::broker::McpBroker;
use toolbelt::mcp::{ConnectionConfig, TransportConfig};
use toolbelt::{DynTool, ToolContext, ToolSet};

/// Where server-everything's entry point is, if it is installed.
fn everything_entry() -> Option<PathBuf> {
    let entry = match std::env::var_os("TOOLBELT_EVERYTHING_JS") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        ),
    };
    entry.is_file().then_some(entry)
}

fn node_works() -> bool {
    Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Calls one broker tool the way an agent would (arguments as JSON text) and prints what
/// the model would see.
async fn model_calls(
    tools: &[DynTool],
    name: &str,
    args: Value,
) -> Result<Value, Box<dyn std::error::Error>> {
    let tool = tools
        .iter()
        .find(|t| t.name() == name)
        .ok_or_else(|| format!("the broker has no tool {name}"))?;
    println!("\n> {name} {args}");
    let out = tool
        .call(ToolContext::for_call(name), &args.to_string())
        .await?;
    let text = out.llm_text();
    let shown: String = text.chars().take(600).collect();
    println!(
        "< {shown}{}",
        if text.len() > shown.len() { " …" } else { "" }
    );
    Ok(out.structured.unwrap_or(Value::Null))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(entry) = everything_entry() else {
        return Err(
            "server-everything is not installed; run `cd tests/peers && npm ci` (or \
                    set TOOLBELT_EVERYTHING_JS) and try again"
                .into(),
        );
    };
    if !node_works() {
        return Err("`node` is not on PATH; install Node.js to run this example".into());
    }

    let broker = McpBroker::builder()
        .server(
            "local_everything",
            ConnectionConfig::new(TransportConfig::stdio(
                "node",
                [entry.display().to_string(), "stdio".to_string()],
            ))
            .with_timeout(Duration::from_secs(20))
            .with_description("The MCP reference server: echo, sums, images, structured weather."),
        )
        .build()?;

    // What the model is given: four small declarations instead of every remote tool.
    let tools = broker.tools(&ToolContext::new()).await?;
    println!("The model sees {} tools:", tools.len());
    for tool in &tools {
        println!("  - {}: {}", tool.name(), tool.declaration().description);
    }

    let result = async {
        let servers = model_calls(&tools, "mcp_list_servers", json!({})).await?;
        let server = servers["servers"][0]["name"]
            .as_str()
            .ok_or("no server listed")?
            .to_string();

        let listing = model_calls(&tools, "mcp_list_tools", json!({"selector": server})).await?;
        let sum = listing["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == "get-sum"))
            .ok_or("get-sum is not listed")?;
        let selector = sum["selector"].as_str().ok_or("no selector")?.to_string();

        model_calls(
            &tools,
            "mcp_inspect_tools",
            json!({"selector": server, "tools": ["get-sum"]}),
        )
        .await?;

        model_calls(
            &tools,
            "mcp_call",
            json!({"selector": selector, "arguments": {"a": 19, "b": 23}}),
        )
        .await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    }
    .await;

    // Whoever creates the broker closes it: this ends the server process.
    broker.close().await?;
    result
}
