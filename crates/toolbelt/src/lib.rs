//! # Toolbelt
//!
//! The tool layer for LLM agents. This facade re-exports the crates of the workspace:
//!
//! | module | crate | what it holds |
//! |---|---|---|
//! | (root), [`core`] | `toolbelt-core` | `Tool`, `ToolSet`, declarations, outputs, context, function tools, filters |
//! | [`exec`] | `toolbelt-exec` | registry, executor pipeline, hooks, middleware, batches, artifacts |
//! | [`builtin`] | `toolbelt-builtin` | Read, Write, Edit, Glob, Grep, NotebookEdit, Bash, web tools (feature `builtin`) |
//! | [`mcp`] | `toolbelt-mcp` | MCP tool sets, config files, the broker; serving over MCP with `mcp-server` |
//! | [`model`] | `toolbelt-model` | the `Model` trait and the OpenAI-compatible client (feature `agent`) |
//! | [`agent`] | `toolbelt-agent` | `LlmAgent`, `Runner`, sessions, events (feature `agent`; SQLite with `sqlite`) |
//! | `ext` | `toolbelt-ext` | extensions: skills, project rules (AGENTS.md, CLAUDE.md), MCP servers files, the result cache (feature `ext`) |
//! | `search` | `toolbelt-search` | tool search: BM25, embeddings, hybrid (feature `search`; local model with `local-embedder`) |
//! | `browser` | `toolbelt-browser` | browser tools on a real Chromium, behind WebFetch's network policy (feature `browser`) |
//! | `graph` | `toolbelt-graph` | graph workflows: typed state, model and tools nodes, checkpoints, interrupts (feature `graph`) |
//!
//! Default features: `builtin`, `mcp`, `agent`. A program that only declares and runs its
//! own tools can depend on `toolbelt-core` and `toolbelt-exec` alone.
//!
//! ## Example
//!
//! ```
//! use toolbelt::{FunctionTool, Tool, ToolContext, ToolError};
//!
//! /// Arguments of `shout`.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct ShoutArgs {
//!     /// The text to upper-case.
//!     text: String,
//! }
//!
//! async fn shout(_ctx: ToolContext, args: ShoutArgs) -> Result<String, ToolError> {
//!     Ok(args.text.to_uppercase())
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let tool = FunctionTool::new("shout", "Upper-cases a text", shout)?;
//! let out = tool.call(ToolContext::for_call("call_1"), r#"{"text":"hi"}"#).await?;
//! assert_eq!(out.llm_text(), "HI");
//! # Ok::<(), ToolError>(()) }).unwrap();
//! ```
#![warn(missing_docs)]

pub use toolbelt_core as core;
pub use toolbelt_core::*;
/// The executor: registry, validation, hooks, middleware, scheduling and artifact offload.
pub use toolbelt_exec as exec;

/// Built-in tools for coding agents, confined to a base directory.
#[cfg(feature = "builtin")]
pub use toolbelt_builtin as builtin;

/// MCP servers as tool sets, config files, the broker and (feature `mcp-server`) serving.
#[cfg(feature = "mcp")]
pub use toolbelt_mcp as mcp;

/// The `Model` trait and the OpenAI-compatible chat client.
#[cfg(feature = "agent")]
pub use toolbelt_model as model;

/// The agent loop: `LlmAgent`, `Runner`, sessions and events.
#[cfg(feature = "agent")]
pub use toolbelt_agent as agent;

#[cfg(feature = "ext")]
pub use toolbelt_ext as ext;

#[cfg(feature = "search")]
pub use toolbelt_search as search;

#[cfg(feature = "browser")]
pub use toolbelt_browser as browser;

/// Knowledge tools: a knowledge base over files and web pages, `knowledge_search` and
/// `agentic_knowledge_search`.
#[cfg(feature = "knowledge")]
pub use toolbelt_knowledge as knowledge;

/// Graph workflows: typed state graphs that run as an agent, checkpointed in the session.
#[cfg(feature = "graph")]
pub use toolbelt_graph as graph;

/// The README's example, compiled and run as a doc test.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
