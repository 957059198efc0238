//! Choosing a session store by what the user typed: a URL names a server, anything else is a
//! SQLite file.

use std::sync::Arc;

use super::SessionService;
use crate::AgentError;

/// Which store a `--session` value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    Redis,
    Sqlite,
}

fn kind_of(target: &str) -> Kind {
    let scheme = target
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("postgres" | "postgresql") => Kind::Postgres,
        Some("redis" | "rediss") => Kind::Redis,
        _ => Kind::Sqlite,
    }
}

/// Opens the session store `target` names: `postgres://…` (or `postgresql://…`) a
/// PostgreSQL database (feature `postgres`), `redis://…` (or `rediss://…`) a Redis server
/// (feature `redis`), anything else a SQLite file (feature `sqlite`). A store whose feature
/// this build lacks is a [`AgentError::Config`] naming the feature. Errors never repeat the
/// URL, which may hold a password.
pub async fn open_url(target: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    match kind_of(target) {
        Kind::Postgres => open_postgres(target).await,
        Kind::Redis => open_redis(target).await,
        Kind::Sqlite => open_sqlite(target),
    }
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    Ok(Arc::new(super::PostgresSessionService::open(url).await?))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    Err(missing_feature("postgres", "PostgreSQL"))
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    Ok(Arc::new(super::RedisSessionService::open(url).await?))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(_url: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    Err(missing_feature("redis", "Redis"))
}

#[cfg(feature = "sqlite")]
fn open_sqlite(path: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    Ok(Arc::new(super::SqliteSessionService::open(path)?))
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(_path: &str) -> Result<Arc<dyn SessionService>, AgentError> {
    Err(missing_feature("sqlite", "SQLite"))
}

#[allow(dead_code)] // unused when every store is compiled in
fn missing_feature(feature: &str, engine: &str) -> AgentError {
    AgentError::Config(format!(
        "sessions in {engine} are not compiled into this build: rebuild with feature \
         `{feature}` (for the command line: cargo install --path crates/toolbelt-cli \
         --features {feature})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_servers_and_everything_else_is_a_file() {
        assert_eq!(kind_of("postgres://u:p@h/db"), Kind::Postgres);
        assert_eq!(kind_of("PostgreSQL://h/db"), Kind::Postgres);
        assert_eq!(kind_of("redis://127.0.0.1:6379"), Kind::Redis);
        assert_eq!(kind_of("rediss://h"), Kind::Redis);
        assert_eq!(kind_of("sessions.db"), Kind::Sqlite);
        assert_eq!(kind_of("./postgres/sessions.db"), Kind::Sqlite);
        assert_eq!(kind_of("/tmp/x://y"), Kind::Sqlite);
    }
}
