//! Read-before-write tracking: Write, Edit and NotebookEdit may change an existing file only
//! after it was fully Read through the same tool set, and only if it has not changed since.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::FileStat;

/// What was seen of a file when it was last fully read (or written by a tool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch, when known.
    pub modified_ns: Option<u128>,
    /// A hash of the content, so a touched-but-unchanged file is still accepted.
    pub content_hash: u64,
}

impl Snapshot {
    /// The snapshot of `bytes` read with metadata `stat`.
    pub fn of(stat: &FileStat, bytes: &[u8]) -> Self {
        Self {
            size: stat.size,
            modified_ns: stat.modified.and_then(nanos_since_epoch),
            content_hash: content_hash(bytes),
        }
    }
}

fn nanos_since_epoch(time: SystemTime) -> Option<u128> {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d: Duration| d.as_nanos())
}

/// A stable (per build) hash of file content.
fn content_hash(bytes: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// Why a write to an existing file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaleRead {
    /// The file was never fully Read in this session.
    #[error("file has not been read yet; Read it first (the whole file) before writing to it")]
    NotRead,
    /// The file changed on disk after it was read.
    #[error("file has been modified since it was read; Read it again")]
    Modified,
}

/// The files this tool set's session has fully read, keyed by resolved path.
///
/// One `ReadState` belongs to one [`crate::BuiltinToolSet`]: the rule is per tool set
/// instance. It can be saved to and loaded from JSON to carry a session across processes.
#[derive(Debug, Default)]
pub struct ReadState {
    files: Mutex<HashMap<PathBuf, Snapshot>>,
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
    }

    /// Whether `path` has a recorded full read.
    pub fn has_read(&self, path: &Path) -> bool {
        self.lock().contains_key(path)
    }

    /// Checks that the file at `path`, now with metadata `stat` and content `bytes`, is
    /// the one that was read: same size and modification time, or else the same content.
    pub fn check_fresh(&self, path: &Path, stat: &FileStat, bytes: &[u8]) -> Result<(), StaleRead> {
        let files = self.lock();
        let Some(seen) = files.get(path) else {
            return Err(StaleRead::NotRead);
        };
        let same_stat = seen.size == stat.size
            && seen.modified_ns.is_some()
            && seen.modified_ns == stat.modified.and_then(nanos_since_epoch);
        if same_stat || (seen.size == stat.size && seen.content_hash == content_hash(bytes)) {
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

    /// A session loaded from [`ReadState::to_json`]'s output.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Saved {
            files: HashMap<PathBuf, Snapshot>,
        }
        let saved: Saved = serde_json::from_value(value.clone())
            .map_err(|e| format!("not a saved read session: {e}"))?;
        Ok(Self {
            files: Mutex::new(saved.files),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Snapshot>> {
        // A panic elsewhere while holding the lock leaves a map that is still consistent.
        self.files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
