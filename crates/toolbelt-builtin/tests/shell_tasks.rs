//! Background tasks: Bash with run_in_background, TaskOutput and TaskStop.

use crate::shell_support;

use serde_json::json;
use shell_support::*;
use toolbelt_core::ToolSet;

fn task_id(out: &toolbelt_core::ToolOutput) -> String {
    out.meta.as_ref().unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn background_task_lifecycle_reads_new_output_then_completion() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let bash = tool(&shell, "Bash");
    let output = tool(&shell, "TaskOutput");
    // The task waits for a go file so the test controls when it finishes.
    let command = "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second; exit 4";
    let started = call(
        &bash,
        json!({"command": command, "run_in_background": true}),
    )
    .await
    .unwrap();
    let id = task_id(&started);
    assert!(started.llm_text().contains(&id));
    let log = started.meta.as_ref().unwrap()["output_file"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        log.starts_with(&shell.temp_dir().display().to_string()),
        "{log}"
    );

    // Wait until the first line is in the log, then read it without blocking.
    toolbelt_testkit::eventually_async(
        "the first line in the log",
        std::time::Duration::from_secs(10),
        || (!std::fs::read_to_string(&log).unwrap_or_default().is_empty()).then_some(()),
    )
    .await;
    let first = call(&output, json!({"task_id": id, "block": false}))
        .await
        .unwrap();
    assert_eq!(first.llm_text(), format!("Task {id}: running\nfirst"));
    assert_eq!(first.meta.as_ref().unwrap()["status"], "running");

    std::fs::write(dir.path().join("go"), "").unwrap();
    let done = call(
        &output,
        json!({"task_id": id, "block": true, "timeout": 10000}),
    )
    .await
    .unwrap();
    assert_eq!(
        done.llm_text(),
        format!("Task {id}: completed (exit code 4)\nsecond")
    );
    assert_eq!(done.meta.as_ref().unwrap()["exit_code"], 4);

    let again = call(&output, json!({"task_id": id})).await.unwrap();
    assert_eq!(
        again.llm_text(),
        format!("Task {id}: completed (exit code 4)\n(no new output)")
    );
}

#[tokio::test]
async fn task_stop_kills_the_task_tree_and_refuses_a_second_stop() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let command = "sleep 300 & echo $! > grandchild.pid; echo up; wait";
    let started = run_bash(
        &shell,
        json!({"command": command, "run_in_background": true}),
    )
    .await;
    let id = task_id(&started);
    let pid = read_pid_file(&dir.path().join("grandchild.pid")).await;

    let stopped = call(&tool(&shell, "TaskStop"), json!({"task_id": id}))
        .await
        .unwrap();
    assert!(
        stopped
            .llm_text()
            .starts_with(&format!("Stopped task {id}"))
    );
    assert!(process_is_gone(pid), "grandchild {pid} survived TaskStop");

    let status = call(&tool(&shell, "TaskOutput"), json!({"task_id": id}))
        .await
        .unwrap();
    assert_eq!(status.llm_text(), format!("Task {id}: killed\nup"));

    let err = call(&tool(&shell, "TaskStop"), json!({"task_id": id}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is not running"), "{err}");
}

#[tokio::test]
async fn stopping_a_finished_task_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let started = run_bash(
        &shell,
        json!({"command": "true", "run_in_background": true}),
    )
    .await;
    let id = task_id(&started);
    call(
        &tool(&shell, "TaskOutput"),
        json!({"task_id": id, "block": true}),
    )
    .await
    .unwrap();
    let err = call(&tool(&shell, "TaskStop"), json!({"task_id": id}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "task {id} is not running: it has already completed (exit code 0); nothing to stop"
        )
    );
}

#[tokio::test]
async fn unknown_task_ids_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let err = call(&tool(&shell, "TaskOutput"), json!({"task_id": "task_99"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no background task with id \"task_99\""),
        "{err}"
    );
    run_bash(
        &shell,
        json!({"command": "true", "run_in_background": true}),
    )
    .await;
    let err = call(&tool(&shell, "TaskStop"), json!({"task_id": "nope"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("known tasks: task_1"), "{err}");
}

#[tokio::test]
async fn a_non_blocking_read_of_a_quiet_task_returns_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let started = run_bash(
        &shell,
        json!({"command": "sleep 300", "run_in_background": true}),
    )
    .await;
    let id = task_id(&started);
    let out = call(
        &tool(&shell, "TaskOutput"),
        json!({"task_id": id, "block": false}),
    )
    .await
    .unwrap();
    assert_eq!(
        out.llm_text(),
        format!("Task {id}: running\n(no new output)")
    );
    let waited = call(
        &tool(&shell, "TaskOutput"),
        json!({"task_id": id, "timeout": 50}),
    )
    .await
    .unwrap();
    assert_eq!(waited.meta.as_ref().unwrap()["status"], "running");
    shell.close().await;
}

#[tokio::test]
async fn closing_the_tool_set_kills_every_task_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    let bash = tool(&shell, "Bash");
    for name in ["a", "b"] {
        let command = format!("sleep 300 & echo $! > {name}.pid; wait");
        call(
            &bash,
            json!({"command": command, "run_in_background": true}),
        )
        .await
        .unwrap();
    }
    let a = read_pid_file(&dir.path().join("a.pid")).await;
    let b = read_pid_file(&dir.path().join("b.pid")).await;
    ToolSet::close(&shell).await.unwrap();
    assert!(
        process_is_gone(a) && process_is_gone(b),
        "a task survived close"
    );
    let status = call(&tool(&shell, "TaskOutput"), json!({"task_id": "task_1"}))
        .await
        .unwrap();
    assert_eq!(status.meta.as_ref().unwrap()["status"], "killed");
    let err = call(&bash, json!({"command": "true", "run_in_background": true}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    ToolSet::close(&shell).await.unwrap();
}

#[tokio::test]
async fn dropping_the_tool_set_kills_its_tasks_as_a_backstop() {
    let dir = tempfile::tempdir().unwrap();
    let shell = shell_in(dir.path());
    run_bash(
        &shell,
        json!({"command": "sleep 300 & echo $! > a.pid; wait", "run_in_background": true}),
    )
    .await;
    let pid = read_pid_file(&dir.path().join("a.pid")).await;
    drop(shell);
    assert!(wait_until_gone(pid), "task {pid} survived dropping the set");
}
