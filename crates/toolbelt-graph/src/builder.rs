//! [`StateGraph`]: declaring nodes and edges, and the checks [`StateGraph::build`] makes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::Arc;

use toolbelt_agent::Callbacks;

use crate::graph::{Answer, Edge, Graph, Inner, Router};
use crate::node::FnNode;
use crate::{Node, NodeContext, NodeError, State};

/// The entry point of every graph: edges from `START` name the first super-step's nodes.
pub const START: &str = "__start__";
/// The exit: a node whose edges lead only here ends the run when its step is the last.
pub const END: &str = "__end__";

/// The default limit of super-steps in one run.
pub const DEFAULT_MAX_STEPS: u64 = 100;

/// Where a conditional edge goes next: one node, several (they run in the same super-step),
/// or [`END`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route(pub(crate) Vec<String>);

impl From<&str> for Route {
    fn from(target: &str) -> Self {
        Route(vec![target.to_string()])
    }
}

impl From<String> for Route {
    fn from(target: String) -> Self {
        Route(vec![target])
    }
}

impl From<Vec<&str>> for Route {
    fn from(targets: Vec<&str>) -> Self {
        Route(targets.into_iter().map(str::to_string).collect())
    }
}

impl From<Vec<String>> for Route {
    fn from(targets: Vec<String>) -> Self {
        Route(targets)
    }
}

/// One problem [`StateGraph::build`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// Two nodes have one name.
    #[error("two nodes are named {0}")]
    DuplicateNode(String),
    /// A node is named `START`, `END` or nothing.
    #[error("the node name {0:?} is reserved or empty")]
    ReservedName(String),
    /// An edge names a node that was not added.
    #[error("the edge {from} -> {to} leads to or from {missing}, which is not a node")]
    MissingNode {
        /// Where the edge starts.
        from: String,
        /// Where it leads.
        to: String,
        /// The name that is not a node.
        missing: String,
    },
    /// Nothing leaves `START`.
    #[error("no edge leaves START: the graph has no first node")]
    NoEntry,
    /// No edge can reach the node from `START`.
    #[error("node {0} is unreachable from START")]
    Unreachable(String),
    /// No edge leaves the node (give it one to another node or to END).
    #[error("node {0} has no way out: add an edge from it (to END to stop there)")]
    NoWayOut(String),
    /// A conditional edge declares no targets.
    #[error("the conditional edge from {0} declares no targets")]
    NoTargets(String),
    /// A model, tools or agent node on a state without a `Messages` field.
    #[error("node {0} reads the conversation, but the state has no field declared `=> Messages`")]
    NoMessages(String),
}

/// Why a graph could not be built: every problem found, in the order checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("graph {graph}: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct BuildError {
    /// The graph's name.
    pub graph: String,
    /// What is wrong.
    pub problems: Vec<Problem>,
}

/// Declares a graph over state `S`: nodes, then edges, then [`StateGraph::build`].
///
/// Execution is in super-steps (as in Pregel): the nodes of one step run concurrently on the
/// state as it was at the step's start; their updates are merged in declaration order; then
/// the edges of every node that ran name the next step's nodes (each at most once).
pub struct StateGraph<S: State> {
    name: String,
    description: String,
    nodes: Vec<(String, Arc<dyn Node<S>>)>,
    edges: Vec<Edge<S>>,
    callbacks: Callbacks,
    max_steps: u64,
    answer: Option<Answer<S>>,
}

impl<S: State> std::fmt::Debug for StateGraph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<&str> = self.nodes.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("StateGraph")
            .field("name", &self.name)
            .field("nodes", &nodes)
            .finish_non_exhaustive()
    }
}

