//! [`AgentNode`] (any agent as a node) and [`Subgraph`] (a graph over another state).

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use toolbelt_agent::history::sanitize;
use toolbelt_agent::{DynAgent, EventKind};
use toolbelt_model::Message;

use crate::graph::{Mode, Outcome};
use crate::{Graph, Node, NodeContext, NodeError, State};

/// A node that runs an agent (an [`LlmAgent`](toolbelt_agent::LlmAgent), a graph, any
/// [`Agent`](toolbelt_agent::Agent)) as a child invocation on the state's conversation; the
/// child's final answer is appended to the conversation as an assistant message. The child's
/// events (model responses, tool results) are forwarded to the caller, not stored: the
/// session keeps the node's update. Plugins apply to the child as to any child invocation.
pub struct AgentNode {
    agent: DynAgent,
}

impl std::fmt::Debug for AgentNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentNode")
            .field("agent", &self.agent.name())
            .finish()
    }
}

impl AgentNode {
    /// A node running `agent`.
    pub fn new(agent: DynAgent) -> Self {
        Self { agent }
    }
}

#[async_trait]
impl<S: State> Node<S> for AgentNode {
    async fn run(&self, ctx: NodeContext<S>) -> Result<S::Update, NodeError> {
        let inv = ctx.invocation();
        let input = sanitize(ctx.state().messages().unwrap_or_default().to_vec());
        let mut events = inv
            .child(self.agent.name())
            .run_child(self.agent.clone(), input);
        let mut answer = String::new();
        let mut failure = None;
        while let Some(event) = events.next().await {
            match &event.kind {
                EventKind::UserInput { .. } | EventKind::ToolInput { .. } => continue,
                EventKind::RunCompleted => break,
                EventKind::Error { message, .. } => {
                    failure = Some(message.clone());
                    continue;
                }
                EventKind::ModelResponse { message, .. } if message.tool_calls.is_empty() => {
                    answer = message.content.clone();
                }
                _ => {}
            }
            inv.forward(event).await?;
        }
        if let Some(message) = failure {
            return Err(NodeError::failed(format!(
                "agent {}: {message}",
                self.agent.name()
            )));
        }
        if inv.is_cancelled() {
            return Err(toolbelt_agent::AgentError::Cancelled.into());
        }
        Ok(S::append_messages(vec![Message::assistant(answer)]).unwrap_or_default())
    }

    fn kind(&self) -> &'static str {
        "agent"
    }

    fn needs_messages(&self) -> bool {
        true
    }
}

type Input<S, T> = Arc<dyn Fn(&S) -> T + Send + Sync>;
type Output<S, T> = Arc<dyn Fn(T) -> <S as State>::Update + Send + Sync>;

/// A node that runs another graph (over its own state `T`) in the same run: `input` makes
/// its state from the outer one, its super-steps run with their `node_started` /
/// `node_ended` events named `{node}/{inner node}`, and `output` turns its final state into
/// the outer update. It is not checkpointed on its own (the outer step is): a crash re-runs
/// the whole subgraph, and its nodes cannot interrupt.
pub struct Subgraph<S: State, T: State> {
    graph: Graph<T>,
    input: Input<S, T>,
    output: Output<S, T>,
}

impl<S: State, T: State> std::fmt::Debug for Subgraph<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subgraph")
            .field("graph", &self.graph)
            .finish_non_exhaustive()
    }
}

impl<S: State, T: State> Subgraph<S, T> {
    /// A node running `graph` from `input(state)`, its result mapped by `output`.
    pub fn new(
        graph: Graph<T>,
        input: impl Fn(&S) -> T + Send + Sync + 'static,
        output: impl Fn(T) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        Self {
            graph,
            input: Arc::new(input),
            output: Arc::new(output),
        }
    }
}

#[async_trait]
impl<S: State, T: State> Node<S> for Subgraph<S, T> {
    async fn run(&self, ctx: NodeContext<S>) -> Result<S::Update, NodeError> {
        let start = (self.input)(ctx.state());
        let progress = self
            .graph
            .start(start, Vec::new(), 0)
            .map_err(NodeError::Failed)?;
        let prefix = format!("{}/", ctx.node());
        let mode = Mode {
            prefix: &prefix,
            checkpoints: false,
        };
        match self
            .graph
            .execute(ctx.invocation(), ctx.callbacks(), progress, mode)
            .await?
        {
            Outcome::Done(state) => Ok((self.output)(state)),
            Outcome::Interrupted(node) | Outcome::Failed(node) => Err(NodeError::Failed(format!(
                "subgraph {}: {node}",
                self.graph.graph_name()
            ))),
        }
    }

    fn kind(&self) -> &'static str {
        "subgraph"
    }
}
