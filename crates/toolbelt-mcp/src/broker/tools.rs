//! The four tools a model sees, as function tools over the broker's operations.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use toolbelt_core::schema::schema_for;
use toolbelt_core::{DynTool, FunctionTool, JsonObject, ToolError, ToolOutput};

use super::wire::{
    CallArgs, CallResult, InspectToolsArgs, ListServersArgs, ListToolsArgs, ServerList,
    ToolDetails, ToolList,
};
use super::{BrokerError, Inner};

/// Builds `mcp_list_servers`, `mcp_list_tools`, `mcp_inspect_tools` and `mcp_call`.
pub(crate) fn broker_tools(inner: &Arc<Inner>) -> Result<Vec<DynTool>, BrokerError> {
    let urls = inner.policy.enabled;
    let server_hint = if urls {
        "a server name from mcp_list_servers, or an MCP endpoint URL"
    } else {
        "a server name from mcp_list_servers"
    };
    let tool_hint = if urls {
        "SERVER.TOOL, URL.TOOL or URL#tool=TOOL, as mcp_list_tools shows it"
    } else {
        "SERVER.TOOL, as mcp_list_tools shows it"
    };

    let list_servers = {
        let inner = inner.clone();
        FunctionTool::new(
            "mcp_list_servers",
            "Lists the MCP servers you can use, with what each offers. Then use mcp_list_tools \
             to see a server's tools.",
            move |_ctx, _args: ListServersArgs| {
                let servers = inner.list_servers();
                async move { Ok::<_, ToolError>(servers) }
            },
        )
        .and_then(|t| t.with_output_schema(Some(schema_value::<ServerList>())))
        .map_err(BrokerError::Declaration)?
        .map_declaration(|d| d.read_only().concurrency_safe(true))
    };

    let list_tools = {
        let inner = inner.clone();
        FunctionTool::returning_output(
            "mcp_list_tools",
            &format!(
                "Lists an MCP server's tools, each with a one-line signature (`?` marks optional \
                 parameters) and the selector to call it with. selector: {server_hint}."
            ),
            move |ctx, args: ListToolsArgs| {
                let inner = inner.clone();
                async move { finish(inner.list_tools(&ctx, args).await) }
            },
        )
        .and_then(|t| t.with_output_schema(Some(schema_value::<ToolList>())))
        .map_err(BrokerError::Declaration)?
        .map_declaration(|d| d.read_only().concurrency_safe(true))
    };

    let inspect_tools = {
        let inner = inner.clone();
        FunctionTool::returning_output(
            "mcp_inspect_tools",
            &format!(
                "Returns the full input schema (and the output schema when asked) of the named \
                 tools of one MCP server, for when a signature is not enough. selector: \
                 {server_hint}; tools: exact names from mcp_list_tools."
            ),
            move |ctx, args: InspectToolsArgs| {
                let inner = inner.clone();
                async move { finish(inner.inspect_tools(&ctx, args).await) }
            },
        )
        .and_then(|t| t.with_output_schema(Some(schema_value::<ToolDetails>())))
        .map_err(BrokerError::Declaration)?
        .map_declaration(|d| d.read_only().concurrency_safe(true))
    };

    let call = {
        let inner = inner.clone();
        FunctionTool::returning_output(
            "mcp_call",
            &format!(
                "Calls a tool of an MCP server. selector: {tool_hint}; arguments: the tool's \
                 arguments as an object ({{}} for none)."
            ),
            move |ctx, args: CallArgs| {
                let inner = inner.clone();
                async move {
                    match inner.call(&ctx, args).await {
                        Err(BrokerError::Handled { message }) => Ok(ToolOutput::error(message)),
                        other => other.map_err(ToolError::from),
                    }
                }
            },
        )
        .and_then(|t| t.with_output_schema(Some(schema_value::<CallResult>())))
        .map_err(BrokerError::Declaration)?
        .map_declaration(|d| d.open_world())
    };

    Ok(vec![
        Arc::new(tidy_input(list_servers)),
        Arc::new(tidy_input(list_tools)),
        Arc::new(tidy_input(inspect_tools)),
        Arc::new(tidy_input(call)),
    ])
}

fn schema_value<T: JsonSchema>() -> Value {
    Value::Object(tidy(schema_for::<T>()))
}

