//! Sessions in PostgreSQL, shared by every process that opens the same database.
//!
//! Two tables in one schema (`public` unless [`PostgresSessionService::open_in_schema`]
//! names another): `toolbelt_sessions` (one row per session: state as `jsonb`, its version)
//! and `toolbelt_events` (one row per event, `bigserial` order). Each change is one
//! statement or one transaction, so a connection cut in the middle (a server restart, a
//! failover) rolls it back whole: the caller gets an error and no partial batch is stored.
//!
//! Appends to one session take the session row's lock first, so their sequence numbers
//! follow commit order and a reader never sees a later event before an earlier one.
//! State changes merge in SQL (`state || set - removed`), never as a read-modify-write in
//! this process, and bump `version`; [`SessionService::update_state_if`] changes the row
//! only `WHERE version = expected`.
//!
//! Built on `tokio-postgres` with a `deadpool` pool (a cold debug build of the pair took
//! half the time and disk of `sqlx` with only its Postgres driver). Connections are plain
//! TCP without TLS: reach the server over loopback, a private network or a tunnel.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::{Map, Value};
use tokio_postgres::NoTls;

use super::{Session, SessionKey, SessionService, conflict, decode_stored};
use crate::{AgentError, Event};

/// Versioned migrations, applied in order at open, each once (recorded in
/// `toolbelt_migrations`). Never edit a released one: add the next.
const MIGRATIONS: &[(i32, &str)] = &[(
    1,
    "CREATE TABLE {s}.toolbelt_sessions (
        app text NOT NULL,
        user_id text NOT NULL,
        session_id text NOT NULL,
        state jsonb NOT NULL DEFAULT '{}',
        version bigint NOT NULL DEFAULT 0,
        created_ms bigint NOT NULL,
        updated_ms bigint NOT NULL,
        PRIMARY KEY (app, user_id, session_id)
    );
    CREATE TABLE {s}.toolbelt_events (
        seq bigserial PRIMARY KEY,
        app text NOT NULL,
        user_id text NOT NULL,
        session_id text NOT NULL,
        event_id text NOT NULL,
        invocation_id text NOT NULL,
        author text NOT NULL,
        object text NOT NULL,
        body text NOT NULL,
        timestamp_ms bigint NOT NULL
    );
    CREATE INDEX toolbelt_events_by_session
        ON {s}.toolbelt_events (app, user_id, session_id, seq);",
)];

/// Serialises migrations of concurrent openers (replicas starting together) on one
/// database: a transaction-scoped advisory lock with this key ("toolbelt" in ASCII).
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6265_6c74;

/// Connections kept open by one service.
const POOL_SIZE: usize = 16;

/// Sessions in a PostgreSQL database: see the [module docs](self) for the layout and the
/// guarantees. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct PostgresSessionService {
    pool: Pool,
    /// The schema, quoted for SQL.
    schema: String,
}

impl std::fmt::Debug for PostgresSessionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("PostgresSessionService")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

fn pg_error(error: impl std::fmt::Display) -> AgentError {
    AgentError::Session(format!("postgres: {error}"))
}

/// A driver error with the server's own message (tokio-postgres displays a server error
/// as just "db error").
fn db_error(error: tokio_postgres::Error) -> AgentError {
    match error.as_db_error() {
        Some(db) => pg_error(format!("{}: {}", db.code().code(), db.message())),
        None => {
            // "error connecting to server" alone does not say why: add the causes.
            pg_error(toolbelt_core::error_chain(&error))
        }
    }
}

fn pool_error(error: deadpool_postgres::PoolError) -> AgentError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => db_error(error),
        other => pg_error(format!("cannot get a connection: {other}")),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A schema name as a quoted identifier: ASCII letters, digits and `_`, not starting with a
/// digit, at most 63 bytes (PostgreSQL's limit); anything else is refused.
fn quoted_schema(name: &str) -> Result<String, AgentError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(format!("\"{name}\""))
    } else {
        Err(AgentError::Config(format!(
            "postgres schema {name:?}: use ASCII letters, digits and _ (at most 63, not \
             starting with a digit)"
        )))
    }
}

/// State changes as the SQL merge takes them: the values to set as one JSON object, and the
/// names to remove.
fn split_changes(changes: Map<String, Value>) -> Result<(String, Vec<String>), AgentError> {
    let (set, removed) = super::split_changes(changes);
    let set = serde_json::to_string(&set).map_err(pg_error)?;
    Ok((set, removed))
}

fn parse_state(text: &str) -> Result<Map<String, Value>, AgentError> {
    serde_json::from_str(text).map_err(|e| pg_error(format!("corrupt session state: {e}")))
}

