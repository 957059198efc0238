//! No lost update: Write, Edit and NotebookEdit may change an existing file only after it was
//! fully Read through the same tool set, only if its content is still what was read, and only
//! one at a time per file.
//!
//! Three parts, each closing a way an update could be lost:
//! - [`ReadState`] records what each full Read saw: size, modification time and a BLAKE3 hash
//!   of the content. Freshness is decided by the content hash, never by size and mtime alone,
//!   so a same-size change whose mtime was put back is still caught. A successful write
//!   records the new content, so a tool's own edits need no new Read.
//! - A process-wide lock per resolved path makes check-then-write one step: two tool sets on
//!   one directory (two `serve` sessions, two agents) cannot both check the old content and
//!   then both write.
//! - [`read_modify_write`] runs the whole step (stat, size limit, freshness, read, change,
//!   atomic write, record) under that lock in a task of its own, so a caller that stops
//!   waiting (a timeout, a cancelled request) cannot release the lock while the write is
//!   still under way. A cancelled call's change may therefore still land, and is recorded.
//!
//! Between processes, the CLI's `--session` file is locked from load to save; other writers
//! (an editor, `sed -i`) are caught by the hash check, though one that writes between the
//! check and the rename of the new content is not (no advisory lock binds them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::OwnedMutexGuard;

use super::{FileContents, FileKind, FileStat};
use crate::BuiltinEnv;

/// What was seen of a file when it was last fully read (or written by a tool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Snapshot {
    /// Size in bytes.
    size: u64,
    /// Modification time in nanoseconds since the Unix epoch, when known (kept for people
    /// reading a saved session; freshness is decided by the content).
    modified_ns: Option<u128>,
    /// BLAKE3 of the content, in hex.
    blake3: String,
}

impl Snapshot {
    /// The snapshot of `bytes` read with metadata `stat`.
    fn of(stat: &FileStat, bytes: &[u8]) -> Self {
        Self {
            size: bytes.len() as u64,
            modified_ns: stat.modified.and_then(nanos_since_epoch),
            blake3: content_hash(bytes),
        }
    }
}

fn nanos_since_epoch(time: SystemTime) -> Option<u128> {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d: Duration| d.as_nanos())
}

/// The content's BLAKE3 hash in hex: a collision-resistant hash, so content made to match a
/// recorded hash cannot pass for what was read (std's 64-bit SipHash with its fixed public
/// key gives no such promise), and faster than that SipHash: 10 MiB in about 5 ms against
/// 7 ms (release build, loaded 2-core machine).
fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Why a write to an existing file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaleRead {
    /// The file was never fully Read in this session.
    #[error("file has not been read yet; Read it first (the whole file) before writing to it")]
    NotRead,
    /// The file's content changed after it was read.
    #[error("file has been modified since it was read; Read it again")]
    Modified,
}

/// The files this tool set's session has fully read, keyed by resolved path.
///
/// One `ReadState` belongs to one [`crate::BuiltinToolSet`]: the rule is per tool set
/// instance. It can be saved to and loaded from JSON to carry a session across processes.
#[derive(Debug)]
pub struct ReadState {
    files: Mutex<HashMap<PathBuf, Snapshot>>,
    /// Names this session in result-cache fingerprints, so a cached Read is never served to
    /// another session (whose state the Read would not have recorded).
    id: u64,
    /// Counts [`ReadState::forget`] calls: a Read served from a cache after a forget would
    /// not record the file again, so the forget must change Read's fingerprint.
    forgets: std::sync::atomic::AtomicU64,
}

impl Default for ReadState {
    fn default() -> Self {
        Self::with_files(HashMap::new())
    }
}

impl ReadState {
    /// An empty session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `path` was fully read (or written) with this content.
    pub fn record(&self, path: &Path, stat: &FileStat, bytes: &[u8]) {
        let snapshot = Snapshot::of(stat, bytes);
        self.lock().insert(path.to_path_buf(), snapshot);
    }