impl<S: State> StateGraph<S> {
    /// A graph named `name` (the agent name of its events and its checkpoints' owner).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: String::new(),
            nodes: Vec::new(),
            edges: Vec::new(),
            callbacks: Callbacks::new(),
            max_steps: DEFAULT_MAX_STEPS,
            answer: None,
        }
    }

    /// What the graph is for (other agents read it when it is offered as a tool).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Adds a node.
    pub fn node(mut self, name: impl Into<String>, node: impl Node<S> + 'static) -> Self {
        self.nodes.push((name.into(), Arc::new(node)));
        self
    }

    /// Adds a function node: `f` gets the [`NodeContext`] and returns the state update.
    pub fn function<F, Fut>(self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(NodeContext<S>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S::Update, NodeError>> + Send + 'static,
    {
        self.node(name, FnNode(f))
    }

    /// An edge: after `from` runs, `to` runs in the next super-step (`from` may be
    /// [`START`], `to` may be [`END`]). Several edges from one node fan out.
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push(Edge::Static {
            from: from.into(),
            to: to.into(),
        });
        self
    }

    /// A conditional edge: after `from` runs, `router` reads the merged state and names the
    /// next nodes, which must be among `targets` (checked when building; a router that
    /// names another ends the run with an error naming it).
    pub fn conditional_edge<I, T, F>(
        mut self,
        from: impl Into<String>,
        targets: I,
        router: F,
    ) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
        F: Fn(&S) -> Route + Send + Sync + 'static,
    {
        let router: Router<S> = Arc::new(router);
        self.edges.push(Edge::Conditional {
            from: from.into(),
            targets: targets.into_iter().map(Into::into).collect(),
            router,
        });
        self
    }

    /// A join: `to` runs once every node of `from` has run since `to` last ran (in one
    /// super-step or over several).
    pub fn join<I, T>(mut self, from: I, to: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.edges.push(Edge::Join {
            from: from.into_iter().map(Into::into).collect(),
            to: to.into(),
        });
        self
    }

    /// Runs these callbacks (after the runner's plugins'): before/after agent around the
    /// run, before/after model around model nodes' calls, before/after tool in tools nodes.
    pub fn callbacks(mut self, callbacks: Callbacks) -> Self {
        self.callbacks = callbacks;
        self
    }

    /// The most super-steps one run may take before it ends with an error (default
    /// [`DEFAULT_MAX_STEPS`]); a loop that never reaches END stops there.
    pub fn max_steps(mut self, max: u64) -> Self {
        self.max_steps = max;
        self
    }

    /// The run's answer when the graph reaches END: `f`'s text of the final state, emitted
    /// as an assistant response (what a caller such as an
    /// [`AgentTool`](toolbelt_agent::AgentTool) takes as the result). Without it the answer
    /// is the last model response a model node emitted, if any.
    pub fn answer(mut self, f: impl Fn(&S) -> Option<String> + Send + Sync + 'static) -> Self {
        self.answer = Some(Arc::new(f));
        self
    }

    /// Checks the graph and builds it. Fails naming every problem: duplicate or reserved
    /// node names, edges to or from missing nodes, no edge from START, nodes no edge
    /// reaches, nodes with no way out, conditional edges without targets, and nodes that
    /// need a conversation on a state without one.
    pub fn build(self) -> Result<Graph<S>, BuildError> {
        let problems = self.problems();
        if !problems.is_empty() {
            return Err(BuildError {
                graph: self.name,
                problems,
            });
        }
        let index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        Ok(Graph::from_inner(Inner {
            name: self.name,
            description: self.description,
            nodes: self.nodes,
            index,
            edges: self.edges,
            callbacks: self.callbacks,
            max_steps: self.max_steps,
            answer: self.answer,
        }))
    }

    fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut names: HashSet<&str> = HashSet::new();
        for (name, node) in &self.nodes {
            if name.is_empty() || name == START || name == END {
                problems.push(Problem::ReservedName(name.clone()));
            } else if !names.insert(name) {
                problems.push(Problem::DuplicateNode(name.clone()));
            }
            if node.needs_messages() && S::append_messages(Vec::new()).is_none() {
                problems.push(Problem::NoMessages(name.clone()));
            }
        }
        let mut successors: HashMap<&str, Vec<&str>> = HashMap::new();
        let check = |from: &str, to: &str, problems: &mut Vec<Problem>| {
            for (name, allowed) in [(from, START), (to, END)] {
                if name != allowed && !names.contains(name) {
                    problems.push(Problem::MissingNode {
                        from: from.to_string(),
                        to: to.to_string(),
                        missing: name.to_string(),
                    });
                }
            }
        };
        for edge in &self.edges {
            match edge {
                Edge::Static { from, to } => {
                    check(from, to, &mut problems);
                    successors.entry(from).or_default().push(to);
                }
                Edge::Conditional { from, targets, .. } => {
                    if targets.is_empty() {
                        problems.push(Problem::NoTargets(from.clone()));
                        successors.entry(from).or_default();
                    }
                    for to in targets {
                        check(from, to, &mut problems);
                        successors.entry(from).or_default().push(to);
                    }
                }
                Edge::Join { from, to } => {
                    for source in from {
                        check(source, to, &mut problems);
                        successors.entry(source).or_default().push(to);
                    }
                }
            }
        }
        if !successors.contains_key(START) {
            problems.push(Problem::NoEntry);
        }
        let mut reached: HashSet<&str> = HashSet::from([START]);
        let mut queue: VecDeque<&str> = VecDeque::from([START]);
        while let Some(name) = queue.pop_front() {
            for next in successors.get(name).into_iter().flatten() {
                if reached.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        for (name, _) in &self.nodes {
            if !reached.contains(name.as_str()) {
                problems.push(Problem::Unreachable(name.clone()));
            }
            if !successors.contains_key(name.as_str()) {
                problems.push(Problem::NoWayOut(name.clone()));
            }
        }
        problems
    }
}
