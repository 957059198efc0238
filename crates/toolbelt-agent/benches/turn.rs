//! What the agent framework costs per turn, against a scripted OpenAI-compatible server on
//! 127.0.0.1 that answers at once, and the wall time of a turn whose 8 tool calls each take
//! 100 ms (run in parallel).
//!
//! Run: `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-agent --bench turn`
//!
//! - `model_call_only`: one `Model::generate` through the HTTP client with the same messages
//!   and tool declarations a run sends, collected: the floor the framework adds to.
//! - `run_text_answer`: a whole `Runner::run` (session, input event, request building,
//!   history sanitising, the same model call, response event, `RunCompleted`).
//!   Framework overhead per turn = this minus `model_call_only`.
//! - `run_one_tool_round`: two model calls and one instant tool call in between.
//! - `agent_tool_hop`: the shape of `run_one_tool_round`, but the tool is an `AgentTool`
//!   whose child agent (its own server) answers at once without tools. The cost of one hop
//!   = this minus `run_one_tool_round` (the child's run: its model call, its events, the
//!   aggregation of its answer).
//! - `eight_parallel_100ms_tools`: one run in which the model asks for 8 calls of a tool that
//!   sleeps 100 ms, then answers; goal under 150 ms.
//! - `agent_turn_dialect/{provider}/{mode}`: `model_call_only` and `run_text_answer` for
//!   each wire format (chat completions, Responses, Anthropic Messages, Gemini) against the
//!   scripted server's route for it, in one run: the framework overhead per turn of each
//!   dialect side by side (`cargo bench -p toolbelt-agent --bench turn -- dialect`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use toolbelt_agent::{AgentTool, LlmAgent, RunOptions, Runner};
use toolbelt_core::{DynTool, FunctionTool, Tool, ToolContext, ToolError};
use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};
use toolbelt_model::{
    DynModel, GenerationConfig, Message, Model, OpenAiConfig, OpenAiModel, Provider, Request,
};

/// Arguments of the benchmark tools.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// Which call.
    n: u32,
}

fn last_role_is_tool(request: &RecordedRequest) -> bool {
    request
        .messages()
        .last()
        .is_some_and(|m| m["role"] == "tool")
}

