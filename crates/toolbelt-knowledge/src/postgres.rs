//! [`PostgresStore`]: the knowledge base's documents, chunks and embedding cache in a
//! PostgreSQL database, shared by every process that opens it.
//!
//! Three tables in one schema (`public` unless [`PostgresStore::open_in_schema`] names
//! another): `toolbelt_kb_documents` (source, content hash), `toolbelt_kb_chunks` (one row
//! per chunk: its JSON, its position) and `toolbelt_kb_vectors` (the embedding cache, by
//! model and text hash). Replacing a source's chunks is one transaction, so another process
//! reads the old chunks or the new ones. Every value is a bound parameter; the schema name,
//! the one identifier written into SQL, is checked to letters, digits and `_`.
//!
//! Vectors are stored in pgvector's `vector` type when the server has the extension (the
//! store runs `CREATE EXTENSION IF NOT EXISTS vector` when it creates the table, and falls
//! back when that fails), otherwise as `real[]`; [`PostgresStore::vector_column`] says which.
//! Either way similarity is computed in this process: the knowledge base holds every chunk's
//! vector in memory beside its BM25 index (as it does with SQLite), so the database keeps the
//! vectors across processes and never ranks.
//!
//! Built on `tokio-postgres` with a `deadpool` pool, as the agent's PostgreSQL sessions are.
//! Connections are plain TCP without TLS: reach the server over loopback, a private network or
//! a tunnel.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;
use toolbelt_search::SearchError;
use toolbelt_search::embed::{StoredVector, VectorStore};

use crate::KnowledgeError;
use crate::chunk::Chunk;
use crate::store::ChunkStore;

/// Connections kept open by one store.
const POOL_SIZE: usize = 8;
/// Serialises table creation of concurrent openers: a transaction-scoped advisory lock
/// ("tbkb" in ASCII).
const CREATE_LOCK: i64 = 0x7462_6b62;

/// How a [`PostgresStore`] keeps vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorColumn {
    /// pgvector's `vector` type (the server has the extension).
    PgVector,
    /// A plain `real[]` (the server lacks pgvector, or it could not be created).
    RealArray,
}

/// A [`ChunkStore`] and embedding cache ([`VectorStore`]) in PostgreSQL; see the
/// [module docs](self). Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// The schema, quoted for SQL.
    schema: String,
    vectors: VectorColumn,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .field("vectors", &self.vectors)
            .finish_non_exhaustive()
    }
}

fn store_error(error: impl std::fmt::Display) -> KnowledgeError {
    KnowledgeError::Store(format!("postgres: {error}"))
}

/// A driver error with the server's own message (tokio-postgres displays a server error as
/// just "db error"), and the causes of a connection failure.
fn db_message(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => toolbelt_core::error_chain(error),
    }
}

fn db_error(error: tokio_postgres::Error) -> KnowledgeError {
    store_error(db_message(&error))
}

fn pool_error(error: deadpool_postgres::PoolError) -> KnowledgeError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => db_error(error),
        other => store_error(format!("cannot get a connection: {other}")),
    }
}

fn vector_error(error: KnowledgeError) -> SearchError {
    SearchError::Store(error.to_string())
}

/// A schema name as a quoted identifier: ASCII letters, digits and `_`, not starting with a
/// digit, at most 63 bytes (PostgreSQL's limit); anything else is refused.
fn quoted_schema(name: &str) -> Result<String, KnowledgeError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(format!("\"{name}\""))
    } else {
        Err(store_error(format!(
            "schema {name:?}: use ASCII letters, digits and _ (at most 63, not starting with a \
             digit)"
        )))
    }
}

/// A vector as pgvector's text form, `[1,2.5,-3]`.
fn vector_text(vector: &[f32]) -> String {
    let items: Vec<String> = vector.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(","))
}

