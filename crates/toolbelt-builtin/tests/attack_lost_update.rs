//! Attacks on "no lost update": concurrent Edits through the executor, through two tool sets
//! on one directory, a same-size change with its mtime put back, and a huge file the
//! writers must refuse without reading. Every change reported as done must be in the file.

use crate::files_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use files_support::{call, call_err, call_ok, set_on};
use futures::future::join_all;
use serde_json::json;
use toolbelt_builtin::BuiltinToolSet;
use toolbelt_core::{ToolContext, ToolSet};
use toolbelt_exec::{
    BatchOptions, CallResult, ExecutionMode, Executor, Registry, ToolCall, ToolSetRefresh,
};
use toolbelt_testkit::assert_no_lost_update;

const TRIALS: usize = 50;
/// Edits per trial, one per line.
const LINES: usize = 6;

fn original_text() -> String {
    (0..LINES).map(|i| format!("line {i} original\n")).collect()
}

fn edit_args(line: usize) -> serde_json::Value {
    edit_args_in("shared.txt", line)
}

fn edit_args_in(file: &str, line: usize) -> serde_json::Value {
    json!({
        "file_path": file,
        "old_string": format!("line {line} original"),
        "new_string": format!("line {line} EDITED"),
    })
}

/// An executor over a registry holding `set` as a tool set (as `toolbelt serve` has it).
async fn executor_over(set: BuiltinToolSet) -> Executor {
    let registry = Arc::new(Registry::new());
    let set: Arc<dyn ToolSet> = Arc::new(set);
    registry
        .add_tool_set(set, ToolSetRefresh::Cached)
        .expect("add the set");
    registry
        .refresh_tool_set(&ToolContext::new(), "builtin")
        .await
        .expect("list the set");
    Executor::new(registry)
}

