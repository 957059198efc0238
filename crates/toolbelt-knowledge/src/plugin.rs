//! [`knowledge_plugin`]: the knowledge tools as framework tools of a toolbelt-agent run.
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

use std::sync::Arc;

use toolbelt_agent::Plugin;
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
