//! The stdio transport: a child process speaking newline-delimited JSON-RPC.
//!
//! We own the child rather than using rmcp's child-process transport so that
//! - stderr is always piped and drained into `tracing` (a server must never write into a
//!   terminal UI, and a full stderr pipe would block it);
//! - a line on stdout that is not JSON-RPC ends the session with a clear protocol error
//!   instead of being skipped silently (which would look like a hang);
//! - shutdown follows the MCP order (close stdin, wait briefly, SIGTERM, SIGKILL) with short
//!   waits, and always reaps the child: the npm reference servers ignore stdin EOF.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use crate::error::{FailureKind, McpError, Step};

/// How long a child may take to exit on its own after stdin is closed.
pub const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How long a child may take to exit after SIGTERM before it is killed.
pub const TERM_GRACE: Duration = Duration::from_secs(2);
/// How many of the child's last stderr lines are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// What the transport learned that the session's error messages should mention.
#[derive(Debug, Default)]
pub(crate) struct StdioDiagnostics {
    /// Set when stdout carried something that is not JSON-RPC.
    pub protocol_error: Option<String>,
    /// The last lines the child wrote on stderr.
    pub stderr_tail: VecDeque<String>,
}

impl StdioDiagnostics {
    /// The stderr tail as one string, for an error message.
    pub fn stderr_summary(&self) -> Option<String> {
        if self.stderr_tail.is_empty() {
            return None;
        }
        Some(
            self.stderr_tail
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }
}

/// Shared view of a child's diagnostics.
pub(crate) type SharedDiagnostics = Arc<StdMutex<StdioDiagnostics>>;

/// The running child process behind a stdio session.
pub(crate) struct ChildProcess {
    child: Mutex<Option<Child>>,
    pid: Option<u32>,
    diagnostics: SharedDiagnostics,
}

/// The rmcp transport half over the child's stdin and stdout.
pub(crate) struct StdioTransport {
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    stdout: Lines<BufReader<ChildStdout>>,
    diagnostics: SharedDiagnostics,
}

/// Starts `command` and returns the child and the transport over its pipes.
pub(crate) fn spawn(
    server: &str,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
) -> Result<(ChildProcess, StdioTransport), McpError> {
    if command.trim().is_empty() {
        return Err(McpError::new(
            server,
            Step::Connect,
            FailureKind::Configuration,
            "no command given for the stdio transport",
        ));
    }
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A dropped set (never closed) must not leave its server running.
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|err| {
        let message = match err.kind() {
            io::ErrorKind::NotFound => match cwd {
                Some(dir) if !dir.is_dir() => {
                    format!("working directory {} does not exist", dir.display())
                }
                _ => format!("command {command:?} not found (is it installed and on PATH?)"),
            },
            io::ErrorKind::PermissionDenied => format!("command {command:?} is not executable"),
            _ => format!("could not start {command:?}: {err}"),
        };
        McpError::new(server, Step::Connect, FailureKind::Configuration, message).with_source(err)
    })?;
    let pid = child.id();
    let diagnostics: SharedDiagnostics = Arc::default();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(McpError::new(
            server,
            Step::Connect,
            FailureKind::Configuration,
            "the child's pipes were not available",
        ));
    };
    drain_stderr(server.to_string(), stderr, diagnostics.clone());
    let transport = StdioTransport {
        stdin: Arc::new(Mutex::new(Some(stdin))),
        stdout: BufReader::new(stdout).lines(),
        diagnostics: diagnostics.clone(),
    };
    let process = ChildProcess {
        child: Mutex::new(Some(child)),
        pid,
        diagnostics,
    };
    Ok((process, transport))
}

/// Reads the child's stderr line by line into `tracing`, keeping a short tail.
fn drain_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    diagnostics: SharedDiagnostics,
) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "toolbelt_mcp::stderr", server = %server, "{line}");
            let mut diag = diagnostics.lock().unwrap_or_else(|e| e.into_inner());
            if diag.stderr_tail.len() == STDERR_TAIL_LINES {
                diag.stderr_tail.pop_front();
            }
            diag.stderr_tail.push_back(line);
        }
    });
}

impl ChildProcess {
    /// The child's process id, while it was running.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The diagnostics gathered from the child's output.
    pub fn diagnostics(&self) -> SharedDiagnostics {
        self.diagnostics.clone()
    }

    /// Terminates and reaps the child. Stdin must already be closed (the transport's close
    /// does it); the child gets [`EXIT_GRACE`] to exit, then SIGTERM and [`TERM_GRACE`],
    /// then SIGKILL.
    pub async fn terminate(&self) -> io::Result<()> {
        let Some(mut child) = self.child.lock().await.take() else {
            return Ok(());
        };
        if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok() {
            return Ok(());
        }
        if let Some(pid) = child.id() {
            send_sigterm(pid);
            if tokio::time::timeout(TERM_GRACE, child.wait()).await.is_ok() {
                return Ok(());
            }
        }
        child.kill().await
    }
}

#[cfg(unix)]
fn send_sigterm(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a pid we spawned and have not yet reaped (the Child is held, so
        // the pid cannot have been recycled).
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

#[cfg(not(unix))]
fn send_sigterm(_pid: u32) {}

impl StdioTransport {
    fn record_protocol_error(&self, message: String) {
        let mut diag = self.diagnostics.lock().unwrap_or_else(|e| e.into_inner());
        diag.protocol_error.get_or_insert(message);
    }
}

/// At most this many characters of a bad line are quoted in an error.
const QUOTE_LIMIT: usize = 120;

fn quote(line: &str) -> String {
    let mut quoted: String = line.chars().take(QUOTE_LIMIT).collect();
    if quoted.len() < line.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

impl Transport<RoleClient> for StdioTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            line.push(b'\n');
            let mut guard = stdin.lock().await;
            let pipe = guard
                .as_mut()
                .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "stdin is closed"))?;
            pipe.write_all(&line).await?;
            pipe.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.stdout.next_line().await {
                Ok(Some(line)) if line.trim().is_empty() => continue,
                Ok(Some(line)) => match serde_json::from_str(&line) {
                    Ok(message) => return Some(message),
                    Err(err) => {
                        self.record_protocol_error(format!(
                            "the server wrote something that is not JSON-RPC on stdout: {} ({err})",
                            quote(&line)
                        ));
                        return None;
                    }
                },
                Ok(None) => return None,
                Err(err) => {
                    self.record_protocol_error(format!(
                        "reading the server's stdout failed: {err}"
                    ));
                    return None;
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let stdin = self.stdin.clone();
        async move {
            // Dropping the pipe closes it: the polite way to ask a stdio server to exit.
            stdin.lock().await.take();
            Ok(())
        }
    }
}
