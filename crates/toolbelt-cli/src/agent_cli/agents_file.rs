//! `--agents FILE`: agents composed in a TOML or YAML file (picked by the extension), so a
//! user can build a coordinator with sub-agents and agent tools without writing Rust.
//!
//! ```toml
//! root = "coordinator"          # optional: the first agent otherwise
//!
//! [[agents]]
//! name = "coordinator"
//! description = "Answers questions, delegating to its helpers"
//! instruction = "Delegate file questions to files."
//! tools = []                    # none of its own
//! agent_tools = [{ agent = "files", stream_inner = true, inner_text = "exclude" }]
//! sub_agents = ["writer"]       # it may hand the conversation over (transfer)
//!
//! [[agents]]
//! name = "files"
//! description = "Reads files in the project"
//! tools = ["Read", "Glob", "mcp_*"]   # built-in and MCP tool names; `*` matches any text
//! model = "small-model"         # optional: another model name on the same server
//! ```
//!
//! Everything is checked before any agent runs, and every mistake is an error naming the
//! file and what is wrong (exit code 2): syntax and unknown keys (with the line, as the
//! parser reports it), duplicate agent names, a root, sub-agent or agent tool naming no
//! agent, a tool name or pattern that no tool set offers, and cycles among sub-agents and
//! agent tools (named agent by agent: a file that could recurse without end is refused
//! rather than left to the depth limit).
//!
//! A file may also define `[[graphs]]`: graph workflows whose nodes are model calls, tool
//! runs, the file's agents and questions to a person (see [`graph`]). A graph is named
//! like an agent: it can be the root, a sub-agent, an agent tool or another graph's node.
//!
//! And `[[external_tools]]`: tools whose work is done outside the run, by a person or another
//! system; a call pauses the run until its result is supplied (see [`external`]).

mod external;
mod graph;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toolbelt::ToolFilter;
use toolbelt::agent::framework::TRANSFER_TO_AGENT;
use toolbelt::agent::{AgentTool, DynAgent, HistoryScope, InnerTextMode, LlmAgent};
use toolbelt::core::RetryPolicy;
use toolbelt::exec::Executor;
use toolbelt::model::{DynModel, GenerationConfig};

use crate::common::CliError;

/// The agents of one file, checked: names unique, every reference resolved, no cycles.
#[derive(Debug)]
pub struct Agents {
    /// Where they were read from, for error messages.
    path: String,
    /// The agent runs start with.
    root: String,
    specs: Vec<AgentSpec>,
    graphs: Vec<graph::GraphSpec>,
    externals: Vec<external::ExternalToolSpec>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentsFile {
    /// The agent runs start with; the first agent (else the first graph) when omitted.
    #[serde(default)]
    root: Option<String>,
    #[serde(default)]
    agents: Vec<AgentSpec>,
    #[serde(default)]
    graphs: Vec<graph::GraphSpec>,
    #[serde(default)]
    external_tools: Vec<external::ExternalToolSpec>,
}

/// One agent as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSpec {
    name: String,
    #[serde(default)]
    description: String,
    /// The system instruction; the command's default one when omitted.
    #[serde(default)]
    instruction: Option<String>,
    /// Another model name on the same server.
    #[serde(default)]
    model: Option<String>,
    /// Tool names or `*` patterns; none when omitted.
    #[serde(default)]
    tools: Vec<String>,
    /// Agents this one may transfer the conversation to.
    #[serde(default)]
    sub_agents: Vec<String>,
    /// Agents this one may call as tools.
    #[serde(default)]
    agent_tools: Vec<AgentToolEntry>,
}

/// An agent offered as a tool: its name alone, or a table with the AgentTool options.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentToolSpec {
    agent: String,
    #[serde(default)]
    skip_summarization: bool,
    #[serde(default)]
    stream_inner: bool,
    #[serde(default)]
    inner_text: InnerText,
    #[serde(default)]
    history: History,
    #[serde(default)]
    max_depth: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum InnerText {
    #[default]
    Include,
    Exclude,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum History {
    #[default]
    Isolated,
    ParentBranch,
}

/// One entry of `agent_tools`: `"files"` or `{ agent = "files", stream_inner = true }`.
#[derive(Debug)]
struct AgentToolEntry(AgentToolSpec);

/// Written by hand rather than with `#[serde(untagged)]`, which would replace the parser's
/// error (an unknown key, its line) with "did not match any variant".
impl<'de> Deserialize<'de> for AgentToolEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entry;
        impl<'de> Visitor<'de> for Entry {
            type Value = AgentToolEntry;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an agent name or a table with `agent` and AgentTool options")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<AgentToolEntry, E> {
                Ok(AgentToolEntry(AgentToolSpec {
                    agent: name.to_string(),
                    skip_summarization: false,
                    stream_inner: false,
                    inner_text: InnerText::Include,
                    history: History::Isolated,
                    max_depth: None,
                }))
            }

            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<AgentToolEntry, M::Error> {
                AgentToolSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(AgentToolEntry)
            }
        }
        deserializer.deserialize_any(Entry)
    }
}

