//! Sessions in memory.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{Session, SessionKey, SessionService, conflict};
use crate::{AgentError, Event};

/// Sessions kept in memory for the life of the process.
#[derive(Debug, Default)]
pub struct InMemorySessionService {
    sessions: Mutex<HashMap<SessionKey, Session>>,
}

impl InMemorySessionService {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SessionKey, Session>> {
        // Nothing below can leave a session half-changed, so a poisoned lock is still sound.
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl SessionService for InMemorySessionService {
    async fn get_or_create(&self, key: &SessionKey) -> Result<Session, AgentError> {
        let mut sessions = self.lock();
        Ok(sessions
            .entry(key.clone())
            .or_insert_with(|| Session::new(key.clone()))
            .clone())
    }

    async fn events(&self, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
        Ok(self
            .lock()
            .get(key)
            .map(|s| s.events.clone())
            .unwrap_or_default())
    }

    async fn append_event(&self, key: &SessionKey, event: &Event) -> Result<(), AgentError> {
        let mut sessions = self.lock();
        sessions
            .entry(key.clone())
            .or_insert_with(|| Session::new(key.clone()))
            .events
            .push(event.clone());
        Ok(())
    }

    async fn append_events(&self, key: &SessionKey, events: &[Event]) -> Result<(), AgentError> {
        let mut sessions = self.lock();
        sessions
            .entry(key.clone())
            .or_insert_with(|| Session::new(key.clone()))
            .events
            .extend_from_slice(events);
        Ok(())
    }

    async fn update_state(
        &self,
        key: &SessionKey,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError> {
        let mut sessions = self.lock();
        let session = sessions
            .entry(key.clone())
            .or_insert_with(|| Session::new(key.clone()));
        apply_changes(&mut session.state, changes);
        session.version += 1;
        Ok(())
    }

    async fn update_state_if(
        &self,
        key: &SessionKey,
        expected_version: u64,
        changes: Map<String, Value>,
    ) -> Result<u64, AgentError> {
        let mut sessions = self.lock();
        let session = sessions
            .entry(key.clone())
            .or_insert_with(|| Session::new(key.clone()));
        if session.version != expected_version {
            return Err(conflict(key, expected_version, session.version));
        }
        apply_changes(&mut session.state, changes);
        session.version += 1;
        Ok(session.version)
    }

    async fn take_state(&self, key: &SessionKey, name: &str) -> Result<Option<Value>, AgentError> {
        let mut sessions = self.lock();
        let Some(session) = sessions.get_mut(key) else {
            return Ok(None);
        };
        let taken = session.state.remove(name);
        if taken.is_some() {
            session.version += 1;
        }
        Ok(taken)
    }

    async fn list_sessions(&self, app: &str, user_id: &str) -> Result<Vec<String>, AgentError> {
        let mut ids: Vec<String> = self
            .lock()
            .keys()
            .filter(|k| k.app == app && k.user_id == user_id)
            .map(|k| k.session_id.clone())
            .collect();
        ids.sort();
        Ok(ids)
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, AgentError> {
        Ok(self.lock().remove(key).is_some())
    }
}

/// Applies state changes: `null` removes a key, anything else sets it.
pub(crate) fn apply_changes(state: &mut Map<String, Value>, changes: Map<String, Value>) {
    for (name, value) in changes {
        if value.is_null() {
            state.remove(&name);
        } else {
            state.insert(name, value);
        }
    }
}