/// pgvector's text form read back; `None` when it is not one.
fn parse_vector_text(text: &str) -> Option<Vec<f32>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|x| x.trim().parse().ok()).collect()
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`, the libpq
    /// URL form) and creates the tables if missing, in the `public` schema.
    pub async fn open(url: &str) -> Result<Self, KnowledgeError> {
        Self::open_in_schema(url, "public").await
    }

    /// Like [`open`](Self::open), in `schema` (created if missing): separate bases in one
    /// database, such as one per test.
    pub async fn open_in_schema(url: &str, schema: &str) -> Result<Self, KnowledgeError> {
        let schema = quoted_schema(schema)?;
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| store_error(format!("URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.application_name("toolbelt-knowledge");
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
            .map_err(store_error)?;
        let vectors = create_tables(&pool, &schema).await?;
        Ok(PostgresStore {
            pool,
            schema,
            vectors,
        })
    }

    /// How this store keeps vectors.
    pub fn vector_column(&self) -> VectorColumn {
        self.vectors
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, KnowledgeError> {
        self.pool.get().await.map_err(pool_error)
    }
}

/// Creates the tables this database lacks, under an advisory lock (idempotent; safe when
/// several processes open the store at once), and says how vectors are kept.
async fn create_tables(pool: &Pool, s: &str) -> Result<VectorColumn, KnowledgeError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let mut tx = client.transaction().await.map_err(db_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CREATE_LOCK])
        .await
        .map_err(db_error)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {s};
         CREATE TABLE IF NOT EXISTS {s}.toolbelt_kb_documents (
             source text PRIMARY KEY,
             hash text NOT NULL
         );
         CREATE TABLE IF NOT EXISTS {s}.toolbelt_kb_chunks (
             id text PRIMARY KEY,
             source text NOT NULL REFERENCES {s}.toolbelt_kb_documents (source) ON DELETE CASCADE,
             position integer NOT NULL,
             chunk text NOT NULL
         );
         CREATE INDEX IF NOT EXISTS toolbelt_kb_chunks_by_source
             ON {s}.toolbelt_kb_chunks (source, position);"
    ))
    .await
    .map_err(db_error)?;
    let existing = vector_column_of(&tx, s).await?;
    let column = match existing {
        Some(column) => column,
        None => {
            // The extension may be missing or need rights this user lacks: try it in a
            // savepoint, so a refusal leaves the transaction usable.
            let with_pgvector = {
                let savepoint = tx.savepoint("pgvector").await.map_err(db_error)?;
                match savepoint
                    .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                    .await
                {
                    Ok(()) => {
                        savepoint.commit().await.map_err(db_error)?;
                        true
                    }
                    Err(e) => {
                        tracing::info!(
                            "pgvector is not available ({}): vectors are kept as real[]",
                            db_message(&e)
                        );
                        savepoint.rollback().await.map_err(db_error)?;
                        false
                    }
                }
            };
            let kind = if with_pgvector { "vector" } else { "real[]" };
            tx.batch_execute(&format!(
                "CREATE TABLE {s}.toolbelt_kb_vectors (
                     model text NOT NULL,
                     content_hash text NOT NULL,
                     name text NOT NULL,
                     vector {kind} NOT NULL,
                     PRIMARY KEY (model, content_hash)
                 );"
            ))
            .await
            .map_err(db_error)?;
            if with_pgvector {
                VectorColumn::PgVector
            } else {
                VectorColumn::RealArray
            }
        }
    };
    tx.commit().await.map_err(db_error)?;
    Ok(column)
}

/// The type of the vectors table's `vector` column, `None` when the table does not exist.
async fn vector_column_of(
    client: &impl deadpool_postgres::GenericClient,
    quoted_schema: &str,
) -> Result<Option<VectorColumn>, KnowledgeError> {
    let schema = quoted_schema.trim_matches('"');
    let row = client
        .query_opt(
            "SELECT udt_name FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = 'toolbelt_kb_vectors' AND column_name = 'vector'",
            &[&schema],
        )
        .await
        .map_err(db_error)?;
    match row.map(|r| r.get::<_, String>(0)).as_deref() {
        None => Ok(None),
        Some("vector") => Ok(Some(VectorColumn::PgVector)),
        Some("_float4") => Ok(Some(VectorColumn::RealArray)),
        Some(other) => Err(store_error(format!(
            "toolbelt_kb_vectors.vector is of type {other}, not a Toolbelt knowledge base's; \
             refusing to use it"
        ))),
    }
}

#[async_trait::async_trait]
impl ChunkStore for PostgresStore {
    async fn documents(&self) -> Result<BTreeMap<String, String>, KnowledgeError> {
        let s = &self.schema;
        let rows = self
            .client()
            .await?
            .query(
                &format!("SELECT source, hash FROM {s}.toolbelt_kb_documents"),
                &[],
            )
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect())
    }

    async fn replace(
        &self,
        source: &str,
        hash: &str,
        chunks: &[Chunk],
    ) -> Result<(), KnowledgeError> {
        let s = &self.schema;
        let rows: Vec<(String, String)> = chunks
            .iter()
            .map(|c| {
                serde_json::to_string(c)
                    .map(|json| (c.id.clone(), json))
                    .map_err(|e| KnowledgeError::Store(format!("chunk {}: {e}", c.id)))
            })
            .collect::<Result<_, _>>()?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            &format!("DELETE FROM {s}.toolbelt_kb_chunks WHERE source = $1"),
            &[&source],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            &format!(
                "INSERT INTO {s}.toolbelt_kb_documents (source, hash) VALUES ($1, $2)
                 ON CONFLICT (source) DO UPDATE SET hash = excluded.hash"
            ),
            &[&source, &hash],
        )
        .await
        .map_err(db_error)?;
        // One statement for all the chunks: arrays unnested on the server.
        let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
        let positions: Vec<i32> = (0..rows.len() as i32).collect();
        let jsons: Vec<&str> = rows.iter().map(|(_, json)| json.as_str()).collect();
        tx.execute(
            &format!(
                "INSERT INTO {s}.toolbelt_kb_chunks (id, source, position, chunk)
                 SELECT id, $1, position, chunk
                 FROM unnest($2::text[], $3::integer[], $4::text[]) AS t (id, position, chunk)"
            ),
            &[&source, &ids, &positions, &jsons],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn remove(&self, source: &str) -> Result<(), KnowledgeError> {
        let s = &self.schema;
        // The chunks go with their document (ON DELETE CASCADE), in the one statement.
        self.client()
            .await?
            .execute(
                &format!("DELETE FROM {s}.toolbelt_kb_documents WHERE source = $1"),
                &[&source],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }

    async fn chunks(&self) -> Result<Vec<Chunk>, KnowledgeError> {
        let s = &self.schema;
        let rows = self
            .client()
            .await?
            .query(
                &format!("SELECT id, chunk FROM {s}.toolbelt_kb_chunks ORDER BY source, position"),
                &[],
            )
            .await
            .map_err(db_error)?;
        rows.iter()
            .map(|row| {
                let id: String = row.get(0);
                let json: String = row.get(1);
                serde_json::from_str(&json)
                    .map_err(|e| KnowledgeError::Store(format!("chunk {id} is not readable: {e}")))
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl VectorStore for PostgresStore {
    async fn get(
        &self,
        model_id: &str,
        content_hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, SearchError> {
        let s = &self.schema;
        let client = self.client().await.map_err(vector_error)?;
        let column = match self.vectors {
            VectorColumn::PgVector => "vector::text",
            VectorColumn::RealArray => "vector",
        };
        let rows = client
            .query(
                &format!(
                    "SELECT content_hash, {column} FROM {s}.toolbelt_kb_vectors
                     WHERE model = $1 AND content_hash = ANY($2)"
                ),
                &[&model_id, &content_hashes],
            )
            .await
            .map_err(|e| vector_error(db_error(e)))?;
        let mut found = HashMap::with_capacity(rows.len());
        for row in rows {
            let hash: String = row.get(0);
            let vector = match self.vectors {
                VectorColumn::PgVector => parse_vector_text(&row.get::<_, String>(1)),
                VectorColumn::RealArray => Some(row.get::<_, Vec<f32>>(1)),
            };
            match vector {
                Some(vector) => {
                    found.insert(hash, vector);
                }
                None => tracing::warn!(model_id, hash, "cached vector unreadable: ignored"),
            }
        }
        Ok(found)
    }

    async fn put(&self, model_id: &str, vectors: &[StoredVector]) -> Result<(), SearchError> {
        let s = &self.schema;
        let mut client = self.client().await.map_err(vector_error)?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| vector_error(db_error(e)))?;
        let value = match self.vectors {
            VectorColumn::PgVector => "$4::text::vector",
            VectorColumn::RealArray => "$4::real[]",
        };
        let statement = tx
            .prepare(&format!(
                "INSERT INTO {s}.toolbelt_kb_vectors (model, content_hash, name, vector)
                 VALUES ($1, $2, $3, {value})
                 ON CONFLICT (model, content_hash)
                 DO UPDATE SET name = excluded.name, vector = excluded.vector"
            ))
            .await
            .map_err(|e| vector_error(db_error(e)))?;
        for stored in vectors {
            let result = match self.vectors {
                VectorColumn::PgVector => {
                    let text = vector_text(&stored.vector);
                    tx.execute(
                        &statement,
                        &[&model_id, &stored.content_hash, &stored.name, &text],
                    )
                    .await
                }
                VectorColumn::RealArray => {
                    tx.execute(
                        &statement,
                        &[
                            &model_id,
                            &stored.content_hash,
                            &stored.name,
                            &stored.vector,
                        ],
                    )
                    .await
                }
            };
            result.map_err(|e| vector_error(db_error(e)))?;
        }
        tx.commit().await.map_err(|e| vector_error(db_error(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_pgvectors_text_form() {
        let v = vec![1.0, -2.5, 0.125, 3e-8];
        assert_eq!(parse_vector_text(&vector_text(&v)), Some(v));
        assert_eq!(parse_vector_text("[]"), Some(Vec::new()));
        assert_eq!(parse_vector_text("1,2"), None);
        assert_eq!(parse_vector_text("[1,x]"), None);
    }

    #[test]
    fn schema_names_are_checked_before_they_reach_sql() {
        assert_eq!(quoted_schema("kb_1").unwrap(), "\"kb_1\"");
        for bad in [
            "",
            "1kb",
            "kb\"; DROP SCHEMA public; --",
            "kb-x",
            &"k".repeat(64),
        ] {
            assert!(quoted_schema(bad).is_err(), "{bad}");
        }
    }
}
