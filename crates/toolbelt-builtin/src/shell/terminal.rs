//! Terminal sessions: `exec_command` starts a command on a pseudo-terminal of its own and
//! returns what it printed within a short wait (`yield_time_ms`) and, while it runs, a
//! session id; `write_stdin` types into a session (text or control keys such as `\u0003`
//! for Ctrl-C) and returns what followed. A REPL, a prompt, a debugger or `git rebase -i`
//! can be driven this way; Bash's stdin is `/dev/null`.
//!
//! A session is a Bash command in every other respect: the same backend, containment,
//! sandbox, environment policy, command policy and output cap. It ends when its command
//! exits (whatever the command left running is ended then, as Bash ends it), when
//! `write_stdin` closes it, after the idle timeout without a call, after Bash's largest
//! timeout in all, and when the tool set closes or is dropped; ending a session ends every
//! process it started, `setsid` ones too. At most [`DEFAULT_MAX_SESSIONS`] run at once
//! (configurable); another `exec_command` is refused until one ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolOutput};

use super::ShellState;
use super::output::CappedOutput;
use super::process::{Cleanup, ExitOutcome, OutputTarget, PtyMaster, RunningProcess};

/// How many terminal sessions may run at once by default.
pub const DEFAULT_MAX_SESSIONS: usize = 8;
/// How long a session may go without a call before it is ended, by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The default wait of `exec_command` (Codex's default).
const EXEC_YIELD: Duration = Duration::from_millis(10_000);
/// The default wait of `write_stdin` (Codex's default).
const WRITE_YIELD: Duration = Duration::from_millis(250);
/// The longest wait a call may ask for.
const MAX_YIELD: Duration = Duration::from_millis(30_000);
/// The most a `write_stdin` call may type at once.
const MAX_INPUT_BYTES: usize = 64 * 1024;
/// After the command exited: how long output still in the terminal is waited for.
const EXIT_DRAIN: Duration = Duration::from_millis(200);

const EXEC_DESCRIPTION: &str = "Runs a command in a new terminal session (a pseudo-terminal, \
so programs that need one work: REPLs such as `python3 -i`, prompts, debuggers, `git rebase \
-i`). Waits up to yield_time_ms (default 10000) and returns the output so far; if the \
command is still running the result gives a session_id to use with write_stdin. Use Bash \
for commands that need no input. Sessions end when the command exits, when closed with \
write_stdin, or after some minutes without use.";

const WRITE_DESCRIPTION: &str = "Writes characters to a running terminal session started by \
exec_command, waits up to yield_time_ms (default 250) and returns the output that followed. \
End a line with \\n to submit it; control keys are characters (\\u0003 is Ctrl-C, \\u0004 \
Ctrl-D). With empty chars it only waits for new output. close: true ends the session and \
every process it started.";

/// Arguments of exec_command.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecCommandArgs {
    /// The shell command to run (with bash -c), e.g. "python3 -i".
    pub cmd: String,
    /// The directory to run it in, relative to the working directory (default: the working
    /// directory itself).
    #[serde(default)]
    pub workdir: Option<String>,
    /// How long to wait for output before returning, in milliseconds (default 10000, at
    /// most 30000). The call returns earlier when the command exits.
    #[serde(default)]
    pub yield_time_ms: Option<i64>,
    /// The most output to return, in tokens (about four characters each).
    #[serde(default)]
    pub max_output_tokens: Option<i64>,
}

/// Arguments of write_stdin.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteStdinArgs {
    /// The session id exec_command returned.
    pub session_id: u32,
    /// The characters to type (may be empty to just wait for output).
    #[serde(default)]
    pub chars: String,
    /// How long to wait for output after writing, in milliseconds (default 250, at most
    /// 30000).
    #[serde(default)]
    pub yield_time_ms: Option<i64>,
    /// The most output to return, in tokens (about four characters each).
    #[serde(default)]
    pub max_output_tokens: Option<i64>,
    /// End the session and every process it started (default false).
    #[serde(default)]
    pub close: bool,
}

/// The limits of a tool set's terminal sessions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TerminalLimits {
    pub max_sessions: usize,
    pub idle_timeout: Duration,
    pub lifetime: Duration,
    pub kill_grace: Duration,
}

/// The terminal sessions of one tool set.
pub(crate) struct Terminals {
    inner: Arc<Inner>,
}

struct Inner {
    sessions: Mutex<HashMap<u32, Arc<Session>>>,
    next_id: AtomicU32,
    closed: AtomicBool,
    limits: TerminalLimits,
    sweeper_started: AtomicBool,
}

