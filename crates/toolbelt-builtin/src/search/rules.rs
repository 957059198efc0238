//! The walk rules both search backends share, so that they visit exactly the same files:
//! hidden files are searched, `.gitignore` (even outside a git repository), `.ignore`,
//! `.rgignore` and `.git/info/exclude` of the searched directories and of their parents, and
//! the global git excludes file, are honoured unless ignored files are included, and
//! version-control folders are always skipped. Symlinks follow the confinement rule
//! ([`crate::confine`]): followed when their target is inside the base, skipped otherwise.
//!
//! The precedence is ripgrep's (`ignore` crate): overrides (the user's globs and the VCS
//! exclusions) decide first; then `.rgignore`, `.ignore`, `.gitignore`, `.git/info/exclude`
//! and the global excludes, each taken from the deepest directory that has a matching rule;
//! then the file type. Ignore files are parsed with `ignore::gitignore`; the walk reads them
//! through confined directory handles (`search::walk`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::Types;

/// Version-control folders that are never searched, expressed as glob overrides exactly as
/// the external backend passes them to `rg -g`/`fd -E`.
pub const VCS_FOLDERS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", ".sl", "_darcs"];

/// Custom ignore file names, read in every directory (as `rg` reads `.rgignore`).
pub(crate) const CUSTOM_IGNORE: &str = ".rgignore";

/// What one search filters by: ignore files (unless included), overrides and a file type.
#[derive(Debug, Clone)]
pub(crate) struct Filters {
    /// Whether ignore files and the global excludes are honoured.
    pub respect_ignore: bool,
    /// The user's globs and the VCS exclusions.
    pub overrides: Override,
    /// The file type, when one was asked for.
    pub types: Option<Types>,
    /// The global git excludes file.
    pub global: Arc<Gitignore>,
}

/// The ignore rules of one directory, linked to its parent's.
#[derive(Debug, Default)]
pub(crate) struct DirRules {
    parent: Option<Arc<DirRules>>,
    custom: Option<Gitignore>,
    ignore: Option<Gitignore>,
    git: Option<Gitignore>,
    exclude: Option<Gitignore>,
}

/// The contents of a directory's ignore files, as the walk found them.
#[derive(Debug, Default)]
pub(crate) struct IgnoreFiles {
    pub custom: Option<Vec<u8>>,
    pub ignore: Option<Vec<u8>>,
    pub git: Option<Vec<u8>>,
    pub exclude: Option<Vec<u8>>,
}

impl IgnoreFiles {
    /// Whether the directory has any.
    pub fn is_empty(&self) -> bool {
        self.custom.is_none()
            && self.ignore.is_none()
            && self.git.is_none()
            && self.exclude.is_none()
    }
}

impl DirRules {
    /// The rules of `dir` (from the ignore files found in it) below `parent`'s. A directory
    /// without ignore files shares its parent's rules.
    pub fn child(parent: &Arc<DirRules>, dir: &Path, files: IgnoreFiles) -> Arc<DirRules> {
        if files.is_empty() {
            return parent.clone();
        }
        Arc::new(Self::new(Some(parent.clone()), dir, files))
    }

    /// The rules of `dir` at the top of a chain (or below `parent`).
    pub fn new(parent: Option<Arc<DirRules>>, dir: &Path, files: IgnoreFiles) -> DirRules {
        let exclude_source = dir.join(".git/info/exclude");
        DirRules {
            parent,
            custom: files
                .custom
                .map(|b| parse(dir, &dir.join(CUSTOM_IGNORE), &b)),
            ignore: files.ignore.map(|b| parse(dir, &dir.join(".ignore"), &b)),
            git: files.git.map(|b| parse(dir, &dir.join(".gitignore"), &b)),
            exclude: files.exclude.map(|b| parse(dir, &exclude_source, &b)),
        }
    }

