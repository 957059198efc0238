//! Project rules: `AGENTS.md` (and `CLAUDE.md`) from the project directory up to the
//! repository root, merged into the instructions.
//!
//! [`find_rules`] looks in the project directory and each folder above it, up to and
//! including the repository root (the nearest folder holding `.git`); outside a repository
//! it goes up to the folder below `$HOME` (never `$HOME` itself) or, outside `$HOME`, to `/`.
//! The rules are merged farthest first, so the nearest folder's rules come last and win where
//! they disagree; in one folder `AGENTS.md` comes before `CLAUDE.md` (a `CLAUDE.md` that is
//! the same file or has the same text is left out). Each is headed by its path.
//!
//! Caps ([`RulesConfig`]): 32 KiB per file and 64 KiB in all by default. A file longer than
//! its cap is cut at a character boundary and marked `[… truncated: N of M bytes shown]`; the
//! total is spent nearest first, so when it runs out the farthest files are cut or left out
//! (marked too). Files are read through the same confinement as the built-in Read, rooted
//! at the topmost folder searched: a rules file that is a symbolic link leading out of the
//! repository is not read (a warning says so). Outside a repository each file is confined
//! to its own folder, and a file owned by neither the project directory's owner nor root is
//! not read.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use toolbelt_agent::Extension;
use toolbelt_agent::extension::BoxError;
use toolbelt_builtin::fs::{FileOps, LocalFileOps};

/// The default cap per rules file, in bytes.
pub const DEFAULT_MAX_FILE_BYTES: usize = 32 * 1024;
/// The default cap on all rules together, in bytes.
pub const DEFAULT_MAX_TOTAL_BYTES: usize = 64 * 1024;
/// The largest rules file read (a larger one is skipped with a warning).
pub const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
/// The file names read in each folder, in order.
pub const RULE_FILE_NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// Caps on the rules read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RulesConfig {
    /// The most bytes of one file.
    pub max_file_bytes: usize,
    /// The most bytes of all files together.
    pub max_total_bytes: usize,
}

impl Default for RulesConfig {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
        }
    }
}

/// One rules file as merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFile {
    /// Its path.
    pub path: PathBuf,
    /// Its text, cut to the caps (the mark included).
    pub text: String,
    /// Whether it was cut or left out for the caps.
    pub truncated: bool,
}

/// The rules found, farthest first, and warnings about files not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// The files, farthest first (nearest last).
    pub files: Vec<RuleFile>,
    /// Files that could not be read, and why.
    pub warnings: Vec<String>,
}

impl Rules {
    /// The instruction fragment: each file under a heading naming its path; empty when none.
    pub fn instruction(&self) -> String {
        if self.files.is_empty() {
            return String::new();
        }
        let mut text = String::from(
            "# Project rules\n\nThe project's rules files, farthest folder first: where they \
             disagree, the later (nearer) one wins.",
        );
        for file in &self.files {
            text.push_str(&format!(
                "\n\n## {}\n\n{}",
                file.path.display(),
                file.text.trim_end()
            ));
        }
        text
    }
}

/// The folders searched for `dir`, farthest first.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .and_then(|h| std::fs::canonicalize(h).ok());
    let mut chain = Vec::new();
    for folder in dir.ancestors() {
        // Outside a repository, $HOME ends the walk (and is not read unless it is `dir`).
        if Some(folder) == home.as_deref() && folder != dir {
            break;
        }
        chain.push(folder.to_path_buf());
        if folder.join(".git").exists() {
            break;
        }
    }
    chain.reverse();
    chain
}

