//! Sessions in an embedded SQLite database.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};

use super::legacy::read_legacy;
use super::memory::apply_changes;
use super::{Session, SessionKey, SessionService, conflict};
use crate::{AgentError, Event};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    app TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT '{}',
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (app, user_id, session_id)
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    app TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL,
    author TEXT NOT NULL,
    object TEXT NOT NULL,
    body TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_session ON events (app, user_id, session_id, seq);
";

/// Sessions in a SQLite file: events and state written in one transaction per change, with
/// the journal synced before each commit returns, so an event the caller has seen survives a
/// crash of the process (or of the machine).
///
/// Calls run on tokio's blocking pool; one connection serves them in turn.
#[derive(Debug, Clone)]
pub struct SqliteSessionService {
    conn: Arc<Mutex<Connection>>,
}

fn db_error(error: impl std::fmt::Display) -> AgentError {
    AgentError::Session(error.to_string())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Creates `path` empty with mode 0600 when it does not exist yet (an existing file, and its
/// mode, are left as they are).
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

impl SqliteSessionService {
    /// Opens (creating if needed) the database at `path`. A new file is made readable by its
    /// owner only (0600), whatever the umask: it holds whole tool outputs. SQLite gives its
    /// journal and WAL files the database file's mode.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, AgentError> {
        create_private(path.as_ref()).map_err(|e| {
            AgentError::Session(format!("cannot create {}: {e}", path.as_ref().display()))
        })?;
        let conn = Connection::open(path.as_ref()).map_err(|e| {
            AgentError::Session(format!("cannot open {}: {e}", path.as_ref().display()))
        })?;
        Self::with_connection(conn)
    }

    /// A database in memory (for tests).
    pub fn open_in_memory() -> Result<Self, AgentError> {
        Self::with_connection(Connection::open_in_memory().map_err(db_error)?)
    }

    fn with_connection(conn: Connection) -> Result<Self, AgentError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db_error)?;
        // WAL lets readers in other processes work during a run; FULL syncs every commit.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db_error)?;
        conn.execute_batch(SCHEMA).map_err(db_error)?;
        add_version_column(&conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, AgentError> + Send + 'static,
    ) -> Result<T, AgentError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock rolled its transaction back; the connection is
            // still usable.
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            work(&mut conn)
        })
        .await
        .map_err(|e| AgentError::Session(format!("session task failed: {e}")))?
    }
}

/// Files written before state versions get the column (every existing state at version 0).
fn add_version_column(conn: &Connection) -> Result<(), AgentError> {
    let has_version: bool = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('sessions') WHERE name = 'version'",
            [],
            |row| row.get::<_, i64>(0),
        )
        .map_err(db_error)?
        > 0;
    if !has_version {
        conn.execute_batch("ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0")
            .map_err(db_error)?;
    }
    Ok(())
}

fn ensure_session(tx: &rusqlite::Transaction<'_>, key: &SessionKey) -> Result<(), AgentError> {
    let now = now_ms();
    tx.execute(
        "INSERT INTO sessions (app, user_id, session_id, created_ms, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?4)
         ON CONFLICT (app, user_id, session_id) DO UPDATE SET updated_ms = excluded.updated_ms",
        params![key.app, key.user_id, key.session_id, now],
    )
    .map_err(db_error)?;
    Ok(())
}

