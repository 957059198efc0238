//! Sandboxes for shell commands: the [`SandboxPolicy`] trait and [`LandlockSandbox`], which
//! confines a command with Linux Landlock.
//!
//! A command policy (allow and deny lists) only checks what a command *says*; a sandbox limits
//! what it can *do*. The Landlock sandbox lets the command read anywhere but write only inside
//! the directories of its [`ProcessRequest::writable_roots`] (the base dir and the tool set's
//! temp dir) and a few device files, and optionally forbids TCP. The restriction is applied in
//! the child after `fork` and before `exec`, so it covers the shell and everything it starts,
//! and it cannot be lifted from inside.

use std::fmt;
use std::io;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
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

/// The Landlock file-system rights this sandbox handles: those of ABI 3 (which added
/// truncation). Fixing the ABI keeps the sandbox the same on every kernel that runs it.
const FS_ABI: ABI = ABI::V3;
/// The ABI that added TCP rules.
const NET_ABI: ABI = ABI::V4;

/// Device files every shell writes to (`> /dev/null`), writable even in the sandbox.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Confines commands with Linux Landlock: read and execute anywhere, write only under the
/// request's writable roots (plus extra paths and a few device files), and optionally no TCP.
///
/// Creating one checks that the kernel enforces every right it needs, and fails with
/// [`SandboxError::Unsupported`] otherwise: the sandbox never silently runs commands
/// unconfined.
///
/// ```no_run
/// use toolbelt_builtin::shell::LandlockSandbox;
///
/// let sandbox = LandlockSandbox::new()?.deny_network(true).checked()?;
/// # Ok::<(), toolbelt_builtin::shell::SandboxError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LandlockSandbox {
    extra_writable: Vec<PathBuf>,
    deny_network: bool,
}

impl LandlockSandbox {
    /// A sandbox that allows network access, after checking that the kernel supports
    /// Landlock's file-system rules.
    pub fn new() -> Result<Self, SandboxError> {
        let sandbox = Self {
            extra_writable: Vec::new(),
            deny_network: false,
        };
        sandbox.probe()?;
        Ok(sandbox)
    }

    /// Forbids (`true`) or allows TCP `connect` and `bind`. Call [`LandlockSandbox::checked`]
    /// afterwards to verify that the kernel can enforce it.
    pub fn deny_network(mut self, deny: bool) -> Self {
        self.deny_network = deny;
        self
    }

    /// Also allows writes under `path`.
    pub fn allow_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.extra_writable.push(path.into());
        self
    }

    /// Verifies that the kernel enforces everything configured so far.
    pub fn checked(self) -> Result<Self, SandboxError> {
        self.probe()?;
        Ok(self)
    }

    /// Whether TCP is forbidden.
    pub fn denies_network(&self) -> bool {
        self.deny_network
    }

    /// Builds an empty ruleset with every handled right as a hard requirement, which the
    /// landlock crate refuses to create when the kernel cannot enforce it.
    fn ruleset(&self) -> Result<RulesetCreated, SandboxError> {
        let unsupported = |e: landlock::RulesetError| {
            SandboxError::Unsupported(format!(
                "this kernel cannot enforce the Landlock sandbox ({e}); Landlock ABI {} or \
                 newer is required{}",
                if self.deny_network { 4 } else { 3 },
                if self.deny_network {
                    " for network rules"
                } else {
                    ""
                }
            ))
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(FS_ABI))
            .map_err(unsupported)?;
        if self.deny_network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(NET_ABI))
                .map_err(unsupported)?;
        }
        ruleset.create().map_err(unsupported)
    }

    fn probe(&self) -> Result<(), SandboxError> {
        self.ruleset().map(drop)
    }
}

impl SandboxPolicy for LandlockSandbox {
    fn name(&self) -> &str {
        "landlock"
    }

    fn child_hook(&self, request: &ProcessRequest) -> Result<ChildHook, SandboxError> {
        let setup = |e: landlock::RulesetError| SandboxError::Setup(e.to_string());
        let writable: Vec<PathBuf> = request
            .writable_roots
            .iter()
            .chain(self.extra_writable.iter())
            .cloned()
            .chain(WRITABLE_DEVICES.iter().map(PathBuf::from))
            .collect();
        for root in &request.writable_roots {
            if !root.exists() {
                return Err(SandboxError::Setup(format!(
                    "writable directory {} does not exist",
                    root.display()
                )));
            }
        }
        // Open every path and fill the ruleset here, in the parent, so the child only has to
        // make the final restrict_self system call.
        let ruleset = self
            .ruleset()?
            .no_new_privs(true)
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))
            .map_err(setup)?
            .add_rules(path_beneath_rules(&writable, AccessFs::from_all(FS_ABI)))
            .map_err(setup)?;
        let mut ruleset = Some(ruleset);
        Ok(Box::new(move || {
            let ruleset = ruleset
                .take()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            // Errors are plain OS codes: building a message would allocate in the child.
            match ruleset.restrict_self() {
                Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => Ok(()),
                _ => Err(io::Error::from_raw_os_error(libc::EPERM)),
            }
        }))
    }
}