/// Finds and reads the rules for the project directory `dir` (see the [module docs](self)).
pub async fn find_rules(dir: &Path, config: RulesConfig) -> Rules {
    let mut rules = Rules::default();
    let dir = match std::fs::canonicalize(dir) {
        Ok(dir) => dir,
        Err(e) => {
            rules.warnings.push(format!("{}: {e}", dir.display()));
            return rules;
        }
    };
    let chain = folders(&dir);
    let Some(top) = chain.first() else {
        return rules;
    };
    let ops = match LocalFileOps::new(top) {
        Ok(ops) => ops,
        Err(e) => {
            rules.warnings.push(format!("{}: {e}", top.display()));
            return rules;
        }
    };
    // Inside a repository, files are confined to it; outside one the walk may reach `/`, so
    // each file is confined to its own folder instead.
    let in_repository = top.join(".git").exists();
    let owner = project_owner(&dir);
    // Read every file (bounded by the per-file cap), farthest first.
    let mut read: Vec<(PathBuf, String, usize)> = Vec::new();
    for folder in &chain {
        let folder_ops;
        let (ops, root) = if in_repository {
            (&ops, top.as_path())
        } else {
            match LocalFileOps::new(folder) {
                Ok(o) => {
                    folder_ops = o;
                    (&folder_ops, folder.as_path())
                }
                Err(e) => {
                    rules.warnings.push(format!("{}: {e}", folder.display()));
                    continue;
                }
            }
        };
        let mut seen_here: Vec<String> = Vec::new();
        for name in RULE_FILE_NAMES {
            let path = folder.join(name);
            if std::fs::symlink_metadata(&path).is_err() {
                continue;
            }
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let text = match read_capped(ops, &relative.to_string_lossy(), config, owner).await {
                Ok(text) => text,
                Err(e) => {
                    rules
                        .warnings
                        .push(format!("rules file {} not read: {e}", path.display()));
                    continue;
                }
            };
            if seen_here.contains(&text.0) {
                continue;
            }
            seen_here.push(text.0.clone());
            read.push((path, text.0, text.1));
        }
    }
    // Spend the total nearest first.
    let mut budget = config.max_total_bytes;
    let mut kept: Vec<RuleFile> = Vec::new();
    for (path, text, full_len) in read.into_iter().rev() {
        let file_cut = text.len() < full_len;
        let file = if text.len() <= budget {
            budget -= text.len();
            let text = if file_cut {
                mark(&text, full_len)
            } else {
                text
            };
            RuleFile {
                path,
                text,
                truncated: file_cut,
            }
        } else if budget > 0 {
            let cut = cut_at(&text, budget);
            budget = 0;
            RuleFile {
                path,
                text: mark(cut, full_len),
                truncated: true,
            }
        } else {
            RuleFile {
                text: format!(
                    "[… left out: the rules' total cap of {} bytes was reached]",
                    config.max_total_bytes
                ),
                path,
                truncated: true,
            }
        };
        kept.push(file);
    }
    kept.reverse();
    rules.files = kept;
    rules
}

/// The file's text cut to the per-file cap, and its full length. Files larger than
/// [`MAX_READ_BYTES`] are not read at all. The owner is checked on the handle the bytes were
/// read from: a check by path before the read could be raced by swapping the file for
/// another user's between the two (`renameat2(RENAME_EXCHANGE)` in a shared folder).
async fn read_capped(
    ops: &LocalFileOps,
    relative: &str,
    config: RulesConfig,
    owner: Option<u32>,
) -> Result<(String, usize), String> {
    let path = ops.resolve(relative).map_err(|e| e.to_string())?;
    let contents = ops
        .read(&path, Some(MAX_READ_BYTES))
        .await
        .map_err(|e| e.to_string())?;
    check_owner(contents.stat.owner, owner)?;
    let full_len = contents.bytes.len();
    let text = String::from_utf8_lossy(&contents.bytes);
    Ok((cut_at(&text, config.max_file_bytes).to_string(), full_len))
}

/// The owner of the project directory (`None` where ownership is not known).
fn project_owner(dir: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir).ok().map(|m| m.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// A rules file must belong to the project's owner or to root: in a folder others may write
/// (`/tmp` above a project outside a repository), another user could plant one (as Git
/// refuses a repository another user owns). `file_owner` comes from the open handle.
fn check_owner(file_owner: Option<u32>, owner: Option<u32>) -> Result<(), String> {
    let (Some(uid), Some(owner)) = (file_owner, owner) else {
        return Ok(());
    };
    if uid != owner && uid != 0 {
        return Err(format!(
            "it belongs to user {uid}, not to the project's owner ({owner}) or root"
        ));
    }
    Ok(())
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut_at(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn mark(text: &str, full_len: usize) -> String {
    format!(
        "{}\n[… truncated: {} of {full_len} bytes shown]",
        text.trim_end(),
        text.len()
    )
}

/// Project rules as an [`Extension`] named `project-rules`: read at init, one instruction
/// fragment (empty when there are none).
pub struct RulesExtension {
    dir: PathBuf,
    config: RulesConfig,
    rules: std::sync::OnceLock<Rules>,
}

impl RulesExtension {
    /// The rules of the project directory `dir`, with the default caps.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            config: RulesConfig::default(),
            rules: std::sync::OnceLock::new(),
        }
    }

    /// Other caps.
    pub fn with_config(mut self, config: RulesConfig) -> Self {
        self.config = config;
        self
    }

    /// What init read; `None` before init.
    pub fn rules(&self) -> Option<&Rules> {
        self.rules.get()
    }
}

#[async_trait]
impl Extension for RulesExtension {
    fn name(&self) -> &str {
        "project-rules"
    }

    async fn init(&self) -> Result<(), BoxError> {
        let rules = find_rules(&self.dir, self.config).await;
        for warning in &rules.warnings {
            tracing::warn!("{warning}");
        }
        self.rules
            .set(rules)
            .map_err(|_| "the project rules were initialised twice")?;
        Ok(())
    }

    fn instructions(&self) -> Vec<String> {
        self.rules
            .get()
            .map(Rules::instruction)
            .filter(|t| !t.is_empty())
            .into_iter()
            .collect()
    }
}