    /// Whether `path` (absolute) is ignored by these rules and their parents', in ripgrep's
    /// precedence.
    fn matched(&self, path: &Path, is_dir: bool, global: &Gitignore) -> Match<()> {
        let mut found = [Match::None, Match::None, Match::None, Match::None];
        let mut rules = Some(self);
        while let Some(r) = rules {
            for (slot, matcher) in found
                .iter_mut()
                .zip([&r.custom, &r.ignore, &r.git, &r.exclude])
            {
                if slot.is_none()
                    && let Some(m) = matcher
                {
                    *slot = m.matched(path, is_dir).map(|_| ());
                }
            }
            rules = r.parent.as_deref();
        }
        let [custom, ignore, git, exclude] = found;
        custom
            .or(ignore)
            .or(git)
            .or(exclude)
            .or(global.matched(path, is_dir).map(|_| ()))
    }
}

impl Filters {
    /// The filters of a search rooted in the base `base`.
    pub fn new(
        base: &Path,
        include_ignored: bool,
        user_glob: Option<&str>,
        hidden: &[String],
        types: Option<Types>,
        global: Arc<Gitignore>,
    ) -> Result<Self, ignore::Error> {
        Ok(Self {
            respect_ignore: !include_ignored,
            overrides: overrides(base, user_glob, hidden)?,
            types,
            global,
        })
    }

    /// Whether the walk skips `path` (absolute; `is_dir` after following a symlink), below a
    /// directory whose rules are `rules`.
    pub fn skips(&self, rules: &DirRules, path: &Path, is_dir: bool) -> bool {
        if let Some(name) = path.file_name()
            && VCS_FOLDERS.iter().any(|vcs| name == *vcs)
        {
            return true;
        }
        let over = self.overrides.matched(path, is_dir);
        if !over.is_none() {
            return over.is_ignore();
        }
        // A whitelist match only matters for hidden files, which are searched anyway.
        if self.respect_ignore && rules.matched(path, is_dir, &self.global).is_ignore() {
            return true;
        }
        self.types
            .as_ref()
            .is_some_and(|types| types.matched(path, is_dir).is_ignore())
    }
}

/// Parses an ignore file's bytes as `ignore::gitignore` would read the file: line by line,
/// a leading BOM dropped, stopping at the first line that is not UTF-8.
fn parse(dir: &Path, source: &Path, bytes: &[u8]) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(mut line) = std::str::from_utf8(line) else {
            break;
        };
        if index == 0 {
            line = line.trim_start_matches('\u{feff}');
        }
        // A bad line is skipped, as ripgrep skips it (with a warning).
        let _ = builder.add_line(Some(source.to_path_buf()), line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// The global git excludes file (`core.excludesFile`, or `$XDG_CONFIG_HOME/git/ignore`).
pub(crate) fn global_excludes() -> Gitignore {
    Gitignore::global().0
}

/// Parents of `root` whose ignore files apply to a walk of `root`, outermost first.
pub(crate) fn parents_of(root: &Path) -> Vec<PathBuf> {
    let mut parents: Vec<PathBuf> = root.ancestors().skip(1).map(Path::to_path_buf).collect();
    parents.reverse();
    parents
}

/// The glob overrides for a search rooted at the base `base`: the user's glob (if any),
/// then exclusions of the hidden paths and of the version-control folders (later globs take
/// precedence, as in rg).
pub fn overrides(
    base: &Path,
    user_glob: Option<&str>,
    hidden: &[String],
) -> Result<Override, ignore::Error> {
    let mut builder = OverrideBuilder::new(base);
    if let Some(glob) = user_glob {
        for part in split_user_globs(glob) {
            builder.add(&part)?;
        }
    }
    for pattern in hidden {
        builder.add(&format!("!{pattern}"))?;
    }
    for vcs in VCS_FOLDERS {
        builder.add(&format!("!{vcs}"))?;
    }
    builder.build()
}

/// Splits the Grep tool's `glob` argument: whitespace separates several globs, except
/// inside braces (`*.{ts, tsx}`), as Claude Code's Grep accepts.
pub fn split_user_globs(glob: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for ch in glob.chars() {
        match ch {
            '{' => {
                depth += 1;
                current.push(ch);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                current.push(ch);
            }
            c if c.is_whitespace() && depth == 0 => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
            }
            c if c.is_whitespace() => {}
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_globs_split_on_whitespace_outside_braces() {
        assert_eq!(split_user_globs("*.rs  *.toml"), vec!["*.rs", "*.toml"]);
        assert_eq!(split_user_globs("*.{ts, tsx}"), vec!["*.{ts,tsx}"]);
    }
}
