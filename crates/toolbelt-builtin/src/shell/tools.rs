//! The `Bash`, `TaskOutput` and `TaskStop` tools over a [`ShellState`].

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use toolbelt_core::{DynTool, FunctionTool, JsonObject, ToolContext, ToolError, ToolOutput};

use super::ShellState;
use super::output::CappedOutput;
use super::process::{Cleanup, ExitOutcome, OutputStream};
use super::tasks::TaskStatus;

/// How long output is still collected after a command and everything it started have ended
/// (a process that inherited the pipe from outside the command could keep it open).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// The default and largest wait of a blocking `TaskOutput`.
const DEFAULT_TASK_WAIT: Duration = Duration::from_millis(30_000);

/// Arguments of `Bash`.
#[derive(Debug, Deserialize, JsonSchema)]
struct BashArgs {
    /// The shell command to run (with `bash -c`, in the project directory).
    command: String,
    /// Timeout in milliseconds (default 120000, at most 600000; zero or negative means the
    /// default).
    #[serde(default)]
    timeout: Option<i64>,
    /// A short description of what the command does, in 5-10 words.
    #[serde(default)]
    description: Option<String>,
    /// Run the command in the background and return a task id at once; read its output
    /// with TaskOutput and stop it with TaskStop.
    #[serde(default)]
    run_in_background: Option<bool>,
}

/// Arguments of `TaskOutput`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TaskOutputArgs {
    /// The id of the background task (returned by Bash with run_in_background).
    #[serde(alias = "shell_id", alias = "bash_id")]
    task_id: String,
    /// Wait until the task finishes or the timeout passes (default true).
    #[serde(default)]
    block: Option<bool>,
    /// How long to wait when blocking, in milliseconds (default 30000, at most 600000).
    #[serde(default)]
    timeout: Option<i64>,
}

/// Arguments of `TaskStop`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TaskStopArgs {
    /// The id of the background task to stop.
    #[serde(alias = "shell_id", alias = "bash_id")]
    task_id: String,
}

const BASH_DESCRIPTION: &str = "Runs a bash command in the project directory and returns its \
combined stdout and stderr (long output keeps its start and end) and its exit code. A non-zero \
exit code is reported, not treated as a failure. Each call starts in the project directory: \
`cd` does not carry over, so chain commands with && instead. The command is killed, with \
everything it started, when the timeout passes (default 2 minutes, at most 10). Use \
run_in_background for servers, watchers and long builds, then TaskOutput to read their output.";

const TASK_OUTPUT_DESCRIPTION: &str = "Returns the output a background task (started by Bash \
with run_in_background) printed since the last TaskOutput call, and its status: running, \
completed with an exit code, or killed. By default waits up to `timeout` ms for the task to \
finish; pass block=false to look without waiting.";

const TASK_STOP_DESCRIPTION: &str = "Stops a running background task started by Bash with \
run_in_background, killing its whole process tree.";

/// "1 process" or "N processes".
fn processes(count: usize) -> String {
    match count {
        1 => "1 process".to_string(),
        n => format!("{n} processes"),
    }
}

/// The sentence that says what ending a command's processes did, when there is something to
/// say. `what` names the processes that were killed.
fn cleanup_note(cleanup: Cleanup, what: &str) -> Option<String> {
    let escaped = "some processes it started could not be tracked and may still be running";
    match cleanup {
        Cleanup {
            killed: 0,
            complete: true,
        } => None,
        Cleanup {
            killed,
            complete: true,
        } => Some(format!("Killed {} {what}.", processes(killed))),
        Cleanup {
            killed: 0,
            complete: false,
        } => Some(format!("Warning: {escaped}.")),
        Cleanup { killed, .. } => Some(format!(
            "Killed {} {what}; warning: {escaped}.",
            processes(killed)
        )),
    }
}

/// Builds the three tools over `state`.
pub(super) fn build(state: &Arc<ShellState>) -> Result<Vec<DynTool>, ToolError> {
    let bash_state = state.clone();
    let bash = FunctionTool::returning_output("Bash", BASH_DESCRIPTION, move |ctx, args| {
        let state = bash_state.clone();
        async move { bash(&state, ctx, args).await }
    })?
    .map_declaration(|d| d.destructive().open_world().concurrency_safe(false))
    .with_output_schema(Some(bash_output_schema()))?;

    let output_state = state.clone();
    let task_output =
        FunctionTool::returning_output("TaskOutput", TASK_OUTPUT_DESCRIPTION, move |ctx, args| {
            let state = output_state.clone();
            async move { task_output(&state, ctx, args).await }
        })?
        .map_declaration(|d| d.read_only().closed_world().concurrency_safe(true));

    let stop_state = state.clone();
    let task_stop =
        FunctionTool::returning_output("TaskStop", TASK_STOP_DESCRIPTION, move |_ctx, args| {
            let state = stop_state.clone();
            async move { task_stop(&state, args).await }
        })?
        .map_declaration(|d| d.destructive().closed_world().concurrency_safe(true));

    let mut tools: Vec<DynTool> = vec![Arc::new(bash), Arc::new(task_output), Arc::new(task_stop)];
    tools.extend(super::terminal::tools(state)?);
    Ok(tools)
}

