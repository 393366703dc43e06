//! `ingest --backend postgres`: replaces one source of one tenant in PostgreSQL with the same
//! ownership rule as the snapshot writer (`SourceScope::owns`), atomically per tenant:
//!
//! 1. the records of the new and changed pages are staged under their page hash
//!    (`retr_records`), which nothing serves yet (a page that did not change is not written);
//! 2. one transaction, holding the tenant's row lock, writes the tenant's next generation (its
//!    page list: the other sources' pages, this run's kept and new pages) and makes it current,
//!    with a new `version`;
//! 3. the previous generations' page lists and the records no current page names are deleted.
//!
//! A run that fails or is killed before step 2 commits leaves the previous generation served
//! (its staged rows are reused, or deleted, by the next run of the source). Readers read a
//! tenant's current generation in one snapshot, so a search sees it before or after, never half.

use super::writer::{page_hashes, IndexWriter, IngestBatch, SourceScope, WriteOutcome};
use super::IngestError;
use crate::index::postgres::store;
use crate::index::PostgresIndex;
use crate::model::{Level, Metadata, Record};
use async_trait::async_trait;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio_postgres::types::ToSql;

/// Records per multi-row `INSERT` (16 parameters each).
const ROWS_PER_INSERT: usize = 64;

/// `INSERT` statements in flight at once while staging (each on its own pooled connection).
const INSERTS_IN_FLIGHT: usize = 4;

pub struct PostgresSourceWriter {
    index: Arc<PostgresIndex>,
    location: String,
}

impl PostgresSourceWriter {
    /// Writes through `index` (build it with `PostgresIndex::for_ingest`); `location` is what the
    /// report prints: never the URL with its password (`index::postgres::describe_url`).
    pub fn new(index: Arc<PostgresIndex>, location: impl Into<String>) -> Self {
        Self { index, location: location.into() }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, IngestError> {
        let primary = self.index.primary();
        primary.pool.get().await.map_err(|error| pg_error(store::pool_error(&primary.name, error)))
    }
}

fn pg_error(error: crate::index::IndexError) -> IngestError {
    IngestError::Internal(error.message)
}

fn db(what: &str) -> impl Fn(tokio_postgres::Error) -> IngestError + '_ {
    move |error| pg_error(store::db_error(what, &error))
}

/// A page the next generation lists: doc id, page hash, source.
type PageRow = (String, String, String);

