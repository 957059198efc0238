//! Where commands run: the [`ProcessBackend`] trait and its local default,
//! [`LocalProcessBackend`], which runs `bash -c` as a child process and keeps track of every
//! process it starts ([`Containment`]), so that all of them can be ended.
//!
//! The shell tools never spawn processes themselves; they hand a [`ProcessRequest`] to a
//! backend. A container or a remote runner plugs in by implementing the same trait. The local
//! backend takes an optional [`SandboxPolicy`] that confines the child before it execs.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::cgroup::{CallGroup, CgroupParent};
use super::procs::{ProcRef, live_descendants};
use super::reaper;
use super::sandbox::SandboxPolicy;

/// How long the forced kill of a command's processes may take before giving up on the
/// stragglers (they are reported as not killed).
const FORCED_KILL_LIMIT: Duration = Duration::from_secs(10);
/// How often the processes of a command are looked at while they are being ended.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

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
    /// The working directory (the tool set's base dir).
    pub cwd: PathBuf,
    /// The complete environment of the command (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Where stdout and stderr go.
    pub output: OutputTarget,
    /// The directories the command works in (the base dir). A `workspace-write` sandbox
    /// lets it write beneath them; a `read-only` one does not.
    pub workspace_roots: Vec<PathBuf>,
    /// The tool set's private temp dir (the command's `TMPDIR` in a sandbox), writable in
    /// every sandbox mode.
    pub temp_dir: Option<PathBuf>,
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

    fn from_wait_status(status: libc::c_int) -> Self {
        if libc::WIFEXITED(status) {
            Self {
                code: Some(libc::WEXITSTATUS(status)),
                signal: None,
            }
        } else if libc::WIFSIGNALED(status) {
            Self {
                code: None,
                signal: Some(libc::WTERMSIG(status)),
            }
        } else {
            Self {
                code: None,
                signal: None,
            }
        }
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

/// What ending a command's processes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanup {
    /// How many processes were signalled to end: those the command left running, plus the
    /// command itself when it was still running.
    pub killed: usize,
    /// Whether the backend could follow every process the command started to its end.
    /// `false` when the tracking itself was defeated (an unsandboxed command killed its
    /// supervisor) or processes outlived the forced kill: some may still be running.
    pub complete: bool,
}

impl Cleanup {
    /// Nothing was left to end.
    pub const NOTHING: Cleanup = Cleanup {
        killed: 0,
        complete: true,
    };
}

/// A readable stream of a command's merged stdout and stderr.
pub type OutputStream = Pin<Box<dyn AsyncRead + Send>>;

/// A command that has been started.
///
/// Dropping a running process that has not been waited for kills every process it started,
/// so a cancelled call never leaves an orphan behind.
#[async_trait]
pub trait RunningProcess: Send {
    /// The OS process id of the process the backend started (the command, or the
    /// supervisor it runs under), when there is one.
    fn id(&self) -> Option<u32>;

    /// The merged output stream, once, when the request asked for [`OutputTarget::Pipe`].
    fn take_output(&mut self) -> Option<OutputStream>;

    /// Waits for the command itself to exit. Cancel-safe.
    async fn wait(&mut self) -> io::Result<ExitOutcome>;

    /// Ends the command and everything it started: a polite signal (`SIGTERM`) to every
    /// process, then, after `grace`, a forced kill. Returns once all are gone.
    async fn terminate(&mut self, grace: Duration) -> io::Result<(ExitOutcome, Cleanup)>;

    /// Ends whatever the command left running after it exited itself (background jobs,
    /// daemons, `setsid` children), with the same polite-then-forced sequence.
    async fn kill_leftovers(&mut self, grace: Duration) -> io::Result<Cleanup>;

    /// A handle that kills every process of the command at once, without waiting, from code
    /// that cannot await (a `Drop` of the owner while the process itself is held elsewhere).
    fn killer(&self) -> Option<Killer> {
        None
    }
}

/// Kills every process of a command at once, without waiting ([`RunningProcess::killer`]).
pub type Killer = Arc<dyn Fn() + Send + Sync>;

/// Runs commands somewhere: locally, in a container, on a remote runner.
#[async_trait]
pub trait ProcessBackend: Send + Sync + fmt::Debug {
    /// A short name for messages and logs.
    fn name(&self) -> &str;

    /// Starts the command. Fails with a clear message when it cannot start.
    async fn spawn(&self, request: ProcessRequest) -> io::Result<Box<dyn RunningProcess>>;
}