/// The session's state and its version (empty at version 0 for a session not stored).
fn read_state(
    tx: &rusqlite::Transaction<'_>,
    key: &SessionKey,
) -> Result<(Map<String, Value>, u64), AgentError> {
    let row: Option<(String, i64)> = tx
        .query_row(
            "SELECT state, version FROM sessions
             WHERE app = ?1 AND user_id = ?2 AND session_id = ?3",
            params![key.app, key.user_id, key.session_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(db_error)?;
    match row {
        None => Ok((Map::new(), 0)),
        Some((text, version)) => Ok((
            serde_json::from_str(&text)
                .map_err(|e| AgentError::Session(format!("corrupt session state: {e}")))?,
            version.max(0) as u64,
        )),
    }
}

fn write_state(
    tx: &rusqlite::Transaction<'_>,
    key: &SessionKey,
    state: &Map<String, Value>,
) -> Result<(), AgentError> {
    let text = serde_json::to_string(state).map_err(db_error)?;
    tx.execute(
        "UPDATE sessions SET state = ?4, updated_ms = ?5, version = version + 1
         WHERE app = ?1 AND user_id = ?2 AND session_id = ?3",
        params![key.app, key.user_id, key.session_id, text, now_ms()],
    )
    .map_err(db_error)?;
    Ok(())
}

fn read_events(conn: &Connection, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
    read_selected(
        conn,
        key,
        "SELECT body FROM events WHERE app = ?1 AND user_id = ?2 AND session_id = ?3
         ORDER BY seq",
    )
}

/// The events `sql` selects for `key` (its parameters: app, user, session), decoded.
fn read_selected(conn: &Connection, key: &SessionKey, sql: &str) -> Result<Vec<Event>, AgentError> {
    let mut statement = conn.prepare_cached(sql).map_err(db_error)?;
    let rows = statement
        .query_map(params![key.app, key.user_id, key.session_id], |row| {
            row.get::<_, String>(0)
        })
        .map_err(db_error)?;
    let mut events = Vec::new();
    for row in rows {
        events.extend(decode(&row.map_err(db_error)?));
    }
    Ok(events)
}

/// One stored event and where it is: for watchers that follow a file other processes write
/// to (the web UI), which ask for the events after the last sequence number they saw.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// The row's sequence number: increasing in commit order across all sessions of the file.
    pub seq: i64,
    /// The session it belongs to.
    pub key: SessionKey,
    /// The event.
    pub event: Event,
}

/// What a listing of every stored session says about one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// Which session.
    pub key: SessionKey,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it last changed, in milliseconds since the Unix epoch.
    pub updated_ms: i64,
    /// How many events it holds.
    pub events: u64,
}

impl SqliteSessionService {
    /// Up to `limit` events of any session with a sequence number above `after`, oldest
    /// first. Cheap to poll: a range scan of the primary key.
    pub async fn events_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, AgentError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT seq, app, user_id, session_id, body FROM events WHERE seq > ?1
                     ORDER BY seq LIMIT ?2",
                )
                .map_err(db_error)?;
            let rows = statement
                .query_map(params![after, limit], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        SessionKey::new(
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                        ),
                        row.get::<_, String>(4)?,
                    ))
                })
                .map_err(db_error)?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, key, body) = row.map_err(db_error)?;
                for event in decode(&body) {
                    events.push(StoredEvent {
                        seq,
                        key: key.clone(),
                        event,
                    });
                }
            }
            Ok(events)
        })
        .await
    }

    /// The highest sequence number stored so far (0 in an empty file): where a watcher that
    /// wants only new events starts.
    pub async fn last_seq(&self) -> Result<i64, AgentError> {
        self.with(move |conn| {
            conn.query_row("SELECT coalesce(max(seq), 0) FROM events", [], |row| {
                row.get(0)
            })
            .map_err(db_error)
        })
        .await
    }

    /// Every session in the file (all applications and users), the most recently changed
    /// first.
    pub async fn sessions(&self) -> Result<Vec<SessionSummary>, AgentError> {
        self.with(move |conn| {
            let mut statement = conn
                .prepare(
                    "SELECT s.app, s.user_id, s.session_id, s.created_ms, s.updated_ms,
                            (SELECT count(*) FROM events e WHERE e.app = s.app
                               AND e.user_id = s.user_id AND e.session_id = s.session_id)
                     FROM sessions s ORDER BY s.updated_ms DESC, s.session_id",
                )
                .map_err(db_error)?;
            let rows = statement
                .query_map([], |row| {
                    Ok(SessionSummary {
                        key: SessionKey::new(
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                        ),
                        created_ms: row.get(3)?,
                        updated_ms: row.get(4)?,
                        events: row.get::<_, i64>(5)?.max(0) as u64,
                    })
                })
                .map_err(db_error)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db_error)
        })
        .await
    }
}

impl SqliteSessionService {
    /// A session's stored user inputs, oldest first: what its [`title`](super::title) is
    /// derived from, read without the rest of the conversation (tool outputs can be large).
    pub async fn user_inputs(&self, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
        let key = key.clone();
        self.with(move |conn| {
            read_selected(
                conn,
                &key,
                "SELECT body FROM events WHERE app = ?1 AND user_id = ?2 AND session_id = ?3
                 AND object = 'user_input' ORDER BY seq",
            )
        })
        .await
    }
}

/// A stored row's events: the current form, else the legacy one; a row no version can read
/// is skipped with a warning (the rest of the conversation is still worth having).
fn decode(body: &str) -> Vec<Event> {
    match serde_json::from_str::<Event>(body) {
        Ok(event) => vec![event],
        Err(error) => read_legacy(body).unwrap_or_else(|| {
            tracing::warn!(%error, "skipping an unreadable stored event");
            Vec::new()
        }),
    }
}

