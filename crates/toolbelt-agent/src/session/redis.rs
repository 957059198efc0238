//! Sessions in Redis, shared by every process that talks to the same server.
//!
//! Keys, under a prefix (`toolbelt:` unless [`RedisSessionService::with_prefix`] sets
//! another), with `:` and `%` in the parts escaped so no two sessions share a key:
//! - `{prefix}session:{app}:{user}:{id}:meta`: a hash holding the state's `version`; it
//!   exists exactly when the session does;
//! - `…:state`: a hash, one field per state key, its value as JSON text;
//! - `…:events`: a list of events as JSON, in the order their appends ran;
//! - `{prefix}sessions:{app}:{user}`: a sorted set of the user's session ids, scored by when
//!   each expires.
//!
//! Every change is one Lua script, which Redis runs whole before anything else: a batch of
//! events is appended completely or not at all, a state change based on a stale version is
//! refused inside the script that would write it, and a taken value is taken once. State
//! values stay JSON text inside Redis (never decoded by Lua, whose numbers are doubles).
//!
//! With a TTL ([`RedisSessionService::with_ttl`]) every write or read of a whole session
//! pushes the expiry of all its keys to now + TTL, so an idle session disappears as one. A
//! single Redis server (or a primary) is assumed, not Redis Cluster. Durability is the
//! server's: `appendonly yes` keeps what a client was told is written across a restart
//! (`.ci/start-services` runs Redis so). Connections are plain TCP (`redis://`), no TLS.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value as RedisValue};
use serde_json::{Map, Value};

use super::{Session, SessionKey, SessionService, conflict, decode_stored};
use crate::{AgentError, Event};

/// Shared by the scripts below: KEYS = meta, state, events, index; ARGV[1] = TTL in ms (0:
/// none), ARGV[2] = now in ms, ARGV[3] = the session id.
const PRELUDE: &str = r"
local function ensure()
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'version', 0, 'created_ms', ARGV[2])
  end
