//! [`Contain`] starts a child inside a [`Containment`]; [`Contained`] is the running child and
//! every process it starts, until [`Contained::close`] (or a drop) has ended all of them.

use std::collections::HashSet;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::cgroup::{CallGroup, CgroupParent};
use crate::procs::{ProcRef, live_descendants, live_group_members};
use crate::reaper;

/// How long the forced kill of a child's processes may take before giving up on the
/// stragglers (they are reported as not killed).
const FORCED_KILL_LIMIT: Duration = Duration::from_secs(10);
/// How often the processes of a child are looked at while they are being ended.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// How the processes a child starts are kept track of, so that ending the child ends all of
/// them: also those that leave its process group or session (`setsid`, `set -m` jobs,
/// daemons that fork twice, Chromium's crash handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Containment {
    /// A cgroup where this process may create one, else a subreaper (the default).
    #[default]
    Auto,
    /// A cgroup v2 group per child, ended with `cgroup.kill`: nothing but a write to the
    /// cgroup file system gets a process out. Needs a writable cgroup2 hierarchy (root, or a
    /// delegated subtree) and Linux 5.14+; starting a child fails without them.
    Cgroup,
    /// A supervisor process per child that is the child subreaper of everything the child
    /// starts, so orphans stay in its tree. Needs no privilege; an unsandboxed child can
    /// defeat it by killing its supervisor (the [`Cleanup`] then says so).
    Subreaper,
    /// The child's own session and process group only. A descendant that calls `setsid` or
    /// `setpgid` leaves it and is out of reach: the last resort, never chosen by
    /// [`Containment::Auto`].
    ProcessGroup,
}

