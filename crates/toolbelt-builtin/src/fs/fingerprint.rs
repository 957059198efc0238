//! Result-cache fingerprints of the file and search tools
//! ([`Tool::cache_fingerprint`](toolbelt_core::Tool::cache_fingerprint), used by
//! `toolbelt_exec::ResultCache`), and the write counter that invalidates cached searches.
//!
//! - **Read** names the file: device, inode, size, modification and change times in
//!   nanoseconds, and, while those times are less than [`RACY_WINDOW`] old, a BLAKE3 hash of
//!   the content. A file system stamps times from a clock that ticks coarsely (a jiffy on
//!   Linux), so a same-size rewrite in the same tick as the read would keep every stat field;
//!   hashing only young files (git's "racy" rule) catches that without reading an old file
//!   on every hit. The change time cannot be set by a user, so putting the mtime back
//!   (`touch -d`) still changes the fingerprint. It also names the base directory, the size
//!   limit and the tool set's read session.
//! - **Grep** and **Glob** name the base directory, the tool set's session, the process-wide
//!   count of writes made through the tools ([`note_write`]: Write, Edit, NotebookEdit, Bash
//!   and execute_code, at their start and their end) and the searched path's own stat (a
//!   directory's times change when an entry is added, removed or renamed directly in it; a
//!   directory whose mtime is within [`RACY_WINDOW`] is not cached). A file changed by another process
//!   (or by a background task after its Bash call returned) deeper below the searched
//!   directory is not seen until the cache's TTL passes: that is the limit of this cheap
//!   check.
//!
//! Backends other than [`LocalFileOps`](super::LocalFileOps) (and searches other than the
//! local ones) supply no fingerprint, so their results are never cached.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use rustix::fs::{FileType, OFlags};
use serde_json::Value;
use toolbelt_core::{Declaration, DynTool, Tool, ToolContext, ToolError, ToolOutput, ToolStream};

use crate::confine::Confinement;

/// How young a file's times must be for its content to be hashed into its fingerprint (and
/// for a directory not to be cached at all).
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The largest young file hashed into a fingerprint; a larger one is not cached.
const MAX_HASHED: u64 = 64 * 1024 * 1024;

/// Writes made through the tools in this process: bumped when a writing call starts and when
/// it ends, so a search that overlapped a write is never stored under either count.
static WRITES: AtomicU64 = AtomicU64::new(0);

/// Records that a tool is about to write or has written files.
pub(crate) fn note_write() {
    WRITES.fetch_add(1, Ordering::SeqCst);
}

/// The current count of writes made through the tools.
pub(crate) fn write_generation() -> u64 {
    WRITES.load(Ordering::SeqCst)
}

/// The fingerprint of what `path` names now, opened beneath the base; `None` when it cannot
/// be told cheaply (missing, not a file or directory, a directory changed within
/// [`RACY_WINDOW`], a young file too large to hash).
pub(crate) fn local_fingerprint(confinement: &Confinement, path: &Path) -> Option<String> {
    let fd = confinement.open(path, OFlags::PATH).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let kind = FileType::from_raw_mode(st.st_mode);
    let stamp = format!(
        "dev={} ino={} size={} mtime={}.{} ctime={}.{} mode={:o}",
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec,
        st.st_ctime,
        st.st_ctime_nsec,
        st.st_mode,
    );
    let young_mtime = is_young(st.st_mtime, st.st_mtime_nsec as u32);
    let young = young_mtime || is_young(st.st_ctime, st.st_ctime_nsec as u32);
    match kind {
        // An entry added, removed or renamed sets the mtime to now, so a young mtime is the
        // only way a same-tick change could hide (the change time is in the stamp anyway).
        FileType::Directory if young_mtime => None,
        FileType::Directory => Some(format!("dir {stamp}")),
        FileType::RegularFile if !young => Some(format!("file {stamp}")),
        FileType::RegularFile if st.st_size as u64 <= MAX_HASHED => {
            let file = confinement
                .open(path, OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK)
                .ok()?;
            let again = rustix::fs::fstat(&file).ok()?;
            if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino) {
                return None; // Replaced between the two opens.
            }
            let mut hasher = blake3::Hasher::new();
            hasher.update_reader(std::fs::File::from(file)).ok()?;
            Some(format!(
                "file {stamp} blake3={}",
                hasher.finalize().to_hex()
            ))
        }
        _ => None,
    }
}

/// Whether a time is within [`RACY_WINDOW`] of now, or in the future.
fn is_young(secs: i64, nanos: u32) -> bool {
    let Ok(secs) = u64::try_from(secs) else {
        return false;
    };
    let time = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos.min(999_999_999));
    match SystemTime::now().duration_since(time) {
        Ok(age) => age < RACY_WINDOW,
        Err(_) => true,
    }
}

type FingerprintFuture = Pin<Box<dyn Future<Output = Option<String>> + Send>>;
type FingerprintFn = dyn Fn(Value) -> FingerprintFuture + Send + Sync;

/// A tool with a cache fingerprint: everything else is the inner tool's.
pub(crate) struct Fingerprinted {
    inner: DynTool,
    fingerprint: Arc<FingerprintFn>,
}

impl Fingerprinted {
    /// `inner`, fingerprinted by `fingerprint` of the call's arguments.
    pub(crate) fn wrap<F, Fut>(inner: DynTool, fingerprint: F) -> DynTool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<String>> + Send + 'static,
    {
        Arc::new(Self {
            inner,
            fingerprint: Arc::new(move |args| Box::pin(fingerprint(args))),
        })
    }
}

#[async_trait]
impl Tool for Fingerprinted {
    fn declaration(&self) -> &Declaration {
        self.inner.declaration()
    }
    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        self.inner.call(ctx, args).await
    }
    fn is_streaming(&self) -> bool {
        self.inner.is_streaming()
    }
    async fn call_stream(&self, ctx: ToolContext, args: &str) -> Result<ToolStream, ToolError> {
        self.inner.call_stream(ctx, args).await
    }
    async fn cache_fingerprint(&self, _ctx: &ToolContext, args: &Value) -> Option<String> {
        (self.fingerprint)(args.clone()).await
    }
}

/// A tool that may write files: each call counts as a write ([`note_write`]) when it starts
/// and when it ends, whatever its outcome.
pub(crate) struct NotesWrites {
    inner: DynTool,
}

impl NotesWrites {
    /// `inner`, counted as a writer.
    pub(crate) fn wrap(inner: DynTool) -> DynTool {
        Arc::new(Self { inner })
    }
}

/// Notes a write when dropped, so a cancelled call still counts as ended.
struct NoteOnDrop;

impl Drop for NoteOnDrop {
    fn drop(&mut self) {
        note_write();
    }
}

#[async_trait]
impl Tool for NotesWrites {
    fn declaration(&self) -> &Declaration {
        self.inner.declaration()
    }
    async fn call(&self, ctx: ToolContext, args: &str) -> Result<ToolOutput, ToolError> {
        note_write();
        let _end = NoteOnDrop;
        self.inner.call(ctx, args).await
    }
    fn is_streaming(&self) -> bool {
        self.inner.is_streaming()
    }
    async fn call_stream(&self, ctx: ToolContext, args: &str) -> Result<ToolStream, ToolError> {
        note_write();
        let _end = NoteOnDrop;
        self.inner.call_stream(ctx, args).await
    }
}
