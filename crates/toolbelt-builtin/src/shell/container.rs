//! The container sandbox: every command in a bubblewrap (`bwrap`) container of its own user,
//! pid, ipc, uts and network namespaces, seeing only the host's system directories
//! (read-only), the base directory (read-write, or read-only for a read-only set) at the same
//! path, the tool set's private temp dir, and a private `/tmp` and home.
//!
//! Why a launcher in front of `bash -c` rather than a [`SandboxPolicy`](super::SandboxPolicy):
//! namespaces and mounts are set up by `bwrap` itself, which a Landlock-confined process could
//! not do (Landlock forbids mounting; the network seccomp filter would refuse the netlink
//! socket bwrap brings the loopback up with). The seccomp filter is applied inside instead:
//! bwrap installs it (`--seccomp FD`, a memfd per container) just before it runs the
//! command. Landlock is not: the only host paths writable inside are the base and temp dirs,
//! which `workspace-write` allows too, so it would deny nothing but writes to the private
//! tmpfs (SECURITY.md, "The container sandbox"). The command's processes still belong to the
//! [`Containment`](super::Containment) of the local backend (bwrap and everything inside are
//! in its cgroup or under its subreaper), so timeouts and leftovers are ended as for any
//! command, and the pid namespace ends every process inside when its first one exits.
//!
//! No `--die-with-parent`: it would SIGKILL everything inside the moment the command exits
//! (bwrap's outer process returns as soon as the command does, and its init would follow),
//! racing the containment's polite `SIGTERM` to the processes left running and its count of
//! them. bwrap's own init (pid 1 inside, waiting for the last process) is left out of that
//! count ([`namespace_inits`]).
//!
//! Checked once, when the sandbox is created: `bwrap` is present and this kernel lets an
//! unprivileged user create the namespaces (a trial container runs `true`). A machine without
//! either gets [`SandboxError::Unsupported`] naming the install hint, never a silent fallback.

