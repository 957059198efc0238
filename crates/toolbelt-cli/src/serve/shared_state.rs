//! `serve --shared-state redis://…`: what replicas of `serve --http` share, in Redis (one
//! connection manager, which reconnects by itself).
//!
//! Keys, under `--shared-state-prefix` (default `toolbelt`):
//! - `{prefix}:session:{id}`: an MCP session's record (the client's `initialize`
//!   parameters), expiring after the idle timeout, renewed by every request on any replica;
//! - `{prefix}:reads:{id}`: a hash of the files the session fully read (path → size and
//!   BLAKE3 of the content), with the same time to live, renewed with the session.
//!
//! Built with the `redis` feature only; without it `--shared-state` is refused with a clear
//! error.

use std::path::Path;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use toolbelt::builtin::fs::SharedReads;
use toolbelt::mcp::server::{SharedSessionStore, SharedStoreError};

/// How long connecting to Redis, and then each command, may take.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Sessions and reads in Redis.
#[derive(Clone)]
pub(crate) struct RedisState {
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
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| format!("{url}: no answer within {}s", (REDIS_TIMEOUT * 2).as_secs()))?
        .map_err(|e| format!("{url}: {e}"))?;
        Ok(Self {
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
        // One round trip: the session's expiry (1 when it still exists) and its reads'.
        let (alive, _reads): (bool, bool) = redis::pipe()
            .cmd("EXPIRE")
            .arg(self.session_key(id))
            .arg(seconds(ttl))
            .cmd("EXPIRE")
            .arg(self.reads_key(id))
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
            .query_async(&mut redis)
            .await?;
        Ok(())
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
