//! Tool sets: named collections of tools with a lifecycle (an MCP server, the built-in tools).

use std::sync::Arc;

use async_trait::async_trait;

use crate::{DynTool, ToolContext, ToolError};

/// A named collection of tools that may hold resources (a process, a connection).
///
/// # Ownership
///
/// Whoever creates a tool set closes it. Attaching a set to an agent or a registry does not
/// transfer ownership: they list its tools and call them, and never call [`ToolSet::close`].
/// Keep the `Arc` you made, and close it when the set is no longer needed (after the runs
/// that use it have finished).
#[async_trait]
pub trait ToolSet: Send + Sync {
    /// The set's name, used to tell sets apart and to prefix tool names on collision.
    fn name(&self) -> &str;

    /// The tools currently in the set. A remote set may list lazily, on first use, and may
    /// fail; a local set returns the same tools every time.
    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError>;

    /// Releases the set's resources (kills processes, ends sessions). Calling it twice is not
    /// an error.
    async fn close(&self) -> Result<(), ToolError> {
        Ok(())
    }
}

/// A shared, type-erased tool set.
pub type DynToolSet = Arc<dyn ToolSet>;

#[async_trait]
impl<T: ToolSet + ?Sized> ToolSet for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn tools(&self, ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        (**self).tools(ctx).await
    }
    async fn close(&self) -> Result<(), ToolError> {
        (**self).close().await
    }
}

/// A tool set over a fixed list of tools, holding no resources.
#[derive(Clone)]
pub struct StaticToolSet {
    name: String,
    tools: Vec<DynTool>,
}

impl StaticToolSet {
    /// A set named `name` holding `tools`.
    pub fn new(name: impl Into<String>, tools: Vec<DynTool>) -> Self {
        Self {
            name: name.into(),
            tools,
        }
    }
}

impl std::fmt::Debug for StaticToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
        f.debug_struct("StaticToolSet")
            .field("name", &self.name)
            .field("tools", &names)
            .finish()
    }
}

#[async_trait]
impl ToolSet for StaticToolSet {
    fn name(&self) -> &str {
        &self.name
    }
    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Ok(self.tools.clone())
    }
}
