//! What the subcommands share: exit codes and errors, logging to stderr, and the tool sources
//! (the built-in tool set confined to `--dir`, the servers of an `--mcp-config` file)
//! assembled into one registry.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use toolbelt::ToolError;
use toolbelt::builtin::fs::ReadState;
use toolbelt::builtin::shell::{Container, LandlockSandbox, SandboxMode};
use toolbelt::builtin::{BuiltinOptions, BuiltinToolSet};
use toolbelt::exec::{
    CallResult, Executor, Registry, ToolCall, ToolSetOptions, ToolSetRefresh, ToolSnapshot,
};
use toolbelt::mcp::server::{UpstreamOptions, Upstreams};
use toolbelt::mcp::ssh::{SshOptions, SshTarget, SshToolSet};
use toolbelt::mcp::{ConnectionConfig, McpServersFile, McpToolSet, Root, TransportConfig};
use toolbelt::{ToolContext, ToolSet};

/// The command did what was asked.
pub const EXIT_OK: u8 = 0;
/// The tool ran and reported a failure (a result-level error), or the call failed while
/// running (timeout, rejection, a server error).
pub const EXIT_TOOL_FAILED: u8 = 1;
/// The command was used wrongly: bad flags, an unknown tool, invalid arguments, a
/// configuration that cannot be loaded.
pub const EXIT_USAGE: u8 = 2;
/// The command was stopped by SIGINT (Ctrl-C): 128 + the signal's number, as shells report it.
pub const EXIT_INTERRUPTED: u8 = 130;
/// The command was stopped by SIGTERM.
pub const EXIT_TERMINATED: u8 = 143;
/// The run paused: a tool call waits for a person's approval (`toolbelt run` with
/// `--session` and no terminal to ask on); resume it with `--approve` / `--reject` / `--edit`.
pub const EXIT_AWAITING_APPROVAL: u8 = 3;

/// How many times an MCP tool set reconnects after its server dies before a call fails.
const MCP_RECONNECT_ATTEMPTS: u8 = 3;

/// A failure that ends the command: its message goes to stderr, its code is the exit code.
#[derive(Debug)]
pub struct CliError {
    /// The exit code ([`EXIT_TOOL_FAILED`] or [`EXIT_USAGE`]).
    pub code: u8,
    /// What went wrong, for a person.
    pub message: String,
}

impl CliError {
    /// A usage or configuration error (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// A failure while doing the work (exit code 1).
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_TOOL_FAILED,
            message: message.into(),
        }
    }

    /// A failed tool call: the caller's mistakes (an unknown tool, arguments that do not
    /// parse or match the schema) are usage errors; everything else is a tool failure.
    pub fn from_tool_error(err: &ToolError) -> Self {
        let message = err.to_string();
        match err {
            ToolError::UnknownTool { .. }
            | ToolError::InvalidArguments { .. }
            | ToolError::SchemaViolation { .. } => Self::usage(message),
            _ => Self::failed(message),
        }
    }
}

/// What a subcommand returns: the exit code it chose, or an error to report.
pub type Outcome = Result<u8, CliError>;

/// Prints an error to stderr and turns the outcome into the process exit code.
pub fn finish(outcome: Outcome) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("toolbelt: {}", err.message);
            ExitCode::from(err.code)
        }
    }
}

/// Sends `tracing` output to stderr, never stdout (stdout carries results, and in
/// `serve --stdio` the protocol itself). `TOOLBELT_LOG` (an `EnvFilter` directive such as
/// `toolbelt_mcp=debug`) overrides `level`. With the `otel` feature and an OTLP endpoint in
/// the environment, the `gen_ai` spans are exported too ([`crate::telemetry`]).
pub fn init_logging(level: &str) -> Result<LoggingGuard, CliError> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let filter = match std::env::var("TOOLBELT_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(directives),
        // rmcp logs a failed connection at ERROR level although the command reports it
        // itself; its own lines appear from `--log-level debug` on.
        _ => match level {
            "debug" | "trace" => EnvFilter::try_new(level),
            _ => EnvFilter::try_new(format!("{level},rmcp=off")),
        },
    }
    .map_err(|e| CliError::usage(format!("invalid log level {level:?}: {e}")))?;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "otel")]
    let (registry, guard) = {
        let (layer, telemetry) = crate::telemetry::layer()?.unzip();
        (registry.with(layer), LoggingGuard { telemetry })
    };
    #[cfg(not(feature = "otel"))]
    let guard = LoggingGuard {};
    registry
        .try_init()
        .map_err(|e| CliError::failed(format!("cannot set up logging: {e}")))?;
    Ok(guard)
}

