//! Issue 26: an MCP stdio server whose helpers leave its process group. The server is the
//! real Python SDK fixture behind a wrapper shell that first starts a `setsid` helper and a
//! daemon that forks twice (each writes its pid to a file). A process group cannot hold
//! either; after `close`, after the server exits on its own, and after a drop of the set,
//! neither may survive.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use toolbelt_core::{ToolContext, ToolSet};
use toolbelt_mcp::{ConnectionConfig, McpToolSet, TransportConfig};

/// The wrapper: a `setsid` helper, a double-forked daemon, then the server (not exec'd, as
/// `npx` keeps itself between).
fn escaping_server(dir: &Path) -> (ConnectionConfig, [PathBuf; 2]) {
    let setsid = dir.join("setsid.pid");
    let daemon = dir.join("daemon.pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {s}; exec sleep 300' </dev/null >/dev/null 2>&1 &
         (sh -c 'echo $$ > {d}; exec sleep 300' </dev/null >/dev/null 2>&1 &)
         '{python}' '{fixture}' stdio",
        s = setsid.display(),
        d = daemon.display(),
        python = toolbelt_testkit::python(),
        fixture = python_fixture().display(),
    );
    let config = ConnectionConfig::new(TransportConfig::stdio("sh", ["-c".to_string(), script]))
        .with_timeout(Duration::from_secs(20));
    (config, [setsid, daemon])
}

async fn connected(dir: &Path) -> (McpToolSet, [u32; 2]) {
    let (config, files) = escaping_server(dir);
    let set = McpToolSet::builder("escaping", config).build().unwrap();
    set.init(&ToolContext::new()).await.expect("connect");
    let helpers = [pid_from(&files[0]).await, pid_from(&files[1]).await];
    for pid in helpers {
        assert!(
            is_running(pid),
            "the helper {pid} runs while the server does"
        );
    }
    (set, helpers)
}

async fn assert_gone(what: &str, helpers: [u32; 2]) {
    for (kind, pid) in ["setsid helper", "double-forked daemon"]
        .iter()
        .zip(helpers)
    {
        assert!(stops_running(pid).await, "the {kind} {pid} outlived {what}");
    }
}

#[tokio::test]
async fn a_setsid_helper_and_a_daemon_of_a_stdio_server_do_not_outlive_close() {
    let dir = tempfile::tempdir().unwrap();
    let (set, helpers) = connected(dir.path()).await;
    let wrapper = set.process_id().expect("a stdio session runs");
    set.close().await.unwrap();
    assert_gone("close", helpers).await;
    assert!(
        stops_running(wrapper).await,
        "the wrapper {wrapper} outlived close"
    );
}

#[tokio::test]
async fn a_dropped_set_takes_the_setsid_helper_and_the_daemon_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (set, helpers) = connected(dir.path()).await;
    drop(set);
    assert_gone("the dropped set", helpers).await;
}