/// Drops what a model does not need from a generated schema: the root description (the
/// Rust type's doc comment; the tool's description says it better) and `default: null` of
/// optional fields.
fn tidy(mut schema: JsonObject) -> JsonObject {
    schema.remove("description");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property
                && property.get("default") == Some(&Value::Null)
            {
                property.remove("default");
            }
        }
    }
    schema
}

/// Replaces a tool's generated input schema with its tidy form (with `properties`, even
/// when empty: some providers require it).
fn tidy_input(tool: FunctionTool) -> FunctionTool {
    tool.map_declaration(|mut d| {
        d.input_schema = tidy(std::mem::take(&mut d.input_schema));
        d.input_schema
            .entry("properties")
            .or_insert_with(|| Value::Object(JsonObject::new()));
        d
    })
}

/// A typed result as JSON for the model and as structured output; an error the interceptor
/// handled becomes a result-level error.
fn finish<T: Serialize>(result: Result<T, BrokerError>) -> Result<ToolOutput, ToolError> {
    match result {
        Ok(value) => {
            let value = serde_json::to_value(value).map_err(|err| {
                ToolError::failed(format!("could not serialize the broker's result: {err}"))
            })?;
            Ok(ToolOutput::json(value.clone()).with_structured(value))
        }
        Err(BrokerError::Handled { message }) => Ok(ToolOutput::error(message)),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolbelt_core::{Tool, ToolContext};

    use super::super::McpBroker;
    use super::*;

    #[test]
    fn the_four_tools_have_strict_inputs_and_declared_outputs() {
        let broker = McpBroker::builder().build().unwrap();
        let declarations = broker.declarations();
        let names: Vec<&str> = declarations.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "mcp_list_servers",
                "mcp_list_tools",
                "mcp_inspect_tools",
                "mcp_call"
            ]
        );
        for decl in &declarations {
            assert_eq!(
                decl.input_schema.get("additionalProperties"),
                Some(&json!(false)),
                "{}: {:?}",
                decl.name,
                decl.input_schema
            );
            let output = decl.output_schema.as_ref().expect("an output schema");
            assert_eq!(output.get("type"), Some(&json!("object")), "{}", decl.name);
        }
        let required = |i: usize| declarations[i].required_properties();
        assert!(required(0).is_empty());
        assert_eq!(required(1), ["selector"]);
        assert_eq!(required(2), ["selector", "tools"]);
        assert_eq!(required(3), ["selector", "arguments"]);
    }

    #[tokio::test]
    async fn unknown_fields_and_missing_arguments_are_refused_before_any_work() {
        let broker = McpBroker::builder().build().unwrap();
        let tools = broker.broker_tools();
        let err = tools[0]
            .call(ToolContext::new(), r#"{"verbose": true}"#)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `verbose`"), "{err}");
        let err = tools[3]
            .call(ToolContext::new(), r#"{"selector": "s.t"}"#)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("missing field `arguments`"),
            "{err}"
        );
        let err = tools[1]
            .call(
                ToolContext::new(),
                r#"{"selector": "http://127.0.0.1:1/mcp", "transport": "stdio"}"#,
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `stdio`")
                && err.to_string().contains("`streamable_http`, `sse`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn descriptions_mention_urls_only_when_ad_hoc_http_is_on() {
        let off = McpBroker::builder().build().unwrap().declarations();
        assert!(
            !off[3].description.contains("URL"),
            "{}",
            off[3].description
        );
        let on = McpBroker::builder()
            .allow_ad_hoc_http(true)
            .build()
            .unwrap()
            .declarations();
        assert!(
            on[3].description.contains("URL#tool=TOOL"),
            "{}",
            on[3].description
        );
        assert!(on[1].description.contains("URL"), "{}", on[1].description);
    }

    #[test]
    fn server_names_that_could_never_be_selected_are_refused() {
        use crate::{ConnectionConfig, TransportConfig};
        for name in ["", "has space", "http://h/mcp"] {
            let err = McpBroker::builder()
                .server(
                    name,
                    ConnectionConfig::new(TransportConfig::stdio("true", [""; 0])),
                )
                .build()
                .unwrap_err();
            assert!(
                matches!(err, BrokerError::InvalidServerName { .. }),
                "{name:?}: {err}"
            );
        }
    }
}
