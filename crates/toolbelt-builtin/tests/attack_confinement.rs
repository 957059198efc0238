//! Attacks on confinement, through the tools as a model calls them (issue 13, items 1, 2 and
//! part of 9): `x/../lnk` and `nonexist/../lnk` against every tool that takes a path and
//! against the walks of Glob and Grep, on both search backends; absolute symlinks inside and
//! outside; a swap race flipping a directory and a file between real entries and symlinks to
//! outside while hundreds of Grep, Read and Glob calls run; a trailing slash on a file; Write
//! as root keeping no setuid bit and refusing read-only files; hostile pattern sizes.
//!
//! "Outside" always holds a marker string and a file name that appear nowhere in the base:
//! an attack succeeds if either shows up in any result.

mod files_support;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use files_support::{call, call_err, call_ok};
use serde_json::{Value, json};
use toolbelt_builtin::search::{ExternalSearch, LocalSearch};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ToolOutput;

const MARKER: &str = "OUTSIDE-MARKER-5d41402abc";
const OUTSIDE_NAME: &str = "only-outside-name.txt";
const OUTSIDE: &str = "path is outside the base directory";

struct Layout {
    _root: tempfile::TempDir,
    base: PathBuf,
    outside: PathBuf,
}

/// `root/base` (confined to) with `x/`, `sub/ok.txt`, `file.txt` and `lnk -> ../outside`;
/// `root/outside` with the marker in `secret.txt` and in a file with an outside-only name.
fn layout() -> Layout {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("base");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(base.join("x")).unwrap();
    std::fs::create_dir_all(base.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{MARKER} secret\n")).unwrap();
    std::fs::write(outside.join(OUTSIDE_NAME), format!("{MARKER} named\n")).unwrap();
    std::fs::write(base.join("sub/ok.txt"), "inside ok\n").unwrap();
    std::fs::write(base.join("file.txt"), "inside file\n").unwrap();
    symlink("../outside", base.join("lnk")).unwrap();
    Layout {
        _root: root,
        base,
        outside,
    }
}

/// The outside directory's names and contents, to prove nothing there changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    entries.sort();
    entries
}

/// A tool set on `base` with the in-process search, or with rg and fd.
fn set_with(base: &Path, external: bool) -> BuiltinToolSet {
    let options = BuiltinOptions::new(base);
    let options = if external {
        let backend = ExternalSearch::detect(base)
            .expect("rg and fd under Landlock (install ripgrep and fd-find; Linux 5.13+)");
        options.with_search_backend(Arc::new(backend))
    } else {
        options.with_search_backend(Arc::new(LocalSearch::new(base).unwrap()))
    };
    BuiltinToolSet::new(options).unwrap()
}

/// Everything a result shows: the model's text, the user's text and the structured data.
fn shown(out: &ToolOutput) -> String {
    format!(
        "{}\n{}\n{}",
        out.llm_text(),
        out.user_text(),
        out.structured
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default()
    )
}

/// Fails if a result shows outside bytes or names.
fn assert_clean(what: &str, out: &ToolOutput) {
    let text = shown(out);
    assert!(
        !text.contains(MARKER),
        "{what} leaked outside content: {text}"
    );
    assert!(
        !text.contains(OUTSIDE_NAME),
        "{what} leaked an outside name: {text}"
    );
}

/// Runs a call and checks its result is clean; returns it.
async fn attack(set: &BuiltinToolSet, tool: &str, args: Value) -> ToolOutput {
    let out = call(set, tool, args.clone()).await;
    assert_clean(&format!("{tool} {args}"), &out);
    out
}

const ESCAPES: &[&str] = &[
    "lnk",
    "x/../lnk",
    "nonexist/../lnk",
    "./x/../lnk",
    "x/../x/../lnk",
];

