//! The container sandbox: every command in a bubblewrap (`bwrap`) container of its own user,
//! pid, ipc, uts and network namespaces, seeing only the host's system directories
//! (read-only), the base directory (read-write, or read-only for a read-only set) at the same
//! path, the tool set's private temp dir, and a private `/tmp` and home.
//!
//! Why a launcher in front of `bash -c` rather than a [`SandboxPolicy`](super::SandboxPolicy):
//! namespaces and mounts are set up by `bwrap` itself, which a Landlock-confined process could
//! not do (Landlock forbids mounting; the network seccomp filter would refuse the netlink
//! socket bwrap brings the loopback up with). Nor are they applied inside, after bwrap: the
//! only host paths writable there are the base and temp dirs, which `workspace-write` allows
//! too, so Landlock would deny nothing but writes to the private tmpfs (SECURITY.md, "The
//! container sandbox"). The command's processes still belong to the
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
use std::path::{Path, PathBuf};
use std::process::Stdio;

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
        let mut command = std::process::Command::new(&self.bwrap);
        command
            .args(self.namespace_args(false))
            .args(self.system_args())
            .arg("--")
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
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
        let stderr: String = stderr.trim().chars().take(400).collect();
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

    /// The `bwrap` command line that runs `shell -c <command>` for `request` in a container.
    pub(crate) fn command(
        &self,
        shell: &Path,
        request: &ProcessRequest,
    ) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.bwrap);
        let terminal = request.output == OutputTarget::Terminal;
        command
            .args(self.namespace_args(terminal))
            .args(self.system_args());
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
        command
    }
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