/// A millisecond argument: zero, negative or absent means `default`; above `max` means `max`.
pub(super) fn millis_arg(value: Option<i64>, default: Duration, max: Duration) -> Duration {
    match value {
        Some(ms) if ms > 0 => Duration::from_millis(ms.unsigned_abs()).min(max),
        _ => default.min(max),
    }
}

/// Bash's structured result: the facts a program reads instead of parsing the text (an MCP
/// client gets them as `structuredContent`).
fn bash_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "exit_code": {"type": "integer", "description": "The command's exit code; absent when a signal ended it"},
            "signal": {"type": "integer", "description": "The signal that ended the command; absent when it exited"},
            "killed_processes": {"type": "integer", "description": "Processes the command left running that were killed"},
            "omitted_chars": {"type": "integer", "description": "Characters of output left out from the middle"},
            "task_id": {"type": "string", "description": "The background task's id (run_in_background)"},
            "output_file": {"type": "string", "description": "Where the background task's output goes"}
        }
    })
}

/// `output` with `facts` as both its structured result and its metadata. A fact without a value
/// is left out rather than sent as `null`: the output schema types each one without a null
/// union, as strict dialects want.
fn with_facts(mut output: ToolOutput, mut facts: JsonObject) -> ToolOutput {
    facts.retain(|_, value| !value.is_null());
    output.structured = Some(Value::Object(facts.clone()));
    output.meta = Some(facts);
    output
}

fn meta(pairs: &[(&str, Value)]) -> JsonObject {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

async fn bash(
    state: &ShellState,
    ctx: ToolContext,
    args: BashArgs,
) -> Result<ToolOutput, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::invalid_arguments("command is empty"));
    }
    if state.tasks.is_closed() {
        return Err(ToolError::failed("the shell tool set is closed"));
    }
    state.check_policy(&args.command)?;
    let _ = &args.description; // Shown to users by the UI; the command does not need it.
    if args.run_in_background.unwrap_or(false) {
        let (id, log) = state
            .tasks
            .start(state.backend.as_ref(), state.request(&args.command))
            .await
            .map_err(ToolError::failed)?;
        let text = format!(
            "Command running in the background with task id {id}. Its output goes to {}. \
             Read it with TaskOutput (task_id \"{id}\") and stop it with TaskStop.",
            log.display()
        );
        let facts = meta(&[
            ("task_id", json!(id)),
            ("output_file", json!(log.display().to_string())),
        ]);
        return Ok(with_facts(ToolOutput::text(text), facts));
    }
    let timeout = millis_arg(
        args.timeout,
        state.config.default_timeout,
        state.config.max_timeout,
    );
    run_foreground(state, &ctx, &args.command, timeout).await
}

/// How a foreground command ended.
enum Ending {
    Exited(std::io::Result<ExitOutcome>),
    TimedOut,
    Cancelled,
}

