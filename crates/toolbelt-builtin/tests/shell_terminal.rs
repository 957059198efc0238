//! Terminal sessions (issue 32, item 2): `exec_command` and `write_stdin` driving a real
//! `python3 -i` and a `read -p` prompt on a pseudo-terminal; a close, an idle timeout, an
//! exit, a limit and the tool set's close, each leaving no process behind (one that called
//! `setsid` included), under both containments; the sandbox and the command policy of Bash.

use crate::shell_support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use shell_support::{call, read_pid_file, tool, wait_until_gone};
use toolbelt_builtin::shell::{CommandPolicy, Containment, SandboxMode, ShellConfig, ShellTools};
use toolbelt_core::ToolOutput;

fn shell(dir: &Path, config: impl FnOnce(ShellConfig) -> ShellConfig) -> ShellTools {
    ShellTools::new(config(
        ShellConfig::new(dir).kill_grace(Duration::from_millis(300)),
    ))
    .unwrap()
}

async fn exec(shell: &ShellTools, args: Value) -> ToolOutput {
    call(&tool(shell, "exec_command"), args.clone())
        .await
        .unwrap_or_else(|e| panic!("exec_command refused {args}: {e}"))
}

async fn write(shell: &ShellTools, args: Value) -> ToolOutput {
    call(&tool(shell, "write_stdin"), args.clone())
        .await
        .unwrap_or_else(|e| panic!("write_stdin refused {args}: {e}"))
}

fn session_id(out: &ToolOutput) -> u32 {
    let structured = out.structured.as_ref().expect("structured result");
    structured["session_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no session id in {}", out.llm_text())) as u32
}

/// The output part of a result.
fn output_of(out: &ToolOutput) -> String {
    let text = out.llm_text();
    text.split_once("Output:\n")
        .map(|(_, o)| o.to_string())
        .unwrap_or_default()
}

