//! The apply_patch tool: Codex's patch format (one string argument, `input`, holding the
//! whole patch), applied with the file tools' rules.
//!
//! - Every path is confined, the `*** Move to:` target too, and checked again when written
//!   ([`FileOps`](super::FileOps) opens beneath the base).
//! - A file the patch updates, or replaces (an Add or a Move onto an existing file), must
//!   have been fully Read in the session and be unchanged since, as for Write and Edit; a
//!   file it deletes need not have been read. Only regular files are deleted.
//! - The locks of every file the patch names are held from the first check to the last
//!   write (taken in path order, so two patches cannot wait for each other), and each file
//!   is written atomically.
//! - The patch is checked whole before anything is written, as Codex checks it before it
//!   runs: a malformed patch, a refused path, a file not read, a hunk whose lines are not in
//!   the file each change nothing, and the error names the file and the hunk. Then the hunks
//!   are applied in order; if one still fails (the disk refuses a write), the files changed
//!   before it stay changed, as with Codex, and the result lists exactly which they are.

mod apply;
pub(crate) mod parse;

use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolbelt_core::{DynTool, FreeformInput, FunctionTool, ToolContext, ToolError, ToolOutput};

pub use apply::{Unplaced, apply_chunks};
pub use parse::{Chunk, Hunk, Line, ParseError, parse};

use super::read_state::{current_content, record_written, with_file_locks};
use super::text::{self, Encoding};
use super::{FileKind, diff};
use crate::BuiltinEnv;

/// The largest patch accepted, in bytes: parsing and matching stay bounded.
pub const MAX_PATCH_BYTES: usize = 4 * 1024 * 1024;

/// The most hunks (files) one patch may change.
pub const MAX_HUNKS: usize = 1000;

const DESCRIPTION: &str = "Edits files with a patch. `input` is the whole patch:\n\
*** Begin Patch\n\
*** Add File: path/new.txt\n\
+every line of the new file, each starting with +\n\
*** Delete File: path/old.txt\n\
*** Update File: path/file.py\n\
*** Move to: path/renamed.py   (optional)\n\
@@ def function_the_change_is_in():\n\
 context line (starts with a space)\n\
-removed line\n\
+added line\n\
*** End of File   (optional: the chunk ends the file)\n\
*** End Patch\n\
Give about three lines of context around each change, and an @@ line naming the class or \
function when the context alone is not unique. Paths are relative to the working directory. \
A file that is updated or replaced must have been read with the Read tool first (in full), \
and must not have changed since. The patch is checked whole before any file is changed.";

/// The patch format as a Lark grammar, for dialects that let the model write the patch as
/// plain text (the Responses API's freeform tools). It is the canonical form [`parse`]
/// takes: a first chunk may go without its `@@` line, an empty line is an empty context
/// line; the leniencies for hand-written patches (padded
/// markers, a heredoc around the patch) are left out, since a model held to the grammar
/// never needs them.
const GRAMMAR: &str = r#"start: begin operation+ end
begin: "*** Begin Patch" NL
end: "*** End Patch" NL?
operation: add | delete | update
add: "*** Add File: " PATH NL added_line*
added_line: "+" TEXT? NL
delete: "*** Delete File: " PATH NL
update: "*** Update File: " PATH NL move? chunk+
move: "*** Move to: " PATH NL
chunk: at_line? change_line+ end_of_file?
at_line: "@@" (" " TEXT)? NL
change_line: ((" " | "-" | "+") TEXT?)? NL
end_of_file: "*** End of File" NL
PATH: /[^
]+/
TEXT: /[^
]+/
NL: /
?
/
"#;

/// Arguments of apply_patch.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApplyPatchArgs {
    /// The entire patch, from '*** Begin Patch' to '*** End Patch'.
    pub input: String,
}

/// The apply_patch tool over `env`'s file backend.
pub fn apply_patch_tool(env: &BuiltinEnv) -> Result<DynTool, ToolError> {
    let env = env.clone();
    let tool = FunctionTool::returning_output(
        "apply_patch",
        DESCRIPTION,
        move |ctx: ToolContext, args: ApplyPatchArgs| {
            let env = env.for_call(&ctx);
            async move { Ok::<_, ToolError>(apply_patch(&env, args).await) }
        },
    )?
    .map_declaration(|d| {
        d.destructive()
            .closed_world()
            .concurrency_safe(false)
            .with_freeform(FreeformInput {
                argument: "input".into(),
                syntax: "lark".into(),
                definition: GRAMMAR.into(),
            })
    });
    Ok(Arc::new(tool))
}