#[async_trait]
impl SessionService for SqliteSessionService {
    async fn get_or_create(&self, key: &SessionKey) -> Result<Session, AgentError> {
        let key = key.clone();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(db_error)?;
            ensure_session(&tx, &key)?;
            let (state, version) = read_state(&tx, &key)?;
            let events = read_events(&tx, &key)?;
            tx.commit().map_err(db_error)?;
            Ok(Session {
                key,
                events,
                state,
                version,
            })
        })
        .await
    }

    async fn events(&self, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
        let key = key.clone();
        self.with(move |conn| read_events(conn, &key)).await
    }

    async fn append_event(&self, key: &SessionKey, event: &Event) -> Result<(), AgentError> {
        self.append_events(key, std::slice::from_ref(event)).await
    }

    async fn append_events(&self, key: &SessionKey, events: &[Event]) -> Result<(), AgentError> {
        let key = key.clone();
        let rows = events
            .iter()
            .map(|event| {
                Ok((
                    serde_json::to_string(event).map_err(db_error)?,
                    event.clone(),
                ))
            })
            .collect::<Result<Vec<_>, AgentError>>()?;
        self.with(move |conn| {
            let tx = conn.transaction().map_err(db_error)?;
            ensure_session(&tx, &key)?;
            for (body, event) in rows {
                tx.execute(
                    "INSERT INTO events (app, user_id, session_id, event_id, invocation_id,
                                         author, object, body, timestamp_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![
                        key.app,
                        key.user_id,
                        key.session_id,
                        event.id,
                        event.invocation_id,
                        event.author,
                        event.kind.type_name(),
                        body,
                        event.timestamp_ms as i64
                    ],
                )
                .map_err(db_error)?;
            }
            tx.commit().map_err(db_error)
        })
        .await
    }

    async fn update_state(
        &self,
        key: &SessionKey,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError> {
        let key = key.clone();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(db_error)?;
            ensure_session(&tx, &key)?;
            let (mut state, _) = read_state(&tx, &key)?;
            apply_changes(&mut state, changes);
            write_state(&tx, &key, &state)?;
            tx.commit().map_err(db_error)
        })
        .await
    }

    async fn update_state_if(
        &self,
        key: &SessionKey,
        expected_version: u64,
        changes: Map<String, Value>,
    ) -> Result<u64, AgentError> {
        let key = key.clone();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(db_error)?;
            ensure_session(&tx, &key)?;
            let (mut state, version) = read_state(&tx, &key)?;
            if version != expected_version {
                return Err(conflict(&key, expected_version, version));
            }
            apply_changes(&mut state, changes);
            write_state(&tx, &key, &state)?;
            tx.commit().map_err(db_error)?;
            Ok(version + 1)
        })
        .await
    }

    async fn take_state(&self, key: &SessionKey, name: &str) -> Result<Option<Value>, AgentError> {
        let key = key.clone();
        let name = name.to_string();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(db_error)?;
            let (mut state, _) = read_state(&tx, &key)?;
            let taken = state.remove(&name);
            if taken.is_some() {
                write_state(&tx, &key, &state)?;
            }
            tx.commit().map_err(db_error)?;
            Ok(taken)
        })
        .await
    }

    async fn list_sessions(&self, app: &str, user_id: &str) -> Result<Vec<String>, AgentError> {
        let (app, user_id) = (app.to_string(), user_id.to_string());
        self.with(move |conn| {
            let mut statement = conn
                .prepare(
                    "SELECT session_id FROM sessions WHERE app = ?1 AND user_id = ?2
                     ORDER BY session_id",
                )
                .map_err(db_error)?;
            let rows = statement
                .query_map(params![app, user_id], |row| row.get::<_, String>(0))
                .map_err(db_error)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db_error)
        })
        .await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, AgentError> {
        let key = key.clone();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(db_error)?;
            tx.execute(
                "DELETE FROM events WHERE app = ?1 AND user_id = ?2 AND session_id = ?3",
                params![key.app, key.user_id, key.session_id],
            )
            .map_err(db_error)?;
            let removed = tx
                .execute(
                    "DELETE FROM sessions WHERE app = ?1 AND user_id = ?2 AND session_id = ?3",
                    params![key.app, key.user_id, key.session_id],
                )
                .map_err(db_error)?;
            tx.commit().map_err(db_error)?;
            Ok(removed > 0)
        })
        .await
    }
}