/// How [`LocalProcessBackend`] keeps track of every process a command starts, so that the
/// end of a call (exit, timeout, cancellation, `TaskStop`, closing the tool set) ends all of
/// them: also those that leave the process group or the session (`setsid`, `set -m` jobs,
/// daemons that fork twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Containment {
    /// A cgroup where this process may create one, else a subreaper (the default).
    #[default]
    Auto,
    /// A cgroup v2 group per command, ended with `cgroup.kill`: nothing but a write to the
    /// cgroup file system gets a process out. Needs a writable cgroup2 hierarchy (root, or a
    /// delegated subtree) and Linux 5.14+; starting a command fails without them.
    Cgroup,
    /// A supervisor process per command that is the child subreaper of everything the
    /// command starts, so orphans stay in its tree. Needs no privilege; an unsandboxed
    /// command can defeat it by killing its supervisor (the result then says so).
    Subreaper,
}

/// Runs `bash -c <command>` as a local child process.
///
/// The child has stdin connected to `/dev/null`, runs in a session of its own (no controlling
/// terminal), inherits no open descriptor besides stdin, stdout and stderr, is contained as
/// [`Containment`] says and, with a sandbox, is confined before it execs.
#[derive(Clone)]
pub struct LocalProcessBackend {
    shell: PathBuf,
    sandbox: Option<Arc<dyn SandboxPolicy>>,
    containment: Containment,
}

impl fmt::Debug for LocalProcessBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalProcessBackend")
            .field("shell", &self.shell)
            .field(
                "sandbox",
                &self.sandbox.as_ref().map(|s| s.name().to_string()),
            )
            .field("containment", &self.containment)
            .finish()
    }
}

impl Default for LocalProcessBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalProcessBackend {
    /// A backend running `bash` from `PATH`, without a sandbox, with [`Containment::Auto`].
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
            containment: Containment::Auto,
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

    /// Chooses how the processes of a command are kept track of.
    pub fn with_containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// The sandbox in use, if any.
    pub fn sandbox(&self) -> Option<&Arc<dyn SandboxPolicy>> {
        self.sandbox.as_ref()
    }

    /// The containment a command started now gets: [`Containment::Auto`] resolved to
    /// [`Containment::Cgroup`] or [`Containment::Subreaper`].
    pub fn effective_containment(&self) -> Containment {
        match self.containment {
            Containment::Auto if CgroupParent::detect().is_some() => Containment::Cgroup,
            Containment::Auto => Containment::Subreaper,
            chosen => chosen,
        }
    }

    /// The group or the supervisor pipe of a new command.
    fn prepare_tracking(&self) -> io::Result<Prepared> {
        match self.effective_containment() {
            Containment::Cgroup => {
                let parent = CgroupParent::detect().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::Unsupported,
                        "cgroup containment is not available: no writable cgroup v2 hierarchy \
                         with cgroup.kill (Linux 5.14+) for this process",
                    )
                })?;
                Ok(Prepared::Cgroup(CallGroup::create(parent)?))
            }
            _ => {
                let (read_end, write_end) = io::pipe()?;
                Ok(Prepared::Subreaper {
                    status_read: read_end.into(),
                    status_write: write_end.into(),
                })
            }
        }
    }
}

