//! Helpers for the browser tests: Chromium, page servers on loopback, tool calls and /proc.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use toolbelt_browser::{BrowserOptions, BrowserToolSet};
use toolbelt_builtin::web::AddressPolicy;
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolOutput, ToolSet};

/// The Chromium the tests drive; fails loudly with the install hint when it is missing.
pub fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLBELT_CHROMIUM") {
        return PathBuf::from(path);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(dir) = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .find(|dir| dir.join(name).is_file())
        {
            return dir.join(name);
        }
    }
    panic!("no Chromium found: run `bash .ci/install-peers` (it runs apt-get install chromium)");
}

/// Options for pages on 127.0.0.1 only (every other private address stays refused).
pub fn loopback_options() -> BrowserOptions {
    BrowserOptions::default()
        .with_chromium(chromium())
        .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap()))
}

/// Serves `router` on `ip`, port chosen by the kernel; returns the base URL (no trailing /).
pub async fn serve(router: Router, ip: &str) -> String {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("http://{addr}")
}

/// A server on 127.0.0.2 that counts every request it gets (any path).
pub async fn counting_server() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let router = Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            ([("access-control-allow-origin", "*")], "internal secret")
        }
    });
    (serve(router, "127.0.0.2").await, hits)
}

/// The set's tool named `name`.
pub async fn tool(set: &BrowserToolSet, name: &str) -> DynTool {
    set.tools(&ToolContext::for_call("list"))
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Calls tool `name` with JSON arguments.
pub async fn call(set: &BrowserToolSet, name: &str, args: &str) -> Result<ToolOutput, ToolError> {
    tool(set, name)
        .await
        .call(ToolContext::for_call("call"), args)
        .await
}

/// The ids of the live (not zombie) processes in process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces): state ppid pgrp ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            members.push(pid);
        }
    }
    members
}

/// Whether `pid` is a live process (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

/// Whether `pid` has exited with all its threads (a zombie whose parent can now reap it).
/// A killed process's main thread can show as a zombie while its other threads still exit.
pub fn fully_exited(pid: u32) -> bool {
    if alive(pid) {
        return false;
    }
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(true, |tasks| tasks.count() <= 1)
}

/// The `--user-data-dir` a browser process was started with.
pub fn user_data_dir(pid: u32) -> PathBuf {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    cmdline
        .split(|&b| b == 0)
        .filter_map(|arg| std::str::from_utf8(arg).ok())
        .find_map(|arg| arg.strip_prefix("--user-data-dir="))
        .map(PathBuf::from)
        .expect("the browser has a --user-data-dir")
}

/// Opens `url` with `browser_navigate`; returns the page snapshot it answers with.
pub async fn navigate(set: &BrowserToolSet, url: &str) -> String {
    let args = serde_json::json!({ "url": url }).to_string();
    call(set, "browser_navigate", &args)
        .await
        .unwrap_or_else(|e| panic!("navigating to {url}: {e}"))
        .llm_text()
}

/// Takes snapshots until `needle` shows up (the page's scripts run after its load event);
/// returns every snapshot taken, joined (each result lists the refusals since the last one).
pub async fn snapshot_until(set: &BrowserToolSet, needle: &str) -> String {
    let mut all = String::new();
    for _ in 0..300 {
        let text = call(set, "browser_snapshot", "{}")
            .await
            .unwrap()
            .llm_text();
        all.push_str(&text);
        all.push('\n');
        if text.contains(needle) {
            return all;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{needle:?} never appeared in the snapshot:\n{all}");
}