/// The nanoseconds since the epoch: the floor of the version a write produces.
fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[async_trait]
impl IndexWriter for PostgresSourceWriter {
    async fn stored_pages(&self, scope: &SourceScope) -> Result<BTreeMap<String, String>, IngestError> {
        let mut client = self.client().await?;
        store::migrate(&mut client).await.map_err(pg_error)?;
        let rows = client
            .query(
                "SELECT p.doc_id, p.page_hash FROM retr_pages p JOIN retr_tenants t \
                 ON t.tenant = p.tenant AND t.generation = p.generation \
                 WHERE p.tenant = $1 AND p.source = $2",
                &[&scope.tenant_id, &scope.source_name],
            )
            .await
            .map_err(db("stored pages"))?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    async fn replace_source(&self, scope: &SourceScope, batch: IngestBatch) -> Result<WriteOutcome, IngestError> {
        let (tenant, source) = (scope.tenant_id.as_str(), scope.source_name.as_str());
        let mut client = self.client().await?;
        store::migrate(&mut client).await.map_err(pg_error)?;
        let has_records = !(batch.records.docs.is_empty() && batch.records.chunks.is_empty());
        if has_records {
            match store::stored_dimension(&client).await.map_err(pg_error)? {
                Some(existing) if existing != batch.dimension => {
                    return Err(IngestError::DimensionMismatch { existing, new: batch.dimension })
                }
                Some(_) => {}
                None => store::fix_dimension(&mut client, batch.dimension).await.map_err(pg_error)?,
            }
        }
        let other_model = client
            .query_opt(
                "SELECT embedding_model FROM retr_tenants WHERE generation > 0 AND embedding_model <> '' \
                 AND embedding_model <> $1 LIMIT 1",
                &[&batch.embedding_model],
            )
            .await
            .map_err(db("model check"))?;
        if let Some(row) = other_model {
            return Err(IngestError::ModelMismatch { existing: row.get(0), new: batch.embedding_model });
        }
        let written = page_hashes(&batch.records, &batch.embedding_model);

        // 1. Stage the new and changed pages' records: nobody serves them yet.
        let IngestBatch { records, embedding_model, indexed_at, kept_pages, .. } = batch;
        let rows: Vec<(Level, Record)> = [(Level::Doc, records.docs), (Level::Section, records.sections)]
            .into_iter()
            .chain([(Level::Chunk, records.chunks)])
            .flat_map(|(level, records)| records.into_iter().map(move |record| (level, record)))
            .collect();
        drop(client);
        self.stage(tenant, rows, &written).await?;

        // 2. Switch: the next generation's page list, made current in one transaction.
        let mut client = self.client().await?;
        client
            .execute("INSERT INTO retr_tenants (tenant) VALUES ($1) ON CONFLICT (tenant) DO NOTHING", &[&tenant])
            .await
            .map_err(db("tenant row"))?;
        let transaction = client.transaction().await.map_err(db("switch"))?;
        let old: i64 = transaction
            .query_one("SELECT generation FROM retr_tenants WHERE tenant = $1 FOR UPDATE", &[&tenant])
            .await
            .map_err(db("switch"))?
            .get(0);
        let current: Vec<PageRow> = transaction
            .query(
                "SELECT doc_id, page_hash, source FROM retr_pages WHERE tenant = $1 AND generation = $2",
                &[&tenant, &old],
            )
            .await
            .map_err(db("switch"))?
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        let committed: BTreeMap<&str, &str> =
            current.iter().map(|(doc, hash, _)| (doc.as_str(), hash.as_str())).collect();
        if let Some((doc, _)) =
            kept_pages.iter().find(|(doc, hash)| committed.get(doc.as_str()) != Some(&hash.as_str()))
        {
            return Err(IngestError::Internal(format!(
                "page {doc:?} changed in postgres during this run (another ingest of the source?); run it again"
            )));
        }
        let mut pages: BTreeMap<String, String> = kept_pages;
        pages.extend(written.clone());
        let owned_before: BTreeSet<String> = current
            .iter()
            .filter(|(doc, _, page_source)| owns(scope, doc, page_source))
            .map(|(doc, _, _)| doc.clone())
            .collect();
        let removed_docs = owned_before.iter().filter(|doc| !pages.contains_key(*doc)).count();
        let mut next: Vec<PageRow> = current
            .iter()
            .filter(|(doc, _, page_source)| !owns(scope, doc, page_source) && !pages.contains_key(doc))
            .cloned()
            .collect();
        next.extend(pages.iter().map(|(doc, hash)| (doc.clone(), hash.clone(), source.to_string())));
        let stored: std::collections::HashSet<&PageRow> = current.iter().collect();
        let unchanged = next.len() == current.len() && next.iter().all(|page| stored.contains(page));
        if unchanged && old > 0 {
            // Nothing to switch: the tenant stays at its generation and version.
            let version: i64 = transaction
                .query_one("SELECT version FROM retr_tenants WHERE tenant = $1", &[&tenant])
                .await
                .map_err(db("switch"))?
                .get(0);
            transaction.rollback().await.map_err(db("switch"))?;
            return Ok(WriteOutcome {
                location: self.location.clone(),
                bytes: None,
                removed_docs: 0,
                version: u64::try_from(version).ok(),
            });
        }
        let generation = old + 1;
        let (docs, hashes, sources): (Vec<String>, Vec<String>, Vec<String>) =
            next.into_iter().fold((Vec::new(), Vec::new(), Vec::new()), |(mut d, mut h, mut s), (doc, hash, src)| {
                d.push(doc);
                h.push(hash);
                s.push(src);
                (d, h, s)
            });
        transaction
            .execute(
                "INSERT INTO retr_pages (tenant, generation, doc_id, page_hash, source) \
                 SELECT $1, $2, d, h, s FROM unnest($3::text[], $4::text[], $5::text[]) AS u(d, h, s)",
                &[&tenant, &generation, &docs, &hashes, &sources],
            )
            .await
            .map_err(db("switch"))?;
        let version: i64 = transaction
            .query_one(
                "UPDATE retr_tenants SET generation = $2, \
                 version = GREATEST($3, (SELECT coalesce(max(version), 0) + 1 FROM retr_tenants)), \
                 embedding_model = $4, indexed_at = $5, updated_at = now() WHERE tenant = $1 RETURNING version",
                &[&tenant, &generation, &now_nanos(), &embedding_model, &indexed_at],
            )
            .await
            .map_err(db("switch"))?
            .get(0);
        transaction.execute("SELECT pg_notify('retr_tenants', $1)", &[&tenant]).await.map_err(db("switch"))?;
        transaction.commit().await.map_err(db("switch"))?;

        // 3. Delete what the new generation no longer names. It is served already: a failure
        // here only leaves rows nobody serves, which the next run of the source deletes.
        let swept: Vec<String> = owned_before.into_iter().chain(pages.into_keys()).collect();
        let cleanup = async {
            client
                .execute("DELETE FROM retr_pages WHERE tenant = $1 AND generation < $2", &[&tenant, &generation])
                .await?;
            client
                .execute(
                    "DELETE FROM retr_records r WHERE r.tenant = $1 AND r.doc_id = ANY($3) AND NOT EXISTS \
                     (SELECT 1 FROM retr_pages p WHERE p.tenant = r.tenant AND p.generation = $2 \
                      AND p.doc_id = r.doc_id AND p.page_hash = r.page_hash)",
                    &[&tenant, &generation, &swept],
                )
                .await
        };
        if let Err(error) = cleanup.await {
            let error = store::db_error("cleanup", &error);
            tracing::warn!(%error, tenant_id = tenant, source, "superseded rows not deleted; the next ingest of the source deletes them");
        }
        Ok(WriteOutcome {
            location: self.location.clone(),
            bytes: None,
            removed_docs,
            version: u64::try_from(version).ok(),
        })
    }
}

/// Whether `scope` owns a stored page of `page_source` (the source that wrote it).
fn owns(scope: &SourceScope, doc: &str, page_source: &str) -> bool {
    let meta = Metadata {
        tenant_id: scope.tenant_id.as_str().into(),
        doc_id: doc.into(),
        source: page_source.into(),
        ..Metadata::default()
    };
    scope.owns(&meta)
}

impl PostgresSourceWriter {
    /// Inserts `rows` under their pages' hashes, `ROWS_PER_INSERT` to a statement and
    /// `INSERTS_IN_FLIGHT` statements at once; a row already staged (same page hash) is kept.
    async fn stage(
        &self,
        tenant: &str,
        rows: Vec<(Level, Record)>,
        hashes: &BTreeMap<String, String>,
    ) -> Result<(), IngestError> {
        let mut batches = Vec::new();
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let batch: Vec<(Level, Record)> = rows.by_ref().take(ROWS_PER_INSERT).collect();
            batches.push(batch);
        }
        let results: Vec<Result<(), IngestError>> = futures_util::stream::iter(batches)
            .map(|batch| async move {
                let client = self.client().await?;
                insert_batch(&client, tenant, batch, hashes).await
            })
            .buffer_unordered(INSERTS_IN_FLIGHT)
            .collect()
            .await;
        results.into_iter().collect()
    }
}

