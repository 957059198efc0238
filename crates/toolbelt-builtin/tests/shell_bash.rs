//! The Bash tool against real child processes.

use crate::shell_support;

use std::time::Duration;

use serde_json::json;
use shell_support::*;
use tokio_util::sync::CancellationToken;
use toolbelt_builtin::shell::{Containment, ShellConfig, ShellTools};
use toolbelt_core::{EnvPolicy, ToolContext, ToolError};

#[tokio::test]
async fn non_zero_exit_is_a_normal_result_with_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let out = run_bash(&shell, json!({"command": "echo out; echo err >&2; exit 3"})).await;
    assert!(!out.is_error);
    assert_eq!(out.llm_text(), "out\nerr\nExit code: 3");
    assert_eq!(out.meta.unwrap()["exit_code"], 3);
}

#[tokio::test]
async fn the_exit_code_is_in_the_structured_result_its_schema_declares() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let bash = tool(&shell, "Bash");
    let schema = bash
        .declaration()
        .output_schema
        .clone()
        .expect("Bash declares an output schema");
    for command in ["exit 3", "sleep 30"] {
        let background = command.starts_with("sleep");
        let args = json!({"command": command, "run_in_background": background});
        let out = run_bash(&shell, args).await;
        let structured = out.structured.expect("a structured result");
        if background {
            assert!(structured["task_id"].is_string(), "{structured}");
        } else {
            assert_eq!(structured["exit_code"], 3);
            assert_eq!(structured["signal"], serde_json::Value::Null);
        }
        // Every field the result carries is one the schema declares.
        for key in structured.as_object().unwrap().keys() {
            assert!(
                schema["properties"].get(key).is_some(),
                "{key} is not in Bash's output schema"
            );
        }
    }
}

#[tokio::test]
async fn stdout_and_stderr_are_interleaved_in_order_of_arrival() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let command = "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done";
    let out = run_bash(&shell, json!({"command": command})).await;
    assert_eq!(
        out.llm_text(),
        "out1\nerr1\nout2\nerr2\nout3\nerr3\nout4\nerr4\nout5\nerr5\nExit code: 0"
    );
}

#[tokio::test]
async fn commands_run_in_the_base_dir_with_stdin_closed() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    // `cat` with an open stdin would wait forever; with /dev/null it ends at once.
    let out = run_bash(&shell, json!({"command": "pwd; cat; echo done"})).await;
    let expected = format!("{}\ndone\nExit code: 0", shell.base_dir().display());
    assert_eq!(out.llm_text(), expected);
}

#[tokio::test]
async fn cd_does_not_carry_over_between_calls() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let shell = shell_in(dir.path());
    let bash = tool(&shell, "Bash");
    call(&bash, json!({"command": "cd sub"})).await.unwrap();
    let out = call(&bash, json!({"command": "basename \"$PWD\""}))
        .await
        .unwrap();
    let base = shell
        .base_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert_eq!(out.llm_text(), format!("{base}\nExit code: 0"));
}

#[tokio::test]
async fn timeout_kills_the_whole_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let command = "sleep 300 & echo $! > grandchild.pid; echo started; wait";
    let out = run_bash(&shell, json!({"command": command, "timeout": 400})).await;
    assert!(out.is_error);
    assert!(
        out.llm_text().starts_with("started\n"),
        "{}",
        out.llm_text()
    );
    assert!(
        out.llm_text().contains("timed out after 400 ms"),
        "{}",
        out.llm_text()
    );
    let pid = read_pid_file(&dir.path().join("grandchild.pid")).await;
    assert!(
        process_is_gone(pid),
        "grandchild {pid} survived the timeout"
    );
}

#[tokio::test]
async fn timeout_force_kills_a_grandchild_that_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let command =
        "bash -c 'trap \"\" TERM; echo $$ > stubborn.pid; while true; do sleep 1; done' & wait";
    let out = run_bash(&shell, json!({"command": command, "timeout": 400})).await;
    assert!(out.is_error);
    let pid = read_pid_file(&dir.path().join("stubborn.pid")).await;
    assert!(
        wait_until_gone(pid),
        "SIGTERM-ignoring grandchild {pid} survived"
    );
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let bash = tool(&shell, "Bash");
    let token = CancellationToken::new();
    let ctx = ToolContext::for_call("c1").with_cancellation(token.clone());
    let args = json!({"command": "sleep 300 & echo $! > grandchild.pid; wait"}).to_string();
    let call = tokio::spawn(async move { bash.call(ctx, &args).await });
    let pid = read_pid_file(&dir.path().join("grandchild.pid")).await;
    assert!(!process_is_gone(pid));
    token.cancel();
    let result = call.await.unwrap();
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert!(
        process_is_gone(pid),
        "grandchild {pid} survived cancellation"
    );
}

