//! [`Graph`]: a built state graph, run in super-steps, checkpointed in the session, and an
//! [`Agent`].

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolbelt_agent::{
    Agent, AgentError, CallbackChain, Callbacks, ErrorKind, Event, EventKind, Invocation,
};
use toolbelt_model::{Message, Role};

use crate::builder::{END, START};
use crate::{Node, NodeContext, NodeError, Route, State};

/// The runtime state key a run may set to give an interrupted node a structured answer
/// (without it the answer is the text of the run's last user message).
pub const RESUME_STATE_KEY: &str = "graph_resume";

pub(crate) type Router<S> = Arc<dyn Fn(&S) -> Route + Send + Sync>;
pub(crate) type Answer<S> = Arc<dyn Fn(&S) -> Option<String> + Send + Sync>;

pub(crate) enum Edge<S> {
    Static {
        from: String,
        to: String,
    },
    Conditional {
        from: String,
        targets: Vec<String>,
        router: Router<S>,
    },
    Join {
        from: Vec<String>,
        to: String,
    },
}

pub(crate) struct Inner<S: State> {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) nodes: Vec<(String, Arc<dyn Node<S>>)>,
    pub(crate) index: std::collections::HashMap<String, usize>,
    pub(crate) edges: Vec<Edge<S>>,
    pub(crate) callbacks: Callbacks,
    pub(crate) max_steps: u64,
    pub(crate) answer: Option<Answer<S>>,
}

/// A built graph (see [`StateGraph`](crate::StateGraph)). Cheap to clone.
///
/// It is an [`Agent`]: run it with a [`Runner`](toolbelt_agent::Runner) (sessions, events,
/// plugins), offer it as an [`AgentTool`](toolbelt_agent::AgentTool), or put it in another
/// graph ([`AgentNode`](crate::AgentNode), [`Subgraph`](crate::Subgraph)).
///
/// # A run
///
/// The run's input messages are appended to the state's conversation, then super-step after
/// super-step: `node_started` for each node of the step, the nodes run concurrently (their
/// own events, such as model responses and tool results, as they happen), `node_ended` for
/// each with its state update, then a `checkpoint` event holding the merged state and the
/// next step's nodes. The run ends when no node is left (edges to [`END`]), when a node
/// interrupts (an `interrupted` event; the next run of the session resumes that node with
/// its answer), or on an error (an error event of kind [`ErrorKind::Node`]).
///
/// Checkpoints are events of the session, so every session store keeps them and a run in
/// another process resumes from the last one: after an interrupt with the answer, after a
/// crash or a cancellation with the unfinished step (finished steps, and their tool calls,
/// are never run again). A session whose last checkpoint is finished starts the next run
/// from that state, so a conversation goes on over runs.
pub struct Graph<S: State> {
    inner: Arc<Inner<S>>,
}

impl<S: State> Clone for Graph<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S: State> std::fmt::Debug for Graph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<&str> = self.inner.nodes.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Graph")
            .field("name", &self.inner.name)
            .field("nodes", &nodes)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Running,
    Interrupted,
    Done,
}

/// What a `checkpoint` event holds.
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint {
    graph: String,
    step: u64,
    status: Status,
    state: Value,
    /// The nodes to run next (for an interrupt: the nodes that asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    next: Vec<String>,
    /// For an interrupt: the nodes of that step that finished (their updates are in
    /// `state`); their edges are followed once the step completes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    finished: Vec<String>,
    /// Joins: for each target, the sources that have run since it last ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    waiting: BTreeMap<String, Vec<String>>,
}

/// Where a run stands between super-steps.
pub(crate) struct Progress<S> {
    pub(crate) state: S,
    pub(crate) step: u64,
    next: Vec<String>,
    finished: Vec<String>,
    waiting: BTreeMap<String, Vec<String>>,
    /// The nodes resumed after an interrupt, and the answer they get.
    resume: Option<(Vec<String>, Value)>,
    /// A fresh start (not yet checkpointed).
    fresh: bool,
}

/// How [`Graph::execute`] ended.
pub(crate) enum Outcome<S> {
    Done(S),
    /// The node that asked.
    Interrupted(String),
    /// An error event was emitted.
    Failed(String),
}

/// Where a node's events go and whether steps are checkpointed.
#[derive(Clone, Copy)]
pub(crate) struct Mode<'a> {
    /// Put before node names in `node_started` / `node_ended` (a subgraph's node path).
    pub(crate) prefix: &'a str,
    pub(crate) checkpoints: bool,
}