/// Tracking prepared in the parent before the spawn.
enum Prepared {
    Cgroup(CallGroup),
    Subreaper {
        status_read: OwnedFd,
        status_write: OwnedFd,
    },
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
            .stdin(Stdio::null());
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
        let mut sandbox_hook = match &self.sandbox {
            Some(sandbox) => Some(
                sandbox
                    .child_hook(&request)
                    .map_err(|e| io::Error::other(format!("sandbox {}: {e}", sandbox.name())))?,
            ),
            None => None,
        };
        let prepared = self.prepare_tracking()?;
        let (procs_fd, status_fd) = match &prepared {
            Prepared::Cgroup(group) => (Some(group.procs_fd()), None),
            Prepared::Subreaper { status_write, .. } => (None, Some(status_write.as_raw_fd())),
        };
        let hook = move || -> io::Result<()> {
            // SAFETY (of every call below): this runs in the forked child before exec, and
            // only makes system calls on descriptors and rulesets prepared in the parent.
            unsafe {
                // Descriptors the parent left inheritable (a library user's sockets) must not
                // reach the command; marking them close-on-exec keeps the standard library's
                // own exec-error pipe working until the exec.
                libc::syscall(
                    libc::SYS_close_range,
                    3,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
                if let Some(fd) = procs_fd {
                    super::cgroup::join_from_child(fd)?;
                }
                // A session of its own: no controlling terminal to read from or inject
                // keystrokes into, and one group to signal.
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(fd) = status_fd {
                    reaper::split_off_supervisor(fd)?;
                }
            }
            if let Some(hook) = sandbox_hook.as_mut() {
                hook()?;
            }
            Ok(())
        };
        // SAFETY: the hook only makes async-signal-safe system calls (see above and
        // `SandboxPolicy::child_hook`), allocating nothing on its success path.
        unsafe {
            command.pre_exec(hook);
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
        // Dropping the command closes the parent's copies of the pipes' write ends, so the
        // readers see end-of-file once the processes holding them are gone.
        drop(command);
        let output = match reader {
            Some(read_end) => {
                let fd: OwnedFd = read_end.into();
                let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
                Some(Box::pin(receiver) as OutputStream)
            }
            None => None,
        };
        let tracking = match prepared {
            Prepared::Cgroup(group) => Tracking::Cgroup(group),
            Prepared::Subreaper {
                status_read,
                status_write,
            } => {
                drop(status_write);
                // The supervisor may already have ended (a command as short as `true`), but
                // it stays a zombie until it is reaped here, so its name can still be read.
                let supervisor = child
                    .id()
                    .and_then(ProcRef::of)
                    .ok_or_else(|| io::Error::other("the command's supervisor vanished"))?;
                Tracking::Subreaper(Supervised {
                    supervisor,
                    status: Some(tokio::net::unix::pipe::Receiver::from_owned_fd(
                        status_read,
                    )?),
                    message: [0; reaper::STATUS_LEN],
                    received: 0,
                    others_left: true,
                    lost: false,
                })
            }
        };
        Ok(Box::new(LocalProcess {
            child,
            tracking,
            output,
            outcome: None,
            cleaned_up: false,
        }))
    }
}

/// A child started by [`LocalProcessBackend`].
struct LocalProcess {
    /// The command (cgroup) or its supervisor (subreaper).
    child: tokio::process::Child,
    tracking: Tracking,
    output: Option<OutputStream>,
    /// Set once the command has ended.
    outcome: Option<ExitOutcome>,
    /// Set once every process of the command has been ended and the tracking released.
    cleaned_up: bool,
}

/// How the processes of one command are tracked.
enum Tracking {
    Cgroup(CallGroup),
    Subreaper(Supervised),
}

/// A command under a subreaper supervisor.
struct Supervised {
    supervisor: ProcRef,
    /// The supervisor's status pipe; `None` once read to its end.
    status: Option<tokio::net::unix::pipe::Receiver>,
    message: [u8; reaper::STATUS_LEN],
    received: usize,
    /// Whether processes other than the command were running when it ended.
    others_left: bool,
    /// The supervisor died before the command: orphans may have escaped to init.
    lost: bool,
}

impl LocalProcess {
    /// The live processes of the command.
    fn members(&self) -> Vec<ProcRef> {
        match &self.tracking {
            Tracking::Cgroup(group) => group.members(),
            Tracking::Subreaper(s) => live_descendants(s.supervisor.pid),
        }
    }

    /// The forced kill of `live`.
    fn force_kill(&self, live: &[ProcRef]) {
        match &self.tracking {
            Tracking::Cgroup(group) => {
                if let Err(e) = group.kill() {
                    tracing::debug!("cgroup.kill failed, killing one by one: {e}");
                    live.iter().for_each(|p| {
                        p.signal(libc::SIGKILL);
                    });
                }
            }
            Tracking::Subreaper(_) => live.iter().for_each(|p| {
                p.signal(libc::SIGKILL);
            }),
        }
    }

