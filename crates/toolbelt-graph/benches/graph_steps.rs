//! Graph overhead against LangGraph, side by side in one run on one scripted
//! OpenAI-compatible server: seconds per super-step (a one-node counter loop, checkpointed
//! after every step) and per three-node tool loop (model → tools → model, one tool call),
//! with the time of the loop's two bare model calls, so the difference is the framework's.
//!
//! `cargo bench -p toolbelt-graph --bench graph_steps` (LangGraph from
//! tests/peers/.venv; set GRAPH_BENCH_NO_PEER=1 to skip it).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use toolbelt_agent::{InMemorySessionService, RunOptions, Runner};
use toolbelt_core::{FunctionTool, ToolContext, ToolError};
use toolbelt_graph::{END, ModelNode, START, StateGraph, ToolsNode, state, tools_condition};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{Message, Model, OpenAiConfig, OpenAiModel, Request};

const STEPS: u32 = 200;
const LOOPS: usize = 50;

state! {
    struct Chat => ChatUpdate {
        messages: Vec<Message> => Messages,
        steps: u32 => Sum,
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Factors {
    a: f64,
    b: f64,
}

fn loop_replies(n: usize) -> Vec<Reply> {
    (0..n)
        .flat_map(|_| {
            [
                Reply::tool_call("c1", "multiply", r#"{"a": 6, "b": 7}"#),
                Reply::text("42"),
            ]
        })
        .collect()
}

async fn toolbelt_side(server: &ScriptedServer) -> (f64, f64, f64) {
    let counter = StateGraph::<Chat>::new("counter")
        .function("tick", |_ctx| async { Ok(ChatUpdate::default().steps(1)) })
        .edge(START, "tick")
        .conditional_edge("tick", ["tick", END], |c: &Chat| {
            if c.steps < STEPS {
                "tick".into()
            } else {
                END.into()
            }
        })
        .max_steps(u64::from(STEPS) + 10)
        .build()
        .unwrap();
    let runner = Runner::new("bench", Arc::new(counter))
        .with_session_service(Arc::new(InMemorySessionService::new()));
    let mut best = Duration::MAX;
    for i in 0..20 {
        let start = Instant::now();
        let events = runner
            .run("u", &format!("s{i}"), "go", RunOptions::new())
            .collect_all()
            .await;
        best = best.min(start.elapsed());
        assert!(events.iter().all(|e| e.error().is_none()));
    }
    let per_step = best.as_secs_f64() / f64::from(STEPS);

    let model = || OpenAiModel::new(OpenAiConfig::new(server.base_url(), "scripted")).unwrap();
    let multiply = FunctionTool::new(
        "multiply",
        "Multiplies two numbers.",
        |_c: ToolContext, f: Factors| async move { Ok::<_, ToolError>(f.a * f.b) },
    )
    .unwrap();
    let tools = ToolsNode::builder().tool(multiply).build().unwrap();
    let graph = StateGraph::<Chat>::new("loop")
        .node("model", ModelNode::new(model()).tools_from(&tools))
        .node("tools", tools)
        .edge(START, "model")
        .conditional_edge("model", ["tools", END], tools_condition("tools"))
        .edge("tools", "model")
        .build()
        .unwrap();
    let runner = Runner::new("bench", Arc::new(graph))
        .with_session_service(Arc::new(InMemorySessionService::new()));
    server.push(loop_replies(LOOPS));
    let start = Instant::now();
    for i in 0..LOOPS {
        let events = runner
            .run(
                "u",
                &format!("loop{i}"),
                "What is 6 times 7?",
                RunOptions::new(),
            )
            .collect_all()
            .await;
        let answer = events.iter().rev().find_map(|e| e.message()).unwrap();
        assert_eq!(answer.content, "42");
    }
    let per_loop = start.elapsed().as_secs_f64() / LOOPS as f64;

    let bare = model();
    server.push((0..2 * LOOPS).map(|_| Reply::text("42")));
    let start = Instant::now();
    for _ in 0..2 * LOOPS {
        let mut stream = bare
            .generate(Request::new(vec![Message::user("x")]))
            .await
            .unwrap();
        while stream.next().await.is_some() {}
    }
    let bare_pair = start.elapsed().as_secs_f64() / LOOPS as f64;
    (per_step, per_loop, bare_pair)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(ScriptedServer::start([])).unwrap();
    let (step, tloop, tbare) = runtime.block_on(toolbelt_side(&server));
    let us = |s: f64| s * 1e6;
    println!(
        "toolbelt-graph: {:.1} µs per super-step (checkpointed in memory)",
        us(step)
    );
    println!(
        "toolbelt-graph: {:.0} µs per tool loop, {:.0} µs of it the two bare model calls, overhead {:.0} µs",
        us(tloop),
        us(tbare),
        us(tloop - tbare)
    );
    if std::env::var_os("GRAPH_BENCH_NO_PEER").is_some() {
        return;
    }
    let python = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/peers/.venv/bin/python"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/langgraph_peer.py");
    server.push(loop_replies(LOOPS));
    server.push((0..2 * LOOPS).map(|_| Reply::text("42")));
    let output = Command::new(python)
        .args([
            script,
            &server.base_url(),
            &STEPS.to_string(),
            &LOOPS.to_string(),
        ])
        .output()
        .expect("tests/peers/.venv/bin/python runs (install the peers with .ci/install-peers)");
    assert!(
        output.status.success(),
        "langgraph: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let peer: serde_json::Value = serde_json::from_slice(output.stdout.trim_ascii()).unwrap();
    let f = |k: &str| peer[k].as_f64().unwrap();
    let (lstep, lstep_bare, lloop, lbare) = (
        f("step_checkpointer_s"),
        f("step_no_checkpointer_s"),
        f("loop_s"),
        f("bare_pair_s"),
    );
    println!(
        "langgraph: {:.1} µs per super-step with InMemorySaver ({:.1} µs without); {:.1}× toolbelt's",
        us(lstep),
        us(lstep_bare),
        lstep / step
    );
    println!(
        "langgraph: {:.0} µs per tool loop, {:.0} µs of it the two bare model calls, overhead {:.0} µs; {:.1}× toolbelt's overhead",
        us(lloop),
        us(lbare),
        us(lloop - lbare),
        (lloop - lbare) / (tloop - tbare)
    );
}
