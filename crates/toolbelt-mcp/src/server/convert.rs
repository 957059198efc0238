//! Toolbelt's types into MCP's: declarations into tool listings, outputs and errors into
//! `tools/call` results.

use std::sync::Arc;

use rmcp::model::Resource as McpResource;
use rmcp::model::{
    CallToolResult, ContentBlock as McpContent, ResourceContents, Tool as McpTool, ToolAnnotations,
};
use toolbelt_core::{ContentBlock, Declaration, JsonObject, Payload, ToolError, ToolOutput};

use crate::client::relay::take_relayed;

/// An MCP tool listing entry for a declaration: name, title, description, schemas,
/// annotations from the behaviour hints and `_meta` from the client metadata.
///
/// Only what was declared is listed: a tool without hints gets no annotations, an undeclared
/// hint is left out (so clients apply MCP's cautious defaults) and an empty description is
/// left out, so a tool relayed from an aggregated server is listed as that server listed it.
pub fn mcp_tool(declaration: &Declaration) -> McpTool {
    let meta = &declaration.meta;
    let hints = [
        meta.read_only,
        meta.destructive,
        meta.idempotent,
        meta.open_world,
    ];
    let mut tool = McpTool::new(
        declaration.name.to_string(),
        declaration.description.clone(),
        Arc::new(declaration.input_schema.clone()),
    );
    if declaration.description.is_empty() {
        tool.description = None;
    }
    tool.title = declaration.title.clone();
    tool.meta = declaration
        .client_meta
        .clone()
        .map(rmcp::model::MetaObject::from);
    if hints.iter().any(Option::is_some) {
        tool = tool.with_annotations(ToolAnnotations::from_raw(
            None,
            meta.read_only,
            meta.destructive,
            meta.idempotent,
            meta.open_world,
        ));
    }
    if let Some(output) = &declaration.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output.clone()));
    }
    tool
}

/// One MCP content block for a Toolbelt block.
fn mcp_content(block: &ContentBlock) -> McpContent {
    match block {
        ContentBlock::Text { text } => McpContent::text(text.clone()),
        ContentBlock::Image { mime_type, data } => {
            McpContent::image(data.clone(), mime_type.clone())
        }
        ContentBlock::Audio { mime_type, data } => {
            McpContent::audio(data.clone(), mime_type.clone())
        }
        ContentBlock::ResourceLink {
            uri,
            name,
            description,
            mime_type,
        } => {
            let mut resource = McpResource::new(uri.clone(), name.clone());
            resource.description = description.clone();
            resource.mime_type = mime_type.clone();
            McpContent::resource_link(resource)
        }
        ContentBlock::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            let contents = match (text, blob) {
                (_, Some(blob)) => ResourceContents::BlobResourceContents {
                    uri: uri.clone(),
                    mime_type: mime_type.clone(),
                    blob: blob.clone(),
                    meta: None,
                },
                (text, None) => ResourceContents::TextResourceContents {
                    uri: uri.clone(),
                    mime_type: mime_type.clone(),
                    text: text.clone().unwrap_or_default(),
                    meta: None,
                },
            };
            McpContent::resource(contents)
        }
    }
}

