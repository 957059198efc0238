//! What a person sees before deciding about a call: the command a Bash call runs, the
//! change an Edit or Write makes as a unified diff, the patch of an apply_patch.
//!
//! A preview reads at most [`MAX_PREVIEW_FILE_BYTES`] of a file, and only a file inside the
//! base directory (a symlink is followed and must land inside too): it is shown to a person,
//! never to the model, but it must not turn an approval question into a way to read files
//! the tools may not.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::fs::diff::unified;

/// The most bytes of a file a preview reads.
pub const MAX_PREVIEW_FILE_BYTES: u64 = 1024 * 1024;

/// The preview of a call of `tool` with `arguments`, for tools that have one.
pub(super) fn preview(base: &Path, tool: &str, arguments: &Value) -> Option<String> {
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    match tool {
        "Bash" => text("command").map(|command| format!("$ {command}")),
        "apply_patch" => text("input").map(str::to_string),
        "Write" => {
            let path = text("file_path")?;
            let new = text("content")?;
            Some(match read_inside(base, path) {
                Ok(Some(old)) => unified(path, &old, new),
                Ok(None) => unified(path, "", new),
                Err(why) => format!("{path}: {why}"),
            })
        }
        "Edit" => {
            let path = text("file_path")?;
            let old_string = text("old_string")?;
            let new_string = text("new_string")?;
            let all = arguments.get("replace_all").and_then(Value::as_bool) == Some(true);
            Some(match read_inside(base, path) {
                Ok(Some(old)) if old.contains(old_string) && !old_string.is_empty() => {
                    let new = if all {
                        old.replace(old_string, new_string)
                    } else {
                        old.replacen(old_string, new_string, 1)
                    };
                    unified(path, &old, &new)
                }
                // The tool will refuse it; show what was asked.
                Ok(_) => unified(path, old_string, new_string),
                Err(why) => format!("{path}: {why}"),
            })
        }
        _ => None,
    }
}

/// The text of `path` (relative to `base`), `None` when it does not exist, or why it is not
/// shown.
fn read_inside(base: &Path, path: &str) -> Result<Option<String>, &'static str> {
    let joined = base.join(path);
    let real = match std::fs::canonicalize(&joined) {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err("cannot be read for the preview"),
    };
    if !real.starts_with(base) {
        return Err("outside the base directory: no preview");
    }
    let file = std::fs::File::open(&real).map_err(|_| "cannot be read for the preview")?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err("not a regular file: no preview");
    }
    let mut bytes = Vec::new();
    file.take(MAX_PREVIEW_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| "cannot be read for the preview")?;
    if bytes.len() as u64 > MAX_PREVIEW_FILE_BYTES {
        return Err("larger than the preview reads (1 MiB): no diff");
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "not UTF-8 text: no diff")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::preview;

    fn base() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(base.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
        (dir, base)
    }

    #[test]
    fn an_edit_shows_its_change_to_the_file_as_a_diff() {
        let (_dir, base) = base();
        let args = json!({"file_path": "notes.txt", "old_string": "two", "new_string": "2"});
        let shown = preview(&base, "Edit", &args).unwrap();
        assert!(shown.contains("-two\n+2\n"), "{shown}");
        assert!(shown.contains(" one\n"), "context lines: {shown}");
    }

    #[test]
    fn a_write_diffs_against_the_file_it_replaces_or_shows_a_new_one_whole() {
        let (_dir, base) = base();
        let replace = json!({"file_path": "notes.txt", "content": "one\n"});
        let shown = preview(&base, "Write", &replace).unwrap();
        assert!(shown.contains("-two\n-three\n"), "{shown}");
        let create = json!({"file_path": "new.txt", "content": "hello\n"});
        assert!(
            preview(&base, "Write", &create)
                .unwrap()
                .contains("+hello\n")
        );
    }

    #[test]
    fn a_bash_call_shows_its_command() {
        let (_dir, base) = base();
        let args = json!({"command": "git push --force"});
        assert_eq!(preview(&base, "Bash", &args).unwrap(), "$ git push --force");
        assert_eq!(preview(&base, "Glob", &json!({"pattern": "*"})), None);
    }

    #[test]
    fn a_file_outside_the_base_is_never_read_for_a_preview() {
        let (_dir, base) = base();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "TOKEN=hunter2\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), base.join("link")).unwrap();
        for path in [
            "link",
            "../secret",
            outside.path().join("secret").to_str().unwrap(),
        ] {
            let args = json!({"file_path": path, "content": "x\n"});
            let shown = preview(&base, "Write", &args).unwrap();
            assert!(!shown.contains("hunter2"), "{path}: {shown}");
        }
    }
}
