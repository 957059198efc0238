//! Attacks on confinement, through the tools as a model calls them (issue 13, items 1, 2 and
//! part of 9): `x/../lnk` and `nonexist/../lnk` against every tool that takes a path and
//! against the walks of Glob and Grep, on both search backends; absolute symlinks inside and
//! outside; a swap race flipping a directory and a file between real entries and symlinks to
//! outside while hundreds of Grep, Read and Glob calls run; a trailing slash on a file; Write
//! as root keeping no setuid bit and refusing read-only files; hostile pattern sizes; FIFOs
//! and devices (never read, never blocking); a chain of 41 symlinks; `/proc` magic links;
//! writes through a hard link; a directory of 100,000 entries under a low open-files limit;
//! reads bounded by the limit when a file reports a false size or grows while read.
//!
//! Every attack runs on both resolvers (`kernel::` and `user_space::`, see
//! `on_both_resolvers!`), so the fallback for kernels without `openat2` is attacked too.
//!
//! "Outside" always holds a marker string and a file name that appear nowhere in the base:
//! an attack succeeds if either shows up in any result.

use crate::files_support;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use files_support::{call, call_err, call_ok};
use serde_json::{Value, json};
use toolbelt_builtin::confine::{Confinement, Resolver};
use toolbelt_builtin::fs::{FileOps, FsError, LocalFileOps};
use toolbelt_builtin::search::{ExternalSearch, LocalSearch};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt_core::ToolOutput;

/// Every attack runs twice: `kernel::NAME` on `openat2(RESOLVE_BENEATH)` (with the
/// user-space walk deciding what the kernel refuses) and `user_space::NAME` on the user-space
/// walk alone, the resolver of kernels without `openat2`.
macro_rules! on_both_resolvers {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        mod kernel {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                $(#[$attr])*
                async fn $name() {
                    super::$name(super::Resolver::Kernel).await
                }
            )*
        }
        mod user_space {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                $(#[$attr])*
                async fn $name() {
                    super::$name(super::Resolver::UserSpace).await
                }
            )*
        }
    };
}

on_both_resolvers!(
    dot_dot_escapes_fail_for_every_tool_that_takes_a_path_on_both_backends,
    dot_dot_after_a_missing_directory_is_not_found_as_for_the_kernel,
    absolute_symlinks_inside_are_followed_and_outside_ones_refused_or_skipped,
    a_symlink_loop_inside_the_base_ends_the_walk,
    a_swap_race_never_shows_outside_bytes_or_names,
    a_trailing_slash_on_a_file_is_an_error_for_every_tool,
    write_never_leaves_a_setuid_or_setgid_file,
    write_and_edit_refuse_a_read_only_file_and_leave_no_temp_file,
    huge_patterns_get_a_short_clear_error_on_both_backends,
    fifos_and_devices_are_never_read_and_never_block,
    // `tests_as_root`: set by build.rs when root builds the tests.
    #[cfg_attr(
        not(tests_as_root),
        ignore = "needs root (CAP_MKNOD) to make a device node: run the tests as root"
    )]
    a_device_inside_the_base_is_refused_by_read_and_skipped_by_the_walks,
    a_symlink_chain_longer_than_forty_is_refused_like_the_kernel_does,
    proc_magic_links_never_lead_outside,
    writes_through_a_hard_link_never_reach_the_file_outside,
    a_directory_of_100000_entries_is_walked_whole_within_the_open_files_limit,
    a_read_is_bounded_by_the_limit_not_by_the_size_the_file_reports,
    a_file_growing_while_it_is_read_is_never_returned_past_the_limit,
);

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

