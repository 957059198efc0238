//! Nodes: what a graph runs, one [`Node`] per name, each returning an update of the state.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolbelt_agent::{AgentError, CallbackChain, Invocation};

use crate::State;

/// Why a node returned no update.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The node asked a person (see [`NodeContext::interrupt`]): the run ends with an
    /// `interrupted` event and the next run of the session resumes the node with the answer.
    #[error("interrupted: {question}")]
    Interrupted {
        /// The question.
        question: Value,
    },
    /// The node failed; the run ends with an error event naming the node, and the state
    /// stays at the last checkpoint, so running the session again retries the step.
    #[error("{0}")]
    Failed(String),
    /// The run itself failed (cancelled, the session store, a callback).
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl NodeError {
    /// A failure with this message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

/// What a node sees: the state as of the start of its super-step, the run's invocation
/// (session, runtime state, events, cancellation) and, when it is resumed after an
/// interrupt, the answer.
pub struct NodeContext<S> {
    pub(crate) state: Arc<S>,
    pub(crate) node: Arc<str>,
    pub(crate) step: u64,
    pub(crate) invocation: Invocation,
    pub(crate) resume: Option<Value>,
    pub(crate) callbacks: CallbackChain,
}

impl<S> std::fmt::Debug for NodeContext<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("node", &self.node)
            .field("step", &self.step)
            .field("resume", &self.resume)
            .finish_non_exhaustive()
    }
}

impl<S: State> NodeContext<S> {
    /// The state at the start of this super-step (other nodes of the step do not see each
    /// other's updates).
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The super-step, counted over the whole session's graph runs.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The run's invocation: session, runtime state, events ([`Invocation::emit`]).
    pub fn invocation(&self) -> &Invocation {
        &self.invocation
    }

    /// The run's cancellation token.
    pub fn cancellation(&self) -> &CancellationToken {
        self.invocation.cancellation()
    }

    /// The callbacks in force (the runner's plugins', then the graph's).
    pub fn callbacks(&self) -> &CallbackChain {
        &self.callbacks
    }

    /// Asks a person: the first time, fails with [`NodeError::Interrupted`] (return it with
    /// `?`), which checkpoints the graph and ends the run with an `interrupted` event; when
    /// the session's next run resumes the node (from the start), returns that run's answer:
    /// the text of its last user message as a JSON string, or the runtime state value
    /// `graph_resume` when the run sets one (a structured answer).
    pub fn interrupt(&self, question: impl Into<Value>) -> Result<Value, NodeError> {
        match &self.resume {
            Some(answer) => Ok(answer.clone()),
            None => Err(NodeError::Interrupted {
                question: question.into(),
            }),
        }
    }
}

/// A node of a graph over state `S`.
#[async_trait]
pub trait Node<S: State>: Send + Sync {
    /// Runs the node on `ctx`'s state and returns its update.
    async fn run(&self, ctx: NodeContext<S>) -> Result<S::Update, NodeError>;

    /// What the node is, for the Mermaid export (`function`, `model`, `tools`, `agent`,
    /// `subgraph`).
    fn kind(&self) -> &'static str {
        "function"
    }

    /// Whether the node reads or extends the state's conversation ([`State::messages`]):
    /// building a graph with such a node on a state without one is an error.
    fn needs_messages(&self) -> bool {
        false
    }
}

/// A node made of an async function (see [`StateGraph::function`](crate::StateGraph::function)).
/// It is dropped when the run is cancelled.
pub(crate) struct FnNode<F>(pub(crate) F);

#[async_trait]
impl<S, F, Fut> Node<S> for FnNode<F>
where
    S: State,
    F: Fn(NodeContext<S>) -> Fut + Send + Sync,
    Fut: Future<Output = Result<S::Update, NodeError>> + Send,
{
    async fn run(&self, ctx: NodeContext<S>) -> Result<S::Update, NodeError> {
        let cancel = ctx.cancellation().clone();
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(NodeError::Agent(AgentError::Cancelled)),
            result = (self.0)(ctx) => result,
        }
    }
}
