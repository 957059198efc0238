//! The reads of each MCP session of one `serve --http` process, kept apart: a Read in one
//! session lets that session change the file, never another session.
//!
//! The built-in tools keep one [`ReadState`] per tool set, and `serve` has one tool set for
//! every client; a state made with [`ReadState::shared`] keeps the reads per session instead,
//! named by each call's [`ReadScope`](toolbelt::builtin::fs::ReadScope) (serve puts the
//! `Mcp-Session-Id` there). `--shared-state` keeps them in Redis; without it they are kept
//! here, in memory, and a session's reads go when the session is closed. The per-file locks
//! such a state takes besides the process's own are in a private temp folder of this process
//! (nothing else shares it), removed on exit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use toolbelt::builtin::fs::{ReadState, SharedReads};

use crate::common::CliError;

/// The reads of this process's sessions, and the read state of the built-in tools over them.
pub(crate) struct SessionReads {
    records: Arc<Records>,
    state: Arc<ReadState>,
    /// The lock folder, removed when this is dropped (after serving).
    _locks: tempfile::TempDir,
}

impl SessionReads {
    pub(crate) fn new() -> Result<Self, CliError> {
        let failed = |e: std::io::Error| {
            CliError::failed(format!("cannot make a folder for the file locks: {e}"))
        };
        let locks = tempfile::Builder::new()
            .prefix("toolbelt-serve-locks-")
            .tempdir()
            .map_err(failed)?;
        let records = Arc::new(Records::default());
        let state = ReadState::shared(records.clone(), locks.path()).map_err(failed)?;
        Ok(Self {
            records,
            state: Arc::new(state),
            _locks: locks,
        })
    }

    /// The read state for the built-in tool set.
    pub(crate) fn state(&self) -> Arc<ReadState> {
        self.state.clone()
    }

    /// Forgets the reads of a session when it is closed.
    pub(crate) fn forget_on_close(&self) -> impl Fn(&str) + Send + Sync + 'static {
        let records = self.records.clone();
        move |session| {
            records.lock().remove(session);
        }
    }
}

/// The records of the files each session fully read (or wrote), by session and path.
#[derive(Default)]
struct Records(Mutex<HashMap<String, HashMap<PathBuf, String>>>);

impl Records {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashMap<PathBuf, String>>> {
        // A panic elsewhere while holding the lock leaves a map that is still consistent.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait::async_trait]
impl SharedReads for Records {
    async fn load(&self, session: &str, path: &Path) -> Result<Option<String>, String> {
        Ok(self
            .lock()
            .get(session)
            .and_then(|files| files.get(path))
            .cloned())
    }

    async fn save(&self, session: &str, path: &Path, record: &str) -> Result<(), String> {
        self.lock()
            .entry(session.to_string())
            .or_default()
            .insert(path.to_path_buf(), record.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_session_sees_its_own_reads_until_it_is_closed() {
        let reads = SessionReads::new().unwrap();
        let file = Path::new("/served/notes.txt");
        reads.records.save("a", file, "seen").await.unwrap();
        assert_eq!(
            reads.records.load("a", file).await.unwrap().as_deref(),
            Some("seen")
        );
        assert_eq!(reads.records.load("b", file).await.unwrap(), None);
        reads.forget_on_close()("a");
        assert_eq!(reads.records.load("a", file).await.unwrap(), None);
    }
}
