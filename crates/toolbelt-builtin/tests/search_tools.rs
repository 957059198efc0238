//! Glob and Grep on a generated tree of thousands of files: output byte-identical to
//! `rg --sort path` and `fd --glob | sort`, both backends identical, ordering and limits
//! stable across 20 runs, ignore rules, paging and errors.

use crate::files_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use files_support::{call_err, call_ok};
use serde_json::{Value, json};
use toolbelt_builtin::search::{ExternalSearch, LocalSearch};
use toolbelt_builtin::{BuiltinOptions, BuiltinToolSet};

/// Builds a git repository with ~3,000 files: nested directories whose names sort
/// differently byte-wise and component-wise (`a.txt` vs `a/`), hidden files, an ignored
/// directory, a `.git` folder with matching content, and a binary file.
fn tree() -> tempfile::TempDir {
    // An all-lowercase path: fd's smart case once made Glob case-insensitive for such
    // paths only, so a random temp name hid the difference about half the time.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = tempfile::Builder::new()
        .prefix(&format!("tb-search-{}-{n}", std::process::id()))
        .rand_bytes(0)
        .tempdir()
        .unwrap();
    assert!(
        !dir.path()
            .to_string_lossy()
            .chars()
            .any(|c| c.is_uppercase())
    );
    let root = dir.path();
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .expect("git must be installed to build the test repository");
    assert!(status.success());
    let words = [
        "alpha", "needle", "Needle", "gamma", "delta", "NEEDLE", "epsilon",
    ];
    for d in 0..30 {
        let dir_name = match d % 5 {
            0 => format!("d{d}"),
            1 => format!("d{d}.x"),
            2 => format!("D{d}-y"),
            3 => format!("d{d}_z"),
            _ => format!("sub{d}"),
        };
        for s in 0..4 {
            let sub = root.join(&dir_name).join(format!("s{s}"));
            std::fs::create_dir_all(&sub).unwrap();
            for f in 0..25 {
                let ext = ["rs", "py", "txt", "md", "js"][f % 5];
                let mut body = String::new();
                for line in 0..(5 + (d * 7 + s * 3 + f) % 40) {
                    let word = words[(d + s * 5 + f * 3 + line) % words.len()];
                    body.push_str(&format!("{word} line {line} of {d}/{s}/{f}\n"));
                    if line % 11 == 3 {
                        body.push_str("fn needle_fn() {\n    body();\n}\n");
                    }
                }
                std::fs::write(sub.join(format!("f{f}.{ext}")), body).unwrap();
            }
        }
        std::fs::write(root.join(format!("{dir_name}.txt")), "needle at the top\n").unwrap();
    }
    std::fs::write(root.join(".hidden.txt"), "needle in a hidden file\n").unwrap();
    std::fs::create_dir_all(root.join(".config")).unwrap();
    std::fs::write(root.join(".config/settings.rs"), "// needle hidden dir\n").unwrap();
    std::fs::write(root.join(".gitignore"), "ignored/\n*.log\n").unwrap();
    std::fs::create_dir_all(root.join("ignored")).unwrap();
    std::fs::write(root.join("ignored/secret.rs"), "needle ignored\n").unwrap();
    std::fs::write(root.join("debug.log"), "needle ignored log\n").unwrap();
    std::fs::write(root.join(".git/needle.rs"), "needle inside .git\n").unwrap();
    std::fs::write(root.join("binary.dat"), b"needle\x00\x01\x02 binary").unwrap();
    dir
}

fn rg() -> PathBuf {
    which("rg").expect("rg is missing: install ripgrep (`apt-get install ripgrep`)")
}

