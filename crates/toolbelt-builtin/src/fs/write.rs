//! The Write tool: creates a file or replaces it whole, atomically.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::diff;
use super::read_state::read_modify_write;
use super::text::{self, Encoding};
use crate::BuiltinEnv;

const DESCRIPTION: &str = "Writes a file to the local filesystem, replacing it if it exists. \
An existing file must have been read in full with the Read tool first, and must not have \
changed since; otherwise the write is refused. Parent directories are created. The write is \
atomic: the file holds either its old or its new content, never a mix. Prefer Edit for \
changing part of an existing file.";

/// Arguments of Write.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// The path of the file to write (absolute, or relative to the working directory).
    pub file_path: String,
    /// The content to write to the file.
    pub content: String,
}

/// The Write tool over `env`'s file backend.
pub fn write_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "Write",
        DESCRIPTION,
        move |ctx: ToolContext, args: WriteArgs| {
            let env = env.for_call(&ctx);
            async move { Ok::<_, ToolError>(write(&env, args).await) }
        },
    )?
    .map_declaration(|d| d.destructive().closed_world().concurrency_safe(false));
    Ok(Arc::new(tool))
}

/// Runs Write; failures are result-level errors.
pub async fn write(env: &BuiltinEnv, args: WriteArgs) -> ToolOutput {
    match try_write(env, args).await {
        Ok(out) => out,
        Err(message) => ToolOutput::error(message),
    }
}

async fn try_write(env: &BuiltinEnv, args: WriteArgs) -> Result<ToolOutput, String> {
    let ops = &env.files;
    let path = ops.resolve(&args.file_path).map_err(|e| e.to_string())?;
    let shown = ops.display_path(&path);
    let content = args.content;
    // The change runs under the file's lock; it hands back what the report needs.
    let (old_text, written, content) =
        read_modify_write(env, path, shown.clone(), move |current| {
            let (old_text, encoding) = match current {
                Some(current) => match text::decode(&current.bytes) {
                    Ok(decoded) => (Some(decoded.text), decoded.encoding),
                    // Replacing a binary file: nothing to diff against, write UTF-8.
                    Err(_) => (Some(String::new()), Encoding::Utf8 { bom: false }),
                },
                None => (None, Encoding::Utf8 { bom: false }),
            };
            let bytes = text::encode(&content, encoding);
            let written = bytes.len();
            Ok((bytes, (old_text, written, content)))
        })
        .await?;
    let created = old_text.is_none();
    let diff = diff::unified(&shown, old_text.as_deref().unwrap_or(""), &content);
    let message = if created {
        format!("File created successfully at: {shown}")
    } else {
        format!("The file {shown} has been updated.")
    };
    let user = if diff.is_empty() {
        message.clone()
    } else {
        format!("{message}\n{diff}")
    };
    Ok(ToolOutput::text(message)
        .with_user_text(user)
        .with_structured(json!({
            "type": if created { "create" } else { "update" },
            "file_path": shown,
            "bytes": written,
        })))
}
