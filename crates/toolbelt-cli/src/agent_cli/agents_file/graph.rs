//! The `[[graphs]]` of an agents file: graph workflows (`toolbelt::graph`) over the run's
//! conversation, built from model, tools, agent and ask nodes and their edges.
//!
//! ```toml
//! [[graphs]]
//! name = "release"
//! nodes = [
//!   { name = "draft", kind = "agent", agent = "writer" },
//!   { name = "check", kind = "ask", question = "Publish these notes? (yes/no)" },
//!   { name = "think", kind = "model", instruction = "Publish the notes.", tools_node = "act" },
//!   { name = "act", kind = "tools", tools = ["Write"], parallel = true, retries = 2 },
//! ]
//! edges = [
//!   { from = "START", to = "draft" },
//!   { from = "draft", to = "check" },
//!   { from = "check", when = { text_is = "yes" }, to = "think", otherwise = "END" },
//!   { from = "think", when = "tool_calls", to = "act", otherwise = "END" },
//!   { from = "act", to = "think" },
//! ]
//! ```
//!
//! The state is the conversation alone: each node appends to it (a model node its message,
//! a tools node the results, an agent node its answer, an ask node the question and the
//! person's answer), and conditions read its last message. The graph's answer is the last
//! assistant message when it reaches END.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::Deserialize;
use toolbelt::ToolFilter;
use toolbelt::agent::DynAgent;
use toolbelt::core::RetryPolicy;
use toolbelt::graph::{
    AgentNode, END, ModelNode, NodeContext, NodeError, START, StateGraph, ToolsNode,
};
use toolbelt::model::{Message, Role};

use super::{BuildContext, matches};

toolbelt::graph::state! {
    /// A file graph's state: the run's conversation.
    pub struct Conversation => ConversationUpdate {
        pub messages: Vec<Message> => Messages,
    }
}

/// One graph as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GraphSpec {
    pub(super) name: String,
    #[serde(default)]
    description: String,
    nodes: Vec<NodeSpec>,
    #[serde(default)]
    edges: Vec<EdgeSpec>,
    /// Nodes that run once all of `from` have run.
    #[serde(default)]
    joins: Vec<JoinSpec>,
    /// The most super-steps one run takes (the graph crate's default otherwise).
    #[serde(default)]
    max_steps: Option<u64>,
}

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum NodeKind {
    /// One model call on the conversation.
    Model,
    /// The last model message's tool calls, run.
    Tools,
    /// An agent (or graph) of this file, run on the conversation.
    Agent,
    /// A question to a person: the run pauses until the session's next run answers it.
    Ask,
}

/// One node as written; which keys it may have depends on its kind.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSpec {
    name: String,
    kind: NodeKind,
    /// `agent`: the agent or graph it runs.
    #[serde(default)]
    agent: Option<String>,
    /// `model`: another model name on the same server.
    #[serde(default)]
    model: Option<String>,
    /// `model`: its system instruction (the command's default otherwise).
    #[serde(default)]
    instruction: Option<String>,
    /// `model`: the tools node whose tools it declares.
    #[serde(default)]
    tools_node: Option<String>,
    /// `tools`: tool names or `*` patterns.
    #[serde(default)]
    tools: Vec<String>,
    /// `tools`: run one message's calls concurrently (the command's `--parallel` otherwise).
    #[serde(default)]
    parallel: Option<bool>,
    /// `tools`: retries of a call that failed transiently.
    #[serde(default)]
    retries: Option<usize>,
    /// `ask`: the question.
    #[serde(default)]
    question: Option<String>,
}

/// An edge: always taken, or taken when its condition holds (else `otherwise`, END when
/// not given).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EdgeSpec {
    from: String,
    to: String,
    #[serde(default)]
    when: Option<Condition>,
    #[serde(default)]
    otherwise: Option<String>,
}

/// What a conditional edge reads: the conversation's last message.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Condition {
    /// It calls tools.
    ToolCalls,
    /// Its text contains this (ignoring case).
    TextContains(String),
    /// Its text is this (ignoring case and surrounding white space).
    TextIs(String),
}

/// A join as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinSpec {
    from: Vec<String>,
    to: String,
}

