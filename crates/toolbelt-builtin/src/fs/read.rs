//! The Read tool: text with line numbers, images as image blocks, notebooks as cells.

use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbelt_core::{ContentBlock, DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::fingerprint::Fingerprinted;
use super::text::{self, decode};
use crate::BuiltinEnv;

/// Lines returned when no `limit` is given.
pub const DEFAULT_LINE_LIMIT: usize = 2000;

/// Characters kept of a longer line.
pub const MAX_LINE_CHARS: usize = 2000;

const DESCRIPTION: &str = "Reads a file from the local filesystem. The file_path may be \
absolute or relative to the working directory, and must stay inside it. By default it reads \
up to 2000 lines from the start; pass offset (1-based line number) and limit for long files. \
Lines longer than 2000 characters are cut. Output is cat -n style: line number, tab, line. \
Images (png, jpg, gif, webp) are returned as images; Jupyter notebooks (.ipynb) as their cells \
with outputs summarised; PDFs as the text of each page (pass pages, e.g. \"1-5\", for a long \
one). Other binary files are refused. Write and Edit require the whole file to \
have been read first.";

/// Arguments of Read.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The path of the file to read (absolute, or relative to the working directory).
    pub file_path: String,
    /// The 1-based line number to start reading from. Only needed for files too long to read
    /// at once.
    #[serde(default)]
    pub offset: Option<usize>,
    /// The number of lines to read (default 2000). Only needed for files too long to read at
    /// once.
    #[serde(default)]
    pub limit: Option<usize>,
    /// For a PDF: the page or pages to read, e.g. "3" or "1-5" (default: from the first,
    /// up to 100 pages).
    #[serde(default)]
    pub pages: Option<String>,
}

/// The Read tool over `env`'s file backend.
pub fn read_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let scope = env.clone();
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "Read",
        DESCRIPTION,
        move |ctx: ToolContext, args: ReadArgs| {
            let env = env.for_call(&ctx);
            async move { Ok::<_, ToolError>(read(&env, args).await) }
        },
    )?
    .map_declaration(|d| {
        d.read_only()
            .idempotent()
            .closed_world()
            .concurrency_safe(true)
    });
    Ok(Fingerprinted::wrap(
        std::sync::Arc::new(tool),
        move |args| {
            let env = scope.clone();
            async move { fingerprint(&env, &args).await }
        },
    ))
}

/// Read's result-cache fingerprint: the file's ([`FileOps::fingerprint`]), the base
/// directory, the size limit and the read session (a hit skips recording the read, so a hit
/// may only come from this session's own earlier Read); see [`super::fingerprint`].
async fn fingerprint(env: &BuiltinEnv, args: &serde_json::Value) -> Option<String> {
    if env.read_state.is_shared() {
        // Reads recorded per call's session in a shared store: a hit would record nothing.
        return None;
    }
    let path = env.files.resolve(args.get("file_path")?.as_str()?).ok()?;
    let file = env.files.fingerprint(&path).await?;
    Some(format!(
        "base={} max={} {} {file}",
        env.base_dir.display(),
        env.max_file_size,
        env.read_state.cache_scope()
    ))
}