impl PostgresSessionService {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`, the
    /// libpq URL form) and applies the migrations not yet applied, in the `public` schema.
    pub async fn open(url: &str) -> Result<Self, AgentError> {
        Self::open_in_schema(url, "public").await
    }

    /// Like [`open`](Self::open), in `schema` (created if missing): separate stores in one
    /// database, such as one per test.
    pub async fn open_in_schema(url: &str, schema: &str) -> Result<Self, AgentError> {
        let schema = quoted_schema(schema)?;
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| AgentError::Config(format!("postgres URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.application_name("toolbelt");
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(15)))
            .build()
            .map_err(pg_error)?;
        let service = Self { pool, schema };
        service.migrate().await?;
        Ok(service)
    }

    /// Applies the migrations this database lacks, all in one transaction under an advisory
    /// lock: idempotent, and safe when several processes open the store at once.
    async fn migrate(&self) -> Result<(), AgentError> {
        let s = &self.schema;
        let mut client = self.pool.get().await.map_err(pool_error)?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(db_error)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s};
             CREATE TABLE IF NOT EXISTS {s}.toolbelt_migrations (
                 version integer PRIMARY KEY,
                 applied_ms bigint NOT NULL
             );"
        ))
        .await
        .map_err(db_error)?;
        let applied: Vec<i32> = tx
            .query(&format!("SELECT version FROM {s}.toolbelt_migrations"), &[])
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| row.get(0))
            .collect();
        for (version, sql) in MIGRATIONS {
            if applied.contains(version) {
                continue;
            }
            tx.batch_execute(&sql.replace("{s}", s))
                .await
                .map_err(db_error)?;
            tx.execute(
                &format!("INSERT INTO {s}.toolbelt_migrations VALUES ($1, $2)"),
                &[version, &now_ms()],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, AgentError> {
        self.pool.get().await.map_err(pool_error)
    }

    async fn read_events(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        key: &SessionKey,
    ) -> Result<Vec<Event>, AgentError> {
        let rows = client
            .query(
                &format!(
                    "SELECT body FROM {}.toolbelt_events
                     WHERE app = $1 AND user_id = $2 AND session_id = $3 ORDER BY seq",
                    self.schema
                ),
                &[&key.app, &key.user_id, &key.session_id],
            )
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .filter_map(|row| decode_stored(row.get(0)))
            .collect())
    }
}

#[async_trait]
impl SessionService for PostgresSessionService {
    async fn get_or_create(&self, key: &SessionKey) -> Result<Session, AgentError> {
        let s = &self.schema;
        let mut client = self.client().await?;
        client
            .execute(
                &format!(
                    "INSERT INTO {s}.toolbelt_sessions (app, user_id, session_id, created_ms, updated_ms)
                     VALUES ($1, $2, $3, $4, $4) ON CONFLICT DO NOTHING"
                ),
                &[&key.app, &key.user_id, &key.session_id, &now_ms()],
            )
            .await
            .map_err(db_error)?;
        // One snapshot for the state and the events; read-only, so it never fails to
        // serialise against concurrent writers.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_error)?;
        let row = tx
            .query_one(
                &format!(
                    "SELECT state::text, version FROM {s}.toolbelt_sessions
                     WHERE app = $1 AND user_id = $2 AND session_id = $3"
                ),
                &[&key.app, &key.user_id, &key.session_id],
            )
            .await
            .map_err(db_error)?;
        let state = parse_state(row.get(0))?;
        let version = row.get::<_, i64>(1).max(0) as u64;
        let events = self.read_events(&tx, key).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(Session {
            key: key.clone(),
            events,
            state,
            version,
        })
    }

    async fn events(&self, key: &SessionKey) -> Result<Vec<Event>, AgentError> {
        let client = self.client().await?;
        self.read_events(&client, key).await
    }

    async fn append_event(&self, key: &SessionKey, event: &Event) -> Result<(), AgentError> {
        self.append_events(key, std::slice::from_ref(event)).await
    }

    async fn append_events(&self, key: &SessionKey, events: &[Event]) -> Result<(), AgentError> {
        let s = &self.schema;
        let bodies = events
            .iter()
            .map(|event| serde_json::to_string(event).map_err(pg_error))
            .collect::<Result<Vec<_>, _>>()?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Creating or touching the session row locks it until commit: appends to one session
        // commit one after the other, in the order of their sequence numbers.
        tx.execute(
            &format!(
                "INSERT INTO {s}.toolbelt_sessions (app, user_id, session_id, created_ms, updated_ms)
                 VALUES ($1, $2, $3, $4, $4)
                 ON CONFLICT (app, user_id, session_id) DO UPDATE SET updated_ms = excluded.updated_ms"
            ),
            &[&key.app, &key.user_id, &key.session_id, &now_ms()],
        )
        .await
        .map_err(db_error)?;
        let insert = tx
            .prepare_cached(&format!(
                "INSERT INTO {s}.toolbelt_events (app, user_id, session_id, event_id,
                     invocation_id, author, object, body, timestamp_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            ))
            .await
            .map_err(db_error)?;
        for (event, body) in events.iter().zip(&bodies) {
            tx.execute(
                &insert,
                &[
                    &key.app,
                    &key.user_id,
                    &key.session_id,
                    &event.id,
                    &event.invocation_id,
                    &event.author,
                    &event.kind.type_name(),
                    body,
                    &(event.timestamp_ms as i64),
                ],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
    }

    async fn update_state(
        &self,
        key: &SessionKey,
        changes: Map<String, Value>,
    ) -> Result<(), AgentError> {
        let s = &self.schema;
        let (set, removed) = split_changes(changes)?;
        let client = self.client().await?;
        client
            .execute(
                &format!(
                    "INSERT INTO {s}.toolbelt_sessions AS t
                         (app, user_id, session_id, state, version, created_ms, updated_ms)
                     VALUES ($1, $2, $3, ($4::text::jsonb) - $5::text[], 1, $6, $6)
                     ON CONFLICT (app, user_id, session_id) DO UPDATE
                     SET state = (t.state || $4::text::jsonb) - $5::text[],
                         version = t.version + 1, updated_ms = $6"
                ),
                &[
                    &key.app,
                    &key.user_id,
                    &key.session_id,
                    &set,
                    &removed,
                    &now_ms(),
                ],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn update_state_if(
        &self,
        key: &SessionKey,
        expected_version: u64,
        changes: Map<String, Value>,
    ) -> Result<u64, AgentError> {
        let s = &self.schema;
        let (set, removed) = split_changes(changes)?;
        let expected = i64::try_from(expected_version).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let now = now_ms();
        client
            .execute(
                &format!(
                    "INSERT INTO {s}.toolbelt_sessions (app, user_id, session_id, created_ms, updated_ms)
                     VALUES ($1, $2, $3, $4, $4) ON CONFLICT DO NOTHING"
                ),
                &[&key.app, &key.user_id, &key.session_id, &now],
            )
            .await
            .map_err(db_error)?;
        // The WHERE is checked again on the row a concurrent update left: of two updates
        // based on one version, exactly one matches.
        let updated = client
            .query_opt(
                &format!(
                    "UPDATE {s}.toolbelt_sessions AS t
                     SET state = (t.state || $4::text::jsonb) - $5::text[],
                         version = t.version + 1, updated_ms = $6
                     WHERE app = $1 AND user_id = $2 AND session_id = $3 AND version = $7
                     RETURNING version"
                ),
                &[
                    &key.app,
                    &key.user_id,
                    &key.session_id,
                    &set,
                    &removed,
                    &now,
                    &expected,
                ],
            )
            .await
            .map_err(db_error)?;
        if let Some(row) = updated {
            return Ok(row.get::<_, i64>(0).max(0) as u64);
        }
        let found: i64 = client
            .query_one(
                &format!(
                    "SELECT version FROM {s}.toolbelt_sessions
                     WHERE app = $1 AND user_id = $2 AND session_id = $3"
                ),
                &[&key.app, &key.user_id, &key.session_id],
            )
            .await
            .map_err(db_error)?
            .get(0);
        Err(conflict(key, expected_version, found.max(0) as u64))
    }

    async fn take_state(&self, key: &SessionKey, name: &str) -> Result<Option<Value>, AgentError> {
        let s = &self.schema;
        let client = self.client().await?;
        // The CTE locks the row, so the value returned is the one removed.
        let row = client
            .query_opt(
                &format!(
                    "WITH old AS (
                         SELECT state -> $4::text AS value FROM {s}.toolbelt_sessions
                         WHERE app = $1 AND user_id = $2 AND session_id = $3 FOR UPDATE
                     )
                     UPDATE {s}.toolbelt_sessions AS t
                     SET state = t.state - $4::text, version = t.version + 1, updated_ms = $5
                     FROM old
                     WHERE t.app = $1 AND t.user_id = $2 AND t.session_id = $3
                       AND old.value IS NOT NULL
                     RETURNING old.value::text"
                ),
                &[&key.app, &key.user_id, &key.session_id, &name, &now_ms()],
            )
            .await
            .map_err(db_error)?;
        row.map(|row| serde_json::from_str(row.get(0)).map_err(pg_error))
            .transpose()
    }

    async fn list_sessions(&self, app: &str, user_id: &str) -> Result<Vec<String>, AgentError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT session_id FROM {}.toolbelt_sessions
                     WHERE app = $1 AND user_id = $2 ORDER BY session_id",
                    self.schema
                ),
                &[&app, &user_id],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<bool, AgentError> {
        let s = &self.schema;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&key.app, &key.user_id, &key.session_id];
        tx.execute(
            &format!(
                "DELETE FROM {s}.toolbelt_events
                 WHERE app = $1 AND user_id = $2 AND session_id = $3"
            ),
            &params,
        )
        .await
        .map_err(db_error)?;
        let removed = tx
            .execute(
                &format!(
                    "DELETE FROM {s}.toolbelt_sessions
                     WHERE app = $1 AND user_id = $2 AND session_id = $3"
                ),
                &params,
            )
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(removed > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_that_could_break_out_of_the_identifier_are_refused() {
        assert_eq!(quoted_schema("tb_test_1").unwrap(), "\"tb_test_1\"");
        for bad in ["", "a\"b", "a;drop", "1abc", "a b", &"x".repeat(64)] {
            assert!(quoted_schema(bad).is_err(), "{bad:?}");
        }
    }
}
