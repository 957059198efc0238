//! # toolbelt-graph: workflows as typed state graphs
//!
//! A [`StateGraph`] declares nodes over a typed [`State`] (written with [`state!`]: one
//! [`Reducer`] per field, [`Replace`] by default, [`Append`] for lists, [`Sum`] for
//! counters), static edges, conditional edges ([`StateGraph::conditional_edge`], with their
//! targets declared), fan-out (several edges from one node) and joins
//! ([`StateGraph::join`]: wait for all). [`StateGraph::build`] checks it and names every
//! problem ([`BuildError`]). It runs in super-steps: the nodes of one step run concurrently
//! on the same state, their updates are merged in declaration order, and the edges of the
//! nodes that ran give the next step.
//!
//! Nodes: async functions ([`StateGraph::function`]), a [`ModelNode`] (one model call on the
//! conversation), a [`ToolsNode`] (the last assistant message's tool calls through one
//! [`toolbelt_exec::Executor`], with its own retry policy and Serial / Parallel / Mixed
//! mode), an [`AgentNode`] (any [`Agent`](toolbelt_agent::Agent)) and a [`Subgraph`].
//!
//! A built [`Graph`] is an [`Agent`](toolbelt_agent::Agent): it runs under a
//! [`Runner`](toolbelt_agent::Runner) (events `node_started`, `node_ended` with the state
//! delta, the nodes' model responses and tool results; callbacks and plugins), inside an
//! [`AgentTool`](toolbelt_agent::AgentTool), or as a node of another graph. After every
//! super-step it stores a `checkpoint` event in the session, so a node can ask a person
//! ([`NodeContext::interrupt`]) and a later run, in any process, resumes it with the answer;
//! a crashed or cancelled run resumes at the unfinished step. [`Graph::mermaid`] draws it.
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use toolbelt_agent::{EventKind, RunOptions, Runner};
//! use toolbelt_graph::{END, START, StateGraph, state};
//!
//! state! {
//!     /// A draft and how often it was revised.
//!     pub struct Doc => DocUpdate {
//!         pub text: String,
//!         pub revisions: u32 => Sum,
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let graph = StateGraph::<Doc>::new("editor")
//!     .function("write", |_ctx| async { Ok(DocUpdate::default().text("draft".into())) })
//!     .function("revise", |ctx| async move {
//!         let text = format!("{}!", ctx.state().text);
//!         Ok(DocUpdate::default().text(text).revisions(1))
//!     })
//!     .edge(START, "write")
//!     .edge("write", "revise")
//!     // Revise until there are two revisions.
//!     .conditional_edge("revise", ["revise", END], |doc: &Doc| {
//!         if doc.revisions < 2 { "revise".into() } else { END.into() }
//!     })
//!     .answer(|doc: &Doc| Some(doc.text.clone()))
//!     .build()?;
//! assert!(graph.mermaid().starts_with("flowchart TD"));
//!
//! let runner = Runner::new("docs", Arc::new(graph));
//! let events = runner.run("u1", "s1", "go", RunOptions::new()).collect_all().await;
//! let answer = events.iter().rev().find_map(|e| e.message()).unwrap();
//! assert_eq!(answer.content, "draft!!");
//! let steps = events.iter().filter(|e| matches!(e.kind, EventKind::NodeEnded { .. })).count();
//! assert_eq!(steps, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

#![warn(missing_docs)]

mod agent_node;
mod builder;
mod graph;
mod mermaid;
mod model_node;
mod node;
mod state;
mod tools_node;

pub use agent_node::{AgentNode, Subgraph};
pub use builder::{BuildError, DEFAULT_MAX_STEPS, END, Problem, Route, START, StateGraph};
pub use graph::{Graph, RESUME_STATE_KEY};
pub use model_node::{ModelNode, tools_condition};
pub use node::{Node, NodeContext, NodeError};
pub use state::{Append, Reducer, Replace, State, Sum};
pub use tools_node::{ToolsNode, ToolsNodeBuilder};

/// What the [`state!`] macro's expansion names; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use toolbelt_model::Message;
}
