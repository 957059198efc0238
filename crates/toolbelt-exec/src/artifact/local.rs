//! The stores on this machine: in memory, and as files in a folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use toolbelt_core::ToolError;

use super::{
    ArtifactRef, ArtifactSlice, ArtifactStore, checked_id, new_artifact_id, slice_text,
    slice_window, unknown_artifact, window_for,
};

/// Artifacts kept in memory, for tests and short-lived processes.
#[derive(Debug, Default)]
pub struct MemoryArtifactStore {
    artifacts: Mutex<HashMap<String, Arc<str>>>,
}

impl MemoryArtifactStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many artifacts are stored.
    pub fn len(&self) -> usize {
        self.artifacts.lock().map(|a| a.len()).unwrap_or(0)
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl ArtifactStore for MemoryArtifactStore {
    async fn put(&self, _tool_name: &str, content: String) -> Result<ArtifactRef, ToolError> {
        let id = new_artifact_id();
        let bytes = content.len();
        self.artifacts
            .lock()
            .map_err(|_| ToolError::failed("the artifact store is unusable after a panic"))?
            .insert(id.clone(), content.into());
        Ok(ArtifactRef { id, bytes })
    }

    async fn read(
        &self,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<ArtifactSlice, ToolError> {
        let id = checked_id(id)?;
        let text = self
            .artifacts
            .lock()
            .map_err(|_| ToolError::failed("the artifact store is unusable after a panic"))?
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_artifact(id))?;
        slice_text(&text, offset, length)
    }
}

/// Artifacts kept as files (`ID.txt`) in a directory.
///
/// Each artifact is written to a temporary file and renamed into place, so a reader never
/// sees half an artifact. Ids are checked before use, so `artifact_read` cannot be pointed
/// outside the directory.
#[derive(Debug, Clone)]
pub struct FsArtifactStore {
    dir: PathBuf,
}

impl FsArtifactStore {
    /// A store in `dir`, created if missing (readable by this user only: artifacts hold
    /// whole tool outputs).
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, ToolError> {
        let dir = dir.into();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|err| {
            ToolError::failed(format!(
                "cannot create the artifact directory {}: {err}",
                dir.display()
            ))
        })?;
        Ok(Self { dir })
    }

    /// The directory holding the artifacts.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.txt"))
    }
}

#[async_trait]
impl ArtifactStore for FsArtifactStore {
    async fn put(&self, _tool_name: &str, content: String) -> Result<ArtifactRef, ToolError> {
        let id = new_artifact_id();
        let bytes = content.len();
        let final_path = self.path_of(&id);
        let temp_path = self.dir.join(format!(".{id}.tmp"));
        let write = async {
            // A new file (never one planted under the temporary name, nor a link's target).
            let mut file = own_file_options()
                .write(true)
                .create_new(true)
                .open(&temp_path)
                .await?;
            tokio::io::AsyncWriteExt::write_all(&mut file, content.as_bytes()).await?;
            file.sync_data().await?;
            tokio::fs::rename(&temp_path, &final_path).await
        };
        if let Err(err) = write.await {
            let _ = tokio::fs::remove_file(&temp_path).await;
            return Err(ToolError::failed(format!(
                "cannot store the artifact in {}: {err}",
                self.dir.display()
            )));
        }
        Ok(ArtifactRef { id, bytes })
    }

    async fn read(
        &self,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<ArtifactSlice, ToolError> {
        let id = checked_id(id)?;
        // Only the bytes the slice needs are read, as from object storage.
        let window = window_for(offset, length);
        let read = async {
            let mut file = open_own_file(&self.path_of(id)).await?;
            let total = file.metadata().await?.len();
            let start = (window.start as u64).min(total);
            file.seek(std::io::SeekFrom::Start(start)).await?;
            let mut bytes = Vec::new();
            file.take(window.len() as u64)
                .read_to_end(&mut bytes)
                .await?;
            Ok::<_, std::io::Error>((bytes, start, total))
        };
        match read.await {
            Ok((bytes, start, total)) => {
                let total = usize::try_from(total).unwrap_or(usize::MAX);
                let start = usize::try_from(start).unwrap_or(usize::MAX);
                slice_window(&bytes, start, total, offset, length)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(unknown_artifact(id)),
            Err(err) if is_refused_link(&err) => Err(ToolError::failed(format!(
                "artifact {id} is not read: the store holds a link under its name, not a file \
                 it wrote"
            ))),
            Err(err) => Err(ToolError::failed(format!(
                "cannot read artifact {id}: {err}"
            ))),
        }
    }
}

/// Open options for the store's own files: a link in the last component is refused
/// (`O_NOFOLLOW`), opening a FIFO planted under an artifact's name does not block
/// (`O_NONBLOCK`), and new files are this user's only.
fn own_file_options() -> tokio::fs::OpenOptions {
    let mut options = tokio::fs::OpenOptions::new();
    #[cfg(unix)]
    options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .mode(0o600);
    options
}

/// Opens an artifact's file for reading, if it is a regular file this process's user owns:
/// the folder may be shared, and a link, FIFO or file that someone else planted in it must
/// not make `artifact_read` (never asked about: it only reads) return what lies elsewhere.
/// The checks are made on the open handle, so no swap between check and read can pass them.
async fn open_own_file(path: &Path) -> std::io::Result<tokio::fs::File> {
    let file = own_file_options().read(true).open(path).await?;
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(std::io::Error::other(format!(
                "the file belongs to user {}, not to this process's user {me}",
                meta.uid()
            )));
        }
    }
    Ok(file)
}

/// Whether `err` is the kernel refusing to follow a link (`O_NOFOLLOW`'s `ELOOP`).
fn is_refused_link(err: &std::io::Error) -> bool {
    #[cfg(unix)]
    return err.raw_os_error() == Some(libc::ELOOP);
    #[cfg(not(unix))]
    return false;
}