/// Runs Read; failures are result-level errors the model can act on.
pub async fn read(env: &BuiltinEnv, args: ReadArgs) -> ToolOutput {
    let ops = &env.files;
    let path = match ops.resolve(&args.file_path) {
        Ok(path) => path,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let shown = ops.display_path(&path);
    let contents = match ops.read(&path, Some(env.max_file_size)).await {
        Ok(contents) => contents,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    if let Some(mime) = image_mime(&contents.bytes) {
        let data = base64::engine::general_purpose::STANDARD.encode(&contents.bytes);
        let summary = format!("Image {shown} ({mime}, {} bytes)", contents.bytes.len());
        return ToolOutput::text(summary)
            .with_block(ContentBlock::image(mime, data))
            .with_structured(json!({
                "file_path": shown,
                "type": "image",
                "mime_type": mime,
                "bytes": contents.bytes.len(),
            }));
    }
    if super::pdf::is_pdf(&contents.bytes) {
        return read_pdf(contents.bytes, &shown, args.pages.as_deref()).await;
    }
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
    {
        return match super::notebook::render(&contents.bytes) {
            Ok(rendered) => {
                if let Err(e) = env
                    .record_read(&path, &contents.stat, &contents.bytes)
                    .await
                {
                    return ToolOutput::error(format!("{shown}: {e}"));
                }
                ToolOutput::text(rendered.text).with_structured(json!({
                    "file_path": shown,
                    "type": "notebook",
                    "cells": rendered.cells,
                }))
            }
            Err(e) => ToolOutput::error(format!("{shown}: {e}")),
        };
    }
    let decoded = match decode(&contents.bytes) {
        Ok(decoded) => decoded,
        Err(e) => {
            return ToolOutput::error(format!(
                "cannot read {shown}: {e}; Read shows text files, images and notebooks"
            ));
        }
    };
    let all_lines: Vec<&str> = text::lines(&decoded.text).collect();
    let total = all_lines.len();
    let start = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LINE_LIMIT);
    if total == 0 {
        if let Err(e) = env
            .record_read(&path, &contents.stat, &contents.bytes)
            .await
        {
            return ToolOutput::error(format!("{shown}: {e}"));
        }
        return ToolOutput::text(format!("{shown} exists but is empty.")).with_structured(json!({
            "file_path": shown, "type": "text", "start_line": 1, "lines_returned": 0, "total_lines": 0,
        }));
    }
    if start > total {
        return ToolOutput::error(format!(
            "offset {start} is past the end of {shown}, which has {total} lines"
        ));
    }
    let selected = &all_lines[start - 1..(start - 1).saturating_add(limit).min(total)];
    let mut out = String::new();
    for (i, line) in selected.iter().enumerate() {
        out.push_str(&format!("{:>6}\t", start + i));
        push_cut(&mut out, line);
        out.push('\n');
    }
    let end = start + selected.len() - 1;
    let more = end < total;
    if more {
        out.push_str(&format!(
            "\n[showing lines {start}-{end} of {total}; pass offset {} to read more]\n",
            end + 1
        ));
    }
    if start == 1
        && !more
        && let Err(e) = env
            .record_read(&path, &contents.stat, &contents.bytes)
            .await
    {
        return ToolOutput::error(format!("{shown}: {e}"));
    }
    ToolOutput::text(out)
        .with_user_text(format!(
            "Read {} line{} of {shown}",
            selected.len(),
            if selected.len() == 1 { "" } else { "s" }
        ))
        .with_structured(json!({
            "file_path": shown,
            "type": "text",
            "start_line": start,
            "lines_returned": selected.len(),
            "total_lines": total,
            "truncated": more,
        }))
}

/// A PDF's text by page ([`super::pdf`]); not recorded as read (the file tools do not
/// write PDFs).
async fn read_pdf(bytes: Vec<u8>, shown: &str, pages: Option<&str>) -> ToolOutput {
    let range = match pages.map(super::pdf::parse_pages).transpose() {
        Ok(range) => range,
        Err(e) => return ToolOutput::error(e),
    };
    match super::pdf::extract(bytes, range).await {
        Ok(text) => {
            let returned: Vec<u32> = text.pages.iter().map(|(n, _)| *n).collect();
            ToolOutput::text(super::pdf::render(&text, shown))
                .with_user_text(format!(
                    "Read {} page{} of {shown}",
                    returned.len(),
                    if returned.len() == 1 { "" } else { "s" }
                ))
                .with_structured(json!({
                    "file_path": shown,
                    "type": "pdf",
                    "pages": returned,
                    "total_pages": text.page_count,
                    "truncated": text.truncated,
                }))
        }
        Err(e) => ToolOutput::error(format!("cannot read {shown}: {e}")),
    }
}

/// Appends `line`, cut at [`MAX_LINE_CHARS`] characters with a marker.
fn push_cut(out: &mut String, line: &str) {
    out.push_str(&toolbelt_core::text::cut_noted(line, MAX_LINE_CHARS).0);
}

/// The image MIME type, from the file's magic bytes (not its name, so a text file named
/// `.png` is still read as text), for the formats a model can look at.
pub(crate) fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}
