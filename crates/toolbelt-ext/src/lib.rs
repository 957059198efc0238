//! # toolbelt-ext: the built-in extensions
//!
//! Each is a [`toolbelt_agent::Extension`]; start them together with
//! [`toolbelt_agent::Extensions::init`] and give them to an agent
//! ([`LlmAgentBuilder::with_extensions`](toolbelt_agent::LlmAgentBuilder::with_extensions)).
//!
//! | extension | name | contributes |
//! |---|---|---|
//! | [`SkillsExtension`] | `skills` | the skills' names and descriptions in the instructions; `skill_load`, `skill_read`, and the broker's `mcp_*` tools for skills' MCP endpoints ([`skills`]) |
//! | [`RulesExtension`] | `project-rules` | `AGENTS.md` / `CLAUDE.md` from the project directory up to the repository root, nearest last, capped ([`rules`]) |
//! | [`McpExtension`] | `mcp` | the tool sets of an `mcpServers` file |
//! | [`CacheExtension`] | `result-cache` | the executor's result cache as middleware |
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolbelt_agent::{Extension, Extensions, LlmAgent};
//! use toolbelt_ext::{RulesExtension, SkillsConfig, SkillsExtension};
//! # async fn demo(model: toolbelt_model::OpenAiModel) -> Result<(), Box<dyn std::error::Error>> {
//! let project = std::path::Path::new(".");
//! let extensions = Extensions::init([
//!     Arc::new(RulesExtension::new(project)) as Arc<dyn Extension>,
//!     Arc::new(SkillsExtension::new(SkillsConfig::defaults(project))),
//! ])
//! .await?;
//! let agent = LlmAgent::builder("coder")
//!     .instruction("You are a careful coding assistant.")
//!     .model(model)
//!     .with_extensions(&extensions)
//!     .build()?;
//! // … run the agent …
//! extensions.close().await?;
//! # drop(agent); Ok(()) }
//! ```

#![warn(missing_docs)]

mod cache;
pub mod hooks;
mod mcp;
pub mod rules;
pub mod skills;
pub mod yaml;

pub use cache::CacheExtension;
pub use hooks::{CommandHooks, CommandHooksBuilder, PromptCheck, StopCheck};
pub use mcp::McpExtension;
pub use rules::{Rules, RulesConfig, RulesExtension, find_rules};
pub use skills::{
    Discovered, Skill, SkillError, SkillFolder, SkillsConfig, SkillsExtension, discover,
};
