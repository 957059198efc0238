//! Where commands run: the [`ProcessBackend`] trait and its local default,
//! [`LocalProcessBackend`], which runs `bash -c` as a child process in its own process group.
//!
//! The shell tools never spawn processes themselves; they hand a [`ProcessRequest`] to a
//! backend. A container or a remote runner plugs in by implementing the same trait. The local
//! backend takes an optional [`SandboxPolicy`] that confines the child before it execs.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncRead;

use super::sandbox::SandboxPolicy;

/// Where a command's output goes. stdout and stderr always share one destination, so their
/// lines stay in the order the command wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputTarget {
    /// A pipe the caller reads from ([`RunningProcess::take_output`]).
    Pipe,
    /// A file the command appends to directly (for background tasks).
    File(PathBuf),
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct ProcessRequest {
    /// The shell command line, run with `bash -c`.
    pub command: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// The complete environment of the command (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Where stdout and stderr go.
    pub output: OutputTarget,
    /// Directories the command is meant to write in (the base dir and the tool set's temp
    /// dir). A sandbox confines writes to these; the plain local backend ignores them.
    pub writable_roots: Vec<PathBuf>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitOutcome {
    /// The exit code, when the command exited normally.
    pub code: Option<i32>,
    /// The signal that ended the command, when a signal did.
    pub signal: Option<i32>,
}

impl ExitOutcome {
    /// Whether the command exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl fmt::Display for ExitOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => write!(f, "killed by signal {signal}"),
            (None, None) => write!(f, "unknown exit status"),
        }
    }
}

/// A readable stream of a command's merged stdout and stderr.
pub type OutputStream = Pin<Box<dyn AsyncRead + Send>>;

/// A command that has been started.
///
/// Dropping a running process that has not been waited for kills its whole process tree, so a
/// cancelled call never leaves an orphan behind.
#[async_trait]
pub trait RunningProcess: Send {
    /// The OS process id, when there is one.
    fn id(&self) -> Option<u32>;

    /// The merged output stream, once, when the request asked for [`OutputTarget::Pipe`].
    fn take_output(&mut self) -> Option<OutputStream>;

    /// Waits for the command itself to exit and reaps it. Cancel-safe.
    async fn wait(&mut self) -> io::Result<ExitOutcome>;

    /// Ends the command and everything it started: a polite signal to the whole tree, then,
    /// after `grace`, a forced kill. Returns once the command has been reaped.
    async fn terminate(&mut self, grace: Duration) -> io::Result<ExitOutcome>;

    /// Ends whatever the command left running after it exited itself (background jobs it
    /// started with `&`), with the same polite-then-forced sequence.
    async fn kill_leftovers(&mut self, grace: Duration);
}

/// Runs commands somewhere: locally, in a container, on a remote runner.
#[async_trait]
pub trait ProcessBackend: Send + Sync + fmt::Debug {
    /// A short name for messages and logs.
    fn name(&self) -> &str;

    /// Starts the command. Fails with a clear message when it cannot start.
    async fn spawn(&self, request: ProcessRequest) -> io::Result<Box<dyn RunningProcess>>;
}

/// Runs `bash -c <command>` as a local child process.
///
/// The child has stdin connected to `/dev/null`, runs in a new process group (so the whole
/// tree can be signalled at once) and, with a sandbox, is confined before it execs.
#[derive(Clone)]
pub struct LocalProcessBackend {
    shell: PathBuf,
    sandbox: Option<Arc<dyn SandboxPolicy>>,
}

impl fmt::Debug for LocalProcessBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalProcessBackend")
            .field("shell", &self.shell)
            .field(
                "sandbox",
                &self.sandbox.as_ref().map(|s| s.name().to_string()),
            )
            .finish()
    }
}

impl Default for LocalProcessBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalProcessBackend {
    /// A backend running `bash` from `PATH`, without a sandbox.
    ///
    /// The path is looked up once, here: spawning a program by bare name while the child's
    /// environment sets `PATH` makes the standard library fall back from `posix_spawn` to
    /// fork and exec, which cost 0.1 to 0.2 ms per command.
    pub fn new() -> Self {
        Self {
            shell: crate::which::on_path("bash")
                .next()
                .unwrap_or_else(|| PathBuf::from("bash")),
            sandbox: None,
        }
    }

    /// Uses another shell binary (it must accept `-c <command>`).
    pub fn with_shell(mut self, shell: impl Into<PathBuf>) -> Self {
        self.shell = shell.into();
        self
    }

    /// Confines every child with `sandbox` before it execs.
    pub fn with_sandbox(mut self, sandbox: Arc<dyn SandboxPolicy>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// The sandbox in use, if any.
    pub fn sandbox(&self) -> Option<&Arc<dyn SandboxPolicy>> {
        self.sandbox.as_ref()
    }
}

#[async_trait]
impl ProcessBackend for LocalProcessBackend {
    fn name(&self) -> &str {
        match &self.sandbox {
            Some(_) => "local (sandboxed)",
            None => "local",
        }
    }