/// A tool set on `base` with the in-process search, or with rg and fd; its file tools, the
/// search roots and `fd`'s paths all go through one confinement using `resolver`, which is
/// checked to be the one in effect (a fallback test that ran on `openat2` would prove
/// nothing).
fn set_with(base: &Path, external: bool, resolver: Resolver) -> BuiltinToolSet {
    let confinement = Confinement::with_resolver(base, resolver).unwrap();
    assert_eq!(
        confinement.resolver(),
        resolver,
        "the resolver under test is not in effect (openat2 needs Linux 5.6+)"
    );
    let options = BuiltinOptions::new(base).with_file_ops(Arc::new(
        LocalFileOps::with_confinement(confinement.clone()),
    ));
    let options = if external {
        let backend = ExternalSearch::detect_with(confinement)
            .expect("rg and fd under Landlock (install ripgrep and fd-find; Linux 5.13+)");
        options.with_search_backend(Arc::new(backend))
    } else {
        options.with_search_backend(Arc::new(LocalSearch::with_confinement(confinement)))
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

async fn dot_dot_escapes_fail_for_every_tool_that_takes_a_path_on_both_backends(
    resolver: Resolver,
) {
    let l = layout();
    let before = snapshot(&l.outside);
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
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

async fn dot_dot_after_a_missing_directory_is_not_found_as_for_the_kernel(resolver: Resolver) {
    let l = layout();
    let set = set_with(&l.base, false, resolver);
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

async fn absolute_symlinks_inside_are_followed_and_outside_ones_refused_or_skipped(
    resolver: Resolver,
) {
    let l = layout();
    std::fs::remove_file(l.base.join("lnk")).unwrap();
    symlink(l.base.join("sub"), l.base.join("abs_in")).unwrap();
    symlink(l.base.join("sub/ok.txt"), l.base.join("abs_file")).unwrap();
    symlink(&l.outside, l.base.join("abs_out")).unwrap();
    symlink(l.outside.join("secret.txt"), l.base.join("abs_out_file")).unwrap();
    let before = snapshot(&l.outside);
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
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

async fn a_symlink_loop_inside_the_base_ends_the_walk(resolver: Resolver) {
    let l = layout();
    std::fs::remove_file(l.base.join("lnk")).unwrap();
    symlink("..", l.base.join("sub/up")).unwrap();
    symlink(".", l.base.join("here")).unwrap();
    let set = set_with(&l.base, false, resolver);
    let out = call_ok(&set, "Glob", json!({"pattern": "**/ok.txt"})).await;
    assert_eq!(out.llm_text(), "sub/ok.txt");
}

async fn a_swap_race_never_shows_outside_bytes_or_names(resolver: Resolver) {
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
    let race = toolbelt_testkit::SwapRace::start(
        &l.base,
        &[("flip", "flip.alt"), ("fflip.txt", "fflip.alt")],
    );
    let mut calls = 0;
    let mut answered = 0;
    for external in [false, true] {
        let set = Arc::new(set_with(&l.base, external, resolver));
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
    let flips = race.stop();
    assert!(calls >= 960, "{calls} calls");
    assert!(flips > 10, "the race ran ({flips} flips)");
    assert!(answered > 0, "no call answered");
}

async fn a_trailing_slash_on_a_file_is_an_error_for_every_tool(resolver: Resolver) {
    let l = layout();
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
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

async fn write_never_leaves_a_setuid_or_setgid_file(resolver: Resolver) {
    let l = layout();
    let set = set_with(&l.base, false, resolver);
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

async fn write_and_edit_refuse_a_read_only_file_and_leave_no_temp_file(resolver: Resolver) {
    let l = layout();
    let set = set_with(&l.base, false, resolver);
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

async fn huge_patterns_get_a_short_clear_error_on_both_backends(resolver: Resolver) {
    let l = layout();
    let huge_glob = "*".repeat(1 << 20);
    let huge_regex = "a".repeat(1 << 20);
    // Compiles past the regex size limit although it is short.
    let expensive_regex = "\\w{1000}\\w{1000}\\w{1000}\\w{1000}";
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
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

/// Fails the test (instead of hanging it) when a call takes longer than a generous bound;
/// first opens each FIFO for writing so a reader stuck on one is released and the runtime
/// can end.
async fn within<T>(fifos: &[PathBuf], what: &str, call: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(std::time::Duration::from_secs(60), call).await {
        Ok(out) => out,
        Err(_) => {
            for fifo in fifos {
                let _ = rustix::fs::open(
                    fifo,
                    rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK,
                    rustix::fs::Mode::empty(),
                );
            }
            panic!("{what} hung");
        }
    }
}

async fn fifos_and_devices_are_never_read_and_never_block(resolver: Resolver) {
    let l = layout();
    let fifo = l.base.join("pipe");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    symlink("pipe", l.base.join("pipe_link")).unwrap();
    let fifos = [fifo];
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
        for path in ["pipe", "pipe_link"] {
            let what = format!("Read {path} (external={external})");
            let out = within(
                &fifos,
                &what,
                call(&set, "Read", json!({"file_path": path})),
            )
            .await;
            assert!(out.is_error, "{what}: {}", out.llm_text());
            assert!(
                out.llm_text().contains("not a regular file"),
                "{what}: {}",
                out.llm_text()
            );
            for mode in ["content", "files_with_matches"] {
                let what = format!("Grep path {path} {mode} (external={external})");
                let args = json!({"pattern": "x", "path": path, "output_mode": mode});
                let out = within(&fifos, &what, call(&set, "Grep", args)).await;
                assert!(!out.is_error, "{what}: {}", out.llm_text());
            }
        }
        // The walks list the FIFO and its link and pass them by.
        let what = format!("Grep over the base (external={external})");
        let args = json!({"pattern": "inside", "output_mode": "files_with_matches"});
        let out = within(&fifos, &what, call(&set, "Grep", args)).await;
        assert!(
            out.llm_text().contains("sub/ok.txt"),
            "{what}: {}",
            out.llm_text()
        );
        let what = format!("Glob over the base (external={external})");
        let out = within(
            &fifos,
            &what,
            call(&set, "Glob", json!({"pattern": "**/*"})),
        )
        .await;
        assert!(
            !out.llm_text().contains("pipe"),
            "{what}: {}",
            out.llm_text()
        );
    }
}

async fn a_device_inside_the_base_is_refused_by_read_and_skipped_by_the_walks(resolver: Resolver) {
    let l = layout();
    // /dev/zero's numbers: endless if it were ever read.
    let zero = l.base.join("zero");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &zero,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 5),
    )
    .expect("mknod of a character device (the tests run as root with CAP_MKNOD)");
    symlink("zero", l.base.join("zero_link")).unwrap();
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
        for path in ["zero", "zero_link"] {
            let what = format!("Read {path} (external={external})");
            let out = within(&[], &what, call(&set, "Read", json!({"file_path": path}))).await;
            assert!(
                out.is_error && out.llm_text().contains("not a regular file"),
                "{what}: {}",
                out.llm_text()
            );
            let what = format!("Grep path {path} (external={external})");
            let args = json!({"pattern": "x", "path": path, "output_mode": "count"});
            let out = within(&[], &what, call(&set, "Grep", args)).await;
            assert!(!out.is_error, "{what}: {}", out.llm_text());
        }
        let what = format!("Grep over the base (external={external})");
        let args = json!({"pattern": "inside", "output_mode": "files_with_matches"});
        let out = within(&[], &what, call(&set, "Grep", args)).await;
        assert!(
            out.llm_text().contains("sub/ok.txt"),
            "{what}: {}",
            out.llm_text()
        );
    }
}

/// `c0 -> c1 -> ... -> c40 -> file.txt`: 41 links from `c0`, 40 from `c1`.
async fn a_symlink_chain_longer_than_forty_is_refused_like_the_kernel_does(resolver: Resolver) {
    let l = layout();
    std::fs::remove_file(l.base.join("lnk")).unwrap();
    std::fs::create_dir(l.base.join("chain")).unwrap();
    for i in 0..=40 {
        let target = if i == 40 {
            "../file.txt".to_string()
        } else {
            format!("c{}", i + 1)
        };
        symlink(target, l.base.join(format!("chain/c{i}"))).unwrap();
    }
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
        let out = call_ok(&set, "Read", json!({"file_path": "chain/c1"})).await;
        assert!(out.llm_text().contains("inside file"));
        call_err(
            &set,
            "Read",
            json!({"file_path": "chain/c0"}),
            "Too many levels of symbolic links",
        )
        .await;
        call_err(
            &set,
            "Write",
            json!({"file_path": "chain/c0", "content": "x"}),
            "Too many levels of symbolic links",
        )
        .await;
        call_err(
            &set,
            "Grep",
            json!({"pattern": "inside", "path": "chain/c0"}),
            "Too many levels of symbolic links",
        )
        .await;
        // The walk follows the 40 links it can and passes the 41st by.
        let args = json!({"pattern": "inside file", "path": "chain",
                          "output_mode": "files_with_matches"});
        let out = call_ok(&set, "Grep", args).await;
        let text = out.llm_text();
        let found: Vec<&str> = text.lines().collect();
        assert!(found.contains(&"chain/c1"), "{found:?}");
        assert!(!found.contains(&"chain/c0"), "{found:?}");
    }
    assert_eq!(
        std::fs::read_to_string(l.base.join("file.txt")).unwrap(),
        "inside file\n"
    );
}

/// With the base at `/proc/PID`, `fd/N`, `cwd`, `root` and `exe` are magic links: the kernel
/// would jump through them to any open file or directory. Both resolvers read them as the
/// text they show, an absolute path outside the base, and refuse or skip them.
async fn proc_magic_links_never_lead_outside(resolver: Resolver) {
    let l = layout();
    let secret = std::fs::File::open(l.outside.join("secret.txt")).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&secret);
    let proc_self = PathBuf::from(format!("/proc/{}", std::process::id()));
    let set = set_with(&proc_self, false, resolver);
    for path in [
        format!("fd/{fd}"),
        format!("task/{}/fd/{fd}", std::process::id()),
        "cwd/Cargo.toml".to_string(),
        "root/etc/hostname".to_string(),
        "exe".to_string(),
    ] {
        let out = attack(&set, "Read", json!({"file_path": path})).await;
        assert!(
            out.llm_text().contains(OUTSIDE),
            "{path}: {}",
            out.llm_text()
        );
        let args = json!({"pattern": MARKER, "path": path, "output_mode": "content"});
        let out = attack(&set, "Grep", args).await;
        assert!(
            out.llm_text().contains(OUTSIDE),
            "{path}: {}",
            out.llm_text()
        );
    }
    // A walk of `fd` meets the link to the secret and skips it, saying so.
    let args = json!({"pattern": MARKER, "path": "fd", "output_mode": "content"});
    let out = attack(&set, "Grep", args).await;
    assert!(!out.is_error, "{}", out.llm_text());
    assert!(
        out.llm_text()
            .contains("pointing outside the base directory"),
        "{}",
        out.llm_text()
    );
    drop(secret);
}

/// A hard link inside the base to a file outside is read like any file (the documented
/// limit), but Write and Edit replace the link by a new file: the outside file never changes.
async fn writes_through_a_hard_link_never_reach_the_file_outside(resolver: Resolver) {
    let l = layout();
    std::fs::hard_link(l.outside.join("secret.txt"), l.base.join("hard.txt")).unwrap();
    let before = snapshot(&l.outside);
    let set = set_with(&l.base, false, resolver);
    let out = call_ok(&set, "Read", json!({"file_path": "hard.txt"})).await;
    assert!(out.llm_text().contains(MARKER), "the documented limit");
    call_ok(
        &set,
        "Edit",
        json!({"file_path": "hard.txt", "old_string": "secret", "new_string": "edited"}),
    )
    .await;
    call_ok(&set, "Read", json!({"file_path": "hard.txt"})).await;
    call_ok(
        &set,
        "Write",
        json!({"file_path": "hard.txt", "content": "written\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(l.base.join("hard.txt")).unwrap(),
        "written\n"
    );
    assert_eq!(
        snapshot(&l.outside),
        before,
        "the outside file is untouched"
    );
}

/// Lowers this process's soft limit on open files to `limit` (never raises it); returns the
/// limit in effect.
fn cap_open_files(limit: u64) -> u64 {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut current), 0);
        if current.rlim_cur > limit {
            current.rlim_cur = limit;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &current), 0);
        }
    }
    current.rlim_cur
}

/// A directory of 100,000 entries, 20,000 of them directories: more than the process may
/// hold open at once (its soft limit is lowered to 4,096 for this). Every file is found.
async fn a_directory_of_100000_entries_is_walked_whole_within_the_open_files_limit(
    resolver: Resolver,
) {
    const DIRS: usize = 20_000;
    const FILES: usize = 80_000;
    let l = layout();
    let big = l.base.join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..DIRS {
        let dir = big.join(format!("d{i:05}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("leaf.txt"), "needle\n").unwrap();
    }
    for i in 0..FILES {
        std::fs::write(big.join(format!("f{i:05}.dat")), "").unwrap();
    }
    let limit = cap_open_files(4_096);
    assert!(limit < DIRS as u64, "the open-files limit is {limit}");
    for external in [false, true] {
        let set = set_with(&l.base, external, resolver);
        let out = call_ok(
            &set,
            "Glob",
            json!({"pattern": "**/leaf.txt", "path": "big"}),
        )
        .await;
        let structured = out.structured.as_ref().unwrap();
        assert_eq!(
            structured["num_files"],
            DIRS,
            "external={external}: {}",
            out.llm_text()
        );
        let args = json!({"pattern": "needle", "path": "big", "output_mode": "count",
                          "head_limit": 0});
        let out = call_ok(&set, "Grep", args).await;
        assert_eq!(
            out.llm_text().lines().filter(|l| l.ends_with(":1")).count(),
            DIRS,
            "external={external}"
        );
    }
}

/// Files under /proc report a size of 0 and hold more: the limit must bound what is read,
/// not the size the file claims.
async fn a_read_is_bounded_by_the_limit_not_by_the_size_the_file_reports(resolver: Resolver) {
    let proc_self = PathBuf::from(format!("/proc/{}", std::process::id()));
    let ops =
        LocalFileOps::with_confinement(Confinement::with_resolver(&proc_self, resolver).unwrap());
    let status = proc_self.join("status");
    let claimed = ops.stat(&status).await.unwrap().unwrap().size;
    assert_eq!(claimed, 0, "procfs reports no size");
    match ops.read(&status, Some(64)).await {
        Err(FsError::TooLarge { max: 64, size, .. }) => assert!(size > 64, "{size}"),
        other => panic!(
            "a 64-byte limit let through {:?}",
            other.map(|contents| contents.bytes.len())
        ),
    }
    let whole = ops.read(&status, Some(1 << 20)).await.unwrap();
    assert!(whole.bytes.len() > 64);
    assert_eq!(
        whole.stat.size,
        whole.bytes.len() as u64,
        "the size is what was read"
    );
}

/// A file that a thread keeps growing past the limit: no read ever returns more than the
/// limit, whatever the size was when it was checked.
async fn a_file_growing_while_it_is_read_is_never_returned_past_the_limit(resolver: Resolver) {
    const LIMIT: u64 = 64 * 1024;
    let l = layout();
    let path = l.base.join("growing.log");
    std::fs::write(&path, "").unwrap();
    let ops =
        LocalFileOps::with_confinement(Confinement::with_resolver(&l.base, resolver).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let path = path.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let chunk = vec![b'a'; 4096];
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                file.set_len(0).unwrap();
                for _ in 0..(4 * LIMIT / 4096) {
                    file.write_all(&chunk).unwrap();
                }
                rounds += 1;
            }
            rounds
        })
    };
    let (mut refused, mut read) = (0, 0);
    for _ in 0..3_000 {
        match ops.read(&path, Some(LIMIT)).await {
            Ok(contents) => {
                assert!(
                    contents.bytes.len() as u64 <= LIMIT,
                    "{} bytes read past the {LIMIT}-byte limit",
                    contents.bytes.len()
                );
                read += 1;
            }
            Err(FsError::TooLarge { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 1, "the file grew ({rounds} rounds)");
    assert!(read > 0 && refused > 0, "read {read}, refused {refused}");
}
