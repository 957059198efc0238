//! [`Workspace`]: where a tool set's tools act, in one value: the base directory, the file
//! system ([`FileOps`](crate::fs::FileOps)), the search ([`SearchBackend`](crate::search::SearchBackend)),
//! the processes ([`ProcessBackend`]) and what they share (the read-before-write record with
//! its locks). A [`BuiltinToolSet`](crate::BuiltinToolSet) is built over one workspace, so
//! moving the tools elsewhere (another root, a container, later a remote machine) is swapping
//! one value, and Read, Glob, Grep and Bash can never disagree about where they are.
//!
//! [`Workspace::local`] is the default: the same local backends the tool set used before, at
//! no extra cost. [`Workspace::container`] keeps the files and searches local (the base
//! directory is bound at the same path inside, so they see the same bytes) and runs every
//! command in a bubblewrap container ([`Container`]). A remote workspace implements the three
//! traits over its channel and is built with [`Workspace::new`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolbelt_core::ToolError;

use crate::fs::{DynFileOps, LocalFileOps, ReadState};
use crate::search::{DynSearchBackend, LocalSearch};
use crate::shell::{Container, LocalProcessBackend, ProcessBackend};

/// Files, search, processes and their shared state, for one tool set. Cheap to clone.
#[derive(Clone)]
pub struct Workspace {
    base_dir: PathBuf,
    files: DynFileOps,
    search: DynSearchBackend,
    processes: Option<Arc<dyn ProcessBackend>>,
    read_state: Arc<ReadState>,
    kind: &'static str,
}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workspace")
            .field("kind", &self.kind)
            .field("base_dir", &self.base_dir)
            .field("processes", &self.processes.as_ref().map(|p| p.name()))
            .finish_non_exhaustive()
    }
}

impl Workspace {
    /// A workspace from its parts. `base_dir` is the directory the tools report and run
    /// commands in, as the backends see it (for a remote workspace, a path there).
    pub fn new(
        base_dir: impl Into<PathBuf>,
        files: DynFileOps,
        search: DynSearchBackend,
        processes: Arc<dyn ProcessBackend>,
    ) -> Self {
        Self {
            base_dir: base_dir.into(),
            files,
            search,
            processes: Some(processes),
            read_state: Arc::default(),
            kind: "custom",
        }
    }

    /// The local directory `base_dir`: local files, the in-process search, and commands run
    /// by the local backend under the tool set's sandbox mode. Fails when it does not exist.
    pub fn local(base_dir: impl AsRef<Path>) -> Result<Self, ToolError> {
        let base = base_dir.as_ref();
        let base_dir = std::fs::canonicalize(base)
            .map_err(|e| ToolError::failed(format!("base directory {}: {e}", base.display())))?;
        Ok(Self {
            files: Arc::new(LocalFileOps::new(&base_dir).map_err(ToolError::failed)?),
            search: Arc::new(LocalSearch::new(&base_dir).map_err(ToolError::failed)?),
            base_dir,
            processes: None,
            read_state: Arc::default(),
            kind: "local",
        })
    }

    /// The local directory `base_dir` with every command in a bubblewrap container
    /// ([`Container`]); `writable` binds the base read-write. Fails with the install hint
    /// when bubblewrap or unprivileged user namespaces are missing.
    pub fn container(base_dir: impl AsRef<Path>, writable: bool) -> Result<Self, ToolError> {
        let container = Container::new(writable).map_err(|e| ToolError::failed(e.to_string()))?;
        Self::in_container(base_dir, container)
    }

    /// The local directory `base_dir` with every command in `container`.
    pub fn in_container(
        base_dir: impl AsRef<Path>,
        container: Container,
    ) -> Result<Self, ToolError> {
        let mut workspace = Self::local(base_dir)?;
        workspace.processes = Some(Arc::new(
            LocalProcessBackend::new().with_container(Arc::new(container)),
        ));
        workspace.kind = "container";
        Ok(workspace)
    }

    /// Replaces the file system backend.
    pub fn with_files(mut self, files: DynFileOps) -> Self {
        self.files = files;
        self
    }

    /// Replaces the search backend.
    pub fn with_search(mut self, search: DynSearchBackend) -> Self {
        self.search = search;
        self
    }

    /// Replaces the process backend.
    pub fn with_processes(mut self, processes: Arc<dyn ProcessBackend>) -> Self {
        self.processes = Some(processes);
        self
    }

    /// Continues an existing read-before-write record (its locks come with it).
    pub fn with_read_state(mut self, state: Arc<ReadState>) -> Self {
        self.read_state = state;
        self
    }

    /// The base directory, as the backends see it.
    pub fn base_dir(&self) -> &Path {
        &self.base_dir
    }

    /// The file system backend.
    pub fn files(&self) -> &DynFileOps {
        &self.files
    }

    /// The search backend.
    pub fn search(&self) -> &DynSearchBackend {
        &self.search
    }

    /// The process backend, or `None` for the local backend the shell configuration builds
    /// (with its sandbox and containment).
    pub fn processes(&self) -> Option<&Arc<dyn ProcessBackend>> {
        self.processes.as_ref()
    }

    /// The read-before-write record.
    pub fn read_state(&self) -> &Arc<ReadState> {
        &self.read_state
    }

    /// `local`, `container` or `custom`, for messages.
    pub fn kind(&self) -> &'static str {
        self.kind
    }
}