/// One running command on its terminal.
struct Session {
    id: u32,
    process: tokio::sync::Mutex<Box<dyn RunningProcess>>,
    terminal: Arc<PtyMaster>,
    pending: Arc<Mutex<CappedOutput>>,
    more: Arc<Notify>,
    eof: Arc<AtomicBool>,
    last_used: Mutex<Instant>,
    started: Instant,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // The process itself is killed, with its whole tree, when its box is dropped.
        self.reader.abort();
    }
}

/// What a wait on a session saw.
struct Collected {
    text: String,
    omitted_chars: usize,
    exited: Option<ExitOutcome>,
    cleanup: Option<Cleanup>,
}

impl Terminals {
    pub(crate) fn new(limits: TerminalLimits) -> Self {
        Self {
            inner: Arc::new(Inner {
                sessions: Mutex::new(HashMap::new()),
                next_id: AtomicU32::new(1),
                closed: AtomicBool::new(false),
                limits,
                sweeper_started: AtomicBool::new(false),
            }),
        }
    }

    /// Ends every session and refuses new ones.
    pub(crate) async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let sessions: Vec<Arc<Session>> = self.inner.lock().drain().map(|(_, s)| s).collect();
        for session in sessions {
            end(&session, self.inner.limits.kill_grace).await;
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remove(&self, id: u32) -> Option<Arc<Session>> {
        self.lock().remove(&id)
    }
}

/// Ends a session's command and everything it started.
async fn end(session: &Session, grace: Duration) -> Option<Cleanup> {
    let mut process = session.process.lock().await;
    process
        .terminate(grace)
        .await
        .ok()
        .map(|(_, cleanup)| cleanup)
}

/// Ends sessions idle too long or running past their lifetime, until the set is dropped.
fn start_sweeper(inner: &Arc<Inner>) {
    if inner.sweeper_started.swap(true, Ordering::SeqCst) {
        return;
    }
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let every =
        (inner.limits.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            let now = Instant::now();
            let limits = inner.limits;
            let expired: Vec<Arc<Session>> = {
                let mut sessions = inner.lock();
                let ids: Vec<u32> = sessions
                    .values()
                    .filter(|s| {
                        let idle = now
                            .duration_since(*s.last_used.lock().unwrap_or_else(|p| p.into_inner()));
                        idle > limits.idle_timeout
                            || now.duration_since(s.started) > limits.lifetime
                    })
                    .map(|s| s.id)
                    .collect();
                ids.iter().filter_map(|id| sessions.remove(id)).collect()
            };
            for session in expired {
                tracing::debug!(session = session.id, "terminal session timed out");
                end(&session, limits.kill_grace).await;
            }
        }
    });
}

/// exec_command and write_stdin over `state`'s terminal sessions.
pub(super) fn tools(state: &Arc<ShellState>) -> Result<Vec<DynTool>, ToolError> {
    let exec_state = state.clone();
    let exec = FunctionTool::returning_output(
        "exec_command",
        EXEC_DESCRIPTION,
        move |ctx, args: ExecCommandArgs| {
            let state = exec_state.clone();
            async move { exec_command(&state, ctx, args).await }
        },
    )?
    .map_declaration(|d| d.destructive().open_world().concurrency_safe(false));
    let write_state = state.clone();
    let write = FunctionTool::returning_output(
        "write_stdin",
        WRITE_DESCRIPTION,
        move |ctx, args: WriteStdinArgs| {
            let state = write_state.clone();
            async move { write_stdin(&state, ctx, args).await }
        },
    )?
    .map_declaration(|d| d.destructive().open_world().concurrency_safe(false));
    Ok(vec![Arc::new(exec), Arc::new(write)])
}

fn yield_arg(value: Option<i64>, default: Duration) -> Duration {
    match value {
        Some(ms) if ms >= 0 => Duration::from_millis(ms.unsigned_abs()).min(MAX_YIELD),
        _ => default,
    }
}

/// The output cap of a call: the tool set's, or less when the call asks for less.
fn output_cap(state: &ShellState, max_output_tokens: Option<i64>) -> usize {
    let cap = state.max_output_chars();
    match max_output_tokens {
        Some(tokens) if tokens > 0 => (tokens.unsigned_abs() as usize).saturating_mul(4).min(cap),
        _ => cap,
    }
}

