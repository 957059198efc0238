//! What `StateGraph::build` refuses, each problem named.

use toolbelt_agent::Agent;
use toolbelt_graph::{END, Problem, START, StateGraph, ToolsNode};

use crate::graph_support::{Chat, ChatUpdate};

toolbelt_graph::state! {
    /// A state without a conversation.
    struct Plain => PlainUpdate {
        n: u32 => Sum,
    }
}

async fn ok(
    _ctx: toolbelt_graph::NodeContext<Chat>,
) -> Result<ChatUpdate, toolbelt_graph::NodeError> {
    Ok(ChatUpdate::default())
}

#[test]
fn every_problem_is_named_in_one_error() {
    let error = StateGraph::<Chat>::new("broken")
        .function("a", ok)
        .function("island", ok)
        .function("dead_end", ok)
        .edge(START, "a")
        .edge("a", "ghost")
        .edge("a", "dead_end")
        .edge("island", END)
        .build()
        .unwrap_err();
    assert_eq!(error.graph, "broken");
    assert_eq!(
        error.problems,
        [
            Problem::MissingNode {
                from: "a".into(),
                to: "ghost".into(),
                missing: "ghost".into()
            },
            Problem::Unreachable("island".into()),
            Problem::NoWayOut("dead_end".into()),
        ]
    );
    let text = error.to_string();
    assert!(text.starts_with("graph broken: "), "{text}");
    assert!(text.contains("ghost, which is not a node"), "{text}");
    assert!(
        text.contains("node island is unreachable from START"),
        "{text}"
    );
    assert!(text.contains("node dead_end has no way out"), "{text}");
}

#[test]
fn names_entry_targets_and_conversation_are_checked() {
    let error = StateGraph::<Chat>::new("g")
        .function("a", ok)
        .function("a", ok)
        .function(END, ok)
        .edge("a", END)
        .build()
        .unwrap_err();
    assert!(
        error.problems.contains(&Problem::DuplicateNode("a".into())),
        "{error}"
    );
    assert!(
        error.problems.contains(&Problem::ReservedName(END.into())),
        "{error}"
    );
    assert!(error.problems.contains(&Problem::NoEntry), "{error}");

    let error = StateGraph::<Chat>::new("g")
        .function("a", ok)
        .edge(START, "a")
        .conditional_edge("a", Vec::<String>::new(), |_c: &Chat| END.into())
        .build()
        .unwrap_err();
    assert_eq!(error.problems, [Problem::NoTargets("a".into())]);

    let error = StateGraph::<Plain>::new("plain")
        .node("tools", ToolsNode::new([]).unwrap())
        .edge(START, "tools")
        .edge("tools", END)
        .build()
        .unwrap_err();
    assert_eq!(error.problems, [Problem::NoMessages("tools".into())]);
    assert!(error.to_string().contains("=> Messages"), "{error}");
}

#[test]
fn a_valid_graph_builds_and_draws_as_mermaid() {
    let graph = StateGraph::<Chat>::new("loop")
        .description("a loop")
        .function("work", ok)
        .node("tools", ToolsNode::new([]).unwrap())
        .edge(START, "work")
        .conditional_edge("work", ["tools", END], |_c: &Chat| END.into())
        .edge("tools", "work")
        .build()
        .unwrap();
    assert_eq!(graph.name(), "loop");
    assert_eq!(graph.description(), "a loop");
    assert_eq!(
        graph.mermaid(),
        "flowchart TD\n    __start__([START])\n    n0[\"work\"]\n    n1[[\"tools\"]]\n    \
         __end__([END])\n    __start__ --> n0\n    n0 -.-> n1\n    n0 -.-> __end__\n    \
         n1 --> n0\n",
        "static edges solid, conditional ones dotted, the tools node a subroutine box"
    );
}
