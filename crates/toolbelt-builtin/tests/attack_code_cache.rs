//! Attacks on guarantee 12 (SECURITY.md): a program that swaps its output folder for a
//! symbolic link out of it (in one call and from a background thread of the persistent
//! session), and the result cache asked to serve a stale search after `execute_code` wrote
//! below it, a cached error, and one cache shared by tool sets on two base directories.

use std::path::Path;

use crate::files_support::{cache_status, cached_executor, run_code, set_on};
use serde_json::{Value, json};
use toolbelt_core::{ContentBlock, ToolContext, ToolOutput, ToolSet};
use toolbelt_exec::{Executor, ResultCache};

/// A folder outside the base holding a PNG and a text file the program must not be able to
/// return as output files.
fn outside_with_files() -> tempfile::TempDir {
    let outside = tempfile::tempdir().unwrap();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(b"OUTSIDE-SECRET-IMAGE");
    std::fs::write(outside.path().join("secret.png"), png).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "OUTSIDE SECRET").unwrap();
    outside
}

fn assert_nothing_from(out: &ToolOutput, outside: &Path) {
    let text = out.llm_text();
    assert!(
        !out.blocks
            .iter()
            .any(|b| matches!(b, ContentBlock::Image { .. })),
        "an image from outside was returned: {text}"
    );
    assert!(!text.contains("secret.png"), "{text}");
    assert!(!text.contains("secret.txt"), "{text}");
    let meta = serde_json::to_string(&out.meta).unwrap();
    assert!(
        !meta.contains(&outside.display().to_string()) && !meta.contains("secret"),
        "{meta}"
    );
}

#[tokio::test]
async fn an_output_folder_swapped_for_a_link_out_returns_nothing_from_outside() {
    let base = tempfile::tempdir().unwrap();
    let outside = outside_with_files();
    let set = set_on(base.path());
    let code = format!(
        "import os\nd = os.environ['OUTPUT_DIR']\nos.rmdir(d)\nos.symlink({:?}, d)\nprint('swapped')\n",
        outside.path().display().to_string()
    );
    let out = run_code(&set, json!({"language": "python", "code": code})).await;
    assert!(out.llm_text().contains("swapped"), "{}", out.llm_text());
    assert_nothing_from(&out, outside.path());

    // A sub-folder of the output folder that is a link out: not followed either.
    let code = format!(
        "import os\nos.symlink({:?}, os.path.join(os.environ['OUTPUT_DIR'], 'sub'))\nprint('linked')\n",
        outside.path().display().to_string()
    );
    let out = run_code(&set, json!({"language": "python", "code": code})).await;
    assert!(out.llm_text().contains("linked"), "{}", out.llm_text());
    assert_nothing_from(&out, outside.path());
}

#[tokio::test]
async fn the_session_output_folder_swapped_for_a_link_out_returns_nothing_from_outside() {
    let base = tempfile::tempdir().unwrap();
    let outside = outside_with_files();
    let set = set_on(base.path());
    // In the persistent session the folder is named by OUTPUT_DIR for this call.
    let code = format!(
        "import os\nd = os.environ.get('OUTPUT_DIR') or OUTPUT_DIR\nos.rmdir(d)\nos.symlink({:?}, d)\nprint('swapped')\n",
        outside.path().display().to_string()
    );
    let out = run_code(
        &set,
        json!({"language": "python", "session": true, "code": code}),
    )
    .await;
    assert!(out.llm_text().contains("swapped"), "{}", out.llm_text());
    assert_nothing_from(&out, outside.path());
    set.close().await.unwrap();
}

async fn invoke(executor: &Executor, name: &str, args: Value) -> ToolOutput {
    executor
        .invoke_tool(ToolContext::new(), name, &args.to_string())
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e}"))
}

#[tokio::test]
async fn a_grep_after_execute_code_wrote_deep_below_it_sees_the_write() {
    // Writes through the tools are counted per process: other tests' would make misses here.
    if !toolbelt_testkit::alone_in_a_process(
        module_path!(),
        "a_grep_after_execute_code_wrote_deep_below_it_sees_the_write",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b/c");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("notes.txt"), "nothing here\n").unwrap();
    // Old times, so the directories are cacheable.
    for path in ["a", "a/b", "a/b/c", "a/b/c/notes.txt", "."] {
        let status = std::process::Command::new("touch")
            .args(["-d", "2020-01-01"])
            .arg(dir.path().join(path))
            .status()
            .unwrap();
        assert!(status.success());
    }
    let cache = ResultCache::new();
    let executor = cached_executor([set_on(dir.path())], &cache).await;
    let grep = json!({"pattern": "NEEDLE", "output_mode": "content"});
    let first = invoke(&executor, "Grep", grep.clone()).await;
    assert!(!first.llm_text().contains("NEEDLE"), "{}", first.llm_text());
    let second = invoke(&executor, "Grep", grep.clone()).await;
    assert_eq!(
        cache_status(&second),
        Some("hit"),
        "the control: a repeat is a hit"
    );

    let code = "open('a/b/c/notes.txt', 'a').write('NEEDLE found\\n')\n";
    let out = invoke(
        &executor,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    assert!(!out.is_error, "{}", out.llm_text());
    let third = invoke(&executor, "Grep", grep).await;
    assert_ne!(cache_status(&third), Some("hit"));
    assert!(
        third.llm_text().contains("NEEDLE found"),
        "{}",
        third.llm_text()
    );
}

#[tokio::test]
async fn an_error_is_not_cached_and_base_dirs_do_not_share_entries() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    let cache = ResultCache::new();
    let executor = cached_executor([set_on(one.path())], &cache).await;
    let read = json!({"file_path": "same.txt"});
    let missing = invoke(&executor, "Read", read.clone()).await;
    assert!(missing.is_error, "{}", missing.llm_text());
    std::fs::write(one.path().join("same.txt"), "FROM ONE").unwrap();
    let found = invoke(&executor, "Read", read.clone()).await;
    assert!(
        found.llm_text().contains("FROM ONE"),
        "a cached error: {}",
        found.llm_text()
    );

    // The same relative path, the same size, mtime and ctime cannot be forced across two
    // directories, but the same cache and an identical call must still never cross them.
    std::fs::write(two.path().join("same.txt"), "FROM TWO").unwrap();
    let other = cached_executor([set_on(two.path())], &cache).await;
    let from_two = invoke(&other, "Read", read.clone()).await;
    assert!(
        from_two.llm_text().contains("FROM TWO"),
        "{}",
        from_two.llm_text()
    );
    assert_ne!(cache_status(&from_two), Some("hit"));
}
