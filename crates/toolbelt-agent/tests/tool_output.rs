//! Everything a tool produces reaches its audience, and the history stays valid: streamed
//! chunks and progress arrive as events while the tool runs, results carry the user's text,
//! blocks and `silent`, images go to the model as `image_url` parts (text for models that do
//! not take images), and a strict server (vLLM's rules) accepts every later request even
//! after malformed arguments or duplicate ids.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use toolbelt_agent::history::MALFORMED_ARGUMENTS_KEY;
use toolbelt_agent::{Event, EventKind, LlmAgent, RunOptions, Runner};
use toolbelt_core::{
    ContentBlock, DynToolSet, FunctionTool, ProgressUpdate, RetryPolicy, StreamChunk,
    StreamingFunctionTool, ToolContext, ToolError, ToolOutput, ToolSet,
};
use toolbelt_exec::{ExecutionMode, Executor, Registry};
use toolbelt_model::testing::{RecordedRequest, Reply, ScriptedServer};
use toolbelt_model::{OpenAiConfig, OpenAiModel};

use crate::agent_support;

use agent_support::*;

#[tokio::test]
async fn a_streaming_tools_chunks_and_progress_arrive_as_events_before_it_ends() {
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "tail", "{}"),
        Reply::text("the log says hello world"),
    ])
    .await
    .unwrap();
    // The tool sends one chunk, then waits until the test has seen it as an event: if chunks
    // only became events when the tool ended, the run would never finish.
    let go_on = Arc::new(tokio::sync::Notify::new());
    let tail = {
        let go_on = go_on.clone();
        StreamingFunctionTool::new(
            "tail",
            "Streams a log",
            move |ctx: ToolContext, _: Args, tx: toolbelt_core::StreamSender| {
                let go_on = go_on.clone();
                async move {
                    ctx.report_progress(ProgressUpdate::new(1.0).with_message("opened"));
                    let _ = tx.send(StreamChunk::new("hello ")).await;
                    go_on.notified().await;
                    let _ = tx.send(StreamChunk::new("world")).await;
                    Ok::<_, ToolError>(())
                }
            },
        )
        .unwrap()
    };
    let runner = app_runner(agent("a", &server, true).tool(tail));
    let mut events = runner.run("user", "s", "tail the log", RunOptions::new());
    let mut seen = Vec::new();
    let finished = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.next().await {
            if let EventKind::ToolChunk { chunk, name, .. } = &event.kind {
                assert_eq!(name, "tail");
                if chunk.content.to_text() == "hello " {
                    assert!(
                        !seen.iter().any(|t| t == "tool_result"),
                        "the chunk came before the result"
                    );
                    go_on.notify_one();
                }
            }
            seen.push(event.kind.type_name().to_string());
            if event.is_run_completed() {
                break;
            }
        }
    })
    .await;
    assert!(
        finished.is_ok(),
        "the chunk never arrived as an event: {seen:?}"
    );
    let position = |t: &str| seen.iter().position(|s| s == t).unwrap();
    assert!(
        position("tool_progress") < position("tool_result"),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|t| *t == "tool_chunk").count(),
        2,
        "{seen:?}"
    );
    // The model reads the merged output.
    assert_eq!(
        tool_messages(&server.requests()[1]),
        [("call_1".into(), "hello world".into())]
    );
}

