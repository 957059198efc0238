//! The built-in tools under the executor's result cache: a Read hit, a write through the
//! tools or from outside making the next Read a miss with the new content, cached searches
//! invalidated by the tools' writes, and no entry shared between tool sets.

use std::process::Command;

use crate::files_support::{cache_status, cached_executor, set_on};
use serde_json::{Value, json};
use toolbelt_core::{ToolContext, ToolOutput};
use toolbelt_exec::{Executor, ResultCache};

async fn run(executor: &Executor, name: &str, args: Value) -> ToolOutput {
    let out = executor
        .invoke_tool(ToolContext::new(), name, &args.to_string())
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e}"));
    assert!(!out.is_error, "{name}: {}", out.llm_text());
    out
}

#[tokio::test]
async fn a_read_is_a_hit_until_an_edit_then_a_miss_with_the_new_content() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let cache = ResultCache::new();
    let executor = cached_executor([set_on(dir.path())], &cache).await;
    let read = json!({"file_path": "notes.txt"});

    let first = run(&executor, "Read", read.clone()).await;
    assert_eq!(cache_status(&first), Some("miss"));
    let second = run(&executor, "Read", read.clone()).await;
    assert_eq!(cache_status(&second), Some("hit"));
    assert_eq!(second.llm_text(), first.llm_text());

    let edit = json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "gamma"});
    let edited = run(&executor, "Edit", edit).await;
    assert_eq!(cache_status(&edited), None, "Edit is not cached");

    let third = run(&executor, "Read", read.clone()).await;
    assert_eq!(cache_status(&third), Some("miss"));
    assert!(third.llm_text().contains("gamma"), "{}", third.llm_text());
    assert!(!third.llm_text().contains("beta"));
    // The Read that was a hit still counts as the full read Edit needs: a second Edit passes.
    let again = json!({"file_path": "notes.txt", "old_string": "gamma", "new_string": "delta"});
    run(&executor, "Edit", again).await;
}

#[tokio::test]
async fn a_file_touched_from_outside_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "one\n").unwrap();
    let cache = ResultCache::new();
    let executor = cached_executor([set_on(dir.path())], &cache).await;
    let read = json!({"file_path": "data.txt"});

    run(&executor, "Read", read.clone()).await;
    assert_eq!(
        cache_status(&run(&executor, "Read", read.clone()).await),
        Some("hit")
    );

    let touched = Command::new("touch")
        .args(["-d", "2001-02-03 04:05:06"])
        .arg(&file)
        .status()
        .expect("run touch");
    assert!(touched.success());
    let after = run(&executor, "Read", read.clone()).await;
    assert_eq!(
        cache_status(&after),
        Some("miss"),
        "a new mtime is a new fingerprint"
    );
}

#[tokio::test]
async fn a_same_size_rewrite_with_the_old_mtime_put_back_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "old!\n").unwrap();
    // An mtime far in the past: the file is not young, so only stat fields are compared.
    let set_old = || {
        let status = Command::new("touch")
            .args(["-d", "2001-02-03 04:05:06"])
            .arg(&file)
            .status()
            .expect("run touch");
        assert!(status.success());
    };
    set_old();
    let cache = ResultCache::new();
    let executor = cached_executor([set_on(dir.path())], &cache).await;
    let read = json!({"file_path": "data.txt"});
    run(&executor, "Read", read.clone()).await;
    assert_eq!(
        cache_status(&run(&executor, "Read", read.clone()).await),
        Some("hit")
    );

    std::fs::write(&file, "new!\n").unwrap();
    set_old();
    let after = run(&executor, "Read", read.clone()).await;
    assert_eq!(cache_status(&after), Some("miss"), "the change time moved");
    assert!(after.llm_text().contains("new!"), "{}", after.llm_text());
}

#[tokio::test]
async fn a_cached_grep_is_a_miss_after_a_write_through_the_tools() {
    // Writes through the tools are counted per process: other tests' would make misses here.
    if !toolbelt_testkit::alone_in_a_process(
        module_path!(),
        "a_cached_grep_is_a_miss_after_a_write_through_the_tools",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.txt"), "needle\n").unwrap();
    std::fs::write(dir.path().join("src/b.txt"), "hay\n").unwrap();
    // A directory changed within the last two seconds is not cached: age it.
    for path in ["src", "."] {
        let status = Command::new("touch")
            .args(["-d", "2001-02-03 04:05:06"])
            .arg(dir.path().join(path))
            .status()
            .expect("run touch");
        assert!(status.success());
    }
    let cache = ResultCache::new();
    let executor = cached_executor([set_on(dir.path())], &cache).await;
    let grep = json!({"pattern": "needle", "path": "src"});

    let first = run(&executor, "Grep", grep.clone()).await;
    assert_eq!(cache_status(&first), Some("miss"));
    assert_eq!(
        cache_status(&run(&executor, "Grep", grep.clone()).await),
        Some("hit")
    );

    // A Bash command that changes b.txt in place leaves the directory's entries (and so its
    // fingerprint) alone: only the count of writes through the tools can tell.
    run(
        &executor,
        "Bash",
        json!({"command": "echo needle >> src/b.txt"}),
    )
    .await;
    let after_bash = run(&executor, "Grep", grep.clone()).await;
    assert_eq!(cache_status(&after_bash), Some("miss"));
    assert!(
        after_bash.llm_text().contains("b.txt"),
        "{}",
        after_bash.llm_text()
    );
    assert_eq!(
        cache_status(&run(&executor, "Grep", grep.clone()).await),
        Some("hit")
    );

    // So does Write (its atomic rename also makes the directory young: not cached at all
    // for two seconds).
    run(&executor, "Read", json!({"file_path": "src/a.txt"})).await;
    run(
        &executor,
        "Write",
        json!({"file_path": "src/a.txt", "content": "hay\n"}),
    )
    .await;
    let after_write = run(&executor, "Grep", grep.clone()).await;
    assert_ne!(cache_status(&after_write), Some("hit"));
    assert!(
        !after_write.llm_text().contains("a.txt"),
        "{}",
        after_write.llm_text()
    );
}

#[tokio::test]
async fn two_tool_sets_on_one_directory_never_share_an_entry() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\n").unwrap();
    let cache = ResultCache::new();
    let first = cached_executor([set_on(dir.path())], &cache).await;
    let second = cached_executor([set_on(dir.path())], &cache).await;
    let read = json!({"file_path": "notes.txt"});

    run(&first, "Read", read.clone()).await;
    let other = run(&second, "Read", read.clone()).await;
    assert_eq!(
        cache_status(&other),
        Some("miss"),
        "the second set must record its own read"
    );
    let edit = json!({"file_path": "notes.txt", "old_string": "alpha", "new_string": "beta"});
    run(&second, "Edit", edit).await;
}