    /// Forgets `path` (for example after a partial read replaced nothing).
    pub fn forget(&self, path: &Path) {
        self.lock().remove(path);
        self.forgets
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn with_files(files: HashMap<PathBuf, Snapshot>) -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            files: Mutex::new(files),
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            forgets: Default::default(),
        }
    }

    /// This session's part of a result-cache fingerprint: its identity and how often it
    /// forgot a file.
    pub(crate) fn cache_scope(&self) -> String {
        let forgets = self.forgets.load(std::sync::atomic::Ordering::SeqCst);
        format!("session={}.{forgets}", self.id)
    }

    /// Whether `path` has a recorded full read.
    pub fn has_read(&self, path: &Path) -> bool {
        self.lock().contains_key(path)
    }

    /// The check that needs no content: `path` was read, and had the size it has now
    /// (`size`). Lets a writer refuse without reading the file.
    fn check_size(&self, path: &Path, size: u64) -> Result<(), StaleRead> {
        match self.lock().get(path) {
            None => Err(StaleRead::NotRead),
            Some(seen) if seen.size != size => Err(StaleRead::Modified),
            Some(_) => Ok(()),
        }
    }

    /// Checks that `bytes`, the file's content now, is the content that was read. Size and
    /// modification time do not decide: a change that kept both is still a change.
    pub fn check_fresh(&self, path: &Path, bytes: &[u8]) -> Result<(), StaleRead> {
        let files = self.lock();
        let Some(seen) = files.get(path) else {
            return Err(StaleRead::NotRead);
        };
        if seen.size == bytes.len() as u64 && seen.blake3 == content_hash(bytes) {
            Ok(())
        } else {
            Err(StaleRead::Modified)
        }
    }

    /// The session as JSON, to persist between processes.
    pub fn to_json(&self) -> serde_json::Value {
        let files = self.lock();
        let mut entries: Vec<(&PathBuf, &Snapshot)> = files.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let map: serde_json::Map<String, serde_json::Value> = entries
            .into_iter()
            .map(|(path, snap)| {
                let value = serde_json::to_value(snap).unwrap_or(serde_json::Value::Null);
                (path.to_string_lossy().into_owned(), value)
            })
            .collect();
        serde_json::json!({ "files": map })
    }

    /// A session loaded from [`ReadState::to_json`]'s output. Entries saved by an older
    /// version (without a BLAKE3 hash) are dropped: those files must be Read again.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Saved {
            files: HashMap<PathBuf, serde_json::Value>,
        }
        let saved: Saved = serde_json::from_value(value.clone())
            .map_err(|e| format!("not a saved read session: {e}"))?;
        let files = saved
            .files
            .into_iter()
            .filter_map(|(path, entry)| Some((path, serde_json::from_value(entry).ok()?)))
            .collect();
        Ok(Self::with_files(files))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Snapshot>> {
        // A panic elsewhere while holding the lock leaves a map that is still consistent.
        self.files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One async lock per resolved path, shared by every tool set of the process. Entries are
/// weak: a path's lock lives while someone holds or waits for it, and dead entries are swept
/// when the table grows.
static FILE_LOCKS: LazyLock<Mutex<HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Default::default);

/// Sweep dead entries once the table holds more than this many.
const SWEEP_ABOVE: usize = 64;

/// Waits for the lock of `path` (cancellable: dropping the future stops waiting).
async fn lock_file(path: &Path) -> OwnedMutexGuard<()> {
    let lock = {
        let mut table = FILE_LOCKS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match table.get(path).and_then(Weak::upgrade) {
            Some(lock) => lock,
            None => {
                if table.len() >= SWEEP_ABOVE {
                    table.retain(|_, lock| lock.strong_count() > 0);
                }
                let lock = Arc::new(tokio::sync::Mutex::new(()));
                table.insert(path.to_path_buf(), Arc::downgrade(&lock));
                lock
            }
        }
    };
    lock.lock_owned().await
}

/// A change computed from the file's current content: the new bytes and what to report.
pub(crate) type Change<T> = Result<(Vec<u8>, T), String>;

