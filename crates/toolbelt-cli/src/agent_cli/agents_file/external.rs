//! The `[[external_tools]]` of an agents file: tools whose work is done outside the run, by
//! a person or another system (a refund a finance team grants, a deploy a pipeline runs).
//!
//! ```toml
//! [[external_tools]]
//! name = "request_refund"
//! description = "Asks the finance team to refund an order; they answer within a day."
//! parameters = { type = "object", properties = { order = { type = "string" } }, required = ["order"] }
//! status = "sent to the finance team"   # optional: what the model is told while it waits
//! read_only = false                     # optional: as for any tool, whether approval is asked
//! ```
//!
//! A call is validated against `parameters` like any other and answered with its status as
//! a long-running call ([`ToolOutput::pending`]): the run pauses (exit code 3) until a later
//! run of the session supplies the result with `--tool-result CALL=FILE`, in any process.
//! Agents offer them by name in `tools`, as they do built-in and MCP tools.

use async_trait::async_trait;
use serde::Deserialize;
use toolbelt::core::{Declaration, DynTool, Tool, ToolContext, ToolError, ToolOutput};
use toolbelt::exec::ValidatorCache;

/// The status a waiting call reports when the file gives none.
const DEFAULT_STATUS: &str = "the request was handed on; its result comes later";

/// One external tool as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExternalToolSpec {
    pub(super) name: String,
    description: String,
    /// The JSON Schema of the arguments: an object schema, `{}` when omitted.
    #[serde(default)]
    parameters: Option<serde_json::Value>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    read_only: bool,
}

impl ExternalToolSpec {
    /// The tool, or why the declaration is refused (a bad name or schema).
    pub(super) fn tool(&self) -> Result<DynTool, String> {
        let refuse = |e: ToolError| format!("external tool {:?}: {e}", self.name);
        let mut declaration = Declaration::new(&self.name, &self.description).map_err(refuse)?;
        if let Some(schema) = &self.parameters {
            declaration = declaration
                .with_input_schema(schema.clone())
                .map_err(refuse)?;
        }
        if self.read_only {
            declaration = declaration.read_only();
        }
        let tool: DynTool = std::sync::Arc::new(ExternalTool {
            declaration,
            status: self
                .status
                .clone()
                .unwrap_or_else(|| DEFAULT_STATUS.to_string()),
        });
        // A schema that does not compile is refused now, not at the model's first call.
        if let Err(e @ ToolError::InvalidDeclaration { .. }) =
            ValidatorCache::new().validate(&tool, &serde_json::json!({}))
        {
            return Err(refuse(e));
        }
        Ok(tool)
    }
}

/// A tool that only records the request: every call waits for a result from outside.
struct ExternalTool {
    declaration: Declaration,
    status: String,
}

#[async_trait]
impl Tool for ExternalTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, _ctx: ToolContext, _args: &str) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::pending(self.status.clone()))
    }
}