impl<S: State> Graph<S> {
    pub(crate) fn from_inner(inner: Inner<S>) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The graph's name.
    pub fn graph_name(&self) -> &str {
        &self.inner.name
    }

    /// The graph as a Mermaid flowchart: `START` and `END` as stadiums, nodes labelled
    /// with their names (model nodes rounded, tools nodes as subroutines, agents and
    /// subgraphs as hexagons), static edges solid, conditional edges dotted to each declared
    /// target, joins thick from all their sources.
    pub fn mermaid(&self) -> String {
        crate::mermaid::render(&self.inner)
    }

    /// The progress a fresh run starts from: `state` with `input` appended, `START`'s
    /// successors next.
    pub(crate) fn start(
        &self,
        mut state: S,
        input: Vec<Message>,
        step: u64,
    ) -> Result<Progress<S>, String> {
        if !input.is_empty()
            && let Some(update) = S::append_messages(input)
        {
            state.apply(update);
        }
        let mut waiting = BTreeMap::new();
        let next = self.successors(&[START.to_string()], &state, &mut waiting)?;
        Ok(Progress {
            state,
            step,
            next,
            finished: Vec::new(),
            waiting,
            resume: None,
            fresh: true,
        })
    }

    /// The next step's nodes after `ran`, in declaration order, each once; a join target
    /// only when all its sources have run. Fails naming a conditional edge's undeclared
    /// target.
    fn successors(
        &self,
        ran: &[String],
        state: &S,
        waiting: &mut BTreeMap<String, Vec<String>>,
    ) -> Result<Vec<String>, String> {
        let ran_here = |name: &str| ran.iter().any(|r| r == name);
        let mut next: Vec<usize> = Vec::new();
        let mut add = |name: &str| {
            if let Some(&i) = self.inner.index.get(name)
                && !next.contains(&i)
            {
                next.push(i);
            }
        };
        for edge in &self.inner.edges {
            match edge {
                Edge::Static { from, to } if ran_here(from) => add(to),
                Edge::Conditional {
                    from,
                    targets,
                    router,
                } if ran_here(from) => {
                    for target in router(state).0 {
                        if !targets.contains(&target) {
                            return Err(format!(
                                "the conditional edge from {from} routed to {target:?}, which \
                                 is not among its declared targets ({})",
                                targets.join(", ")
                            ));
                        }
                        if target != END {
                            add(&target);
                        }
                    }
                }
                Edge::Join { from, to } => {
                    let sources: Vec<&String> = from.iter().filter(|s| ran_here(s)).collect();
                    if sources.is_empty() {
                        continue;
                    }
                    let seen = waiting.entry(to.clone()).or_default();
                    for source in sources {
                        if !seen.contains(source) {
                            seen.push(source.clone());
                        }
                    }
                    if from.iter().all(|s| seen.contains(s)) {
                        waiting.remove(to);
                        if to != END {
                            add(to);
                        }
                    }
                }
                Edge::Static { .. } | Edge::Conditional { .. } => {}
            }
        }
        next.sort_unstable();
        Ok(next
            .into_iter()
            .map(|i| self.inner.nodes[i].0.clone())
            .collect())
    }

