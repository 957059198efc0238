//! The tools node: the last assistant message's calls through the executor, with
//! `tool_call_id` in each call's context, Serial/Parallel mode and a retry policy per node;
//! the agent loop as a graph on the scripted OpenAI-compatible server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use toolbelt_agent::InMemorySessionService;
use toolbelt_core::{FunctionTool, RetryPolicy, ToolContext, ToolError};
use toolbelt_graph::ToolsNode;
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::graph_support::{
    NoArgs, agent_loop, answer, assert_no_errors, ended, results, run, runner,
};

/// `whoami`: answers the `tool_call_id` its context carries.
fn whoami() -> FunctionTool {
    FunctionTool::new(
        "whoami",
        "Names the call",
        |ctx: ToolContext, _: NoArgs| async move {
            Ok::<_, ToolError>(format!("call {}", ctx.call_id().unwrap_or("none")))
        },
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_node_gives_each_call_its_tool_call_id_and_the_model_gets_the_results() {
    let server = ScriptedServer::start([
        Reply::tool_calls([("call_A", "whoami", "{}"), ("call_B", "whoami", "{}")]),
        Reply::text("both answered"),
    ])
    .await
    .unwrap();
    let tools = ToolsNode::builder().tool(whoami()).build().unwrap();
    let graph = agent_loop("ids", &server, tools);
    let events = run(
        &runner(graph, Arc::new(InMemorySessionService::new())),
        "who?",
    )
    .await;
    assert_no_errors(&events);
    assert_eq!(ended(&events), ["model", "tools", "model"]);
    let results = results(&events);
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r.call_id.as_str(), r.content.as_str()))
        .collect();
    assert_eq!(got, [("call_A", "call call_A"), ("call_B", "call call_B")]);
    assert_eq!(answer(&events), "both answered");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].tool_names(),
        ["whoami"],
        "the model node declares the tools"
    );
    let tool_messages: Vec<(String, String)> = requests[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        tool_messages,
        [
            ("call_A".to_string(), "call call_A".to_string()),
            ("call_B".to_string(), "call call_B".to_string())
        ],
        "the results are appended to the conversation in call order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_tools_node_answers_a_call_to_a_tool_it_keeps_out_as_unknown() {
    let server = ScriptedServer::start([
        Reply::tool_calls([("call_A", "whoami", "{}"), ("call_B", "secret", "{}")]),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let secret_calls = Arc::new(AtomicUsize::new(0));
    let counted = secret_calls.clone();
    let secret = FunctionTool::new(
        "secret",
        "Not for this node",
        move |_ctx: ToolContext, _: NoArgs| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>("leaked")
            }
        },
    )
    .unwrap();
    let tools = ToolsNode::builder()
        .tool(whoami())
        .tool(secret)
        .filter(toolbelt_core::ToolFilter::include_names(["whoami"]))
        .build()
        .unwrap();
    let graph = agent_loop("filtered", &server, tools);
    let events = run(
        &runner(graph, Arc::new(InMemorySessionService::new())),
        "who?",
    )
    .await;
    let results = results(&events);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].content, "call call_A");
    assert!(results[1].is_error, "{:?}", results[1]);
    assert!(
        results[1].content.contains("secret"),
        "{}",
        results[1].content
    );
    assert_eq!(
        secret_calls.load(Ordering::SeqCst),
        0,
        "the kept-out tool never ran"
    );
}