/// What logging must finish at exit: the OpenTelemetry exporter's last spans (feature `otel`).
pub struct LoggingGuard {
    #[cfg(feature = "otel")]
    telemetry: Option<crate::telemetry::Telemetry>,
}

impl LoggingGuard {
    /// Flushes what is buffered. Call once the command has returned, whatever its outcome.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(telemetry) = self.telemetry {
            telemetry.shutdown();
        }
    }
}

/// Where the tools come from: the flags every tool-running subcommand takes.
#[derive(Args, Debug, Clone)]
pub struct ToolSourceArgs {
    /// The base directory the built-in tools are confined to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Leave out the tools that change files (Write, Edit, NotebookEdit); Bash, TaskOutput and
    /// TaskStop run in the read-only sandbox, or are left out where there is none (or with
    /// `--sandbox off`).
    #[arg(long)]
    pub read_only: bool,
    /// Confine Bash and its background tasks: `off`, `read-only` (no writes but to a private
    /// temp dir), `workspace-write` (writes only beneath --dir and the temp dir) or
    /// `container` (each command in a bubblewrap container that sees only the system
    /// directories, --dir and a private /tmp and home; needs bubblewrap). Every sandbox turns
    /// the network off. Default: workspace-write where the kernel supports Landlock, else off.
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<SandboxMode>,
    /// An `mcpServers` JSON file (the format of Claude Desktop, Cursor and Claude Code);
    /// every server's tools join the built-in ones, prefixed `{server}_` when a name is taken.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Add the browser tools (browser_navigate, browser_snapshot, browser_click, …): a
    /// headless Chromium whose every request passes WebFetch's SSRF guard. Needs a toolbelt
    /// built with the `browser` feature.
    #[arg(long)]
    pub browser: bool,
    /// The Chromium for --browser (default: TOOLBELT_CHROMIUM, else chromium,
    /// chromium-browser or google-chrome on PATH).
    #[arg(long, value_name = "PATH", requires = "browser")]
    pub chromium: Option<PathBuf>,
    /// Let execute_code's Python and JavaScript programs call these tools as functions
    /// (`tools.Grep(pattern="TODO")`), each call through the same checks as the model's:
    /// tool names separated by commas, or `all`. None by default.
    #[arg(long, value_name = "NAMES|all")]
    pub code_tools: Option<toolbelt::builtin::code::CodeToolAccess>,
    /// Run the built-in tools on another machine, in the directory PATH there:
    /// `ssh://[user@]host[:port]/PATH`. The remote's own `toolbelt serve --stdio` runs them
    /// (with --read-only, --sandbox and --code-tools passed on), over the system ssh client:
    /// host keys checked against known_hosts, keys from the agent or ~/.ssh, never a prompt.
    /// --dir stays the local project (its settings, rules and hooks).
    #[arg(long, value_name = "URL")]
    pub remote: Option<SshTarget>,
    /// With --remote: accept and record a host key seen for the first time (OpenSSH's
    /// StrictHostKeyChecking=accept-new); a changed key is still refused.
    #[arg(long, requires = "remote")]
    pub remote_accept_new: bool,
    /// With --remote: the toolbelt program on the remote (default: `toolbelt` on its PATH).
    #[arg(long, value_name = "PATH", requires = "remote")]
    pub remote_toolbelt: Option<String>,
    /// With --remote: an ssh configuration file to use instead of ~/.ssh/config (`ssh -F`).
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub remote_ssh_config: Option<PathBuf>,
}

