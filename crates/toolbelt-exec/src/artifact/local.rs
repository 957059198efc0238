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
    /// A store in `dir`, created if missing.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, ToolError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|err| {
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
            tokio::fs::write(&temp_path, content.as_bytes()).await?;
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
            let mut file = tokio::fs::File::open(self.path_of(id)).await?;
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
            Err(err) => Err(ToolError::failed(format!(
                "cannot read artifact {id}: {err}"
            ))),
        }
    }
}
