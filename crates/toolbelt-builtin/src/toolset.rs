//! [`BuiltinToolSet`]: the built-in tools as one [`ToolSet`], assembled from each area's
//! constructor functions according to [`BuiltinOptions`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use toolbelt_core::{DynTool, ToolContext, ToolError, ToolSet};

use crate::fs::{DynFileOps, ReadState};
use crate::search::DynSearchBackend;
use crate::shell::{LandlockSandbox, SandboxMode};
use crate::workspace::Workspace;

/// The default tool set name.
pub const DEFAULT_NAME: &str = "builtin";

/// The default largest file Read accepts: 10 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;

/// Options of the file tools (Read, Write, Edit, NotebookEdit).
#[derive(Debug, Clone)]
pub struct FileOptions {
    /// The largest file, in bytes, Read accepts (default [`DEFAULT_MAX_FILE_SIZE`]).
    pub max_file_size: u64,
    /// The file system backend; `None` means the local directory [`BuiltinOptions::base_dir`].
    pub backend: Option<DynFileOps>,
    /// The read-before-write session; `None` starts a fresh one. Pass a loaded
    /// [`ReadState`] to continue a session across processes.
    pub read_state: Option<Arc<ReadState>>,
}

impl Default for FileOptions {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            backend: None,
            read_state: None,
        }
    }
}

/// Options of the search tools (Glob, Grep).
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// The search backend; `None` means the in-process [`LocalSearch`] on the base directory.
    pub backend: Option<DynSearchBackend>,
    /// Glob also lists files excluded by `.gitignore` and other ignore files.
    pub glob_include_ignored: bool,
    /// The most paths Glob returns (default 100); the rest are counted and reported.
    pub glob_limit: usize,
    /// Paths Glob and Grep never show, as gitignore patterns relative to the base directory
    /// ([`PermissionRules::hidden_paths`](crate::permission::PermissionRules::hidden_paths):
    /// what a Read deny rule keeps out of searches).
    pub hidden: Vec<String>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            backend: None,
            glob_include_ignored: false,
            glob_limit: crate::search::glob::DEFAULT_GLOB_LIMIT,
            hidden: Vec::new(),
        }
    }
}

/// How to build a [`BuiltinToolSet`]. Each area of tools has its own section.
///
/// ```
/// use toolbelt_builtin::BuiltinOptions;
/// let options = BuiltinOptions::new("/tmp").with_name("files").with_read_only(true);
/// assert_eq!(options.name, "files");
/// ```
#[derive(Debug, Clone)]
pub struct BuiltinOptions {
    /// The tool set's name (default `builtin`).
    pub name: String,
    /// The directory every tool is confined to and works in (default `.`).
    pub base_dir: PathBuf,
    /// Read-only mode: Write, Edit and NotebookEdit are not exposed, and Bash (with
    /// TaskOutput and TaskStop) runs in the read-only sandbox, or is not exposed where no
    /// sandbox is available or [`BuiltinOptions::sandbox`] is [`SandboxMode::Off`] (a shell
    /// command could change any file).
    pub read_only: bool,
    /// The sandbox of Bash and its background tasks. `None` (the default) means none for a
    /// writable set, and the read-only sandbox where the kernel offers it for a read-only set.
    /// A mode the kernel cannot enforce makes [`BuiltinToolSet::new`] fail: a sandbox asked
    /// for is never silently left out. A mode other than off replaces a sandbox set in
    /// [`BuiltinOptions::shell`].
    pub sandbox: Option<SandboxMode>,
    /// Where the tools act ([`Workspace`]): `None` (the default) means the local
    /// [`BuiltinOptions::base_dir`], or a container there with [`SandboxMode::Container`].
    /// Backends set in [`FileOptions`] and [`SearchOptions`] replace the workspace's.
    pub workspace: Option<Workspace>,
    /// The file tools' section.
    pub files: FileOptions,
    /// The search tools' section.
    pub search: SearchOptions,
    /// The shell tools' section (Bash, TaskOutput, TaskStop); its base dir is replaced by
    /// [`BuiltinOptions::base_dir`].
    pub shell: crate::shell::ShellConfig,
    /// The web tools' section (WebFetch, WebSearch, duckduckgo_search; on by default).
    #[cfg(feature = "web")]
    pub web: crate::web::WebOptions,
    /// The tools an `execute_code` program may call (none by default); the calls go through
    /// the executor bound with [`BuiltinToolSet::bind_tool_caller`].
    pub code_tools: crate::code::CodeToolAccess,
}