impl ToolSourceArgs {
    /// The remote's `toolbelt serve` flags that keep the built-in tools as configured here.
    fn remote_options(&self) -> SshOptions {
        let mut serve_args = Vec::new();
        if self.read_only {
            serve_args.push("--read-only".to_string());
        }
        if let Some(mode) = self.sandbox {
            serve_args.extend(["--sandbox".to_string(), mode.to_string()]);
        }
        use toolbelt::builtin::code::CodeToolAccess;
        match &self.code_tools {
            None | Some(CodeToolAccess::None) => {}
            Some(CodeToolAccess::All) => serve_args.extend(["--code-tools".into(), "all".into()]),
            Some(CodeToolAccess::Only(names)) => {
                serve_args.extend(["--code-tools".into(), names.join(",")])
            }
        }
        let defaults = SshOptions::default();
        SshOptions {
            accept_new: self.remote_accept_new,
            toolbelt: self.remote_toolbelt.clone().unwrap_or(defaults.toolbelt),
            ssh_config: self.remote_ssh_config.clone(),
            serve_args,
            ..defaults
        }
    }
}

/// The tool sets a command opened, registered in one [`Registry`]. The command created the
/// sets, so it closes them ([`Toolbox::close`]): background shell tasks are killed, MCP
/// sessions ended and their child processes reaped.
pub struct Toolbox {
    /// Every tool set's tools, as the executor sees them.
    pub registry: Arc<Registry>,
    /// The built-in tool set when it runs here (its read-before-write state can be saved);
    /// `None` with `--remote`.
    pub builtin: Option<Arc<BuiltinToolSet>>,
    /// The built-in tools, here or on the remote.
    builtin_tools: Arc<dyn ToolSet>,
    remote: Option<Arc<SshToolSet>>,
    sets: Vec<Arc<dyn ToolSet>>,
}

impl Toolbox {
    /// Opens the built-in tool set in `args.dir` and one MCP tool set per configured server,
    /// and registers them. MCP servers connect lazily, on the first listing.
    pub fn open(
        args: &ToolSourceArgs,
        read_state: Option<Arc<ReadState>>,
    ) -> Result<Self, CliError> {
        Self::open_hiding(args, read_state, Vec::new())
    }

    /// As [`Toolbox::open`], with Glob and Grep kept out of `hidden` (gitignore patterns
    /// relative to `--dir`: the permission rules' Read denies).
    pub fn open_hiding(
        args: &ToolSourceArgs,
        read_state: Option<Arc<ReadState>>,
        hidden: Vec<String>,
    ) -> Result<Self, CliError> {
        let mut toolbox = Self::open_builtin(args, read_state, hidden, Registry::new())?;
        if let Some(path) = &args.mcp_config {
            for set in open_mcp_servers(path, None)? {
                // An MCP server may change its tools: list them again on every run.
                toolbox.add(Arc::new(set), ToolSetRefresh::OnRun.into())?;
            }
        }
        Ok(toolbox)
    }

    /// As [`Toolbox::open`], for serving: the MCP servers are [`Upstreams`] that connect in
    /// the background (start them with [`Upstreams::start`]), each listing no tools until it
    /// is up. They are registered in the file's order, which decides who keeps a tool name
    /// on a clash; a listing of a connected server that hangs is cut off after the connect
    /// timeout (its last tools stay). Their `roots/list` is answered by serve's client when
    /// it offers roots, else with `--dir` as the one root.
    pub fn open_aggregating(
        args: &ToolSourceArgs,
        options: UpstreamOptions,
        read_state: Option<Arc<ReadState>>,
        hidden: Vec<String>,
    ) -> Result<(Self, Upstreams), CliError> {
        let registry = Registry::new().with_listing_timeout(options.connect_timeout);
        let mut toolbox = Self::open_builtin(args, read_state, hidden, registry)?;
        let sets = match &args.mcp_config {
            Some(path) => open_mcp_servers(path, Some(&canonical_dir(&args.dir)?))?,
            None => Vec::new(),
        };
        let set_options = ToolSetOptions::new()
            .refresh(ToolSetRefresh::OnRun)
            .always_prefix(options.always_prefix);
        let upstreams = Upstreams::new(sets, options);
        for set in upstreams.tool_sets() {
            toolbox.add(set, set_options)?;
        }
        Ok((toolbox, upstreams))
    }