impl NodeSpec {
    /// The keys this node has that its kind does not take.
    fn misplaced_keys(&self) -> Vec<&'static str> {
        let given = [
            ("agent", self.agent.is_some(), NodeKind::Agent),
            ("model", self.model.is_some(), NodeKind::Model),
            ("instruction", self.instruction.is_some(), NodeKind::Model),
            ("tools_node", self.tools_node.is_some(), NodeKind::Model),
            ("tools", !self.tools.is_empty(), NodeKind::Tools),
            ("parallel", self.parallel.is_some(), NodeKind::Tools),
            ("retries", self.retries.is_some(), NodeKind::Tools),
            ("question", self.question.is_some(), NodeKind::Ask),
        ];
        given
            .into_iter()
            .filter(|&(_, present, kind)| present && kind != self.kind)
            .map(|(key, ..)| key)
            .collect()
    }
}

impl GraphSpec {
    /// The agents and graphs of the file this graph runs as nodes.
    pub(super) fn references(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().filter_map(|n| n.agent.as_deref())
    }

    /// The checks that need only the file: each node's keys fit its kind, and what it names
    /// within the graph exists. Edges are checked by the graph crate when it is built.
    pub(super) fn check(&self, is_unit: impl Fn(&str) -> bool) -> Result<(), String> {
        let fail = |message: String| Err(format!("graph {:?}: {message}", self.name));
        if self.nodes.is_empty() {
            return fail("it has no nodes".into());
        }
        let kinds: HashMap<&str, NodeKind> = self
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.kind))
            .collect();
        for node in &self.nodes {
            let name = &node.name;
            if name == "START" || name == "END" {
                return fail(format!(
                    "{name} is where a graph begins or ends, not a node name"
                ));
            }
            let misplaced = node.misplaced_keys();
            if !misplaced.is_empty() {
                return fail(format!(
                    "node {name:?} is a {:?} node, which takes no {}",
                    node.kind,
                    misplaced.join(", ")
                ));
            }
            match node.kind {
                NodeKind::Agent => match node.agent.as_deref() {
                    None => return fail(format!("node {name:?}: an agent node names its agent")),
                    Some(agent) if !is_unit(agent) => {
                        return fail(format!("node {name:?}: agent names no agent: {agent:?}"));
                    }
                    Some(_) => {}
                },
                NodeKind::Tools if node.tools.is_empty() => {
                    return fail(format!("node {name:?}: a tools node lists its tools"));
                }
                NodeKind::Ask if node.question.as_deref().is_none_or(|q| q.trim().is_empty()) => {
                    return fail(format!("node {name:?}: an ask node has a question"));
                }
                NodeKind::Model => {
                    if let Some(tools) = &node.tools_node
                        && kinds.get(tools.as_str()) != Some(&NodeKind::Tools)
                    {
                        return fail(format!(
                            "node {name:?}: tools_node names no tools node of this graph: \
                             {tools:?}"
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The graph, as an agent. `built` holds the file's agents and graphs it runs.
    pub(super) fn build(
        &self,
        built: &HashMap<&str, DynAgent>,
        cx: &BuildContext<'_>,
    ) -> Result<DynAgent, String> {
        let mut graph = StateGraph::<Conversation>::new(&self.name).description(&self.description);
        let mut tools_nodes: HashMap<&str, ToolsNode> = HashMap::new();
        for node in self.nodes.iter().filter(|n| n.kind == NodeKind::Tools) {
            tools_nodes.insert(&node.name, self.tools_node(node, cx)?);
        }
        // Model nodes next: each declares what its tools node runs.
        let mut model_nodes: HashMap<&str, ModelNode> = HashMap::new();
        for node in self.nodes.iter().filter(|n| n.kind == NodeKind::Model) {
            let model = match &node.model {
                Some(name) => (cx.model_named)(name).map_err(|e| e.message)?,
                None => cx.model.clone(),
            };
            let mut model_node = ModelNode::shared(model)
                .instruction(
                    node.instruction
                        .clone()
                        .unwrap_or_else(|| cx.default_instruction.clone()),
                )
                .generation_config(cx.generation.clone());
            if let Some(tools) = node.tools_node.as_deref() {
                model_node = model_node.tools_from(&tools_nodes[tools]);
            }
            model_nodes.insert(&node.name, model_node);
        }
        // Added in the file's order: a super-step merges its updates in that order.
        for node in &self.nodes {
            let name = node.name.as_str();
            graph = match node.kind {
                NodeKind::Tools => graph.node(name, tools_nodes.remove(name).expect("built above")),
                NodeKind::Model => graph.node(name, model_nodes.remove(name).expect("built above")),
                NodeKind::Agent => {
                    let agent = node.agent.as_deref().expect("checked to name its agent");
                    graph.node(name, AgentNode::new(Arc::clone(&built[agent])))
                }
                NodeKind::Ask => {
                    let question = node.question.clone().unwrap_or_default();
                    graph.function(name, move |ctx| ask(ctx, question.clone()))
                }
            };
        }
        for edge in &self.edges {
            graph = match &edge.when {
                None if edge.otherwise.is_some() => {
                    return Err(format!(
                        "graph {:?}: the edge {} -> {} has `otherwise` but no `when`",
                        self.name, edge.from, edge.to
                    ));
                }
                None => graph.edge(endpoint(&edge.from), endpoint(&edge.to)),
                Some(condition) => {
                    let to = endpoint(&edge.to);
                    let otherwise = endpoint(edge.otherwise.as_deref().unwrap_or("END"));
                    let targets = [to.clone(), otherwise.clone()];
                    let router = router(condition.clone(), to, otherwise);
                    graph.conditional_edge(endpoint(&edge.from), targets, router)
                }
            };
        }
        for join in &self.joins {
            graph = graph.join(join.from.iter().map(|n| endpoint(n)), endpoint(&join.to));
        }
        if let Some(max) = self.max_steps {
            graph = graph.max_steps(max);
        }
        let graph = graph
            .answer(|state: &Conversation| {
                state
                    .messages
                    .last()
                    .filter(|m| m.role == Role::Assistant && !m.has_tool_calls())
                    .map(|m| m.content.clone())
            })
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(graph))
    }

    /// A tools node over the command's executor, kept to the tools `node` names.
    fn tools_node(&self, node: &NodeSpec, cx: &BuildContext<'_>) -> Result<ToolsNode, String> {
        let mut names = BTreeSet::new();
        for pattern in &node.tools {
            let matched: Vec<&String> = cx.offered.iter().filter(|n| matches(pattern, n)).collect();
            if matched.is_empty() {
                return Err(format!(
                    "graph {:?}: node {:?}: tools: no tool is named {pattern:?} (offered: {})",
                    self.name,
                    node.name,
                    cx.offered.join(", ")
                ));
            }
            names.extend(matched.into_iter().cloned());
        }
        let executor = match node.retries {
            Some(retries) => (cx.retrying_executor)(RetryPolicy::retries(retries)),
            None => cx.executor.clone(),
        };
        let mut builder = ToolsNode::builder()
            .executor(executor)
            .filter(ToolFilter::include_names(names));
        if let Some(parallel) = node.parallel {
            builder = builder.parallel(parallel);
        }
        builder.build().map_err(|e| e.to_string())
    }
}

/// An ask node: the first time, the run pauses with the question; when the session's next
/// run answers, the question and the answer join the conversation.
async fn ask(
    ctx: NodeContext<Conversation>,
    question: String,
) -> Result<ConversationUpdate, NodeError> {
    let answer = ctx.interrupt(question.clone())?;
    let answer = match answer {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    };
    Ok(ConversationUpdate::default()
        .messages(vec![Message::assistant(question), Message::user(answer)]))
}

/// The router of a conditional edge: `to` when `condition` holds of the last message,
/// else `otherwise`.
fn router(
    condition: Condition,
    to: String,
    otherwise: String,
) -> impl Fn(&Conversation) -> toolbelt::graph::Route + Send + Sync + 'static {
    move |state: &Conversation| {
        let last = state.messages.last();
        let text = || {
            last.map(|m| m.content.trim().to_lowercase())
                .unwrap_or_default()
        };
        let holds = match &condition {
            Condition::ToolCalls => last.is_some_and(Message::has_tool_calls),
            Condition::TextContains(needle) => text().contains(&needle.to_lowercase()),
            Condition::TextIs(expected) => text() == expected.trim().to_lowercase(),
        };
        if holds {
            to.as_str().into()
        } else {
            otherwise.as_str().into()
        }
    }
}

/// A node name as a file's edge writes it, with `START` and `END` as the graph's own.
fn endpoint(name: &str) -> String {
    match name {
        "START" => START.to_string(),
        "END" => END.to_string(),
        node => node.to_string(),
    }
}