/// What building the agents needs from the command.
pub struct BuildContext<'a> {
    /// The executor every agent's calls go through (approval, timeout, schedule).
    pub executor: Executor,
    /// The same executor with a retry policy, for a graph's tools node that retries.
    pub retrying_executor: &'a dyn Fn(RetryPolicy) -> Executor,
    /// The command's model, for agents that name none.
    pub model: DynModel,
    /// The model of another name on the same server.
    pub model_named: &'a dyn Fn(&str) -> Result<DynModel, CliError>,
    /// The names of the tools the tool sets offer.
    pub offered: Vec<String>,
    /// The instruction of agents that give none.
    pub default_instruction: String,
    /// Streaming or not, as the flags say.
    pub generation: GenerationConfig,
    /// `--max-iterations`.
    pub max_iterations: usize,
}

/// Reads and checks an agents file: syntax, unknown keys, duplicate names, references and
/// cycles. Tool names are checked by [`Agents::build`], against the tools actually offered.
pub fn load(path: &Path) -> Result<Agents, CliError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--agents {shown}: {e}")))?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let file: AgentsFile = match extension.as_deref() {
        Some("toml") => toml::from_str(&text).map_err(|e| format!("{e}")),
        Some("yaml" | "yml") => toolbelt_ext::yaml::from_str_bounded(&text),
        _ => {
            return Err(CliError::usage(format!(
                "--agents {shown}: the file must end in .toml, .yaml or .yml (that is how its \
                 format is chosen)"
            )));
        }
    }
    .map_err(|e| CliError::usage(format!("--agents {shown}: {}", e.trim_end())))?;
    check(shown, file)
}

/// The structural checks of [`load`].
fn check(path: String, file: AgentsFile) -> Result<Agents, CliError> {
    let fail = |message: String| CliError::usage(format!("--agents {path}: {message}"));
    let first = file
        .agents
        .first()
        .map(|a| &a.name)
        .or_else(|| file.graphs.first().map(|g| &g.name));
    let Some(first) = first else {
        return Err(fail("the file defines no agents and no graphs".to_string()));
    };
    let root = file.root.clone().unwrap_or_else(|| first.clone());
    // Agents and graphs share one namespace: each can stand where the other does.
    let names: Vec<&str> = file
        .agents
        .iter()
        .map(|a| a.name.as_str())
        .chain(file.graphs.iter().map(|g| g.name.as_str()))
        .collect();
    let mut index = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(fail(format!("agent or graph {} has an empty name", i + 1)));
        }
        if index.insert(*name, i).is_some() {
            return Err(fail(format!("two agents or graphs are named {name:?}")));
        }
    }
    if !index.contains_key(root.as_str()) {
        return Err(fail(format!("root names no agent or graph: {root:?}")));
    }
    for spec in &file.agents {
        let mut seen = BTreeSet::new();
        for (field, target) in spec.edges() {
            if !index.contains_key(target) {
                return Err(fail(format!(
                    "agent {:?}: {field} names no agent: {target:?}",
                    spec.name
                )));
            }
            if !seen.insert(target) {
                return Err(fail(format!(
                    "agent {:?} lists {target:?} twice among its sub_agents and agent_tools",
                    spec.name
                )));
            }
        }
    }
    for spec in &file.graphs {
        spec.check(|name| index.contains_key(name)).map_err(fail)?;
    }
    let mut external_names = BTreeSet::new();
    for spec in &file.external_tools {
        spec.tool().map_err(fail)?;
        if !external_names.insert(spec.name.as_str()) {
            return Err(fail(format!(
                "two external tools are named {:?}",
                spec.name
            )));
        }
        if index.contains_key(spec.name.as_str()) {
            return Err(fail(format!(
                "external tool {:?} is named like an agent or graph; rename one",
                spec.name
            )));
        }
    }
    let targets: Vec<Vec<usize>> = file
        .agents
        .iter()
        .map(|s| s.edges().map(|(_, t)| t).collect::<Vec<_>>())
        .chain(file.graphs.iter().map(|g| g.references().collect()))
        .map(|refs| refs.iter().filter_map(|t| index.get(t).copied()).collect())
        .collect();
    if let Some(cycle) = find_cycle(&names, &targets) {
        return Err(fail(format!(
            "agents call each other in a cycle: {} (through sub_agents, agent_tools and graph \
             nodes)",
            cycle.join(" -> ")
        )));
    }
    Ok(Agents {
        path,
        root,
        specs: file.agents,
        graphs: file.graphs,
        externals: file.external_tools,
    })
}