    fn add(&mut self, set: Arc<dyn ToolSet>, options: ToolSetOptions) -> Result<(), CliError> {
        self.registry
            .add_tool_set(set.clone(), options)
            .map_err(|e| CliError::usage(e.to_string()))?;
        self.sets.push(set);
        Ok(())
    }

    /// The built-in tool set in `args.dir` (or at `--remote`), registered in `registry`.
    fn open_builtin(
        args: &ToolSourceArgs,
        read_state: Option<Arc<ReadState>>,
        hidden: Vec<String>,
        registry: Registry,
    ) -> Result<Self, CliError> {
        if let Some(target) = &args.remote {
            return Self::open_remote(args, target, registry);
        }
        if args.sandbox == Some(SandboxMode::Container) {
            return Self::open_contained(args, hidden, registry);
        }
        let dir = canonical_dir(&args.dir)?;
        let mut options = BuiltinOptions::new(&dir)
            .with_hidden_paths(hidden)
            .with_read_only(args.read_only)
            .with_sandbox(args.sandbox.unwrap_or_else(default_sandbox))
            .with_code_tools(args.code_tools.clone().unwrap_or_default());
        if let Some(state) = read_state {
            options = options.with_read_state(state);
        }
        let builtin = Arc::new(
            BuiltinToolSet::new(options)
                .map_err(|e| CliError::usage(format!("cannot open the built-in tools: {e}")))?,
        );
        let registry = Arc::new(registry);
        // The built-in tools never change: list them once.
        registry
            .add_tool_set(builtin.clone(), ToolSetRefresh::Cached)
            .map_err(|e| CliError::usage(e.to_string()))?;
        let sets: Vec<Arc<dyn ToolSet>> = vec![builtin.clone()];
        let mut toolbox = Self {
            registry,
            builtin_tools: builtin.clone(),
            builtin: Some(builtin),
            remote: None,
            sets,
        };
        if let Some(browser) = crate::browser::browser_tool_set(args)? {
            toolbox.add(browser, ToolSetRefresh::Cached.into())?;
        }
        Ok(toolbox)
    }

    /// The built-in tools of the Toolbelt at `target`, over SSH, under their own names.
    fn open_remote(
        args: &ToolSourceArgs,
        target: &SshTarget,
        registry: Registry,
    ) -> Result<Self, CliError> {
        let remote = Arc::new(
            SshToolSet::new("remote", target.clone(), args.remote_options())
                .map_err(|e| CliError::failed(e.to_string()))?,
        );
        Self::served_elsewhere(args, remote.clone(), Some(remote), registry)
    }

    /// A toolbox whose built-in tools are `set`, a server of them run elsewhere (over SSH,
    /// in a container), plus the browser tools when asked for.
    fn served_elsewhere(
        args: &ToolSourceArgs,
        set: Arc<dyn ToolSet>,
        remote: Option<Arc<SshToolSet>>,
        registry: Registry,
    ) -> Result<Self, CliError> {
        let registry = Arc::new(registry);
        // The served built-in tools never change: list them once.
        registry
            .add_tool_set(set.clone(), ToolSetRefresh::Cached)
            .map_err(|e| CliError::usage(e.to_string()))?;
        let mut toolbox = Self {
            registry,
            builtin: None,
            builtin_tools: set.clone(),
            remote,
            sets: vec![set],
        };
        if let Some(browser) = crate::browser::browser_tool_set(args)? {
            toolbox.add(browser, ToolSetRefresh::Cached.into())?;
        }
        Ok(toolbox)
    }