/// Runs apply_patch; failures are result-level errors.
pub async fn apply_patch(env: &BuiltinEnv, args: ApplyPatchArgs) -> ToolOutput {
    match try_apply_patch(env, args).await {
        Ok(report) => report.output(),
        Err(message) => ToolOutput::error(format!("{message}\nNo file was changed."))
            .with_structured(json!({"changes": [], "error": message})),
    }
}

/// A hunk with its paths resolved.
struct Target {
    number: usize,
    hunk: Hunk,
    path: PathBuf,
    shown: String,
    move_to: Option<(PathBuf, String)>,
}

impl Target {
    /// How errors name the hunk: its number and header.
    fn label(&self) -> String {
        let kind = match &self.hunk {
            Hunk::Add { .. } => "Add File",
            Hunk::Delete { .. } => "Delete File",
            Hunk::Update { .. } => "Update File",
        };
        format!("hunk {} (*** {kind}: {})", self.number, self.hunk.path())
    }
}

/// One file change, checked and ready to write.
enum Planned {
    Write {
        label: String,
        /// `A` for an Add, `M` for an Update (moved or not), as Codex lists them.
        letter: char,
        path: PathBuf,
        shown: String,
        bytes: Vec<u8>,
        old_text: Option<String>,
        new_text: String,
        /// The source of a move, removed after the write.
        moved_from: Option<(PathBuf, String)>,
    },
    Delete {
        label: String,
        path: PathBuf,
        shown: String,
        old_text: Option<String>,
    },
}

/// What happened to one file.
struct Changed {
    /// `A`, `M` or `D`, as Codex lists them.
    letter: char,
    shown: String,
    moved_from: Option<String>,
    diff: String,
}

/// The files changed, and the hunk that stopped the patch, if one did.
struct Report {
    changed: Vec<Changed>,
    failure: Option<String>,
    not_applied: Vec<String>,
}

impl Report {
    fn output(self) -> ToolOutput {
        let lines: Vec<String> = self
            .changed
            .iter()
            .map(|c| match &c.moved_from {
                Some(from) => format!("{} {} (moved from {from})", c.letter, c.shown),
                None => format!("{} {}", c.letter, c.shown),
            })
            .collect();
        let changes: Vec<Value> = self
            .changed
            .iter()
            .map(|c| {
                let kind = match (c.letter, &c.moved_from) {
                    ('A', _) => "add",
                    ('D', _) => "delete",
                    (_, Some(_)) => "move",
                    _ => "update",
                };
                json!({"path": c.shown, "kind": kind, "moved_from": c.moved_from})
            })
            .collect();
        let diffs: String = self.changed.iter().map(|c| c.diff.as_str()).collect();
        let Some(failure) = self.failure else {
            let message = format!(
                "Success. Updated the following files:\n{}\n",
                lines.join("\n")
            );
            return ToolOutput::text(message.clone())
                .with_user_text(format!("{message}{diffs}"))
                .with_structured(json!({"changes": changes}));
        };
        let kept = if lines.is_empty() {
            "No file was changed.".to_string()
        } else {
            format!(
                "These files were changed before the failure and stay changed:\n{}",
                lines.join("\n")
            )
        };
        let rest = if self.not_applied.is_empty() {
            String::new()
        } else {
            format!("\nNot applied: {}", self.not_applied.join(", "))
        };
        let message = format!("apply_patch stopped: {failure}\n{kept}{rest}");
        ToolOutput::error(message.clone())
            .with_user_text(format!("{message}\n{diffs}"))
            .with_structured(json!({
                "changes": changes,
                "error": failure,
                "not_applied": self.not_applied,
            }))
    }
}