/// The `tools/call` result for a tool's output.
///
/// The model's text comes first, then the blocks; the text is left out when it is empty or
/// merely repeats the blocks (a result relayed from an aggregated MCP server). A result-level failure keeps `isError: true`.
///
/// `structuredContent` is sent only when the tool declared an output schema
/// (`declares_output_schema`) and the call succeeded: MCP clients validate it against that
/// schema, and tools that attach structured data without declaring a schema (Read, Grep) would
/// otherwise hand clients data they cannot check. The structured value is the output's
/// [`ToolOutput::structured`], or its JSON object payload when the tool set none.
pub fn call_result(output: &ToolOutput, declares_output_schema: bool) -> CallToolResult {
    let mut meta = output.meta.clone();
    let relayed = take_relayed(&mut meta);
    let text = output.llm_text();
    let mut content = Vec::with_capacity(1 + output.blocks.len());
    if output.blocks.is_empty() || (!text.is_empty() && !derived_from_blocks(&text, output)) {
        content.push(McpContent::text(text));
    }
    let first_block = content.len();
    content.extend(output.blocks.iter().map(mcp_content));
    if let Some(relayed) = &relayed {
        restore_block_extras(&mut content[first_block..], &relayed.blocks);
    }
    if output.silent {
        content.iter_mut().for_each(for_the_model_only);
    }
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    if relayed.as_ref().is_some_and(|r| r.structured) {
        // An aggregated server's structured content, as it sent it.
        result.structured_content = output.structured.clone();
    } else if declares_output_schema && !output.is_error {
        result.structured_content = match (&output.structured, &output.for_llm) {
            (Some(value), _) => Some(value.clone()),
            (None, Payload::Json(value @ serde_json::Value::Object(_))) => Some(value.clone()),
            (None, _) => None,
        };
    }
    result.meta = meta.map(rmcp::model::MetaObject::from);
    result
}

/// Puts back each block's `annotations` and `_meta` as the aggregated server sent them.
fn restore_block_extras(blocks: &mut [McpContent], extras: &[JsonObject]) {
    if blocks.len() != extras.len() {
        return; // an after hook changed the blocks: what was kept no longer fits
    }
    for (block, extras) in blocks.iter_mut().zip(extras) {
        if extras.is_empty() {
            continue;
        }
        let Ok(serde_json::Value::Object(mut raw)) = serde_json::to_value(&*block) else {
            continue;
        };
        raw.extend(extras.clone());
        if let Ok(restored) = serde_json::from_value(serde_json::Value::Object(raw)) {
            *block = restored;
        }
    }
}

/// Marks a block of a `silent` result for the model only (MCP's `audience: ["assistant"]`):
/// a client shows it to no user but passes it to its model. An audience the block already
/// has (an aggregated server's) is kept.
fn for_the_model_only(block: &mut McpContent) {
    let Ok(serde_json::Value::Object(mut raw)) = serde_json::to_value(&*block) else {
        return;
    };
    let annotations = raw
        .entry("annotations")
        .or_insert_with(|| serde_json::Value::Object(JsonObject::new()));
    let Some(annotations) = annotations.as_object_mut() else {
        return;
    };
    if annotations.contains_key("audience") {
        return;
    }
    annotations.insert("audience".into(), serde_json::json!(["assistant"]));
    if let Ok(marked) = serde_json::from_value(serde_json::Value::Object(raw)) {
        *block = marked;
    }
}

/// Whether the model's text is only the blocks' summaries (what an aggregated MCP server's
/// result maps to), so sending it beside the blocks would repeat them.
fn derived_from_blocks(text: &str, output: &ToolOutput) -> bool {
    let summaries: Vec<String> = output.blocks.iter().map(ContentBlock::summary).collect();
    !summaries.is_empty() && text == summaries.join("\n")
}

