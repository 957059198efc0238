//! The agent loop end to end: an [`LlmAgent`] driven by a [`Runner`] against the scripted
//! OpenAI-compatible server on 127.0.0.1, streaming and non-streaming. Every assertion about
//! what the model was sent reads the request the server recorded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolbelt_agent::framework::{AWAIT_USER_REPLY, TRANSFER_TO_AGENT};
use toolbelt_agent::{Agent, ErrorKind, Event, Invocation, RunOptions, Runner, SessionService};
use toolbelt_core::RetryPolicy;
use toolbelt_core::{
    DynTool, DynToolSet, FunctionTool, ToolContext, ToolError, ToolFilter, ToolSet,
};
use toolbelt_exec::ExecutionFilter;
use toolbelt_model::Message;
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::agent_support;

use agent_support::*;

#[tokio::test]
async fn one_tool_call_then_a_final_answer() {
    for stream in MODES {
        let (server, calls, runner) = calculator(
            [
                Reply::tool_call("call_1", "multiply", r#"{"a":25,"b":4}"#),
                Reply::text("25 × 4 = 100"),
            ],
            stream,
            |b| b,
        )
        .await;
        let events = run(&runner, "s1", "What is 25 times 4?", RunOptions::new()).await;
        no_errors(&events);

        let complete = persistent_types(&events);
        assert_eq!(
            complete,
            [
                "user_input",
                "model_response",
                "tool_result",
                "model_response",
                "run_completed"
            ],
            "stream={stream}"
        );
        assert_eq!(
            of(&events, "model_delta").is_empty(),
            !stream,
            "deltas only when streaming"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let result = results(&events)[0];
        assert_eq!(result.call_id, "call_1");
        assert_eq!(result.content, "100.0");
        assert!(!result.is_error);
        assert_eq!(final_answer(&events), "25 × 4 = 100");

        // Every event belongs to the same invocation, authored by the agent (or the user).
        let invocation = &events[0].invocation_id;
        assert!(events.iter().all(|e| &e.invocation_id == invocation));
        assert_eq!(events[0].author, "user");
        assert!(events[1..].iter().all(|e| e.author == "calc"));

        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(
            requests[0].body["stream"].as_bool().unwrap_or(false),
            stream
        );
        assert_eq!(requests[0].tool_names(), ["multiply"]);
        assert_eq!(roles(&requests[0]), ["system", "user"]);
        assert_eq!(roles(&requests[1]), ["system", "user", "assistant", "tool"]);
        assert_eq!(
            requests[1].messages()[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"a":25,"b":4}"#
        );
        assert_eq!(
            tool_messages(&requests[1]),
            [("call_1".to_string(), "100.0".to_string())]
        );
    }
}

/// Arguments of `probe`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ProbeArgs {
    /// Which call this is.
    n: u64,
}

/// Counts calls in flight and the most that were ever in flight at once.
#[derive(Default)]
struct Concurrency {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

#[tokio::test]
async fn three_parallel_calls_run_concurrently_results_arrive_as_they_end_and_the_model_gets_call_order()
 {
    for stream in MODES {
        let server = ScriptedServer::start([
            Reply::tool_calls([
                ("c1", "probe", r#"{"n":1}"#),
                ("c2", "probe", r#"{"n":2}"#),
                ("c3", "probe", r#"{"n":3}"#),
            ]),
            Reply::text("done"),
        ])
        .await
        .unwrap();
        let counter = Arc::new(Concurrency::default());
        // All three must be in flight together to pass the barrier; run one at a time,
        // the first would wait for ever (the timeout turns that into a failure).
        let barrier = Arc::new(tokio::sync::Barrier::new(3));
        let finished = Arc::new(Mutex::new(Vec::new()));
        // How many calls have finished; call n waits for 3 - n of them, so they finish in
        // reverse call order and the executor has to restore the order.
        let done = Arc::new(tokio::sync::watch::channel(0u64).0);
        let probe = {
            let (counter, barrier, finished, done) = (
                counter.clone(),
                barrier.clone(),
                finished.clone(),
                done.clone(),
            );
            FunctionTool::new("probe", "Probes", move |_ctx, args: ProbeArgs| {
                let (counter, barrier, finished, done) = (
                    counter.clone(),
                    barrier.clone(),
                    finished.clone(),
                    done.clone(),
                );
                async move {
                    let now = counter.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    counter.peak.fetch_max(now, Ordering::SeqCst);
                    let overlapped = tokio::time::timeout(Duration::from_secs(10), barrier.wait())
                        .await
                        .is_ok();
                    if !overlapped {
                        counter.in_flight.fetch_sub(1, Ordering::SeqCst);
                        return Err(ToolError::failed("the calls did not overlap"));
                    }
                    let mut turn = done.subscribe();
                    let _ = turn.wait_for(|finished| *finished == 3 - args.n).await;
                    finished.lock().unwrap().push(args.n);
                    counter.in_flight.fetch_sub(1, Ordering::SeqCst);
                    done.send_modify(|finished| *finished += 1);
                    Ok::<_, ToolError>(format!("result {}", args.n))
                }
            })
            .unwrap()
            // Only calls declared concurrency-safe may overlap (others take turns).
            .map_declaration(|d| d.concurrency_safe(true))
        };
        let runner = app_runner(
            agent("par", &server, stream)
                .tool(probe)
                .parallel_tools(true),
        );
        let events = run(&runner, "s", "probe three times", RunOptions::new()).await;
        no_errors(&events);

        assert_eq!(
            counter.peak.load(Ordering::SeqCst),
            3,
            "all three overlapped"
        );
        assert_eq!(
            *finished.lock().unwrap(),
            [3, 2, 1],
            "they finished in reverse"
        );
        let results = &results(&events);
        let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(
            ids,
            ["c3", "c2", "c1"],
            "each result is shown as its call ends"
        );
        let sent = tool_messages(&server.requests()[1]);
        let expected: Vec<(String, String)> = (1..=3)
            .map(|n| (format!("c{n}"), format!("result {n}")))
            .collect();
        assert_eq!(
            sent, expected,
            "the model gets the results in its call order"
        );
    }
}

#[tokio::test]
async fn serial_agents_run_calls_one_at_a_time() {
    let server = ScriptedServer::start([
        Reply::tool_calls([("c1", "probe", r#"{"n":1}"#), ("c2", "probe", r#"{"n":2}"#)]),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let counter = Arc::new(Concurrency::default());
    let probe = {
        let counter = counter.clone();
        FunctionTool::new("probe", "Probes", move |_ctx, _args: ProbeArgs| {
            let counter = counter.clone();
            async move {
                let now = counter.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                counter.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                counter.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, ToolError>("ok")
            }
        })
        .unwrap()
    };
    let runner = app_runner(agent("serial", &server, false).tool(probe));
    let events = run(&runner, "s", "probe", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(counter.peak.load(Ordering::SeqCst), 1);
    // How calls run is the executor's business; the model is not told to call fewer.
    assert!(
        server.requests()[0]
            .body
            .get("parallel_tool_calls")
            .is_none()
    );
}

#[tokio::test]
async fn malformed_arguments_are_repaired_when_enabled() {
    for stream in MODES {
        // A trailing comma and a missing closing brace: what small models send.
        let (server, calls, runner) = calculator(
            [
                Reply::tool_call("call_1", "multiply", r#"{"a": 6, "b": 7,"#),
                Reply::text("42"),
            ],
            stream,
            |b| b,
        )
        .await;
        let events = run(&runner, "s", "6*7", RunOptions::new().repair_json(true)).await;
        no_errors(&events);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let result = results(&events)[0];
        assert!(!result.is_error, "{result:?}");
        assert_eq!(result.content, "42.0");
        let repaired: Value =
            serde_json::from_str(result.repaired_arguments.as_deref().unwrap()).unwrap();
        assert_eq!(repaired, json!({"a": 6, "b": 7}));
        assert_eq!(
            tool_messages(&server.requests()[1]),
            [("call_1".into(), "42.0".into())]
        );
    }
}

#[tokio::test]
async fn malformed_arguments_are_fed_back_as_an_error_when_repair_is_off() {
    for stream in MODES {
        let (server, calls, runner) = calculator(
            [
                Reply::tool_call("call_1", "multiply", r#"{"a": 6, "b": 7,"#),
                Reply::tool_call("call_2", "multiply", r#"{"a": 6, "b": 7}"#),
                Reply::text("42"),
            ],
            stream,
            |b| b.repair_json(true),
        )
        .await;
        // The agent repairs by default; this run turns it off.
        let events = run(&runner, "s", "6*7", RunOptions::new().repair_json(false)).await;
        no_errors(&events);
        let first = results(&events)[0];
        assert!(first.is_error);
        assert!(first.content.starts_with("Error:"), "{}", first.content);
        assert!(first.repaired_arguments.is_none());
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "only the well-formed call ran"
        );
        // The model saw its mistake and corrected it.
        let sent = tool_messages(&server.requests()[1]);
        assert_eq!(sent[0].0, "call_1");
        assert_eq!(sent[0].1, first.content);
        assert_eq!(final_answer(&events), "42");
    }
}

#[tokio::test]
async fn an_unknown_tool_is_fed_back_with_suggestions() {
    for stream in MODES {
        let (server, calls, runner) = calculator(
            [
                Reply::tool_call("call_1", "multiplyy", r#"{"a":1,"b":2}"#),
                Reply::text("sorry"),
            ],
            stream,
            |b| b,
        )
        .await;
        let events = run(&runner, "s", "1*2", RunOptions::new()).await;
        no_errors(&events);
        let result = results(&events)[0];
        assert!(result.is_error);
        assert!(
            result.content.contains(r#"unknown tool "multiplyy""#),
            "{}",
            result.content
        );
        assert!(
            result.content.contains(r#"did you mean "multiply"?"#),
            "suggests the real name: {}",
            result.content
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        let sent = tool_messages(&server.requests()[1]);
        assert_eq!(sent, [("call_1".to_string(), result.content.clone())]);
    }
}

fn echo(name: &str) -> DynTool {
    Arc::new(
        FunctionTool::new(name, "Echoes", |_ctx, args: Args| async move {
            Ok::<_, ToolError>(args)
        })
        .unwrap(),
    )
}

#[tokio::test]
async fn a_per_run_filter_hides_a_user_tool_but_keeps_framework_tools() {
    let server = ScriptedServer::start([
        Reply::text("hello"),
        Reply::tool_call("call_1", "multiply", r#"{"a":1,"b":2}"#),
        Reply::text("could not"),
    ])
    .await
    .unwrap();
    let helper = agent("helper", &server, false).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let root = agent("root", &server, false)
        .tool(multiply(calls.clone()))
        .tools([echo("echo")])
        .sub_agent(Arc::new(helper))
        .await_user_reply_tool(true)
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(root));

    // A filter that allows nothing at all still leaves the framework tools.
    let nothing = ToolFilter::include_names(Vec::<String>::new());
    run(&runner, "s", "hi", RunOptions::new().tool_filter(nothing)).await;
    let mut offered = server.requests()[0].tool_names();
    offered.sort();
    assert_eq!(offered, [AWAIT_USER_REPLY, TRANSFER_TO_AGENT]);

    // Hiding one tool hides it from the model and from execution.
    let options = RunOptions::new().tool_filter(ToolFilter::exclude_names(["multiply"]));
    let events = run(&runner, "s2", "1*2", options).await;
    let mut offered = server.requests()[1].tool_names();
    offered.sort();
    assert_eq!(offered, [AWAIT_USER_REPLY, "echo", TRANSFER_TO_AGENT]);
    let result = results(&events)[0];
    assert!(
        result.is_error,
        "a hidden tool cannot be called: {result:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_agent_filter_narrows_its_tools() {
    let server = ScriptedServer::start([Reply::text("hi")]).await.unwrap();
    let runner = app_runner(
        agent("a", &server, false)
            .tools([echo("keep_me"), echo("drop_me")])
            .tool_filter(ToolFilter::include_names(["keep_me"])),
    );
    run(&runner, "s", "hi", RunOptions::new()).await;
    assert_eq!(server.requests()[0].tool_names(), ["keep_me"]);
}

#[tokio::test]
async fn an_execution_filter_hands_calls_back_and_the_run_resumes_with_tool_messages() {
    for stream in MODES {
        let (server, calls, runner) = calculator(
            [
                Reply::tool_calls([
                    ("call_1", "multiply", r#"{"a":2,"b":3}"#),
                    ("call_2", "ask_browser", r#"{"question":"where am I?"}"#),
                ]),
                Reply::text("6, and you are in Lyon"),
            ],
            stream,
            |b| b,
        )
        .await;
        // `ask_browser` is a client-side tool: the framework does not know it and must not
        // run it; the caller does.
        let options =
            RunOptions::new().execution_filter(ExecutionFilter::pending_names(["ask_browser"]));
        let events = run(&runner, "s", "2*3 and where am I?", options.clone()).await;
        no_errors(&events);
        assert_eq!(server.requests().len(), 1, "the run stops after the calls");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let done = results(&events);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].call_id, "call_1");
        let handed_back = pending(&events);
        assert_eq!(handed_back.len(), 1);
        let pending = handed_back[0];
        assert_eq!(
            (pending.id.as_str(), pending.name.as_str()),
            ("call_2", "ask_browser")
        );
        assert_eq!(pending.arguments, r#"{"question":"where am I?"}"#);

        // The caller runs it and resumes the session with a role=tool message.
        let answer = Message::tool("call_2", "ask_browser", "Lyon");
        let resumed = runner.run("user", "s", answer, options).collect_all().await;
        no_errors(&resumed);
        assert_eq!(final_answer(&resumed), "6, and you are in Lyon");
        let request = &server.requests()[1];
        assert_eq!(
            roles(request),
            ["system", "user", "assistant", "tool", "tool"]
        );
        assert_eq!(
            tool_messages(request),
            [
                ("call_1".to_string(), "6.0".to_string()),
                ("call_2".to_string(), "Lyon".to_string())
            ]
        );
    }
}

#[tokio::test]
async fn too_many_tool_rounds_end_with_a_max_iterations_error() {
    let server = ScriptedServer::start_with(|request| {
        let n = request.messages().len();
        Reply::tool_call(&format!("call_{n}"), "echo", r#"{"again":true}"#)
    })
    .await
    .unwrap();
    let runner = app_runner(
        agent("loopy", &server, true)
            .tools([echo("echo")])
            .max_tool_iterations(2),
    );
    let events = run(&runner, "s", "loop", RunOptions::new()).await;
    let errors = errors(&events);
    assert_eq!(errors.len(), 1, "{events:#?}");
    let (kind, message) = &errors[0];
    assert_eq!(*kind, ErrorKind::MaxIterations);
    assert!(message.contains("max_tool_iterations"), "{message}");
    assert_eq!(of(&events, "tool_result").len(), 2);
    assert_eq!(
        server.requests().len(),
        3,
        "two rounds ran, the third was refused"
    );
}

#[tokio::test]
async fn a_transfer_hands_the_conversation_to_a_sub_agent() {
    for stream in MODES {
        let server = ScriptedServer::start([
            Reply::tool_call("t1", TRANSFER_TO_AGENT, r#"{"agent_name":"billing"}"#),
            Reply::text("Your invoice is on its way."),
        ])
        .await
        .unwrap();
        let billing = agent("billing", &server, stream).build().unwrap();
        let root = agent("router", &server, stream)
            .sub_agent(Arc::new(billing))
            .build()
            .unwrap();
        let runner = Runner::new("app", Arc::new(root));
        let events = run(&runner, "s", "where is my invoice?", RunOptions::new()).await;
        no_errors(&events);

        let transfer = of(&events, "tool_result")[0];
        assert_eq!(transfer.author, "router");
        assert!(!transfer.tool_result().unwrap().is_error);
        let answer = of(&events, "model_response").last().copied().unwrap();
        assert_eq!(answer.author, "billing");
        assert_eq!(
            answer.message().unwrap().content,
            "Your invoice is on its way."
        );
        // The sub-agent's invocation is a child of the router's.
        assert_eq!(
            answer.parent_invocation_id.as_deref(),
            Some(transfer.invocation_id.as_str())
        );
        assert_ne!(answer.invocation_id, transfer.invocation_id);

        let requests = server.requests();
        assert_eq!(requests[0].tool_names(), [TRANSFER_TO_AGENT]);
        let schema = &requests[0].body["tools"][0]["function"]["parameters"];
        assert_eq!(
            schema["properties"]["agent_name"]["enum"],
            json!(["billing"])
        );
        // The sub-agent answers with its own instruction and sees the conversation.
        assert_eq!(requests[1].messages()[0]["content"], "You are billing.");
        assert_eq!(requests[1].messages()[1]["content"], "where is my invoice?");
    }
}

#[tokio::test]
async fn a_transfer_to_an_unknown_agent_is_fed_back_as_an_error() {
    let server = ScriptedServer::start([
        Reply::tool_call("t1", TRANSFER_TO_AGENT, r#"{"agent_name":"nobody"}"#),
        Reply::text("I will answer myself."),
    ])
    .await
    .unwrap();
    let billing = agent("billing", &server, false).build().unwrap();
    let root = agent("router", &server, false)
        .sub_agent(Arc::new(billing))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(root));
    let events = run(&runner, "s", "hi", RunOptions::new()).await;
    let result = results(&events)[0];
    assert!(result.is_error);
    assert_eq!(final_answer(&events), "I will answer myself.");
    assert_eq!(
        of(&events, "model_response").last().unwrap().author,
        "router"
    );
}

#[tokio::test]
async fn await_user_reply_routes_the_next_message_back_once() {
    let server = ScriptedServer::start([
        // Run 1: the router hands over; the helper needs to ask something.
        Reply::tool_call("t1", TRANSFER_TO_AGENT, r#"{"agent_name":"helper"}"#),
        Reply::tool_call("w1", AWAIT_USER_REPLY, "{}"),
        Reply::text("Which city?"),
        // Run 2: the reply goes straight to the helper.
        Reply::text("Booked for Lyon."),
        // Run 3: the route was used up; the router answers again.
        Reply::text("Anything else?"),
    ])
    .await
    .unwrap();
    let helper = agent("helper", &server, true)
        .await_user_reply_tool(true)
        .build()
        .unwrap();
    let root = agent("router", &server, true)
        .sub_agent(Arc::new(helper))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(root)).with_await_user_reply_routing(true);

    let first = run(&runner, "s", "book me a train", RunOptions::new()).await;
    no_errors(&first);
    let asked = of(&first, "model_response").last().copied().unwrap();
    assert_eq!(
        (
            asked.author.as_str(),
            asked.message().unwrap().content.as_str()
        ),
        ("helper", "Which city?")
    );
    assert_eq!(server.requests()[1].tool_names(), [AWAIT_USER_REPLY]);

    let second = run(&runner, "s", "Lyon", RunOptions::new()).await;
    no_errors(&second);
    let answer = of(&second, "model_response")[0];
    assert_eq!(answer.author, "helper", "routed to the agent that asked");
    assert_eq!(answer.message().unwrap().content, "Booked for Lyon.");
    assert_eq!(
        server.requests()[3].messages()[0]["content"],
        "You are helper."
    );

    let third = run(&runner, "s", "thanks", RunOptions::new()).await;
    no_errors(&third);
    assert_eq!(
        of(&third, "model_response")[0].author,
        "router",
        "only once"
    );
    assert_eq!(
        server.requests()[4].messages()[0]["content"],
        "You are router."
    );
}

/// A tool set that records how often it was listed and closed.
struct CountingSet {
    name: String,
    tools: Vec<DynTool>,
    listed: AtomicUsize,
    closed: AtomicUsize,
}

impl CountingSet {
    fn new(name: &str, tools: Vec<DynTool>) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_string(),
            tools,
            listed: AtomicUsize::new(0),
            closed: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl ToolSet for CountingSet {
    fn name(&self) -> &str {
        &self.name
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        self.listed.fetch_add(1, Ordering::SeqCst);
        Ok(self.tools.clone())
    }
    async fn close(&self) -> Result<(), ToolError> {
        self.closed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn tool_sets_added_and_removed_between_runs_are_never_closed_by_the_agent() {
    let server = ScriptedServer::start_with(|_| Reply::text("ok"))
        .await
        .unwrap();
    let files = CountingSet::new("files", vec![echo("read"), echo("write")]);
    let web = CountingSet::new("web", vec![echo("fetch")]);
    let agent = Arc::new(
        agent("a", &server, false)
            .tool_set(files.clone() as DynToolSet)
            .build()
            .unwrap(),
    );
    let runner = Runner::new("app", agent.clone());
    let offered = |i: usize| {
        let mut names = server.requests()[i].tool_names();
        names.sort();
        names
    };

    run(&runner, "s", "1", RunOptions::new()).await;
    assert_eq!(offered(0), ["read", "write"]);

    agent.add_tool_set(web.clone());
    run(&runner, "s", "2", RunOptions::new()).await;
    assert_eq!(offered(1), ["fetch", "read", "write"]);

    assert!(agent.remove_tool_set("files"));
    assert!(!agent.remove_tool_set("files"), "already gone");
    run(&runner, "s", "3", RunOptions::new()).await;
    assert_eq!(offered(2), ["fetch"]);

    agent.add_tool_set(files.clone());
    run(&runner, "s", "4", RunOptions::new()).await;
    assert_eq!(offered(3), ["fetch", "read", "write"]);
    assert_eq!(agent.tool_set_names(), ["web", "files"]);

    assert_eq!(files.closed.load(Ordering::SeqCst), 0);
    assert_eq!(web.closed.load(Ordering::SeqCst), 0);
    // Without refresh-on-run, a set is listed when first seen, not on every run.
    assert_eq!(web.listed.load(Ordering::SeqCst), 1);
    // Still usable by their owner, who closes them.
    files.close().await.unwrap();
    assert_eq!(files.closed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn set_tool_sets_replaces_them_all_at_once_between_runs() {
    let server = ScriptedServer::start_with(|_| Reply::text("ok"))
        .await
        .unwrap();
    let files = CountingSet::new("files", vec![echo("read")]);
    let web = CountingSet::new("web", vec![echo("fetch")]);
    let shell = CountingSet::new("shell", vec![echo("bash")]);
    let agent = Arc::new(
        agent("a", &server, false)
            .tool_set(files.clone() as DynToolSet)
            .tool_set(web.clone() as DynToolSet)
            .build()
            .unwrap(),
    );
    let runner = Runner::new("app", agent.clone());
    run(&runner, "s", "1", RunOptions::new()).await;

    agent.set_tool_sets(vec![shell.clone() as DynToolSet, web.clone() as DynToolSet]);
    run(&runner, "s", "2", RunOptions::new()).await;
    let mut offered = server.requests()[1].tool_names();
    offered.sort();
    assert_eq!(offered, ["bash", "fetch"]);
    assert_eq!(
        agent.tool_set_names(),
        ["web", "shell"],
        "web keeps its place"
    );

    agent.set_tool_sets(Vec::new());
    run(&runner, "s", "3", RunOptions::new()).await;
    assert!(server.requests()[2].tool_names().is_empty());
    assert_eq!(
        files.closed.load(Ordering::SeqCst),
        0,
        "removed sets are not closed"
    );
}

#[tokio::test]
async fn a_set_tool_whose_name_is_taken_is_offered_under_the_sets_prefix_and_called_there() {
    let server = ScriptedServer::start([
        Reply::tool_call("c1", "files_read", r#"{"from":"set"}"#),
        Reply::text("ok"),
    ])
    .await
    .unwrap();
    let files = CountingSet::new("files", vec![echo("read"), echo("write")]);
    let runner = app_runner(
        agent("a", &server, false)
            .tool(echo("read"))
            .tool_set(files as DynToolSet),
    );
    let events = run(&runner, "s", "read", RunOptions::new()).await;
    no_errors(&events);
    let mut offered = server.requests()[0].tool_names();
    offered.sort();
    assert_eq!(offered, ["files_read", "read", "write"], "nothing dropped");
    let result = results(&events)[0];
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.content, r#"{"from":"set"}"#);
}

#[tokio::test]
async fn refresh_on_run_lists_tool_sets_every_run() {
    let server = ScriptedServer::start_with(|_| Reply::text("ok"))
        .await
        .unwrap();
    let set = CountingSet::new("files", vec![echo("read")]);
    let runner = app_runner(
        agent("a", &server, false)
            .tool_set(set.clone())
            .refresh_tool_sets_on_run(true),
    );
    for i in 0..3 {
        run(&runner, "s", &format!("run {i}"), RunOptions::new()).await;
    }
    assert_eq!(set.listed.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn changing_tool_sets_during_runs_is_safe() {
    let server = ScriptedServer::start_with(|_| Reply::text("ok"))
        .await
        .unwrap();
    let agent = Arc::new(agent("a", &server, false).build().unwrap());
    let runner = Runner::new("app", agent.clone());
    let changer = {
        let agent = agent.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                let set = CountingSet::new(&format!("set{}", i % 3), vec![echo(&format!("t{i}"))]);
                agent.add_tool_set(set);
                if i % 2 == 0 {
                    agent.remove_tool_set(&format!("set{}", (i + 1) % 3));
                }
                tokio::task::yield_now().await;
            }
        })
    };
    let runs: Vec<_> = (0..8)
        .map(|i| {
            let runner = runner.clone();
            tokio::spawn(
                async move { run(&runner, &format!("s{i}"), "hi", RunOptions::new()).await },
            )
        })
        .collect();
    for r in runs {
        no_errors(&r.await.unwrap());
    }
    changer.await.unwrap();
    assert!(agent.tool_set_names().len() <= 3);
}

#[tokio::test]
async fn streamed_deltas_concatenated_equal_the_final_message() {
    let text = "Streaming splits this sentence into many small pieces, ünïcödé included.";
    let server = ScriptedServer::start([Reply::text(text)]).await.unwrap();
    let runner = app_runner(agent("s", &server, true));
    let events = run(&runner, "s", "talk", RunOptions::new()).await;
    let chunks = of(&events, "model_delta");
    assert!(chunks.len() > 5, "the answer arrived in pieces");
    assert!(chunks.iter().all(|c| !c.is_persistent()));
    let joined: String = chunks.iter().map(|c| c.delta_text()).collect();
    assert_eq!(joined, text);
    assert_eq!(final_answer(&events), text);
    // Chunks are shown, not stored.
    let stored = runner
        .sessions()
        .events(&toolbelt_agent::SessionKey::new("app", "user", "s"))
        .await
        .unwrap();
    assert!(stored.iter().all(|e| e.kind.type_name() != "model_delta"));
    assert_eq!(stored.len(), events.len() - chunks.len());
}

#[tokio::test]
async fn a_rate_limited_call_is_retried_and_succeeds() {
    for stream in MODES {
        let server = ScriptedServer::start([Reply::rate_limited("0"), Reply::text("made it")])
            .await
            .unwrap();
        let runner = app_runner(agent("a", &server, stream));
        let events = run(&runner, "s", "hi", RunOptions::new()).await;
        no_errors(&events);
        assert_eq!(final_answer(&events), "made it");
        assert_eq!(server.requests().len(), 2);
    }
}

#[tokio::test]
async fn a_model_that_keeps_failing_ends_the_run_with_a_model_error() {
    let server = ScriptedServer::start_with(|_| Reply::status(503, "overloaded"))
        .await
        .unwrap();
    let runner = app_runner(agent("a", &server, false));
    let events = run(&runner, "s", "hi", RunOptions::new()).await;
    let errors = errors(&events);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, ErrorKind::Model);
    assert!(errors[0].1.contains("overloaded"), "{}", errors[0].1);
}

/// A runner over a streaming `calc` agent whose tool is `multiply`, keeping its sessions in
/// `sessions`.
fn calculator_on(
    server: &ScriptedServer,
    sessions: Arc<dyn toolbelt_agent::SessionService>,
) -> Runner {
    app_runner(agent("calc", server, true).tool(multiply(Arc::default())))
        .with_session_service(sessions)
}

#[tokio::test]
async fn a_session_in_sqlite_survives_a_new_runner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "multiply", r#"{"a":3,"b":5}"#),
        Reply::text("15"),
        Reply::text("You asked for 3 times 5."),
    ])
    .await
    .unwrap();
    {
        let sessions = toolbelt_agent::SqliteSessionService::open(&path).unwrap();
        let runner = calculator_on(&server, Arc::new(sessions));
        no_errors(&run(&runner, "s", "3*5?", RunOptions::new()).await);
    }
    // A new process would do exactly this: open the file, build a new runner.
    let sessions = Arc::new(toolbelt_agent::SqliteSessionService::open(&path).unwrap());
    let runner = calculator_on(&server, sessions.clone());
    no_errors(&run(&runner, "s", "what did I ask?", RunOptions::new()).await);

    let request = &server.requests()[2];
    assert_eq!(
        roles(request),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(request.messages()[1]["content"], "3*5?");
    assert_eq!(tool_messages(request), [("call_1".into(), "15.0".into())]);
    assert_eq!(request.messages()[4]["content"], "15");
    let ids = sessions.list_sessions("app", "user").await.unwrap();
    assert_eq!(ids, ["s"]);
}

#[tokio::test]
async fn a_tool_reads_its_call_id_and_invocation_from_its_context() {
    #[derive(Debug, Default, Clone)]
    struct Seen {
        call_id: String,
        agent: String,
        invocation: String,
        session: String,
        tenant: Value,
    }
    let server = ScriptedServer::start([
        Reply::tool_call("call_42", "whoami", "{}"),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let whoami = {
        let seen = seen.clone();
        FunctionTool::new(
            "whoami",
            "Who is calling",
            move |ctx: ToolContext, _: Args| {
                let seen = seen.clone();
                async move {
                    let inv =
                        Invocation::from_context(&ctx).ok_or(ToolError::failed("no invocation"))?;
                    *seen.lock().unwrap() = Seen {
                        call_id: ctx.call_id().unwrap_or_default().to_string(),
                        agent: inv.agent_name().to_string(),
                        invocation: inv.id().to_string(),
                        session: inv.session().session_id.clone(),
                        tenant: inv.runtime_state()["tenant"].clone(),
                    };
                    Ok::<_, ToolError>("ok")
                }
            },
        )
        .unwrap()
    };
    let runner = app_runner(agent("ctx", &server, false).tool(whoami));
    let options = RunOptions::new().state("tenant", json!("acme"));
    let events = run(&runner, "sess-7", "who?", options).await;
    no_errors(&events);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.call_id, "call_42");
    assert_eq!(seen.agent, "ctx");
    assert_eq!(seen.invocation, events[0].invocation_id);
    assert_eq!(seen.session, "sess-7");
    assert_eq!(seen.tenant, json!("acme"));
}

#[tokio::test]
async fn a_child_invocations_events_carry_the_parent_invocation_id() {
    let server = ScriptedServer::start([
        Reply::tool_call(
            "call_1",
            "ask_expert",
            r#"{"question":"capital of France?"}"#,
        ),
        Reply::text("Paris"), // the expert, in the child invocation
        Reply::text("The expert says Paris."),
    ])
    .await
    .unwrap();
    let expert: Arc<dyn Agent> = Arc::new(agent("expert", &server, true).build().unwrap());
    let child_events = Arc::new(Mutex::new(Vec::<Event>::new()));
    let parent_state = Arc::new(Mutex::new(Value::Null));

    /// Arguments of `ask_expert`.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Question {
        /// The question.
        question: String,
    }
    let ask_expert = {
        let (expert, child_events, parent_state) =
            (expert.clone(), child_events.clone(), parent_state.clone());
        FunctionTool::new(
            "ask_expert",
            "Asks the expert",
            move |ctx: ToolContext, q: Question| {
                let (expert, child_events, parent_state) =
                    (expert.clone(), child_events.clone(), parent_state.clone());
                async move {
                    let inv =
                        Invocation::from_context(&ctx).ok_or(ToolError::failed("no invocation"))?;
                    let child = inv
                        .child(expert.name())
                        .with_runtime_state("depth", json!(1));
                    let events = child
                        .run_child(expert, vec![Message::user(q.question)])
                        .collect_all()
                        .await;
                    let answer = final_answer(&events);
                    *parent_state.lock().unwrap() = json!(inv.runtime_state().get("depth"));
                    *child_events.lock().unwrap() = events;
                    Ok::<_, ToolError>(answer)
                }
            },
        )
        .unwrap()
    };
    let runner = app_runner(agent("boss", &server, false).tool(ask_expert));
    let events = run(&runner, "s", "ask the expert", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "The expert says Paris.");

    let parent_id = &events[0].invocation_id;
    let child_events = child_events.lock().unwrap().clone();
    assert!(!child_events.is_empty());
    for event in &child_events {
        assert_eq!(
            event.parent_invocation_id.as_deref(),
            Some(parent_id.as_str())
        );
        assert_ne!(&event.invocation_id, parent_id);
    }
    assert!(child_events.iter().any(|e| e.author == "expert"));
    assert_eq!(final_answer(&child_events), "Paris");
    // The child's runtime state is a copy: the parent never saw its change.
    assert_eq!(*parent_state.lock().unwrap(), Value::Null);
    // The child's conversation is its own: the session holds only the parent's.
    let stored = runner
        .sessions()
        .events(&toolbelt_agent::SessionKey::new("app", "user", "s"))
        .await
        .unwrap();
    assert!(stored.iter().all(|e| &e.invocation_id == parent_id));
    // The expert was asked only the question.
    assert_eq!(roles(&server.requests()[1]), ["system", "user"]);
}

#[tokio::test]
async fn dropping_the_event_stream_cancels_the_run_and_its_tools() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "wait", "{}")])
        .await
        .unwrap();
    let (wait, started_rx, cancelled) = wait_until_cancelled("cancelled");
    let runner = app_runner(agent("a", &server, false).tool(wait));
    let caller_token = tokio_util::sync::CancellationToken::new();
    let stream = runner.run(
        "u",
        "s",
        "wait",
        RunOptions::new().cancellation(caller_token.clone()),
    );
    started_rx.await.unwrap();
    drop(stream);
    toolbelt_testkit::eventually_async(
        "the tool seeing the cancellation",
        Duration::from_secs(2),
        || (cancelled.load(Ordering::SeqCst) == 1).then_some(()),
    )
    .await;
    assert!(
        !caller_token.is_cancelled(),
        "the caller's own token is left alone"
    );
}

#[tokio::test]
async fn an_interrupted_turn_is_sanitised_before_the_next_model_call() {
    use toolbelt_agent::history::MISSING_RESULT;
    let server = ScriptedServer::start([
        Reply::tool_calls([("a", "multiply", r#"{"a":1,"b":1}"#), ("b", "client", "{}")]),
        Reply::text("fine"),
    ])
    .await
    .unwrap();
    let runner = app_runner(agent("a", &server, false).tool(multiply(Arc::default())));
    let options = RunOptions::new().execution_filter(ExecutionFilter::pending_names(["client"]));
    run(&runner, "s", "go", options).await;
    // The caller never answers call `b`; the user just goes on.
    let events = run(&runner, "s", "never mind", RunOptions::new()).await;
    no_errors(&events);
    let request = &server.requests()[1];
    assert_eq!(
        roles(request),
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(
        tool_messages(request),
        [
            ("a".to_string(), "1.0".to_string()),
            ("b".to_string(), MISSING_RESULT.to_string())
        ]
    );
}

#[tokio::test]
async fn tool_retry_with_an_own_executor_is_a_configuration_error() {
    let server = ScriptedServer::start([]).await.unwrap();
    let executor = toolbelt_exec::Executor::new(Arc::new(toolbelt_exec::Registry::new()));
    let error = agent("a", &server, false)
        .executor(executor)
        .tool_retry(RetryPolicy::default())
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("tool_retry"), "{error}");
}

#[tokio::test]
async fn a_failing_tool_is_retried_by_the_tool_retry_policy() {
    let server =
        ScriptedServer::start([Reply::tool_call("c1", "flaky", "{}"), Reply::text("worked")])
            .await
            .unwrap();
    let attempts = Arc::new(AtomicUsize::new(0));
    let flaky = {
        let attempts = attempts.clone();
        FunctionTool::new("flaky", "Fails once", move |_ctx, _: Args| {
            let attempts = attempts.clone();
            async move {
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(ToolError::Transient("try again".into()));
                }
                Ok::<_, ToolError>("ok")
            }
        })
        .unwrap()
        .map_declaration(|d| d.idempotent())
    };
    let policy = RetryPolicy {
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..RetryPolicy::default()
    };
    let runner = app_runner(agent("a", &server, false).tool(flaky).tool_retry(policy));
    let events = run(&runner, "s", "go", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    let result = results(&events)[0];
    assert!(!result.is_error, "{result:?}");
}

#[tokio::test]
async fn every_event_the_caller_sees_is_already_in_the_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "multiply", r#"{"a":2,"b":2}"#),
        Reply::text("4"),
    ])
    .await
    .unwrap();
    let sessions = toolbelt_agent::SqliteSessionService::open(&path).unwrap();
    let runner = calculator_on(&server, Arc::new(sessions));
    // Another connection to the same file, as a second process (or the next start after a
    // crash) would see it.
    let observer = toolbelt_agent::SqliteSessionService::open(&path).unwrap();
    let key = toolbelt_agent::SessionKey::new("app", "user", "s");
    let mut events = runner.run("user", "s", "2*2", RunOptions::new());
    let mut checked = 0;
    while let Some(event) = events.recv().await {
        if !event.is_persistent() {
            continue;
        }
        let stored = observer.events(&key).await.unwrap();
        // The run goes on meanwhile, so later events may be there too.
        assert!(
            stored.iter().any(|e| e.id == event.id),
            "{} was shown before it was stored",
            event.kind.type_name()
        );
        checked += 1;
    }
    assert_eq!(checked, 5, "input, call, result, answer, completion");
}

#[tokio::test]
async fn a_resume_goes_back_to_the_sub_agent_whose_calls_were_handed_back() {
    let server = ScriptedServer::start([
        Reply::tool_call("t1", TRANSFER_TO_AGENT, r#"{"agent_name":"browser"}"#),
        Reply::tool_call("b1", "open_tab", r#"{"url":"http://127.0.0.1/"}"#),
        Reply::text("The tab shows the home page."),
    ])
    .await
    .unwrap();
    let browser = agent("browser", &server, false).build().unwrap();
    let root = agent("router", &server, false)
        .sub_agent(Arc::new(browser))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(root));
    let options = RunOptions::new().execution_filter(ExecutionFilter::pending_names(["open_tab"]));
    let events = run(&runner, "s", "open the home page", options.clone()).await;
    no_errors(&events);
    let handed_back = of(&events, "pending_tool_calls").last().copied().unwrap();
    assert_eq!(handed_back.author, "browser");
    assert_eq!(pending(&events)[0].id, "b1");

    let answer = Message::tool("b1", "open_tab", "home page");
    let resumed = runner.run("user", "s", answer, options).collect_all().await;
    no_errors(&resumed);
    let completion = of(&resumed, "model_response")[0];
    assert_eq!(
        completion.author, "browser",
        "the agent that asked gets the results"
    );
    assert_eq!(
        server.requests()[2].messages()[0]["content"],
        "You are browser."
    );
}

#[tokio::test]
async fn a_cancelled_run_stops_its_tools_and_still_ends_with_run_completed() {
    let server = ScriptedServer::start([Reply::tool_call("c1", "wait", "{}")])
        .await
        .unwrap();
    let (wait, started_rx, _cancelled) = wait_until_cancelled("stopped");
    let runner = app_runner(agent("a", &server, false).tool(wait));
    let events = runner.run("u", "s", "wait", RunOptions::new());
    started_rx.await.unwrap();
    events.cancel();
    let rest = events.collect_all().await;
    assert!(
        rest.last().is_some_and(Event::is_run_completed),
        "{rest:#?}"
    );
    assert!(of(&rest, "error").is_empty(), "cancelling is not an error");
    assert_eq!(
        server.requests().len(),
        1,
        "no model call after the cancellation"
    );
}

#[tokio::test]
async fn a_renamed_tool_is_one_warning_event_for_the_whole_run() {
    let server = ScriptedServer::start([
        Reply::tool_call("call_1", "calc_multiply", r#"{"a":2,"b":3}"#),
        Reply::tool_call("call_2", "calc_multiply", r#"{"a":6,"b":7}"#),
        Reply::text("42"),
    ])
    .await
    .unwrap();
    let config =
        toolbelt_model::OpenAiConfig::new(server.base_url(), "claude-x").with_api_key("a-key");
    let model = toolbelt_model::connect(toolbelt_model::Provider::Anthropic, config).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let tool = FunctionTool::new(
        "calc.multiply",
        "Multiplies two numbers",
        move |_ctx: ToolContext, f: Factors| {
            let calls = counted.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(f.a * f.b)
            }
        },
    )
    .unwrap();
    let agent = toolbelt_agent::LlmAgent::builder("calc")
        .model_arc(model)
        .tool(tool)
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent));
    let events = run(&runner, "s1", "2 × 3, then 6 × 7?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "calls to the wire name ran the tool"
    );
    let warnings: Vec<String> = of(&events, "warning")
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "once, not once per turn: {warnings:?}");
    assert!(
        warnings[0].contains("calc.multiply") && warnings[0].contains("calc_multiply"),
        "{warnings:?}"
    );
    assert_eq!(server.requests().len(), 3);
    assert!(server.requests()[0].path.ends_with("/messages"));
}