    /// Runs super-steps from `progress` until no node is left, a node interrupts or one
    /// fails.
    pub(crate) async fn execute(
        &self,
        inv: &Invocation,
        chain: &CallbackChain,
        mut progress: Progress<S>,
        mode: Mode<'_>,
    ) -> Result<Outcome<S>, AgentError> {
        let mut steps = 0;
        loop {
            if progress.next.is_empty() {
                if mode.checkpoints {
                    self.checkpoint(inv, &progress, Status::Done).await?;
                }
                return Ok(Outcome::Done(progress.state));
            }
            if steps == self.inner.max_steps {
                let message = format!(
                    "graph {} stopped after {} super-steps without reaching END (max_steps); \
                     next were {}",
                    self.inner.name,
                    self.inner.max_steps,
                    progress.next.join(", ")
                );
                return self.fail(inv, mode.checkpoints, message).await;
            }
            steps += 1;
            let snapshot = Arc::new(progress.state.clone());
            let step = progress.step;
            let resume = progress.resume.take();
            for node in &progress.next {
                let node = format!("{}{node}", mode.prefix);
                inv.emit(inv.new_event(EventKind::NodeStarted { node, step }))
                    .await?;
            }
            let runs = progress.next.iter().map(|name| {
                let answer = resume
                    .as_ref()
                    .filter(|(nodes, _)| nodes.contains(name))
                    .map(|(_, answer)| answer.clone());
                let ctx = NodeContext {
                    state: snapshot.clone(),
                    node: Arc::from(name.as_str()),
                    step,
                    invocation: inv.clone(),
                    resume: answer,
                    callbacks: chain.clone(),
                };
                let node = self.inner.nodes[self.inner.index[name]].1.clone();
                async move { node.run(ctx).await }
            });
            let results = futures::future::join_all(runs).await;
            drop(snapshot);
            if inv.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            let mut ran = Vec::new();
            let mut interrupts: Vec<(String, Value)> = Vec::new();
            let mut updates = Vec::new();
            for (name, result) in progress.next.iter().zip(results) {
                match result {
                    Ok(update) => updates.push((name.clone(), update)),
                    Err(NodeError::Interrupted { question }) => {
                        interrupts.push((name.clone(), question));
                    }
                    Err(NodeError::Agent(error)) => return Err(error),
                    Err(NodeError::Failed(message)) => {
                        let message =
                            format!("graph {}: node {name} failed: {message}", self.inner.name);
                        return self.fail(inv, mode.checkpoints, message).await;
                    }
                }
            }
            for (name, update) in updates {
                let delta = serde_json::to_value(&update).unwrap_or(Value::Null);
                progress.state.apply(update);
                let node = format!("{}{name}", mode.prefix);
                let event = EventKind::NodeEnded {
                    node,
                    step,
                    update: delta,
                };
                inv.emit(inv.new_event(event)).await?;
                ran.push(name);
            }
            if let Some((node, _)) = interrupts.first().cloned() {
                if !mode.checkpoints {
                    let message = format!(
                        "node {}{node} asked a person, which only a graph run at the top (not \
                         as a subgraph) can",
                        mode.prefix
                    );
                    return self.fail(inv, mode.checkpoints, message).await;
                }
                progress.finished.extend(ran);
                progress.next = interrupts.iter().map(|(n, _)| n.clone()).collect();
                self.checkpoint(inv, &progress, Status::Interrupted).await?;
                for (node, question) in interrupts {
                    inv.emit(inv.new_event(EventKind::Interrupted { node, question }))
                        .await?;
                }
                return Ok(Outcome::Interrupted(node));
            }
            let mut all_ran = std::mem::take(&mut progress.finished);
            all_ran.extend(ran);
            progress.next = match self.successors(&all_ran, &progress.state, &mut progress.waiting)
            {
                Ok(next) => next,
                Err(message) => {
                    let message = format!("graph {}: {message}", self.inner.name);
                    return self.fail(inv, mode.checkpoints, message).await;
                }
            };
            progress.step += 1;
            if mode.checkpoints && !progress.next.is_empty() {
                self.checkpoint(inv, &progress, Status::Running).await?;
            }
        }
    }

    /// Ends the run with `message`: an error event when `emit` (a subgraph's failure is
    /// reported once, by the node that ran it).
    async fn fail(
        &self,
        inv: &Invocation,
        emit: bool,
        message: String,
    ) -> Result<Outcome<S>, AgentError> {
        if emit {
            let kind = EventKind::Error {
                kind: ErrorKind::Node,
                message: message.clone(),
            };
            inv.emit(inv.new_event(kind)).await?;
        }
        Ok(Outcome::Failed(message))
    }

    async fn checkpoint(
        &self,
        inv: &Invocation,
        progress: &Progress<S>,
        status: Status,
    ) -> Result<(), AgentError> {
        let state = serde_json::to_value(&progress.state).map_err(|e| {
            AgentError::Session(format!(
                "graph {}: the state does not serialise: {e}",
                self.inner.name
            ))
        })?;
        let checkpoint = Checkpoint {
            graph: self.inner.name.clone(),
            step: progress.step,
            status,
            state,
            next: progress.next.clone(),
            finished: progress.finished.clone(),
            waiting: progress.waiting.clone(),
        };
        let checkpoint = serde_json::to_value(checkpoint).unwrap_or(Value::Null);
        inv.emit(inv.new_event(EventKind::Checkpoint { checkpoint }))
            .await
    }