async fn try_apply_patch(env: &BuiltinEnv, args: ApplyPatchArgs) -> Result<Report, String> {
    if args.input.len() > MAX_PATCH_BYTES {
        return Err(format!(
            "the patch is {} bytes, more than the {MAX_PATCH_BYTES}-byte limit; split it into \
             several patches",
            args.input.len()
        ));
    }
    let hunks = parse(&args.input).map_err(|e| e.to_string())?;
    if hunks.is_empty() {
        return Err("the patch has no hunks: nothing to change".to_string());
    }
    if hunks.len() > MAX_HUNKS {
        return Err(format!(
            "the patch has {} hunks, more than the limit of {MAX_HUNKS}; split it",
            hunks.len()
        ));
    }
    let targets = resolve(env, hunks)?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for target in &targets {
        paths.push(target.path.clone());
        paths.extend(target.move_to.iter().map(|(p, _)| p.clone()));
    }
    with_file_locks(env, paths, move |env| async move {
        let mut planned = Vec::with_capacity(targets.len());
        for target in targets {
            planned.push(plan(&env, target).await?);
        }
        Ok(apply_all(&env, planned).await)
    })
    .await
}

/// Resolves every path of every hunk (refusing any outside the base) and refuses a patch
/// that names one file twice, whose hunks would depend on each other's order.
fn resolve(env: &BuiltinEnv, hunks: Vec<Hunk>) -> Result<Vec<Target>, String> {
    let ops = &env.files;
    let mut seen: Vec<(PathBuf, usize)> = Vec::new();
    let mut targets = Vec::with_capacity(hunks.len());
    for (i, hunk) in hunks.into_iter().enumerate() {
        let mut target = Target {
            number: i + 1,
            path: PathBuf::new(),
            shown: String::new(),
            move_to: None,
            hunk,
        };
        let label = target.label();
        let path = ops
            .resolve(target.hunk.path())
            .map_err(|e| format!("{label}: {e}"))?;
        target.shown = ops.display_path(&path);
        target.path = path;
        if let Hunk::Update {
            move_to: Some(dest),
            ..
        } = &target.hunk
        {
            let dest = ops
                .resolve(dest)
                .map_err(|e| format!("{label}, *** Move to: {dest}: {e}"))?;
            target.move_to = Some((dest.clone(), ops.display_path(&dest)));
        }
        let named = std::iter::once(&target.path).chain(target.move_to.iter().map(|(p, _)| p));
        for path in named {
            if let Some((_, first)) = seen.iter().find(|(p, _)| p == path) {
                return Err(format!(
                    "{label}: {} is already changed by hunk {first}; give each file one hunk",
                    ops.display_path(path)
                ));
            }
            seen.push((path.clone(), target.number));
        }
        targets.push(target);
    }
    Ok(targets)
}

/// Checks one hunk against the files as they are and computes what it writes.
async fn plan(env: &BuiltinEnv, target: Target) -> Result<Planned, String> {
    let label = target.label();
    let at = |e: String| format!("{label}: {e}");
    match target.hunk {
        Hunk::Add { contents, .. } => {
            let current = current_content(env, &target.path, &target.shown)
                .await
                .map_err(at)?;
            let (old_text, encoding) = existing_text(current.as_ref().map(|c| &c.bytes[..]));
            Ok(Planned::Write {
                label,
                letter: 'A',
                path: target.path,
                shown: target.shown,
                bytes: text::encode(&contents, encoding),
                old_text,
                new_text: contents,
                moved_from: None,
            })
        }
        Hunk::Delete { .. } => {
            let shown = &target.shown;
            let stat = env
                .files
                .stat(&target.path)
                .await
                .map_err(|e| at(e.to_string()))?;
            match stat.map(|s| s.kind) {
                None => return Err(at(format!("file does not exist: {shown}"))),
                Some(FileKind::Dir) => {
                    return Err(at(format!(
                        "{shown} is a directory; apply_patch deletes files only"
                    )));
                }
                Some(FileKind::File) => {}
                Some(_) => return Err(at(format!("{shown} is not a regular file"))),
            }
            // For the user's diff only: a file too large or not text is deleted all the same.
            let old_text = match env.files.read(&target.path, Some(env.max_file_size)).await {
                Ok(c) => text::decode(&c.bytes).ok().map(|d| d.text),
                Err(_) => None,
            };
            Ok(Planned::Delete {
                label,
                path: target.path,
                shown: target.shown,
                old_text,
            })
        }
        Hunk::Update { chunks, .. } => {
            let shown = &target.shown;
            let Some(current) = current_content(env, &target.path, shown)
                .await
                .map_err(at)?
            else {
                return Err(at(format!("file does not exist: {shown}")));
            };
            let decoded = text::decode(&current.bytes)
                .map_err(|e| at(format!("cannot patch {shown}: {e}")))?;
            let new_text = apply_chunks(&decoded.text, &chunks).map_err(|e| {
                at(format!(
                    "chunk {} does not apply to {shown}: {}",
                    e.chunk, e.message
                ))
            })?;
            let bytes = text::encode(&new_text, decoded.encoding);
            let Some((dest, dest_shown)) = target.move_to else {
                return Ok(Planned::Write {
                    label,
                    letter: 'M',
                    path: target.path,
                    shown: target.shown,
                    bytes,
                    old_text: Some(decoded.text),
                    new_text,
                    moved_from: None,
                });
            };
            // Moving onto an existing file replaces it: the same rule as writing it.
            current_content(env, &dest, &dest_shown)
                .await
                .map_err(|e| format!("{label}, *** Move to: {dest_shown}: {e}"))?;
            Ok(Planned::Write {
                label,
                letter: 'M',
                path: dest,
                shown: dest_shown,
                bytes,
                old_text: Some(decoded.text),
                new_text,
                moved_from: Some((target.path, target.shown)),
            })
        }
    }
}

