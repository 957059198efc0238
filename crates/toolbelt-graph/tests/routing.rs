//! Conditional routing, fan-out and join, super-step by super-step.

use std::sync::Arc;

use toolbelt_agent::{ErrorKind, EventKind, InMemorySessionService};
use toolbelt_graph::{END, START, StateGraph};

use crate::graph_support::{
    Chat, ChatUpdate, assert_no_errors, ended, errors, last_state, run, runner,
};

fn memory() -> Arc<InMemorySessionService> {
    Arc::new(InMemorySessionService::new())
}

/// The step of each `node_started` event, with its node.
fn started(events: &[toolbelt_agent::Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeStarted { node, step } => Some((*step, node.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_edge_routes_on_the_merged_state() {
    // classify writes the note; the router reads it after the merge and picks a branch.
    let graph = |text: &'static str| {
        StateGraph::<Chat>::new("triage")
            .function("classify", move |_ctx| async move {
                Ok(ChatUpdate::default().note(text.into()))
            })
            .function("refund", |_ctx| async {
                Ok(ChatUpdate::default().steps(1))
            })
            .function("answer", |_ctx| async {
                Ok(ChatUpdate::default().steps(10))
            })
            .edge(START, "classify")
            .conditional_edge(
                "classify",
                ["refund", "answer", END],
                |chat: &Chat| match chat.note.as_str() {
                    "money back" => "refund".into(),
                    "question" => "answer".into(),
                    _ => END.into(),
                },
            )
            .edge("refund", END)
            .edge("answer", END)
            .build()
            .unwrap()
    };
    for (note, path, steps) in [
        ("money back", vec!["classify", "refund"], 1),
        ("question", vec!["classify", "answer"], 10),
        ("spam", vec!["classify"], 0),
    ] {
        let events = run(&runner(graph(note), memory()), "hi").await;
        assert_no_errors(&events);
        assert_eq!(ended(&events), path, "route for {note:?}");
        assert_eq!(last_state::<Chat>(&events).steps, steps);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_runs_until_its_condition_sends_it_to_end() {
    let graph = StateGraph::<Chat>::new("counter")
        .function("tick", |_ctx| async { Ok(ChatUpdate::default().steps(1)) })
        .edge(START, "tick")
        .conditional_edge("tick", ["tick", END], |chat: &Chat| {
            if chat.steps < 4 {
                "tick".into()
            } else {
                END.into()
            }
        })
        .build()
        .unwrap();
    let events = run(&runner(graph, memory()), "go").await;
    assert_no_errors(&events);
    assert_eq!(ended(&events), ["tick"; 4]);
    let steps: Vec<u64> = started(&events).into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, [0, 1, 2, 3], "one super-step per tick");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_runs_branches_in_one_step_and_the_join_waits_for_all() {
    // a fans out to b and c; c takes two steps (c then c2); the join d waits for b and c2.
    let graph = StateGraph::<Chat>::new("fan")
        .function("a", |_ctx| async { Ok(ChatUpdate::default().steps(1)) })
        .function("b", |_ctx| async { Ok(ChatUpdate::default().steps(10)) })
        .function("c", |_ctx| async { Ok(ChatUpdate::default().steps(100)) })
        .function("c2", |_ctx| async { Ok(ChatUpdate::default().steps(1000)) })
        .function("d", |ctx| async move {
            // The join sees every branch's update.
            Ok(ChatUpdate::default().note(format!("d saw {}", ctx.state().steps)))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("a", "c")
        .edge("c", "c2")
        .join(["b", "c2"], "d")
        .edge("d", END)
        .build()
        .unwrap();
    let events = run(&runner(graph, memory()), "go").await;
    assert_no_errors(&events);
    let started = started(&events);
    assert_eq!(
        started,
        [
            (0, "a".to_string()),
            (1, "b".to_string()),
            (1, "c".to_string()),
            (2, "c2".to_string()),
            (3, "d".to_string()),
        ],
        "b and c share step 1; d runs once, after c2"
    );
    let chat: Chat = last_state(&events);
    assert_eq!(chat.note, "d saw 1111");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_naming_an_undeclared_target_ends_the_run_with_a_node_error() {
    let graph = StateGraph::<Chat>::new("bad-route")
        .function("a", |_ctx| async { Ok(ChatUpdate::default()) })
        .function("b", |_ctx| async { Ok(ChatUpdate::default()) })
        .edge(START, "a")
        .conditional_edge("a", ["b"], |_chat: &Chat| "elsewhere".into())
        .edge("b", END)
        .build()
        .unwrap();
    let events = run(&runner(graph, memory()), "go").await;
    let errors = errors(&events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, ErrorKind::Node);
    assert!(
        errors[0].1.contains("\"elsewhere\"") && errors[0].1.contains("declared targets (b)"),
        "{}",
        errors[0].1
    );
    assert_eq!(ended(&events), ["a"], "b never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_node_and_a_runaway_loop_are_node_errors() {
    let failing = StateGraph::<Chat>::new("failing")
        .function("boom", |_ctx| async {
            Err(toolbelt_graph::NodeError::failed("disk full"))
        })
        .edge(START, "boom")
        .edge("boom", END)
        .build()
        .unwrap();
    let events = run(&runner(failing, memory()), "go").await;
    let errors = errors(&events);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, ErrorKind::Node);
    assert!(
        errors[0].1.contains("node boom failed: disk full"),
        "{}",
        errors[0].1
    );

    let runaway = StateGraph::<Chat>::new("runaway")
        .function("spin", |_ctx| async { Ok(ChatUpdate::default().steps(1)) })
        .edge(START, "spin")
        .edge("spin", "spin")
        .max_steps(5)
        .build()
        .unwrap();
    let events = run(&runner(runaway, memory()), "go").await;
    let errors = crate::graph_support::errors(&events);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].1.contains("after 5 super-steps"),
        "{}",
        errors[0].1
    );
    assert_eq!(ended(&events).len(), 5);
}
