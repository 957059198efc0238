//! Reducers: each field merged by its own rule, updates as JSON deltas.

use std::sync::Arc;

use serde_json::json;
use toolbelt_agent::InMemorySessionService;
use toolbelt_graph::{END, Reducer, START, State, StateGraph};
use toolbelt_model::Message;

use crate::graph_support::{Chat, ChatUpdate, assert_no_errors, last_state, run, runner};

/// Keeps the larger value.
pub struct Max;

impl Reducer<u32> for Max {
    fn reduce(current: &mut u32, update: u32) {
        *current = (*current).max(update);
    }
}

toolbelt_graph::state! {
    struct Scores => ScoresUpdate {
        best: u32 => Max,
        tags: Vec<String> => Append,
        total: u32 => Sum,
        last: Option<u32>,
    }
}

#[test]
fn each_field_merges_with_its_reducer() {
    let mut scores = Scores::default();
    scores.apply(
        ScoresUpdate::default()
            .best(7)
            .tags(vec!["a".into()])
            .total(7)
            .last(Some(7)),
    );
    scores.apply(
        ScoresUpdate::default()
            .best(3)
            .tags(vec!["b".into()])
            .total(3),
    );
    assert_eq!(scores.best, 7, "custom reducer keeps the maximum");
    assert_eq!(scores.tags, ["a", "b"], "Append appends");
    assert_eq!(scores.total, 10, "Sum adds");
    assert_eq!(scores.last, Some(7), "a field left unset is not replaced");
    scores.apply(ScoresUpdate::default().last(None));
    assert_eq!(scores.last, None, "Replace replaces, even with None");
    assert_eq!(
        Scores::append_messages(Vec::new()),
        None,
        "no conversation field"
    );
}

#[test]
fn an_update_serialises_only_the_fields_it_sets() {
    let update = ChatUpdate::default().steps(2);
    assert_eq!(serde_json::to_value(&update).unwrap(), json!({"steps": 2}));
    let update = Chat::append_messages(vec![Message::user("hi")]).unwrap();
    assert_eq!(update.messages.as_ref().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_nodes_updates_merge_in_declaration_order_and_sum() {
    // Three nodes in one super-step: all see the same state; counters add up; the value
    // field ends with the update of the node declared last.
    let graph = StateGraph::<Chat>::new("merge")
        .function("a", |ctx| async move {
            assert_eq!(
                ctx.state().steps,
                0,
                "nodes of a step do not see each other"
            );
            Ok(ChatUpdate::default().steps(1).note("a".into()))
        })
        .function("b", |_ctx| async {
            Ok(ChatUpdate::default().steps(10).note("b".into()))
        })
        .function("c", |_ctx| async {
            Ok(ChatUpdate::default()
                .steps(100)
                .messages(vec![Message::assistant("from c")]))
        })
        .edge(START, "c")
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .edge("c", END)
        .build()
        .unwrap();
    let runner = runner(graph, Arc::new(InMemorySessionService::new()));
    let events = run(&runner, "hello").await;
    assert_no_errors(&events);
    let chat: Chat = last_state(&events);
    assert_eq!(chat.steps, 111);
    assert_eq!(chat.note, "b");
    let texts: Vec<&str> = chat.messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        texts,
        ["hello", "from c"],
        "the run's input is appended first"
    );
}
