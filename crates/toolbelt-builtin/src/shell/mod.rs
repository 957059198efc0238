//! Shell tools: `Bash`, `TaskOutput` and `TaskStop`, terminal sessions (`exec_command`,
//! `write_stdin`: a command on a pseudo-terminal, driven by the model, see `terminal.rs`),
//! with the process backend they run on, an optional command policy and an optional
//! Landlock sandbox.
//!
//! - [`ShellTools`] holds the configuration and the background tasks of one tool set; its
//!   [`ShellTools::tools`] are the three tools, and [`ShellTools::close`] kills every task it
//!   started (dropping it without closing kills them too, as a backstop).
//! - `Bash` runs `bash -c <command>` in the base dir, stdin from `/dev/null`, in a session of
//!   its own, with every process it starts kept track of ([`Containment`]: a cgroup v2 group
//!   where this process may create one, else a subreaper supervisor), so that `setsid`, `set
//!   -m` jobs and daemons that fork twice cannot slip away. On timeout or cancellation every
//!   process gets `SIGTERM` and, after a grace period, `SIGKILL`; when the command exits on its
//!   own, whatever it left running is ended the same way and the result says how many
//!   processes were killed. Use `run_in_background` for servers and watchers.
//! - Each call starts in the base dir: `cd` does **not** carry over between calls (the
//!   working directory is not tracked), which keeps calls independent and safe to run in
//!   parallel. Chain commands (`cd sub && make`) instead.
//! - The environment comes from an [`EnvPolicy`] ([`ShellConfig::env_policy`]; by default a
//!   small allow-list of the parent's variables, never one named like a secret), plus
//!   [`ShellConfig::env`] overrides.
//!
//! ```no_run
//! use toolbelt_builtin::shell::{CommandPolicy, ShellConfig, ShellTools};
//! use toolbelt_core::EnvPolicy;
//!
//! # async fn run() -> Result<(), toolbelt_core::ToolError> {
//! let shell = ShellTools::new(
//!     ShellConfig::new("/path/to/project")
//!         .env_policy(EnvPolicy::new().allow("AWS_PROFILE"))
//!         .policy(CommandPolicy::new().deny("git push")),
//! )?;
//! let tools = shell.tools(); // Bash, TaskOutput, TaskStop
//! # drop(tools);
//! shell.close().await;
//! # Ok(()) }
//! ```

pub(crate) mod container;
mod output;
pub(crate) mod policy;
mod process;
mod sandbox;
mod tasks;
mod terminal;
mod tools;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use toolbelt_core::{DynTool, EnvPolicy, ToolContext, ToolError, ToolOutput, ToolSet};

pub use container::Container;
pub use output::{CappedOutput, RenderedOutput};
pub use policy::{CommandPattern, CommandPolicy, PolicyViolation};
pub use process::{
    Cleanup, Containment, ExitOutcome, Killer, LocalProcessBackend, OutputStream, OutputTarget,
    ProcessBackend, ProcessRequest, PtyMaster, RunningProcess,
};
pub use sandbox::{ChildHook, LandlockSandbox, SandboxError, SandboxMode, SandboxPolicy};
pub use tasks::TaskStatus;
pub use terminal::{DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, ExecCommandArgs, WriteStdinArgs};

use tasks::TaskRegistry;

/// The default `Bash` timeout: two minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(120_000);
/// The largest `Bash` timeout a call may ask for: ten minutes.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(600_000);
/// The default cap on the characters of output a call returns.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 30_000;

/// The configuration of the shell tools.
#[derive(Clone)]
pub struct ShellConfig {
    base_dir: PathBuf,
    temp_dir: Option<PathBuf>,
    env_policy: EnvPolicy,
    env: Vec<(String, String)>,
    policy: Option<CommandPolicy>,
    backend: Option<Arc<dyn ProcessBackend>>,
    sandbox: Option<Arc<dyn SandboxPolicy>>,
    containment: Containment,
    default_timeout: Duration,
    max_timeout: Duration,
    kill_grace: Duration,
    max_output_chars: usize,
    max_terminal_sessions: usize,
    terminal_idle_timeout: Duration,
}