fn outcome(line: usize, result: &CallResult) -> (usize, bool, String) {
    (line, result.is_success(), result.model_text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_of_one_file_in_a_parallel_batch_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let executor = executor_over(set_on(dir.path())).await;
    for trial in 0..TRIALS {
        let name = format!("trial{trial}.txt");
        let file = dir.path().join(&name);
        std::fs::write(&file, original_text()).unwrap();
        let read = executor
            .invoke_tool(
                ToolContext::new(),
                "Read",
                &json!({"file_path": name}).to_string(),
            )
            .await
            .expect("Read runs");
        assert!(!read.is_error, "{}", read.llm_text());

        let calls: Vec<ToolCall> = (0..LINES)
            .map(|line| {
                let args = edit_args_in(&name, line).to_string();
                ToolCall::new(format!("e{line}"), "Edit", args)
            })
            .collect();
        let options = BatchOptions::new().mode(ExecutionMode::Parallel);
        let items = executor
            .execute_batch(&ToolContext::new(), &calls, &options)
            .await;
        let results: Vec<_> = items
            .iter()
            .enumerate()
            .map(|(line, item)| outcome(line, item.as_done().expect("executed")))
            .collect();
        let landed = assert_no_lost_update(&file, &results);
        assert_eq!(landed, LINES, "trial {trial}: {results:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_of_one_file_sent_at_once_as_separate_requests_all_land() {
    // What `toolbelt serve` does with pipelined requests: one `execute` per request, all
    // running at once on a multi-threaded runtime.
    let dir = tempfile::tempdir().unwrap();
    let executor = executor_over(set_on(dir.path())).await;
    for trial in 0..TRIALS {
        let name = format!("trial{trial}.txt");
        let file = dir.path().join(&name);
        std::fs::write(&file, original_text()).unwrap();
        let read = ToolCall::new("r", "Read", json!({"file_path": name}).to_string());
        assert!(
            executor
                .execute(ToolContext::new(), &read)
                .await
                .is_success()
        );

        let requests = (0..LINES).map(|line| {
            let executor = executor.clone();
            let args = edit_args_in(&name, line).to_string();
            tokio::spawn(async move {
                let call = ToolCall::new(format!("e{line}"), "Edit", args);
                let result = executor.execute(ToolContext::new(), &call).await;
                outcome(line, &result)
            })
        });
        let results: Vec<_> = tokio::time::timeout(Duration::from_secs(60), join_all(requests))
            .await
            .expect("the requests finish")
            .into_iter()
            .map(|joined| joined.expect("no panic"))
            .collect();
        let landed = assert_no_lost_update(&file, &results);
        assert_eq!(landed, LINES, "trial {trial}: {results:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_tool_sets_on_one_directory_never_both_overwrite_a_file() {
    // Two sessions (two sets, two read states) Read the same file, then Edit different
    // lines at once. The per-file lock makes check-and-write one step: the second writer
    // sees content it did not read and is refused, never silently overwrites.
    let dir = tempfile::tempdir().unwrap();
    let sets: Vec<Arc<BuiltinToolSet>> = (0..2).map(|_| Arc::new(set_on(dir.path()))).collect();
    for trial in 0..TRIALS {
        let name = format!("trial{trial}.txt");
        let file = dir.path().join(&name);
        std::fs::write(&file, original_text()).unwrap();
        for set in &sets {
            call_ok(set, "Read", json!({"file_path": name})).await;
        }
        let edits = sets.iter().enumerate().map(|(line, set)| {
            let set = set.clone();
            let args = edit_args_in(&name, line);
            tokio::spawn(async move {
                let out = call(&set, "Edit", args).await;
                (line, !out.is_error, out.llm_text())
            })
        });
        let results: Vec<_> = join_all(edits)
            .await
            .into_iter()
            .map(|joined| joined.expect("no panic"))
            .collect();
        let landed = assert_no_lost_update(&file, &results);
        assert_eq!(
            landed, 1,
            "trial {trial}: exactly one of two writers that read the same content lands: \
             {results:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_same_size_change_with_its_mtime_put_back_is_refused() {
    for (tool, args) in [
        ("Edit", edit_args(2)),
        (
            "Write",
            json!({"file_path": "shared.txt", "content": "replaced\n"}),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shared.txt");
        std::fs::write(&file, original_text()).unwrap();
        let set = set_on(dir.path());
        call_ok(&set, "Read", json!({"file_path": "shared.txt"})).await;

        let changed = original_text().replace("line 4 original", "line 4 ORIGINAL");
        assert_eq!(changed.len(), original_text().len());
        change_keeping_mtime(&file, &changed);

        call_err(
            &set,
            tool,
            args,
            "modified since it was read; Read it again",
        )
        .await;
        assert_eq!(std::fs::read_to_string(&file).unwrap(), changed, "{tool}");
    }

    // NotebookEdit too.
    let dir = tempfile::tempdir().unwrap();
    let notebook = dir.path().join("n.ipynb");
    let cells = |source: &str| {
        json!({"cells": [{"cell_type": "code", "id": "a", "metadata": {}, "outputs": [],
            "execution_count": null, "source": [source]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
        .to_string()
    };
    std::fs::write(&notebook, cells("x = 1")).unwrap();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "n.ipynb"})).await;
    change_keeping_mtime(&notebook, &cells("x = 2"));
    call_err(
        &set,
        "NotebookEdit",
        json!({"notebook_path": "n.ipynb", "cell_id": "a", "new_source": "y = 3"}),
        "modified since it was read",
    )
    .await;
    assert_eq!(std::fs::read_to_string(&notebook).unwrap(), cells("x = 2"));
}

/// Rewrites `file` in place with `content` and puts its modification time back.
fn change_keeping_mtime(file: &Path, content: &str) {
    let before = std::fs::metadata(file).unwrap().modified().unwrap();
    std::fs::write(file, content).unwrap();
    let handle = std::fs::File::options().write(true).open(file).unwrap();
    handle.set_modified(before).unwrap();
    drop(handle);
    assert_eq!(std::fs::metadata(file).unwrap().modified().unwrap(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn own_edits_need_no_new_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared.txt");
    std::fs::write(&file, original_text()).unwrap();
    let set = set_on(dir.path());
    call_ok(&set, "Read", json!({"file_path": "shared.txt"})).await;
    for line in 0..LINES {
        call_ok(&set, "Edit", edit_args(line)).await;
    }
    call_ok(
        &set,
        "Write",
        json!({"file_path": "shared.txt", "content": "all new\n"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "all new\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_gigabyte_file_is_refused_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["big.txt", "big.ipynb"] {
        // Sparse: no disk space used, but 2 GiB to anyone who reads it.
        let file = std::fs::File::create(dir.path().join(name)).unwrap();
        file.set_len(2 << 30).unwrap();
    }
    let set = set_on(dir.path());
    let peak_before = peak_rss_bytes();
    let attempts = [
        ("Write", json!({"file_path": "big.txt", "content": "small"})),
        (
            "Edit",
            json!({"file_path": "big.txt", "old_string": "a", "new_string": "b"}),
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "big.ipynb", "cell_id": "0", "new_source": "x"}),
        ),
    ];
    for (tool, args) in attempts {
        let message = call_err(&set, tool, args, "more than the").await;
        assert!(message.contains("2147483648 bytes"), "{message}");
    }
    let grown = peak_rss_bytes().saturating_sub(peak_before);
    assert!(
        grown < 512 << 20,
        "the peak memory grew by {grown} bytes: the file was read"
    );
    let size = std::fs::metadata(dir.path().join("big.txt")).unwrap().len();
    assert_eq!(size, 2 << 30, "the file is untouched");
}

/// The process's peak resident memory so far.
fn peak_rss_bytes() -> u64 {
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    // Linux reports kilobytes.
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}
