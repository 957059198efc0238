//! Artifact offload: large results go to a store; the model sees a preview and a reference
//! it can read back with the `artifact_read` tool, the user keeps the full result.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolbelt_core::{Declaration, Payload, Tool, ToolContext, ToolError, ToolOutput};

/// The default size above which a result is offloaded: 50 KiB.
pub const DEFAULT_OFFLOAD_THRESHOLD: usize = 50 * 1024;

/// The default size of the preview the model sees of an offloaded result: 2 KiB.
pub const DEFAULT_PREVIEW_BYTES: usize = 2 * 1024;

/// The name of the tool that reads artifacts back.
pub const ARTIFACT_READ_TOOL: &str = "artifact_read";

/// The URI scheme of artifact references.
pub const ARTIFACT_SCHEME: &str = "artifact://";

/// Where an offloaded result went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// The artifact's id (letters, digits, `-` and `_`).
    pub id: String,
    /// Its size in bytes.
    pub bytes: usize,
}

impl ArtifactRef {
    /// `artifact://ID`.
    pub fn uri(&self) -> String {
        format!("{ARTIFACT_SCHEME}{}", self.id)
    }
}

/// A piece of an artifact read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactSlice {
    /// The text read.
    pub text: String,
    /// Where it starts, in bytes (moved back to a character boundary if needed).
    pub offset: usize,
    /// The artifact's total size in bytes.
    pub total_bytes: usize,
}

impl ArtifactSlice {
    /// The offset just past this slice.
    pub fn end(&self) -> usize {
        self.offset + self.text.len()
    }

    /// The offset to read next, or `None` at the end.
    pub fn next_offset(&self) -> Option<usize> {
        (self.end() < self.total_bytes).then(|| self.end())
    }
}

/// Storage for offloaded results.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Stores `content` (produced by `tool_name`) and returns its reference.
    async fn put(&self, tool_name: &str, content: String) -> Result<ArtifactRef, ToolError>;

    /// Reads up to `length` bytes from `offset`. An unknown id is an error naming it; an
    /// offset past the end gives an empty slice.
    async fn read(
        &self,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<ArtifactSlice, ToolError>;
}

/// A shared artifact store.
pub type DynArtifactStore = Arc<dyn ArtifactStore>;

/// Cuts `text[offset..offset + length]` at character boundaries (the start moves back, the
/// end moves back, but at least one character is returned when there is one).
fn slice_text(text: &str, offset: usize, length: usize) -> ArtifactSlice {
    let total_bytes = text.len();
    let mut start = offset.min(total_bytes);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = start.saturating_add(length).min(total_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end == start && start < total_bytes {
        end = start + text[start..].chars().next().map_or(0, char::len_utf8);
    }
    ArtifactSlice {
        text: text[start..end].to_string(),
        offset: start,
        total_bytes,
    }
}

/// A fresh artifact id: random bits (per-process random hasher keys) and a counter.
fn new_artifact_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(count);
    format!("{:016x}{:04x}", hasher.finish(), count & 0xffff)
}

fn unknown_artifact(id: &str) -> ToolError {
    ToolError::invalid_arguments(format!("no artifact with id {id:?}"))
}

/// Checks an id before it is used as a file name.
fn checked_id(id: &str) -> Result<&str, ToolError> {
    let id = id.strip_prefix(ARTIFACT_SCHEME).unwrap_or(id);
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(id)
    } else {
        Err(unknown_artifact(id))
    }
}

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
        Ok(slice_text(&text, offset, length))
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
        match tokio::fs::read_to_string(self.path_of(id)).await {
            Ok(text) => Ok(slice_text(&text, offset, length)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(unknown_artifact(id)),
            Err(err) => Err(ToolError::failed(format!(
                "cannot read artifact {id}: {err}"
            ))),
        }
    }
}

/// When and where large results are offloaded.
///
/// A result is offloaded when the text the model would see is longer than the tool's
/// `meta.max_result_size`, or else the threshold (default 50 KiB), unless the tool is
/// excluded. `artifact_read` itself is always excluded.
#[derive(Clone)]
pub struct ArtifactOffload {
    store: DynArtifactStore,
    threshold: usize,
    preview_bytes: usize,
    excluded: HashSet<String>,
}

impl std::fmt::Debug for ArtifactOffload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactOffload")
            .field("threshold", &self.threshold)
            .field("preview_bytes", &self.preview_bytes)
            .field("excluded", &self.excluded)
            .finish_non_exhaustive()
    }
}

impl ArtifactOffload {
    /// Offload to `store` above [`DEFAULT_OFFLOAD_THRESHOLD`].
    pub fn new(store: DynArtifactStore) -> Self {
        Self {
            store,
            threshold: DEFAULT_OFFLOAD_THRESHOLD,
            preview_bytes: DEFAULT_PREVIEW_BYTES,
            excluded: HashSet::from([ARTIFACT_READ_TOOL.to_string()]),
        }
    }

