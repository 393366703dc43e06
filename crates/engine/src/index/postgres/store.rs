//! The PostgreSQL side of the backend: connection pools (a primary and read-only standbys), the
//! versioned schema, and the conversion of records to rows and back. Every statement takes its
//! values as parameters; no value is ever formatted into SQL text.
//!
//! Schema (version 1, `retr_schema_version`):
//! - `retr_tenants`: one row per tenant: its current `generation`, the `version` readers compare
//!   with `min_index_version`, the embedding model and indexing date of its last ingest;
//! - `retr_pages`: the pages (docs) of each generation of a tenant: doc id, content hash (the
//!   page hash of `ingest::writer::page_hashes`) and the source that wrote it. A generation is
//!   only a page list: what a tenant serves is the records of its current generation's pages;
//! - `retr_records`: every record of every stored page version, keyed by tenant, doc id, page
//!   hash, level and id: the topic fields as indexed columns, the rest of the metadata as
//!   `jsonb`, the text and the vector (pgvector `vector(dim)`, the dimension fixed by the first
//!   write; an HNSW index when `RETR_POSTGRES_HNSW_INDEX` asks for it).

use crate::index::{IndexError, IndexErrorKind, Result};
use crate::model::{Level, Metadata, Record};
use crate::secret::Secret;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::time::Duration;
use tokio_postgres::NoTls;

/// The schema version this build creates and reads.
pub(crate) const SCHEMA_VERSION: i32 = 1;

/// An advisory lock key (any constant) that serializes schema changes between processes.
const SCHEMA_LOCK: i64 = 0x7265_7472_5f73_6368;

/// The migrations, in order: migration `n` brings the schema from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[r#"
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE retr_tenants (
    tenant text PRIMARY KEY,
    generation bigint NOT NULL DEFAULT 0,
    version bigint NOT NULL DEFAULT 0,
    embedding_model text NOT NULL DEFAULT '',
    indexed_at text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE retr_pages (
    tenant text NOT NULL,
    generation bigint NOT NULL,
    doc_id text NOT NULL,
    page_hash text NOT NULL,
    source text NOT NULL,
    PRIMARY KEY (tenant, generation, doc_id)
);
CREATE INDEX retr_pages_source ON retr_pages (tenant, source);
CREATE TABLE retr_records (
    tenant text NOT NULL,
    doc_id text NOT NULL,
    page_hash text NOT NULL,
    level smallint NOT NULL,
    id text NOT NULL,
    section_id text,
    domain text NOT NULL,
    section text NOT NULL,
    platform text NOT NULL,
    role text NOT NULL,
    page_type text NOT NULL,
    product text NOT NULL,
    version text NOT NULL,
    meta jsonb NOT NULL,
    text text NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (tenant, doc_id, page_hash, level, id)
);
CREATE INDEX retr_records_product ON retr_records (tenant, level, product, version);
CREATE INDEX retr_records_topic ON retr_records (tenant, level, domain, section);
CREATE INDEX retr_records_audience ON retr_records (tenant, level, platform, role, page_type);
"#];

/// The metadata fields stored as columns of their own (the rest is the `meta` jsonb).
const COLUMN_FIELDS: [&str; 10] =
    ["tenant_id", "doc_id", "section_id", "domain", "section", "platform", "role", "page_type", "product", "version"];

/// The columns `record_from_row` reads, in its order.
pub(crate) const RECORD_COLUMNS: &str = "r.tenant, r.doc_id, r.level, r.id, r.section_id, r.domain, r.section, \
     r.platform, r.role, r.page_type, r.product, r.version, r.meta, r.text, r.embedding";

/// Where a pool connects, without the URL (which holds the password): `primary` or `standby N`.
#[derive(Debug, Clone)]
pub(crate) struct NamedPool {
    pub(crate) name: String,
    pub(crate) pool: Pool,
}

/// A pool of at most `size` connections to `url`, each statement bounded by `statement_timeout`.
/// The error never contains the URL.
pub(crate) fn pool(
    name: &str,
    url: &Secret,
    size: usize,
    statement_timeout: Duration,
    connect_timeout: Duration,
) -> Result<NamedPool> {
    if url.is_empty() {
        return Err(IndexError::new(IndexErrorKind::BadRequest, format!("no postgres {name} URL is set")));
    }
    let mut config: tokio_postgres::Config = url.expose().parse().map_err(|_| {
        IndexError::new(
            IndexErrorKind::BadRequest,
            format!(
                "the postgres {name} URL is not a valid connection URL (postgres://user:password@host:port/database)"
            ),
        )
    })?;
    // Notices (`… already exists, skipping`) are not worth a log line.
    config.options(format!(
        "-c statement_timeout={} -c client_min_messages=warning",
        statement_timeout.as_millis().max(1)
    ));
    config.connect_timeout(connect_timeout);
    config.application_name("retrieval-service");
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    let pool = Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(statement_timeout + connect_timeout))
        .create_timeout(Some(connect_timeout))
        .recycle_timeout(Some(connect_timeout))
        .build()
        .map_err(|error| IndexError::new(IndexErrorKind::Internal, format!("postgres {name} pool: {error}")))?;
    Ok(NamedPool { name: name.to_string(), pool })
}

