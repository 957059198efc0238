//! Toolbelt's types into MCP's: declarations into tool listings, outputs and errors into
//! `tools/call` results.

use std::sync::Arc;

use rmcp::model::Resource as McpResource;
use rmcp::model::{
    CallToolResult, ContentBlock as McpContent, ResourceContents, Tool as McpTool, ToolAnnotations,
};
use toolbelt_core::{ContentBlock, Declaration, ToolError, ToolOutput};

/// An MCP tool listing entry for a declaration: name, description, schemas and annotations
/// from the behaviour hints.
pub fn mcp_tool(declaration: &Declaration) -> McpTool {
    let meta = &declaration.meta;
    let annotations = ToolAnnotations::from_raw(
        None,
        Some(meta.read_only),
        // MCP's default for destructiveHint is true; say what the tool declared.
        Some(meta.destructive && !meta.read_only),
        Some(meta.idempotent),
        Some(meta.open_world),
    );
    let mut tool = McpTool::new(
        declaration.name.to_string(),
        declaration.description.clone(),
        Arc::new(declaration.input_schema.clone()),
    )
    .with_annotations(annotations);
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
/// The model's text comes first (unless it is empty and blocks carry the result), then the
/// blocks. `structuredContent` is set when the tool declared an output schema and produced
/// structured data. A result-level failure keeps `isError: true`.
pub fn call_result(output: &ToolOutput) -> CallToolResult {
    let text = output.llm_text();
    let mut content = Vec::with_capacity(1 + output.blocks.len());
    if !text.is_empty() || output.blocks.is_empty() {
        content.push(McpContent::text(text));
    }
    content.extend(output.blocks.iter().map(mcp_content));
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured.clone();
    result.meta = output.meta.clone().map(rmcp::model::MetaObject::from);
    result
}

/// The `tools/call` result for a failed call: `isError: true` with the short, actionable text
/// a model reads (validation errors, rejections, timeouts, interruptions, the tool's errors).
pub fn error_result(error: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![McpContent::text(error.for_model())])
}