#[tokio::test]
async fn results_carry_the_users_text_the_blocks_and_silent() {
    let server = ScriptedServer::start([
        Reply::tool_calls([("c1", "diff", "{}"), ("c2", "note", "{}")]),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let diff =
        FunctionTool::returning_output("diff", "Diffs", |_ctx: ToolContext, _: Args| async {
            Ok::<_, ToolError>(
                ToolOutput::text("1 file changed")
                    .with_user_text("1 file changed\n+new line")
                    .with_block(ContentBlock::text("+new line")),
            )
        })
        .unwrap();
    let note =
        FunctionTool::returning_output("note", "Notes", |_ctx: ToolContext, _: Args| async {
            Ok::<_, ToolError>(ToolOutput::text("noted for the model").silent())
        })
        .unwrap();
    let runner = app_runner(agent("a", &server, false).tool(diff).tool(note));
    let events = run(&runner, "s", "diff and note", RunOptions::new()).await;
    no_errors(&events);
    let results = results(&events);
    assert_eq!(results[0].content, "1 file changed");
    assert_eq!(results[0].text_for_user(), "1 file changed\n+new line");
    assert_eq!(results[0].blocks, [ContentBlock::text("+new line")]);
    assert!(!results[0].silent);
    assert!(results[1].silent);
    // The JSON form a script reads says so too.
    let json = serde_json::to_value(events.iter().find(|e| e.tool_result().is_some())).unwrap();
    assert_eq!(json["result"]["user_text"], "1 file changed\n+new line");
    // A text block the model's text already holds is not repeated to the model.
    assert_eq!(
        tool_messages(&server.requests()[1])[0].1,
        "1 file changed\n+new line"
    );
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A runner whose agent has the built-in tools over a directory holding `dot.png`, talking
/// to `server` through a model that does or does not take images.
fn reader(server: &ScriptedServer, dir: &std::path::Path, images: bool) -> Runner {
    std::fs::write(dir.join("dot.png"), PNG).unwrap();
    let builtin =
        toolbelt_builtin::BuiltinToolSet::new(toolbelt_builtin::BuiltinOptions::new(dir)).unwrap();
    let config = OpenAiConfig::new(server.base_url(), "scripted").with_images(images);
    let agent = LlmAgent::builder("a")
        .model(OpenAiModel::new(config).unwrap())
        .tool_set(Arc::new(builtin) as DynToolSet)
        .build()
        .unwrap();
    Runner::new("app", Arc::new(agent))
}

/// A run whose model reads dot.png with Read and then answers, through a model client that
/// sends images when `images` says so; the run had no errors.
async fn read_dot(images: bool) -> (ScriptedServer, Vec<Event>) {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "Read", r#"{"file_path":"dot.png"}"#),
        Reply::text("a single dot"),
    ])
    .await
    .unwrap();
    let runner = reader(&server, dir.path(), images);
    let events = run(&runner, "s", "what is in dot.png?", RunOptions::new()).await;
    no_errors(&events);
    (server, events)
}

/// The image parts of the user messages of `request`, as their URLs.
fn image_urls(request: &RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|part| part["type"] == "image_url")
        .map(|part| {
            part["image_url"]["url"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn an_image_read_by_read_reaches_the_model_as_an_image_url_part() {
    let (server, events) = read_dot(true).await;
    assert!(matches!(
        results(&events)[0].blocks[..],
        [ContentBlock::Image { .. }]
    ));

    let request = &server.requests()[1];
    // The tool message (text only, as OpenAI's tool role wants), then the image.
    assert_eq!(roles(request), ["user", "assistant", "tool", "user"]);
    let urls = image_urls(request);
    assert_eq!(urls.len(), 1, "{:#?}", request.messages());
    let data = urls[0]
        .strip_prefix("data:image/png;base64,")
        .expect("a PNG data URL");
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert_eq!(bytes, PNG);
}

#[tokio::test]
async fn a_model_without_images_gets_a_text_summary_instead() {
    let (server, _events) = read_dot(false).await;
    let request = &server.requests()[1];
    assert_eq!(roles(request), ["user", "assistant", "tool"]);
    assert!(image_urls(request).is_empty());
    let (_, text) = &tool_messages(request)[0];
    assert!(text.contains("[image image/png"), "{text}");
}

/// Whether every tool call's arguments in `request` are a JSON object and the ids of each
/// assistant message unique: what a strict server checks.
fn history_is_valid(request: &RecordedRequest) -> bool {
    request
        .messages()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .all(|calls| {
            let mut ids: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
            let all_objects = calls.iter().all(|c| {
                let args = c["function"]["arguments"].as_str().unwrap_or_default();
                matches!(serde_json::from_str::<Value>(args), Ok(Value::Object(_)))
            });
            ids.sort();
            ids.dedup();
            all_objects && ids.len() == calls.len()
        })
}

#[tokio::test]
async fn malformed_arguments_are_recorded_as_valid_json_and_a_strict_server_accepts_the_session() {
    for stream in MODES {
        let (server, calls, runner) = calculator(
            [
                Reply::tool_call("call_1", "multiply", r#"{"a": 6, "b": 7,"#),
                Reply::text("sorry, let me try again later"),
                Reply::text("You asked for 6 times 7."),
            ],
            stream,
            |b| b,
        )
        .await;
        server.set_strict(true);
        let events = run(&runner, "s", "6*7", RunOptions::new()).await;
        no_errors(&events);
        assert!(
            results(&events)[0].is_error,
            "repair is off: the call failed"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        // What is recorded (and shown) is valid JSON that keeps what the model wrote.
        let recorded = &of(&events, "model_response")[0].tool_calls()[0];
        let args: Value = serde_json::from_str(&recorded.arguments).unwrap();
        assert_eq!(
            args,
            json!({ MALFORMED_ARGUMENTS_KEY: r#"{"a": 6, "b": 7,"# })
        );

        // The rest of the session goes on.
        let later = run(&runner, "s", "what did I ask?", RunOptions::new()).await;
        no_errors(&later);
        assert_eq!(final_answer(&later), "You asked for 6 times 7.");
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "stream={stream}: no request was refused");
        assert!(requests.iter().all(history_is_valid));
    }
}

#[tokio::test]
async fn repaired_arguments_are_what_the_history_replays() {
    let (server, calls, runner) = calculator(
        [
            Reply::tool_call("call_1", "multiply", r#"{"a": 6, "b": 7,"#),
            Reply::text("42"),
        ],
        false,
        |b| b.repair_json(true),
    )
    .await;
    server.set_strict(true);
    let events = run(&runner, "s", "6*7", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let requests = server.requests();
    let assistant = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    let replayed = &assistant["tool_calls"][0]["function"]["arguments"];
    let replayed: Value = serde_json::from_str(replayed.as_str().unwrap()).unwrap();
    assert_eq!(replayed, json!({"a": 6, "b": 7}));
    assert_eq!(
        results(&events)[0].repaired_arguments.as_deref(),
        of(&events, "model_response")[0].tool_calls()[0]
            .arguments
            .as_str()
            .into()
    );
}

#[tokio::test]
async fn two_calls_with_the_same_id_both_run_and_both_results_reach_the_model() {
    let (server, calls, runner) = calculator(
        [
            Reply::tool_calls([
                ("call_1", "multiply", r#"{"a":2,"b":3}"#),
                ("call_1", "multiply", r#"{"a":3,"b":4}"#),
            ]),
            Reply::text("6 and 12"),
        ],
        false,
        |b| b,
    )
    .await;
    server.set_strict(true);
    let events = run(&runner, "s", "2*3 and 3*4", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let request = &server.requests()[1];
    assert!(history_is_valid(request));
    assert_eq!(
        tool_messages(request),
        [
            ("call_1".to_string(), "6.0".to_string()),
            ("call_1_2".to_string(), "12.0".to_string())
        ]
    );
    assert_eq!(final_answer(&events), "6 and 12");
}

#[tokio::test]
async fn an_answer_cut_at_the_token_limit_is_a_visible_warning() {
    let (_server, _calls, runner) =
        calculator([Reply::truncated("The answer is")], true, |b| b).await;
    let events = run(&runner, "s", "explain", RunOptions::new()).await;
    no_errors(&events);
    let types = persistent_types(&events);
    assert_eq!(
        types,
        ["user_input", "model_response", "warning", "run_completed"]
    );
    let warning = of(&events, "warning")[0];
    let EventKind::Warning { message } = &warning.kind else {
        unreachable!()
    };
    assert!(message.contains("length"), "{message}");
}

#[tokio::test]
async fn the_tool_retry_policy_retries_a_plain_function_tool() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "flaky", "{}"), Reply::text("ok")])
        .await
        .unwrap();
    let attempts = Arc::new(AtomicUsize::new(0));
    // Declares nothing about idempotency, as most function tools.
    let flaky = {
        let attempts = attempts.clone();
        FunctionTool::new("flaky", "Fails once", move |_ctx: ToolContext, _: Args| {
            let attempts = attempts.clone();
            async move {
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(ToolError::Transient("connection reset".into()));
                }
                Ok::<_, ToolError>("worked")
            }
        })
        .unwrap()
    };
    let policy = RetryPolicy {
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..RetryPolicy::retries(2)
    };
    let runner = app_runner(agent("a", &server, false).tool(flaky).tool_retry(policy));
    let events = run(&runner, "s", "go", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(results(&events)[0].content, "worked");
}

#[tokio::test]
async fn an_executor_configured_parallel_is_not_overridden_by_an_agent_that_sets_no_mode() {
    let server = ScriptedServer::start([
        Reply::tool_calls([("c1", "meet", "{}"), ("c2", "meet", "{}")]),
        Reply::text("met"),
    ])
    .await
    .unwrap();
    // Both calls must be in flight together to pass the barrier.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meet = {
        let barrier = barrier.clone();
        FunctionTool::new("meet", "Meets", move |_ctx: ToolContext, _: Args| {
            let barrier = barrier.clone();
            async move {
                match tokio::time::timeout(Duration::from_secs(10), barrier.wait()).await {
                    Ok(_) => Ok("met"),
                    Err(_) => Err(ToolError::failed("ran alone")),
                }
            }
        })
        .unwrap()
        .map_declaration(|d| d.concurrency_safe(true))
    };
    let executor = Executor::builder(Arc::new(Registry::new()))
        .mode(ExecutionMode::Parallel)
        .build();
    let runner = app_runner(agent("a", &server, false).executor(executor).tool(meet));
    let events = run(&runner, "s", "meet twice", RunOptions::new()).await;
    no_errors(&events);
    assert!(results(&events).iter().all(|r| !r.is_error), "{events:#?}");
}

/// A tool set whose listing always fails.
struct Broken;

#[async_trait::async_trait]
impl ToolSet for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<toolbelt_core::DynTool>, ToolError> {
        Err(ToolError::failed("server unreachable"))
    }
}

#[tokio::test]
async fn a_tool_set_that_fails_to_list_is_a_warning_and_the_run_goes_on() {
    let server = ScriptedServer::start([Reply::text("hi")]).await.unwrap();
    let runner = app_runner(agent("a", &server, false).tool_set(Arc::new(Broken)));
    let events = run(&runner, "s", "hi", RunOptions::new()).await;
    no_errors(&events);
    let warnings = of(&events, "warning");
    assert_eq!(warnings.len(), 1, "{events:#?}");
    let EventKind::Warning { message } = &warnings[0].kind else {
        unreachable!()
    };
    assert!(
        message.contains("broken") && message.contains("server unreachable"),
        "{message}"
    );
    assert_eq!(final_answer(&events), "hi");
}

#[tokio::test]
async fn tools_and_invoke_tool_work_outside_a_run() {
    let server = ScriptedServer::start([]).await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(Registry::new());
    shared
        .register(
            FunctionTool::new(
                "shared_echo",
                "Echoes",
                |_ctx: ToolContext, a: Args| async move { Ok::<_, ToolError>(Value::Object(a)) },
            )
            .unwrap(),
        )
        .unwrap();
    let agent = agent("a", &server, false)
        .executor(Executor::new(shared.clone()))
        .tool(multiply(calls.clone()))
        .build()
        .unwrap();

    // The agent's tools over the executor's; the shared registry is not changed.
    let names: Vec<String> = agent.tools().await.names().map(str::to_string).collect();
    assert_eq!(names, ["multiply", "shared_echo"]);
    assert_eq!(shared.tool_names(), ["shared_echo"]);

    let result = agent.invoke_tool("multiply", r#"{"a":3,"b":4}"#).await;
    assert_eq!(result.model_text(), "12.0");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let result = agent.invoke_tool("multiply", r#"{"a":"x"}"#).await;
    assert!(!result.is_success(), "the same validation as in a run");
    let result = agent.invoke_tool("mutliply", "{}").await;
    assert!(
        result.model_text().contains("did you mean"),
        "{}",
        result.model_text()
    );
    assert!(server.requests().is_empty(), "no model call");
}