    /// Where this run starts: the session's last checkpoint of this graph (resumed unless
    /// finished) or a fresh start.
    async fn load(&self, inv: &Invocation) -> Result<Result<Progress<S>, String>, AgentError> {
        let history = inv.history().await?;
        let input = run_input(&history);
        let last = history.iter().rev().find_map(|event| match &event.kind {
            EventKind::Checkpoint { checkpoint }
                if checkpoint.get("graph").and_then(Value::as_str) == Some(&self.inner.name) =>
            {
                Some(checkpoint)
            }
            _ => None,
        });
        let Some(last) = last else {
            return Ok(self.start(S::default(), input, 0));
        };
        let checkpoint: Checkpoint = match serde_json::from_value(last.clone()) {
            Ok(checkpoint) => checkpoint,
            Err(e) => return Ok(Err(self.unreadable(&e))),
        };
        let state: S = match serde_json::from_value(checkpoint.state) {
            Ok(state) => state,
            Err(e) => return Ok(Err(self.unreadable(&e))),
        };
        if let Some(missing) = checkpoint
            .next
            .iter()
            .chain(&checkpoint.finished)
            .find(|n| !self.inner.index.contains_key(*n))
        {
            return Ok(Err(format!(
                "graph {}: the session's checkpoint names node {missing}, which this graph \
                 does not have",
                self.inner.name
            )));
        }
        let mut progress = Progress {
            state,
            step: checkpoint.step,
            next: checkpoint.next,
            finished: checkpoint.finished,
            waiting: checkpoint.waiting,
            resume: None,
            fresh: false,
        };
        match checkpoint.status {
            Status::Done => Ok(self.start(progress.state, input, checkpoint.step + 1)),
            Status::Running => Ok(Ok(progress)),
            Status::Interrupted => {
                let answer = inv
                    .runtime_state()
                    .get(RESUME_STATE_KEY)
                    .cloned()
                    .or_else(|| {
                        input
                            .iter()
                            .rev()
                            .find(|m| m.role == Role::User)
                            .map(|m| Value::String(m.content.clone()))
                    });
                progress.resume = answer.map(|answer| (progress.next.clone(), answer));
                Ok(Ok(progress))
            }
        }
    }

    fn unreadable(&self, error: &serde_json::Error) -> String {
        format!(
            "graph {}: the session's last checkpoint cannot be read as this graph's state \
             ({error}); use a new session",
            self.inner.name
        )
    }

    async fn run_graph(&self, inv: &Invocation, chain: &CallbackChain) -> Result<(), AgentError> {
        let progress = match self.load(inv).await? {
            Ok(progress) => progress,
            Err(message) => {
                self.fail(inv, true, message).await?;
                return Ok(());
            }
        };
        if progress.fresh {
            // Checkpoint the input, so a crash in the first step resumes with it.
            self.checkpoint(inv, &progress, Status::Running).await?;
        }
        let mode = Mode {
            prefix: "",
            checkpoints: true,
        };
        if let Outcome::Done(state) = self.execute(inv, chain, progress, mode).await?
            && let Some(answer) = self.inner.answer.as_ref().and_then(|f| f(&state))
        {
            let kind = EventKind::ModelResponse {
                message: Message::assistant(answer),
                finish_reason: None,
                usage: None,
            };
            inv.emit(inv.new_event(kind)).await?;
        }
        Ok(())
    }
}

/// The messages of this run's input: the caller's events at the end of the history.
fn run_input(history: &[Event]) -> Vec<Message> {
    let mut input = Vec::new();
    for event in history.iter().rev() {
        match &event.kind {
            EventKind::UserInput { message } => input.push(message.clone()),
            EventKind::ToolInput { results } => {
                input.extend(
                    results
                        .iter()
                        .rev()
                        .map(toolbelt_agent::ToolResult::to_message),
                );
            }
            _ => break,
        }
    }
    input.reverse();
    input
}

#[async_trait]
impl<S: State> Agent for Graph<S> {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    async fn run(&self, inv: Invocation) -> Result<(), AgentError> {
        let chain = CallbackChain::new(&inv, [self.inner.callbacks.clone()]);
        let respond = |message: Message| {
            inv.new_event(EventKind::ModelResponse {
                message,
                finish_reason: None,
                usage: None,
            })
        };
        match chain.before_agent(&inv).await? {
            Some(message) => inv.emit(respond(message)).await?,
            None => self.run_graph(&inv, &chain).await?,
        }
        for message in chain.after_agent(&inv).await? {
            inv.emit(respond(message)).await?;
        }
        Ok(())
    }
}
