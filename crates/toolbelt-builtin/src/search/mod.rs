//! The search half of the file tools: the [`SearchBackend`] trait, an in-process backend on
//! ripgrep's own libraries ([`LocalSearch`]), one that runs the `rg` and `fd` programs
//! ([`ExternalSearch`]), and the Glob and Grep tools.
//!
//! # Ordering and limits
//!
//! Grep output is ordered as `rg --sort path` orders it: by path, compared component by
//! component (so `a/b` comes before `a.txt`), then by line number. Glob results are ordered
//! byte-wise on the whole relative path (as `LC_ALL=C sort` does). Limits and offsets apply
//! after sorting, so a limit of N always selects the first N of the full sorted answer,
//! whatever the thread timing.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

pub mod external;
pub mod glob;
pub mod grep;
pub mod local;
pub mod rules;
pub(crate) mod walk;

pub use external::ExternalSearch;
pub use local::LocalSearch;

use toolbelt_core::{DynTool, ToolError};

use crate::BuiltinEnv;

/// The search tools: Glob and Grep.
pub fn tools(env: &BuiltinEnv) -> Result<Vec<DynTool>, ToolError> {
    Ok(vec![
        fingerprinted(env, glob::glob_tool(env)?),
        fingerprinted(env, grep::grep_tool(env)?),
    ])
}

/// `tool` (Glob or Grep) with its result-cache fingerprint: the base directory, the session,
/// the count of writes made through the tools and the searched path's own fingerprint (see
/// [`crate::fs::fingerprint`] for what this does not see).
fn fingerprinted(env: &BuiltinEnv, tool: DynTool) -> DynTool {
    let env = env.clone();
    let name = tool.name().to_string();
    crate::fs::fingerprint::Fingerprinted::wrap(tool, move |args| {
        let env = env.clone();
        let name = name.clone();
        async move {
            if !env.search.searches_local_files() {
                return None;
            }
            let writes = crate::fs::fingerprint::write_generation();
            let path = match args.get("path") {
                None | Some(serde_json::Value::Null) => None,
                Some(path) => Some(path.as_str()?),
            };
            let root = glob::resolve_dir(&env, path).ok()?;
            let root_print = env.files.fingerprint(&root).await?;
            Some(format!(
                "{name} base={} {} writes={writes} ignored={} limit={} root={root_print}",
                env.base_dir.display(),
                env.read_state.cache_scope(),
                env.glob_include_ignored,
                env.glob_limit,
            ))
        }
    })
}

/// What Grep prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrepOutputMode {
    /// The paths of matching files, one per line.
    #[default]
    FilesWithMatches,
    /// Matching lines as `path:line:text`, context lines as `path-line-text`.
    Content,
    /// `path:count` of matching lines per file.
    Count,
}

/// A content search, with paths already resolved and confined.
#[derive(Debug, Clone)]
pub struct GrepQuery {
    /// The regular expression (Rust regex syntax, as rg's).
    pub pattern: String,
    /// The absolute file or directory to search.
    pub root: PathBuf,
    /// Only files matching these globs (whitespace-separated, `!` to exclude).
    pub glob: Option<String>,
    /// Only files of this rg type (`rust`, `py`, `js`, ...).
    pub file_type: Option<String>,
    /// What to print.
    pub output_mode: GrepOutputMode,
    /// Context lines before each match (content mode).
    pub before_context: usize,
    /// Context lines after each match (content mode).
    pub after_context: usize,
    /// Whether content lines carry line numbers.
    pub line_numbers: bool,
    /// Case-insensitive matching.
    pub case_insensitive: bool,
    /// Patterns may span lines and `.` matches newlines.
    pub multiline: bool,
    /// At most this many results (lines in content mode, files otherwise); `None` = all.
    pub head_limit: Option<usize>,
    /// Results to skip before the first one returned.
    pub offset: usize,
    /// Also search files excluded by ignore files.
    pub include_ignored: bool,
    /// Paths no result may show, as gitignore patterns relative to the base directory (the
    /// Read deny rules of the permissions): they are skipped like ignored files, even when
    /// ignored files are included.
    pub hidden: Arc<[String]>,
}

/// The selected results of a content search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrepResults {
    /// The output lines selected by offset and limit, without line terminators.
    pub lines: Vec<String>,
    /// How many results (output lines) the full sorted answer has.
    pub total: usize,
    /// Symlinks the walk skipped because they point outside the base directory.
    pub skipped_outside: usize,
}

/// A file-name search, with paths already resolved and confined.
#[derive(Debug, Clone)]
pub struct GlobQuery {
    /// The glob, matched against paths relative to `root` (`**/*.rs`, `src/*.toml`).
    pub pattern: String,
    /// The absolute directory to search.
    pub root: PathBuf,
    /// At most this many paths; `None` = all.
    pub limit: Option<usize>,
    /// Also list files excluded by ignore files.
    pub include_ignored: bool,
    /// Paths no result may show, as gitignore patterns relative to the base directory (the
    /// Read deny rules of the permissions): they are skipped like ignored files, even when
    /// ignored files are included.
    pub hidden: Arc<[String]>,
}

