//! [`knowledge_plugin`]: the knowledge tools as framework tools of a toolbelt-agent run;
//! [`KnowledgeAgentExt`]: the same for one agent, on its builder.
//!
//! `knowledge_search` and `agentic_knowledge_search` are framework names in toolbelt-agent:
//! an agent's own `.tool(...)` of either name is refused, no tool filter removes them, and a
//! tool set's tool under either name (a hostile MCP server's) is left out, because the agent
//! recognises the framework's tools by identity, not by name. A [`Plugin`]'s tools are such
//! framework tools, offered to every agent of the runner's runs, so this is how a knowledge
//! base reaches an agent:
//!
//! ```no_run
//! # fn demo(runner: toolbelt_agent::Runner, base: std::sync::Arc<toolbelt_knowledge::KnowledgeBase>)
//! # -> Result<(), toolbelt_core::ToolError> {
//! use toolbelt_knowledge::{KnowledgeToolOptions, knowledge_plugin};
//! let runner = runner.with_plugin(knowledge_plugin(base, KnowledgeToolOptions::default())?);
//! # Ok(()) }
//! ```

//!
//! One agent rather than every agent of a runner: `LlmAgent::builder(..).knowledge(base)?`
//! (the spec's `llmagent.WithKnowledge(kb)`). It is an extension trait here, not a method of
//! toolbelt-agent's builder, because this crate depends on toolbelt-agent (feature `agent`):
//! toolbelt-agent depending back on it would be a cycle. The trait adds a plugin to the agent
//! alone ([`LlmAgentBuilder::plugin`]), so the tools are the agent's framework tools, kept
//! through its filters and recognised by identity, and sub-agents do not get them.
//!
//! ```
//! use std::sync::Arc;
//! use toolbelt_agent::LlmAgent;
//! use toolbelt_knowledge::{KnowledgeAgentExt, KnowledgeBase, MemoryStore};
//! use toolbelt_model::{OpenAiConfig, OpenAiModel};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let base = Arc::new(KnowledgeBase::new(Arc::new(MemoryStore::new())));
//! let model = OpenAiModel::new(OpenAiConfig::new("http://127.0.0.1:8000/v1", "qwen3"))?;
//! let agent = LlmAgent::builder("support")
//!     .instruction("Answer from the knowledge base, citing it.")
//!     .model(model)
//!     .knowledge(base)?
//!     .build()?;
//! # let _ = agent;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use toolbelt_agent::{LlmAgentBuilder, Plugin};
use toolbelt_core::ToolError;

use crate::base::KnowledgeBase;
use crate::tools::{KnowledgeToolOptions, knowledge_tools};

/// A plugin named `knowledge` carrying both knowledge tools over `base`.
pub fn knowledge_plugin(
    base: Arc<KnowledgeBase>,
    options: KnowledgeToolOptions,
) -> Result<Plugin, ToolError> {
    let mut plugin = Plugin::new("knowledge");
    for tool in knowledge_tools(base, options)? {
        plugin = plugin.tool(tool);
    }
    Ok(plugin)
}

/// Gives one agent the knowledge tools over a base; see the [module docs](self).
pub trait KnowledgeAgentExt: Sized {
    /// The agent gets `knowledge_search` and `agentic_knowledge_search` over `base` as
    /// framework tools, with the default [`KnowledgeToolOptions`].
    fn knowledge(self, base: Arc<KnowledgeBase>) -> Result<Self, ToolError> {
        self.knowledge_with(base, KnowledgeToolOptions::default())
    }

    /// As [`knowledge`](KnowledgeAgentExt::knowledge), answering under `options`.
    fn knowledge_with(
        self,
        base: Arc<KnowledgeBase>,
        options: KnowledgeToolOptions,
    ) -> Result<Self, ToolError>;
}

impl KnowledgeAgentExt for LlmAgentBuilder {
    fn knowledge_with(
        self,
        base: Arc<KnowledgeBase>,
        options: KnowledgeToolOptions,
    ) -> Result<Self, ToolError> {
        Ok(self.plugin(knowledge_plugin(base, options)?))
    }
}
