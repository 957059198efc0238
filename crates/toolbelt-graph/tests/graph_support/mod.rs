//! Helpers of the graph tests: a chat state, a model on the scripted server, runs to the end.
#![allow(dead_code)]

use std::sync::Arc;

use toolbelt_agent::session::SessionService;
use toolbelt_agent::{Agent, ErrorKind, Event, EventKind, RunOptions, Runner};
use toolbelt_model::testing::ScriptedServer;
use toolbelt_model::{Message, OpenAiConfig, OpenAiModel};

toolbelt_graph::state! {
    /// A conversation and a counter.
    pub struct Chat => ChatUpdate {
        pub messages: Vec<Message> => Messages,
        pub steps: u32 => Sum,
        pub note: String,
    }
}

pub fn model(server: &ScriptedServer) -> OpenAiModel {
    OpenAiModel::new(OpenAiConfig::new(server.base_url(), "scripted")).expect("model config")
}

/// A runner for `agent` over `sessions`.
pub fn runner(agent: impl Agent + 'static, sessions: Arc<dyn SessionService>) -> Runner {
    Runner::new("graph-tests", Arc::new(agent)).with_session_service(sessions)
}

/// Every event of one run of session `s1`.
pub async fn run(runner: &Runner, input: &str) -> Vec<Event> {
    run_with(runner, input, RunOptions::new()).await
}

pub async fn run_with(runner: &Runner, input: &str, options: RunOptions) -> Vec<Event> {
    let events = runner.run("u1", "s1", input, options).collect_all().await;
    assert!(
        events.last().is_some_and(Event::is_run_completed),
        "the run did not complete: {events:#?}"
    );
    events
}

/// The nodes of `node_ended` events, in order.
pub fn ended(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeEnded { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

/// The error events' kinds and messages.
pub fn errors(events: &[Event]) -> Vec<(ErrorKind, String)> {
    events
        .iter()
        .filter_map(|e| e.error().map(|(k, m)| (k, m.to_string())))
        .collect()
}

/// The state of the last checkpoint among `events`.
pub fn last_state<S: serde::de::DeserializeOwned>(events: &[Event]) -> S {
    let checkpoint = events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::Checkpoint { checkpoint } => Some(checkpoint.clone()),
            _ => None,
        })
        .expect("a checkpoint");
    serde_json::from_value(checkpoint["state"].clone()).expect("the checkpoint's state")
}

/// Fails with the events when the run had errors.
pub fn assert_no_errors(events: &[Event]) {
    let errors = errors(events);
    assert!(errors.is_empty(), "errors: {errors:?}");
}

/// The agent loop as a graph: `model` (declaring the tools node's tools) ⇄ `tools`, back to
/// the model after every tools step, to END when the model calls no tool.
pub fn agent_loop(
    name: &str,
    server: &ScriptedServer,
    tools: toolbelt_graph::ToolsNode,
) -> toolbelt_graph::Graph<Chat> {
    use toolbelt_graph::{END, ModelNode, START, StateGraph, tools_condition};
    let model = ModelNode::new(model(server))
        .instruction("You are a graph.")
        .tools_from(&tools);
    StateGraph::<Chat>::new(name)
        .description(format!("the {name} graph"))
        .node("model", model)
        .node("tools", tools)
        .edge(START, "model")
        .conditional_edge("model", ["tools", END], tools_condition("tools"))
        .edge("tools", "model")
        .build()
        .expect("the agent loop graph builds")
}

/// The tool results of `events`, in order.
pub fn results(events: &[Event]) -> Vec<toolbelt_agent::ToolResult> {
    events
        .iter()
        .filter_map(Event::tool_result)
        .cloned()
        .collect()
}

/// The text of the run's last model response.
pub fn answer(events: &[Event]) -> String {
    events
        .iter()
        .rev()
        .find_map(Event::message)
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

/// Arguments of the test tools.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}
