//! The walk rules both search backends share, so that they visit exactly the same files:
//! hidden files are searched, symlinks are not followed, `.gitignore` (even outside a git
//! repository), `.ignore` and `.rgignore` are honoured unless ignored files are included,
//! and version-control folders are always skipped.

use std::path::Path;

use ignore::WalkBuilder;
use ignore::overrides::{Override, OverrideBuilder};

/// Version-control folders that are never searched, expressed as glob overrides exactly as
/// the external backend passes them to `rg -g`/`fd -E`.
pub const VCS_FOLDERS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", ".sl", "_darcs"];

/// A walker over `root` with the shared rules; `overrides` should come from [`overrides`].
pub fn walk_builder(root: &Path, include_ignored: bool) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    let respect = !include_ignored;
    builder
        .hidden(false)
        .follow_links(false)
        .require_git(false)
        .parents(respect)
        .ignore(respect)
        .git_ignore(respect)
        .git_global(respect)
        .git_exclude(respect)
        .add_custom_ignore_filename(".rgignore");
    builder.filter_entry(|entry| {
        let name = entry.file_name().to_string_lossy();
        !VCS_FOLDERS.contains(&name.as_ref())
    });
    builder
}

/// The glob overrides for a search rooted at the base `base`: the user's glob (if any),
/// then exclusions of the version-control folders (later globs take precedence, as in rg).
pub fn overrides(base: &Path, user_glob: Option<&str>) -> Result<Override, ignore::Error> {
    let mut builder = OverrideBuilder::new(base);
    if let Some(glob) = user_glob {
        for part in split_user_globs(glob) {
            builder.add(&part)?;
        }
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