impl Containment {
    /// What a child started now gets: [`Containment::Auto`] resolved to
    /// [`Containment::Cgroup`] where this process may create a group, else
    /// [`Containment::Subreaper`]; any other choice as it is.
    pub fn resolve(self) -> Containment {
        match self {
            Containment::Auto if CgroupParent::detect().is_some() => Containment::Cgroup,
            Containment::Auto => Containment::Subreaper,
            chosen => chosen,
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitOutcome {
    /// The exit code, when the child exited normally.
    pub code: Option<i32>,
    /// The signal that ended the child, when a signal did.
    pub signal: Option<i32>,
}

impl ExitOutcome {
    /// Whether the child exited with code 0.
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

    fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self {
            code: status.code(),
            signal: status.signal(),
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

/// What ending a child's processes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cleanup {
    /// How many processes were signalled to end: those the child left running, plus the
    /// child itself when it was still running.
    pub killed: usize,
    /// Whether every process the child started was followed to its end. `false` when the
    /// tracking itself was defeated (an unsandboxed child killed its supervisor) or
    /// processes outlived the forced kill: some may still be running.
    pub complete: bool,
}

impl Cleanup {
    /// Nothing was left to end.
    pub const NOTHING: Cleanup = Cleanup {
        killed: 0,
        complete: true,
    };
    /// The tracking failed: nothing is known to have been ended.
    pub const UNKNOWN: Cleanup = Cleanup {
        killed: 0,
        complete: false,
    };
}

/// The grace periods of [`Contained::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    /// How long the child may take to exit on its own once its stdin is closed.
    pub eof: Duration,
    /// How long its processes may take to exit after `SIGTERM`, before `SIGKILL`.
    pub term: Duration,
}

/// Kills every process of a child at once, without waiting ([`Contained::killer`]).
pub type Killer = Arc<dyn Fn() + Send + Sync>;

/// Work to run in the child after `fork`, before `exec` (a sandbox, descriptors moved into
/// place). It runs in a copy of a possibly multi-threaded parent, so it must not take locks
/// or allocate: prepare everything before [`Contain::spawn`] and only make system calls.
pub type PreExec = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// Starts children inside a [`Containment`].
///
/// The child runs in a session of its own (no controlling terminal, one group), inherits no
/// open descriptor besides stdin, stdout and stderr (others are marked close-on-exec before
/// the [`PreExec`] hook runs, so a hook may still put descriptors in place), and is moved
/// into its containment before its first instruction runs.
pub struct Contain {
    containment: Containment,
    hook: Option<PreExec>,
}

impl fmt::Debug for Contain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contain")
            .field("containment", &self.containment)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl Contain {
    /// Children get `containment` ([`Containment::Auto`] resolved at each spawn).
    pub fn new(containment: Containment) -> Self {
        Self {
            containment,
            hook: None,
        }
    }

    /// Runs `hook` in the child after it joined its containment, last before `exec`.
    pub fn pre_exec(mut self, hook: PreExec) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Starts `command` (program, arguments, environment, directory and stdio as its owner
    /// set them). Its `pre_exec` hooks must come through [`Contain::pre_exec`] and its
    /// `kill_on_drop` is turned off: dropping the [`Contained`] ends the whole tree instead.
    /// Needs a Tokio runtime.
    pub fn spawn(self, mut command: Command) -> io::Result<Contained> {
        let containment = self.containment.resolve();
        let prepared = match containment {
            Containment::Cgroup => {
                let parent = CgroupParent::detect().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::Unsupported,
                        "cgroup containment is not available: no writable cgroup v2 hierarchy \
                         with cgroup.kill (Linux 5.14+) for this process",
                    )
                })?;
                Prepared::Cgroup(CallGroup::create(parent)?)
            }
            Containment::Subreaper => {
                let (read_end, write_end) = io::pipe()?;
                Prepared::Subreaper {
                    status_read: read_end.into(),
                    status_write: write_end.into(),
                }
            }
            _ => Prepared::Group,
        };
        let (procs_fd, status_fd) = match &prepared {
            Prepared::Cgroup(group) => (Some(group.procs_fd()), None),
            Prepared::Subreaper { status_write, .. } => (None, Some(status_write.as_raw_fd())),
            Prepared::Group => (None, None),
        };
        let mut user_hook = self.hook;
        let hook = move || -> io::Result<()> {
            // SAFETY (of every call below): this runs in the forked child before exec, and
            // only makes system calls on descriptors prepared in the parent.
            unsafe {
                // Descriptors the parent left inheritable (a library user's sockets) must not
                // reach the child; marking them close-on-exec keeps the standard library's
                // own exec-error pipe working until the exec.
                libc::syscall(
                    libc::SYS_close_range,
                    3,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
                if let Some(fd) = procs_fd {
                    crate::cgroup::join_from_child(fd)?;
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
            if let Some(hook) = user_hook.as_mut() {
                hook()?;
            }
            Ok(())
        };
        // SAFETY: the hook only makes async-signal-safe system calls (see above and
        // `PreExec`), allocating nothing on its success path.
        unsafe {
            command.pre_exec(hook);
        }
        command.kill_on_drop(false);
        let child = command.spawn()?;
        // Dropping the command closes the parent's copies of descriptors it was given for
        // the child (a pipe's write end), so readers see end-of-file once the child is gone.
        drop(command);
        let spawned = child
            .id()
            .ok_or_else(|| io::Error::other("the child vanished"))?;
        let (pid, tracking) = match prepared {
            Prepared::Cgroup(group) => (spawned, Tracking::Cgroup(group)),
            Prepared::Group => (spawned, Tracking::Group),
            Prepared::Subreaper {
                status_read,
                status_write,
            } => {
                drop(status_write);
                // Written before the supervisor closed its copy of the exec-error pipe, so
                // it is there now that `spawn` returned.
                let mut file = std::fs::File::from(status_read);
                let mut pid = [0u8; reaper::PID_LEN];
                file.read_exact(&mut pid).map_err(|e| {
                    io::Error::other(format!("the child's supervisor did not report: {e}"))
                })?;
                let pid = u32::try_from(i32::from_ne_bytes(pid))
                    .map_err(|_| io::Error::other("the supervisor reported a bad pid"))?;
                // The supervisor may already have ended (a command as short as `true`), but
                // it stays a zombie until it is reaped here, so its start time can be read.
                let supervisor = ProcRef::of(spawned)
                    .ok_or_else(|| io::Error::other("the child's supervisor vanished"))?;
                let status = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(file))?;
                (
                    pid,
                    Tracking::Subreaper(Supervised {
                        supervisor,
                        status: Some(status),
                        message: [0; reaper::STATUS_LEN],
                        received: 0,
                        others_left: true,
                        lost: false,
                    }),
                )
            }
        };
        Ok(Contained {
            child,
            pid,
            containment,
            tracking,
            outcome: None,
            cleaned_up: false,
        })
    }
}

/// Tracking prepared in the parent before the spawn.
enum Prepared {
    Cgroup(CallGroup),
    Subreaper {
        status_read: OwnedFd,
        status_write: OwnedFd,
    },
    Group,
}

/// A child started by [`Contain::spawn`], with every process it started.
///
/// Dropping it before its processes were ended ([`Contained::close`],
/// [`Contained::terminate`], [`Contained::kill_leftovers`], [`Contained::kill_blocking`])
/// kills all of them at once, so an abandoned owner never leaves an orphan behind.
pub struct Contained {
    /// The child (cgroup, process group) or its supervisor (subreaper).
    child: Child,
    /// The child's own pid (not its supervisor's).
    pid: u32,
    containment: Containment,
    tracking: Tracking,
    /// Set once the child has ended.
    outcome: Option<ExitOutcome>,
    /// Set once every process of the child has been ended and the tracking released.
    cleaned_up: bool,
}

impl fmt::Debug for Contained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contained")
            .field("pid", &self.pid)
            .field("containment", &self.containment)
            .field("outcome", &self.outcome)
            .finish()
    }
}

/// How the processes of one child are tracked.
enum Tracking {
    Cgroup(CallGroup),
    Subreaper(Supervised),
    /// The child's process group, whose id is the child's pid (it called `setsid`).
    Group,
}

/// A child under a subreaper supervisor.
struct Supervised {
    supervisor: ProcRef,
    /// The supervisor's status pipe; `None` once read to its end.
    status: Option<tokio::net::unix::pipe::Receiver>,
    message: [u8; reaper::STATUS_LEN],
    received: usize,
    /// Whether processes other than the child were running when it ended.
    others_left: bool,
    /// The supervisor died before the child: orphans may have escaped to init.
    lost: bool,
}

impl Contained {
    /// The child's process id (the program the command named; under a subreaper, not its
    /// supervisor). It leads its own session and process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The containment the child got ([`Containment::Auto`] resolved).
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The child's stdin, once, when the command piped it.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The child's stdout, once, when the command piped it.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The child's stderr, once, when the command piped it.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// The live processes of the child (the child included while it runs).
    pub fn members(&self) -> Vec<u32> {
        self.live().iter().map(|p| p.pid).collect()
    }