/// A database error as an index error, naming `what` was done; never the URL. Connection
/// failures, pool timeouts and cancelled statements are `Unavailable` (the caller may read
/// elsewhere); the rest is `Internal`.
pub(crate) fn db_error(what: &str, error: &tokio_postgres::Error) -> IndexError {
    let unavailable = error.is_closed()
        || error.code().is_none()
        || error.code().is_some_and(|code| {
            [
                &tokio_postgres::error::SqlState::QUERY_CANCELED,
                &tokio_postgres::error::SqlState::ADMIN_SHUTDOWN,
                &tokio_postgres::error::SqlState::CANNOT_CONNECT_NOW,
                &tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE,
            ]
            .contains(&code)
        });
    let kind = if unavailable { IndexErrorKind::Unavailable } else { IndexErrorKind::Internal };
    let detail = match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        // The cause (a refused connection, a timeout) is an I/O error: no URL in it.
        None => match std::error::Error::source(error) {
            Some(cause) => format!("{error}: {cause}"),
            None => error.to_string(),
        },
    };
    IndexError::new(kind, format!("postgres {what}: {detail}"))
}

pub(crate) fn pool_error(name: &str, error: deadpool_postgres::PoolError) -> IndexError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => db_error(&format!("{name} connection"), &error),
        other => IndexError::new(IndexErrorKind::Unavailable, format!("postgres {name}: {other}")),
    }
}

/// Creates or migrates the schema to `SCHEMA_VERSION` (on the primary), one process at a time.
/// A schema newer than this build is refused.
pub(crate) async fn migrate(client: &mut deadpool_postgres::Client) -> Result<()> {
    let transaction = client.transaction().await.map_err(|e| db_error("schema", &e))?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(|e| db_error("schema", &e))?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS retr_schema_version \
             (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .map_err(|e| db_error("schema", &e))?;
    let row = transaction
        .query_one("SELECT coalesce(max(version), 0) FROM retr_schema_version", &[])
        .await
        .map_err(|e| db_error("schema", &e))?;
    let current: i32 = row.get(0);
    if current > SCHEMA_VERSION {
        return Err(newer_schema(current));
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        transaction.batch_execute(migration).await.map_err(|e| db_error("schema migration", &e))?;
        let version = from as i32 + 1;
        transaction
            .execute("INSERT INTO retr_schema_version (version) VALUES ($1)", &[&version])
            .await
            .map_err(|e| db_error("schema", &e))?;
        tracing::info!(version, "postgres schema migrated");
    }
    transaction.commit().await.map_err(|e| db_error("schema", &e))
}

fn newer_schema(version: i32) -> IndexError {
    IndexError::new(
        IndexErrorKind::Internal,
        format!("the postgres schema is at version {version}, newer than this build reads ({SCHEMA_VERSION}); upgrade the service"),
    )
}

/// The schema version a reader finds: `NotFound` before the first ingest created it.
pub(crate) async fn check_schema(client: &impl deadpool_postgres::GenericClient) -> Result<()> {
    let row = client
        .query_one("SELECT to_regclass('retr_schema_version') IS NOT NULL", &[])
        .await
        .map_err(|e| db_error("schema", &e))?;
    if !row.get::<_, bool>(0) {
        return Err(IndexError::new(IndexErrorKind::NotFound, "the postgres schema does not exist yet — run ingest"));
    }
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM retr_schema_version", &[])
        .await
        .map_err(|e| db_error("schema", &e))?;
    let version: i32 = row.get(0);
    match version {
        0 => Err(IndexError::new(IndexErrorKind::NotFound, "the postgres schema does not exist yet — run ingest")),
        v if v > SCHEMA_VERSION => Err(newer_schema(v)),
        _ => Ok(()),
    }
}

/// The dimension the vector column holds (`None` before the first write fixed it).
pub(crate) async fn stored_dimension(client: &impl deadpool_postgres::GenericClient) -> Result<Option<usize>> {
    let row = client
        .query_one(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'retr_records'::regclass AND attname = 'embedding'",
            &[],
        )
        .await
        .map_err(|e| db_error("schema", &e))?;
    let typmod: i32 = row.get(0);
    Ok((typmod > 0).then_some(typmod as usize))
}

/// Fixes the vector column to `dimension`, once (the first write).
pub(crate) async fn fix_dimension(client: &mut deadpool_postgres::Client, dimension: usize) -> Result<()> {
    let transaction = client.transaction().await.map_err(|e| db_error("schema", &e))?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(|e| db_error("schema", &e))?;
    if stored_dimension(&transaction).await?.is_none() {
        // A type modifier cannot be a parameter: `dimension` is a number this process computed.
        let dimension = u32::try_from(dimension).ok().filter(|&d| (1..=16_000).contains(&d)).ok_or_else(|| {
            IndexError::new(IndexErrorKind::BadRequest, format!("vector dimension {dimension} out of range"))
        })?;
        transaction
            .batch_execute(&format!("ALTER TABLE retr_records ALTER COLUMN embedding TYPE vector({dimension})"))
            .await
            .map_err(|e| db_error("schema", &e))?;
    }
    transaction.commit().await.map_err(|e| db_error("schema", &e))
}

/// Builds the HNSW index of the vectors (cosine) when it is not there (`RETR_POSTGRES_HNSW_INDEX`):
/// over the rows already stored, then kept up by every insert.
pub(crate) async fn ensure_hnsw_index(client: &deadpool_postgres::Client) -> Result<()> {
    client
        .batch_execute(
            "CREATE INDEX IF NOT EXISTS retr_records_embedding ON retr_records USING hnsw (embedding vector_cosine_ops)",
        )
        .await
        .map_err(|e| db_error("schema", &e))
}

pub(crate) fn level_number(level: Level) -> i16 {
    match level {
        Level::Doc => 0,
        Level::Section => 1,
        Level::Chunk => 2,
    }
}

pub(crate) fn level_of(number: i16) -> Option<Level> {
    match number {
        0 => Some(Level::Doc),
        1 => Some(Level::Section),
        2 => Some(Level::Chunk),
        _ => None,
    }
}

/// The `meta` jsonb of a record: its metadata without the fields stored as columns.
pub(crate) fn meta_json(meta: &Metadata) -> serde_json::Value {
    let mut value = serde_json::to_value(meta).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        for field in COLUMN_FIELDS {
            object.remove(field);
        }
    }
    value
}

