//! Where commands run: the [`ProcessBackend`] trait and its local default,
//! [`LocalProcessBackend`], which runs `bash -c` as a child process and keeps track of every
//! process it starts ([`Containment`], the one process owner `toolbelt-process`), so that all
//! of them can be ended. Bash's own part is what a command is: `bash -c`, merged output, the
//! sandbox hook.
//!
//! The shell tools never spawn processes themselves; they hand a [`ProcessRequest`] to a
//! backend. A container or a remote runner plugs in by implementing the same trait. The local
//! backend takes an optional [`SandboxPolicy`] that confines the child before it execs.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncRead;
use toolbelt_process::{Contain, Contained, Pty};

use super::container::Container;
use super::sandbox::SandboxPolicy;

pub use toolbelt_process::{Cleanup, Containment, ExitOutcome, Killer, PtyMaster};

/// Where a command's output goes. stdout and stderr always share one destination, so their
/// lines stay in the order the command wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputTarget {
    /// A pipe the caller reads from ([`RunningProcess::take_output`]).
    Pipe,
    /// A file the command appends to directly (for background tasks).
    File(PathBuf),
    /// A new pseudo-terminal, the command's stdin, stdout, stderr and controlling terminal
    /// (for terminal sessions): the caller reads and writes it through
    /// [`RunningProcess::take_terminal`].
    Terminal,
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

/// A readable stream of a command's merged stdout and stderr.
pub type OutputStream = Pin<Box<dyn AsyncRead + Send>>;

/// A command that has been started.
///
/// Dropping a running process that has not been waited for kills every process it started,
/// so a cancelled call never leaves an orphan behind.
#[async_trait]
pub trait RunningProcess: Send {
    /// The OS process id of the command (the shell the backend started, not a supervisor
    /// it runs under), when there is one.
    fn id(&self) -> Option<u32>;

    /// The merged output stream, once, when the request asked for [`OutputTarget::Pipe`].
    fn take_output(&mut self) -> Option<OutputStream>;

    /// The terminal's parent end, once, when the request asked for
    /// [`OutputTarget::Terminal`]. Backends without terminals return `None`.
    fn take_terminal(&mut self) -> Option<Arc<PtyMaster>> {
        None
    }

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
/// The child has stdin connected to `/dev/null`, runs in a session of its own (no controlling
/// terminal), inherits no open descriptor besides stdin, stdout and stderr, is contained as
/// [`Containment`] says and, with a sandbox, is confined before it execs.
#[derive(Clone)]
pub struct LocalProcessBackend {
    shell: PathBuf,
    sandbox: Option<Arc<dyn SandboxPolicy>>,
    container: Option<Arc<Container>>,
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
            .field("container", &self.container)
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
            container: None,
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

    /// Runs every command in a bubblewrap container of its own ([`Container`]). A
    /// [`SandboxPolicy`] is then not applied: the container's namespaces and mounts replace
    /// it (a Landlock-confined process could not set them up), and bwrap applies the network
    /// seccomp filter inside.
    pub fn with_container(mut self, container: Arc<Container>) -> Self {
        self.container = Some(container);
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
        self.containment.resolve()
    }
}

#[async_trait]
impl ProcessBackend for LocalProcessBackend {
    fn name(&self) -> &str {
        match (&self.container, &self.sandbox) {
            (Some(_), _) => "container",
            (None, Some(_)) => "local (sandboxed)",
            (None, None) => "local",
        }
    }

