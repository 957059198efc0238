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
//!
//! Several processes serving one directory (`toolbelt serve --shared-state`: replicas behind
//! a load balancer) keep the rule together:
//! - [`ReadState::shared`] keeps the reads in a [`SharedReads`] store every process reads,
//!   under the session named by the call's [`ReadScope`] (serve: the MCP session), so a
//!   session may Read through one process and Edit through another;
//! - the step above also holds an exclusive `flock` on a lock file of the path in a lock
//!   folder the processes share, taken after the process's own lock and held from the check
//!   to the record, so two processes cannot both check the old content and then both write.
//!   Lock files are never deleted (deleting one while it is held would let a second holder
//!   lock a new file of the same name); there is one per path ever changed, empty.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
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

/// Names the session whose reads a call's Read records and Write, Edit and NotebookEdit check
/// when the reads are kept in a [`SharedReads`] store: put it in the call's
/// [`ToolContext`](toolbelt_core::ToolContext) (`toolbelt serve` puts the MCP session id).
/// Calls without one share the unnamed session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadScope(pub Arc<str>);

/// Where the reads of sessions are kept so that several processes see them (the replicas of
/// `toolbelt serve --shared-state`). Records are opaque text, one per session and path.
#[async_trait::async_trait]
pub trait SharedReads: Send + Sync + 'static {
    /// The record of `path` read in `session`, if any.
    async fn load(&self, session: &str, path: &Path) -> Result<Option<String>, String>;
    /// Saves the record of `path` read (or written) in `session`.
    async fn save(&self, session: &str, path: &Path, record: &str) -> Result<(), String>;
}

/// Reads kept in a shared store, and the folder of the cross-process locks.
struct Shared {
    reads: Arc<dyn SharedReads>,
    locks: PathBuf,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("locks", &self.locks)
            .finish_non_exhaustive()
    }
}

/// The files this tool set's session has fully read, keyed by resolved path.
///
/// One `ReadState` belongs to one [`crate::BuiltinToolSet`]: the rule is per tool set
/// instance. It can be saved to and loaded from JSON to carry a session across processes.
/// A [`ReadState::shared`] one keeps the reads of every session (per [`ReadScope`]) in a
/// store several processes share instead, and locks files across them.
#[derive(Debug)]
pub struct ReadState {
    files: Mutex<HashMap<PathBuf, Snapshot>>,
    shared: Option<Shared>,
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

    /// A state whose reads are kept in `reads`, per session ([`ReadScope`]), for several
    /// processes to share; their changes to a file are serialised by a lock file in `locks`
    /// (created with mode 0700 if missing). Every process sharing `reads` must use the same
    /// `locks` folder (on a file system they share, with working `flock`) and see the
    /// directory at the same path. Refuses a `locks` folder that is a symbolic link, is not
    /// this user's, or that others may write to: whoever can write there can hold our locks.
    pub fn shared(reads: Arc<dyn SharedReads>, locks: &Path) -> std::io::Result<Self> {
        open_lock_dir(locks)?;
        Ok(Self {
            shared: Some(Shared {
                reads,
                locks: locks.to_path_buf(),
            }),
            ..Self::default()
        })
    }

    /// The lock folder of this user's processes on this machine when none is chosen:
    /// `toolbelt-locks-{uid}` in the temp folder. Processes on several machines need one
    /// on a file system they share instead.
    pub fn default_lock_dir() -> PathBuf {
        let uid = rustix::process::geteuid().as_raw();
        std::env::temp_dir().join(format!("toolbelt-locks-{uid}"))
    }

    /// Whether the reads are kept in a shared store ([`ReadState::shared`]).
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Records that `path` was fully read (or written) with this content, in `scope`'s
    /// session when the reads are shared.
    pub(crate) async fn record_in(
        &self,
        scope: Option<&str>,
        path: &Path,
        stat: &FileStat,
        bytes: &[u8],
    ) -> Result<(), String> {
        let Some(shared) = &self.shared else {
            self.record(path, stat, bytes);
            return Ok(());
        };
        let record = serde_json::to_string(&Snapshot::of(stat, bytes))
            .map_err(|e| format!("cannot record the read: {e}"))?;
        shared
            .reads
            .save(scope.unwrap_or_default(), path, &record)
            .await
            .map_err(|e| format!("cannot record the read in the shared store: {e}"))
    }