/// A record read back from a row of `RECORD_COLUMNS`, with its level.
pub(crate) fn record_from_row(row: &tokio_postgres::Row) -> Result<(Level, Record)> {
    let corrupt = |what: String| IndexError::new(IndexErrorKind::Corrupt, format!("postgres record: {what}"));
    let get_text = |index: usize| -> Result<String> {
        row.try_get::<_, String>(index).map_err(|error| corrupt(format!("column {index}: {error}")))
    };
    let level_number: i16 = row.try_get(2).map_err(|error| corrupt(error.to_string()))?;
    let level = level_of(level_number).ok_or_else(|| corrupt(format!("unknown level {level_number}")))?;
    let mut meta: serde_json::Value = row.try_get(12).map_err(|error| corrupt(error.to_string()))?;
    let object = meta.as_object_mut().ok_or_else(|| corrupt("meta is not an object".into()))?;
    for (index, field) in [(0, "tenant_id"), (1, "doc_id"), (5, "domain"), (6, "section"), (7, "platform")]
        .into_iter()
        .chain([(8, "role"), (9, "page_type"), (10, "product"), (11, "version")])
    {
        object.insert(field.to_string(), serde_json::Value::String(get_text(index)?));
    }
    let section_id: Option<String> = row.try_get(4).map_err(|error| corrupt(error.to_string()))?;
    if let Some(section_id) = section_id {
        object.insert("section_id".into(), serde_json::Value::String(section_id));
    }
    let meta: Metadata = serde_json::from_value(meta).map_err(|error| corrupt(error.to_string()))?;
    let embedding: pgvector::Vector = row.try_get(14).map_err(|error| corrupt(error.to_string()))?;
    let record = Record { id: get_text(3)?, meta, text: get_text(13)?.into(), embedding: embedding.to_vec() };
    Ok((level, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_json_leaves_out_the_column_fields_and_keeps_the_rest() {
        let meta = Metadata {
            tenant_id: "t".into(),
            doc_id: "d".into(),
            section_id: Some("d#s".into()),
            title: "Заголовок".into(),
            product: "p".into(),
            tags: vec!["faq".into()],
            ..Metadata::default()
        };
        let json = meta_json(&meta);
        for field in COLUMN_FIELDS {
            assert!(json.get(field).is_none(), "{field} is a column");
        }
        assert_eq!(json["title"], "Заголовок");
        assert_eq!(json["tags"][0], "faq");
    }
}
