//! `serve --shared-state redis://…`: what replicas of `serve --http` share, in Redis (one
//! connection manager, which reconnects by itself).
//!
//! Keys, under `--shared-state-prefix` (default `toolbelt`):
//! - `{prefix}:session:{id}`: an MCP session's record (the client's `initialize`
//!   parameters), expiring after the idle timeout, renewed by every request on any replica;
//! - `{prefix}:reads:{id}`: a hash of the files the session fully read (path → size and
//!   BLAKE3 of the content), with the same time to live, renewed with the session;
//! - `{prefix}:tools:{id}`: the set of deferred tools the session loaded with `tool_search`,
//!   with the same time to live;
//! - the pub/sub channel `{prefix}:bus`: messages between the replicas about a session (a
//!   notification for the replica holding the client's `GET` stream), each a JSON pair
//!   `[session id, message]`.
//!
//! Built with the `redis` feature only; without it `--shared-state` is refused with a clear
//! error.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use toolbelt::builtin::fs::SharedReads;
use toolbelt::mcp::server::{SharedSessionStore, SharedStoreError};

/// How long connecting to Redis, and then each command, may take.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Sessions and reads in Redis.
#[derive(Clone)]
pub(crate) struct RedisState {
    /// For the pub/sub connection, which cannot share the manager's.
    client: redis::Client,
    redis: ConnectionManager,
    prefix: String,
    /// The reads' time to live (the session idle timeout).
    ttl: Duration,
}

impl RedisState {
    /// Connects to `url` (`redis://[:password@]host:port[/db]`); fails when Redis does not
    /// answer within a few seconds.
    pub(crate) async fn connect(url: &str, prefix: &str, ttl: Duration) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("{url}: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(2);
        let redis = tokio::time::timeout(
            REDIS_TIMEOUT * 2,
            ConnectionManager::new_with_config(client.clone(), config),
        )
        .await
        .map_err(|_| format!("{url}: no answer within {}s", (REDIS_TIMEOUT * 2).as_secs()))?
        .map_err(|e| format!("{url}: {e}"))?;
        Ok(Self {
            client,
            redis,
            prefix: prefix.to_string(),
            ttl,
        })
    }

    fn session_key(&self, id: &str) -> String {
        format!("{}:session:{id}", self.prefix)
    }

    fn reads_key(&self, session: &str) -> String {
        format!("{}:reads:{session}", self.prefix)
    }

    fn tools_key(&self, session: &str) -> String {
        format!("{}:tools:{session}", self.prefix)
    }

    fn bus_channel(&self) -> String {
        format!("{}:bus", self.prefix)
    }
}

/// Whole seconds, at least one (Redis expiries are in seconds).
fn seconds(ttl: Duration) -> u64 {
    ttl.as_secs_f64().ceil().max(1.0) as u64
}

#[async_trait::async_trait]
impl SharedSessionStore for RedisState {
    async fn load(&self, id: &str) -> Result<Option<String>, SharedStoreError> {
        let mut redis = self.redis.clone();
        Ok(redis::cmd("GET")
            .arg(self.session_key(id))
            .query_async(&mut redis)
            .await?)
    }

    async fn save(&self, id: &str, record: &str, ttl: Duration) -> Result<(), SharedStoreError> {
        let mut redis = self.redis.clone();
        let () = redis::cmd("SET")
            .arg(self.session_key(id))
            .arg(record)
            .arg("EX")
            .arg(seconds(ttl))
            .query_async(&mut redis)
            .await?;
        Ok(())
    }

    async fn touch(&self, id: &str, ttl: Duration) -> Result<bool, SharedStoreError> {
        let mut redis = self.redis.clone();
        // One round trip: the session's expiry (1 when it still exists), its reads' and its
        // loaded tools'.
        let (alive, _reads, _tools): (bool, bool, bool) = redis::pipe()
            .cmd("EXPIRE")
            .arg(self.session_key(id))
            .arg(seconds(ttl))
            .cmd("EXPIRE")
            .arg(self.reads_key(id))
            .arg(seconds(ttl))
            .cmd("EXPIRE")
            .arg(self.tools_key(id))
            .arg(seconds(ttl))
            .query_async(&mut redis)
            .await?;
        Ok(alive)
    }

    async fn delete(&self, id: &str) -> Result<(), SharedStoreError> {
        let mut redis = self.redis.clone();
        let _: u64 = redis::cmd("DEL")
            .arg(self.session_key(id))
            .arg(self.reads_key(id))
            .arg(self.tools_key(id))
            .query_async(&mut redis)
            .await?;
        Ok(())
    }

    async fn add_loaded_tools(&self, id: &str, tools: &[String]) -> Result<(), SharedStoreError> {
        if tools.is_empty() {
            return Ok(());
        }
        let mut redis = self.redis.clone();
        let key = self.tools_key(id);
        let () = redis::pipe()
            .atomic()
            .cmd("SADD")
            .arg(&key)
            .arg(tools)
            .ignore()
            .cmd("EXPIRE")
            .arg(&key)
            .arg(seconds(self.ttl))
            .ignore()
            .query_async(&mut redis)
            .await?;
        Ok(())
    }

    async fn loaded_tools(&self, id: &str) -> Result<Vec<String>, SharedStoreError> {
        let mut redis = self.redis.clone();
        Ok(redis::cmd("SMEMBERS")
            .arg(self.tools_key(id))
            .query_async(&mut redis)
            .await?)
    }

    async fn publish(&self, id: &str, message: &str) -> Result<(), SharedStoreError> {
        let mut redis = self.redis.clone();
        let payload = serde_json::to_string(&(id, message))?;
        let _receivers: u64 = redis::cmd("PUBLISH")
            .arg(self.bus_channel())
            .arg(payload)
            .query_async(&mut redis)
            .await?;
        Ok(())
    }

    async fn subscribe(&self) -> Result<BoxStream<'static, (String, String)>, SharedStoreError> {
        let mut pubsub = tokio::time::timeout(REDIS_TIMEOUT, self.client.get_async_pubsub())
            .await
            .map_err(|_| format!("no answer within {}s", REDIS_TIMEOUT.as_secs()))??;
        pubsub.subscribe(self.bus_channel()).await?;
        Ok(pubsub
            .into_on_message()
            .filter_map(|message| async move {
                let payload: String = message.get_payload().ok()?;
                serde_json::from_str::<(String, String)>(&payload).ok()
            })
            .boxed())
    }
}

#[async_trait::async_trait]
impl SharedReads for RedisState {
    async fn load(&self, session: &str, path: &Path) -> Result<Option<String>, String> {
        let mut redis = self.redis.clone();
        redis::cmd("HGET")
            .arg(self.reads_key(session))
            .arg(path.as_os_str().as_encoded_bytes())
            .query_async(&mut redis)
            .await
            .map_err(|e| e.to_string())
    }

    async fn save(&self, session: &str, path: &Path, record: &str) -> Result<(), String> {
        let mut redis = self.redis.clone();
        let key = self.reads_key(session);
        let () = redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(&key)
            .arg(path.as_os_str().as_encoded_bytes())
            .arg(record)
            .ignore()
            .cmd("EXPIRE")
            .arg(&key)
            .arg(seconds(self.ttl))
            .ignore()
            .query_async(&mut redis)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}
