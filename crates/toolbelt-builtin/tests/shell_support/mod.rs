//! Helpers shared by the shell tool tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use toolbelt_builtin::shell::{ShellConfig, ShellTools};
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolOutput};

/// Whether `pid` is gone: no such process, or a zombie (dead, waiting for its parent to reap).
pub fn process_is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                .unwrap_or("?");
            state == "Z" || state == "X"
        }
    }
}

/// Polls (bounded) until `pid` is gone; a killed process takes a moment to be torn down.
pub fn wait_until_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if process_is_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Waits (bounded) for a pid file written by a test command and reads it.
pub async fn read_pid_file(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} was never written",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The named tool of a shell tool set.
pub fn tool(shell: &ShellTools, name: &str) -> DynTool {
    shell
        .tools()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool named {name}"))
}

/// Calls a tool with JSON arguments.
pub async fn call(tool: &DynTool, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    tool.call(ToolContext::for_call("test"), &args.to_string())
        .await
}

/// A shell tool set in a fresh temp dir, with a short kill grace so tests stay fast.
pub fn shell_in(dir: &Path) -> ShellTools {
    ShellTools::new(ShellConfig::new(dir).kill_grace(Duration::from_millis(300))).unwrap()
}