    fn live(&self) -> Vec<ProcRef> {
        match &self.tracking {
            Tracking::Cgroup(group) => group.members(),
            Tracking::Subreaper(s) => live_descendants(s.supervisor.pid),
            Tracking::Group => live_group_members(self.pid),
        }
    }

    /// Waits for the child itself to exit (what it started may go on running). Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitOutcome> {
        if let Some(outcome) = self.outcome {
            return Ok(outcome);
        }
        let outcome = match &mut self.tracking {
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
                match supervised_outcome(s) {
                    Some(outcome) => outcome,
                    // The supervisor died before the child: whatever it adopted went to
                    // init. Report how the supervisor ended; the cleanup says the rest.
                    None => ExitOutcome::from_status(self.child.wait().await?),
                }
            }
            _ => ExitOutcome::from_status(self.child.wait().await?),
        };
        self.outcome = Some(outcome);
        Ok(outcome)
    }

    /// How the child ended, if it has; never waits.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitOutcome>> {
        if let Some(outcome) = self.outcome {
            return Ok(Some(outcome));
        }
        let outcome = match &mut self.tracking {
            Tracking::Subreaper(s) => {
                while s.received < reaper::STATUS_LEN
                    && let Some(pipe) = s.status.as_mut()
                {
                    match pipe.try_read(&mut s.message[s.received..]) {
                        Ok(0) => s.status = None,
                        Ok(n) => s.received += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                        Err(_) => s.status = None,
                    }
                }
                match supervised_outcome(s) {
                    Some(outcome) => outcome,
                    None => match self.child.try_wait()? {
                        Some(status) => ExitOutcome::from_status(status),
                        None => return Ok(None),
                    },
                }
            }
            _ => match self.child.try_wait()? {
                Some(status) => ExitOutcome::from_status(status),
                None => return Ok(None),
            },
        };
        self.outcome = Some(outcome);
        Ok(Some(outcome))
    }

    /// The graceful end: closes the child's stdin (if it is still held here; an owner that
    /// took it closes it first), gives the child `grace.eof` to exit, then ends what is left
    /// with [`Contained::terminate`] or [`Contained::kill_leftovers`] and `grace.term`. The
    /// outcome is `None` only when the child could not be reaped.
    pub async fn close(&mut self, grace: Grace) -> (Option<ExitOutcome>, Cleanup) {
        drop(self.child.stdin.take());
        let exited = tokio::time::timeout(grace.eof, self.wait()).await;
        match exited {
            Ok(Ok(outcome)) => {
                let cleanup = self.kill_leftovers(grace.term).await;
                (Some(outcome), cleanup)
            }
            _ => match self.terminate(grace.term).await {
                Ok((outcome, cleanup)) => (Some(outcome), cleanup),
                Err(e) => {
                    tracing::debug!(pid = self.pid, "could not reap a child: {e}");
                    (None, Cleanup::UNKNOWN)
                }
            },
        }
    }

    /// Ends the child and everything it started: `SIGTERM` to every process, then, after
    /// `grace`, `SIGKILL` until none is left; reaps the child and checks that every
    /// process is gone.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<(ExitOutcome, Cleanup)> {
        let mut cleanup = self.end_all(grace).await;
        let outcome = self.wait().await?;
        if let Tracking::Subreaper(s) = &self.tracking {
            cleanup.complete &= !s.lost;
        }
        self.release().await;
        Ok((outcome, cleanup))
    }

    /// Ends whatever the child left running after it exited itself (background jobs,
    /// daemons, `setsid` children) with the same polite-then-forced sequence, and releases
    /// the tracking. Call it once [`Contained::wait`] returned.
    pub async fn kill_leftovers(&mut self, grace: Duration) -> Cleanup {
        if self.cleaned_up {
            return Cleanup::NOTHING;
        }
        let cleanup = match &self.tracking {
            Tracking::Subreaper(s) if s.lost => Cleanup::UNKNOWN,
            Tracking::Subreaper(s) if !s.others_left && self.outcome.is_some() => Cleanup::NOTHING,
            _ => self.end_all(grace).await,
        };
        // The child was waited for; with nothing left this only collects its status.
        if self.outcome.is_none() {
            let _ = self.try_wait();
        }
        self.release().await;
        cleanup
    }

    /// Kills every process at once and waits, blocking the thread, at most `limit` for all
    /// of them to be gone and the child reaped: for an owner's `Drop`, which cannot await
    /// but must not return while the child's processes still run (they may write to files
    /// the owner removes next).
    pub fn kill_blocking(&mut self, limit: Duration) -> Cleanup {
        if self.cleaned_up {
            return Cleanup::NOTHING;
        }
        self.cleaned_up = true;
        let deadline = Instant::now() + limit;
        let mut seen: HashSet<ProcRef> = HashSet::new();
        let mut complete = true;
        loop {
            let live = self.live();
            if live.is_empty() {
                break;
            }
            seen.extend(live.iter().copied());
            self.force_kill(&live);
            if Instant::now() >= deadline {
                complete = false;
                break;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        // Reap the child (or the supervisor, which exits once its tree is empty).
        while !matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)) {
            if Instant::now() >= deadline {
                complete = false;
                break;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        match &mut self.tracking {
            Tracking::Cgroup(group) => {
                while group.is_populated() && Instant::now() < deadline {
                    std::thread::sleep(POLL_INTERVAL);
                }
                group.remove();
            }
            Tracking::Subreaper(s) => {
                complete &= !s.lost;
                // Gone already unless it outlived the deadline.
                s.supervisor.signal(libc::SIGKILL);
            }
            Tracking::Group => {}
        }
        Cleanup {
            killed: seen.len(),
            complete,
        }
    }

    /// A handle that kills every process of the child at once, without waiting, from code
    /// that cannot await while the child itself is held elsewhere.
    pub fn killer(&self) -> Killer {
        match &self.tracking {
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
            Tracking::Group => {
                let group = self.pid;
                Arc::new(move || kill_group(group))
            }
        }
    }

    /// The forced kill of `live`.
    fn force_kill(&self, live: &[ProcRef]) {
        if let Tracking::Cgroup(group) = &self.tracking {
            match group.kill() {
                Ok(()) => return,
                Err(e) => tracing::debug!("cgroup.kill failed, killing one by one: {e}"),
            }
        }
        live.iter().for_each(|p| {
            p.signal(libc::SIGKILL);
        });
    }

    /// SIGTERM to every process, up to `grace` for them to leave, then SIGKILL until none is
    /// left. Counts each process once.
    async fn end_all(&mut self, grace: Duration) -> Cleanup {
        let mut seen: HashSet<ProcRef> = HashSet::new();
        let polite_until = Instant::now() + grace;
        let mut live = self.live();
        while !live.is_empty() && Instant::now() < polite_until {
            for process in &live {
                if seen.insert(*process) {
                    process.signal(libc::SIGTERM);
                }
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            live = self.live();
        }
        let forced_until = Instant::now() + FORCED_KILL_LIMIT;
        while !live.is_empty() {
            seen.extend(live.iter().copied());
            self.force_kill(&live);
            if Instant::now() >= forced_until {
                tracing::warn!(
                    survivors = live.len(),
                    pid = self.pid,
                    "processes of a child outlived the forced kill"
                );
                return Cleanup {
                    killed: seen.len(),
                    complete: false,
                };
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            live = self.live();
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
            Tracking::Group => {}
        }
    }
}

/// The child's outcome from the supervisor's message, once it is complete; `None` (and the
/// tracking marked lost) when the pipe closed without one.
fn supervised_outcome(s: &mut Supervised) -> Option<ExitOutcome> {
    if s.received == reaper::STATUS_LEN {
        let (status, others) = reaper::decode_status(&s.message);
        s.others_left = others;
        Some(ExitOutcome::from_wait_status(status))
    } else {
        s.lost = true;
        None
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        if self.cleaned_up {
            return;
        }
        // The owner was dropped or its call cancelled, and nothing can be awaited here. A
        // cgroup kills itself when dropped; a supervised tree is killed from a thread, the
        // supervisor last so that no orphan escapes it; a group's members are killed now.
        // Tokio reaps a dropped child in the background.
        match &self.tracking {
            Tracking::Cgroup(_) => {}
            Tracking::Subreaper(s) => kill_supervised_tree(s.supervisor),
            Tracking::Group => kill_group(self.pid),
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

/// Kills every live member of process group `group` once, each through a pidfd.
fn kill_group(group: u32) {
    live_group_members(group).iter().for_each(|p| {
        p.signal(libc::SIGKILL);
    });
}
