//! Sessions: the stored conversation (events) and state of one user's session.
//!
//! [`InMemorySessionService`] keeps sessions in memory; `SqliteSessionService` (feature
//! `sqlite`) in an embedded database file, one transaction per change, so a crash mid-run
//! loses nothing that was already emitted.
//!
//! Beyond one machine, `PostgresSessionService` (feature `postgres`) and `RedisSessionService`
//! (feature `redis`) keep sessions in a server several processes share; [`open_url`] picks
//! the store a `--session` value names (`postgres://…`, `redis://…`, else a SQLite file).
//! Every store has the same semantics, checked by one conformance suite
//! (`tests/session_stores.rs`): events are read in the order their appends returned, an
//! append (or a batch of them) is stored completely or not at all, and state changes carry a
//! version so a read-modify-write based on a stale read is refused
//! ([`SessionService::update_state_if`]) instead of silently overwriting another runner's
//! change. Only Redis expires idle sessions (a TTL set when opening it); the other stores
//! keep a session until it is deleted.
//!
//! A store that fails (locked by another process, corrupted, read-only) is never silent: the
//! run ends with an [`ErrorKind::Session`](crate::ErrorKind::Session) error event sent to the
//! caller without being stored, before the model is called when the failure comes at the
//! start of the run. Events stored by versions before the event enum are read in their old
//! shape, and a row no version can read is skipped with a warning in the log.
//!
//! A session's [`title`] (its first user prompt, on one line) is derived from its events, so
//! every store has one without storing it.

#[cfg(feature = "sqlite")]
mod legacy;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;
mod title;
mod url;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::{AgentError, Event};

pub use memory::InMemorySessionService;
#[cfg(feature = "postgres")]
pub use postgres::PostgresSessionService;
#[cfg(feature = "redis")]
pub use redis::RedisSessionService;
#[cfg(feature = "sqlite")]
pub use sqlite::{SessionSummary, SqliteSessionService, StoredEvent};
pub use title::{TITLE_CHARS, title};
pub use url::open_url;

/// Which session: an application, a user and the session's id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// The application (the runner's name).
    pub app: String,
    /// The user.
    pub user_id: String,
    /// The session.
    pub session_id: String,
}

impl SessionKey {
    /// A key from its three parts.
    pub fn new(
        app: impl Into<String>,
        user_id: impl Into<String>,
        session_id: impl Into<String>,
    ) -> Self {
        Self {
            app: app.into(),
            user_id: user_id.into(),
            session_id: session_id.into(),
        }
    }
}

/// A session's stored contents.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Which session.
    pub key: SessionKey,
    /// Every stored event, oldest first.
    pub events: Vec<Event>,
    /// Key-value state (the await_user_reply route, an application's own values).
    pub state: Map<String, Value>,
    /// The state's version: 0 for a new session, one more after every change of the state.
    /// Pass it to [`SessionService::update_state_if`] to change the state only if nobody
    /// else did since this read.
    pub version: u64,
}

impl Session {
    /// An empty session.
    pub fn new(key: SessionKey) -> Self {
        Self {
            key,
            events: Vec::new(),
            state: Map::new(),
            version: 0,
        }
    }
}

/// Where sessions are stored. Implementations are shared by concurrent runs.
#[async_trait]
pub trait SessionService: Send + Sync {
    /// The session, created empty if it does not exist.
    async fn get_or_create(&self, key: &SessionKey) -> Result<Session, AgentError>;

    /// The session's events, oldest first (empty for a session that does not exist).
    async fn events(&self, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
        Ok(self.get_or_create(key).await?.events)
    }

    /// Appends one event (atomically: it is either stored completely or not at all).
    async fn append_event(&self, key: &SessionKey, event: &Event) -> Result<(), AgentError>;

    /// Appends events in order, all or none (one transaction). The default appends them
    /// one by one; every store of this crate overrides it with a single transaction.
    async fn append_events(&self, key: &SessionKey, events: &[Event]) -> Result<(), AgentError> {
        for event in events {
            self.append_event(key, event).await?;
        }
        Ok(())
    }

    /// Applies state changes in one transaction; a `null` value removes the key. The
    /// state's version goes up by one.
    async fn update_state(
        &self,
        key: &SessionKey,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError>;

    /// Applies state changes only if the state is still at `expected_version` (the
    /// [`Session::version`] the caller read), and returns the new version. When another
    /// writer changed the state in between, nothing is written and the error names the
    /// session and both versions (see [`is_conflict`]): read the session again and retry.
    async fn update_state_if(
        &self,
        key: &SessionKey,
        expected_version: u64,
        changes: Map<String, Value>,
    ) -> Result<u64, AgentError>;

    /// Removes a state key and returns its value, atomically (so a one-shot value is used
    /// exactly once even by concurrent runs). Removing a key changes the state's version.
    async fn take_state(&self, key: &SessionKey, name: &str) -> Result<Option<Value>, AgentError>;

    /// The ids of a user's sessions in an application.
    async fn list_sessions(&self, app: &str, user_id: &str) -> Result<Vec<String>, AgentError>;

    /// Deletes a session; returns whether it existed.
    async fn delete_session(&self, key: &SessionKey) -> Result<bool, AgentError>;
}

/// State changes split into the values to set and the names to remove (a `null` value
/// removes its key), as the server-side stores apply them.
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn split_changes(changes: Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
    let mut set = Map::new();
    let mut removed = Vec::new();
    for (name, value) in changes {
        if value.is_null() {
            removed.push(name);
        } else {
            set.insert(name, value);
        }
    }
    (set, removed)
}

/// The error of an [`SessionService::update_state_if`] based on a stale version.
pub(crate) fn conflict(key: &SessionKey, expected: u64, found: u64) -> AgentError {
    AgentError::Session(format!(
        "conflict on session {}/{}/{}: its state is at version {found}, this change was \
         based on version {expected} (another runner changed it); nothing was written, read \
         the session again and retry",
        key.app, key.user_id, key.session_id
    ))
}

/// Whether an error is the refusal of a state change based on a stale version.
pub fn is_conflict(error: &AgentError) -> bool {
    matches!(error, AgentError::Session(message) if message.starts_with("conflict on session "))
}

/// A stored event in its current form; one no longer readable is skipped with a warning (the
/// rest of the conversation is still worth having). For the stores without older forms.
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn decode_stored(body: &str) -> Option<Event> {
    serde_json::from_str(body)
        .map_err(|error| tracing::warn!(%error, "skipping an unreadable stored event"))
        .ok()
}