    /// SIGTERM to every process, up to `grace` for them to leave, then SIGKILL until none is
    /// left. Counts each process once.
    async fn end_all(&mut self, grace: Duration) -> Cleanup {
        let mut seen: HashSet<ProcRef> = HashSet::new();
        let polite_until = Instant::now() + grace;
        let mut live = self.members();
        while !live.is_empty() && Instant::now() < polite_until {
            for process in &live {
                if seen.insert(*process) {
                    process.signal(libc::SIGTERM);
                }
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            live = self.members();
        }
        let forced_until = Instant::now() + FORCED_KILL_LIMIT;
        while !live.is_empty() {
            seen.extend(live.iter().copied());
            self.force_kill(&live);
            if Instant::now() >= forced_until {
                tracing::warn!(
                    survivors = live.len(),
                    "processes of a command outlived the forced kill"
                );
                return Cleanup {
                    killed: seen.len(),
                    complete: false,
                };
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            live = self.members();
        }
        Cleanup {
            killed: seen.len(),
            complete: true,
        }
    }

    /// Releases the tracking once nothing is left: removes the group, reaps the supervisor.
    async fn release(&mut self) {
        self.cleaned_up = true;
        match &mut self.tracking {
            Tracking::Cgroup(group) => {
                let deadline = Instant::now() + FORCED_KILL_LIMIT;
                while group.is_populated() && Instant::now() < deadline {
                    tokio::time::sleep(POLL_INTERVAL).await;
                }
                group.remove();
            }
            Tracking::Subreaper(_) => {
                // With its tree empty the supervisor exits on its own.
                let _ = tokio::time::timeout(FORCED_KILL_LIMIT, self.child.wait()).await;
            }
        }
    }
}

#[async_trait]
impl RunningProcess for LocalProcess {
    fn id(&self) -> Option<u32> {
        self.child.id()
    }

    fn take_output(&mut self) -> Option<OutputStream> {
        self.output.take()
    }

    async fn wait(&mut self) -> io::Result<ExitOutcome> {
        if let Some(outcome) = self.outcome {
            return Ok(outcome);
        }
        let outcome = match &mut self.tracking {
            Tracking::Cgroup(_) => {
                use std::os::unix::process::ExitStatusExt;
                let status = self.child.wait().await?;
                ExitOutcome {
                    code: status.code(),
                    signal: status.signal(),
                }
            }
            Tracking::Subreaper(s) => {
                // Each read is cancel-safe and what was read is kept, so the whole wait is.
                while s.received < reaper::STATUS_LEN
                    && let Some(pipe) = s.status.as_mut()
                {
                    match pipe.read(&mut s.message[s.received..]).await {
                        Ok(0) | Err(_) => s.status = None,
                        Ok(n) => s.received += n,
                    }
                }
                if s.received == reaper::STATUS_LEN {
                    let (status, others) = reaper::decode_status(&s.message);
                    s.others_left = others;
                    ExitOutcome::from_wait_status(status)
                } else {
                    // The supervisor died before the command: whatever it adopted went to
                    // init. Report how the supervisor ended; the cleanup says the rest.
                    use std::os::unix::process::ExitStatusExt;
                    s.lost = true;
                    let status = self.child.wait().await?;
                    ExitOutcome {
                        code: status.code(),
                        signal: status.signal(),
                    }
                }
            }
        };
        self.outcome = Some(outcome);
        Ok(outcome)
    }

    async fn terminate(&mut self, grace: Duration) -> io::Result<(ExitOutcome, Cleanup)> {
        let mut cleanup = self.end_all(grace).await;
        let outcome = self.wait().await?;
        if let Tracking::Subreaper(s) = &self.tracking {
            cleanup.complete &= !s.lost;
        }
        self.release().await;
        Ok((outcome, cleanup))
    }

    fn killer(&self) -> Option<Killer> {
        Some(match &self.tracking {
            Tracking::Cgroup(group) => {
                let kill = group.kill_file();
                Arc::new(move || {
                    let _ = std::fs::write(&kill, "1");
                })
            }
            Tracking::Subreaper(s) => {
                let supervisor = s.supervisor;
                Arc::new(move || kill_supervised_tree(supervisor))
            }
        })
    }

    async fn kill_leftovers(&mut self, grace: Duration) -> io::Result<Cleanup> {
        if self.cleaned_up {
            return Ok(Cleanup::NOTHING);
        }
        let cleanup = match &self.tracking {
            Tracking::Subreaper(s) if s.lost => Cleanup {
                killed: 0,
                complete: false,
            },
            Tracking::Subreaper(s) if !s.others_left => Cleanup::NOTHING,
            _ => self.end_all(grace).await,
        };
        self.release().await;
        Ok(cleanup)
    }
}

impl Drop for LocalProcess {
    fn drop(&mut self) {
        if self.cleaned_up {
            return;
        }
        // The call that owned this process was cancelled or its tool set dropped, and
        // nothing can be awaited here. A cgroup kills itself when dropped; a supervised tree
        // is killed from a thread, the supervisor last so that no orphan escapes it.
        if let Tracking::Subreaper(s) = &self.tracking {
            kill_supervised_tree(s.supervisor);
        }
    }
}

/// Kills a supervisor's tree from a thread of its own, the supervisor last so that no orphan
/// escapes it, without waiting.
fn kill_supervised_tree(supervisor: ProcRef) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + FORCED_KILL_LIMIT;
        loop {
            let live = live_descendants(supervisor.pid);
            if live.is_empty() || Instant::now() >= deadline {
                break;
            }
            live.iter().for_each(|p| {
                p.signal(libc::SIGKILL);
            });
            std::thread::sleep(POLL_INTERVAL);
        }
        supervisor.signal(libc::SIGKILL);
    });
}
