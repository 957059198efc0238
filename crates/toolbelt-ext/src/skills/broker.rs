//! The MCP endpoints of loaded skills, reached through the broker's four tools.
//!
//! The tools (`mcp_list_servers`, `mcp_list_tools`, `mcp_inspect_tools`, `mcp_call`, as
//! [`toolbelt_mcp::broker`] declares them) are offered from the start; until a skill with
//! endpoints is loaded they know no server. Each load rebuilds the broker over the endpoints
//! of every skill loaded so far (ad-hoc URLs stay off, so the model reaches only those), and
//! the previous broker is kept open until the extension closes, so calls in flight finish.
//! A skill's `allowed-tools` is checked here, before the broker sees the call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use toolbelt_core::{
    Declaration, DynTool, Payload, Tool, ToolContext, ToolError, ToolOutput, ToolSet,
};
use toolbelt_mcp::McpBroker;

use super::Skill;

/// The broker over the loaded skills' endpoints.
pub(crate) struct SkillBroker {
    state: Mutex<State>,
    declarations: Vec<Declaration>,
}

struct State {
    current: Arc<McpBroker>,
    /// Server name → the skill that declared it.
    servers: BTreeMap<String, Skill>,
    retired: Vec<Arc<McpBroker>>,
}

impl SkillBroker {
    pub(crate) fn new() -> Result<Self, ToolError> {
        let empty = McpBroker::builder()
            .build()
            .map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(Self {
            declarations: empty.declarations(),
            state: Mutex::new(State {
                current: Arc::new(empty),
                servers: BTreeMap::new(),
                retired: Vec::new(),
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `skill`'s endpoints reachable; returns their names. A server name another
    /// loaded skill already uses is an error (nothing changes).
    pub(crate) fn add_skill(&self, skill: &Skill) -> Result<Vec<String>, String> {
        let mut state = self.state();
        for (name, _) in &skill.mcp {
            if let Some(owner) = state.servers.get(name)
                && owner.name != skill.name
            {
                return Err(format!(
                    "MCP server {name} of skill {} is already provided by skill {}",
                    skill.name, owner.name
                ));
            }
        }
        if skill
            .mcp
            .iter()
            .all(|(name, _)| state.servers.contains_key(name))
        {
            return Ok(skill.mcp.iter().map(|(n, _)| n.clone()).collect());
        }
        let mut servers = state.servers.clone();
        for (name, _) in &skill.mcp {
            servers.insert(name.clone(), skill.clone());
        }
        let mut builder = McpBroker::builder().name("skills_mcp");
        for (name, owner) in &servers {
            if let Some((_, config)) = owner.mcp.iter().find(|(n, _)| n == name) {
                builder = builder.server(name.clone(), config.clone());
            }
        }
        let broker = builder.build().map_err(|e| e.to_string())?;
        let old = std::mem::replace(&mut state.current, Arc::new(broker));
        state.retired.push(old);
        state.servers = servers;
        Ok(skill.mcp.iter().map(|(n, _)| n.clone()).collect())
    }

    /// The four tools.
    pub(crate) fn tools(self: &Arc<Self>) -> Vec<DynTool> {
        self.declarations
            .iter()
            .map(|d| {
                Arc::new(BrokerTool {
                    declaration: d.clone(),
                    broker: self.clone(),
                }) as DynTool
            })
            .collect()
    }

    /// Closes every broker made.
    pub(crate) async fn close(&self) {
        let brokers: Vec<Arc<McpBroker>> = {
            let mut state = self.state();
            let mut all = std::mem::take(&mut state.retired);
            all.push(state.current.clone());
            all
        };
        for broker in brokers {
            if let Err(error) = broker.close().await {
                tracing::warn!(%error, "closing a skills MCP broker");
            }
        }
    }

    /// The server and tool a selector names, among the loaded servers (the longest server
    /// name that prefixes it wins, as in the broker).
    fn split_selector<'a>(&self, selector: &'a str) -> Option<(String, Option<&'a str>)> {
        let state = self.state();
        let (head, tool) = match selector.split_once("#tool=") {
            Some((head, tool)) => (head, Some(tool)),
            None => (selector, None),
        };
        let server = state
            .servers
            .keys()
            .filter(|s| head == s.as_str() || head.starts_with(&format!("{s}.")))
            .max_by_key(|s| s.len())?
            .clone();
        let tool = tool.or_else(|| head.get(server.len() + 1..).filter(|t| !t.is_empty()));
        Some((server, tool))
    }

    /// Why `tool` of `server` may not be called, if it may not.
    fn refusal(&self, server: &str, tool: &str) -> Option<String> {
        let state = self.state();
        let skill = state.servers.get(server)?;
        (!skill.allows_mcp_tool(server, tool)).then(|| {
            format!(
                "tool {tool} of MCP server {server} is not in skill {}'s allowed-tools",
                skill.name
            )
        })
    }

    /// Drops the tools `allowed-tools` forbids from a `mcp_list_tools` result (its JSON for
    /// the model and its structured content).
    fn filter_listing(&self, output: &mut ToolOutput) {
        let filter = |value: &mut Value| {
            let Some(server) = value
                .get("server")
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                return;
            };
            if let Some(Value::Array(tools)) = value.get_mut("tools") {
                tools.retain(|t| {
                    let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
                    self.refusal(&server, name).is_none()
                });
            }
        };
        if let Some(value) = output.structured.as_mut() {
            filter(value);
        }
        match &mut output.for_llm {
            Payload::Json(value) => filter(value),
            Payload::Text(text) => {
                if let Ok(mut value) = serde_json::from_str::<Value>(text) {
                    filter(&mut value);
                    *text = value.to_string();
                }
            }
        }
    }
}

/// One of the broker's tools, delegating to the current broker after the allow-list check.
struct BrokerTool {
    declaration: Declaration,
    broker: Arc<SkillBroker>,
}

#[async_trait]
impl Tool for BrokerTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let name = self.declaration.name.as_str();
        let parsed: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        let selector = parsed.get("selector").and_then(Value::as_str);
        if name != "mcp_list_servers" {
            let Some(selector) = selector else {
                return Err(ToolError::invalid_arguments("selector is required"));
            };
            match self.broker.split_selector(selector) {
                None => {
                    return Ok(ToolOutput::error(format!(
                        "no loaded skill provides the MCP server {selector:?}: load the skill \
                         with skill_load first (mcp_list_servers lists what is reachable)"
                    )));
                }
                Some((server, tool)) => {
                    let mut asked: Vec<&str> = tool.into_iter().collect();
                    if let Some(Value::Array(tools)) = parsed.get("tools") {
                        asked.extend(tools.iter().filter_map(Value::as_str));
                    }
                    if let Some(refusal) =
                        asked.iter().find_map(|t| self.broker.refusal(&server, t))
                    {
                        return Ok(ToolOutput::error(refusal));
                    }
                }
            }
        }
        let current = self.broker.state().current.clone();
        let tool = current
            .broker_tools()
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| ToolError::failed(format!("the broker has no tool {name}")))?;
        let mut output = tool.call(ctx, args).await?;
        if name == "mcp_list_tools" && !output.is_error {
            self.broker.filter_listing(&mut output);
        }
        Ok(output)
    }
}
