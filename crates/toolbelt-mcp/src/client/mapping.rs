//! Translating between MCP's types and Toolbelt's: tool results into [`ToolOutput`], tool
//! descriptions into [`Declaration`]s, annotations into [`ToolMeta`].

use rmcp::model::{
    CallToolResult, ContentBlock as McpBlock, ResourceContents, Tool as McpToolInfo,
    ToolAnnotations,
};
use serde_json::Value;
use toolbelt_core::{ContentBlock, Declaration, MAX_TOOL_NAME_LEN, Payload, ToolMeta, ToolOutput};

/// Maps a `tools/call` result.
///
/// - text, image, audio, resource links and embedded resources become [`ContentBlock`]s;
/// - the model's text is the text blocks joined by newlines, with a one-line summary for
///   each non-text block (so a model without multimodal input still learns something came);
/// - `structuredContent` becomes [`ToolOutput::structured`], and the model's text when no
///   content came;
/// - `isError: true` sets [`ToolOutput::is_error`]; `_meta` becomes [`ToolOutput::meta`].
pub fn map_call_result(result: CallToolResult) -> ToolOutput {
    // What a block carries besides its content is kept for a relay (`relay.rs`).
    let mut blocks = Vec::with_capacity(result.content.len());
    let mut extras = Vec::with_capacity(result.content.len());
    for block in result.content {
        let kept = super::relay::block_extras(&block);
        if let Some(block) = map_block(block) {
            blocks.push(block);
            extras.push(kept);
        }
    }
    let for_llm = if blocks.is_empty() {
        match &result.structured_content {
            Some(value) => Payload::Json(value.clone()),
            None => Payload::Text(String::new()),
        }
    } else {
        let parts: Vec<String> = blocks.iter().map(ContentBlock::summary).collect();
        Payload::Text(parts.join("\n"))
    };
    ToolOutput {
        for_llm,
        blocks,
        structured: result.structured_content.clone(),
        is_error: result.is_error.unwrap_or(false),
        meta: super::relay::mark_relayed(
            result.meta.map(|meta| meta.0),
            extras,
            result.structured_content.is_some(),
        ),
        ..ToolOutput::default()
    }
}

/// Reads a `tools/call` result that rmcp could not read as one, block by block.
///
/// A server newer than rmcp may send a content block of a type rmcp does not know (a `video`
/// block, say); rmcp then refuses the whole result, and every block the client does know
/// would be lost with it. Here each block is read on its own: the known ones pass, and an
/// unknown one is kept as a text block holding its raw JSON, so nothing the server sent is
/// dropped silently. `None` when the value is not a tool result even so.
pub(crate) fn lenient_call_result(value: Value) -> Option<CallToolResult> {
    let Value::Object(mut object) = value else {
        return None;
    };
    let content = match object.remove("content") {
        Some(Value::Array(blocks)) => blocks,
        Some(_) => return None,
        None => Vec::new(),
    };
    let mut result: CallToolResult = serde_json::from_value(Value::Object(object)).ok()?;
    result.content = content
        .into_iter()
        .map(|block| {
            serde_json::from_value::<McpBlock>(block.clone())
                .unwrap_or_else(|_| McpBlock::text(block.to_string()))
        })
        .collect();
    Some(result)
}

fn map_block(block: McpBlock) -> Option<ContentBlock> {
    Some(match block {
        McpBlock::Text(text) => ContentBlock::Text { text: text.text },
        McpBlock::Image(image) => ContentBlock::Image {
            mime_type: image.mime_type,
            data: image.data,
        },
        McpBlock::Audio(audio) => ContentBlock::Audio {
            mime_type: audio.mime_type,
            data: audio.data,
        },
        McpBlock::ResourceLink(link) => ContentBlock::ResourceLink {
            uri: link.uri,
            name: link.name,
            description: link.description,
            mime_type: link.mime_type,
        },
        McpBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => ContentBlock::Resource {
                uri,
                mime_type,
                text: Some(text),
                blob: None,
            },
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => ContentBlock::Resource {
                uri,
                mime_type,
                text: None,
                blob: Some(blob),
            },
            #[allow(unreachable_patterns)]
            other => ContentBlock::Text {
                text: serde_json::to_string(&other).unwrap_or_default(),
            },
        },
        // A content type newer than this mapping: keep what we can as text.
        #[allow(unreachable_patterns)]
        other => ContentBlock::Text {
            text: serde_json::to_string(&other).unwrap_or_default(),
        },
    })
}