#[tokio::test]
async fn dropping_a_running_call_kills_its_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let bash = tool(&shell, "Bash");
    let args = json!({"command": "sleep 300 & echo $! > grandchild.pid; wait"}).to_string();
    let call = tokio::spawn(async move { bash.call(ToolContext::new(), &args).await });
    let pid = read_pid_file(&dir.path().join("grandchild.pid")).await;
    call.abort();
    let _ = call.await;
    assert!(
        wait_until_gone(pid),
        "grandchild {pid} survived the dropped call"
    );
}

#[tokio::test]
async fn a_finished_command_leaves_no_background_job_behind() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let out = run_bash(
        &shell,
        json!({"command": "sleep 300 & echo $! > job.pid; echo launched"}),
    )
    .await;
    assert_eq!(
        out.llm_text(),
        "launched\nExit code: 0\nKilled 1 process the command left running."
    );
    assert_eq!(out.meta.unwrap()["killed_processes"], 1);
    let pid = read_pid_file(&dir.path().join("job.pid")).await;
    assert!(
        process_is_gone(pid),
        "background job {pid} outlived its call"
    );
}

#[tokio::test]
async fn long_output_is_capped_keeping_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let shell = ShellTools::new(ShellConfig::new(dir.path()).max_output_chars(1000)).unwrap();
    let out = run_bash(&shell, json!({"command": "seq 1 100000"})).await;
    let text = out.llm_text();
    assert!(text.starts_with("1\n2\n3\n"), "{}", &text[..50]);
    assert!(
        text.ends_with("99999\n100000\nExit code: 0"),
        "{}",
        &text[text.len() - 50..]
    );
    let total = (1..=100_000)
        .map(|n: u32| n.to_string().len() + 1)
        .sum::<usize>();
    assert!(
        text.contains(&format!("[{} characters omitted]", total - 1000)),
        "{text}"
    );
    assert_eq!(out.meta.unwrap()["omitted_chars"], total - 1000);
}

#[tokio::test]
async fn default_output_cap_is_30000_characters() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let out = run_bash(&shell, json!({"command": "seq 1 50000"})).await;
    let shown = out.llm_text().chars().count();
    assert!(
        (30_000..30_100).contains(&shown),
        "{shown} characters shown"
    );
}

#[tokio::test]
async fn environment_follows_the_env_policy_plus_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let shell = ShellTools::new(
        ShellConfig::new(dir.path())
            .env_policy(EnvPolicy::new().deny("HOME").set("MODE", "policy"))
            .env("TOOLBELT_GREETING", "hello")
            .env("MODE", "override"),
    )
    .unwrap();
    let command = "echo \"${HOME-unset} ${TOOLBELT_GREETING} ${MODE} ${PATH:+path-kept}\"";
    let out = run_bash(&shell, json!({"command": command})).await;
    assert_eq!(
        out.llm_text(),
        "unset hello override path-kept\nExit code: 0"
    );
}

#[tokio::test]
async fn empty_commands_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let err = call(&tool(&shell, "Bash"), json!({"command": "  "}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
}

#[tokio::test]
async fn a_missing_base_dir_is_a_clear_error() {
    let err = ShellTools::new(ShellConfig::new("/definitely/not/here")).unwrap_err();
    assert!(err.to_string().contains("/definitely/not/here"), "{err}");
}

#[tokio::test]
async fn killed_by_a_signal_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let out = run_bash(&shell, json!({"command": "kill -9 $$"})).await;
    assert_eq!(out.llm_text(), "(no output)\nKilled by signal 9");
}

#[tokio::test]
async fn zero_or_negative_timeouts_mean_the_default_and_large_ones_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let shell = ShellTools::new(
        ShellConfig::new(dir.path())
            .default_timeout(Duration::from_millis(300))
            .max_timeout(Duration::from_millis(500))
            .kill_grace(Duration::from_millis(200)),
    )
    .unwrap();
    let bash = tool(&shell, "Bash");
    for (timeout, applied) in [
        (json!(0), 300),
        (json!(-5), 300),
        (json!(null), 300),
        (json!(999_999), 500),
    ] {
        let out = call(&bash, json!({"command": "sleep 30", "timeout": timeout}))
            .await
            .unwrap();
        assert!(out.is_error);
        assert!(
            out.llm_text()
                .contains(&format!("timed out after {applied} ms")),
            "timeout {timeout}: {}",
            out.llm_text()
        );
    }
}

#[tokio::test]
async fn the_shortest_commands_run_under_both_containments() {
    // A command as short as `true` can end, with its supervisor, before the backend has
    // looked at the supervisor; that must not fail the call.
    for containment in [Containment::Cgroup, Containment::Subreaper] {
        let dir = tempfile::tempdir().unwrap();
        let shell = shell_with(dir.path(), containment, None);
        let bash = tool(&shell, "Bash");
        for _ in 0..50 {
            let out = call(&bash, json!({"command": "true"})).await.unwrap();
            assert_eq!(
                out.llm_text(),
                "(no output)\nExit code: 0",
                "{containment:?}"
            );
        }
    }
}