    async fn spawn(&self, request: ProcessRequest) -> io::Result<Box<dyn RunningProcess>> {
        let (mut command, filter) = match &self.container {
            Some(container) => {
                let (command, filter) = container.command(&self.shell, &request)?;
                (command, Some(filter))
            }
            None => {
                let mut command = tokio::process::Command::new(&self.shell);
                command.arg("-c").arg(&request.command);
                (command, None)
            }
        };
        let filter_fd = filter.as_ref().map(|fd| fd.as_raw_fd());
        command
            .current_dir(&request.cwd)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        let mut reader = None;
        let mut terminal = None;
        match &request.output {
            OutputTarget::Terminal => {
                let pty = Pty::open(24, 200)?;
                command
                    .stdin(pty.slave.try_clone()?)
                    .stdout(pty.slave.try_clone()?)
                    .stderr(pty.slave);
                terminal = Some(Arc::new(pty.master));
            }
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
        let mut contain = Contain::new(self.containment);
        let mut sandbox_hook = match self.sandbox.as_ref().filter(|_| self.container.is_none()) {
            Some(sandbox) => Some(
                sandbox
                    .child_hook(&request)
                    .map_err(|e| io::Error::other(format!("sandbox {}: {e}", sandbox.name())))?,
            ),
            None => None,
        };
        let wants_terminal = terminal.is_some();
        if wants_terminal || sandbox_hook.is_some() || filter_fd.is_some() {
            contain = contain.pre_exec(Box::new(move || {
                // The terminal first: the sandbox's seccomp filter may refuse the ioctl.
                if wants_terminal {
                    toolbelt_process::take_controlling_terminal();
                }
                if let Some(fd) = filter_fd {
                    super::container::inherit(fd)?;
                }
                match sandbox_hook.as_mut() {
                    Some(hook) => hook(),
                    None => Ok(()),
                }
            }));
        }
        let spawned = contain.spawn(command);
        // The child has its copy (or failed); bwrap read the filter from it.
        drop(filter);
        let process = spawned.map_err(|e| {
            let confinement = match &self.sandbox {
                Some(sandbox) => format!(" in the {} sandbox", sandbox.name()),
                None => String::new(),
            };
            io::Error::new(
                e.kind(),
                format!("could not start {}{confinement}: {e}", self.shell.display()),
            )
        })?;
        let output = match reader {
            Some(read_end) => {
                let fd: OwnedFd = read_end.into();
                let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
                Some(Box::pin(receiver) as OutputStream)
            }
            None => None,
        };
        Ok(Box::new(LocalProcess {
            process,
            output,
            terminal,
            container: self.container.is_some(),
        }))
    }
}

/// A command started by [`LocalProcessBackend`]: the contained child and its merged output
/// or terminal.
struct LocalProcess {
    process: Contained,
    output: Option<OutputStream>,
    terminal: Option<Arc<PtyMaster>>,
    /// Whether the child is a bubblewrap container, whose own init process is not one the
    /// command started (see [`LocalProcess::not_the_command`]).
    container: bool,
}

impl LocalProcess {
    /// A cleanup without the container's init processes (pid 1 of its pid namespace, which
    /// outlives the command until its last process is gone) among those it ended: a command
    /// that left nothing running is not told it did.
    fn not_the_command(&self, inits: usize, cleanup: Cleanup) -> Cleanup {
        Cleanup {
            killed: cleanup.killed.saturating_sub(inits),
            ..cleanup
        }
    }

    /// How many of the child's processes are a container's init (`0` outside a container).
    fn container_inits(&self) -> usize {
        if self.container {
            super::container::namespace_inits(&self.process.members())
        } else {
            0
        }
    }
}

#[async_trait]
impl RunningProcess for LocalProcess {
    fn id(&self) -> Option<u32> {
        Some(self.process.pid())
    }

    fn take_output(&mut self) -> Option<OutputStream> {
        self.output.take()
    }

    fn take_terminal(&mut self) -> Option<Arc<PtyMaster>> {
        self.terminal.take()
    }

    async fn wait(&mut self) -> io::Result<ExitOutcome> {
        self.process.wait().await
    }

    async fn terminate(&mut self, grace: Duration) -> io::Result<(ExitOutcome, Cleanup)> {
        let inits = self.container_inits();
        let (outcome, cleanup) = self.process.terminate(grace).await?;
        Ok((outcome, self.not_the_command(inits, cleanup)))
    }

    async fn kill_leftovers(&mut self, grace: Duration) -> io::Result<Cleanup> {
        // Counted before: the init is alive as long as anything else inside is, so it is
        // among the processes ended whenever it was seen here with others, and one seen
        // alone exits on its own within the grace.
        let inits = self.container_inits();
        let cleanup = self.process.kill_leftovers(grace).await;
        Ok(self.not_the_command(inits, cleanup))
    }

    fn killer(&self) -> Option<Killer> {
        Some(self.process.killer())
    }
}
