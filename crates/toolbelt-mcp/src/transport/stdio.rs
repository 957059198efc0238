//! The stdio transport: a child process speaking newline-delimited JSON-RPC.
//!
//! We own the child rather than using rmcp's child-process transport so that
//! - stderr is always piped and drained into `tracing` (a server must never write into a
//!   terminal UI, and a full stderr pipe would block it);
//! - a line on stdout that is not JSON-RPC ends the session with a clear protocol error
//!   instead of being skipped silently (which would look like a hang);
//! - shutdown follows the MCP order (close stdin, wait briefly, SIGTERM, SIGKILL) with short
//!   waits, and always reaps the child: the npm reference servers ignore stdin EOF;
//! - the child is started by the one process owner (`toolbelt-process`) inside a cgroup or
//!   under a subreaper, so the real server behind a wrapper (`npx`, `uvx`, a shell) and the
//!   helpers a server started end with it, also those that called `setsid` or forked twice;
//! - the environment is the scrubbed one of the configuration, never the parent's whole.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;
use toolbelt_core::EnvPolicy;
use toolbelt_process::{Contain, Contained, Containment, Grace};

use super::delivery::DeliveryLog;
use super::lines::{BoundedLines, Line};
use crate::error::{FailureKind, McpError, Step};

/// How long a child may take to exit on its own after stdin is closed.
pub const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How long a child may take to exit after SIGTERM before it is killed.
pub const TERM_GRACE: Duration = Duration::from_secs(2);
/// How many of the child's last stderr lines are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;
/// The longest line read from a server's stdout (one JSON-RPC message): a longer one ends
/// the session with a protocol error instead of growing memory until the newline comes.
pub(crate) const MAX_STDOUT_LINE_BYTES: usize = 32 * 1024 * 1024;
/// The longest stderr line kept: the rest of a longer line is skipped (the line is logged
/// cut, with a marker), and draining goes on.
pub(crate) const MAX_STDERR_LINE_BYTES: usize = 16 * 1024;

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
    /// `None` once terminated; dropping it unterminated kills every process it started.
    child: Mutex<Option<Contained>>,
    pid: Option<u32>,
    diagnostics: SharedDiagnostics,
}

/// The rmcp transport half over the child's stdin and stdout.
pub(crate) struct StdioTransport {
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    stdout: BoundedLines<ChildStdout>,
    diagnostics: SharedDiagnostics,
    deliveries: Arc<DeliveryLog>,
}

/// Starts `command` and returns the child and the transport over its pipes.
pub(crate) fn spawn(
    server: &str,
    command: &str,
    args: &[String],
    env: &EnvPolicy,
    cwd: Option<&PathBuf>,
    deliveries: Arc<DeliveryLog>,
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
    // The scrubbed environment only: the parent's secrets (an API key, the serve token) must
    // not reach a server from a registry.
    cmd.args(args)
        .env_clear()
        .envs(env.resolve())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    // A dropped set (never closed) must not leave its server running: dropping the
    // contained child kills everything it started.
    let mut child = Contain::new(Containment::Auto).spawn(cmd).map_err(|err| {
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
    let pid = Some(child.pid());
    let diagnostics: SharedDiagnostics = Arc::default();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.take_stdin(), child.take_stdout(), child.take_stderr())
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
        stdout: BoundedLines::new(stdout, MAX_STDOUT_LINE_BYTES),
        diagnostics: diagnostics.clone(),
        deliveries,
    };
    let process = ChildProcess {
        child: Mutex::new(Some(child)),
        pid,
        diagnostics,
    };
    Ok((process, transport))
}

/// Reads the child's stderr line by line into `tracing`, keeping a short tail. A line
/// longer than [`MAX_STDERR_LINE_BYTES`] is cut (its rest skipped, never kept) and one that
/// is not UTF-8 is read lossily, so the pipe is drained to its end whatever comes.
fn drain_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    diagnostics: SharedDiagnostics,
) {
    tokio::spawn(async move {
        let mut lines = BoundedLines::new(stderr, MAX_STDERR_LINE_BYTES);
        while let Ok(Some(line)) = lines.next_line().await {
            let line = match line {
                Line::Whole(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Line::TooLong(bytes) => {
                    if lines.skip_rest_of_line().await.is_err() {
                        break;
                    }
                    format!(
                        "{}… [cut: the line is longer than {MAX_STDERR_LINE_BYTES} bytes]",
                        String::from_utf8_lossy(&bytes)
                    )
                }
            };
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

    /// Terminates the child and everything it started, and reaps the child. Stdin must
    /// already be closed (the transport's close does it): the child gets [`EXIT_GRACE`] to
    /// exit; then every process left (helpers of a child that exited included) gets SIGTERM
    /// and [`TERM_GRACE`] to be gone, then SIGKILL.
    pub async fn terminate(&self) -> io::Result<()> {
        let Some(mut child) = self.child.lock().await.take() else {
            return Ok(());
        };
        let grace = Grace {
            eof: EXIT_GRACE,
            term: TERM_GRACE,
        };
        match child.close(grace).await {
            (Some(_), cleanup) if cleanup.complete => Ok(()),
            (_, cleanup) => Err(io::Error::other(format!(
                "processes of the MCP server {} may still run ({} were signalled)",
                child.pid(),
                cleanup.killed
            ))),
        }
    }
}

impl StdioTransport {
    fn record_protocol_error(&self, message: String) {
        let mut diag = self.diagnostics.lock().unwrap_or_else(|e| e.into_inner());
        diag.protocol_error.get_or_insert(message);
    }
}

/// At most this many characters of a bad line are quoted in an error.
const QUOTE_LIMIT: usize = 120;

fn quote(line: &str) -> String {
    format!("{:?}", toolbelt_core::text::shorten(line, QUOTE_LIMIT + 1))
}

impl Transport<RoleClient> for StdioTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        let deliveries = self.deliveries.clone();
        async move {
            // Noted here, when the write really starts: rmcp may drop this future unpolled
            // when the session ends first.
            let ticket = deliveries.sending(&mut item);
            let mut line = serde_json::to_vec(&item).map_err(io::Error::other)?;
            line.push(b'\n');
            let mut guard = stdin.lock().await;
            let Some(pipe) = guard.as_mut() else {
                deliveries.refused(ticket);
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdin is closed"));
            };
            let written = pipe.write_all(&line).await;
            // A broken pipe means no process holds the read end any more: nobody can read
            // the rest of the line, and servers act on whole lines only.
            if written
                .as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            {
                deliveries.refused(ticket);
            }
            written?;
            pipe.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.stdout.next_line().await {
                Ok(Some(Line::Whole(line))) if line.trim_ascii().is_empty() => continue,
                Ok(Some(Line::Whole(line))) => match serde_json::from_slice(&line) {
                    Ok(message) => return Some(message),
                    Err(err) => {
                        self.record_protocol_error(format!(
                            "the server wrote something that is not JSON-RPC on stdout: {} ({err})",
                            quote(&String::from_utf8_lossy(&line))
                        ));
                        return None;
                    }
                },
                // The rest is not read: the session ends here, and the child with it.
                Ok(Some(Line::TooLong(start))) => {
                    self.record_protocol_error(format!(
                        "the server wrote a line longer than the limit of {} bytes on stdout \
                         (one JSON-RPC message per line): {}",
                        self.stdout.limit(),
                        quote(&String::from_utf8_lossy(
                            &start[..start.len().min(4 * QUOTE_LIMIT)]
                        ))
                    ));
                    return None;
                }
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
