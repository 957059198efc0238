//! Sandboxes for shell commands: what a sandbox allows ([`SandboxMode`], policy as data), the
//! [`SandboxPolicy`] trait a backend applies, and [`LandlockSandbox`], which enforces a mode on
//! Linux with Landlock and seccomp.
//!
//! A command policy (allow and deny lists) only checks what a command *says*; a sandbox limits
//! what it can *do*, whatever it says. The restriction is applied in the child after `fork`
//! and before `exec`, so it covers the shell and everything it starts, and it cannot be lifted
//! from inside.
//!
//! # What the Landlock sandbox guarantees
//!
//! With [`SandboxMode::WorkspaceWrite`] a command may read and execute anything this process
//! may, and:
//!
//! - **writes** (create, write, truncate, rename, link, delete, mkdir, mknod, symlink) only
//!   beneath the base dir, the tool set's private temp dir (its `TMPDIR`) and to `/dev/null`,
//!   `/dev/zero`, `/dev/full`, `/dev/tty`; with [`SandboxMode::ReadOnly`], not even beneath
//!   the base dir. Checked by Landlock (ABI 3+, Linux 6.2+), whose rules are resolved by the
//!   kernel at each access, so symlinks and `..` do not get around them.
//! - **no network**: `socket(2)` fails for every address family but `AF_UNIX`, and for
//!   `AF_UNIX` datagram sockets (seccomp); `connect(2)` fails for every socket (seccomp), so
//!   neither TCP, UDP, raw sockets, netlink nor a unix-socket server outside the sandbox (the
//!   Docker daemon, an SSH agent) can be reached; `io_uring`, which could open and connect
//!   sockets around seccomp, is unavailable. Landlock's own TCP rules (ABI 4+) deny TCP
//!   `bind` and `connect` as a second layer.
//! - **scoped IPC** (ABI 6+, Linux 6.12+): no signal to a process outside the sandbox (`kill`
//!   of the user's editor, of Toolbelt itself, of the supervisor that tracks the command's
//!   processes), and no connection to an abstract unix socket created outside.
//! - **no device ioctls** (ABI 5+, Linux 6.10+) on devices opened inside the sandbox; the
//!   command also has no controlling terminal (it runs in a session of its own), so it cannot
//!   push keystrokes into the user's terminal (`TIOCSTI`).
//! - **no privilege gain**: `no_new_privs` is set, so setuid programs do not raise privileges.
//!
//! The highest Landlock ABI the kernel offers is used; below ABI 3 the sandbox refuses to
//! start rather than run unconfined.
//!
//! # Known limits
//!
//! - **Metadata changes outside the writable area still work**: Landlock (up to ABI 7) has no
//!   right for `chmod`, `chown`, `utime`/`touch -d` of an existing file, or extended
//!   attributes, so a command can change the mode, owner (as root) or timestamps of files it
//!   cannot write. It still cannot change their content or names.
//! - **Unix-socket clients fail even inside the base dir**: seccomp cannot see which path a
//!   `connect` names, so every `connect` is refused. On kernels with Landlock ABI 9+ (Linux
//!   7.1+), which checks unix-socket connects by path, connects to sockets beneath the writable
//!   area are allowed and only those outside are refused. Socket pairs and pipes work.
//! - **Below ABI 6** (before Linux 6.12) signals and abstract unix sockets are not scoped: a
//!   command may signal any process of the same user, including its own supervisor (which
//!   can let orphans escape the subreaper containment, and the result then says so).
//! - Reading is not restricted: a sandboxed command can read any file this process can
//!   (secrets in `~/.ssh`, other projects). Run Toolbelt as a user that cannot read what the
//!   model must not see.
//! - Inherited environment and open descriptors are not the sandbox's job: the environment
//!   comes from the tool set's `EnvPolicy`, and descriptors other than stdin/stdout/stderr are
//!   closed on exec by the backend.
//! - Writes through descriptors opened before the sandbox (the task log the backend opens)
//!   are not checked; the backend opens nothing else for the command.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::process::ProcessRequest;

/// Why a sandbox could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel does not offer what the sandbox needs.
    #[error("{0}")]
    Unsupported(String),
    /// The sandbox could not be prepared for a command.
    #[error("could not prepare the sandbox: {0}")]
    Setup(String),
}