/// Maps MCP annotations to behaviour hints, hint for hint.
///
/// A hint the server did not send stays `None` (MCP's defaults are for the reader to apply:
/// an absent `destructiveHint` or `openWorldHint` means "maybe"), so relaying the tool
/// through `toolbelt serve` lists exactly what the server declared. A tool declared
/// read-only is also declared concurrency-safe; other tools leave that undeclared.
pub fn map_annotations(annotations: Option<&ToolAnnotations>) -> ToolMeta {
    let Some(a) = annotations else {
        return ToolMeta::default();
    };
    ToolMeta {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
        idempotent: a.idempotent_hint,
        open_world: a.open_world_hint,
        concurrency_safe: (a.read_only_hint == Some(true)).then_some(true),
        max_result_size: None,
    }
}

/// Builds the declaration a model sees for an MCP tool, under `exposed_name`.
///
/// The description is the server's (empty when it sent none); the title is the tool's
/// `title`, or the one in its annotations; the tool's `_meta` is kept as
/// [`Declaration::client_meta`].
pub fn declaration(tool: &McpToolInfo, exposed_name: &str) -> Option<Declaration> {
    let description = tool.description.as_deref().unwrap_or_default().to_string();
    let title = tool
        .title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()));
    let mut decl = Declaration::new(exposed_name, description)
        .ok()?
        .with_title(title);
    decl.input_schema = (*tool.input_schema).clone();
    if !decl.input_schema.contains_key("type") {
        decl.input_schema
            .insert("type".into(), Value::String("object".into()));
    }
    decl.output_schema = tool.output_schema.as_deref().cloned();
    decl.meta = map_annotations(tool.annotations.as_ref());
    decl.client_meta = tool.meta.as_ref().map(|meta| meta.0.clone());
    Some(decl)
}

/// The name a tool is exposed under: `{prefix}_{name}` when a prefix is set, with characters
/// that tool names may not contain replaced by `_` and the result cut to 64 characters.
pub fn exposed_name(prefix: Option<&str>, name: &str) -> String {
    let full = match prefix {
        Some(prefix) => format!("{prefix}_{name}"),
        None => name.to_string(),
    };
    let mut cleaned: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    cleaned.truncate(MAX_TOOL_NAME_LEN);
    cleaned
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn structured_content_without_content_is_rendered_as_json_text() {
        let out = map_call_result(result(
            json!({"content": [], "structuredContent": {"t": 1}}),
        ));
        assert_eq!(out.llm_text(), r#"{"t":1}"#);
        assert_eq!(out.structured, Some(json!({"t": 1})));
        assert!(!out.is_error);
    }

    #[test]
    fn is_error_and_meta_are_kept() {
        let out = map_call_result(result(json!({
            "content": [{"type": "text", "text": "bad"}],
            "isError": true,
            "_meta": {"k": "v"}
        })));
        assert!(out.is_error);
        assert_eq!(out.llm_text(), "bad");
        assert_eq!(out.meta.unwrap()["k"], "v");
    }

    #[test]
    fn annotations_keep_absent_hints_absent() {
        assert_eq!(map_annotations(None), ToolMeta::default());
        let a: ToolAnnotations = serde_json::from_value(json!({"readOnlyHint": true})).unwrap();
        let meta = map_annotations(Some(&a));
        assert_eq!(meta.read_only, Some(true));
        assert_eq!((meta.destructive, meta.open_world), (None, None));
        assert_eq!(meta.concurrency_safe, Some(true));
        let a: ToolAnnotations =
            serde_json::from_value(json!({"idempotentHint": true, "openWorldHint": false}))
                .unwrap();
        let meta = map_annotations(Some(&a));
        assert_eq!(meta.idempotent, Some(true));
        assert_eq!(meta.open_world, Some(false));
        assert_eq!((meta.read_only, meta.destructive), (None, None));
    }

    #[test]
    fn an_unknown_block_is_kept_as_json_and_the_known_ones_pass() {
        let video = json!({"type": "video", "mimeType": "video/mp4", "data": "AAAA"});
        let raw = json!({"content": [{"type": "text", "text": "before"}, video.clone(),
            {"type": "text", "text": "after"}], "isError": false});
        let result = lenient_call_result(raw).expect("a tool result");
        let out = map_call_result(result);
        assert_eq!(out.blocks.len(), 3);
        assert_eq!(out.blocks[0], ContentBlock::text("before"));
        let ContentBlock::Text { text } = &out.blocks[1] else {
            panic!("kept as text: {:?}", out.blocks[1]);
        };
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), video);
        assert_eq!(out.blocks[2], ContentBlock::text("after"));
        assert!(lenient_call_result(json!({"content": "nope"})).is_none());
        assert!(lenient_call_result(json!([1])).is_none());
    }

    #[test]
    fn exposed_names_are_prefixed_and_cleaned() {
        assert_eq!(exposed_name(None, "get-sum"), "get-sum");
        assert_eq!(exposed_name(Some("fs"), "read file"), "fs_read_file");
        assert_eq!(exposed_name(None, &"x".repeat(80)).len(), MAX_TOOL_NAME_LEN);
    }
}
