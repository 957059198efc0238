//! # toolbelt-builtin: the tools a coding agent lives in
//!
//! A [`BuiltinToolSet`] (default name `builtin`) exposes Claude Code's file, shell and web
//! tools, with Claude Code's tool and parameter names so models trained on them use them well:
//!
//! | tool | does |
//! |---|---|
//! | `Read` | text with line numbers, images as image blocks, notebooks as cells |
//! | `Glob` | files by glob pattern, byte-wise sorted, limited |
//! | `Grep` | regex search with ripgrep's libraries, sorted by path and line, paged |
//! | `Write` | creates or replaces a file atomically (not in read-only mode) |
//! | `Edit` | exact string replacement with a unified diff (not in read-only mode) |
//! | `NotebookEdit` | replaces, inserts or deletes notebook cells (not in read-only mode) |
//! | `apply_patch` | Codex's patch format: adds, deletes, updates and moves files in one checked patch ([`fs::patch`]; not in read-only mode) |
//! | `Bash` | runs a command with a timeout, killing every process it started ([`shell`]; in read-only mode only inside the read-only sandbox) |
//! | `TaskOutput` | reads new output and the status of a background `Bash` task (offered with `Bash`) |
//! | `TaskStop` | kills every process of a background task (offered with `Bash`) |
//! | `exec_command` | starts a command on a terminal of its own (a REPL, a prompt) and returns its output so far and a session id (offered with `Bash`, same sandbox and limits) |
//! | `write_stdin` | types into a terminal session and returns what followed; `close` ends it (offered with `Bash`) |
//! | `execute_code` | runs a Python, JavaScript or bash program as `Bash` runs a command, returning files it wrote ([`code`]; offered with `Bash`, not in read-only mode) |
//! | `TodoWrite` | the session's task list in Claude Code's shape, shown to the user as a checklist ([`plan`]) |
//! | `WebFetch` | GETs a URL as Markdown or text, under a domain policy and an SSRF guard ([`web`]) |
//! | `WebSearch` | web search through a provider (DuckDuckGo's results page, SearXNG, yours) |
//! | `duckduckgo_search` | DuckDuckGo's instant answer plus up to 5 results |
//!
//! The web tools need the `web` feature (on by default) and can be turned off with
//! `WebOptions::disabled()`.
//!
//! Every path is confined to the base directory, checked again at use time
//! ([`confine`] documents the guarantee and its limits). Files are reached through the
//! [`fs::FileOps`] trait and searches through [`search::SearchBackend`], so the same tools can
//! work on a remote machine or in a sandbox; local implementations are the default, and
//! [`search::ExternalSearch`] runs `rg`/`fd` instead of the in-process search.
//!
//! Write, Edit, NotebookEdit and apply_patch change an existing file only after it was fully Read through
//! the same tool set, and refuse when it changed on disk since ([`fs::ReadState`]).
//!
//! ## Example
//!
//! ```
//! use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
//! use toolbelt_core::{Tool, ToolContext};
//!
//! # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n")?;
//!
//! let set = BuiltinToolSet::new(BuiltinOptions::new(dir.path()))?;
//! let tool = |name: &str| set.tool_list().iter().find(|t| t.name() == name).unwrap().clone();
//!
//! let read = tool("Read").call(ToolContext::new(), r#"{"file_path": "notes.txt"}"#).await?;
//! assert_eq!(read.llm_text(), "     1\talpha\n     2\tbeta\n");
//!
//! let edit = tool("Edit")
//!     .call(
//!         ToolContext::new(),
//!         r#"{"file_path": "notes.txt", "old_string": "beta", "new_string": "gamma"}"#,
//!     )
//!     .await?;
//! assert!(!edit.is_error);
//! assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt"))?, "alpha\ngamma\n");
//!
//! let outside = tool("Read").call(ToolContext::new(), r#"{"file_path": "../x"}"#).await?;
//! assert!(outside.is_error);
//! assert!(outside.llm_text().contains("path is outside the base directory"));
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
#![warn(missing_docs)]

pub mod code;
pub mod confine;
pub mod fs;
pub mod permission;
pub mod plan;
pub mod search;
pub mod shell;
mod toolset;
#[cfg(feature = "web")]
pub mod web;
mod which;
mod workspace;

pub use toolset::{
    BuiltinEnv, BuiltinOptions, BuiltinToolSet, DEFAULT_MAX_FILE_SIZE, DEFAULT_NAME, FileOptions,
    SearchOptions,
};
pub use workspace::Workspace;