/// What shell commands may do: the sandbox policy as data. [`LandlockSandbox`] enforces it on
/// Linux.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxMode {
    /// No sandbox: commands may do whatever this process may.
    Off,
    /// Read anywhere; write only to the tool set's private temp dir and `/dev/null` (and a few
    /// other devices); no network.
    ReadOnly,
    /// Read anywhere; write beneath the base dir, the private temp dir and `/dev/null`; no
    /// network.
    WorkspaceWrite,
    /// Every command in a bubblewrap container of its own namespaces that sees only the
    /// system directories (read-only), the base dir and a private `/tmp` and home
    /// ([`Container`](super::Container)); no network, no host process visible.
    Container,
}

impl SandboxMode {
    /// The mode's name as the command line spells it: `off`, `read-only`, `workspace-write`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Container => "container",
        }
    }

    /// `workspace-write` where this kernel can enforce it, else `off`.
    pub fn best_available() -> SandboxMode {
        match LandlockSandbox::new(SandboxMode::WorkspaceWrite) {
            Ok(_) => SandboxMode::WorkspaceWrite,
            Err(_) => SandboxMode::Off,
        }
    }

    /// The sandbox policy that enforces this mode here (`None` for [`SandboxMode::Off`] and
    /// for [`SandboxMode::Container`], which is a process backend, not a policy: see
    /// [`Container`](super::Container)). Fails when the kernel cannot enforce it: a sandbox
    /// is never silently left out.
    pub fn sandbox(self) -> Result<Option<Arc<dyn SandboxPolicy>>, SandboxError> {
        match self {
            SandboxMode::Off | SandboxMode::Container => Ok(None),
            mode => Ok(Some(Arc::new(LandlockSandbox::new(mode)?))),
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(SandboxMode::Off),
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "container" => Ok(SandboxMode::Container),
            other => Err(format!(
                "unknown sandbox mode {other:?}; expected off, read-only, workspace-write or \
                 container"
            )),
        }
    }
}

/// Work to run in the child process after `fork`, before `exec`.
///
/// It runs in a copy of a possibly multi-threaded parent, so it must not take locks or
/// allocate: prepare everything in [`SandboxPolicy::child_hook`] and only make system calls
/// here.
pub type ChildHook = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// A confinement applied to every command a [`LocalProcessBackend`](super::LocalProcessBackend)
/// starts.
///
/// Other isolation (a container, a remote runner) is a different
/// [`ProcessBackend`](super::ProcessBackend) rather than a sandbox policy.
pub trait SandboxPolicy: Send + Sync + fmt::Debug {
    /// A short name, for messages.
    fn name(&self) -> &str;

    /// Prepares the confinement of one command and returns the hook that applies it in the
    /// child.
    fn child_hook(&self, request: &ProcessRequest) -> Result<ChildHook, SandboxError>;
}

/// The oldest Landlock ABI the sandbox accepts: ABI 3 added truncation, without which a
/// command could truncate any file.
const MIN_ABI: i32 = 3;

/// Device files every shell writes to (`> /dev/null`), writable even in the sandbox.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Enforces a [`SandboxMode`] with Linux Landlock (files, TCP, signals, abstract sockets) and
/// seccomp (every other socket). See the [module docs](self) for what it guarantees and its
/// known limits.
///
/// Creating one checks that the kernel offers Landlock ABI 3 or newer, and fails with
/// [`SandboxError::Unsupported`] otherwise: the sandbox never silently runs commands
/// unconfined. It then uses the highest ABI the kernel offers.
///
/// ```no_run
/// use toolbelt_builtin::shell::{LandlockSandbox, SandboxMode};
///
/// let sandbox = LandlockSandbox::new(SandboxMode::WorkspaceWrite)?;
/// println!("{}", sandbox.summary());
/// # Ok::<(), toolbelt_builtin::shell::SandboxError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LandlockSandbox {
    mode: SandboxMode,
    abi: ABI,
    abi_number: i32,
    extra_writable: Vec<PathBuf>,
    /// The seccomp filter that turns the network off; `None` when the network is allowed.
    network_filter: Option<Arc<BpfProgram>>,
}

