//! One MCP tool as a Toolbelt [`Tool`].

use std::sync::Weak;

use async_trait::async_trait;
use serde_json::Value;
use toolbelt_core::{Declaration, JsonObject, Tool, ToolContext, ToolError, ToolOutput};
use tracing::Instrument;

use super::Inner;

/// A tool of an MCP server. Calls go through its [`McpToolSet`](super::McpToolSet), so they
/// share its session, its timeout and its reconnect policy.
pub struct McpTool {
    declaration: Declaration,
    mcp_name: String,
    set: Weak<Inner>,
}

impl McpTool {
    pub(super) fn new(declaration: Declaration, mcp_name: String, set: Weak<Inner>) -> Self {
        Self {
            declaration,
            mcp_name,
            set,
        }
    }

    /// The tool's name on the server (without any prefix the set added).
    pub fn mcp_name(&self) -> &str {
        &self.mcp_name
    }
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.declaration.name)
            .field("mcp_name", &self.mcp_name)
            .finish()
    }
}

/// Parses the model's argument text into the JSON object MCP expects; empty means none.
pub(crate) fn parse_arguments(args: &str) -> Result<Option<JsonObject>, ToolError> {
    if args.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(args) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(Value::Null) => Ok(None),
        Ok(other) => Err(ToolError::invalid_arguments(format!(
            "arguments must be a JSON object, got {}",
            json_kind(&other)
        ))),
        Err(err) => Err(ToolError::invalid_arguments(format!(
            "arguments are not valid JSON: {err}"
        ))),
    }
}

/// What kind of JSON value `value` is, for messages that must not echo a large value (also
/// used by the server's answers to malformed requests).
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[async_trait]
impl Tool for McpTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let arguments = parse_arguments(args)?;
        let Some(set) = self.set.upgrade() else {
            return Err(ToolError::failed(format!(
                "the MCP tool set behind {:?} has been dropped",
                self.declaration.name
            )));
        };
        let span = tracing::debug_span!(
            "mcp_call",
            server = %set.name,
            tool = %self.mcp_name,
            call_id = ctx.call_id().unwrap_or_default(),
        );
        set.call_tool(
            &ctx,
            &self.mcp_name,
            arguments,
            self.declaration.meta.is_idempotent(),
        )
        .instrument(span)
        .await
        .map_err(ToolError::from)
    }
}