    /// `--sandbox container`: the built-in tools served by this binary (`serve --stdio`) in
    /// one bubblewrap container for the whole tool set, so its files, searches and commands
    /// all run inside (see [`toolbelt::builtin::shell::Container::tool_set_command`]); the
    /// server inside sandboxes its commands with Landlock where the kernel has it.
    /// `hidden` (the Read denies' patterns) goes to the server as the same rules, so its
    /// Grep and Glob keep out of those paths too.
    fn open_contained(
        args: &ToolSourceArgs,
        hidden: Vec<String>,
        registry: Registry,
    ) -> Result<Self, CliError> {
        let dir = canonical_dir(&args.dir)?;
        let refuse = |e: String| CliError::usage(format!("--sandbox container: {e}"));
        let container = Container::new(!args.read_only).map_err(|e| refuse(e.to_string()))?;
        let program = std::env::current_exe()
            .map_err(|e| refuse(format!("cannot find this program to run inside: {e}")))?;
        let inner = match SandboxMode::best_available() {
            SandboxMode::Off => SandboxMode::Off,
            _ if args.read_only => SandboxMode::ReadOnly,
            _ => SandboxMode::WorkspaceWrite,
        };
        let mut serve: Vec<String> = vec!["serve".into(), "--stdio".into(), "--dir".into()];
        serve.push(dir.to_string_lossy().into_owned());
        serve.extend(["--sandbox".into(), inner.to_string()]);
        if args.read_only {
            serve.push("--read-only".into());
        }
        for pattern in hidden {
            // A gitignore line anchored at the base, which a Read rule takes as it is.
            serve.extend(["--deny".into(), format!("Read({pattern})")]);
        }
        if let Some(access) = &args.code_tools {
            use toolbelt::builtin::code::CodeToolAccess;
            let access = match access {
                CodeToolAccess::None => "none".to_string(),
                CodeToolAccess::All => "all".to_string(),
                CodeToolAccess::Only(names) => names.join(","),
            };
            serve.extend(["--code-tools".into(), access]);
        }
        let (bwrap, bwrap_args) = container
            .tool_set_command(&program, &serve, &dir)
            .map_err(|e| refuse(e.to_string()))?;
        let config = ConnectionConfig::new(TransportConfig::stdio(bwrap, bwrap_args));
        let set = McpToolSet::builder("builtin", config)
            .build()
            .map_err(|e| refuse(e.to_string()))?;
        Self::served_elsewhere(args, Arc::new(set), None, registry)
    }

    /// With `--remote`: connects now (host key, login, the remote binary, the MCP session),
    /// so a failure ends the command with what ssh said instead of a missing tool later.
    /// Closes the toolbox when it fails.
    pub async fn connect_remote(self) -> Result<Self, CliError> {
        let Some(remote) = &self.remote else {
            return Ok(self);
        };
        match remote.connect(&ToolContext::new()).await {
            Ok(()) => Ok(self),
            Err(err) => {
                let message = format!("--remote {}: {err}", remote.target());
                self.close().await;
                Err(CliError::failed(message))
            }
        }
    }

    /// The built-in tools' set, local or remote.
    pub fn builtin_tools(&self) -> &Arc<dyn ToolSet> {
        &self.builtin_tools
    }

    /// Connects execute_code's programs (with `--code-tools`) to `executor`, the one that runs
    /// this toolbox's calls, so their calls pass the same pipeline. (On a remote, its own
    /// serve's executor runs them.)
    pub fn bind_executor(&self, executor: &Executor) {
        if let Some(builtin) = &self.builtin {
            builtin.bind_tool_caller(Arc::new(executor.downgrade()));
        }
    }

    /// Says on stderr which sandbox Bash runs in (for the commands that keep running: `serve`,
    /// `run`, `chat`, and for `tools list`).
    pub fn announce_sandbox(&self) {
        match (&self.builtin, &self.remote) {
            (Some(builtin), _) => {
                eprintln!("toolbelt: {}", sandbox_line(builtin.shell_sandbox()))
            }
            (None, Some(remote)) => eprintln!(
                "toolbelt: remote: the built-in tools run at {} (the remote's toolbelt serve \
                 applies its sandbox there)",
                remote.target()
            ),
            // Only the container's server runs the built-in tools then (`open_contained`).
            (None, None) => eprintln!("toolbelt: {}", sandbox_line(Some(SandboxMode::Container))),
        }
    }

    /// Lists every set now (connecting to MCP servers) and warns on stderr about the ones
    /// that failed, so one broken server does not stop the command.
    pub async fn list(&self, ctx: &ToolContext) -> toolbelt::exec::ToolSnapshot {
        let snapshot = self.registry.snapshot(ctx).await;
        for (set, err) in snapshot.errors() {
            eprintln!("toolbelt: warning: the tools of {set:?} are not available: {err}");
        }
        snapshot
    }

