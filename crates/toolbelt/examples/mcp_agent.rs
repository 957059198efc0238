//! An agent with an MCP tool set whose HTTP headers are chosen per run: the server wants the
//! signed-in user's token, and the application (not the model) puts it on every request, from
//! the run's state (the spec's per-request header example).
//!
//! Both ends run here on 127.0.0.1: an MCP server over streamable HTTP that serves one tool
//! and requires `Authorization: Bearer alice-token`, and a scripted OpenAI-compatible server
//! as the model, so the example runs offline. A run as alice gets the order's status; a run
//! with another token is refused by the server, and the model is told.
//!
//! Run: `cargo run -p toolbelt --example mcp_agent --features agent,mcp-server`

use std::error::Error;
use std::sync::Arc;

use futures::FutureExt;
use toolbelt::agent::{Event, EventKind, Invocation, LlmAgent, RunOptions, Runner};
use toolbelt::exec::{Executor, Registry};
use toolbelt::mcp::server::{CancellationToken, HttpServeOptions, HttpServer, ToolServer};
use toolbelt::mcp::{ConnectionConfig, McpToolSet, TransportConfig};
use toolbelt::model::testing::{Reply, ScriptedServer};
use toolbelt::model::{OpenAiConfig, OpenAiModel};
use toolbelt::{FunctionTool, ToolContext, ToolError, ToolSet};

/// Arguments of `order_status`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Order {
    /// The order's id, like `A-17`.
    id: String,
}

async fn order_status(_ctx: ToolContext, order: Order) -> Result<String, ToolError> {
    Ok(format!("order {} shipped on Monday", order.id))
}

/// The MCP server of the shop: `order_status`, for holders of alice's token only.
async fn shop_server(stop: CancellationToken) -> Result<String, Box<dyn Error>> {
    let registry = Arc::new(Registry::new());
    registry.register(FunctionTool::new(
        "order_status",
        "Tells where an order is",
        order_status,
    )?)?;
    let server = ToolServer::new(Arc::new(Executor::new(registry)));
    let options = HttpServeOptions {
        token: Some("alice-token".into()),
        ..Default::default()
    };
    let http = HttpServer::bind("127.0.0.1:0".parse()?, server, options).await?;
    let url = format!("{}/mcp", http.url()?);
    tokio::spawn(http.run(stop));
    Ok(url)
}

/// The tool results of a run's events.
fn results(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolResult { result } => Some(result.content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let stop = CancellationToken::new();
    let url = shop_server(stop.clone()).await?;
    let model = ScriptedServer::start([
        Reply::tool_call("call_1", "order_status", r#"{"id":"A-17"}"#),
        Reply::text("Your order A-17 shipped on Monday."),
        Reply::tool_call("call_2", "order_status", r#"{"id":"A-17"}"#),
        Reply::text("I may not look at that order."),
    ])
    .await?;

    // The header comes from the run's state, read in each request's context: the model
    // never sees the token, and each user's runs carry their own.
    let shop = McpToolSet::builder(
        "shop",
        ConnectionConfig::new(TransportConfig::streamable_http(url)),
    )
    .header_injector(|ctx: &ToolContext| {
        let token = Invocation::from_context(ctx)
            .and_then(|inv| inv.runtime_state().get("user_token"))
            .and_then(|token| token.as_str())
            .map(|token| format!("Bearer {token}"));
        async move {
            Ok(token
                .map(|t| ("Authorization".to_string(), t))
                .into_iter()
                .collect())
        }
        .boxed()
    })
    .build()?;
    let agent = LlmAgent::builder("assistant")
        .model(OpenAiModel::new(OpenAiConfig::new(
            model.base_url(),
            "scripted",
        ))?)
        .tool_set(Arc::new(shop.clone()))
        .build()?;
    let runner = Runner::new("shop", Arc::new(agent));

    let as_alice = RunOptions::new().state("user_token", "alice-token".into());
    let events = runner
        .run("alice", "s1", "Where is my order A-17?", as_alice)
        .collect_all()
        .await;
    let alice = results(&events);
    println!("as alice, the tool said: {alice:?}");
    if alice != ["order A-17 shipped on Monday"] {
        return Err("alice's run did not get the order's status".into());
    }

    let as_mallory = RunOptions::new().state("user_token", "guessed".into());
    let events = runner
        .run("mallory", "s2", "Where is order A-17?", as_mallory)
        .collect_all()
        .await;
    let mallory = results(&events);
    println!("with another token, the tool said: {mallory:?}");
    if mallory.len() != 1 || mallory[0].contains("shipped") {
        return Err("a wrong token reached the order".into());
    }

    shop.close().await?;
    stop.cancel();
    Ok(())
}
