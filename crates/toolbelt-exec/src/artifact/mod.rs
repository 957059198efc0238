//! Artifact offload: large results go to a store; the model sees a preview and a reference
//! it can read back with the `artifact_read` tool, the user keeps the full result.
//!
//! The stores: [`MemoryArtifactStore`] and [`FsArtifactStore`] on this machine ([`local`]),
//! and with the feature `s3` [`S3ArtifactStore`] on S3-compatible object storage ([`s3`]),
//! which several processes or machines can share. All of them check ids the same way and
//! cut reads through one function, so a read returns the same slice from every store.

mod local;
#[cfg(feature = "s3")]
mod s3;

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use local::{FsArtifactStore, MemoryArtifactStore};
#[cfg(feature = "s3")]
pub use s3::{S3ArtifactStore, S3ArtifactStoreBuilder};

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

/// The most bytes one UTF-8 character takes.
const MAX_CHAR_BYTES: usize = 4;

/// Cuts `text[offset..offset + length]` at character boundaries (see [`slice_window`]).
fn slice_text(text: &str, offset: usize, length: usize) -> Result<ArtifactSlice, ToolError> {
    slice_window(text.as_bytes(), 0, text.len(), offset, length)
}

/// The bytes of an artifact a read must have to cut `offset..offset + length` at character
/// boundaries: up to 3 bytes before (the start moves back to a boundary) and 4 after (the end
/// is checked for a boundary, or grows to one whole character). The end may pass the
/// artifact's end; a store clamps it.
fn window_for(offset: usize, length: usize) -> std::ops::Range<usize> {
    offset.saturating_sub(MAX_CHAR_BYTES - 1)
        ..offset.saturating_add(length).saturating_add(MAX_CHAR_BYTES)
}

/// Cuts `offset..offset + length` of an artifact of `total_bytes` bytes out of `window`, the
/// artifact's bytes from `window_start` on, at character boundaries: the start moves back
/// to one, the end moves back to one, but at least one character is returned when there is
/// one; an offset past the end gives an empty slice at the end.
///
/// Every store cuts through this one function, so a ranged read from object storage (given
/// the bytes of [`window_for`]) returns exactly what reading the whole artifact would. Bytes
/// that are not UTF-8 (an object changed behind the store's back) are an error, not a panic.
fn slice_window(
    window: &[u8],
    window_start: usize,
    total_bytes: usize,
    offset: usize,
    length: usize,
) -> Result<ArtifactSlice, ToolError> {
    let window_end = window_start
        .saturating_add(window.len())
        .min(total_bytes)
        .max(window_start);
    let byte_at = |at: usize| {
        (window_start..window_end)
            .contains(&at)
            .then(|| window[at - window_start])
    };
    // A position is a boundary unless it holds a UTF-8 continuation byte (0b10xx_xxxx).
    let is_boundary = |at: usize| byte_at(at).is_none_or(|b| b & 0xc0 != 0x80);
    let mut start = offset.min(total_bytes).max(window_start).min(window_end);
    while start > window_start && !is_boundary(start) {
        start -= 1;
    }
    let mut end = start.saturating_add(length).min(window_end);
    while end > start && !is_boundary(end) {
        end -= 1;
    }
    if end == start
        && let Some(lead) = byte_at(start)
    {
        let width = match lead {
            0xf0.. => 4,
            0xe0.. => 3,
            0xc0.. => 2,
            _ => 1,
        };
        end = start.saturating_add(width).min(window_end);
    }
    let bytes = &window[start - window_start..end - window_start];
    let text = std::str::from_utf8(bytes).map_err(|err| {
        ToolError::failed(format!(
            "the artifact holds bytes that are not UTF-8 near offset {start}: {err}"
        ))
    })?;
    Ok(ArtifactSlice {
        text: text.to_string(),
        offset: start,
        total_bytes,
    })
}

/// A fresh artifact id: random bits (per-process random hasher keys) and a counter.
fn new_artifact_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(count);
    format!("{:016x}{:04x}", hasher.finish(), count & 0xffff)
}

/// The longest artifact id, in bytes.
const MAX_ID_BYTES: usize = 128;

fn unknown_artifact(id: &str) -> ToolError {
    ToolError::invalid_arguments(format!("no artifact with id {id:?}"))
}

/// Checks an id before it names a file or an object: letters, digits, `-` and `_`, at most
/// [`MAX_ID_BYTES`], so no id can hold a path separator, a dot, a percent escape or a
/// control character, and none can leave the store's folder or key prefix. A refused id is
/// reported like an unknown one, cut to the longest valid length.
fn checked_id(id: &str) -> Result<&str, ToolError> {
    let id = id.strip_prefix(ARTIFACT_SCHEME).unwrap_or(id);
    let valid = !id.is_empty()
        && id.len() <= MAX_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(id)
    } else {
        let mut shown = MAX_ID_BYTES.min(id.len());
        while !id.is_char_boundary(shown) {
            shown -= 1;
        }
        Err(unknown_artifact(&id[..shown]))
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
        let preview = slice_text(&full, 0, self.preview_bytes)?.text;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The cut on a whole `&str`, written with `str`'s own boundary checks: what every
    /// store's slices must equal.
    fn reference(text: &str, offset: usize, length: usize) -> (usize, &str) {
        let mut start = offset.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = start.saturating_add(length).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == start && start < text.len() {
            end = start + text[start..].chars().next().map_or(0, char::len_utf8);
        }
        (start, &text[start..end])
    }

    #[test]
    fn a_window_read_cuts_exactly_like_the_whole_text() {
        let text = "aé€😀z\u{10ffff}bç😀😀x€";
        for offset in 0..text.len() + 6 {
            for length in 0..12 {
                let (start, expected) = reference(text, offset, length);
                let whole = slice_text(text, offset, length).unwrap();
                assert_eq!((whole.offset, whole.text.as_str()), (start, expected));
                let window = window_for(offset, length);
                let (lo, hi) = (window.start.min(text.len()), window.end.min(text.len()));
                let piece =
                    slice_window(&text.as_bytes()[lo..hi], lo, text.len(), offset, length).unwrap();
                assert_eq!(piece, whole, "offset {offset}, length {length}");
            }
        }
    }

    #[test]
    fn hostile_windows_and_bytes_give_errors_or_empty_slices_never_panics() {
        // Not UTF-8 (an object changed behind the store's back).
        assert!(slice_window(&[0xff, 0xfe], 0, 2, 0, 2).is_err());
        // A window starting past the end, or shorter than its claimed place.
        let slice = slice_window(b"", 10, 4, 0, 8).unwrap();
        assert_eq!(slice.text, "");
        let slice = slice_window(b"abc", 0, 100, 50, usize::MAX).unwrap();
        assert_eq!((slice.text.as_str(), slice.offset), ("", 3));
        let slice = slice_window(b"abc", 0, 3, usize::MAX, usize::MAX).unwrap();
        assert_eq!((slice.text.as_str(), slice.next_offset()), ("", None));
    }

    #[test]
    fn refused_ids_are_reported_cut_to_the_longest_valid_length() {
        let long = "é".repeat(5_000);
        let err = checked_id(&long).unwrap_err().to_string();
        assert!(err.len() < 300, "{err}");
        for id in [
            "../x",
            "%2e%2e",
            "/etc/passwd",
            "a\u{0}b",
            "a.txt",
            "a b",
            "",
        ] {
            assert!(checked_id(id).is_err(), "{id:?}");
        }
        assert_eq!(checked_id("artifact://ab-C_9").unwrap(), "ab-C_9");
    }
}