    /// What `scope`'s session saw of `path` (the shared store's record, or this state's).
    async fn seen_in(&self, scope: Option<&str>, path: &Path) -> Result<Option<Snapshot>, String> {
        let Some(shared) = &self.shared else {
            return Ok(self.lock().get(path).cloned());
        };
        let record = shared
            .reads
            .load(scope.unwrap_or_default(), path)
            .await
            .map_err(|e| format!("cannot look up the read in the shared store: {e}"))?;
        // A record this version cannot read is no read: the file must be Read again.
        Ok(record.and_then(|r| serde_json::from_str(&r).ok()))
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
            shared: None,
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

    /// Checks that `bytes`, the file's content now, is the content that was read. Size and
    /// modification time do not decide: a change that kept both is still a change.
    pub fn check_fresh(&self, path: &Path, bytes: &[u8]) -> Result<(), StaleRead> {
        check_fresh(self.lock().get(path), bytes)
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

/// The check that needs no content: the file was read (`seen`), and had the size it has now
/// (`size`). Lets a writer refuse without reading the file.
fn check_size(seen: Option<&Snapshot>, size: u64) -> Result<(), StaleRead> {
    match seen {
        None => Err(StaleRead::NotRead),
        Some(seen) if seen.size != size => Err(StaleRead::Modified),
        Some(_) => Ok(()),
    }
}

/// Whether `bytes` is the content that was read (`seen`).
fn check_fresh(seen: Option<&Snapshot>, bytes: &[u8]) -> Result<(), StaleRead> {
    let Some(seen) = seen else {
        return Err(StaleRead::NotRead);
    };
    if seen.size == bytes.len() as u64 && seen.blake3 == content_hash(bytes) {
        Ok(())
    } else {
        Err(StaleRead::Modified)
    }
}

/// Creates the lock folder (0700) if missing, and checks that it is a folder of this user's
/// that nobody else may write to.
fn open_lock_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let refuse = |why: &str| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("the lock folder {} {why}", dir.display()),
        ))
    };
    if !meta.is_dir() {
        return refuse("is not a folder (a symbolic link is refused)");
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return refuse("belongs to another user");
    }
    if meta.mode() & 0o022 != 0 {
        return refuse("may be written by other users (chmod go-w)");
    }
    Ok(())
}

/// Takes the exclusive `flock` of `path`'s lock file in `locks` (waiting as long as another
/// process holds it); it is released when the returned descriptor is closed.
async fn lock_across_processes(locks: &Path, path: &Path) -> Result<OwnedFd, String> {
    use std::os::unix::ffi::OsStrExt;
    let name = format!(
        "{}.lock",
        blake3::hash(path.as_os_str().as_bytes()).to_hex()
    );
    let file = locks.join(name);
    let locked = tokio::task::spawn_blocking(move || -> std::io::Result<OwnedFd> {
        use rustix::fs::{FlockOperation, Mode, OFlags};
        let fd = rustix::fs::open(
            &file,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
        Ok(fd)
    })
    .await;
    match locked {
        Ok(Ok(fd)) => Ok(fd),
        Ok(Err(err)) => Err(format!("cannot lock the file for the change: {err}")),
        Err(err) => Err(format!("cannot lock the file for the change: {err}")),
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
        // After the process's own lock, so a process's writers queue here, not in the kernel.
        let _across = match &env.read_state.shared {
            Some(shared) => Some(lock_across_processes(&shared.locks, &path).await?),
            None => None,
        };
        let current = current_content(&env, &path, &shown).await?;
        let (bytes, report) = change(current)?;
        let stat = env
            .files
            .write_atomic(&path, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        record_written(&env, &path, &stat, &bytes).await;
        Ok(report)
    });
    match step.await {
        Ok(result) => result,
        Err(e) => Err(format!("the change failed: {e}")),
    }
}

/// The locks of several files, held together for one change that spans them (apply_patch):
/// the process's lock of each path, and with shared reads its lock file, each set taken in
/// path order so that two such changes cannot wait for each other.
pub(crate) struct FileLocks {
    _local: Vec<OwnedMutexGuard<()>>,
    _across: Vec<OwnedFd>,
}

/// Runs `change` while holding the locks of every path in `paths`, in a task of its own (as
/// [`read_modify_write`] does, so a caller that stops waiting cannot release the locks while
/// a write is under way). Waiting for the process's locks is the only part a cancelled
/// caller stops.
pub(crate) async fn with_file_locks<T, F, Fut>(
    env: &BuiltinEnv,
    mut paths: Vec<PathBuf>,
    change: F,
) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(BuiltinEnv) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    paths.sort();
    paths.dedup();
    let mut local = Vec::with_capacity(paths.len());
    for path in &paths {
        local.push(lock_file(path).await);
    }
    let env = env.clone();
    let step = tokio::spawn(async move {
        let mut across = Vec::new();
        if let Some(shared) = &env.read_state.shared {
            for path in &paths {
                across.push(lock_across_processes(&shared.locks, path).await?);
            }
        }
        let _locks = FileLocks {
            _local: local,
            _across: across,
        };
        change(env.clone()).await
    });
    match step.await {
        Ok(result) => result,
        Err(e) => Err(format!("the change failed: {e}")),
    }
}

/// Records the content a tool wrote to `path` as read by the call's session, so the
/// session's next change to it needs no new Read (a failure to record is logged: the change
/// landed, and the session must Read the file again).
pub(crate) async fn record_written(env: &BuiltinEnv, path: &Path, stat: &FileStat, bytes: &[u8]) {
    if let Err(err) = env.record_read(path, stat, bytes).await {
        tracing::warn!(path = %path.display(), "{err}");
    }
}

/// The file's content for a change, after every check that can refuse it without reading:
/// a directory or a file over the size limit is refused, and an existing file must have
/// been fully Read by the session and be unchanged since. `None` when there is no file.
pub(crate) async fn current_content(
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
    let seen = env
        .read_state
        .seen_in(env.read_scope.as_deref(), path)
        .await?;
    if stat.kind == FileKind::File {
        fresh(check_size(seen.as_ref(), stat.size))?;
    }
    let contents = ops
        .read(path, Some(env.max_file_size))
        .await
        .map_err(|e| e.to_string())?;
    fresh(check_fresh(seen.as_ref(), &contents.bytes))?;
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
            owner: None,
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