end
local function touch()
  local ttl = tonumber(ARGV[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
    redis.call('ZADD', KEYS[4], tonumber(ARGV[2]) + ttl, ARGV[3])
    redis.call('PEXPIRE', KEYS[4], ttl)
  else
    redis.call('ZADD', KEYS[4], '+inf', ARGV[3])
  end
end
";

/// Returns {version, state as name/value pairs, events}.
const GET_OR_CREATE: &str = r"
ensure()
touch()
return {tonumber(redis.call('HGET', KEYS[1], 'version')), redis.call('HGETALL', KEYS[2]),
        redis.call('LRANGE', KEYS[3], 0, -1)}
";

/// ARGV[4..] = the events' JSON.
const APPEND: &str = r"
ensure()
for i = 4, #ARGV, 500 do
  redis.call('RPUSH', KEYS[3], unpack(ARGV, i, math.min(i + 499, #ARGV)))
end
touch()
return 1
";

/// ARGV[4] = the expected version (-1: any), ARGV[5] = how many values are set, then
/// name/value pairs, then names to remove. Returns {1, new version} or {0, found version}.
const UPDATE_STATE: &str = r"
ensure()
local version = tonumber(redis.call('HGET', KEYS[1], 'version'))
local expected = tonumber(ARGV[4])
if expected >= 0 and version ~= expected then
  return {0, version}
end
local i = 6
for _ = 1, tonumber(ARGV[5]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
  i = i + 1
end
version = redis.call('HINCRBY', KEYS[1], 'version', 1)
touch()
return {1, version}
";

/// ARGV[4] = the state key. Returns its JSON, or nil when absent.
const TAKE_STATE: &str = r"
local value = redis.call('HGET', KEYS[2], ARGV[4])
if not value then
  return false
end
redis.call('HDEL', KEYS[2], ARGV[4])
redis.call('HINCRBY', KEYS[1], 'version', 1)
touch()
return value
";

/// Returns 1 when the session existed.
const DELETE: &str = r"
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[3])
return existed
";

/// Sessions in Redis: see the [module docs](self) for the keys and the guarantees. Cheap
/// to clone (one multiplexed connection, reconnected after a failure, is shared).
#[derive(Clone)]
pub struct RedisSessionService {
    conn: ConnectionManager,
    prefix: String,
    ttl: Option<Duration>,
    scripts: std::sync::Arc<Scripts>,
}

struct Scripts {
    get_or_create: Script,
    append: Script,
    update_state: Script,
    take_state: Script,
    delete: Script,
}

impl Scripts {
    fn new() -> Self {
        let with_prelude = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Self {
            get_or_create: with_prelude(GET_OR_CREATE),
            append: with_prelude(APPEND),
            update_state: with_prelude(UPDATE_STATE),
            take_state: with_prelude(TAKE_STATE),
            delete: with_prelude(DELETE),
        }
    }
}

impl std::fmt::Debug for RedisSessionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("RedisSessionService")
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn redis_error(error: impl std::fmt::Display) -> AgentError {
    AgentError::Session(format!("redis: {error}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A key part with `%` and `:` escaped, so `a:b` + `c` and `a` + `b:c` differ.
fn escape(part: &str) -> String {
    part.replace('%', "%25").replace(':', "%3A")
}

/// The keys of one session, in the order the scripts take them.
struct Keys {
    meta: String,
    state: String,
    events: String,
    index: String,
}

impl RedisSessionService {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`).
    /// Sessions never expire until [`with_ttl`](Self::with_ttl) says otherwise.
    pub async fn open(url: &str) -> Result<Self, AgentError> {
        let client =
            redis::Client::open(url).map_err(|e| AgentError::Config(format!("redis URL: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(10)))
            .set_response_timeout(Some(Duration::from_secs(30)));
        let conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(redis_error)?;
        Ok(Self {
            conn,
            prefix: "toolbelt:".to_string(),
            ttl: None,
            scripts: std::sync::Arc::new(Scripts::new()),
        })
    }

    /// Keeps every key under `prefix` instead of `toolbelt:` (separate stores on one server,
    /// such as one per test).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Expires a session `ttl` after it was last written or read whole (rounded down to
    /// milliseconds, at least one).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl.max(Duration::from_millis(1)));
        self
    }

    fn keys(&self, key: &SessionKey) -> Keys {
        let (app, user) = (escape(&key.app), escape(&key.user_id));
        let base = format!(
            "{}session:{app}:{user}:{}",
            self.prefix,
            escape(&key.session_id)
        );
        Keys {
            meta: format!("{base}:meta"),
            state: format!("{base}:state"),
            events: format!("{base}:events"),
            index: self.index_key(&key.app, &key.user_id),
        }
    }

    fn index_key(&self, app: &str, user_id: &str) -> String {
        format!(
            "{}sessions:{}:{}",
            self.prefix,
            escape(app),
            escape(user_id)
        )
    }

    /// A script invocation with the session's keys and the three common arguments.
    fn invocation<'a>(&self, script: &'a Script, key: &SessionKey) -> redis::ScriptInvocation<'a> {
        let keys = self.keys(key);
        let ttl_ms = self.ttl.map_or(0, |ttl| ttl.as_millis().max(1) as u64);
        let mut invocation = script.prepare_invoke();
        invocation
            .key(keys.meta)
            .key(keys.state)
            .key(keys.events)
            .key(keys.index)
            .arg(ttl_ms)
            .arg(now_ms())
            .arg(&key.session_id);
        invocation
    }

    async fn update(
        &self,
        key: &SessionKey,
        expected: Option<u64>,
        changes: Map<String, Value>,
    ) -> Result<u64, AgentError> {
        let (values, removed) = super::split_changes(changes);
        let set = values
            .into_iter()
            .map(|(name, value)| Ok((name, serde_json::to_string(&value).map_err(redis_error)?)))
            .collect::<Result<Vec<_>, AgentError>>()?;
        let mut invocation = self.invocation(&self.scripts.update_state, key);
        invocation
            .arg(expected.map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX)))
            .arg(set.len());
        for (name, value) in &set {
            invocation.arg(name).arg(value);
        }
        for name in &removed {
            invocation.arg(name);
        }
        let (applied, version): (i64, u64) = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        if applied == 1 {
            Ok(version)
        } else {
            Err(conflict(key, expected.unwrap_or_default(), version))
        }
    }
}

fn decode_events(bodies: Vec<String>) -> Vec<Event> {
    bodies
        .iter()
        .filter_map(|body| decode_stored(body))
        .collect()
}

#[async_trait]
impl SessionService for RedisSessionService {
    async fn get_or_create(&self, key: &SessionKey) -> Result<Session, AgentError> {
        let (version, fields, bodies): (u64, Vec<String>, Vec<String>) = self
            .invocation(&self.scripts.get_or_create, key)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        let mut state = Map::new();
        for pair in fields.chunks_exact(2) {
            let value = serde_json::from_str(&pair[1])
                .map_err(|e| redis_error(format!("corrupt session state {:?}: {e}", pair[0])))?;
            state.insert(pair[0].clone(), value);
        }
        Ok(Session {
            key: key.clone(),
            events: decode_events(bodies),
            state,
            version,
        })
    }

    async fn events(&self, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
        let bodies: Vec<String> = redis::cmd("LRANGE")
            .arg(self.keys(key).events)
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(decode_events(bodies))
    }

    async fn append_event(&self, key: &SessionKey, event: &Event) -> Result<(), AgentError> {
        self.append_events(key, std::slice::from_ref(event)).await
    }

    async fn append_events(&self, key: &SessionKey, events: &[Event]) -> Result<(), AgentError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut invocation = self.invocation(&self.scripts.append, key);
        for event in events {
            invocation.arg(serde_json::to_string(event).map_err(redis_error)?);
        }
        let _: i64 = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    async fn update_state(
        &self,
        key: &SessionKey,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError> {
        self.update(key, None, changes).await.map(drop)
    }

    async fn update_state_if(
        &self,
        key: &SessionKey,
        expected_version: u64,
        changes: Map<String, Value>,
    ) -> Result<u64, AgentError> {
        self.update(key, Some(expected_version), changes).await
    }

    async fn take_state(&self, key: &SessionKey, name: &str) -> Result<Option<Value>, AgentError> {
        let mut invocation = self.invocation(&self.scripts.take_state, key);
        invocation.arg(name);
        let value: Option<String> = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        value
            .map(|text| serde_json::from_str(&text).map_err(redis_error))
            .transpose()
    }

    async fn list_sessions(&self, app: &str, user_id: &str) -> Result<Vec<String>, AgentError> {
        let index = self.index_key(app, user_id);
        let mut conn = self.conn.clone();
        // Expired sessions leave their id behind until a listing drops it.
        let (_, mut ids): (RedisValue, Vec<String>) = redis::pipe()
            .atomic()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&index)
            .arg("-inf")
            .arg(format!("({}", now_ms()))
            .cmd("ZRANGE")
            .arg(&index)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        ids.sort();
        Ok(ids)
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, AgentError> {
        let existed: i64 = self
            .invocation(&self.scripts.delete, key)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error)?;
        Ok(existed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_cannot_run_into_each_other() {
        assert_ne!(
            format!("{}:{}", escape("a:b"), escape("c")),
            format!("{}:{}", escape("a"), escape("b:c"))
        );
        assert_eq!(escape("50%:x"), "50%25%3Ax");
    }
}
