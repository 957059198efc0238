//! A measurement, not a check: how many bytes of tool declarations a model is sent with the
//! broker's four tools, against every tool of the same servers exposed directly.
//!
//! Declarations are measured in the shape an OpenAI-compatible request carries them
//! (`{"type":"function","function":{"name","description","parameters"}}`, compact JSON, the
//! same shape `toolbelt-model` sends); tokens are estimated as bytes / 4. It also prints what
//! the broker's discovery costs when the model uses it: the `mcp_list_tools` result of each
//! server and the `mcp_inspect_tools` result for one tool.
//!
//! Rerun: `cargo test -p toolbelt-mcp --test mcp broker_declaration_size:: -- --ignored --nocapture`

use crate::broker_support;
use crate::common;

use serde_json::{Value, json};
use toolbelt_core::{Declaration, ToolContext, ToolSet};
use toolbelt_mcp::broker::McpBroker;
use toolbelt_mcp::{ConnectionConfig, McpToolSet, TransportConfig};

use broker_support::{echo_server, inspect, list};
use common::everything_stdio;

/// The bytes of `declarations` as a chat request's `tools` array.
fn declaration_bytes(declarations: &[Declaration]) -> usize {
    let tools: Vec<Value> = declarations
        .iter()
        .map(|d| {
            json!({"type": "function", "function": {
                "name": d.name.as_str(),
                "description": d.description,
                "parameters": d.input_schema,
            }})
        })
        .collect();
    serde_json::to_string(&tools).unwrap().len()
}

fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(4)
}

async fn direct_declarations(name: &str, config: ConnectionConfig) -> Vec<Declaration> {
    let set = McpToolSet::new(name, config);
    let tools = set
        .tools(&ToolContext::new())
        .await
        .expect("list the server's tools");
    set.close().await.unwrap();
    tools.iter().map(|t| t.declaration().clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement for BENCHMARKS.md; run with --ignored --nocapture"]
async fn broker_declarations_against_direct_exposure() {
    let server = echo_server("streamable-http");
    let echo_url = format!("http://127.0.0.1:{}/mcp", server.port);
    let servers = [
        ("everything", everything_stdio()),
        (
            "broker_echo",
            ConnectionConfig::new(TransportConfig::streamable_http(&echo_url)),
        ),
    ];

    let mut builder = McpBroker::builder();
    for (name, config) in &servers {
        builder = builder.server(*name, config.clone());
    }
    let broker = builder.build().unwrap();
    let broker_bytes = declaration_bytes(&broker.declarations());
    let ad_hoc_bytes = declaration_bytes(
        &McpBroker::builder()
            .allow_ad_hoc_http(true)
            .build()
            .unwrap()
            .declarations(),
    );

    println!(
        "| server | tools | direct bytes (~tokens) | broker bytes (~tokens) | broker / direct |"
    );
    println!("|---|---|---|---|---|");
    let mut all = Vec::new();
    for (name, config) in &servers {
        let declarations = direct_declarations(name, config.clone()).await;
        let direct = declaration_bytes(&declarations);
        println!(
            "| {name} | {} | {direct} (~{}) | {broker_bytes} (~{}) | {:.1}% |",
            declarations.len(),
            tokens(direct),
            tokens(broker_bytes),
            100.0 * broker_bytes as f64 / direct as f64
        );
        all.extend(declarations);
    }
    let direct = declaration_bytes(&all);
    println!(
        "| both | {} | {direct} (~{}) | {broker_bytes} (~{}) | {:.1}% |",
        all.len(),
        tokens(direct),
        tokens(broker_bytes),
        100.0 * broker_bytes as f64 / direct as f64
    );
    println!(
        "\nbroker declarations with ad-hoc URLs on: {ad_hoc_bytes} bytes (~{})",
        tokens(ad_hoc_bytes)
    );

    println!("\nDiscovery results the model reads when it uses the broker:");
    let ctx = ToolContext::new();
    for (name, one_tool) in [("everything", "get-sum"), ("broker_echo", "header")] {
        let listing = broker.list_tools(&ctx, list(name)).await.unwrap();
        let listing_bytes = serde_json::to_string(&listing).unwrap().len();
        let details = broker
            .inspect_tools(&ctx, inspect(name, &[one_tool]))
            .await
            .unwrap();
        let details_bytes = serde_json::to_string(&details).unwrap().len();
        println!(
            "- {name}: mcp_list_tools {listing_bytes} bytes (~{}), mcp_inspect_tools [{one_tool}] {details_bytes} bytes (~{})",
            tokens(listing_bytes),
            tokens(details_bytes)
        );
    }
    broker.close().await.unwrap();
}