#[tokio::test(flavor = "multi_thread")]
async fn dot_dot_escapes_fail_for_every_tool_that_takes_a_path_on_both_backends() {
    let l = layout();
    let before = snapshot(&l.outside);
    for external in [false, true] {
        let set = set_with(&l.base, external);
        for escape in ESCAPES {
            let file = format!("{escape}/secret.txt");
            let new = format!("{escape}/planted.txt");
            let out = attack(&set, "Read", json!({"file_path": file})).await;
            assert!(out.is_error, "Read {file} must fail");
            let out = attack(&set, "Write", json!({"file_path": new, "content": "x"})).await;
            assert!(out.is_error, "Write {new} must fail");
            let out = attack(
                &set,
                "Edit",
                json!({"file_path": new, "old_string": "", "new_string": "x"}),
            )
            .await;
            assert!(out.is_error, "Edit {new} must fail");
            let notebook = format!("{escape}/planted.ipynb");
            let out = attack(
                &set,
                "NotebookEdit",
                json!({"notebook_path": notebook, "new_source": "x", "edit_mode": "insert",
                       "cell_type": "code"}),
            )
            .await;
            assert!(out.is_error, "NotebookEdit {notebook} must fail");
            for mode in ["content", "files_with_matches", "count"] {
                let args = json!({"pattern": MARKER, "path": escape, "output_mode": mode});
                let out = attack(&set, "Grep", args).await;
                assert!(out.is_error, "Grep path {escape} must fail");
                let args = json!({"pattern": MARKER, "path": file, "output_mode": mode});
                let out = attack(&set, "Grep", args).await;
                assert!(out.is_error, "Grep path {file} must fail");
            }
            let out = attack(&set, "Glob", json!({"pattern": "**/*", "path": escape})).await;
            assert!(out.is_error, "Glob path {escape} must fail");
        }
        // The walks from the base meet `lnk` and skip it, saying so.
        let out = attack(
            &set,
            "Grep",
            json!({"pattern": "secret|named|inside", "output_mode": "content"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.llm_text());
        assert!(out.llm_text().contains("sub/ok.txt:1:inside ok"));
        assert!(
            out.llm_text()
                .contains("skipped 1 symlink pointing outside the base directory"),
            "external={external}: {}",
            out.llm_text()
        );
        let out = attack(&set, "Glob", json!({"pattern": "**/*"})).await;
        assert!(out.llm_text().contains("sub/ok.txt"));
        assert!(
            out.llm_text()
                .contains("skipped 1 symlink pointing outside the base directory"),
            "external={external}: {}",
            out.llm_text()
        );
    }
    assert_eq!(snapshot(&l.outside), before, "nothing outside may change");
}

#[tokio::test(flavor = "multi_thread")]
async fn dot_dot_after_a_missing_directory_is_not_found_as_for_the_kernel() {
    let l = layout();
    let set = set_with(&l.base, false);
    // `nonexist/..` does not lexically collapse: the kernel says ENOENT, and so do the tools.
    call_err(
        &set,
        "Read",
        json!({"file_path": "nonexist/../file.txt"}),
        "No such file or directory",
    )
    .await;
    call_err(
        &set,
        "Write",
        json!({"file_path": "nonexist/../new.txt", "content": "x"}),
        "No such file or directory",
    )
    .await;
    assert!(!l.base.join("nonexist").exists(), "no directory is created");
    assert!(!l.base.join("new.txt").exists());
    // Through an existing directory, `..` is physical and works.
    let out = call_ok(&set, "Read", json!({"file_path": "x/../file.txt"})).await;
    assert!(out.llm_text().contains("inside file"));
}

#[tokio::test(flavor = "multi_thread")]
async fn absolute_symlinks_inside_are_followed_and_outside_ones_refused_or_skipped() {
    let l = layout();
    std::fs::remove_file(l.base.join("lnk")).unwrap();
    symlink(l.base.join("sub"), l.base.join("abs_in")).unwrap();
    symlink(l.base.join("sub/ok.txt"), l.base.join("abs_file")).unwrap();
    symlink(&l.outside, l.base.join("abs_out")).unwrap();
    symlink(l.outside.join("secret.txt"), l.base.join("abs_out_file")).unwrap();
    let before = snapshot(&l.outside);
    for external in [false, true] {
        let set = set_with(&l.base, external);
        let out = call_ok(&set, "Read", json!({"file_path": "abs_in/ok.txt"})).await;
        assert!(out.llm_text().contains("inside ok"));
        let out = call_ok(&set, "Read", json!({"file_path": "abs_file"})).await;
        assert!(out.llm_text().contains("inside ok"));
        for path in ["abs_out/secret.txt", "abs_out_file"] {
            let out = attack(&set, "Read", json!({"file_path": path})).await;
            assert!(out.llm_text().contains(OUTSIDE), "{}", out.llm_text());
            let out = attack(&set, "Write", json!({"file_path": path, "content": "x"})).await;
            assert!(out.llm_text().contains(OUTSIDE), "{}", out.llm_text());
        }
        let out = attack(&set, "Grep", json!({"pattern": "x", "path": "abs_out"})).await;
        assert!(out.llm_text().contains(OUTSIDE), "{}", out.llm_text());
        // The walk follows the inside links and skips the two outside ones.
        let out = attack(
            &set,
            "Grep",
            json!({"pattern": "inside|secret", "output_mode": "content"}),
        )
        .await;
        let text = out.llm_text();
        assert!(text.contains("abs_in/ok.txt:1:inside ok"), "{text}");
        assert!(text.contains("abs_file:1:inside ok"), "{text}");
        assert!(
            text.contains("skipped 2 symlinks pointing outside the base directory"),
            "external={external}: {text}"
        );
        let out = attack(&set, "Glob", json!({"pattern": "**/ok.txt"})).await;
        assert_eq!(
            out.llm_text().lines().next(),
            Some("abs_in/ok.txt"),
            "{}",
            out.llm_text()
        );
    }
    assert_eq!(snapshot(&l.outside), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_loop_inside_the_base_ends_the_walk() {
    let l = layout();
    std::fs::remove_file(l.base.join("lnk")).unwrap();
    symlink("..", l.base.join("sub/up")).unwrap();
    symlink(".", l.base.join("here")).unwrap();
    let set = set_with(&l.base, false);
    let out = call_ok(&set, "Glob", json!({"pattern": "**/ok.txt"})).await;
    assert_eq!(out.llm_text(), "sub/ok.txt");
}

/// Swaps two directory entries atomically (`renameat2(RENAME_EXCHANGE)`).
fn exchange(dir: &Path, a: &str, b: &str) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        dir.join(a),
        rustix::fs::CWD,
        dir.join(b),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .expect("RENAME_EXCHANGE (Linux 3.15+, ext4/tmpfs/btrfs)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swap_race_never_shows_outside_bytes_or_names() {
    let l = layout();
    std::fs::remove_file(l.base.join("lnk")).unwrap();
    // `flip` is a real directory or a symlink to outside; `fflip.txt` a real file or a
    // symlink to the outside secret. Their counterparts wait under `.alt` names.
    std::fs::create_dir(l.base.join("flip")).unwrap();
    std::fs::write(l.base.join("flip/inner.txt"), "inside inner\n").unwrap();
    std::fs::write(l.base.join("flip/secret.txt"), "inside decoy\n").unwrap();
    symlink(&l.outside, l.base.join("flip.alt")).unwrap();
    std::fs::write(l.base.join("fflip.txt"), "inside fflip\n").unwrap();
    symlink(l.outside.join("secret.txt"), l.base.join("fflip.alt")).unwrap();
    // The decoy name appears inside on purpose; only the marker and outside-only name count.
    let check = |what: &str, out: &ToolOutput| {
        let text = shown(out);
        assert!(
            !text.contains(MARKER),
            "{what} leaked outside content: {text}"
        );
        assert!(!text.contains(OUTSIDE_NAME), "{what} leaked a name: {text}");
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let base = l.base.clone();
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                exchange(&base, "flip", "flip.alt");
                exchange(&base, "fflip.txt", "fflip.alt");
                flips += 1;
            }
            flips
        })
    };
    let mut calls = 0;
    let mut answered = 0;
    for external in [false, true] {
        let set = Arc::new(set_with(&l.base, external));
        let rounds = if external { 40 } else { 120 };
        let mut tasks = Vec::new();
        for round in 0..rounds {
            let set = set.clone();
            tasks.push(tokio::spawn(async move {
                let calls: [(&str, Value); 6] = [
                    (
                        "Grep",
                        json!({"pattern": "inside|OUTSIDE", "output_mode": "content",
                               "head_limit": 0}),
                    ),
                    (
                        "Grep",
                        json!({"pattern": "inside|OUTSIDE", "path": "flip",
                               "output_mode": "content"}),
                    ),
                    ("Read", json!({"file_path": "flip/inner.txt"})),
                    ("Read", json!({"file_path": "fflip.txt"})),
                    ("Glob", json!({"pattern": "**/*"})),
                    ("Glob", json!({"pattern": "*", "path": "flip"})),
                ];
                let mut outs = Vec::new();
                for (tool, args) in calls {
                    let out = call(&set, tool, args.clone()).await;
                    outs.push((format!("round {round}: {tool} {args}"), out));
                }
                outs
            }));
        }
        for task in tasks {
            for (what, out) in task.await.unwrap() {
                check(&what, &out);
                calls += 1;
                if out.is_error {
                    // A walk skips what the race turns into an outside link; a single path
                    // that is an outside link at that moment is refused as such.
                    assert!(
                        !what.contains("\"**/*\"") && !what.contains("head_limit"),
                        "{what}: a walk failed: {}",
                        out.llm_text()
                    );
                    assert!(
                        out.llm_text().contains(OUTSIDE),
                        "{what}: {}",
                        out.llm_text()
                    );
                } else {
                    answered += 1;
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(calls >= 960, "{calls} calls");
    assert!(flips > 10, "the race ran ({flips} flips)");
    assert!(answered > 0, "no call answered");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trailing_slash_on_a_file_is_an_error_for_every_tool() {
    let l = layout();
    for external in [false, true] {
        let set = set_with(&l.base, external);
        call_err(
            &set,
            "Read",
            json!({"file_path": "file.txt/"}),
            "Not a directory",
        )
        .await;
        call_err(
            &set,
            "Write",
            json!({"file_path": "file.txt/", "content": "clobbered"}),
            "Not a directory",
        )
        .await;
        call_err(
            &set,
            "Edit",
            json!({"file_path": "file.txt/", "old_string": "inside", "new_string": "x"}),
            "Not a directory",
        )
        .await;
        call_err(
            &set,
            "Grep",
            json!({"pattern": "inside", "path": "file.txt/"}),
            "Not a directory",
        )
        .await;
        call_err(
            &set,
            "Glob",
            json!({"pattern": "*", "path": "file.txt/"}),
            "Not a directory",
        )
        .await;
    }
    assert_eq!(
        std::fs::read_to_string(l.base.join("file.txt")).unwrap(),
        "inside file\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn write_never_leaves_a_setuid_or_setgid_file() {
    let l = layout();
    let set = set_with(&l.base, false);
    for (name, mode) in [
        ("suid.sh", 0o4755),
        ("sgid.sh", 0o2755),
        ("both.sh", 0o6775),
    ] {
        let path = l.base.join(name);
        std::fs::write(&path, "#!/bin/sh\necho old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            mode,
            "the fixture has its bits"
        );
        call_ok(&set, "Read", json!({"file_path": name})).await;
        call_ok(
            &set,
            "Write",
            json!({"file_path": name, "content": "#!/bin/sh\nid\n"}),
        )
        .await;
        let after = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(after, mode & 0o777, "{name}: {after:o}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "#!/bin/sh\nid\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn write_and_edit_refuse_a_read_only_file_and_leave_no_temp_file() {
    let l = layout();
    let set = set_with(&l.base, false);
    let path = l.base.join("locked.txt");
    std::fs::write(&path, "keep me\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    call_ok(&set, "Read", json!({"file_path": "locked.txt"})).await;
    call_err(
        &set,
        "Write",
        json!({"file_path": "locked.txt", "content": "replaced"}),
        "file is read-only",
    )
    .await;
    call_err(
        &set,
        "Edit",
        json!({"file_path": "locked.txt", "old_string": "keep", "new_string": "lose"}),
        "file is read-only",
    )
    .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me\n");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o444
    );
    let leftovers: Vec<String> = std::fs::read_dir(&l.base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("toolbelt-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_patterns_get_a_short_clear_error_on_both_backends() {
    let l = layout();
    let huge_glob = "*".repeat(1 << 20);
    let huge_regex = "a".repeat(1 << 20);
    // Compiles past the regex size limit although it is short.
    let expensive_regex = "\\w{1000}\\w{1000}\\w{1000}\\w{1000}";
    for external in [false, true] {
        let set = set_with(&l.base, external);
        let cases = [
            ("Glob", json!({"pattern": huge_glob}), "at most 4096"),
            (
                "Grep",
                json!({"pattern": "x", "glob": huge_glob}),
                "at most 4096",
            ),
            ("Grep", json!({"pattern": huge_regex}), "at most 65536"),
            ("Grep", json!({"pattern": expensive_regex}), "invalid regex"),
        ];
        for (tool, args, needle) in cases {
            let text = call_err(&set, tool, args, needle).await;
            assert!(text.len() < 2048, "{tool}: a {}-byte message", text.len());
        }
    }
}
