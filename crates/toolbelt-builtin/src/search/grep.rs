//! The Grep tool: regex search over file contents, sorted by path then line, limited.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::glob::resolve_dir;
use super::{GrepOutputMode, GrepQuery};
use crate::BuiltinEnv;

/// Results returned when `head_limit` is not given.
pub const DEFAULT_HEAD_LIMIT: usize = 250;

const DESCRIPTION: &str = "A powerful search tool built on ripgrep. Supports full regex syntax \
(\"log.*Error\", \"function\\\\s+\\\\w+\"); literal braces need escaping (\"interface\\\\{\\\\}\"). \
Filter files with glob (\"*.js\", \"**/*.tsx\") or type (\"js\", \"py\", \"rust\"). output_mode: \
\"files_with_matches\" (default) lists paths, \"content\" shows matching lines as path:line:text \
(context lines as path-line-text), \"count\" shows path:count. Results are sorted by path then \
line; head_limit (default 250, 0 for all) and offset page through them. Hidden files are \
searched; .gitignored paths and version-control folders are skipped. Use multiline for \
patterns that span lines.";

/// What Grep prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines (with -A/-B/-C context and -n line numbers).
    Content,
    /// Paths of files that match (the default).
    FilesWithMatches,
    /// Match counts per file.
    Count,
}

/// Arguments of Grep.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// The regular expression to search for in file contents (Rust regex syntax, as rg).
    pub pattern: String,
    /// The file or directory to search (default: the working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob (for example "*.js" or "*.{ts,tsx}"); several
    /// globs may be separated by spaces, and a leading ! excludes.
    #[serde(default)]
    pub glob: Option<String>,
    /// Only search files of this type, as rg --type (for example js, py, rust, go, java).
    #[serde(default, rename = "type")]
    pub file_type: Option<String>,
    /// "content" shows matching lines, "files_with_matches" (default) shows file paths,
    /// "count" shows match counts per file.
    #[serde(default)]
    pub output_mode: Option<OutputMode>,
    /// Lines to show after each match (content mode only).
    #[serde(default, rename = "-A")]
    pub after: Option<usize>,
    /// Lines to show before each match (content mode only).
    #[serde(default, rename = "-B")]
    pub before: Option<usize>,
    /// Lines to show before and after each match (content mode only).
    #[serde(default, rename = "-C")]
    pub context_short: Option<usize>,
    /// Lines to show before and after each match (content mode only); same as -C.
    #[serde(default)]
    pub context: Option<usize>,
    /// Show line numbers (content mode only; default true).
    #[serde(default, rename = "-n")]
    pub line_numbers: Option<bool>,
    /// Case-insensitive search.
    #[serde(default, rename = "-i")]
    pub case_insensitive: Option<bool>,
    /// Show at most this many results (lines in content mode, files otherwise) after
    /// sorting; default 250, 0 for no limit.
    #[serde(default)]
    pub head_limit: Option<usize>,
    /// Skip this many results before applying head_limit (for paging; default 0).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Let patterns span lines, with `.` matching newlines (default false).
    #[serde(default)]
    pub multiline: Option<bool>,
}

/// The Grep tool over `env`'s search backend.
pub fn grep_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "Grep",
        DESCRIPTION,
        move |_ctx: ToolContext, args: GrepArgs| {
            let env = env.clone();
            async move { Ok::<_, ToolError>(grep(&env, args).await) }
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

/// Builds the backend query for `args`, resolving and confining the path.
pub fn query_for(env: &BuiltinEnv, args: &GrepArgs) -> Result<GrepQuery, String> {
    let root = resolve_dir(env, args.path.as_deref())?;
    let both = args.context_short.or(args.context).unwrap_or(0);
    let output_mode = match args.output_mode.unwrap_or(OutputMode::FilesWithMatches) {
        OutputMode::Content => GrepOutputMode::Content,
        OutputMode::FilesWithMatches => GrepOutputMode::FilesWithMatches,
        OutputMode::Count => GrepOutputMode::Count,
    };
    let head_limit = match args.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT) {
        0 => None,
        n => Some(n),
    };
    Ok(GrepQuery {
        pattern: args.pattern.clone(),
        root,
        glob: args.glob.clone().filter(|g| !g.trim().is_empty()),
        file_type: args.file_type.clone().filter(|t| !t.trim().is_empty()),
        output_mode,
        before_context: args.before.unwrap_or(both),
        after_context: args.after.unwrap_or(both),
        line_numbers: args.line_numbers.unwrap_or(true),
        case_insensitive: args.case_insensitive.unwrap_or(false),
        multiline: args.multiline.unwrap_or(false),
        head_limit,
        offset: args.offset.unwrap_or(0),
        include_ignored: false,
        hidden: env.hidden.clone(),
    })
}

/// Runs Grep; failures (an invalid regex, a path outside the base) are result-level errors.
pub async fn grep(env: &BuiltinEnv, args: GrepArgs) -> ToolOutput {
    let query = match query_for(env, &args) {
        Ok(query) => query,
        Err(message) => return ToolOutput::error(message),
    };
    let mode = query.output_mode;
    let offset = query.offset;
    let results = match env.search.grep(query).await {
        Ok(results) => results,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let shown = results.lines.len();
    let left_out = results.total.saturating_sub(shown);
    let mut text = if results.lines.is_empty() {
        match mode {
            GrepOutputMode::FilesWithMatches => "No files found".to_string(),
            _ => "No matches found".to_string(),
        }
    } else {
        results.lines.join("\n")
    };
    if left_out > 0 {
        text.push_str(&format!(
            "\n[{shown} of {} results shown (offset {offset}); {left_out} left out. Pass \
             offset {} to see the next ones, or narrow the search.]",
            results.total,
            offset + shown
        ));
    }
    if let Some(note) = super::skipped_note(results.skipped_outside) {
        text.push('\n');
        text.push_str(&note);
    }
    let mode_name = match mode {
        GrepOutputMode::Content => "content",
        GrepOutputMode::FilesWithMatches => "files_with_matches",
        GrepOutputMode::Count => "count",
    };
    ToolOutput::text(text).with_structured(json!({
        "mode": mode_name,
        "num_results": results.total,
        "shown": shown,
        "offset": offset,
        "left_out": left_out,
        "skipped_outside": results.skipped_outside,
    }))
}