impl Default for BuiltinOptions {
    fn default() -> Self {
        Self {
            name: DEFAULT_NAME.to_string(),
            base_dir: PathBuf::from("."),
            read_only: false,
            sandbox: None,
            workspace: None,
            files: FileOptions::default(),
            search: SearchOptions::default(),
            shell: crate::shell::ShellConfig::default(),
            #[cfg(feature = "web")]
            web: crate::web::WebOptions::default(),
            code_tools: crate::code::CodeToolAccess::None,
        }
    }
}

impl BuiltinOptions {
    /// Defaults, confined to `base_dir`.
    pub fn new(base_dir: impl Into<PathBuf>) -> Self {
        Self {
            base_dir: base_dir.into(),
            ..Self::default()
        }
    }

    /// Renames the tool set.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Turns read-only mode on or off.
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Runs Bash and its background tasks in `mode` (see [`BuiltinOptions::sandbox`]).
    pub fn with_sandbox(mut self, mode: SandboxMode) -> Self {
        self.sandbox = Some(mode);
        self
    }

    /// Builds the tools over `workspace` (its base directory replaces
    /// [`BuiltinOptions::base_dir`]).
    pub fn with_workspace(mut self, workspace: Workspace) -> Self {
        self.base_dir = workspace.base_dir().to_path_buf();
        self.workspace = Some(workspace);
        self
    }

    /// Lets `execute_code` programs call these tools ([`crate::code::tool_calls`]).
    pub fn with_code_tools(mut self, access: crate::code::CodeToolAccess) -> Self {
        self.code_tools = access;
        self
    }

    /// Sets the largest file Read accepts.
    pub fn with_max_file_size(mut self, bytes: u64) -> Self {
        self.files.max_file_size = bytes;
        self
    }

    /// Uses another file system backend.
    pub fn with_file_ops(mut self, backend: DynFileOps) -> Self {
        self.files.backend = Some(backend);
        self
    }

    /// Uses another search backend.
    pub fn with_search_backend(mut self, backend: DynSearchBackend) -> Self {
        self.search.backend = Some(backend);
        self
    }

    /// Configures the shell tools (environment, policy, sandbox, timeouts).
    pub fn with_shell(mut self, shell: crate::shell::ShellConfig) -> Self {
        self.shell = shell;
        self
    }

    /// Configures the web tools (policies, providers, addresses), or turns them off with
    /// [`WebOptions::disabled`](crate::web::WebOptions::disabled).
    #[cfg(feature = "web")]
    pub fn with_web(mut self, web: crate::web::WebOptions) -> Self {
        self.web = web;
        self
    }

    /// Continues an existing read-before-write session.
    pub fn with_read_state(mut self, state: Arc<ReadState>) -> Self {
        self.files.read_state = Some(state);
        self
    }

    /// Keeps Glob and Grep out of these paths (gitignore patterns relative to the base):
    /// pass [`PermissionRules::hidden_paths`](crate::permission::PermissionRules::hidden_paths)
    /// so a Read deny rule hides what it denies from searches too.
    pub fn with_hidden_paths(mut self, patterns: Vec<String>) -> Self {
        self.search.hidden = patterns;
        self
    }
}

/// What the tools of one set share: the resolved base directory, the backends and the
/// read-before-write session. Each area's constructor functions take it.
#[derive(Debug, Clone)]
pub struct BuiltinEnv {
    /// The canonical base directory.
    pub base_dir: PathBuf,
    /// Whether mutating tools are left out.
    pub read_only: bool,
    /// The file system backend.
    pub files: DynFileOps,
    /// The files fully read in this set's session.
    pub read_state: Arc<ReadState>,
    /// The session a call's reads belong to in a shared [`ReadState`] (from the call's
    /// [`ReadScope`](crate::fs::ReadScope)); `None` outside a call.
    pub read_scope: Option<Arc<str>>,
    /// The search backend.
    pub search: DynSearchBackend,
    /// The largest file Read accepts.
    pub max_file_size: u64,
    /// Whether Glob lists ignored files.
    pub glob_include_ignored: bool,
    /// The most paths Glob returns.
    pub glob_limit: usize,
    /// Paths the searches never show (gitignore patterns relative to the base).
    pub hidden: Arc<[String]>,
}

impl BuiltinEnv {
    /// This environment for one call: with the call's [`ReadScope`](crate::fs::ReadScope).
    pub(crate) fn for_call(&self, ctx: &ToolContext) -> Self {
        let mut env = self.clone();
        env.read_scope = ctx
            .get::<crate::fs::ReadScope>()
            .map(|scope| scope.0.clone());
        env
    }

    /// Records that this call fully read (or wrote) `path` with this content.
    pub(crate) async fn record_read(
        &self,
        path: &Path,
        stat: &crate::fs::FileStat,
        bytes: &[u8],
    ) -> Result<(), String> {
        self.read_state
            .record_in(self.read_scope.as_deref(), path, stat, bytes)
            .await
    }
}