fn fd() -> PathBuf {
    which("fd")
        .or_else(|| which("fdfind"))
        .expect("fd is missing: install fd-find (`apt-get install fd-find`)")
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `rg --sort path` with the rules the tools document, plus `extra`.
fn rg_sorted(root: &Path, extra: &[&str]) -> String {
    let output = Command::new(rg())
        .args([
            "--no-config",
            "--sort",
            "path",
            "--hidden",
            "--no-require-git",
            "--with-filename",
            "--no-heading",
            "--color",
            "never",
        ])
        .args([
            "-g", "!.git", "-g", "!.hg", "-g", "!.svn", "-g", "!.bzr", "-g", "!.jj", "-g", "!.sl",
            "-g", "!_darcs",
        ])
        .args(extra)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        output.status.code() != Some(2),
        "rg failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

fn set_with(root: &Path, external: bool) -> BuiltinToolSet {
    let mut options = BuiltinOptions::new(root);
    if external {
        options = options.with_search_backend(Arc::new(ExternalSearch::detect(root).unwrap()));
    } else {
        options = options.with_search_backend(Arc::new(LocalSearch::new(root).unwrap()));
    }
    BuiltinToolSet::new(options).unwrap()
}

/// The pairs (Grep arguments, equivalent rg arguments) compared byte for byte.
fn grep_cases() -> Vec<(Value, Vec<&'static str>)> {
    vec![
        (json!({"pattern": "needle"}), vec!["-l", "-e", "needle"]),
        (
            json!({"pattern": "needle", "output_mode": "content"}),
            vec!["-n", "-e", "needle"],
        ),
        (
            json!({"pattern": "needle", "output_mode": "content", "-n": false}),
            vec!["-N", "-e", "needle"],
        ),
        (
            json!({"pattern": "ne+dle line [0-9]", "output_mode": "content", "-C": 2}),
            vec!["-n", "-C", "2", "-e", "ne+dle line [0-9]"],
        ),
        (
            json!({"pattern": "gamma", "output_mode": "content", "-A": 1, "-B": 3}),
            vec!["-n", "-A", "1", "-B", "3", "-e", "gamma"],
        ),
        (
            json!({"pattern": "needle", "-i": true, "output_mode": "count"}),
            vec!["-i", "-c", "-e", "needle"],
        ),
        (
            json!({"pattern": "needle", "glob": "*.rs", "output_mode": "content"}),
            vec!["-n", "-g", "*.rs", "-e", "needle"],
        ),
        (
            json!({"pattern": "NEEDLE", "type": "py", "output_mode": "count"}),
            vec!["-c", "-t", "py", "-e", "NEEDLE"],
        ),
        (
            json!({"pattern": "needle_fn\\(\\) \\{.*?\\}", "multiline": true, "output_mode": "content"}),
            vec![
                "-n",
                "-U",
                "--multiline-dotall",
                "-e",
                "needle_fn\\(\\) \\{.*?\\}",
            ],
        ),
        (
            json!({"pattern": "delta", "path": "d6.x", "output_mode": "content"}),
            vec!["-n", "-e", "delta", "--", "d6.x"],
        ),
    ]
}

fn grep_text(out: &toolbelt_core::ToolOutput) -> String {
    out.llm_text()
}

#[tokio::test(flavor = "multi_thread")]
async fn grep_output_is_byte_identical_to_rg_sort_path() {
    let dir = tree();
    let set = set_with(dir.path(), false);
    for (mut args, rg_args) in grep_cases() {
        args["head_limit"] = json!(0);
        let ours = grep_text(&call_ok(&set, "Grep", args.clone()).await);
        let theirs = rg_sorted(dir.path(), &rg_args);
        assert!(!theirs.is_empty(), "case {args} should match something");
        assert!(
            ours == theirs,
            "case {args}: output differs from rg --sort path\nours:\n{}\nrg:\n{}",
            head(&ours),
            head(&theirs)
        );
    }
}

fn head(text: &str) -> String {
    text.lines().take(20).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn both_backends_give_byte_identical_output() {
    let dir = tree();
    let local = set_with(dir.path(), false);
    let external = set_with(dir.path(), true);
    for (args, _) in grep_cases() {
        for paging in [
            json!({"head_limit": 0}),
            json!({}),
            json!({"head_limit": 7, "offset": 30}),
        ] {
            let mut args = args.clone();
            for (k, v) in paging.as_object().unwrap() {
                args[k] = v.clone();
            }
            let a = call_ok(&local, "Grep", args.clone()).await;
            let b = call_ok(&external, "Grep", args.clone()).await;
            assert_eq!(a.llm_text(), b.llm_text(), "Grep {args}");
            assert_eq!(a.structured, b.structured, "Grep {args}");
        }
    }
    for pattern in ["**/*.rs", "*.txt", "d1*/s2/*.{md,js}", "**/f1?.py", "**"] {
        let a = call_ok(&local, "Glob", json!({"pattern": pattern})).await;
        let b = call_ok(&external, "Glob", json!({"pattern": pattern})).await;
        assert_eq!(a.llm_text(), b.llm_text(), "Glob {pattern}");
        assert_eq!(a.structured, b.structured, "Glob {pattern}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn glob_matches_fd_glob_piped_to_sort() {
    let dir = tree();
    let root = dir.path().canonicalize().unwrap();
    let set = BuiltinToolSet::new(BuiltinOptions {
        search: toolbelt_builtin::SearchOptions {
            glob_limit: 1_000_000,
            ..Default::default()
        },
        ..BuiltinOptions::new(&root)
    })
    .unwrap();
    for pattern in ["**/*.py", "d3_z/**/f*.rs"] {
        let out = call_ok(&set, "Glob", json!({"pattern": pattern})).await;
        let output = Command::new(fd())
            .args([
                "--glob",
                "--full-path",
                "--case-sensitive",
                "--type",
                "f",
                "--hidden",
                "--color",
                "never",
                "-E",
                ".git",
                "--strip-cwd-prefix",
            ])
            .arg(format!("{}/{pattern}", root.display()))
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "fd failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut expected: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        expected.sort();
        assert!(expected.len() >= 20, "{pattern} matches many files");
        assert_eq!(out.llm_text(), expected.join("\n"), "Glob {pattern}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn grep_and_glob_selection_is_stable_across_20_runs() {
    let dir = tree();
    let set = set_with(dir.path(), false);
    let full = call_ok(
        &set,
        "Grep",
        json!({"pattern": "needle", "output_mode": "content", "head_limit": 0}),
    )
    .await
    .llm_text();
    let full_lines: Vec<&str> = full.lines().collect();
    assert!(
        full_lines.len() > 1000,
        "a big answer: {}",
        full_lines.len()
    );
    let first = call_ok(
        &set,
        "Grep",
        json!({"pattern": "needle", "output_mode": "content", "head_limit": 50, "offset": 100}),
    )
    .await;
    let text = first.llm_text();
    let shown: Vec<&str> = text.lines().take(50).collect();
    assert_eq!(
        shown,
        full_lines[100..150].to_vec(),
        "offset and limit select from the full sorted answer"
    );
    assert_eq!(
        first.structured.as_ref().unwrap()["left_out"],
        full_lines.len() - 50
    );
    let glob_first = call_ok(&set, "Glob", json!({"pattern": "**/*.md"})).await;
    assert_eq!(glob_first.structured.as_ref().unwrap()["truncated"], true);
    assert_eq!(
        glob_first.structured.as_ref().unwrap()["filenames"]
            .as_array()
            .unwrap()
            .len(),
        100
    );
    let files_first = call_ok(&set, "Grep", json!({"pattern": "needle", "head_limit": 25})).await;
    for run in 0..20 {
        let again = call_ok(
            &set,
            "Grep",
            json!({"pattern": "needle", "output_mode": "content", "head_limit": 50, "offset": 100}),
        )
        .await;
        assert_eq!(again.llm_text(), text, "Grep run {run}");
        let files = call_ok(&set, "Grep", json!({"pattern": "needle", "head_limit": 25})).await;
        assert_eq!(
            files.llm_text(),
            files_first.llm_text(),
            "Grep files run {run}"
        );
        let glob = call_ok(&set, "Glob", json!({"pattern": "**/*.md"})).await;
        assert_eq!(glob.llm_text(), glob_first.llm_text(), "Glob run {run}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn glob_results_are_byte_wise_sorted_and_limited_to_100_by_default() {
    let dir = tree();
    let set = set_with(dir.path(), false);
    let out = call_ok(&set, "Glob", json!({"pattern": "**/*.js"})).await;
    let meta = out.structured.clone().unwrap();
    let names: Vec<String> = meta["filenames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(names.len(), 100);
    assert_eq!(meta["num_files"], 600);
    assert!(
        out.llm_text()
            .contains("Results are truncated: showing the first 100 of 600 files")
    );
    assert!(
        names[0].starts_with("D12-y/"),
        "uppercase sorts first byte-wise: {}",
        names[0]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hidden_files_are_searched_while_ignored_and_vcs_paths_are_skipped() {
    let dir = tree();
    let set = set_with(dir.path(), false);
    let files = call_ok(&set, "Grep", json!({"pattern": "needle", "head_limit": 0}))
        .await
        .llm_text();
    let files: Vec<&str> = files.lines().collect();
    assert!(files.contains(&".hidden.txt"));
    assert!(files.contains(&".config/settings.rs"));
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("ignored/") || f.ends_with(".log") || f.starts_with(".git/"))
    );
    assert!(
        !files.contains(&"binary.dat"),
        "binary files are skipped as rg skips them"
    );
    let glob = call_ok(&set, "Glob", json!({"pattern": "**/*.rs", "path": "."})).await;
    let text = glob.llm_text();
    assert!(!text.contains("ignored/secret.rs") && !text.contains(".git/"));
    let with_ignored = BuiltinToolSet::new(BuiltinOptions {
        search: toolbelt_builtin::SearchOptions {
            glob_include_ignored: true,
            glob_limit: 10_000,
            ..Default::default()
        },
        ..BuiltinOptions::new(dir.path())
    })
    .unwrap();
    let all = call_ok(&with_ignored, "Glob", json!({"pattern": "**/*.rs"}))
        .await
        .llm_text();
    assert!(all.contains("ignored/secret.rs"));
    assert!(!all.contains(".git/needle.rs"), "VCS folders stay skipped");
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_regex_is_a_clear_error_with_the_regex_message() {
    let dir = tree();
    for external in [false, true] {
        let set = set_with(dir.path(), external);
        let text = call_err(&set, "Grep", json!({"pattern": "foo(bar"}), "invalid regex").await;
        assert!(text.contains("unclosed group"), "{text}");
        // The pattern as the model wrote it, not as the matcher rewrote it.
        assert!(text.contains("    foo(bar\n"), "{text}");
        assert!(!text.contains("(?:"), "{text}");
        call_err(
            &set,
            "Grep",
            json!({"pattern": "x", "type": "nosuchtype"}),
            "unknown file type",
        )
        .await;
        call_err(&set, "Glob", json!({"pattern": "a[b"}), "invalid glob").await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn grep_reports_how_many_results_were_left_out() {
    let dir = tree();
    let set = set_with(dir.path(), false);
    let all = call_ok(&set, "Grep", json!({"pattern": "needle", "head_limit": 0})).await;
    let total = all.structured.as_ref().unwrap()["num_results"]
        .as_u64()
        .unwrap();
    let page = call_ok(&set, "Grep", json!({"pattern": "needle", "head_limit": 10})).await;
    let meta = page.structured.clone().unwrap();
    assert_eq!(meta["shown"], 10);
    assert_eq!(meta["left_out"].as_u64().unwrap(), total - 10);
    assert!(
        page.llm_text()
            .contains(&format!("10 of {total} results shown"))
    );
    let default = call_ok(
        &set,
        "Grep",
        json!({"pattern": "needle", "output_mode": "content"}),
    )
    .await;
    assert_eq!(
        default.structured.unwrap()["shown"],
        250,
        "head_limit defaults to 250"
    );
}