/// Keeps reading the session (as a model would, with empty writes) until its output so far
/// holds `needle` or its command exited; returns the last result read (`None` when `seen`
/// already held it). Bounded: fails after 20 s.
async fn read_until(
    shell: &ShellTools,
    id: u32,
    seen: &mut String,
    needle: &str,
) -> Option<ToolOutput> {
    let deadline = Instant::now() + Duration::from_secs(20);
    if seen.contains(needle) {
        return None;
    }
    loop {
        let out = write(
            shell,
            json!({"session_id": id, "chars": "", "yield_time_ms": 200}),
        )
        .await;
        assert!(!out.is_error, "{}", out.llm_text());
        seen.push_str(&output_of(&out));
        if seen.contains(needle) || out.structured.as_ref().unwrap()["running"] == false {
            return Some(out);
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never came; output so far: {seen:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_repl_is_driven_line_by_line_and_ends_with_ctrl_d() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| c);
    let out = exec(
        &shell,
        json!({"cmd": "python3 -i -q", "yield_time_ms": 300}),
    )
    .await;
    assert!(
        out.llm_text()
            .starts_with("Process running with session ID "),
        "{}",
        out.llm_text()
    );
    let id = session_id(&out);
    let mut seen = output_of(&out);
    read_until(&shell, id, &mut seen, ">>> ").await;

    let out = write(
        &shell,
        json!({"session_id": id, "chars": "x = 6 * 7\nprint(f'answer={x}')\n", "yield_time_ms": 300}),
    )
    .await;
    let mut seen = output_of(&out);
    read_until(&shell, id, &mut seen, "answer=42").await;

    // State carries over between writes, as in a terminal.
    let out = write(
        &shell,
        json!({"session_id": id, "chars": "import sys; print(sys.stdin.isatty(), x + 1)\n"}),
    )
    .await;
    let mut seen = output_of(&out);
    read_until(&shell, id, &mut seen, "True 43").await;

    let out = write(
        &shell,
        json!({"session_id": id, "chars": "\u{4}", "yield_time_ms": 5000}),
    )
    .await;
    let mut seen = output_of(&out);
    let last = if out.structured.as_ref().unwrap()["running"] == true {
        read_until(&shell, id, &mut seen, "\u{0}never")
            .await
            .unwrap()
    } else {
        out
    };
    assert!(
        last.llm_text().starts_with("Process exited with code 0"),
        "{}",
        last.llm_text()
    );
    let gone = write(&shell, json!({"session_id": id, "chars": "1\n"})).await;
    assert!(gone.is_error);
    assert!(
        gone.llm_text()
            .contains(&format!("no terminal session {id}"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_prompt_is_answered_through_write_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| c);
    let out = exec(
        &shell,
        json!({"cmd": "read -p 'Your name? ' name; echo \"hello, $name\"", "yield_time_ms": 300}),
    )
    .await;
    let id = session_id(&out);
    let mut seen = output_of(&out);
    // `read -p` prints its prompt only when stdin is a terminal.
    read_until(&shell, id, &mut seen, "Your name? ").await;
    let out = write(
        &shell,
        json!({"session_id": id, "chars": "Ada\n", "yield_time_ms": 5000}),
    )
    .await;
    let mut seen = output_of(&out);
    let mut last = out;
    if let Some(out) = read_until(&shell, id, &mut seen, "hello, Ada").await {
        last = out;
    }
    assert!(
        seen.contains("Ada\r\nhello, Ada") || seen.contains("Ada\nhello, Ada"),
        "{seen:?}"
    );
    if last.structured.as_ref().unwrap()["running"] == true {
        last = read_until(&shell, id, &mut seen, "\u{0}never")
            .await
            .unwrap();
    }
    assert!(
        last.llm_text().starts_with("Process exited with code 0"),
        "{}",
        last.llm_text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_that_exits_returns_its_code_and_output_in_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| c);
    let out = exec(
        &shell,
        json!({"cmd": "test -t 0 && test -t 1 && echo on-a-tty; exit 3", "yield_time_ms": 10000}),
    )
    .await;
    let text = out.llm_text();
    assert!(text.starts_with("Process exited with code 3"), "{text}");
    assert_eq!(output_of(&out), "on-a-tty\n");
    assert_eq!(out.structured.as_ref().unwrap()["session_id"], Value::Null);

    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = exec(&shell, json!({"cmd": "pwd", "workdir": "sub"})).await;
    assert!(
        output_of(&out).trim_end().ends_with("/sub"),
        "{}",
        out.llm_text()
    );
    let refused = call(
        &tool(&shell, "exec_command"),
        json!({"cmd": "pwd", "workdir": ".."}),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");
}

/// Starts `sleep` under `setsid` (its own session, out of the command's group) and a plain
/// one; returns the session id and both pids.
async fn start_with_setsid_child(shell: &ShellTools, dir: &Path) -> (u32, u32, u32) {
    let cmd = format!(
        "setsid sleep 300 & echo $! > {0}/escaped; echo $$ > {0}/shell; sleep 300",
        dir.display()
    );
    let out = exec(shell, json!({"cmd": cmd, "yield_time_ms": 100})).await;
    let id = session_id(&out);
    let escaped = read_pid_file(&dir.join("escaped")).await;
    let shell_pid = read_pid_file(&dir.join("shell")).await;
    (id, escaped, shell_pid)
}

async fn close_ends_every_process_including_a_setsid_one(containment: Containment) {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| c.containment(containment));
    let (id, escaped, shell_pid) = start_with_setsid_child(&shell, dir.path()).await;
    let out = write(&shell, json!({"session_id": id, "close": true})).await;
    assert!(
        out.llm_text().starts_with(&format!("Session {id} closed")),
        "{}",
        out.llm_text()
    );
    assert!(
        wait_until_gone(escaped),
        "the setsid child survived the close"
    );
    assert!(wait_until_gone(shell_pid), "the command survived the close");
}

#[tokio::test(flavor = "multi_thread")]
async fn close_ends_every_process_including_a_setsid_one_under_a_subreaper() {
    close_ends_every_process_including_a_setsid_one(Containment::Subreaper).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn close_ends_every_process_including_a_setsid_one_by_default() {
    close_ends_every_process_including_a_setsid_one(Containment::Auto).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_session_times_out_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| {
        c.terminal_idle_timeout(Duration::from_millis(400))
    });
    let (id, escaped, shell_pid) = start_with_setsid_child(&shell, dir.path()).await;
    assert!(
        wait_until_gone(escaped),
        "the setsid child outlived the idle timeout"
    );
    assert!(
        wait_until_gone(shell_pid),
        "the command outlived the idle timeout"
    );
    let out = write(&shell, json!({"session_id": id, "chars": "x"})).await;
    assert!(
        out.is_error && out.llm_text().contains("timed"),
        "{}",
        out.llm_text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_past_bashs_largest_timeout_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    // Kept busy (no idle timeout), but not past the largest timeout of a command.
    let shell = shell(dir.path(), |c| c.max_timeout(Duration::from_millis(600)));
    let (_, escaped, shell_pid) = start_with_setsid_child(&shell, dir.path()).await;
    assert!(wait_until_gone(escaped));
    assert!(wait_until_gone(shell_pid));
}

#[tokio::test(flavor = "multi_thread")]
async fn what_an_exited_command_left_running_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| c);
    // The child reports once it has its own session, and the command exits only then: a
    // terminal whose controlling process exits hangs up its foreground group (SIGHUP), which
    // a child that has not yet left it would die of.
    let cmd = format!(
        "cd {}; setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 300' & \
         while [ ! -e escaped ]; do sleep 0.02; done; echo started",
        dir.path().display()
    );
    let out = exec(&shell, json!({"cmd": cmd, "yield_time_ms": 10000})).await;
    let text = out.llm_text();
    assert!(text.starts_with("Process exited with code 0"), "{text}");
    assert!(text.contains("Ended 1 process it left running"), "{text}");
    let escaped = read_pid_file(&dir.path().join("escaped")).await;
    assert!(wait_until_gone(escaped));
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_limited_and_the_tool_set_close_ends_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| c.max_terminal_sessions(2));
    let mut pids = Vec::new();
    for i in 0..2 {
        let cmd = format!("echo $$ > {}/pid{i}; sleep 300", dir.path().display());
        let out = exec(&shell, json!({"cmd": cmd, "yield_time_ms": 50})).await;
        assert!(!out.is_error, "{}", out.llm_text());
        pids.push(read_pid_file(&dir.path().join(format!("pid{i}"))).await);
    }
    let refused = exec(&shell, json!({"cmd": "true"})).await;
    assert!(refused.is_error);
    assert!(
        refused
            .llm_text()
            .contains("2 terminal sessions are running, the limit"),
        "{}",
        refused.llm_text()
    );
    shell.close().await;
    for pid in pids {
        assert!(
            wait_until_gone(pid),
            "a session outlived the tool set's close"
        );
    }
    assert!(
        call(&tool(&shell, "exec_command"), json!({"cmd": "true"}))
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_keep_bashs_command_policy_and_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell(dir.path(), |c| {
        c.policy(CommandPolicy::new().deny("rm -rf"))
    });
    let refused = call(
        &tool(&shell, "exec_command"),
        json!({"cmd": "rm -rf /tmp/x"}),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");

    let sandboxed =
        shell_support::shell_with(dir.path(), Containment::Auto, Some(SandboxMode::ReadOnly));
    let out = exec(
        &sandboxed,
        json!({"cmd": "echo x > written.txt; echo rc=$?", "yield_time_ms": 10000}),
    )
    .await;
    assert!(output_of(&out).contains("rc=1"), "{}", out.llm_text());
    assert!(!dir.path().join("written.txt").exists());
}