/// The built-in tools as a tool set, confined to a base directory.
///
/// Tools, in order: Read, Glob, Grep, then (unless read-only) Write, Edit, NotebookEdit,
/// then Bash, TaskOutput, TaskStop, exec_command, write_stdin, (unless read-only)
/// execute_code, then TodoWrite, then (with the `web` feature, unless
/// [`WebOptions::disabled`](crate::web::WebOptions::disabled)) WebFetch, WebSearch,
/// duckduckgo_search. In read-only mode the shell tools run in the read-only sandbox
/// ([`SandboxMode::ReadOnly`]: no writes but to a private temp dir, no network), and are left
/// out where that sandbox is not available (or was turned off), since an unconfined shell
/// command can change any file the process may write. The web tools stay (they only read).
/// Write, Edit and NotebookEdit refuse to change an existing file that was not fully Read
/// through *this* set (its [`ReadState`]); two sets never share that state unless given the
/// same one.
#[derive(Clone)]
pub struct BuiltinToolSet {
    name: String,
    workspace: Workspace,
    env: BuiltinEnv,
    tools: Vec<DynTool>,
    shell: crate::shell::ShellTools,
    shell_sandbox: Option<SandboxMode>,
    /// execute_code's persistent Python session, killed on close.
    python: Option<Arc<crate::code::PythonSession>>,
    /// How execute_code's programs reach the executor, when they may call tools.
    code_bridge: Option<Arc<crate::code::ToolBridge>>,
    /// TodoWrite's lists, per session.
    plans: Arc<crate::plan::Plans>,
}

impl std::fmt::Debug for BuiltinToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
        f.debug_struct("BuiltinToolSet")
            .field("name", &self.name)
            .field("base_dir", &self.env.base_dir)
            .field("tools", &names)
            .finish()
    }
}

impl BuiltinToolSet {
    /// Builds the set; fails when the base directory does not exist.
    pub fn new(options: BuiltinOptions) -> Result<Self, ToolError> {
        let workspace = workspace_of(&options)?;
        let base_dir = workspace.base_dir().to_path_buf();
        let files = workspace.files().clone();
        let search = workspace.search().clone();
        let env = BuiltinEnv {
            base_dir,
            read_only: options.read_only,
            files,
            read_state: workspace.read_state().clone(),
            read_scope: None,
            search,
            max_file_size: options.files.max_file_size,
            glob_include_ignored: options.search.glob_include_ignored,
            glob_limit: options.search.glob_limit,
            hidden: options.search.hidden.clone().into(),
        };
        let mut tools = assemble(&env)?;
        let shell_sandbox = shell_sandbox(&options, &workspace)?;
        let mut shell_config = options.shell.clone().base_dir(&env.base_dir);
        if let Some(processes) = workspace.processes() {
            shell_config = shell_config.backend(processes.clone());
        }
        if let Some(mode @ (SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite)) = shell_sandbox {
            let sandbox = LandlockSandbox::new(mode).map_err(|e| {
                ToolError::failed(format!("the {mode} sandbox for Bash is not available: {e}"))
            })?;
            shell_config = shell_config.sandbox(Arc::new(sandbox));
        }
        let shell = crate::shell::ShellTools::new(shell_config)?;
        if shell_sandbox.is_some() {
            // A command can write any file: every call invalidates cached searches.
            tools.extend(shell.tools().into_iter().map(counted_as_writer));
        }
        let mut python = None;
        let code_bridge = crate::code::ToolBridge::new(&options.code_tools);
        if shell_sandbox.is_some() && !options.read_only {
            let (tool, session) =
                crate::code::execute_code_tool(&shell, code_bridge.clone(), &tools)?;
            tools.push(counted_as_writer(tool));
            python = Some(session);
        }
        let plans = Arc::new(crate::plan::Plans::default());
        tools.push(crate::plan::todo_write_tool(plans.clone())?);
        #[cfg(feature = "web")]
        tools.extend(crate::web::tools(&options.web)?);
        Ok(Self {
            name: options.name,
            workspace,
            env,
            tools,
            shell,
            shell_sandbox,
            python,
            code_bridge,
            plans,
        })
    }

    /// Connects execute_code's programs to `caller` (the executor that runs this set's tools;
    /// pass `toolbelt_exec::Executor::downgrade`'s weak handle, since the
    /// executor holds this set). Without [`BuiltinOptions::with_code_tools`] it does nothing;
    /// only the first caller bound is kept.
    pub fn bind_tool_caller(&self, caller: Arc<dyn toolbelt_core::ToolCaller>) {
        if let Some(bridge) = &self.code_bridge {
            bridge.bind(caller);
        }
    }

