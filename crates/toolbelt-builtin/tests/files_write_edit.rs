//! Write and Edit on real files: read-before-write, external changes, atomicity and modes,
//! uniqueness, replace_all, CRLF, missing final newlines, quotes, creation and diffs.

use crate::files_support;

use std::os::unix::fs::PermissionsExt;

use files_support::{call, call_err, call_ok, set_on};
use serde_json::json;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ToolSet;

fn file(dir: &tempfile::TempDir, name: &str, content: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn no_temp_files_left(dir: &std::path::Path) {
    for entry in walk(dir) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.contains("toolbelt-tmp"),
            "temp file left behind: {name}"
        );
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn write_refuses_an_existing_file_that_was_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "a.txt", "original\n");
    let set = set_on(dir.path());
    call_err(
        &set,
        "Write",
        json!({"file_path": "a.txt", "content": "new"}),
        "Read it first",
    )
    .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "original\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partial_read_does_not_allow_writing() {
    let dir = tempfile::tempdir().unwrap();
    file(&dir, "a.txt", "1\n2\n3\n");
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "a.txt", "limit": 2})).await;
    call_err(
        &set,
        "Write",
        json!({"file_path": "a.txt", "content": "x"}),
        "Read it first",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_refuses_a_file_changed_on_disk_since_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "a.txt", "original\n");
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "a.txt"})).await;
    std::fs::write(&path, "changed by someone else\n").unwrap();
    call_err(
        &set,
        "Write",
        json!({"file_path": "a.txt", "content": "mine"}),
        "file has been modified since it was read; Read it again",
    )
    .await;
    call_err(
        &set,
        "Edit",
        json!({"file_path": "a.txt", "old_string": "changed", "new_string": "x"}),
        "modified since it was read",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "changed by someone else\n"
    );
    // Reading again makes it writable.
    call_ok(&set, "Read", json!({"file_path": "a.txt"})).await;
    call_ok(
        &set,
        "Write",
        json!({"file_path": "a.txt", "content": "mine"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_read_rule_is_per_tool_set_instance() {
    let dir = tempfile::tempdir().unwrap();
    file(&dir, "a.txt", "x\n");
    let reader = set_on(dir.path());
    let writer = set_on(dir.path());
    call_ok(&reader, "Read", json!({"file_path": "a.txt"})).await;
    call_err(
        &writer,
        "Write",
        json!({"file_path": "a.txt", "content": "y"}),
        "Read it first",
    )
    .await;
    call_ok(
        &reader,
        "Write",
        json!({"file_path": "a.txt", "content": "y"}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn write_creates_new_files_and_parent_directories_without_a_read() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let out = call_ok(
        &set,
        "Write",
        json!({"file_path": "deep/er/new.txt", "content": "hi\n"}),
    )
    .await;
    assert!(
        out.llm_text()
            .contains("File created successfully at: deep/er/new.txt")
    );
    assert!(
        out.user_text().contains("+hi"),
        "user view has a diff: {}",
        out.user_text()
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("deep/er/new.txt")).unwrap(),
        "hi\n"
    );
    // A file it wrote itself may be written again.
    call_ok(
        &set,
        "Write",
        json!({"file_path": "deep/er/new.txt", "content": "again\n"}),
    )
    .await;
    no_temp_files_left(dir.path());
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_are_atomic_keep_the_mode_and_leave_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "script.sh", "#!/bin/sh\necho old\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
    let inode_before = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "script.sh"})).await;
    call_ok(
        &set,
        "Write",
        json!({"file_path": "script.sh", "content": "#!/bin/sh\necho new\n"}),
    )
    .await;
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o751);
    // Replaced by rename: a new inode, never the old one rewritten in place.
    assert_ne!(std::os::unix::fs::MetadataExt::ino(&meta), inode_before);
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "script.sh", "old_string": "new", "new_string": "newer"}),
    )
    .await;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o751
    );
    no_temp_files_left(dir.path());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_write_leaves_the_old_file_and_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("ro");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("a.txt"), "old\n").unwrap();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "ro/a.txt"})).await;
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = call(
        &set,
        "Write",
        json!({"file_path": "ro/a.txt", "content": "new\n"}),
    )
    .await;
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Root ignores directory permissions; the property holds either way.
    if out.is_error {
        assert_eq!(std::fs::read_to_string(sub.join("a.txt")).unwrap(), "old\n");
    } else {
        assert_eq!(std::fs::read_to_string(sub.join("a.txt")).unwrap(), "new\n");
    }
    no_temp_files_left(dir.path());
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_refuses_ambiguous_old_string_and_names_the_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "a.txt", "foo\nbar foo\nfoo\n");
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "a.txt"})).await;
    call_err(
        &set,
        "Edit",
        json!({"file_path": "a.txt", "old_string": "foo", "new_string": "baz"}),
        "old_string matches 3 places",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "foo\nbar foo\nfoo\n"
    );
    call_err(
        &set,
        "Edit",
        json!({"file_path": "a.txt", "old_string": "nope", "new_string": "x"}),
        "not found",
    )
    .await;
    call_err(
        &set,
        "Edit",
        json!({"file_path": "a.txt", "old_string": "bar", "new_string": "bar"}),
        "the same",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_replace_all_replaces_every_occurrence_and_shows_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "a.txt", "foo\nbar foo\nfoo\n");
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "a.txt"})).await;
    let out = call_ok(
        &set,
        "Edit",
        json!({"file_path": "a.txt", "old_string": "foo", "new_string": "baz", "replace_all": true}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "baz\nbar baz\nbaz\n"
    );
    assert_eq!(out.structured.clone().unwrap()["replacements"], 3);
    let user = out.user_text();
    assert!(user.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-foo\n-bar foo\n-foo\n+baz\n+bar baz\n+baz\n"), "{user}");
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_keeps_crlf_line_endings() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "win.txt", "first\r\nsecond\r\nthird\r\n");
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "win.txt"})).await;
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "win.txt", "old_string": "first\nsecond", "new_string": "one\ntwo\nthree"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "one\r\ntwo\r\nthree\r\nthird\r\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_keeps_a_missing_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "a.txt", "alpha\nbeta");
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "a.txt"})).await;
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "a.txt", "old_string": "beta", "new_string": "gamma"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "alpha\ngamma");
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_tolerates_curly_quotes_and_keeps_the_file_style() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(
        &dir,
        "prose.md",
        "She said \u{201C}hello\u{201D} and didn\u{2019}t stop.\n",
    );
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "prose.md"})).await;
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "prose.md", "old_string": "\"hello\" and didn't", "new_string": "\"goodbye\" and wouldn't"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "She said \u{201C}goodbye\u{201D} and wouldn\u{2019}t stop.\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_with_an_empty_old_string_creates_a_missing_file_only() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "new/file.rs", "old_string": "", "new_string": "fn main() {}\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new/file.rs")).unwrap(),
        "fn main() {}\n"
    );
    file(&dir, "full.txt", "content\n");
    call_ok(&set, "Read", json!({"file_path": "full.txt"})).await;
    call_err(
        &set,
        "Edit",
        json!({"file_path": "full.txt", "old_string": "", "new_string": "x"}),
        "already exists",
    )
    .await;
    call_err(
        &set,
        "Edit",
        json!({"file_path": "absent.txt", "old_string": "a", "new_string": "b"}),
        "does not exist",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_keeps_utf16_and_bom_encodings() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = vec![0xFF, 0xFE];
    "key = old\n"
        .encode_utf16()
        .for_each(|u| bytes.extend(u.to_le_bytes()));
    std::fs::write(dir.path().join("u16.txt"), &bytes).unwrap();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "u16.txt"})).await;
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "u16.txt", "old_string": "old", "new_string": "new"}),
    )
    .await;
    let mut expected = vec![0xFF, 0xFE];
    "key = new\n"
        .encode_utf16()
        .for_each(|u| expected.extend(u.to_le_bytes()));
    assert_eq!(std::fs::read(dir.path().join("u16.txt")).unwrap(), expected);
}