/// The selected results of a file-name search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GlobResults {
    /// Matching files relative to the base directory, in byte-wise order, limited.
    pub paths: Vec<String>,
    /// How many files matched in all.
    pub total: usize,
    /// Symlinks the walk skipped because they point outside the base directory.
    pub skipped_outside: usize,
}

/// Why a search failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The pattern is not a valid regular expression.
    #[error("invalid regex: {0}")]
    InvalidRegex(String),
    /// A glob is not valid.
    #[error("invalid glob: {0}")]
    InvalidGlob(String),
    /// The file type is not known.
    #[error("unknown file type {0:?}; use a type rg knows, such as rust, py, js, ts, go, java")]
    UnknownType(String),
    /// The backend cannot run (a program is missing).
    #[error("search backend unavailable: {0}")]
    Unavailable(String),
    /// The path to search was refused or cannot be opened (outside the base directory,
    /// missing, not a directory).
    #[error("{0}")]
    Path(String),
    /// Anything else.
    #[error("search failed: {0}")]
    Failed(String),
}

/// The longest glob (Glob's pattern, Grep's `glob` argument) a search accepts: longer ones
/// get a short error before any glob compiler sees them.
pub const MAX_GLOB_LEN: usize = 4 * 1024;

/// The longest regular expression Grep accepts.
pub const MAX_REGEX_LEN: usize = 64 * 1024;

/// The most bytes a compiled regex may take (the regex crate's own size limit).
pub(crate) const REGEX_SIZE_LIMIT: usize = 16 * 1024 * 1024;

/// The longest compiler message passed on (a regex error quotes the pattern).
const MAX_ERROR_LEN: usize = 1024;

/// Refuses a glob longer than [`MAX_GLOB_LEN`].
pub(crate) fn check_glob_len(glob: &str) -> Result<(), SearchError> {
    if glob.len() > MAX_GLOB_LEN {
        return Err(SearchError::InvalidGlob(format!(
            "the glob is {} bytes long; at most {MAX_GLOB_LEN} are accepted",
            glob.len()
        )));
    }
    Ok(())
}

/// Refuses a regular expression longer than [`MAX_REGEX_LEN`].
pub(crate) fn check_regex_len(regex: &str) -> Result<(), SearchError> {
    if regex.len() > MAX_REGEX_LEN {
        return Err(SearchError::InvalidRegex(format!(
            "the pattern is {} bytes long; at most {MAX_REGEX_LEN} are accepted",
            regex.len()
        )));
    }
    Ok(())
}

/// A compiler's error message, cut to a readable length.
pub(crate) fn short_message(message: impl ToString) -> String {
    toolbelt_core::text::shorten(&message.to_string(), MAX_ERROR_LEN).into_owned()
}

/// The note a result carries when a walk skipped symlinks pointing outside the base.
pub(crate) fn skipped_note(skipped_outside: usize) -> Option<String> {
    match skipped_outside {
        0 => None,
        1 => Some("(skipped 1 symlink pointing outside the base directory)".to_string()),
        n => Some(format!(
            "(skipped {n} symlinks pointing outside the base directory)"
        )),
    }
}

/// Runs a blocking search on tokio's blocking pool, so a walk of a large tree never stalls
/// the async workers (both built-in backends block: one walks in-process, one waits for
/// `rg`/`fd`).
pub(crate) async fn run_blocking<T: Send + 'static>(
    search: impl FnOnce() -> Result<T, SearchError> + Send + 'static,
) -> Result<T, SearchError> {
    tokio::task::spawn_blocking(search)
        .await
        .map_err(|e| SearchError::Failed(format!("search did not complete: {e}")))?
}

/// Where Glob and Grep search: the local machine in-process by default, or `rg`/`fd`, or a
/// remote machine or sandbox behind another implementation.
///
/// Implementations must return results in the documented order with limits applied after
/// sorting, and show paths relative to the base directory they were built with.
#[async_trait]
pub trait SearchBackend: Send + Sync + fmt::Debug {
    /// Searches file contents.
    async fn grep(&self, query: GrepQuery) -> Result<GrepResults, SearchError>;
    /// Finds files by name.
    async fn glob(&self, query: GlobQuery) -> Result<GlobResults, SearchError>;

    /// Whether this backend searches the local directory the file tools' local backend
    /// sees, so that Grep and Glob results may be cached under the fingerprints described
    /// in the Read tool's docs. `false` (the default) keeps its results out of any cache.
    fn searches_local_files(&self) -> bool {
        false
    }
}

/// A shared, type-erased search backend.
pub type DynSearchBackend = Arc<dyn SearchBackend>;