    /// The sandbox Bash and its background tasks run in, or `None` when this set does not
    /// offer them (read-only without a sandbox). `Some(SandboxMode::Off)` means unsandboxed
    /// (or confined by a custom backend or sandbox of [`BuiltinOptions::shell`]).
    pub fn shell_sandbox(&self) -> Option<SandboxMode> {
        self.shell_sandbox
    }

    /// The canonical base directory.
    pub fn base_dir(&self) -> &Path {
        &self.env.base_dir
    }

    /// The read-before-write session (to persist it, for example).
    pub fn read_state(&self) -> &Arc<ReadState> {
        &self.env.read_state
    }

    /// Where the tools act.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// What the tools share.
    pub fn env(&self) -> &BuiltinEnv {
        &self.env
    }

    /// The task list TodoWrite keeps for `session` (the call's
    /// [`ReadScope`](crate::fs::ReadScope); `None` for calls that name none).
    pub fn todos(&self, session: Option<&str>) -> Vec<crate::plan::TodoItem> {
        self.plans.get(session)
    }

    /// The tools, without going through the async [`ToolSet`] interface.
    pub fn tool_list(&self) -> &[DynTool] {
        &self.tools
    }
}

/// The workspace the options describe: the one given, or the local base dir (in a container
/// with [`SandboxMode::Container`]), with the backends of the file and search sections.
fn workspace_of(options: &BuiltinOptions) -> Result<Workspace, ToolError> {
    let container = options.sandbox == Some(SandboxMode::Container);
    let mut workspace = match &options.workspace {
        Some(workspace) if container && workspace.kind() != "container" => {
            return Err(ToolError::failed(format!(
                "the container sandbox was asked for over a {} workspace",
                workspace.kind()
            )));
        }
        Some(workspace) => workspace.clone(),
        None if container => Workspace::container(&options.base_dir, !options.read_only)?,
        None => Workspace::local(&options.base_dir)?,
    };
    if let Some(files) = &options.files.backend {
        workspace = workspace.with_files(files.clone());
    }
    if let Some(search) = &options.search.backend {
        workspace = workspace.with_search(search.clone());
    }
    if let Some(state) = &options.files.read_state {
        workspace = workspace.with_read_state(state.clone());
    }
    Ok(workspace)
}

/// The sandbox mode of the shell tools, or `None` when a read-only set must leave them out.
fn shell_sandbox(
    options: &BuiltinOptions,
    workspace: &Workspace,
) -> Result<Option<SandboxMode>, ToolError> {
    if workspace.kind() == "container" {
        // Read-only binds the base read-only (Workspace::container), so Bash may stay.
        return Ok(Some(SandboxMode::Container));
    }
    if !options.read_only {
        return Ok(Some(options.sandbox.unwrap_or(SandboxMode::Off)));
    }
    if options.shell.has_custom_backend() || workspace.processes().is_some() {
        // A custom backend ignores the sandbox: nothing here can make its commands read-only.
        return Ok(None);
    }
    Ok(match options.sandbox {
        Some(SandboxMode::Off) => None,
        // Asked for explicitly: not available is an error (from LandlockSandbox::new).
        Some(_) => Some(SandboxMode::ReadOnly),
        None => LandlockSandbox::new(SandboxMode::ReadOnly)
            .ok()
            .map(|_| SandboxMode::ReadOnly),
    })
}

/// `tool` counted as a writer for cached searches ([`crate::fs::fingerprint`]) unless it is
/// declared read-only.
fn counted_as_writer(tool: DynTool) -> DynTool {
    if tool.declaration().meta.is_read_only() {
        tool
    } else {
        crate::fs::fingerprint::NotesWrites::wrap(tool)
    }
}

/// Collects every area's tools in the documented order. An area adds its tools here.
fn assemble(env: &BuiltinEnv) -> Result<Vec<DynTool>, ToolError> {
    let mut tools = Vec::new();
    tools.extend(crate::fs::reading_tools(env)?);
    tools.extend(crate::search::tools(env)?);
    if !env.read_only {
        tools.extend(crate::fs::writing_tools(env)?);
    }
    Ok(tools)
}

#[async_trait]
impl ToolSet for BuiltinToolSet {
    fn name(&self) -> &str {
        &self.name
    }

    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Ok(self.tools.clone())
    }

    /// Kills every background task the shell tools started and execute_code's Python
    /// session.
    async fn close(&self) -> Result<(), ToolError> {
        if let Some(python) = &self.python {
            python.close().await;
        }
        self.shell.close().await;
        Ok(())
    }
}