async fn exec_command(
    state: &ShellState,
    ctx: ToolContext,
    args: ExecCommandArgs,
) -> Result<ToolOutput, ToolError> {
    let terminals = &state.terminals.inner;
    if terminals.closed.load(Ordering::SeqCst) {
        return Err(ToolError::failed("the shell tool set is closed"));
    }
    state.check_policy(&args.cmd)?;
    let running = terminals.lock().len();
    if running >= terminals.limits.max_sessions {
        return Ok(ToolOutput::error(format!(
            "{running} terminal sessions are running, the limit; end one (write_stdin with \
             close: true, or let its command exit) before starting another"
        )));
    }
    let mut request = state.request(&args.cmd);
    if let Some(dir) = &args.workdir {
        request.cwd = workdir(state, dir).map_err(ToolError::invalid_arguments)?;
    }
    request.output = OutputTarget::Terminal;
    if !request.env.iter().any(|(k, _)| k == "TERM") {
        // No colours or cursor tricks for a reader that is not a screen.
        request.env.push(("TERM".into(), "dumb".into()));
    }
    let mut process = state
        .backend
        .spawn(request)
        .await
        .map_err(|e| ToolError::failed(e.to_string()))?;
    let Some(terminal) = process.take_terminal() else {
        return Err(ToolError::failed(format!(
            "the {} process backend has no terminals",
            state.backend.name()
        )));
    };
    let pending = Arc::new(Mutex::new(CappedOutput::new(state.max_output_chars())));
    let more = Arc::new(Notify::new());
    let eof = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn(read_terminal(
        terminal.clone(),
        pending.clone(),
        more.clone(),
        eof.clone(),
    ));
    let id = terminals.next_id.fetch_add(1, Ordering::Relaxed);
    let session = Arc::new(Session {
        id,
        process: tokio::sync::Mutex::new(process),
        terminal,
        pending,
        more,
        eof,
        last_used: Mutex::new(Instant::now()),
        started: Instant::now(),
        reader,
    });
    terminals.lock().insert(id, session.clone());
    start_sweeper(terminals);
    let started = Instant::now();
    let wait = yield_arg(args.yield_time_ms, EXEC_YIELD);
    let collected = tokio::select! {
        collected = collect(&session, wait, state.kill_grace()) => collected,
        _ = ctx.cancelled() => {
            if let Some(session) = terminals.remove(id) {
                end(&session, state.kill_grace()).await;
            }
            return Err(ToolError::Cancelled);
        }
    };
    if collected.exited.is_some() {
        terminals.remove(id);
    }
    Ok(render(
        id,
        collected,
        started,
        output_cap(state, args.max_output_tokens),
        false,
    ))
}

async fn write_stdin(
    state: &ShellState,
    ctx: ToolContext,
    args: WriteStdinArgs,
) -> Result<ToolOutput, ToolError> {
    let terminals = &state.terminals.inner;
    let Some(session) = terminals.lock().get(&args.session_id).cloned() else {
        let mut ids: Vec<u32> = terminals.lock().keys().copied().collect();
        ids.sort_unstable();
        let running = if ids.is_empty() {
            "none is running".to_string()
        } else {
            format!(
                "running: {}",
                ids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Ok(ToolOutput::error(format!(
            "no terminal session {}: it ended (its command exited, it was closed or it timed \
             out) or never existed; {running}",
            args.session_id
        )));
    };
    *session.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    let started = Instant::now();
    let cap = output_cap(state, args.max_output_tokens);
    if args.close {
        terminals.remove(session.id);
        let cleanup = end(&session, state.kill_grace()).await;
        let collected = Collected {
            exited: None,
            cleanup,
            ..take_pending(&session)
        };
        return Ok(render(session.id, collected, started, cap, true));
    }
    if args.chars.len() > MAX_INPUT_BYTES {
        return Err(ToolError::invalid_arguments(format!(
            "chars is {} bytes, more than the {MAX_INPUT_BYTES}-byte limit of one write",
            args.chars.len()
        )));
    }
    let wait = yield_arg(args.yield_time_ms, WRITE_YIELD);
    if !args.chars.is_empty() {
        // A command that reads nothing fills the terminal's buffer: give up rather than hang.
        let limit = wait.max(Duration::from_secs(2));
        match tokio::time::timeout(limit, session.terminal.write_all(args.chars.as_bytes())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Ok(ToolOutput::error(format!(
                    "could not write to session {}: {e}",
                    session.id
                )));
            }
            Err(_) => {
                return Ok(ToolOutput::error(format!(
                    "session {} did not take the input within {} ms (its command is not \
                     reading); some of it may have been written",
                    session.id,
                    limit.as_millis()
                )));
            }
        }
    }
    let collected = tokio::select! {
        collected = collect(&session, wait, state.kill_grace()) => collected,
        _ = ctx.cancelled() => return Err(ToolError::Cancelled),
    };
    if collected.exited.is_some() {
        terminals.remove(session.id);
    }
    *session.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    Ok(render(session.id, collected, started, cap, false))
}

/// `dir` inside the base directory, as an existing directory.
fn workdir(state: &ShellState, dir: &str) -> Result<std::path::PathBuf, String> {
    let joined = state.base_dir.join(dir);
    let resolved =
        std::fs::canonicalize(&joined).map_err(|e| format!("workdir {dir} is not usable: {e}"))?;
    if !resolved.starts_with(&state.base_dir) {
        return Err(format!("workdir {dir}: path is outside the base directory"));
    }
    if !resolved.is_dir() {
        return Err(format!("workdir {dir} is not a directory"));
    }
    Ok(resolved)
}

/// Copies the terminal's output into `pending` until no process holds the terminal.
async fn read_terminal(
    terminal: Arc<PtyMaster>,
    pending: Arc<Mutex<CappedOutput>>,
    more: Arc<Notify>,
    eof: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match terminal.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(&buf[..n]);
                more.notify_waiters();
            }
        }
    }
    eof.store(true, Ordering::SeqCst);
    more.notify_waiters();
}