/// The text of a file an Add replaces (`None` when there is none) and the encoding to keep.
fn existing_text(bytes: Option<&[u8]>) -> (Option<String>, Encoding) {
    match bytes.map(text::decode) {
        None => (None, Encoding::Utf8 { bom: false }),
        Some(Ok(decoded)) => (Some(decoded.text), decoded.encoding),
        // Replacing a binary file: nothing to diff against, write UTF-8.
        Some(Err(_)) => (Some(String::new()), Encoding::Utf8 { bom: false }),
    }
}

/// Writes the planned changes in patch order, stopping at the first that fails.
async fn apply_all(env: &BuiltinEnv, planned: Vec<Planned>) -> Report {
    let mut report = Report {
        changed: Vec::new(),
        failure: None,
        not_applied: Vec::new(),
    };
    let mut planned = planned.into_iter();
    for change in planned.by_ref() {
        if let Err(failure) = apply_one(env, change, &mut report.changed).await {
            report.failure = Some(failure);
            break;
        }
    }
    report.not_applied = planned
        .map(|p| match p {
            Planned::Write { label, .. } | Planned::Delete { label, .. } => label,
        })
        .collect();
    report
}

async fn apply_one(
    env: &BuiltinEnv,
    change: Planned,
    changed: &mut Vec<Changed>,
) -> Result<(), String> {
    match change {
        Planned::Write {
            label,
            letter,
            path,
            shown,
            bytes,
            old_text,
            new_text,
            moved_from,
        } => {
            let stat = env
                .files
                .write_atomic(&path, &bytes)
                .await
                .map_err(|e| format!("{label}: {e}"))?;
            record_written(env, &path, &stat, &bytes).await;
            let diff_name = moved_from
                .as_ref()
                .map_or(shown.as_str(), |(_, s)| s.as_str());
            let mut entry = Changed {
                letter,
                diff: diff::unified(diff_name, old_text.as_deref().unwrap_or(""), &new_text),
                shown,
                moved_from: None,
            };
            if let Some((source, source_shown)) = moved_from {
                entry.moved_from = Some(source_shown.clone());
                let written = entry.shown.clone();
                changed.push(entry);
                env.files.remove(&source).await.map_err(|e| {
                    format!("{label}: wrote {written} but could not remove {source_shown}: {e}")
                })?;
                forget(env, &source);
            } else {
                changed.push(entry);
            }
            Ok(())
        }
        Planned::Delete {
            label,
            path,
            shown,
            old_text,
        } => {
            env.files
                .remove(&path)
                .await
                .map_err(|e| format!("{label}: {e}"))?;
            forget(env, &path);
            changed.push(Changed {
                letter: 'D',
                diff: old_text.map_or_else(String::new, |old| diff::unified(&shown, &old, "")),
                shown,
                moved_from: None,
            });
            Ok(())
        }
    }
}

/// Forgets a removed file's read, so a file later created at its path must be Read first.
fn forget(env: &BuiltinEnv, path: &std::path::Path) {
    // A shared store keeps the record; a new file there differs from it unless its content
    // is the same, which changes nothing another writer could lose.
    if !env.read_state.is_shared() {
        env.read_state.forget(path);
    }
}