impl AgentSpec {
    /// The agents this one refers to, with the field that names each.
    fn edges(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let subs = self.sub_agents.iter().map(|s| ("sub_agents", s.as_str()));
        let tools = self
            .agent_tools
            .iter()
            .map(|t| ("agent_tools", t.0.agent.as_str()));
        subs.chain(tools)
    }
}

/// A cycle among the references (`targets[i]`: the units unit `i` names), as the names along
/// it (the first repeated last), or `None`. Iterative depth-first search: a long chain in a
/// file cannot overflow the stack.
fn find_cycle(names: &[&str], targets: &[Vec<usize>]) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut marks = vec![Mark::New; names.len()];
    for start in 0..names.len() {
        if marks[start] != Mark::New {
            continue;
        }
        // (agent, how many of its targets were visited)
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::OnPath;
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            let Some(&target) = targets[node].get(*next) else {
                marks[node] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match marks[target] {
                Mark::OnPath => {
                    let from = path.iter().position(|&(n, _)| n == target).unwrap_or(0);
                    let mut cycle: Vec<String> = path[from..]
                        .iter()
                        .map(|&(n, _)| names[n].to_string())
                        .collect();
                    cycle.push(names[target].to_string());
                    return Some(cycle);
                }
                Mark::New => {
                    marks[target] = Mark::OnPath;
                    path.push((target, 0));
                }
                Mark::Done => {}
            }
        }
    }
    None
}

