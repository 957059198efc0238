//! The file half of the built-in tools: the [`FileOps`] backend trait (with a confined local
//! implementation), read-before-write tracking, and the Read, Write, Edit and NotebookEdit
//! tools.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;

use crate::confine::PathError;

pub mod diff;
pub mod edit;
pub mod fingerprint;
pub mod local;
pub mod notebook;
pub mod patch;
pub mod pdf;
pub mod read;
pub mod read_state;
pub mod text;
pub mod write;

pub use local::LocalFileOps;
pub use read_state::{ReadScope, ReadState, SharedReads};

use toolbelt_core::{DynTool, ToolError};

use crate::BuiltinEnv;

/// The file tools that only read: Read.
pub fn reading_tools(env: &BuiltinEnv) -> Result<Vec<DynTool>, ToolError> {
    Ok(vec![read::read_tool(env)?])
}

/// The file tools that change files: Write, Edit, NotebookEdit, apply_patch (left out in
/// read-only mode).
pub fn writing_tools(env: &BuiltinEnv) -> Result<Vec<DynTool>, ToolError> {
    Ok(vec![
        fingerprint::NotesWrites::wrap(write::write_tool(env)?),
        fingerprint::NotesWrites::wrap(edit::edit_tool(env)?),
        fingerprint::NotesWrites::wrap(notebook::notebook_edit_tool(env)?),
        fingerprint::NotesWrites::wrap(patch::apply_patch_tool(env)?),
    ])
}

/// What kind of thing a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// A socket, FIFO, device or anything else.
    Other,
}

/// The metadata the tools need about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// What the path names.
    pub kind: FileKind,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time, when the backend knows it.
    pub modified: Option<SystemTime>,
    /// Unix permission bits (`0o644`), or 0 when the backend has none.
    pub mode: u32,
    /// The owner's user id, when the backend knows it. From the open handle for a read, so
    /// a check of it is a check of the file whose bytes were read (see `toolbelt-ext`'s rules).
    pub owner: Option<u32>,
}

/// A file's bytes and the metadata they were read with.
#[derive(Debug, Clone)]
pub struct FileContents {
    /// The whole file.
    pub bytes: Vec<u8>,
    /// Its metadata at the time of reading (from the open handle).
    pub stat: FileStat,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's file name.
    pub name: String,
    /// What it is (symlinks are reported as such, not followed).
    pub kind: FileKind,
}

/// Which files a [`FileOps::walk`] visits.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkOptions {
    /// Also visit paths excluded by `.gitignore`, `.ignore` and friends.
    pub include_ignored: bool,
}

/// Why a file operation failed. Messages are written for a model to act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path was refused by confinement, or could not be resolved.
    #[error(transparent)]
    Path(#[from] PathError),
    /// Nothing exists at the path.
    #[error("file does not exist: {path}")]
    NotFound {
        /// The path, relative to the base.
        path: String,
    },
    /// The path is a directory where a file was expected.
    #[error("{path} is a directory, not a file")]
    IsDirectory {
        /// The path, relative to the base.
        path: String,
    },
    /// The path is a socket, FIFO or device.
    #[error("{path} is not a regular file")]
    NotAFile {
        /// The path, relative to the base.
        path: String,
    },
    /// The file is larger than the configured limit.
    #[error("{path} is {size} bytes, more than the {max}-byte limit for reading files")]
    TooLarge {
        /// The path, relative to the base.
        path: String,
        /// The file's size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The backend failed in another way.
    #[error("{path}: {message}")]
    Other {
        /// The path, relative to the base.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl FsError {
    /// Whether the error means the file does not exist.
    pub fn is_not_found(&self) -> bool {
        match self {
            FsError::NotFound { .. } => true,
            FsError::Path(p) => p.is_not_found(),
            _ => false,
        }
    }
}

/// The file system the file tools work on: a local directory by default, or a remote machine
/// or sandbox behind another implementation.
///
/// Paths passed to the methods are absolute paths produced by [`FileOps::resolve`].
/// Implementations must still enforce confinement at use time (a path may have changed since
/// it was resolved, and a caller may pass any path), as [`LocalFileOps`] does by opening every
/// file beneath a handle of the base directory. One rule for symlinks: followed when the
/// target is inside the base, refused when it is outside.
#[async_trait]
pub trait FileOps: Send + Sync + fmt::Debug {
    /// The base directory every path is confined to, as this backend names it.
    fn base_dir(&self) -> &Path;

    /// Resolves a caller's path (relative to the base, or absolute) to an absolute path inside
    /// the base, or refuses it with "path is outside the base directory".
    fn resolve(&self, path: &str) -> Result<PathBuf, FsError>;

    /// A resolved path as the tools show it: relative to the base.
    fn display_path(&self, resolved: &Path) -> String;

    /// Metadata of what the path names (a symlink followed when its target is inside the
    /// base, refused otherwise); `None` when nothing exists.
    async fn stat(&self, path: &Path) -> Result<Option<FileStat>, FsError>;

    /// Reads a whole regular file, refusing it when larger than `max_size` bytes.
    async fn read(&self, path: &Path, max_size: Option<u64>) -> Result<FileContents, FsError>;

    /// Replaces (or creates) the file atomically: readers see the old or the new content,
    /// never a mix, and a crash leaves no half-written file. An existing file's permission
    /// bits are kept, except setuid and setgid, which are never left on a written file; a
    /// read-only file (no write bit, or not writable by this process) is refused ("file is
    /// read-only"); missing parent directories are created.
    async fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<FileStat, FsError>;

    /// Removes the file (or symbolic link, not its target) at `path`; a directory is
    /// refused. The default refuses every removal, for backends that cannot remove.
    async fn remove(&self, path: &Path) -> Result<(), FsError> {
        Err(FsError::Other {
            path: self.display_path(path),
            message: "this file backend cannot delete files".to_string(),
        })
    }

    /// The entries of a directory, sorted by name.
    async fn list(&self, dir: &Path) -> Result<Vec<DirEntry>, FsError>;

    /// Every regular file below `root` (following symlinks whose target is inside the base,
    /// skipping the others, VCS folders and, unless asked, ignored paths), as absolute paths
    /// in path order.
    async fn walk(&self, root: &Path, options: WalkOptions) -> Result<Vec<PathBuf>, FsError>;

    /// A result-cache fingerprint of what `path` names now: a value that changes whenever
    /// its content (a file) or its entries (a directory) may have, or `None` when that
    /// cannot be told cheaply. `None`, the default, keeps Read, Grep and Glob results on this
    /// backend out of any result cache. [`LocalFileOps`] names the device, inode, size and
    /// times, and hashes files changed within the last two seconds ([`fingerprint`]).
    async fn fingerprint(&self, path: &Path) -> Option<String> {
        let _ = path;
        None
    }
}

/// A shared, type-erased file backend.
pub type DynFileOps = Arc<dyn FileOps>;