/// Waits `wait` or until the command exits; then takes the output gathered so far. A command
/// that exited has its leftovers ended, as Bash ends them.
async fn collect(session: &Session, wait: Duration, grace: Duration) -> Collected {
    let mut process = session.process.lock().await;
    let exited = tokio::select! {
        _ = tokio::time::sleep(wait) => None,
        status = process.wait() => status.ok(),
    };
    let mut cleanup = None;
    if exited.is_some() {
        // What the command printed last may still be in the terminal.
        let until = tokio::time::Instant::now() + EXIT_DRAIN;
        while !session.eof.load(Ordering::SeqCst) {
            let notified = session.more.notified();
            if session.eof.load(Ordering::SeqCst) {
                break;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                break;
            }
        }
        cleanup = process.kill_leftovers(grace).await.ok();
    }
    Collected {
        exited,
        cleanup,
        ..take_pending(session)
    }
}

/// The output gathered since the last call, emptied.
fn take_pending(session: &Session) -> Collected {
    let mut pending = session.pending.lock().unwrap_or_else(|p| p.into_inner());
    let rendered = pending.render();
    *pending = CappedOutput::new(pending.max_chars());
    Collected {
        // A terminal ends lines with CR LF.
        text: rendered.text.replace("\r\n", "\n"),
        omitted_chars: rendered.omitted_chars,
        exited: None,
        cleanup: None,
    }
}

fn render(id: u32, collected: Collected, started: Instant, cap: usize, closed: bool) -> ToolOutput {
    let mut capped = CappedOutput::new(cap);
    capped.push(collected.text.as_bytes());
    let shown = capped.render();
    let omitted = collected.omitted_chars + shown.omitted_chars;
    let status = match (&collected.exited, closed) {
        (_, true) => format!("Session {id} closed"),
        (Some(outcome), _) => match (outcome.code, outcome.signal) {
            (Some(code), _) => format!("Process exited with code {code}"),
            (_, Some(signal)) => format!("Process ended by signal {signal}"),
            _ => "Process exited".to_string(),
        },
        (None, false) => format!("Process running with session ID {id}"),
    };
    let mut text = format!(
        "{status}\nWall time: {:.1} seconds\n",
        started.elapsed().as_secs_f64()
    );
    if let Some(cleanup) = &collected.cleanup
        && (cleanup.killed > 0 || !cleanup.complete)
    {
        text.push_str(&format!(
            "Ended {} process{} it left running{}\n",
            cleanup.killed,
            if cleanup.killed == 1 { "" } else { "es" },
            if cleanup.complete {
                ""
            } else {
                " (some may not have ended)"
            }
        ));
    }
    if omitted > 0 {
        text.push_str(&format!(
            "Output truncated: {omitted} characters left out\n"
        ));
    }
    text.push_str("Output:\n");
    text.push_str(&shown.text);
    let running = collected.exited.is_none() && !closed;
    ToolOutput::text(text).with_structured(json!({
        "session_id": if running { Some(id) } else { None },
        "exit_code": collected.exited.as_ref().and_then(|o| o.code),
        "running": running,
    }))
}