/// Whether `name` matches `pattern`, where `*` stands for any text (possibly empty) and
/// every other character for itself.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl Agents {
    /// The names of the tools that hand work to another agent: the agents offered as agent
    /// tools, and the transfer tool when some agent has sub-agents. [`Agents::build`]
    /// refuses an agent tool named like a tool of the tool sets, so these names are the
    /// delegations and nothing else.
    pub fn delegations(&self) -> Vec<String> {
        let mut names: BTreeSet<String> = self
            .specs
            .iter()
            .flat_map(|s| s.agent_tools.iter().map(|t| t.0.agent.clone()))
            .collect();
        if self.specs.iter().any(|s| !s.sub_agents.is_empty()) {
            names.insert(TRANSFER_TO_AGENT.to_string());
        }
        names.into_iter().collect()
    }

    /// The file's external tools, for the tool box to register before the agents are built
    /// (so agents name them in `tools` like any other tool); refused when one is named like
    /// a tool the tool sets offer (`offers`).
    pub fn external_tools(
        &self,
        offers: impl Fn(&str) -> bool,
    ) -> Result<Vec<toolbelt::core::DynTool>, CliError> {
        if let Some(taken) = self.externals.iter().find(|spec| offers(&spec.name)) {
            return Err(self.fail(format!(
                "external tool {:?} is named like a tool the tool sets offer; rename it",
                taken.name
            )));
        }
        Ok(self
            .externals
            .iter()
            // Checked by `load`: every declaration builds.
            .filter_map(|spec| spec.tool().ok())
            .collect())
    }

    /// Builds every agent (children before the agents that use them, each once) and returns
    /// the root. Fails when a tool name or pattern matches no offered tool, or an agent
    /// cannot be offered as a tool (its name is not a valid tool name, or clashes with a
    /// tool of the agent using it).
    pub fn build(&self, cx: &BuildContext<'_>) -> Result<DynAgent, CliError> {
        let mut built: HashMap<&str, DynAgent> = HashMap::new();
        // Children first: `check` refused cycles, so repeatedly building the agents and
        // graphs whose references are all built finishes.
        while built.len() < self.specs.len() + self.graphs.len() {
            let before = built.len();
            for spec in &self.specs {
                if built.contains_key(spec.name.as_str())
                    || spec.edges().any(|(_, t)| !built.contains_key(t))
                {
                    continue;
                }
                let agent = self.build_one(spec, &built, cx)?;
                built.insert(&spec.name, agent);
            }
            for spec in &self.graphs {
                if built.contains_key(spec.name.as_str())
                    || spec.references().any(|t| !built.contains_key(t))
                {
                    continue;
                }
                let graph = spec.build(&built, cx).map_err(|e| self.fail(e))?;
                built.insert(&spec.name, graph);
            }
            if built.len() == before {
                return Err(self.fail("the agents' references could not be resolved".into()));
            }
        }
        Ok(built
            .remove(self.root.as_str())
            .expect("the root was checked to exist"))
    }

    fn fail(&self, message: String) -> CliError {
        CliError::usage(format!("--agents {}: {message}", self.path))
    }

    fn build_one(
        &self,
        spec: &AgentSpec,
        built: &HashMap<&str, DynAgent>,
        cx: &BuildContext<'_>,
    ) -> Result<DynAgent, CliError> {
        let agent_error = |message: String| self.fail(format!("agent {:?}: {message}", spec.name));
        let mut tools = BTreeSet::new();
        for pattern in &spec.tools {
            let matched: Vec<&String> = cx.offered.iter().filter(|n| matches(pattern, n)).collect();
            if matched.is_empty() {
                return Err(agent_error(format!(
                    "tools: no tool is named {pattern:?} (offered: {})",
                    cx.offered.join(", ")
                )));
            }
            tools.extend(matched.into_iter().cloned());
        }
        let model = match &spec.model {
            Some(name) => (cx.model_named)(name)?,
            None => cx.model.clone(),
        };
        let mut builder = LlmAgent::builder(&spec.name)
            .description(&spec.description)
            .instruction(
                spec.instruction
                    .clone()
                    .unwrap_or_else(|| cx.default_instruction.clone()),
            )
            .model_arc(model)
            .executor(cx.executor.clone())
            .max_tool_iterations(cx.max_iterations)
            .generation_config(cx.generation.clone());
        for name in &spec.sub_agents {
            builder = builder.sub_agent(Arc::clone(&built[name.as_str()]));
        }
        for AgentToolEntry(entry) in &spec.agent_tools {
            if cx.offered.contains(&entry.agent) {
                return Err(agent_error(format!(
                    "agent_tools: {:?} is also the name of a tool the tool sets offer; rename \
                     the agent",
                    entry.agent
                )));
            }
            let child = Arc::clone(&built[entry.agent.as_str()]);
            let mut tool = AgentTool::new(child)
                .map_err(|e| agent_error(format!("agent_tools: {:?}: {e}", entry.agent)))?
                .skip_summarization(entry.skip_summarization)
                .stream_inner(entry.stream_inner)
                .inner_text_mode(match entry.inner_text {
                    InnerText::Include => InnerTextMode::Include,
                    InnerText::Exclude => InnerTextMode::Exclude,
                })
                .history_scope(match entry.history {
                    History::Isolated => HistoryScope::Isolated,
                    History::ParentBranch => HistoryScope::ParentBranch,
                });
            if let Some(depth) = entry.max_depth {
                tool = tool.max_depth(depth);
            }
            builder = builder.tool(tool);
            tools.insert(entry.agent.clone());
        }
        // The filter narrows the tool sets' tools to those named; the agent tools are kept.
        builder = builder.tool_filter(ToolFilter::include_names(tools));
        let agent = builder.build().map_err(|e| agent_error(e.to_string()))?;
        Ok(Arc::new(agent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_matches_any_text_and_other_characters_match_themselves() {
        assert!(matches("Read", "Read"));
        assert!(!matches("Read", "ReadMore"));
        assert!(matches("mcp_*", "mcp_echo"));
        assert!(matches("mcp_*", "mcp_"));
        assert!(!matches("mcp_*", "Read"));
        assert!(matches("*", "anything"));
        assert!(matches("a*b*c", "a-b-c"));
        assert!(!matches("a*b*c", "a-c-b"));
        assert!(
            !matches("ab*ba", "aba"),
            "the prefix and suffix may not overlap"
        );
    }

    fn parsed(toml_text: &str) -> Result<Agents, CliError> {
        let file: AgentsFile =
            toml::from_str(toml_text).map_err(|e| CliError::usage(e.to_string()))?;
        check("agents.toml".into(), file)
    }

    #[test]
    fn a_long_chain_is_checked_without_recursion() {
        let mut text = String::new();
        for i in 0..5000 {
            text.push_str(&format!(
                "[[agents]]\nname = \"a{i}\"\nsub_agents = [\"a{}\"]\n",
                i + 1
            ));
        }
        text.push_str("[[agents]]\nname = \"a5000\"\nsub_agents = [\"a0\"]\n");
        let err = parsed(&text).unwrap_err();
        assert!(
            err.message.contains("cycle: a0 -> a1 -> "),
            "{}",
            &err.message[..200]
        );
        assert!(
            err.message.contains("a5000 -> a0 ("),
            "names the whole cycle"
        );
    }
}