use std::ffi::OsString;
use std::io::{self, Seek as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use seccompiler::BpfProgram;

use super::process::{OutputTarget, ProcessRequest};
use super::sandbox::SandboxError;

/// Where Debian's `bubblewrap` installs `bwrap`.
pub const DEFAULT_BWRAP: &str = "/usr/bin/bwrap";

/// The install hint every "not available" message ends with.
const INSTALL_HINT: &str = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`) and \
     allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, and on \
     Ubuntu `kernel.apparmor_restrict_unprivileged_userns=0`)";

/// The host's system directories, bound read-only where they exist.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// The home directory inside the container (an empty tmpfs).
pub const CONTAINER_HOME: &str = "/home/toolbelt";

/// A bubblewrap container description: the program, and whether the base dir is writable.
#[derive(Debug, Clone)]
pub struct Container {
    bwrap: PathBuf,
    writable: bool,
    /// The network seccomp filter of the Landlock modes, every `connect` refused (no
    /// Landlock inside to check unix-socket paths), handed to bwrap (`--seccomp FD`).
    network_filter: Arc<BpfProgram>,
}

impl Container {
    /// A container with `/usr/bin/bwrap` (or `bwrap` from `PATH`), checked by starting one.
    /// `writable` binds the base dir read-write.
    pub fn new(writable: bool) -> Result<Self, SandboxError> {
        let bwrap = if Path::new(DEFAULT_BWRAP).exists() {
            PathBuf::from(DEFAULT_BWRAP)
        } else {
            crate::which::on_path("bwrap")
                .next()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_BWRAP))
        };
        Self::with_bwrap(bwrap, writable)
    }

    /// A container run by the `bwrap` at `program`, checked by starting one.
    pub fn with_bwrap(program: impl Into<PathBuf>, writable: bool) -> Result<Self, SandboxError> {
        let container = Self {
            bwrap: program.into(),
            writable,
            network_filter: Arc::new(super::sandbox::network_filter(true)?),
        };
        container.probe()?;
        Ok(container)
    }

    /// The `bwrap` program.
    pub fn program(&self) -> &Path {
        &self.bwrap
    }

    /// Whether the base dir is writable inside.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Starts a trial container running `true`: the clearest place to learn that bwrap is
    /// missing or user namespaces are off.
    fn probe(&self) -> Result<(), SandboxError> {
        let filter = self.filter_fd().map_err(|e| {
            SandboxError::Setup(format!("could not hand the seccomp filter to bwrap: {e}"))
        })?;
        let fd = filter.as_raw_fd();
        let mut command = std::process::Command::new(&self.bwrap);
        command
            .args(self.namespace_args(false))
            .args(self.system_args())
            .arg("--seccomp")
            .arg(fd.to_string())
            .arg("--")
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: fcntl is async-signal-safe and touches only the filter's descriptor.
        unsafe {
            command.pre_exec(move || inherit(fd));
        }
        let output = command.output().map_err(|e| {
            SandboxError::Unsupported(format!(
                "the container sandbox needs bubblewrap, but {} could not be started ({e}): \
                 {INSTALL_HINT}",
                self.bwrap.display()
            ))
        })?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = toolbelt_core::text::shorten(stderr.trim(), 400);
        Err(SandboxError::Unsupported(format!(
            "the container sandbox could not start a container with {} ({}: {stderr}): \
             {INSTALL_HINT}",
            self.bwrap.display(),
            output.status
        )))
    }

    fn namespace_args(&self, terminal: bool) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
            "--unshare-cgroup-try",
            "--hostname",
            "toolbelt",
            "--cap-drop",
            "ALL",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        if !terminal {
            // A session of its own inside too: no controlling terminal to push keys into.
            args.push("--new-session".into());
        }
        args
    }

    fn system_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        for dir in SYSTEM_DIRS {
            args.extend(["--ro-bind-try".into(), (*dir).into(), (*dir).into()]);
        }
        for arg in ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"] {
            args.push(arg.into());
        }
        for arg in ["--tmpfs", "/home", "--dir", CONTAINER_HOME] {
            args.push(arg.into());
        }
        args
    }

    /// The network filter in a fresh memfd, read from its start: bwrap reads the program
    /// from the descriptor to its end, so each container gets its own.
    fn filter_fd(&self) -> io::Result<OwnedFd> {
        // SAFETY: a constant, NUL-terminated name; the returned descriptor is checked.
        let fd = unsafe { libc::memfd_create(c"toolbelt-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned here alone.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut bytes = Vec::with_capacity(self.network_filter.len() * 8);
        for instruction in self.network_filter.iter() {
            bytes.extend_from_slice(&instruction.code.to_ne_bytes());
            bytes.push(instruction.jt);
            bytes.push(instruction.jf);
            bytes.extend_from_slice(&instruction.k.to_ne_bytes());
        }
        file.write_all(&bytes)?;
        file.rewind()?;
        Ok(file.into())
    }

    /// The `bwrap` command line that runs `shell -c <command>` for `request` in a container,
    /// and the seccomp filter's descriptor, which the child must inherit ([`inherit`] in its
    /// `pre_exec`) and the parent keep open until the spawn.
    pub(crate) fn command(
        &self,
        shell: &Path,
        request: &ProcessRequest,
    ) -> io::Result<(tokio::process::Command, OwnedFd)> {
        let filter = self.filter_fd()?;
        let mut command = tokio::process::Command::new(&self.bwrap);
        let terminal = request.output == OutputTarget::Terminal;
        command
            .args(self.namespace_args(terminal))
            .args(self.system_args())
            .arg("--seccomp")
            .arg(filter.as_raw_fd().to_string());
        // After the tmpfs mounts, so a base dir under /tmp or /home is still the real one.
        let bind = if self.writable { "--bind" } else { "--ro-bind" };
        for root in &request.workspace_roots {
            command.arg(bind).arg(root).arg(root);
        }
        if let Some(temp) = &request.temp_dir {
            command.arg("--bind").arg(temp).arg(temp);
            for name in ["TMPDIR", "TMP", "TEMP"] {
                command.arg("--setenv").arg(name).arg(temp);
            }
        }
        command
            .arg("--setenv")
            .arg("HOME")
            .arg(CONTAINER_HOME)
            .arg("--chdir")
            .arg(&request.cwd)
            .arg("--")
            .arg(shell)
            .arg("-c")
            .arg(&request.command);
        Ok((command, filter))
    }
}

/// The `PATH` inside a tool set's container (its environment is cleared).
const CONTAINER_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl Container {
    /// The `bwrap` program and arguments that run `program args…` as a whole tool set in
    /// one container: `program` (a server of the tools, such as `toolbelt serve --stdio`)
    /// bound read-only at its own path, `base` bound at its own path (read-write when the
    /// container is writable) and the working directory, the environment cleared (only
    /// `PATH`, `HOME` and `LANG`: no secret of the caller's reaches the tools), the
    /// namespaces and system directories of a command's container, and the container ended
    /// with its parent. No seccomp filter is handed in: the server applies its own sandbox
    /// to the commands it runs, and the network namespace has only its own loopback.
    ///
    /// Paths that are not UTF-8 are refused (a process command line is kept as text).
    pub fn tool_set_command(
        &self,
        program: &Path,
        args: &[String],
        base: &Path,
    ) -> Result<(String, Vec<String>), SandboxError> {
        let text = |path: &Path| {
            path.to_str().map(str::to_string).ok_or_else(|| {
                SandboxError::Setup(format!(
                    "the container needs UTF-8 paths: {}",
                    path.display()
                ))
            })
        };
        let mut command: Vec<String> = self
            .namespace_args(false)
            .into_iter()
            .chain(self.system_args())
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        command.push("--die-with-parent".into());
        command.push("--clearenv".into());
        for (name, value) in [
            ("PATH", CONTAINER_PATH),
            ("HOME", CONTAINER_HOME),
            ("LANG", "C.UTF-8"),
        ] {
            command.extend(["--setenv".into(), name.into(), value.into()]);
        }
        // After the tmpfs mounts, so a program or base under /tmp or /home is the real one.
        let program = text(program)?;
        let base = text(base)?;
        command.extend(["--ro-bind".into(), program.clone(), program.clone()]);
        let bind = if self.writable { "--bind" } else { "--ro-bind" };
        command.extend([bind.into(), base.clone(), base.clone()]);
        command.extend(["--chdir".into(), base, "--".into(), program]);
        command.extend(args.iter().cloned());
        Ok((text(&self.bwrap)?, command))
    }
}

/// Lets the child keep `fd` across `exec` (every other descriptor is close-on-exec). Only
/// for a `pre_exec` hook: one system call, no allocation.
pub(crate) fn inherit(fd: RawFd) -> io::Result<()> {
    // SAFETY: clearing the descriptor flags of a descriptor the parent opened for the child.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How many of `pids` are the init of a pid namespace below this one (bwrap's pid 1), read
/// from `NSpid` in `/proc/PID/status`: its last field is 1 and it has more than one.
pub(crate) fn namespace_inits(pids: &[u32]) -> usize {
    pids.iter()
        .filter(|pid| {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                return false;
            };
            status
                .lines()
                .find_map(|line| line.strip_prefix("NSpid:"))
                .map(|ids| {
                    let ids: Vec<&str> = ids.split_whitespace().collect();
                    ids.len() > 1 && ids.last() == Some(&"1")
                })
                .unwrap_or(false)
        })
        .count()
}