/// `meet`: waits until `barrier` is full, recording how many calls were in flight at once.
fn meet(
    barrier: Option<Arc<tokio::sync::Barrier>>,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
) -> FunctionTool {
    FunctionTool::new("meet", "Meets", move |_ctx: ToolContext, _: NoArgs| {
        let (barrier, in_flight, most) = (barrier.clone(), in_flight.clone(), most.clone());
        async move {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            match barrier {
                Some(barrier) => {
                    barrier.wait().await;
                }
                None => tokio::time::sleep(Duration::from_millis(20)).await,
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, ToolError>("met")
        }
    })
    .unwrap()
    // Undeclared tools take turns on their set's lane even in a parallel batch.
    .map_declaration(|d| d.concurrency_safe(true))
}

fn two_meetings() -> Reply {
    Reply::tool_calls([("m1", "meet", "{}"), ("m2", "meet", "{}")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_tools_node_runs_the_calls_together_and_a_serial_one_in_turn() {
    // Parallel: each call waits for the other at a barrier, so they can only finish together.
    let server = ScriptedServer::start([two_meetings(), Reply::text("met twice")])
        .await
        .unwrap();
    let (in_flight, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let barrier = Some(Arc::new(tokio::sync::Barrier::new(2)));
    let tools = ToolsNode::builder()
        .tool(meet(barrier, in_flight.clone(), most.clone()))
        .parallel(true)
        .build()
        .unwrap();
    let graph = agent_loop("parallel", &server, tools);
    let events = tokio::time::timeout(
        Duration::from_secs(30),
        run(
            &runner(graph, Arc::new(InMemorySessionService::new())),
            "meet",
        ),
    )
    .await
    .expect("the parallel calls met at the barrier (a serial node would wait forever)");
    assert_no_errors(&events);
    assert_eq!(most.load(Ordering::SeqCst), 2);
    let ids: Vec<String> = results(&events).into_iter().map(|r| r.call_id).collect();
    assert_eq!(ids.len(), 2);

    // Serial: never two at once, results in call order.
    let server = ScriptedServer::start([two_meetings(), Reply::text("met twice")])
        .await
        .unwrap();
    let (in_flight, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let tools = ToolsNode::builder()
        .tool(meet(None, in_flight, most.clone()))
        .parallel(false)
        .build()
        .unwrap();
    let graph = agent_loop("serial", &server, tools);
    let events = run(
        &runner(graph, Arc::new(InMemorySessionService::new())),
        "meet",
    )
    .await;
    assert_no_errors(&events);
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "a serial node runs one call at a time"
    );
    let ids: Vec<String> = results(&events).into_iter().map(|r| r.call_id).collect();
    assert_eq!(ids, ["m1", "m2"]);
}

/// `flaky`: its first call fails with a connection reset (transient), later ones succeed.
fn flaky(calls: Arc<AtomicUsize>) -> FunctionTool {
    FunctionTool::new(
        "flaky",
        "Fails once",
        move |_ctx: ToolContext, _: NoArgs| {
            let calls = calls.clone();
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(ToolError::failed(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "connection reset by peer",
                    )));
                }
                Ok("fine")
            }
        },
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_policy_is_per_tools_node() {
    let policy = RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..RetryPolicy::default()
    };
    // The same tool in two graphs: the node with the policy retries it, the one without does not.
    let server = ScriptedServer::start([Reply::tool_call("r1", "flaky", "{}"), Reply::text("ok")])
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let tools = ToolsNode::builder()
        .tool(flaky(calls.clone()))
        .retry(policy)
        .build()
        .unwrap();
    let events = run(
        &runner(
            agent_loop("retrying", &server, tools),
            Arc::new(InMemorySessionService::new()),
        ),
        "go",
    )
    .await;
    assert_no_errors(&events);
    let results = results(&events);
    assert_eq!(results.len(), 1, "one result for the retried call");
    assert!(!results[0].is_error, "{:?}", results[0]);
    assert_eq!(results[0].content, "fine");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "failed once, retried once");

    let server = ScriptedServer::start([
        Reply::tool_call("r1", "flaky", "{}"),
        Reply::text("it failed"),
    ])
    .await
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let tools = ToolsNode::builder()
        .tool(flaky(calls.clone()))
        .build()
        .unwrap();
    let events = run(
        &runner(
            agent_loop("once", &server, tools),
            Arc::new(InMemorySessionService::new()),
        ),
        "go",
    )
    .await;
    let results = crate::graph_support::results(&events);
    assert!(
        results[0].is_error,
        "without a policy the failure goes to the model"
    );
    assert!(
        results[0].content.contains("connection reset"),
        "{}",
        results[0].content
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(answer(&events), "it failed");
}

#[test]
fn a_tools_node_refuses_retry_beside_its_own_executor_and_duplicate_names() {
    let executor =
        toolbelt_exec::Executor::builder(Arc::new(toolbelt_exec::Registry::new())).build();
    let error = ToolsNode::builder()
        .executor(executor)
        .retry(RetryPolicy::default())
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("configure that one instead"),
        "{error}"
    );
    let error = ToolsNode::builder()
        .tool(whoami())
        .tool(whoami())
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("whoami"), "{error}");
}