/// Changes the file at `path` (resolved) as one step no other writer of this process can
/// interleave with:
///
/// 1. waits for the path's lock (the only part a cancelled caller stops);
/// 2. stats the file: a directory is refused; a file over `env.max_file_size` is refused
///    without being read; a file that was not fully Read, or whose size changed, is
///    refused without being read;
/// 3. reads it (bounded by the same limit) and checks its content hash against the read;
/// 4. calls `change` with the content (`None` when there is no file), writes the result
///    atomically and records it as read.
///
/// Messages are ready for the model and name the file as `shown`.
pub(crate) async fn read_modify_write<T: Send + 'static>(
    env: &BuiltinEnv,
    path: PathBuf,
    shown: String,
    change: impl FnOnce(Option<FileContents>) -> Change<T> + Send + 'static,
) -> Result<T, String> {
    let guard = lock_file(&path).await;
    let env = env.clone();
    let step = tokio::spawn(async move {
        let _guard = guard;
        let current = current_content(&env, &path, &shown).await?;
        let (bytes, report) = change(current)?;
        let stat = env
            .files
            .write_atomic(&path, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        env.read_state.record(&path, &stat, &bytes);
        Ok(report)
    });
    match step.await {
        Ok(result) => result,
        Err(e) => Err(format!("the change failed: {e}")),
    }
}

/// The file's content for a change, after every check that can refuse it without reading.
async fn current_content(
    env: &BuiltinEnv,
    path: &Path,
    shown: &str,
) -> Result<Option<FileContents>, String> {
    let ops = &env.files;
    let Some(stat) = ops.stat(path).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if stat.kind == FileKind::Dir {
        return Err(format!("{shown} is a directory, not a file"));
    }
    if stat.kind == FileKind::File && stat.size > env.max_file_size {
        return Err(format!(
            "{shown} is {} bytes, more than the {}-byte limit of the file tools; it was not \
             read or changed",
            stat.size, env.max_file_size
        ));
    }
    let fresh = |result: Result<(), StaleRead>| result.map_err(|e| format!("{shown}: {e}"));
    if stat.kind == FileKind::File {
        fresh(env.read_state.check_size(path, stat.size))?;
    }
    let contents = ops
        .read(path, Some(env.max_file_size))
        .await
        .map_err(|e| e.to_string())?;
    fresh(env.read_state.check_fresh(path, &contents.bytes))?;
    Ok(Some(contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(size: u64) -> FileStat {
        FileStat {
            kind: FileKind::File,
            size,
            modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1)),
            mode: 0o644,
        }
    }

    #[test]
    fn freshness_is_decided_by_content_not_by_size_and_mtime() {
        let state = ReadState::new();
        let path = Path::new("/base/a.txt");
        state.record(path, &stat(6), b"abcdef");
        assert_eq!(state.check_fresh(path, b"abcdef"), Ok(()));
        // Same size (and the same stat, as a restored mtime gives): still a change.
        assert_eq!(state.check_fresh(path, b"abcdeX"), Err(StaleRead::Modified));
        assert_eq!(
            state.check_fresh(Path::new("/base/b.txt"), b"abcdef"),
            Err(StaleRead::NotRead)
        );
    }

    #[test]
    fn a_saved_session_round_trips_and_old_entries_are_dropped() {
        let state = ReadState::new();
        state.record(Path::new("/base/a.txt"), &stat(3), b"abc");
        let loaded = ReadState::from_json(&state.to_json()).unwrap();
        assert_eq!(loaded.check_fresh(Path::new("/base/a.txt"), b"abc"), Ok(()));

        // Saved by a version that kept a 64-bit hash: that file must be Read again.
        let old = serde_json::json!({"files": {"/base/a.txt":
            {"size": 3, "modified_ns": 1, "content_hash": 42}}});
        let loaded = ReadState::from_json(&old).unwrap();
        assert!(!loaded.has_read(Path::new("/base/a.txt")));
        assert!(ReadState::from_json(&serde_json::json!([1])).is_err());
    }
}