impl LandlockSandbox {
    /// A sandbox enforcing `mode` (`read-only` or `workspace-write`), with the network off.
    pub fn new(mode: SandboxMode) -> Result<Self, SandboxError> {
        if mode == SandboxMode::Off {
            return Err(SandboxError::Setup(
                "sandbox mode off is no sandbox; leave the sandbox out instead".into(),
            ));
        }
        if mode == SandboxMode::Container {
            return Err(SandboxError::Unsupported(
                "the container sandbox is a process backend (shell::Container), not a Landlock \
                 mode"
                    .into(),
            ));
        }
        let abi_number = kernel_abi();
        if abi_number < MIN_ABI {
            return Err(SandboxError::Unsupported(format!(
                "this kernel cannot enforce the sandbox: it offers Landlock ABI {abi_number} \
                 ({}), and ABI {MIN_ABI} (Linux 6.2) or newer is needed",
                if abi_number <= 0 {
                    "Landlock is not enabled"
                } else {
                    "too old"
                }
            )));
        }
        let mut sandbox = Self {
            mode,
            abi: ABI::from(abi_number),
            abi_number,
            extra_writable: Vec::new(),
            network_filter: None,
        };
        sandbox.network_filter = Some(Arc::new(sandbox.network_filter()?));
        // Build one ruleset now so that an unenforceable configuration fails here, not at the
        // first command.
        sandbox.ruleset()?;
        Ok(sandbox)
    }

    /// Allows (`true`) or forbids (the default) network access.
    pub fn allow_network(mut self, allow: bool) -> Result<Self, SandboxError> {
        self.network_filter = if allow {
            None
        } else {
            Some(Arc::new(self.network_filter()?))
        };
        Ok(self)
    }

    /// Also allows writes beneath `path`.
    pub fn allow_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.extra_writable.push(path.into());
        self
    }

    /// The mode enforced.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// The Landlock ABI the kernel offers, which this sandbox uses.
    pub fn abi(&self) -> i32 {
        self.abi_number
    }

    /// Whether network access is forbidden.
    pub fn denies_network(&self) -> bool {
        self.network_filter.is_some()
    }

    /// One line saying what is enforced, for a person: the mode, the Landlock ABI and what it
    /// brings, and the network.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("Landlock ABI {}", self.abi_number)];
        if self.abi_number >= 6 {
            parts.push("signals and abstract sockets scoped".into());
        } else {
            parts.push("signals not scoped (needs ABI 6)".into());
        }
        parts.push(if self.denies_network() {
            "network off (seccomp)".into()
        } else {
            "network on".into()
        });
        format!("{} ({})", self.mode, parts.join(", "))
    }

    /// Whether Landlock checks unix-socket connects by path here (ABI 9+), so seccomp need
    /// not refuse every `connect`.
    fn landlock_checks_unix_connects(&self) -> bool {
        self.abi_number >= 9
    }

    /// The file-system rights handled: all this ABI knows, except the unix-socket right when
    /// the network is allowed (then a command may reach any socket).
    fn handled_fs(&self) -> landlock::BitFlags<AccessFs> {
        let all = AccessFs::from_all(self.abi);
        if self.denies_network() {
            all
        } else {
            all & !resolve_unix_only(self.abi)
        }
    }

    /// Builds an empty ruleset handling every right of the kernel's ABI, as a hard
    /// requirement: the landlock crate refuses to create what the kernel cannot enforce.
    fn ruleset(&self) -> Result<RulesetCreated, SandboxError> {
        let unsupported = |e: landlock::RulesetError| {
            SandboxError::Unsupported(format!(
                "this kernel cannot enforce the Landlock sandbox at ABI {}: {e}",
                self.abi_number
            ))
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(self.handled_fs())
            .map_err(unsupported)?;
        if self.denies_network() && self.abi_number >= 4 {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(self.abi))
                .map_err(unsupported)?;
        }
        if self.abi_number >= 6 {
            let mut scopes = Scope::from_all(self.abi);
            if !self.denies_network() {
                scopes &= !Scope::AbstractUnixSocket;
            }
            ruleset = ruleset.scope(scopes).map_err(unsupported)?;
        }
        ruleset.create().map_err(unsupported)
    }

    /// The seccomp program that turns the network off (see the module docs).
    fn network_filter(&self) -> Result<BpfProgram, SandboxError> {
        network_filter(!self.landlock_checks_unix_connects())
    }
}