/// The tools of the file half (other areas add theirs to the same set).
const FILE_TOOLS: [&str; 6] = ["Read", "Glob", "Grep", "Write", "Edit", "NotebookEdit"];

#[tokio::test(flavor = "multi_thread")]
async fn read_only_sets_do_not_expose_mutating_tools() {
    let dir = tempfile::tempdir().unwrap();
    let set = BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_read_only(true)).unwrap();
    let names: Vec<String> = set
        .tools(&toolbelt_core::ToolContext::new())
        .await
        .unwrap()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|n| FILE_TOOLS.contains(&n.as_str()))
        .collect();
    assert_eq!(names, ["Read", "Glob", "Grep"]);
    // The shell tools can change any file: a read-only set keeps them only inside the
    // read-only sandbox, and leaves them out where there is none.
    for shell in ["Bash", "TaskOutput", "TaskStop"] {
        let offered = set.tool_list().iter().any(|t| t.name() == shell);
        match set.shell_sandbox() {
            Some(mode) => {
                assert_eq!(mode, toolbelt_builtin::shell::SandboxMode::ReadOnly);
                assert!(offered, "{shell} is offered under the read-only sandbox");
            }
            None => assert!(!offered, "{shell} without a sandbox in a read-only set"),
        }
    }
    let full = set_on(dir.path());
    let names: Vec<&str> = full
        .tool_list()
        .iter()
        .map(|t| t.name())
        .filter(|n| FILE_TOOLS.contains(n))
        .collect();
    assert_eq!(
        names,
        ["Read", "Glob", "Grep", "Write", "Edit", "NotebookEdit"]
    );
    assert_eq!(full.name(), "builtin");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_schema_property_has_a_description() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    for tool in set
        .tool_list()
        .iter()
        .filter(|t| FILE_TOOLS.contains(&t.name()))
    {
        let schema = &tool.declaration().input_schema;
        let properties = schema["properties"].as_object().unwrap();
        assert!(!properties.is_empty(), "{} has properties", tool.name());
        for (name, property) in properties {
            assert!(
                property
                    .get("description")
                    .and_then(|d| d.as_str())
                    .is_some_and(|d| !d.is_empty()),
                "{}.{name} has no description",
                tool.name()
            );
        }
    }
    let grep = set.tool_list().iter().find(|t| t.name() == "Grep").unwrap();
    let props = grep.declaration().input_schema["properties"]
        .as_object()
        .unwrap();
    for key in [
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-A",
        "-B",
        "-C",
        "context",
        "-n",
        "-i",
        "head_limit",
        "offset",
        "multiline",
    ] {
        assert!(props.contains_key(key), "Grep has {key}");
    }
}