    /// Sets the size, in bytes, above which results are offloaded.
    pub fn threshold(mut self, bytes: usize) -> Self {
        self.threshold = bytes;
        self
    }

    /// Sets how many bytes of an offloaded result the model sees.
    pub fn preview_bytes(mut self, bytes: usize) -> Self {
        self.preview_bytes = bytes;
        self
    }

    /// Never offloads results of the tool named `name`.
    pub fn exclude(mut self, name: impl Into<String>) -> Self {
        self.excluded.insert(name.into());
        self
    }

    /// The store.
    pub fn store(&self) -> &DynArtifactStore {
        &self.store
    }

    /// The `artifact_read` tool over this offload's store.
    pub fn read_tool(&self) -> ArtifactReadTool {
        ArtifactReadTool::new(self.store.clone())
    }

    /// Offloads `output` if it is too large for `declaration`'s tool. Returns the output the
    /// model should see (a preview and the reference; `for_user` keeps the full result) and
    /// where the full text went.
    pub async fn apply(
        &self,
        declaration: &Declaration,
        output: ToolOutput,
    ) -> Result<(ToolOutput, Option<ArtifactRef>), ToolError> {
        if self.excluded.contains(declaration.name.as_str()) {
            return Ok((output, None));
        }
        let limit = declaration.meta.max_result_size.unwrap_or(self.threshold);
        if output.for_llm.text_len() <= limit {
            return Ok((output, None));
        }
        let full = output.llm_text();
        let preview = slice_text(&full, 0, self.preview_bytes).text;
        let shown = preview.len();
        let total = full.len();
        let artifact = self.store.put(&declaration.name, full).await?;
        let note = format!(
            "\n\n[Result truncated: {total} bytes stored as {uri}; the first {shown} bytes are shown. \
             Read the rest with {ARTIFACT_READ_TOOL} {{\"id\": \"{id}\", \"offset\": {shown}}}.]",
            uri = artifact.uri(),
            id = artifact.id,
        );
        let ToolOutput {
            for_llm, for_user, ..
        } = &output;
        let user = for_user.clone().unwrap_or_else(|| for_llm.clone());
        let offloaded = ToolOutput {
            for_llm: Payload::Text(preview + &note),
            for_user: Some(user),
            ..output
        };
        Ok((offloaded, Some(artifact)))
    }
}

/// The default number of bytes `artifact_read` returns.
pub const DEFAULT_READ_LENGTH: usize = 16 * 1024;

/// The `artifact_read` tool: reads an offloaded result back, a piece at a time.
///
/// Arguments: `id` (the id or the whole `artifact://ID`), `offset` in bytes (default 0) and
/// `length` in bytes (default 16 KiB, at most the offload threshold's default so a read is
/// never offloaded again).
pub struct ArtifactReadTool {
    store: DynArtifactStore,
    declaration: Declaration,
}

impl std::fmt::Debug for ArtifactReadTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactReadTool").finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct ReadArgs {
    id: String,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    length: Option<usize>,
}

impl ArtifactReadTool {
    /// The tool over `store`.
    pub fn new(store: DynArtifactStore) -> Self {
        let declaration = Declaration::new(
            ARTIFACT_READ_TOOL,
            "Reads part of a large tool result that was stored as an artifact. Pass the id from \
             the artifact:// reference, and an offset (in bytes) to continue where the preview \
             or the previous read stopped.",
        )
        .and_then(|d| {
            d.with_input_schema(json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The artifact id, or the whole artifact://ID reference."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Where to start, in bytes. Default 0."},
                    "length": {"type": "integer", "minimum": 1, "maximum": DEFAULT_OFFLOAD_THRESHOLD,
                               "description": "How many bytes to read. Default 16384."}
                },
                "required": ["id"]
            }))
        })
        .map(|d| d.read_only().idempotent().concurrency_safe(true));
        let declaration = match declaration {
            Ok(declaration) => declaration,
            Err(err) => unreachable!("the artifact_read declaration is a valid constant: {err}"),
        };
        Self { store, declaration }
    }
}

#[async_trait]
impl Tool for ArtifactReadTool {
    fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    async fn call(&self, _ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = toolbelt_core::decode_args(args, &self.declaration)?;
        let length = args
            .length
            .unwrap_or(DEFAULT_READ_LENGTH)
            .clamp(1, DEFAULT_OFFLOAD_THRESHOLD);
        let slice = self.store.read(&args.id, args.offset, length).await?;
        let footer = match slice.next_offset() {
            Some(next) => format!(
                "\n\n[bytes {}..{} of {}; continue with offset {next}]",
                slice.offset,
                slice.end(),
                slice.total_bytes
            ),
            None => format!(
                "\n\n[bytes {}..{} of {}; end of artifact]",
                slice.offset,
                slice.end(),
                slice.total_bytes
            ),
        };
        let user = slice.text.clone();
        Ok(ToolOutput::text(slice.text + &footer).with_user_text(user))
    }
}