    async fn spawn(&self, request: ProcessRequest) -> io::Result<Box<dyn RunningProcess>> {
        let mut command = tokio::process::Command::new(&self.shell);
        command
            .arg("-c")
            .arg(&request.command)
            .current_dir(&request.cwd)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .process_group(0);
        let mut reader = None;
        match &request.output {
            OutputTarget::Pipe => {
                // One pipe for both streams keeps their relative order exactly as written.
                let (read_end, write_end) = io::pipe()?;
                command.stderr(write_end.try_clone()?).stdout(write_end);
                reader = Some(read_end);
            }
            OutputTarget::File(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?;
                command.stderr(file.try_clone()?).stdout(file);
            }
        }
        if let Some(sandbox) = &self.sandbox {
            let hook = sandbox
                .child_hook(&request)
                .map_err(|e| io::Error::other(format!("sandbox {}: {e}", sandbox.name())))?;
            // SAFETY: the hook runs in the forked child before exec. The Landlock hook only
            // makes system calls on a ruleset prepared in the parent; it allocates nothing on
            // its success path.
            unsafe {
                command.pre_exec(hook);
            }
        }
        let child = command.spawn().map_err(|e| {
            let confinement = match &self.sandbox {
                Some(sandbox) => format!(" in the {} sandbox", sandbox.name()),
                None => String::new(),
            };
            io::Error::new(
                e.kind(),
                format!("could not start {}{confinement}: {e}", self.shell.display()),
            )
        })?;
        // Dropping the command closes the parent's copies of the pipe's write end, so the
        // reader sees end-of-file once the command tree is gone.
        drop(command);
        let output = match reader {
            Some(read_end) => {
                let fd: OwnedFd = read_end.into();
                let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
                Some(Box::pin(receiver) as OutputStream)
            }
            None => None,
        };
        let pid = child.id();
        Ok(Box::new(LocalProcess {
            child,
            pgid: pid.and_then(|p| i32::try_from(p).ok()),
            output,
            outcome: None,
        }))
    }
}

/// A child started by [`LocalProcessBackend`].
struct LocalProcess {
    child: tokio::process::Child,
    /// The process group id, equal to the child's pid (it leads its own group).
    pgid: Option<i32>,
    output: Option<OutputStream>,
    /// Set once the child has been reaped.
    outcome: Option<ExitOutcome>,
}

impl LocalProcess {
    fn outcome_of(status: std::process::ExitStatus) -> ExitOutcome {
        use std::os::unix::process::ExitStatusExt;
        ExitOutcome {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

/// Sends `signal` to every process in group `pgid`. A group that is already empty is fine.
pub(crate) fn signal_group(pgid: i32, signal: libc::c_int) {
    if pgid <= 1 {
        // Never signal "every process" (-1) or our own group (0).
        return;
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

#[async_trait]
impl RunningProcess for LocalProcess {
    fn id(&self) -> Option<u32> {
        self.pgid.and_then(|p| u32::try_from(p).ok())
    }

    fn take_output(&mut self) -> Option<OutputStream> {
        self.output.take()
    }

    async fn wait(&mut self) -> io::Result<ExitOutcome> {
        if let Some(outcome) = self.outcome {
            return Ok(outcome);
        }
        let status = self.child.wait().await?;
        let outcome = Self::outcome_of(status);
        self.outcome = Some(outcome);
        Ok(outcome)
    }

    async fn terminate(&mut self, grace: Duration) -> io::Result<ExitOutcome> {
        let Some(pgid) = self.pgid else {
            self.child.start_kill()?;
            return self.wait().await;
        };
        let deadline = tokio::time::Instant::now() + grace;
        signal_group(pgid, libc::SIGTERM);
        let outcome = match tokio::time::timeout_at(deadline, self.wait()).await {
            Ok(result) => Some(result?),
            Err(_) => None,
        };
        // Give the rest of the tree what is left of the grace period, then force it.
        while outcome.is_some()
            && group_has_live_members(pgid)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        signal_group(pgid, libc::SIGKILL);
        match outcome {
            Some(outcome) => Ok(outcome),
            None => self.wait().await,
        }
    }

    async fn kill_leftovers(&mut self, grace: Duration) {
        let Some(pgid) = self.pgid else { return };
        if !group_exists(pgid) {
            return;
        }
        signal_group(pgid, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        while group_has_live_members(pgid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        signal_group(pgid, libc::SIGKILL);
    }
}

impl Drop for LocalProcess {
    fn drop(&mut self) {
        // A process that was never reaped may still be running: the call that owned it was
        // cancelled or its tool set dropped. Kill the whole group so nothing is orphaned.
        if self.outcome.is_none()
            && let Some(pgid) = self.pgid
        {
            signal_group(pgid, libc::SIGKILL);
        }
    }
}

/// Whether any process (even a zombie) is in group `pgid`.
fn group_exists(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Whether group `pgid` has a member that is not a zombie. Zombies are dead; whether their
/// parent (often init) reaps them is out of our hands.
fn group_has_live_members(pgid: i32) -> bool {
    if !group_exists(pgid) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(stat) = read_proc_stat(pid)
            && stat.pgrp == pgid
            && stat.state != 'Z'
            && stat.state != 'X'
        {
            return true;
        }
    }
    false
}

/// The fields of `/proc/<pid>/stat` the shell tools need.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcStat {
    /// The state letter (R, S, D, Z, ...).
    pub state: char,
    /// The process group id.
    pub pgrp: i32,
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub(crate) fn read_proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain spaces or parentheses.
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat { state, pgrp })
}