/// One record as the parameters of its row.
struct RecordRow {
    doc_id: String,
    page_hash: String,
    level: i16,
    id: String,
    section_id: Option<String>,
    topics: [String; 7],
    meta: serde_json::Value,
    text: String,
    embedding: pgvector::Vector,
}

async fn insert_batch(
    client: &tokio_postgres::Client,
    tenant: &str,
    batch: Vec<(Level, Record)>,
    hashes: &BTreeMap<String, String>,
) -> Result<(), IngestError> {
    let rows: Vec<RecordRow> = batch
        .into_iter()
        .map(|(level, record)| {
            let meta = &record.meta;
            RecordRow {
                doc_id: meta.doc_id.to_string(),
                page_hash: hashes.get(meta.doc_id.as_str()).cloned().unwrap_or_default(),
                level: store::level_number(level),
                id: record.id.clone(),
                section_id: meta.section_id.clone(),
                topics: [
                    meta.domain.to_string(),
                    meta.section.to_string(),
                    meta.platform.to_string(),
                    meta.role.to_string(),
                    meta.page_type.to_string(),
                    meta.product.to_string(),
                    meta.version.to_string(),
                ],
                meta: store::meta_json(meta),
                text: record.text.to_string(),
                embedding: pgvector::Vector::from(record.embedding),
            }
        })
        .collect();
    let mut statement = String::from(
        "INSERT INTO retr_records (tenant, doc_id, page_hash, level, id, section_id, domain, section, platform, \
         role, page_type, product, version, meta, text, embedding) VALUES ",
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(rows.len() * 16);
    let tenant = tenant.to_string();
    for (number, row) in rows.iter().enumerate() {
        let first = number * 16;
        let placeholders: Vec<String> = (1..=16).map(|column| format!("${}", first + column)).collect();
        statement.push_str(if number == 0 { "(" } else { ", (" });
        statement.push_str(&placeholders.join(", "));
        statement.push(')');
        params.extend([
            &tenant as &(dyn ToSql + Sync),
            &row.doc_id,
            &row.page_hash,
            &row.level,
            &row.id,
            &row.section_id,
        ]);
        params.extend(row.topics.iter().map(|topic| topic as &(dyn ToSql + Sync)));
        params.extend([&row.meta as &(dyn ToSql + Sync), &row.text, &row.embedding]);
    }
    statement.push_str(" ON CONFLICT (tenant, doc_id, page_hash, level, id) DO NOTHING");
    client.execute(statement.as_str(), &params).await.map_err(db("stage"))?;
    Ok(())
}
