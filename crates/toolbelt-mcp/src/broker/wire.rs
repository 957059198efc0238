//! The arguments and results of the four broker tools. Their JSON Schemas (generated from
//! these types) are what the model sees; every argument object refuses unknown fields.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolbelt_core::JsonObject;

/// The transport to an ad-hoc URL (stdio is never ad-hoc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdHocTransport {
    /// Streamable HTTP (the default).
    #[default]
    #[serde(alias = "http", alias = "streamable-http")]
    StreamableHttp,
    /// The legacy HTTP+SSE transport.
    Sse,
}

/// The compact schema of `transport` (what schemars derives for an optional enum with
/// documented variants is four times longer, and every model reads it on every turn).
/// `null` is accepted: models in strict mode send every optional field, as null.
fn transport_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"enum": ["streamable_http", "sse", null]})
}

/// The compact schema of `headers`: names to values (or null).
fn headers_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["object", "null"], "additionalProperties": {"type": "string"}})
}

/// Arguments of `mcp_list_servers`: none.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListServersArgs {}

/// Arguments of `mcp_list_tools`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListToolsArgs {
    /// A server name from mcp_list_servers (or an MCP endpoint URL, when allowed).
    pub selector: String,
    /// URL selectors only: "streamable_http" (default) or "sse".
    #[serde(default)]
    #[schemars(schema_with = "transport_schema")]
    pub transport: Option<AdHocTransport>,
    /// URL selectors only: extra HTTP headers (credentials are refused).
    #[serde(default)]
    #[schemars(schema_with = "headers_schema")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// Arguments of `mcp_inspect_tools`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectToolsArgs {
    /// The server, as for mcp_list_tools.
    pub selector: String,
    /// Exact tool names from mcp_list_tools.
    pub tools: Vec<String>,
    /// Also return each tool's output schema (default false).
    #[serde(default)]
    pub include_output_schema: Option<bool>,
    /// URL selectors only: as for mcp_list_tools.
    #[serde(default)]
    #[schemars(schema_with = "transport_schema")]
    pub transport: Option<AdHocTransport>,
    /// URL selectors only: as for mcp_list_tools.
    #[serde(default)]
    #[schemars(schema_with = "headers_schema")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// Arguments of `mcp_call`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallArgs {
    /// The tool's selector, as mcp_list_tools shows it.
    pub selector: String,
    /// The tool's arguments ({} for none).
    pub arguments: JsonObject,
    /// URL selectors only: as for mcp_list_tools.
    #[serde(default)]
    #[schemars(schema_with = "transport_schema")]
    pub transport: Option<AdHocTransport>,
    /// URL selectors only: as for mcp_list_tools.
    #[serde(default)]
    #[schemars(schema_with = "headers_schema")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// The result of `mcp_list_servers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServerList {
    /// The configured servers, sorted by name.
    pub servers: Vec<ServerSummary>,
}

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServerSummary {
    /// The name to use as a selector.
    pub name: String,
    /// `stdio`, `sse` or `streamable_http`.
    pub transport: String,
    /// What the server offers, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The result of `mcp_list_tools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolList {
    /// The server name or URL.
    pub server: String,
    /// Its tools, sorted by name.
    pub tools: Vec<ToolSummary>,
}

/// One tool in a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSummary {
    /// The tool's exact name.
    pub name: String,
    /// The selector for mcp_call.
    pub selector: String,
    /// Parameters and result in one line; `?` marks optional parameters.
    pub signature: String,
    /// The first line of the tool's description (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The result of `mcp_inspect_tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDetails {
    /// The tools asked for, in the order asked.
    pub tools: Vec<ToolDetail>,
}

/// One tool's full declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDetail {
    /// The tool's exact name.
    pub name: String,
    /// The selector for mcp_call.
    pub selector: String,
    /// The full description.
    pub description: String,
    /// The JSON Schema of `arguments`.
    pub input_schema: JsonObject,
    /// The JSON Schema of the structured result, when asked for and declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
}

/// The result of `mcp_call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallResult {
    /// The result as text, when the tool returned no structured content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tool's structured result, when it returned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool reported a failure.
    pub is_error: bool,
}