/// The `tools/call` result for a failed call: `isError: true` with the short, actionable text
/// a model reads (validation errors, rejections, timeouts, interruptions, the tool's errors).
pub fn error_result(error: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![McpContent::text(error.for_model())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declaration() -> Declaration {
        Declaration::new("probe", "A probe").unwrap()
    }

    #[test]
    fn a_silent_result_is_for_the_model_only() {
        let output = ToolOutput::text("internal note")
            .with_block(ContentBlock::image("image/png", "AAAA"))
            .silent();
        let result = serde_json::to_value(call_result(&output, false)).unwrap();
        let content = result["content"].as_array().unwrap();
        assert_eq!(content.len(), 2);
        for block in content {
            assert_eq!(
                block["annotations"]["audience"],
                json!(["assistant"]),
                "{block}"
            );
        }
        // A result that is not silent carries no audience: clients show it to everyone.
        let shown = serde_json::to_value(call_result(&ToolOutput::text("hi"), false)).unwrap();
        assert!(shown["content"][0].get("annotations").is_none(), "{shown}");
    }

    #[test]
    fn annotations_carry_the_declared_hints_only() {
        let tool = mcp_tool(&declaration().read_only().idempotent().open_world());
        let a = tool.annotations.expect("declared hints are sent");
        assert_eq!(a.read_only_hint, Some(true));
        assert_eq!(a.destructive_hint, Some(false));
        assert_eq!(a.idempotent_hint, Some(true));
        assert_eq!(a.open_world_hint, Some(true));

        let tool = mcp_tool(&declaration().destructive().closed_world());
        let a = tool.annotations.unwrap();
        assert_eq!(a.read_only_hint, Some(false));
        assert_eq!(a.destructive_hint, Some(true));
        assert_eq!(a.idempotent_hint, None);
        assert_eq!(a.open_world_hint, Some(false));
        assert!(tool.output_schema.is_none());

        // Nothing declared: no annotations, so clients apply MCP's defaults.
        let tool = mcp_tool(&declaration());
        assert!(tool.annotations.is_none());
        assert!(tool.title.is_none());
    }

    #[test]
    fn title_is_listed_and_an_empty_description_is_left_out() {
        let decl = Declaration::new("probe", "")
            .unwrap()
            .with_title(Some("Probe".into()));
        let tool = serde_json::to_value(mcp_tool(&decl)).unwrap();
        assert_eq!(tool["title"], "Probe");
        assert!(tool.get("description").is_none(), "{tool}");
        assert!(tool.get("annotations").is_none(), "{tool}");
    }

    #[test]
    fn a_declared_output_schema_is_listed() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let decl = declaration()
            .with_output_schema(Some(schema.clone()))
            .unwrap();
        let tool = mcp_tool(&decl);
        assert_eq!(
            tool.output_schema
                .map(|s| serde_json::Value::Object((*s).clone())),
            Some(schema)
        );
    }

    #[test]
    fn structured_content_only_when_an_output_schema_is_declared() {
        let output = ToolOutput::text("3 matches").with_structured(json!({"count": 3}));
        assert_eq!(call_result(&output, false).structured_content, None);
        assert_eq!(
            call_result(&output, true).structured_content,
            Some(json!({"count": 3}))
        );
        // A JSON object result is the structured result when none was set.
        let output = ToolOutput::json(json!({"n": 1}));
        assert_eq!(
            call_result(&output, true).structured_content,
            Some(json!({"n": 1}))
        );
        // A failure is never validated against the schema.
        let output = ToolOutput::error("boom").with_structured(json!({"n": 1}));
        let result = call_result(&output, true);
        assert_eq!(result.structured_content, None);
        assert_eq!(result.is_error, Some(true));
    }

    #[test]
    fn relayed_blocks_are_not_repeated_as_text() {
        let output = ToolOutput::text("a\nb")
            .with_block(ContentBlock::text("a"))
            .with_block(ContentBlock::text("b"));
        let result = call_result(&output, false);
        assert_eq!(result.content.len(), 2);

        // A summary of its own goes first, before the image.
        let output = ToolOutput::text("Read an image: 1x1 PNG")
            .with_block(ContentBlock::image("image/png", "iVBORw0KGgo="));
        let result = call_result(&output, false);
        assert_eq!(result.content.len(), 2);
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("Read an image: 1x1 PNG")
        );
        assert!(result.content[1].as_image().is_some());
    }

    #[test]
    fn failed_calls_are_results_the_model_reads() {
        let err = ToolError::rejected("not in this directory");
        let result = error_result(&err);
        assert_eq!(result.is_error, Some(true));
        let text = result.content[0].as_text().unwrap().text.clone();
        assert!(text.contains("not in this directory"), "{text}");
    }
}
