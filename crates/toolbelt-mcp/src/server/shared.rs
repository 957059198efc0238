//! Sessions every replica accepts: the record of an HTTP session kept in a store the replicas
//! share (Redis in `toolbelt serve --shared-state`), so a load balancer may send any request
//! to any replica.
//!
//! A session's running MCP service stays in the process that runs it; what the store keeps
//! is what is needed to run it again elsewhere: the client's `initialize` parameters
//! (protocol version, client info, capabilities). A replica asked about a session it does not
//! run loads the record and replays the handshake to a service of its own (rmcp's restore,
//! `StreamableHttpServerConfig::session_store`); the client sees nothing of it.
//!
//! The idle timeout is the record's time to live, renewed by every request on any replica:
//! a session idle everywhere for the timeout is gone everywhere (404, the client starts a new
//! one). A `DELETE` on one replica deletes the record, and the other replicas close their
//! copies at the next request naming it (404 too), since every request asks the store
//! whether the session still exists.
//!
//! Besides the record, the store keeps the deferred tools a session has loaded (so every
//! replica lists them) and carries messages between the replicas (`bus.rs`): a notification
//! for a session's client reaches it on its `GET` stream, whichever replica holds that.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

/// An error of a [`SharedSessionStore`] (the store's own, passed on).
pub type SharedStoreError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where the records of HTTP sessions are kept so that every replica of a server accepts
/// them (see [`HttpServeOptions::shared_sessions`](super::HttpServeOptions::shared_sessions)).
///
/// A record is opaque text; it must expire `ttl` after it was last saved or touched.
#[async_trait]
pub trait SharedSessionStore: Send + Sync + 'static {
    /// The record of session `id`, or `None` when it is unknown or expired.
    async fn load(&self, id: &str) -> Result<Option<String>, SharedStoreError>;
    /// Saves the record of session `id`, to expire after `ttl` without a touch.
    async fn save(&self, id: &str, record: &str, ttl: Duration) -> Result<(), SharedStoreError>;
    /// Renews the life of `id` to `ttl` from now; `false` when there is no record (deleted,
    /// or expired).
    async fn touch(&self, id: &str, ttl: Duration) -> Result<bool, SharedStoreError>;
    /// Deletes the record of `id` and everything kept with it (no error when there is none).
    async fn delete(&self, id: &str) -> Result<(), SharedStoreError>;

    /// Adds `tools` to the deferred tools session `id` has loaded through any replica; they
    /// expire and are deleted with the session's record.
    async fn add_loaded_tools(&self, id: &str, tools: &[String]) -> Result<(), SharedStoreError>;
    /// The deferred tools session `id` has loaded through any replica.
    async fn loaded_tools(&self, id: &str) -> Result<Vec<String>, SharedStoreError>;

    /// Sends `message` about session `id` to every replica listening with
    /// [`subscribe`](Self::subscribe), this one included. Delivery is at most once: a
    /// replica not listening at that moment misses it.
    async fn publish(&self, id: &str, message: &str) -> Result<(), SharedStoreError>;
    /// The messages every replica publishes from now on, as `(session id, message)`, in the
    /// order each was published. The stream ends when the connection to the store is lost;
    /// the server then subscribes again.
    async fn subscribe(&self) -> Result<BoxStream<'static, (String, String)>, SharedStoreError>;
}

impl std::fmt::Debug for dyn SharedSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<SharedSessionStore>")
    }
}

/// A [`SharedSessionStore`] as rmcp's session store, with the idle timeout as time to live.
pub(crate) struct RecordStore {
    pub(crate) store: Arc<dyn SharedSessionStore>,
    pub(crate) ttl: Duration,
}

#[async_trait]
impl SessionStore for RecordStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(record) = self.store.load(session_id).await? else {
            return Ok(None);
        };
        match serde_json::from_str(&record) {
            Ok(state) => Ok(Some(state)),
            Err(err) => {
                // Written by another version, or damaged: unknown (404, a new session), not
                // an error that would fail every request naming it.
                tracing::warn!(session = session_id, "an unreadable session record: {err}");
                Ok(None)
            }
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let record = serde_json::to_string(state)?;
        self.store.save(session_id, &record, self.ttl).await
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.store.delete(session_id).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use futures::StreamExt;
    use tokio::sync::broadcast;

    use super::*;

    /// What a shared store keeps, in memory: records, loaded tools and a message channel,
    /// as Redis would for the replicas of one server.
    pub(crate) struct Records {
        records: Mutex<HashMap<String, String>>,
        tools: Mutex<HashMap<String, Vec<String>>>,
        messages: broadcast::Sender<(String, String)>,
    }

    impl Default for Records {
        fn default() -> Self {
            Self {
                records: Mutex::default(),
                tools: Mutex::default(),
                messages: broadcast::channel(64).0,
            }
        }
    }

    #[async_trait]
    impl SharedSessionStore for Records {
        async fn load(&self, id: &str) -> Result<Option<String>, SharedStoreError> {
            Ok(self.records.lock().unwrap().get(id).cloned())
        }
        async fn save(&self, id: &str, record: &str, _: Duration) -> Result<(), SharedStoreError> {
            self.records
                .lock()
                .unwrap()
                .insert(id.into(), record.into());
            Ok(())
        }
        async fn touch(&self, id: &str, _: Duration) -> Result<bool, SharedStoreError> {
            Ok(self.records.lock().unwrap().contains_key(id))
        }
        async fn delete(&self, id: &str) -> Result<(), SharedStoreError> {
            self.records.lock().unwrap().remove(id);
            self.tools.lock().unwrap().remove(id);
            Ok(())
        }
        async fn add_loaded_tools(
            &self,
            id: &str,
            tools: &[String],
        ) -> Result<(), SharedStoreError> {
            let mut all = self.tools.lock().unwrap();
            all.entry(id.into())
                .or_default()
                .extend(tools.iter().cloned());
            Ok(())
        }
        async fn loaded_tools(&self, id: &str) -> Result<Vec<String>, SharedStoreError> {
            Ok(self
                .tools
                .lock()
                .unwrap()
                .get(id)
                .cloned()
                .unwrap_or_default())
        }
        async fn publish(&self, id: &str, message: &str) -> Result<(), SharedStoreError> {
            let _ = self.messages.send((id.into(), message.into()));
            Ok(())
        }
        async fn subscribe(
            &self,
        ) -> Result<BoxStream<'static, (String, String)>, SharedStoreError> {
            let receiver = self.messages.subscribe();
            Ok(
                futures::stream::unfold(receiver, |mut receiver| async move {
                    loop {
                        match receiver.recv().await {
                            Ok(message) => return Some((message, receiver)),
                            Err(broadcast::error::RecvError::Lagged(_)) => continue,
                            Err(broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                })
                .boxed(),
            )
        }
    }
}
