//! [`SqliteStore`]: the knowledge base's documents and chunks in an SQLite file, so the next
//! process re-chunks only the files that changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, params};

use crate::KnowledgeError;
use crate::chunk::Chunk;
use crate::store::ChunkStore;

/// Written to `PRAGMA application_id` so another program's database is refused, not written
/// into ("TBKB": Toolbelt knowledge base).
const APPLICATION_ID: i32 = 0x5442_4B42;
/// The schema this build writes; a file of another version is refused with a clear error.
const SCHEMA_VERSION: i32 = 1;
/// How long a write waits for another process's write.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`ChunkStore`] in an SQLite file (WAL mode; a write waits up to 5 s for another writer).
///
/// Chunks are rows of `(id, source, position, JSON)`; all statements take their values as
/// bound parameters. A file that is not an SQLite database, or a database of another program
/// or schema version, is refused when opened.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

impl SqliteStore {
    /// Opens (or creates) the knowledge base file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, KnowledgeError> {
        let path = path.as_ref().to_path_buf();
        let fail = |e: rusqlite::Error| KnowledgeError::Store(format!("{}: {e}", path.display()));
        let conn = Connection::open(&path).map_err(fail)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
        init(&conn).map_err(|e| match e {
            Init::Sql(e) => fail(e),
            Init::Foreign(what) => KnowledgeError::Store(format!("{}: {what}", path.display())),
        })?;
        Ok(SqliteStore {
            path,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, KnowledgeError> + Send + 'static,
    ) -> Result<T, KnowledgeError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            // rusqlite rolls an open transaction back on drop, so a panic while the lock was
            // held leaves the connection usable.
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| KnowledgeError::Store(format!("store task failed: {e}")))?
    }

    fn sql_error(&self) -> impl Fn(rusqlite::Error) -> KnowledgeError + Send + 'static {
        let path = self.path.clone();
        move |e| KnowledgeError::Store(format!("{}: {e}", path.display()))
    }
}

enum Init {
    Sql(rusqlite::Error),
    Foreign(String),
}

impl From<rusqlite::Error> for Init {
    fn from(e: rusqlite::Error) -> Self {
        Init::Sql(e)
    }
}

fn init(conn: &Connection) -> Result<(), Init> {
    // The first read of the header: a file that is not a database fails here.
    let app: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    if app == 0 && tables == 0 {
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL;
             PRAGMA application_id = {APPLICATION_ID};
             PRAGMA user_version = {SCHEMA_VERSION};
             CREATE TABLE documents (source TEXT PRIMARY KEY, hash TEXT NOT NULL);
             CREATE TABLE chunks (
                 id TEXT PRIMARY KEY,
                 source TEXT NOT NULL REFERENCES documents(source) ON DELETE CASCADE,
                 position INTEGER NOT NULL,
                 chunk TEXT NOT NULL
             );
             CREATE INDEX chunks_by_source ON chunks (source, position);"
        ))?;
        return Ok(());
    }
    if app != APPLICATION_ID {
        return Err(Init::Foreign(
            "not a Toolbelt knowledge base (another program's database); refusing to write into it"
                .into(),
        ));
    }
    let version: i32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version != SCHEMA_VERSION {
        return Err(Init::Foreign(format!(
            "knowledge base schema {version}, this build reads {SCHEMA_VERSION}; index again into a new file"
        )));
    }
    Ok(())
}

#[async_trait::async_trait]
impl ChunkStore for SqliteStore {
    async fn documents(&self) -> Result<BTreeMap<String, String>, KnowledgeError> {
        let fail = self.sql_error();
        self.with_conn(move |conn| {
            let mut stmt = conn
                .prepare("SELECT source, hash FROM documents")
                .map_err(&fail)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .map_err(&fail)?;
            rows.collect::<Result<BTreeMap<_, _>, _>>().map_err(&fail)
        })
        .await
    }

    async fn replace(
        &self,
        source: &str,
        hash: &str,
        chunks: &[Chunk],
    ) -> Result<(), KnowledgeError> {
        let fail = self.sql_error();
        let source = source.to_owned();
        let hash = hash.to_owned();
        let rows: Vec<(String, String)> = chunks
            .iter()
            .map(|c| {
                serde_json::to_string(c)
                    .map(|json| (c.id.clone(), json))
                    .map_err(|e| KnowledgeError::Store(format!("chunk {}: {e}", c.id)))
            })
            .collect::<Result<_, _>>()?;
        self.with_conn(move |conn| {
            let tx = conn.transaction().map_err(&fail)?;
            tx.execute("DELETE FROM chunks WHERE source = ?1", params![source])
                .map_err(&fail)?;
            tx.execute(
                "INSERT INTO documents (source, hash) VALUES (?1, ?2)
                 ON CONFLICT (source) DO UPDATE SET hash = excluded.hash",
                params![source, hash],
            )
            .map_err(&fail)?;
            {
                let mut insert = tx
                    .prepare(
                        "INSERT INTO chunks (id, source, position, chunk) VALUES (?1, ?2, ?3, ?4)",
                    )
                    .map_err(&fail)?;
                for (position, (id, json)) in rows.iter().enumerate() {
                    insert
                        .execute(params![id, source, position as i64, json])
                        .map_err(&fail)?;
                }
            }
            tx.commit().map_err(&fail)
        })
        .await
    }

    async fn remove(&self, source: &str) -> Result<(), KnowledgeError> {
        let fail = self.sql_error();
        let source = source.to_owned();
        self.with_conn(move |conn| {
            let tx = conn.transaction().map_err(&fail)?;
            tx.execute("DELETE FROM chunks WHERE source = ?1", params![source])
                .map_err(&fail)?;
            tx.execute("DELETE FROM documents WHERE source = ?1", params![source])
                .map_err(&fail)?;
            tx.commit().map_err(&fail)
        })
        .await
    }

    async fn chunks(&self) -> Result<Vec<Chunk>, KnowledgeError> {
        let fail = self.sql_error();
        self.with_conn(move |conn| {
            let mut stmt = conn
                .prepare("SELECT id, chunk FROM chunks ORDER BY source, position")
                .map_err(&fail)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .map_err(&fail)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, json) = row.map_err(&fail)?;
                let chunk: Chunk = serde_json::from_str(&json).map_err(|e| {
                    KnowledgeError::Store(format!("chunk {id} is not readable: {e}"))
                })?;
                out.push(chunk);
            }
            Ok(out)
        })
        .await
    }
}
