//! The Glob tool: files by name pattern, sorted, limited.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::GlobQuery;
use crate::BuiltinEnv;

/// Paths returned when the tool set sets no other limit.
pub const DEFAULT_GLOB_LIMIT: usize = 100;

const DESCRIPTION: &str = "Fast file pattern matching. Supports glob patterns like \"**/*.js\" \
or \"src/**/*.ts\" (`*` stays within one directory, `**` crosses directories, `{a,b}` \
alternatives). Returns matching file paths relative to the working directory, sorted \
byte-wise, at most 100 (then it says the list was truncated). Files ignored by .gitignore and \
version-control folders are skipped; hidden files are included. Use it to find files by name; \
use Grep to search contents.";

/// Arguments of Glob.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// The glob pattern to match files against, relative to `path` (for example
    /// `**/*.rs`).
    pub pattern: String,
    /// The directory to search in (default: the working directory). Omit it rather than
    /// passing "undefined" or "null".
    #[serde(default)]
    pub path: Option<String>,
}

/// The Glob tool over `env`'s search backend.
pub fn glob_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "Glob",
        DESCRIPTION,
        move |_ctx: ToolContext, args: GlobArgs| {
            let env = env.clone();
            async move { Ok::<_, ToolError>(glob(&env, args).await) }
        },
    )?
    .map_declaration(|d| {
        d.read_only()
            .idempotent()
            .closed_world()
            .concurrency_safe(true)
    });
    Ok(Arc::new(tool))
}

/// Runs Glob; failures are result-level errors.
pub async fn glob(env: &BuiltinEnv, args: GlobArgs) -> ToolOutput {
    let root = match resolve_dir(env, args.path.as_deref()) {
        Ok(root) => root,
        Err(message) => return ToolOutput::error(message),
    };
    let limit = env.glob_limit;
    let query = GlobQuery {
        pattern: args.pattern,
        root,
        limit: Some(limit),
        include_ignored: env.glob_include_ignored,
        hidden: env.hidden.clone(),
    };
    let results = match env.search.glob(query).await {
        Ok(results) => results,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let truncated = results.total > results.paths.len();
    let mut text = if results.paths.is_empty() {
        "No files found".to_string()
    } else {
        results.paths.join("\n")
    };
    if truncated {
        text.push_str(&format!(
            "\n(Results are truncated: showing the first {} of {} files. Use a more specific \
             path or pattern.)",
            results.paths.len(),
            results.total
        ));
    }
    if let Some(note) = super::skipped_note(results.skipped_outside) {
        text.push('\n');
        text.push_str(&note);
    }
    ToolOutput::text(text).with_structured(json!({
        "filenames": results.paths,
        "num_files": results.total,
        "truncated": truncated,
        "skipped_outside": results.skipped_outside,
    }))
}

/// Resolves an optional directory argument (default: the base directory).
pub(crate) fn resolve_dir(
    env: &BuiltinEnv,
    path: Option<&str>,
) -> Result<std::path::PathBuf, String> {
    match path
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "undefined" && *p != "null")
    {
        None => Ok(env.base_dir.clone()),
        Some(path) => env.files.resolve(path).map_err(|e| e.to_string()),
    }
}
