//! A way for a tool to call other tools through whoever runs tools.

use async_trait::async_trait;

use crate::{ToolContext, ToolError, ToolOutput};

/// Runs a tool by name with raw JSON arguments, on behalf of another tool.
///
/// The executor implements it, so that a call a tool makes (a program's call from
/// `execute_code`, say) passes the same validation, hooks, permission rules, lanes and audit
/// as a call the model makes. A tool that holds a caller inside the registry it calls into
/// should hold a weak one (the executor's `downgrade`), or the two keep each other alive.
#[async_trait]
pub trait ToolCaller: Send + Sync {
    /// Calls `name` with `arguments` (a JSON object as text). Unknown tools, bad arguments
    /// and rejections are errors; a tool's own failure is an output with `is_error`.
    async fn call_tool(
        &self,
        ctx: ToolContext,
        name: &str,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError>;
}
