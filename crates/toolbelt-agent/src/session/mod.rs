//! Sessions: the stored conversation (events) and state of one user's session.
//!
//! [`InMemorySessionService`] keeps sessions in memory; `SqliteSessionService` (feature
//! `sqlite`) in an embedded database file, one transaction per change, so a crash mid-run
//! loses nothing that was already emitted.
//!
//! A store that fails (locked by another process, corrupted, read-only) is never silent: the
//! run ends with an [`ErrorKind::Session`](crate::ErrorKind::Session) error event sent to the
//! caller without being stored, before the model is called when the failure comes at the
//! start of the run. Events stored by versions before the event enum are read in their old
//! shape, and a row no version can read is skipped with a warning in the log.

#[cfg(feature = "sqlite")]
mod legacy;
mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::{AgentError, Event};

pub use memory::InMemorySessionService;
#[cfg(feature = "sqlite")]
pub use sqlite::{SessionSummary, SqliteSessionService, StoredEvent};

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
}

impl Session {
    /// An empty session.
    pub fn new(key: SessionKey) -> Self {
        Self {
            key,
            events: Vec::new(),
            state: Map::new(),
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

    /// Applies state changes in one transaction; a `null` value removes the key.
    async fn update_state(
        &self,
        key: &SessionKey,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError>;

    /// Removes a state key and returns its value, atomically (so a one-shot value is used
    /// exactly once even by concurrent runs).
    async fn take_state(&self, key: &SessionKey, name: &str) -> Result<Option<Value>, AgentError>;

    /// The ids of a user's sessions in an application.
    async fn list_sessions(&self, app: &str, user_id: &str) -> Result<Vec<String>, AgentError>;

    /// Deletes a session; returns whether it existed.
    async fn delete_session(&self, key: &SessionKey) -> Result<bool, AgentError>;
}
