//! apply_patch on real files (issue 32, item 1): Codex's format with every kind of hunk,
//! several chunks, moves (onto an existing file too), `*** End of File`, Unicode and
//! whitespace leniency, padded markers and heredocs, empty and malformed patches, missing
//! context, a delete of a directory, Read-before-Write, and what a failure part-way keeps.

use crate::files_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use files_support::{call_err, call_ok, set_on};
use serde_json::json;
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ToolSet;

fn put(dir: &Path, name: &str, content: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn get(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn patch(body: &str) -> serde_json::Value {
    json!({"input": format!("*** Begin Patch\n{body}*** End Patch\n")})
}

async fn read(set: &BuiltinToolSet, name: &str) {
    call_ok(set, "Read", json!({"file_path": name})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_patch_adds_updates_in_several_chunks_and_deletes_and_lists_each_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(
        d,
        "src/lib.rs",
        "fn a() {\n    1\n}\n\nfn b() {\n    1\n}\n\nfn c() {\n    1\n}\n",
    );
    put(d, "old.txt", "bye\n");
    let set = set_on(d);
    read(&set, "src/lib.rs").await;
    let out = call_ok(
        &set,
        "apply_patch",
        patch(
            "*** Add File: docs/new/notes.md\n+# Notes\n+\n+one\n\
             *** Update File: src/lib.rs\n@@ fn a() {\n-    1\n+    2\n@@ fn c() {\n-    1\n+    3\n\
             *** Delete File: old.txt\n",
        ),
    )
    .await;
    assert_eq!(
        out.llm_text(),
        "Success. Updated the following files:\nA docs/new/notes.md\nM src/lib.rs\nD old.txt\n"
    );
    assert_eq!(get(d, "docs/new/notes.md"), "# Notes\n\none\n");
    assert_eq!(
        get(d, "src/lib.rs"),
        "fn a() {\n    2\n}\n\nfn b() {\n    1\n}\n\nfn c() {\n    3\n}\n"
    );
    assert!(!d.join("old.txt").exists());
    let user = out.user_text();
    assert!(
        user.contains("+++ b/src/lib.rs") && user.contains("-    1\n+    3"),
        "{user}"
    );
    assert!(user.contains("-bye"), "the delete's diff: {user}");
    let kinds: Vec<_> = out.structured.as_ref().unwrap()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["add", "update", "delete"]);

    // Its own writes count as read: a second patch of the same file needs no new Read.
    call_ok(
        &set,
        "apply_patch",
        patch("*** Update File: src/lib.rs\n@@ fn b() {\n-    1\n+    9\n"),
    )
    .await;
    assert!(get(d, "src/lib.rs").contains("fn b() {\n    9\n}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_needs_a_full_read_and_refuses_a_file_changed_since_changing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "a.txt", "alpha\n");
    let set = set_on(d);
    let body = "*** Add File: first.txt\n+x\n*** Update File: a.txt\n-alpha\n+beta\n";
    let text = call_err(&set, "apply_patch", patch(body), "has not been read yet").await;
    assert!(text.contains("hunk 2 (*** Update File: a.txt)"), "{text}");
    assert!(text.contains("No file was changed."), "{text}");
    assert!(
        !d.join("first.txt").exists(),
        "the patch is checked whole first"
    );

    read(&set, "a.txt").await;
    put(d, "a.txt", "alphA\n");
    call_err(
        &set,
        "apply_patch",
        patch(body),
        "modified since it was read",
    )
    .await;
    assert_eq!(get(d, "a.txt"), "alphA\n");
    assert!(!d.join("first.txt").exists());

    // Adding over an existing file replaces it: the same rule as Write.
    put(d, "exists.txt", "keep\n");
    call_err(
        &set,
        "apply_patch",
        patch("*** Add File: exists.txt\n+new\n"),
        "has not been read yet",
    )
    .await;
    assert_eq!(get(d, "exists.txt"), "keep\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_move_writes_the_target_removes_the_source_and_onto_an_existing_file_needs_its_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "src/old.py", "def f():\n    pass\n");
    put(d, "dest.py", "taken\n");
    let set = set_on(d);
    read(&set, "src/old.py").await;
    let body = "*** Update File: src/old.py\n*** Move to: dest.py\n@@ def f():\n-    pass\n+    return 1\n";
    let text = call_err(&set, "apply_patch", patch(body), "has not been read yet").await;
    assert!(text.contains("*** Move to: dest.py"), "{text}");
    assert_eq!(get(d, "dest.py"), "taken\n");
    assert!(d.join("src/old.py").exists());

    read(&set, "dest.py").await;
    let out = call_ok(&set, "apply_patch", patch(body)).await;
    assert_eq!(
        out.llm_text(),
        "Success. Updated the following files:\nM dest.py (moved from src/old.py)\n"
    );
    assert_eq!(get(d, "dest.py"), "def f():\n    return 1\n");
    assert!(!d.join("src/old.py").exists());

    // Into a directory that does not exist yet: it is created.
    let body =
        "*** Update File: dest.py\n*** Move to: pkg/sub/mod.py\n-    return 1\n+    return 2\n";
    call_ok(&set, "apply_patch", patch(body)).await;
    assert_eq!(get(d, "pkg/sub/mod.py"), "def f():\n    return 2\n");
    assert!(!d.join("dest.py").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_end_of_file_chunk_changes_the_last_match_and_crlf_files_stay_crlf() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "a.txt", "end\nmiddle\nend\n");
    put(d, "win.txt", "one\r\ntwo\r\n");
    let set = set_on(d);
    read(&set, "a.txt").await;
    read(&set, "win.txt").await;
    call_ok(
        &set,
        "apply_patch",
        patch(
            "*** Update File: a.txt\n@@\n-end\n+END\n*** End of File\n\
             *** Update File: win.txt\n one\n-two\n+three\n",
        ),
    )
    .await;
    assert_eq!(get(d, "a.txt"), "end\nmiddle\nEND\n");
    assert_eq!(get(d, "win.txt"), "one\r\nthree\r\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn context_matches_despite_trailing_whitespace_and_unicode_punctuation() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(
        d,
        "doc.md",
        "Title \u{2014} \u{201C}quoted\u{201D}   \n\u{00A0}indented\ttext\nλ = 1\n",
    );
    let set = set_on(d);
    read(&set, "doc.md").await;
    call_ok(
        &set,
        "apply_patch",
        patch("*** Update File: doc.md\n Title - \"quoted\"\n indented\ttext\n-λ = 1\n+λ = 2 ✓\n"),
    )
    .await;
    assert_eq!(
        get(d, "doc.md"),
        "Title \u{2014} \u{201C}quoted\u{201D}   \n\u{00A0}indented\ttext\nλ = 2 ✓\n",
        "the file's own characters are kept on the context lines"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn padded_markers_and_a_heredoc_wrapper_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = set_on(d);
    let input =
        "<<'EOF'\n   *** Begin Patch   \n  *** Add File: a.txt  \n+hi\n*** End Patch\t\nEOF\n";
    call_ok(&set, "apply_patch", json!({ "input": input })).await;
    assert_eq!(get(d, "a.txt"), "hi\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_and_malformed_patches_are_refused_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    call_err(&set, "apply_patch", json!({"input": ""}), "first line").await;
    call_err(
        &set,
        "apply_patch",
        json!({"input": "*** Begin Patch\n*** End Patch"}),
        "no hunks",
    )
    .await;
    call_err(
        &set,
        "apply_patch",
        json!({"input": "*** Begin Patch\n*** Add File: a.txt\n+x\n"}),
        "last line of the patch must be '*** End Patch'",
    )
    .await;
    call_err(
        &set,
        "apply_patch",
        patch("*** Add File: a.txt\n+x\n*** Rename File: b\n"),
        "invalid patch at line 4: '*** Rename File: b' is not a hunk header",
    )
    .await;
    call_err(
        &set,
        "apply_patch",
        patch("*** Update File: a.txt\n@@\nno marker\n"),
        "unexpected line in a chunk",
    )
    .await;
    call_err(
        &set,
        "apply_patch",
        json!({"input": format!("*** Begin Patch\n*** Add File: big\n{}*** End Patch", "+x\n".repeat(2_000_000))}),
        "byte limit",
    )
    .await;
    call_err(
        &set,
        "apply_patch",
        patch("*** Add File: a.txt\n+x\n*** Delete File: ./a.txt\n"),
        "already changed by hunk 1",
    )
    .await;
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_context_names_the_file_the_hunk_and_the_chunk_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "a.rs", "fn main() {\n    run();\n}\n");
    let set = set_on(d);
    read(&set, "a.rs").await;
    let text = call_err(
        &set,
        "apply_patch",
        patch(
            "*** Add File: b.rs\n+x\n*** Update File: a.rs\n@@ fn main() {\n-    run();\n+    go();\n\
             @@ fn other() {\n-    x\n+    y\n",
        ),
        "hunk 2 (*** Update File: a.rs): chunk 2 does not apply to a.rs",
    )
    .await;
    assert!(
        text.contains("the context line 'fn other() {' was not found"),
        "{text}"
    );
    assert_eq!(get(d, "a.rs"), "fn main() {\n    run();\n}\n");
    assert!(!d.join("b.rs").exists());

    let text = call_err(
        &set,
        "apply_patch",
        patch("*** Update File: a.rs\n-    walk();\n+    go();\n"),
        "these lines were not found",
    )
    .await;
    assert!(text.contains("    walk();"), "{text}");
    call_err(
        &set,
        "apply_patch",
        patch("*** Update File: nope.rs\n-a\n+b\n"),
        "file does not exist: nope.rs",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_of_a_directory_or_a_missing_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "pkg/keep.txt", "k\n");
    let set = set_on(d);
    call_err(
        &set,
        "apply_patch",
        patch("*** Delete File: pkg\n"),
        "pkg is a directory; apply_patch deletes files only",
    )
    .await;
    call_err(
        &set,
        "apply_patch",
        patch("*** Delete File: pkg/\n"),
        "directory",
    )
    .await;
    assert_eq!(get(d, "pkg/keep.txt"), "k\n");
    call_err(
        &set,
        "apply_patch",
        patch("*** Delete File: gone.txt\n"),
        "file does not exist: gone.txt",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_refused_part_way_keeps_the_earlier_files_and_says_which_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(d, "ro.txt", "locked\n");
    put(d, "later.txt", "later\n");
    let set = set_on(d);
    read(&set, "ro.txt").await;
    std::fs::set_permissions(d.join("ro.txt"), std::fs::Permissions::from_mode(0o444)).unwrap();
    // The check passes (the file was read and is unchanged); its write is refused.
    let text = call_err(
        &set,
        "apply_patch",
        patch(
            "*** Add File: made.txt\n+made\n*** Update File: ro.txt\n-locked\n+open\n\
             *** Delete File: later.txt\n",
        ),
        "apply_patch stopped: hunk 2 (*** Update File: ro.txt): ro.txt: file is read-only",
    )
    .await;
    assert!(
        text.contains("changed before the failure and stay changed:\nA made.txt\n"),
        "{text}"
    );
    assert!(
        text.contains("Not applied: hunk 3 (*** Delete File: later.txt)"),
        "{text}"
    );
    assert_eq!(get(d, "made.txt"), "made\n");
    assert_eq!(get(d, "ro.txt"), "locked\n");
    assert_eq!(get(d, "later.txt"), "later\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_patch_takes_one_string_and_is_left_out_in_read_only_mode() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let tool = set
        .tools(&toolbelt_core::ToolContext::new())
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name() == "apply_patch")
        .expect("apply_patch is offered");
    let schema = &tool.declaration().input_schema;
    assert_eq!(schema["required"], json!(["input"]));
    assert_eq!(schema["properties"]["input"]["type"], "string");
    assert!(!tool.declaration().meta.is_read_only());

    let read_only =
        BuiltinToolSet::new(BuiltinOptions::new(dir.path()).with_read_only(true)).unwrap();
    let names: Vec<_> = read_only
        .tools(&toolbelt_core::ToolContext::new())
        .await
        .unwrap()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert!(!names.contains(&"apply_patch".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_of_one_file_each_land_under_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let original: String = (0..20).map(|i| format!("line {i}\n")).collect();
    put(d, "shared.txt", &original);
    let set = std::sync::Arc::new(set_on(d));
    read(&set, "shared.txt").await;
    // Each patch changes its own line; without the lock two would read the same content and
    // the later write would undo the earlier one.
    let calls = (0..20).map(|i| {
        let set = set.clone();
        tokio::spawn(async move {
            let body = format!("*** Update File: shared.txt\n-line {i}\n+LINE {i}\n");
            call_ok(&set, "apply_patch", patch(&body)).await;
        })
    });
    for call in futures::future::join_all(calls).await {
        call.unwrap();
    }
    let expected: String = (0..20).map(|i| format!("LINE {i}\n")).collect();
    assert_eq!(get(d, "shared.txt"), expected);
}

/// What LLGuidance (the grammar engine behind OpenAI's freeform tools, from the peers'
/// Python) says of `samples` under apply_patch's grammar, by sample name.
fn grammar_verdicts(grammar: &str, samples: &[(&str, String)]) -> Vec<(String, bool)> {
    use std::io::Write as _;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/grammar_check.py");
    let mut child = std::process::Command::new(toolbelt_testkit::python())
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    let request = json!({"grammar": grammar, "samples": samples});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the grammar check failed (run .ci/install-peers for llguidance): {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (verdict, name) = line.split_once(' ')?;
            Some((name.to_string(), verdict == "ACCEPT"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_freeform_grammar_compiles_in_llguidance_and_agrees_with_the_parser() {
    let dir = tempfile::tempdir().unwrap();
    let set = set_on(dir.path());
    let declarations = set.tools(&toolbelt_core::ToolContext::new()).await.unwrap();
    let tool = declarations
        .iter()
        .find(|t| t.declaration().name.as_str() == "apply_patch")
        .unwrap();
    let freeform = tool
        .declaration()
        .freeform
        .clone()
        .expect("apply_patch is declared freeform");
    assert_eq!(
        (freeform.argument.as_str(), freeform.syntax.as_str()),
        ("input", "lark")
    );

    let wrap = |body: &str| format!("*** Begin Patch\n{body}*** End Patch\n");
    // Canonical patches, which the parser takes and the grammar must let a model write.
    let canonical = [
        ("add", wrap("*** Add File: a.txt\n+one\n+\n+three\n")),
        ("add_empty_file", wrap("*** Add File: empty.txt\n")),
        ("delete", wrap("*** Delete File: old.txt\n")),
        (
            "update_without_at",
            wrap("*** Update File: a.txt\n one\n-two\n+2\n"),
        ),
        (
            "update_chunks",
            wrap(
                "*** Update File: src/lib.rs\n@@ fn a() {\n     x();\n-    y();\n+    z();\n@@\n-old\n+new\n",
            ),
        ),
        (
            "move_and_change",
            wrap("*** Update File: a.txt\n*** Move to: c.txt\n@@\n-a\n+b\n"),
        ),
        (
            "end_of_file",
            wrap("*** Update File: a.txt\n@@\n-last\n+final\n*** End of File\n"),
        ),
        (
            "empty_context_line",
            wrap("*** Update File: a.txt\n a\n\n-b\n+c\n"),
        ),
        (
            "unicode",
            wrap("*** Update File: ü.txt\n-“quoted” — dash\n+\"quoted\" - dash\n"),
        ),
        (
            "several_files",
            wrap(
                "*** Add File: n.txt\n+n\n*** Delete File: d.txt\n*** Update File: u.txt\n-u\n+v\n",
            ),
        ),
        (
            "no_final_newline",
            "*** Begin Patch\n*** Delete File: x\n*** End Patch".to_string(),
        ),
    ];
    // Malformed patches, which the tool refuses and the grammar must not let a model write.
    let malformed = [
        ("empty", wrap("")),
        (
            "no_begin",
            "*** Add File: a\n+x\n*** End Patch\n".to_string(),
        ),
        (
            "no_end",
            "*** Begin Patch\n*** Add File: a\n+x\n".to_string(),
        ),
        ("stray_line", wrap("rubbish\n")),
        ("add_line_without_plus", wrap("*** Add File: a\nx\n")),
        ("update_without_change", wrap("*** Update File: a\n")),
        (
            "move_without_change",
            wrap("*** Update File: a.txt\n*** Move to: b/a.txt\n"),
        ),
        ("unknown_marker", wrap("*** Rename File: a\n")),
        ("empty_path", wrap("*** Delete File: \n")),
    ];
    for (name, text) in &canonical {
        assert!(
            toolbelt_builtin::fs::patch::parse(text).is_ok(),
            "{name}: the parser takes it"
        );
    }
    for (name, text) in &malformed {
        // An empty patch parses, and the tool refuses it as having nothing to change.
        assert!(
            toolbelt_builtin::fs::patch::parse(text).map_or(true, |hunks| hunks.is_empty()),
            "{name}: the tool refuses it"
        );
    }
    let samples: Vec<(&str, String)> = canonical.iter().chain(&malformed).cloned().collect();
    let verdicts = grammar_verdicts(&freeform.definition, &samples);
    assert_eq!(verdicts.len(), samples.len(), "{verdicts:?}");
    for (name, accepted) in verdicts {
        let expected = canonical.iter().any(|(n, _)| *n == name);
        assert_eq!(
            accepted, expected,
            "{name}: the grammar and the parser disagree"
        );
    }
}