/// Answers a user message with `calls` calls of `tool`, and tool results with text.
fn responder(tool: &'static str, calls: u32) -> impl Fn(&RecordedRequest) -> Reply {
    move |request| {
        if calls == 0 || last_role_is_tool(request) {
            return Reply::text("All done, the answer is 42.");
        }
        let calls: Vec<(String, String)> = (0..calls)
            .map(|n| (format!("call_{n}"), format!(r#"{{"n":{n}}}"#)))
            .collect();
        Reply::tool_calls(
            calls
                .iter()
                .map(|(id, args)| (id.as_str(), tool, args.as_str())),
        )
    }
}

/// Answers a user message with one call of the agent tool `child`, and its result with text.
fn agent_tool_responder(request: &RecordedRequest) -> Reply {
    if last_role_is_tool(request) {
        return Reply::text("All done, the answer is 42.");
    }
    Reply::tool_call("call_0", "child", r#"{"request":"What is the answer?"}"#)
}

/// A runner whose agent offers `child` (answering from `child_server`) as an agent tool.
fn agent_tool_runner(
    server: &ScriptedServer,
    child_server: &ScriptedServer,
    stream: bool,
) -> Runner {
    let config = GenerationConfig {
        stream,
        ..GenerationConfig::default()
    };
    let child = LlmAgent::builder("child")
        .description("Answers at once")
        .instruction("You are a benchmark child.")
        .model(model(child_server))
        .generation_config(config.clone())
        .build()
        .expect("child");
    let agent = LlmAgent::builder("bench")
        .instruction("You are a benchmark.")
        .model(model(server))
        .tool(AgentTool::new(Arc::new(child)).expect("agent tool"))
        .generation_config(config)
        .build()
        .expect("agent");
    Runner::new("bench", Arc::new(agent))
}

fn model(server: &ScriptedServer) -> OpenAiModel {
    OpenAiModel::new(OpenAiConfig::new(server.base_url(), "bench")).expect("model")
}

/// The agent's tools: one that answers at once, one that takes 100 ms.
fn tools() -> Vec<DynTool> {
    let instant = FunctionTool::new(
        "instant",
        "Answers at once",
        |_ctx: ToolContext, a: Args| async move { Ok::<_, ToolError>(a.n) },
    )
    .expect("tool");
    // Declared concurrency-safe (it only sleeps): undeclared tools take turns on their
    // set's lane even in a parallel batch, which would measure 8 × 100 ms instead.
    let slow = FunctionTool::new(
        "slow",
        "Takes 100 ms",
        |_ctx: ToolContext, a: Args| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, ToolError>(a.n)
        },
    )
    .expect("tool")
    .map_declaration(|d| d.concurrency_safe(true));
    vec![Arc::new(instant), Arc::new(slow)]
}

fn runner(server: &ScriptedServer, stream: bool) -> Runner {
    let agent = LlmAgent::builder("bench")
        .instruction("You are a benchmark.")
        .model(model(server))
        .tools(tools())
        .parallel_tools(true)
        .generation_config(GenerationConfig {
            stream,
            ..GenerationConfig::default()
        })
        .build()
        .expect("agent");
    Runner::new("bench", Arc::new(agent))
}

/// One run in a fresh session, so every iteration sends the same request size.
async fn one_run(runner: &Runner, sessions: &AtomicU64) {
    let id = sessions.fetch_add(1, Ordering::Relaxed).to_string();
    let mut events = runner.run("u", &id, "What is the answer?", RunOptions::new());
    while let Some(event) = events.next().await {
        assert!(!event.is_error(), "{event:?}");
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let sessions = AtomicU64::new(0);

    for stream in [false, true] {
        let suffix = if stream { "streaming" } else { "non_streaming" };
        let mut group = c.benchmark_group(format!("agent_turn/{suffix}"));
        group.measurement_time(Duration::from_secs(4));

        let text_server = rt
            .block_on(ScriptedServer::start_with(responder("instant", 0)))
            .expect("server");
        let raw = model(&text_server);
        // The same messages and tool declarations a run sends, so the difference is the
        // framework alone.
        let request = Request::new(vec![
            Message::system("You are a benchmark."),
            Message::user("What is the answer?"),
        ])
        .with_tools(
            tools()
                .iter()
                .map(|t| t.declaration().clone())
                .collect::<Vec<_>>(),
        )
        .with_config(GenerationConfig {
            stream,
            ..GenerationConfig::default()
        });
        group.bench_function("model_call_only", |b| {
            b.to_async(&rt).iter(|| async {
                let mut responses = raw.generate(request.clone()).await.expect("call");
                while let Some(response) = responses.next().await {
                    response.expect("response");
                }
            })
        });
        let text_runner = runner(&text_server, stream);
        group.bench_function("run_text_answer", |b| {
            b.to_async(&rt).iter(|| one_run(&text_runner, &sessions))
        });

        let tool_server = rt
            .block_on(ScriptedServer::start_with(responder("instant", 1)))
            .expect("server");
        let tool_runner = runner(&tool_server, stream);
        group.bench_function("run_one_tool_round", |b| {
            b.to_async(&rt).iter(|| one_run(&tool_runner, &sessions))
        });

        let outer_server = rt
            .block_on(ScriptedServer::start_with(agent_tool_responder))
            .expect("server");
        let hop_runner = agent_tool_runner(&outer_server, &text_server, stream);
        group.bench_function("agent_tool_hop", |b| {
            b.to_async(&rt).iter(|| one_run(&hop_runner, &sessions))
        });
        group.finish();
    }

    let mut group = c.benchmark_group("agent_turn");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(6));
    let slow_server = rt
        .block_on(ScriptedServer::start_with(responder("slow", 8)))
        .expect("server");
    let slow_runner = runner(&slow_server, true);
    group.bench_function("eight_parallel_100ms_tools", |b| {
        b.to_async(&rt).iter(|| one_run(&slow_runner, &sessions))
    });
    group.finish();
}

/// A client of `provider` on the scripted server's route for its wire format.
fn provider_model(server: &ScriptedServer, provider: Provider) -> DynModel {
    let config = OpenAiConfig::new(server.base_url_for(provider), "bench").with_api_key("k");
    toolbelt_model::connect(provider, config).expect("model")
}

/// Framework overhead per turn for each dialect: the model call alone and a whole run with
/// a text answer, every provider in the same process and on the same server.
fn bench_dialects(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let sessions = AtomicU64::new(0);
    let server = rt
        .block_on(ScriptedServer::start_with(responder("instant", 0)))
        .expect("server");
    for provider in [
        Provider::OpenAi,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ] {
        for stream in [false, true] {
            let mode = if stream { "streaming" } else { "non_streaming" };
            let mut group = c.benchmark_group(format!("agent_turn_dialect/{provider}/{mode}"));
            group.measurement_time(Duration::from_secs(3));
            let config = GenerationConfig {
                stream,
                ..GenerationConfig::default()
            };
            let model = provider_model(&server, provider);
            let request = Request::new(vec![
                Message::system("You are a benchmark."),
                Message::user("What is the answer?"),
            ])
            .with_tools(
                tools()
                    .iter()
                    .map(|t| t.declaration().clone())
                    .collect::<Vec<_>>(),
            )
            .with_config(config.clone());
            group.bench_function("model_call_only", |b| {
                b.to_async(&rt).iter(|| async {
                    let mut responses = model.generate(request.clone()).await.expect("call");
                    while let Some(response) = responses.next().await {
                        response.expect("response");
                    }
                })
            });
            let agent = LlmAgent::builder("bench")
                .instruction("You are a benchmark.")
                .model_arc(model.clone())
                .tools(tools())
                .generation_config(config)
                .build()
                .expect("agent");
            let runner = Runner::new("bench", Arc::new(agent));
            group.bench_function("run_text_answer", |b| {
                b.to_async(&rt).iter(|| one_run(&runner, &sessions))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench, bench_dialects);
criterion_main!(benches);
