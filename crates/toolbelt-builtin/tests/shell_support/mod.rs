//! Helpers shared by the shell tool tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use toolbelt_builtin::shell::{ShellConfig, ShellTools};
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolOutput};

/// Whether `pid` is gone: no such process, or a zombie (dead, waiting for its parent to reap).
pub fn process_is_gone(pid: u32) -> bool {
    !toolbelt_testkit::is_running(pid)
}

/// Polls (bounded) until `pid` is gone; a killed process takes a moment to be torn down.
pub fn wait_until_gone(pid: u32) -> bool {
    toolbelt_testkit::wait_until_gone(pid, Duration::from_secs(10))
}

/// Waits (bounded) for a pid file written by a test command and reads it.
pub async fn read_pid_file(path: &Path) -> u32 {
    read_pids(path, 1).await[0]
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

/// Runs the Bash tool of `shell` with JSON arguments; fails the test if the tool refuses.
pub async fn run_bash(shell: &ShellTools, args: serde_json::Value) -> ToolOutput {
    call(&tool(shell, "Bash"), args.clone())
        .await
        .unwrap_or_else(|e| panic!("Bash refused {args}: {e}"))
}

/// A shell tool set in a fresh temp dir, with a short kill grace so tests stay fast.
pub fn shell_in(dir: &Path) -> ShellTools {
    ShellTools::new(ShellConfig::new(dir).kill_grace(Duration::from_millis(300))).unwrap()
}

/// A shell tool set in `dir` with the given containment and sandbox, short kill grace.
pub fn shell_with(
    dir: &Path,
    containment: toolbelt_builtin::shell::Containment,
    sandbox: Option<toolbelt_builtin::shell::SandboxMode>,
) -> ShellTools {
    let mut config = ShellConfig::new(dir)
        .kill_grace(Duration::from_millis(300))
        .containment(containment);
    if let Some(mode) = sandbox {
        let sandbox = toolbelt_builtin::shell::LandlockSandbox::new(mode)
            .unwrap_or_else(|e| panic!("this kernel must enforce the {mode} sandbox: {e}"));
        config = config.sandbox(std::sync::Arc::new(sandbox));
    }
    ShellTools::new(config).unwrap()
}

/// Reads every pid (one per line) a test command wrote to `path`, waiting (bounded) for
/// `count` of them.
pub async fn read_pids(path: &Path, count: usize) -> Vec<u32> {
    let what = format!("{} holding {count} pids", path.display());
    toolbelt_testkit::eventually_async(what, Duration::from_secs(10), || {
        toolbelt_testkit::pids_in(path, count)
    })
    .await
}