    /// Closes every set this toolbox opened.
    pub async fn close(self) {
        for set in self.sets {
            if let Err(err) = set.close().await {
                tracing::warn!(tool_set = set.name(), "closing failed: {err}");
            }
        }
    }
}

/// The sandbox when `--sandbox` is not given: workspace-write where the kernel can enforce
/// it; else off, said once on stderr.
fn default_sandbox() -> SandboxMode {
    let mode = SandboxMode::best_available();
    if mode == SandboxMode::Off {
        eprintln!(
            "toolbelt: note: this kernel cannot enforce the Landlock sandbox, so Bash runs \
             unsandboxed (--sandbox off)"
        );
    }
    mode
}

/// What the sandbox line says: the mode in effect and what enforces it.
fn sandbox_line(mode: Option<SandboxMode>) -> String {
    match mode {
        None => "sandbox: Bash is not offered (read-only, and no sandbox to run it in)".into(),
        Some(SandboxMode::Off) => "sandbox: off (Bash runs unconfined)".into(),
        Some(SandboxMode::Container) => "sandbox: container (bubblewrap: the built-in tools \
             and their commands in one container of its own user, pid and network namespaces, \
             seeing the system directories read-only, --dir and a private /tmp and home; \
             commands inside also under Landlock where the kernel has it)"
            .into(),
        Some(mode) => match LandlockSandbox::new(mode) {
            Ok(sandbox) => format!("sandbox: {}", sandbox.summary()),
            Err(_) => format!("sandbox: {mode}"),
        },
    }
}

/// One MCP tool set per server of an `mcpServers` file, in the file's order; with `root`,
/// each offers that directory as its root.
fn open_mcp_servers(path: &Path, root: Option<&Path>) -> Result<Vec<McpToolSet>, CliError> {
    let roots = match root {
        Some(dir) => Some(vec![Root::directory(dir).map_err(|e| {
            CliError::usage(format!("--dir {} as an MCP root: {e}", dir.display()))
        })?]),
        None => None,
    };
    let file = McpServersFile::load(path)
        .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    let mut sets = Vec::new();
    for (name, config) in file.servers() {
        let config = config.map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        let mut builder =
            McpToolSet::builder(name.as_str(), config).session_reconnect(MCP_RECONNECT_ATTEMPTS);
        if let Some(roots) = &roots {
            builder = builder.roots(roots.clone());
        }
        let set = builder
            .build()
            .map_err(|e| CliError::usage(e.to_string()))?;
        sets.push(set);
    }
    Ok(sets)
}

/// The base directory as an absolute path, with a clear error when it is not a directory.
pub fn canonical_dir(dir: &Path) -> Result<PathBuf, CliError> {
    let canonical = std::fs::canonicalize(dir)
        .map_err(|e| CliError::usage(format!("--dir {}: {e}", dir.display())))?;
    if !canonical.is_dir() {
        return Err(CliError::usage(format!(
            "--dir {}: not a directory",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// The argument text of a call: `raw` itself, or standard input when `raw` is `-`.
pub fn read_arguments(raw: &str) -> Result<String, CliError> {
    if raw != "-" {
        return Ok(raw.to_string());
    }
    std::io::read_to_string(std::io::stdin())
        .map_err(|e| CliError::usage(format!("cannot read the arguments from stdin: {e}")))
}

/// Runs one call through `executor`, resolving its name in `snapshot`. Ctrl-C or SIGTERM
/// cancels it: a running Bash command's process group is killed, an MCP server is sent
/// `notifications/cancelled`, before the command closes its tool sets.
pub async fn execute_until_signal(
    executor: &Executor,
    snapshot: &ToolSnapshot,
    ctx: ToolContext,
    call: &ToolCall,
) -> CallResult {
    let token = ctx.cancellation().clone();
    let watcher = tokio::spawn(async move {
        crate::signal::stop_signal().await;
        token.cancel();
    });
    let result = executor.execute_in(snapshot, ctx, call).await;
    watcher.abort();
    result
}
