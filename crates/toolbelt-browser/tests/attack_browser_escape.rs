//! Issue 26: a browser whose processes leave its process group. Chromium is started through a
//! wrapper script (as distributions ship it) that first starts a `setsid` helper and a daemon
//! that forks twice, each writing its pid to a file, then execs the real Chromium, which
//! starts its zygotes, renderers and utility processes. After `browser_close` and after a
//! drop of the set, no process of either kind may survive.

use crate::browser_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use browser_support::*;
use toolbelt_browser::BrowserToolSet;
use toolbelt_core::ToolSet;

/// Writes the wrapper into `dir` and returns the set that runs it.
fn escaping_browser(dir: &Path) -> BrowserToolSet {
    let wrapper = dir.join("chromium-wrapper");
    let script = format!(
        "#!/bin/sh\n\
         setsid sh -c 'echo $$ > {d}/setsid.pid; exec sleep 300' </dev/null >/dev/null 2>&1 3>&- 4>&- &\n\
         (sh -c 'echo $$ > {d}/daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 3>&- 4>&- &)\n\
         exec '{chromium}' \"$@\"\n",
        d = dir.display(),
        chromium = chromium().display(),
    );
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    BrowserToolSet::new(loopback_options().with_chromium(wrapper))
}

fn pid_in(file: &Path) -> u32 {
    let mut pid = None;
    for _ in 0..500 {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        if pid.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    pid.unwrap_or_else(|| panic!("no pid in {}", file.display()))
}

/// Opens a page and returns every process that must end with the browser: the helpers and
/// the browser's own group.
async fn started(set: &BrowserToolSet, dir: &Path) -> Vec<u32> {
    let base = serve(
        Router::new().route("/", get(|| async { Html("<title>t</title><p>hi</p>") })),
        "127.0.0.1",
    )
    .await;
    let page = navigate(set, &format!("{base}/")).await;
    assert!(page.contains("hi"), "{page}");
    let main = set.browser_pid().await.expect("a browser runs");
    let mut all = group_members(main);
    assert!(all.len() > 1, "Chromium runs several processes: {all:?}");
    for helper in ["setsid", "daemon"] {
        let pid = pid_in(&dir.join(format!("{helper}.pid")));
        assert!(
            alive(pid),
            "the {helper} helper {pid} runs with the browser"
        );
        if helper == "setsid" {
            assert!(
                !all.contains(&pid),
                "the setsid helper left the browser's group"
            );
        }
        all.push(pid);
    }
    all
}

fn assert_none_left(what: &str, pids: &[u32]) {
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running after {what}: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn browser_close_leaves_no_setsid_helper_daemon_or_chromium_process() {
    let dir = tempfile::tempdir().unwrap();
    let set = escaping_browser(dir.path());
    let pids = started(&set, dir.path()).await;
    let out = call(&set, "browser_close", "{}").await.unwrap();
    assert_eq!(out.llm_text(), "The browser was closed.");
    assert_none_left("browser_close", &pids);
    set.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_set_leaves_no_setsid_helper_daemon_or_chromium_process() {
    let dir = tempfile::tempdir().unwrap();
    let set = escaping_browser(dir.path());
    let pids = started(&set, dir.path()).await;
    drop(set);
    assert_none_left("the drop", &pids);
}
