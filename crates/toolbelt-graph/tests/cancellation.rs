//! Cancelling a graph run: the running nodes and tools stop, the run still completes, no
//! error is reported, and the next run resumes at the unfinished step.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use toolbelt_agent::{Event, InMemorySessionService, RunOptions};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_graph::{END, START, StateGraph, ToolsNode};
use toolbelt_model::testing::{Reply, ScriptedServer};

use crate::graph_support::{
    Chat, ChatUpdate, NoArgs, agent_loop, assert_no_errors, ended, errors, last_state, run, runner,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_node_stops_and_the_next_run_resumes_its_step_only() {
    let first_runs = Arc::new(AtomicUsize::new(0));
    let block = Arc::new(AtomicBool::new(true));
    let (started_tx, started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let graph = {
        let (first_runs, block) = (first_runs.clone(), block.clone());
        StateGraph::<Chat>::new("slow")
            .function("first", move |_ctx| {
                first_runs.fetch_add(1, Ordering::SeqCst);
                async { Ok(ChatUpdate::default().steps(1)) }
            })
            .function("slow", move |_ctx| {
                let (block, started_tx) = (block.load(Ordering::SeqCst), started_tx.clone());
                async move {
                    if block {
                        let _ = started_tx.send(());
                        std::future::pending::<()>().await;
                    }
                    Ok(ChatUpdate::default().steps(10))
                }
            })
            .edge(START, "first")
            .edge("first", "slow")
            .edge("slow", END)
            .build()
            .unwrap()
    };
    let runner = runner(graph, Arc::new(InMemorySessionService::new()));
    let stream = runner.run("u1", "s1", "go", RunOptions::new());
    let mut started_rx = started_rx;
    started_rx.recv().await.expect("slow started");
    stream.cancel();
    let events = stream.collect_all().await;
    assert!(
        events.last().is_some_and(Event::is_run_completed),
        "{events:#?}"
    );
    assert!(
        errors(&events).is_empty(),
        "cancelling is not an error: {:?}",
        errors(&events)
    );
    assert_eq!(ended(&events), ["first"], "slow never ended");

    block.store(false, Ordering::SeqCst);
    let events = run(&runner, "again").await;
    assert_no_errors(&events);
    assert_eq!(
        ended(&events),
        ["slow"],
        "the finished step is not run again"
    );
    assert_eq!(first_runs.load(Ordering::SeqCst), 1);
    assert_eq!(last_state::<Chat>(&events).steps, 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_tools_node_cancels_its_running_tool() {
    let server = ScriptedServer::start([Reply::tool_call("w1", "wait", "{}")])
        .await
        .unwrap();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let counter = saw_cancel.clone();
    let wait = FunctionTool::new("wait", "Waits", move |ctx: ToolContext, _: NoArgs| {
        let (started_tx, counter) = (started_tx.clone(), counter.clone());
        async move {
            let _ = started_tx.send(());
            ctx.cancelled().await;
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>("stopped")
        }
    })
    .unwrap();
    let tools = ToolsNode::builder().tool(wait).build().unwrap();
    let runner = runner(
        agent_loop("waiting", &server, tools),
        Arc::new(InMemorySessionService::new()),
    );
    let stream = runner.run("u1", "s1", "wait", RunOptions::new());
    started_rx.recv().await.expect("the tool started");
    stream.cancel();
    let events = stream.collect_all().await;
    assert!(
        events.last().is_some_and(Event::is_run_completed),
        "{events:#?}"
    );
    assert!(errors(&events).is_empty(), "{:?}", errors(&events));
    assert_eq!(
        saw_cancel.load(Ordering::SeqCst),
        1,
        "the tool saw its cancellation"
    );
    assert_eq!(ended(&events), ["model"], "the tools step did not end");
    assert_eq!(
        server.requests().len(),
        1,
        "no model call after the cancellation"
    );
}