impl fmt::Debug for ShellConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShellConfig")
            .field("base_dir", &self.base_dir)
            .field("temp_dir", &self.temp_dir)
            .field("env_policy", &self.env_policy)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("policy", &self.policy)
            .field("backend", &self.backend)
            .field("sandbox", &self.sandbox)
            .field("containment", &self.containment)
            .field("default_timeout", &self.default_timeout)
            .field("max_timeout", &self.max_timeout)
            .field("kill_grace", &self.kill_grace)
            .field("max_output_chars", &self.max_output_chars)
            .field("max_terminal_sessions", &self.max_terminal_sessions)
            .field("terminal_idle_timeout", &self.terminal_idle_timeout)
            .finish()
    }
}

impl Default for ShellConfig {
    /// Commands run in the current directory.
    fn default() -> Self {
        Self::new(".")
    }
}

impl ShellConfig {
    /// Commands run in `base_dir`.
    pub fn new(base_dir: impl Into<PathBuf>) -> Self {
        Self {
            base_dir: base_dir.into(),
            temp_dir: None,
            env_policy: EnvPolicy::new(),
            env: Vec::new(),
            policy: None,
            backend: None,
            sandbox: None,
            containment: Containment::Auto,
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            kill_grace: Duration::from_secs(2),
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            max_terminal_sessions: DEFAULT_MAX_SESSIONS,
            terminal_idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// Replaces the directory commands run in.
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = dir.into();
        self
    }

    /// The tool set's temp dir, for background task logs (and, in the sandbox, the only
    /// writable place besides the base dir). Without one, [`ShellTools`] creates a private
    /// temp dir and deletes it when dropped.
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    /// Which of this process's environment variables commands inherit (default
    /// [`EnvPolicy::new`]: the core allow-list, never a name that looks like a secret).
    pub fn env_policy(mut self, policy: EnvPolicy) -> Self {
        self.env_policy = policy;
        self
    }

    /// Sets an environment variable for every command, over what the policy passes.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Checks every command against `policy` before it runs (a convenience, not a boundary).
    pub fn policy(mut self, policy: CommandPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Runs commands on `backend` instead of the local process backend.
    pub fn backend(mut self, backend: Arc<dyn ProcessBackend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Confines commands run by the local backend with `sandbox` (for example a
    /// [`LandlockSandbox`]). Ignored when a custom [`ShellConfig::backend`] is set: such a
    /// backend brings its own isolation.
    pub fn sandbox(mut self, sandbox: Arc<dyn SandboxPolicy>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// How the local backend keeps track of the processes a command starts (default
    /// [`Containment::Auto`]). Ignored when a custom [`ShellConfig::backend`] is set.
    pub fn containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// The timeout of a call that gives none (default two minutes).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// The largest timeout a call may ask for (default ten minutes); larger ones are
    /// lowered to it.
    pub fn max_timeout(mut self, timeout: Duration) -> Self {
        self.max_timeout = timeout;
        self
    }

    /// How long a stopped command has between `SIGTERM` and `SIGKILL` (default 2 s).
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// The cap on characters of output per result (default 30 000; head and tail are kept).
    pub fn max_output_chars(mut self, chars: usize) -> Self {
        self.max_output_chars = chars;
        self
    }

    /// How many terminal sessions (`exec_command`) may run at once (default 8).
    pub fn max_terminal_sessions(mut self, sessions: usize) -> Self {
        self.max_terminal_sessions = sessions;
        self
    }

    /// How long a terminal session may go without an `exec_command` or `write_stdin` call
    /// before it is ended with everything it started (default five minutes).
    pub fn terminal_idle_timeout(mut self, timeout: Duration) -> Self {
        self.terminal_idle_timeout = timeout;
        self
    }

    /// Whether commands run on a custom backend (which ignores [`ShellConfig::sandbox`]).
    pub(crate) fn has_custom_backend(&self) -> bool {
        self.backend.is_some()
    }

    /// The environment a command gets.
    fn command_env(&self, temp_dir: &Path, sandboxed: bool) -> Vec<(OsString, OsString)> {
        let mut env = self.env_policy.resolve();
        if sandboxed {
            // The system temp dir is not writable in the sandbox; point tools at ours.
            for name in ["TMPDIR", "TMP", "TEMP"] {
                env.retain(|(existing, _)| existing != name);
                env.push((name.into(), temp_dir.as_os_str().to_owned()));
            }
        }
        for (name, value) in &self.env {
            env.retain(|(existing, _)| existing != name.as_str());
            env.push((name.into(), value.into()));
        }
        env
    }
}

/// The shared state behind the three shell tools.
pub(crate) struct ShellState {
    config: ShellConfig,
    base_dir: PathBuf,
    temp_dir: PathBuf,
    backend: Arc<dyn ProcessBackend>,
    sandboxed: bool,
    tasks: TaskRegistry,
    terminals: terminal::Terminals,
    /// Keeps a private temp dir alive (and deletes it on drop) when none was configured.
    _owned_temp: Option<tempfile::TempDir>,
}

impl ShellState {
    fn request(&self, command: &str) -> ProcessRequest {
        ProcessRequest {
            command: command.to_string(),
            cwd: self.base_dir.clone(),
            env: self.config.command_env(&self.temp_dir, self.sandboxed),
            output: OutputTarget::Pipe,
            workspace_roots: vec![self.base_dir.clone()],
            temp_dir: Some(self.temp_dir.clone()),
        }
    }

    /// Runs `command` in the foreground as Bash does (same backend, sandbox, containment,
    /// output cap and kill sequence); `timeout_ms` as Bash's `timeout` argument. For the
    /// code execution tool.
    pub(crate) async fn run_command(
        &self,
        ctx: &ToolContext,
        command: &str,
        timeout_ms: Option<i64>,
    ) -> Result<ToolOutput, ToolError> {
        self.check_policy(command)?;
        if self.tasks.is_closed() {
            return Err(ToolError::failed("the shell tool set is closed"));
        }
        let timeout = tools::millis_arg(
            timeout_ms,
            self.config.default_timeout,
            self.config.max_timeout,
        );
        tools::run_foreground(self, ctx, command, timeout).await
    }

    /// Starts `command` as Bash starts a command (same backend, sandbox, containment and
    /// environment), after the policy check, for a long-lived process the caller drives.
    pub(crate) async fn spawn_command(
        &self,
        command: &str,
    ) -> Result<Box<dyn RunningProcess>, ToolError> {
        self.check_policy(command)?;
        if self.tasks.is_closed() {
            return Err(ToolError::failed("the shell tool set is closed"));
        }
        self.backend
            .spawn(self.request(command))
            .await
            .map_err(|e| ToolError::failed(e.to_string()))
    }

    /// How long a process gets to end after `SIGTERM`.
    pub(crate) fn kill_grace(&self) -> Duration {
        self.config.kill_grace
    }

    /// The timeout of a call that asked for `timeout_ms`, as Bash's.
    pub(crate) fn timeout_for(&self, timeout_ms: Option<i64>) -> Duration {
        tools::millis_arg(
            timeout_ms,
            self.config.default_timeout,
            self.config.max_timeout,
        )
    }

    /// The cap on the characters of output a call returns.
    pub(crate) fn max_output_chars(&self) -> usize {
        self.config.max_output_chars
    }

    /// The private temp dir, writable in every sandbox mode.
    pub(crate) fn private_temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    pub(crate) fn check_policy(&self, command: &str) -> Result<(), ToolError> {
        match &self.config.policy {
            Some(policy) => policy
                .check(command)
                .map_err(|e| ToolError::rejected(e.to_string())),
            None => Ok(()),
        }
    }
}

/// The shell tools of one tool set: `Bash`, `TaskOutput`, `TaskStop` and the terminal
/// sessions' `exec_command` and `write_stdin`, sharing one configuration, one set of
/// background tasks and one set of sessions.
///
/// It is also a [`ToolSet`] named `shell`, for use on its own.
#[derive(Clone)]
pub struct ShellTools {
    state: Arc<ShellState>,
    tools: Vec<DynTool>,
}

impl fmt::Debug for ShellTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShellTools")
            .field("base_dir", &self.state.base_dir)
            .field("temp_dir", &self.state.temp_dir)
            .field("backend", &self.state.backend.name())
            .finish_non_exhaustive()
    }
}

impl ShellTools {
    /// Checks the configuration and builds the tools.
    ///
    /// Fails when the base dir is not a directory or the temp dir cannot be created.
    pub fn new(config: ShellConfig) -> Result<Self, ToolError> {
        let base_dir = std::fs::canonicalize(&config.base_dir).map_err(|e| {
            ToolError::failed(format!(
                "base directory {} is not usable: {e}",
                config.base_dir.display()
            ))
        })?;
        if !base_dir.is_dir() {
            return Err(ToolError::failed(format!(
                "base directory {} is not a directory",
                base_dir.display()
            )));
        }
        let (temp_dir, owned_temp) = match &config.temp_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| {
                    ToolError::failed(format!("could not create temp dir {}: {e}", dir.display()))
                })?;
                (std::fs::canonicalize(dir).map_err(ToolError::failed)?, None)
            }
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("toolbelt-shell-")
                    .tempdir()
                    .map_err(|e| ToolError::failed(format!("could not create a temp dir: {e}")))?;
                (dir.path().to_path_buf(), Some(dir))
            }
        };
        let (backend, sandboxed): (Arc<dyn ProcessBackend>, bool) =
            match (&config.backend, &config.sandbox) {
                (Some(backend), _) => (backend.clone(), false),
                (None, Some(sandbox)) => (
                    Arc::new(
                        LocalProcessBackend::new()
                            .with_containment(config.containment)
                            .with_sandbox(sandbox.clone()),
                    ),
                    true,
                ),
                (None, None) => (
                    Arc::new(LocalProcessBackend::new().with_containment(config.containment)),
                    false,
                ),
            };
        let tasks = TaskRegistry::new(temp_dir.clone(), config.kill_grace, config.max_output_chars);
        let terminals = terminal::Terminals::new(terminal::TerminalLimits {
            max_sessions: config.max_terminal_sessions,
            idle_timeout: config.terminal_idle_timeout,
            lifetime: config.max_timeout,
            kill_grace: config.kill_grace,
        });
        let state = Arc::new(ShellState {
            config,
            base_dir,
            temp_dir,
            backend,
            sandboxed,
            tasks,
            terminals,
            _owned_temp: owned_temp,
        });
        let tools = tools::build(&state)?;
        Ok(Self { state, tools })
    }

    /// The state the tools share (for the code execution tool, which runs as Bash does).
    pub(crate) fn state(&self) -> &Arc<ShellState> {
        &self.state
    }

    /// `Bash`, `TaskOutput`, `TaskStop`, `exec_command` and `write_stdin`.
    pub fn tools(&self) -> Vec<DynTool> {
        self.tools.clone()
    }

    /// The directory commands run in (canonicalized).
    pub fn base_dir(&self) -> &Path {
        &self.state.base_dir
    }

    /// The directory background task logs are written to.
    pub fn temp_dir(&self) -> &Path {
        &self.state.temp_dir
    }

    /// Kills every background task and terminal session this set started and refuses new
    /// ones. Calling it twice is fine.
    pub async fn close(&self) {
        self.state.tasks.close().await;
        self.state.terminals.close().await;
    }
}

#[async_trait]
impl ToolSet for ShellTools {
    fn name(&self) -> &str {
        "shell"
    }

    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Ok(self.tools.clone())
    }

    async fn close(&self) -> Result<(), ToolError> {
        ShellTools::close(self).await;
        Ok(())
    }
}
