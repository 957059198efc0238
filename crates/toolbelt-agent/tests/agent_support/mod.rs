//! Helpers shared by the agent's integration tests: a model and agents over the scripted
//! OpenAI-compatible server, running to the end, and picking events apart.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use toolbelt_agent::{
    ErrorKind, Event, EventKind, LlmAgent, LlmAgentBuilder, RunOptions, Runner, ToolResult,
};
use toolbelt_core::{FunctionTool, RetryPolicy, ToolContext, ToolError};
use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};
use toolbelt_model::{GenerationConfig, OpenAiConfig, OpenAiModel};

/// Any JSON object of arguments.
pub type Args = serde_json::Map<String, Value>;

/// Both ways a model can answer; tests that care run in each.
pub const MODES: [bool; 2] = [false, true];

pub fn model(server: &ScriptedServer) -> OpenAiModel {
    let retry = RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(2),
        ..RetryPolicy::default()
    };
    let config = OpenAiConfig::new(server.base_url(), "scripted").with_retry(retry);
    OpenAiModel::new(config).expect("model config")
}

pub fn agent(name: &str, server: &ScriptedServer, stream: bool) -> LlmAgentBuilder {
    LlmAgent::builder(name)
        .description(format!("the {name} agent"))
        .instruction(format!("You are {name}."))
        .model(model(server))
        .generation_config(GenerationConfig {
            stream,
            ..GenerationConfig::default()
        })
}

/// Arguments of `multiply`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Factors {
    /// The first factor.
    pub a: f64,
    /// The second factor.
    pub b: f64,
}

/// `multiply`, counting its calls.
pub fn multiply(calls: Arc<AtomicUsize>) -> FunctionTool {
    FunctionTool::new(
        "multiply",
        "Multiplies two numbers",
        move |_ctx: ToolContext, f: Factors| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(f.a * f.b)
            }
        },
    )
    .expect("multiply")
}

/// A scripted server answering `replies`, and a runner over a `calc` agent (adjusted by
/// `configure`) whose only tool is `multiply`, with that tool's call counter.
pub async fn calculator(
    replies: impl IntoIterator<Item = Reply>,
    stream: bool,
    configure: impl FnOnce(LlmAgentBuilder) -> LlmAgentBuilder,
) -> (ScriptedServer, Arc<AtomicUsize>, Runner) {
    let server = ScriptedServer::start(replies).await.expect("server");
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = configure(agent("calc", &server, stream).tool(multiply(calls.clone())))
        .build()
        .expect("agent");
    (server, calls, Runner::new("app", Arc::new(agent)))
}

pub async fn run(runner: &Runner, session: &str, input: &str, options: RunOptions) -> Vec<Event> {
    let events = runner
        .run("user", session, input, options)
        .collect_all()
        .await;
    assert!(
        events.last().is_some_and(Event::is_run_completed),
        "a run ends with RunCompleted: {events:#?}"
    );
    events
}

/// The events of one type (the JSON `type` name).
pub fn of<'a>(events: &'a [Event], type_name: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.kind.type_name() == type_name)
        .collect()
}

/// Every tool result of the run, in the order they were emitted.
pub fn results(events: &[Event]) -> Vec<&ToolResult> {
    events.iter().filter_map(Event::tool_result).collect()
}

/// The calls handed back by the execution filter.
pub fn pending(events: &[Event]) -> Vec<&toolbelt_model::ToolCall> {
    events
        .iter()
        .flat_map(|e| match &e.kind {
            EventKind::PendingToolCalls { calls } => calls.iter().collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The (kind, message) of every error event.
pub fn errors(events: &[Event]) -> Vec<(ErrorKind, String)> {
    events
        .iter()
        .filter_map(|e| e.error().map(|(kind, message)| (kind, message.to_string())))
        .collect()
}

pub fn final_answer(events: &[Event]) -> String {
    of(events, "model_response")
        .last()
        .and_then(|e| e.message())
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

pub fn no_errors(events: &[Event]) {
    let errors = of(events, "error");
    assert!(errors.is_empty(), "unexpected error events: {errors:#?}");
}

/// The role=tool messages of a recorded request, as (tool_call_id, content).
pub fn tool_messages(request: &RecordedRequest) -> Vec<(String, String)> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

pub fn roles(request: &RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A runner of app `app` over the agent `agent` builds.
pub fn app_runner(agent: LlmAgentBuilder) -> Runner {
    Runner::new("app", Arc::new(agent.build().expect("agent")))
}

/// The type names of the events that are stored in the session, in order.
pub fn persistent_types(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .filter(|e| e.is_persistent())
        .map(|e| e.kind.type_name())
        .collect()
}

/// A `wait` tool whose calls wait until they are cancelled and then answer `answer`; with a
/// receiver that fires when the first call has started, and the count of calls that saw
/// their cancellation.
pub fn wait_until_cancelled(
    answer: &'static str,
) -> (
    FunctionTool,
    tokio::sync::oneshot::Receiver<()>,
    Arc<AtomicUsize>,
) {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
    let cancelled = Arc::new(AtomicUsize::new(0));
    let counter = cancelled.clone();
    let wait = FunctionTool::new("wait", "Waits", move |ctx: ToolContext, _: Args| {
        let (started_tx, cancelled) = (started_tx.clone(), counter.clone());
        async move {
            if let Some(tx) = started_tx.lock().unwrap().take() {
                let _ = tx.send(());
            }
            ctx.cancelled().await;
            cancelled.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(answer)
        }
    })
    .expect("wait");
    (wait, started_rx, cancelled)
}