async fn read_some(stream: &mut Option<OutputStream>, buf: &mut [u8]) -> std::io::Result<usize> {
    match stream {
        Some(stream) => stream.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Reads what is left in the pipe, for at most [`DRAIN_LIMIT`].
async fn drain(stream: &mut Option<OutputStream>, output: &mut CappedOutput) {
    let Some(reader) = stream.as_mut() else {
        return;
    };
    let mut buf = vec![0u8; 16 * 1024];
    let _ = tokio::time::timeout(DRAIN_LIMIT, async {
        while let Ok(n) = reader.read(&mut buf).await {
            if n == 0 {
                break;
            }
            output.push(&buf[..n]);
        }
    })
    .await;
}

pub(super) async fn run_foreground(
    state: &ShellState,
    ctx: &ToolContext,
    command: &str,
    timeout: Duration,
) -> Result<ToolOutput, ToolError> {
    let mut process = state
        .backend
        .spawn(state.request(command))
        .await
        .map_err(|e| ToolError::failed(e.to_string()))?;
    let grace = state.config.kill_grace;
    let mut stream = process.take_output();
    let mut reading = stream.is_some();
    let mut output = CappedOutput::new(state.config.max_output_chars);
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + timeout;
    let ending = loop {
        tokio::select! {
            _ = ctx.cancelled() => break Ending::Cancelled,
            _ = tokio::time::sleep_until(deadline) => break Ending::TimedOut,
            read = read_some(&mut stream, &mut buf), if reading => match read {
                Ok(0) | Err(_) => reading = false,
                Ok(n) => output.push(&buf[..n]),
            },
            status = process.wait() => break Ending::Exited(status),
        }
    };
    match ending {
        Ending::Cancelled => {
            // Nobody reads the result of a cancelled call; just make sure nothing survives.
            let _ = process.terminate(grace).await;
            Err(ToolError::Cancelled)
        }
        Ending::TimedOut => {
            let ended = process.terminate(grace).await.ok();
            let outcome = ended.map(|(outcome, _)| outcome);
            let cleanup = ended.map_or(
                Cleanup {
                    killed: 0,
                    complete: false,
                },
                |(_, cleanup)| cleanup,
            );
            drain(&mut stream, &mut output).await;
            let rendered = output.render();
            let mut text = if rendered.text.is_empty() {
                String::new()
            } else {
                format!("{}\n", rendered.text.trim_end_matches('\n'))
            };
            text.push_str(&format!(
                "Command timed out after {} ms. ",
                timeout.as_millis()
            ));
            text.push_str(
                &cleanup_note(cleanup, "(the command and everything it started)")
                    .unwrap_or_else(|| "It had already ended.".to_string()),
            );
            let mut out = ToolOutput::error(text);
            out.meta = Some(meta(&[
                ("timed_out", json!(true)),
                ("killed_processes", json!(cleanup.killed)),
                ("signal", json!(outcome.and_then(|o| o.signal))),
                ("omitted_chars", json!(rendered.omitted_chars)),
            ]));
            Ok(out)
        }
        Ending::Exited(status) => {
            let outcome = status
                .map_err(|e| ToolError::failed(format!("waiting for the command failed: {e}")))?;
            // Background jobs and daemons the command left would keep the pipe open and
            // outlive the call: end them, then collect what they printed.
            let cleanup = process.kill_leftovers(grace).await.unwrap_or(Cleanup {
                killed: 0,
                complete: false,
            });
            drain(&mut stream, &mut output).await;
            let rendered = output.render();
            let body = if rendered.text.is_empty() {
                "(no output)".to_string()
            } else {
                rendered.text.trim_end_matches('\n').to_string()
            };
            let status_line = match (outcome.code, outcome.signal) {
                (Some(code), _) => format!("Exit code: {code}"),
                (None, Some(signal)) => format!("Killed by signal {signal}"),
                (None, None) => "Exit status unknown".to_string(),
            };
            let mut text = format!("{body}\n{status_line}");
            if let Some(note) = cleanup_note(cleanup, "the command left running") {
                text.push('\n');
                text.push_str(&note);
            }
            let facts = meta(&[
                ("exit_code", json!(outcome.code)),
                ("killed_processes", json!(cleanup.killed)),
                ("signal", json!(outcome.signal)),
                ("omitted_chars", json!(rendered.omitted_chars)),
            ]);
            Ok(with_facts(ToolOutput::text(text), facts))
        }
    }
}

async fn task_output(
    state: &ShellState,
    ctx: ToolContext,
    args: TaskOutputArgs,
) -> Result<ToolOutput, ToolError> {
    let wait = args
        .block
        .unwrap_or(true)
        .then(|| millis_arg(args.timeout, DEFAULT_TASK_WAIT, super::MAX_TIMEOUT));
    let read = state
        .tasks
        .read(&args.task_id, wait, ctx.cancellation())
        .await
        .map_err(ToolError::failed)?;
    let body = if read.output.text.is_empty() {
        "(no new output)".to_string()
    } else {
        read.output.text.trim_end_matches('\n').to_string()
    };
    let mut text = format!("Task {}: {}", args.task_id.trim(), read.status);
    if let TaskStatus::Completed(_) = read.status
        && let Some(note) = cleanup_note(read.cleanup, "it left running")
    {
        text.push_str(&format!(". {note}"));
    }
    text.push('\n');
    text.push_str(&body);
    if read.output.omitted_chars > 0 {
        text.push_str(&format!(
            "\n(The full output is in {}.)",
            read.log_path.display()
        ));
    }
    let (code, signal) = match read.status {
        TaskStatus::Completed(outcome) => (outcome.code, outcome.signal),
        _ => (None, None),
    };
    let mut out = ToolOutput::text(text);
    out.meta = Some(meta(&[
        ("status", json!(read.status.as_str())),
        ("exit_code", json!(code)),
        ("signal", json!(signal)),
        ("killed_processes", json!(read.cleanup.killed)),
        ("command", json!(read.command)),
        ("omitted_chars", json!(read.output.omitted_chars)),
    ]));
    Ok(out)
}

async fn task_stop(state: &ShellState, args: TaskStopArgs) -> Result<ToolOutput, ToolError> {
    let (command, cleanup) = state
        .tasks
        .stop(&args.task_id)
        .await
        .map_err(ToolError::failed)?;
    let note = cleanup_note(cleanup, "(the task and everything it started)")
        .unwrap_or_else(|| "It had already ended.".to_string());
    let mut out = ToolOutput::text(format!(
        "Stopped task {} ({command}). {note}",
        args.task_id.trim()
    ));
    out.meta = Some(meta(&[("killed_processes", json!(cleanup.killed))]));
    Ok(out)
}
