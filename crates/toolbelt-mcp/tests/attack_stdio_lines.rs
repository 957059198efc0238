//! Attacks on the stdio transport's reading (issue 25, item 5): a server writing a huge line
//! without a newline on stdout or stderr must not make the client keep it in memory.
//!
//! Each test runs alone in a child process of the test binary, so its peak memory (`VmHWM`)
//! is its own: 512 MiB written without a newline would raise it past 512 MiB if the line were
//! kept, and stays far below with the limits (32 MiB on stdout, 16 KiB on stderr).

use crate::common;

use std::time::Duration;

use serde_json::json;
use toolbelt_core::{ToolContext, ToolSet};
use toolbelt_mcp::{ConnectionConfig, McpToolSet, TransportConfig};

/// What the server writes without a newline.
const FLOOD_BYTES: u64 = 512 * 1024 * 1024;
/// The most the client's peak memory may reach (the process's own baseline included).
const PEAK_LIMIT_KIB: u64 = 200 * 1024;

/// This process's peak resident memory, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// A shell command writing [`FLOOD_BYTES`] of `x` without a newline.
fn flood() -> String {
    format!("head -c {FLOOD_BYTES} /dev/zero | tr '\\0' x")
}

fn sh(script: String) -> ConnectionConfig {
    ConnectionConfig::new(TransportConfig::stdio("sh", ["-c".to_string(), script]))
        .with_timeout(Duration::from_secs(60))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_stdout_line_ends_the_session_with_an_error_naming_the_limit() {
    if !toolbelt_testkit::alone_in_a_process(
        module_path!(),
        "a_huge_stdout_line_ends_the_session_with_an_error_naming_the_limit",
    ) {
        return; // The child ran the body, and passed.
    }
    let set = McpToolSet::builder("flood", sh(flood())).build().unwrap();
    let err = set
        .init(&ToolContext::new())
        .await
        .expect_err("a 512 MiB line is no JSON-RPC message");
    let text = err.to_string();
    assert!(
        text.contains("longer than the limit of 33554432 bytes on stdout"),
        "{text}"
    );
    let peak = peak_kib();
    assert!(
        peak < PEAK_LIMIT_KIB,
        "the client's peak memory reached {peak} KiB reading a line without a newline"
    );
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_stderr_line_is_cut_and_the_server_keeps_working() {
    if !toolbelt_testkit::alone_in_a_process(
        module_path!(),
        "a_huge_stderr_line_is_cut_and_the_server_keeps_working",
    ) {
        return;
    }
    // The flood first, then the real server: its handshake needs the flood drained.
    let script = format!(
        "{} >&2; printf '\\nafter the flood\\n' >&2; exec \"$0\" \"$1\" stdio",
        flood()
    );
    let config = ConnectionConfig::new(TransportConfig::stdio(
        "sh",
        [
            "-c".to_string(),
            script,
            toolbelt_testkit::python().to_string(),
            common::python_fixture().display().to_string(),
        ],
    ))
    .with_timeout(Duration::from_secs(60));
    let set = McpToolSet::builder("noisy", config).build().unwrap();
    set.init(&ToolContext::new())
        .await
        .expect("the server starts after its stderr flood");
    let out = set
        .call(
            &ToolContext::new(),
            "echo",
            json!({"message": "still here"}).as_object().cloned(),
        )
        .await
        .expect("a call after the flood");
    assert_eq!(out.llm_text(), "still here");
    let peak = peak_kib();
    assert!(
        peak < PEAK_LIMIT_KIB,
        "the client's peak memory reached {peak} KiB draining a stderr line without a newline"
    );
    set.close().await.unwrap();
}
