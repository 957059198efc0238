//! [`SqliteVectorStore`]: the embedding cache in an SQLite file, so a tool embedded by one
//! process is never embedded again by the next.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoredVector, VectorStore};
use crate::SearchError;

/// Written to `PRAGMA application_id` so a file of another program is recognised and refused
/// instead of being written into ("TBEV": Toolbelt embedding vectors).
const APPLICATION_ID: i32 = 0x5442_4556;
/// How long a write waits for another process's write to finish before failing as locked.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`VectorStore`] in an SQLite file.
///
/// Vectors are little-endian `f32` blobs keyed by `(model_id, content_hash)`, with the tool's
/// name beside them. The file is in WAL mode, so readers in other processes do not block a
/// writer; a write waits up to 5 s for another writer, then fails as locked. A file that is
/// not an SQLite database, or a database of another program, is refused when opened. A row
/// whose blob has the wrong length reads as absent, so the tool is embedded again.
#[derive(Debug, Clone)]
pub struct SqliteVectorStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

impl SqliteVectorStore {
    /// Opens (or creates) the cache file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SearchError> {
        let path = path.as_ref().to_path_buf();
        let fail = |what: String| SearchError::Store(format!("{}: {what}", path.display()));
        let conn = Connection::open(&path).map_err(|e| fail(e.to_string()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| fail(e.to_string()))?;
        init(&conn).map_err(|e| fail(explain(&e)))?;
        Ok(Self {
            path,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with the connection on a blocking thread (SQLite calls block).
    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, SearchError> {
        let conn = self.conn.clone();
        let path = self.path.clone();
        let fail = move |what: String| SearchError::Store(format!("{}: {what}", path.display()));
        tokio::task::spawn_blocking(move || {
            // A panic while the lock was held cannot leave a transaction open (rusqlite rolls
            // back on drop), so the connection is still usable.
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| fail(format!("store task failed: {e}")))?
        .map_err(|e| fail(explain(&e)))
    }
}

/// Creates the table on a new file; checks that an existing file is ours.
fn init(conn: &Connection) -> rusqlite::Result<()> {
    // The first statement reads the header: a file that is not a database fails here.
    let application_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    if application_id != APPLICATION_ID && !(application_id == 0 && tables == 0) {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some("a database of another program, not a Toolbelt embedding cache".to_owned()),
        ));
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID};
         CREATE TABLE IF NOT EXISTS vectors (
             model_id     TEXT NOT NULL,
             content_hash TEXT NOT NULL,
             name         TEXT NOT NULL,
             vector       BLOB NOT NULL,
             PRIMARY KEY (model_id, content_hash)
         ) WITHOUT ROWID;"
    ))
}

/// SQLite's message, with what it means for this cache when that is not obvious.
fn explain(error: &rusqlite::Error) -> String {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => format!(
            "{error} (another process holds the cache locked for more than {} s)",
            BUSY_TIMEOUT.as_secs()
        ),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt) => {
            format!("{error} (not a usable embedding cache: remove the file to rebuild it)")
        }
        _ => error.to_string(),
    }
}

fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(blob: &[u8]) -> Option<Vec<f32>> {
    if blob.is_empty() || !blob.len().is_multiple_of(4) {
        return None;
    }
    Some(
        blob.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

#[async_trait::async_trait]
impl VectorStore for SqliteVectorStore {
    async fn get(
        &self,
        model_id: &str,
        content_hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, SearchError> {
        let model_id = model_id.to_owned();
        let hashes = content_hashes.to_vec();
        self.with_conn(move |conn| {
            let tx = conn.transaction()?;
            let mut found = HashMap::with_capacity(hashes.len());
            {
                let mut select = tx.prepare_cached(
                    "SELECT vector FROM vectors WHERE model_id = ?1 AND content_hash = ?2",
                )?;
                for hash in hashes {
                    let blob: Option<Vec<u8>> = select
                        .query_row(params![model_id, hash], |r| r.get(0))
                        .optional()?;
                    match blob.as_deref().map(from_blob) {
                        Some(Some(vector)) => {
                            found.insert(hash, vector);
                        }
                        Some(None) => {
                            tracing::warn!(
                                model_id,
                                hash,
                                "cached vector has a malformed blob: ignored"
                            );
                        }
                        None => {}
                    }
                }
            }
            tx.commit()?;
            Ok(found)
        })
        .await
    }

    async fn put(&self, model_id: &str, vectors: &[StoredVector]) -> Result<(), SearchError> {
        if vectors.is_empty() {
            return Ok(());
        }
        let model_id = model_id.to_owned();
        let rows: Vec<(String, String, Vec<u8>)> = vectors
            .iter()
            .map(|v| (v.content_hash.clone(), v.name.clone(), to_blob(&v.vector)))
            .collect();
        self.with_conn(move |conn| {
            // One transaction per batch: all of it is cached or none of it.
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR REPLACE INTO vectors (model_id, content_hash, name, vector)
                     VALUES (?1, ?2, ?3, ?4)",
                )?;
                for (hash, name, blob) in rows {
                    insert.execute(params![model_id, hash, name, blob])?;
                }
            }
            tx.commit()
        })
        .await
    }
}