/// The seccomp program that turns the network off (see the module docs); `block_connect`
/// refuses every `connect`, for where Landlock does not check unix-socket connects by path.
pub(super) fn network_filter(block_connect: bool) -> Result<BpfProgram, SandboxError> {
    let setup = |e: seccompiler::BackendError| SandboxError::Setup(e.to_string());
    let condition = |arg, op, value| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(setup)
    };
    let rule = |conditions| SeccompRule::new(conditions).map_err(setup);
    let unix = libc::AF_UNIX as u64;
    let type_mask = 0xf; // SOCK_TYPE_MASK: the flags SOCK_CLOEXEC and SOCK_NONBLOCK aside.
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = [
        (
            libc::SYS_socket,
            vec![
                rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?,
                // Unix datagram sockets can send to any socket path (a raw unix socket is
                // a datagram socket).
                rule(vec![
                    condition(0, SeccompCmpOp::Eq, unix)?,
                    condition(
                        1,
                        SeccompCmpOp::MaskedEq(type_mask),
                        libc::SOCK_DGRAM as u64,
                    )?,
                ])?,
                rule(vec![
                    condition(0, SeccompCmpOp::Eq, unix)?,
                    condition(1, SeccompCmpOp::MaskedEq(type_mask), libc::SOCK_RAW as u64)?,
                ])?,
            ],
        ),
        (libc::SYS_io_uring_setup, vec![]),
        (libc::SYS_io_uring_enter, vec![]),
        (libc::SYS_io_uring_register, vec![]),
    ]
    .into_iter()
    .collect();
    if block_connect {
        rules.insert(libc::SYS_connect, vec![]);
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| {
            SandboxError::Unsupported(format!("no seccomp support for this architecture: {e}"))
        })?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(setup)?;
    filter.try_into().map_err(setup)
}

/// The unix-socket connect right alone, on ABIs that have it (9+); empty before.
fn resolve_unix_only(abi: ABI) -> landlock::BitFlags<AccessFs> {
    let newer = AccessFs::from_all(abi);
    let older = AccessFs::from_all(ABI::V8);
    newer & !older
}

/// The Landlock ABI version the running kernel offers (0 or less: none).
fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer and size 0, this flag only returns the version.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(version).unwrap_or(0)
}

impl SandboxPolicy for LandlockSandbox {
    fn name(&self) -> &str {
        "landlock"
    }

    fn child_hook(&self, request: &ProcessRequest) -> Result<ChildHook, SandboxError> {
        let setup = |e: landlock::RulesetError| SandboxError::Setup(e.to_string());
        let mut writable: Vec<PathBuf> = Vec::new();
        if self.mode == SandboxMode::WorkspaceWrite {
            writable.extend(request.workspace_roots.iter().cloned());
        }
        writable.extend(request.temp_dir.iter().cloned());
        for root in &writable {
            if !root.exists() {
                return Err(SandboxError::Setup(format!(
                    "writable directory {} does not exist",
                    root.display()
                )));
            }
        }
        writable.extend(self.extra_writable.iter().cloned());
        writable.extend(WRITABLE_DEVICES.iter().map(PathBuf::from));
        let handled = self.handled_fs();
        // Open every path and fill the ruleset here, in the parent, so the child only has to
        // make the final system calls.
        let ruleset = self
            .ruleset()?
            .no_new_privs(true)
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(self.abi)))
            .map_err(setup)?
            .add_rules(path_beneath_rules(&writable, handled))
            .map_err(setup)?;
        let mut ruleset = Some(ruleset);
        let network_filter = self.network_filter.clone();
        Ok(Box::new(move || {
            let ruleset = ruleset
                .take()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            // Errors are plain OS codes: building a message would allocate in the child.
            match ruleset.restrict_self() {
                Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => {}
                _ => return Err(io::Error::from_raw_os_error(libc::EPERM)),
            }
            if let Some(filter) = &network_filter {
                seccompiler::apply_filter(filter)
                    .map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
            }
            Ok(())
        }))
    }
}
