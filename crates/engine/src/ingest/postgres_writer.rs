//! `ingest --backend postgres`: replaces one source of one tenant in PostgreSQL with the same
//! ownership rule as the snapshot writer (`SourceScope::owns`), atomically per tenant, in one
//! transaction that holds the tenant's row lock (runs of one tenant take turns):
//!
//! 1. the records of the new and changed pages are written under their page hash
//!    (`retr_records`; a page that did not change is neither embedded nor written), each with
//!    its BM25 terms (`retr_terms`), and what they add to the tenant's term statistics;
//! 2. the tenant's next generation (its page list: the other sources' pages, this run's kept and
//!    new pages) is written and made current, with a new `version`;
//! 3. the previous generations' page lists and the records no current page names are deleted,
//!    their terms with them and what they counted taken out of the statistics.
//!
//! Nothing is visible before the commit: a search (a replica's read, in one snapshot) sees the
//! tenant before or after, never half, and a run that fails or is killed (its connection closed,
//! or its future dropped: the transaction rolls back) leaves the previous generation served and
//! nothing of its own behind.

use super::writer::{page_hashes, IndexWriter, IngestBatch, SourceScope, WriteOutcome};
use super::IngestError;
use crate::index::postgres::store;
use crate::index::PostgresIndex;
use crate::model::{Level, Metadata, Record};
use async_trait::async_trait;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use tokio_postgres::types::ToSql;

/// Records per multi-row `INSERT` (17 parameters each).
const ROWS_PER_INSERT: usize = 64;

/// `INSERT` statements in flight at once (pipelined on the run's one connection).
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
        // A first write builds the HNSW indexes after its rows are in (one build over all of them,
        // not a graph insert per row); later writes keep the existing indexes up row by row.
        let build_hnsw = self.index.hnsw_index() && !store::has_hnsw_index(&client).await.map_err(pg_error)?;
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
        client
            .execute("INSERT INTO retr_tenants (tenant) VALUES ($1) ON CONFLICT (tenant) DO NOTHING", &[&tenant])
            .await
            .map_err(db("tenant row"))?;
        let transaction = client.transaction().await.map_err(db("write"))?;
        // The tenant's row lock: another run of the tenant waits here until this one commits.
        let old: i64 = transaction
            .query_one("SELECT generation FROM retr_tenants WHERE tenant = $1 FOR UPDATE", &[&tenant])
            .await
            .map_err(db("write"))?
            .get(0);
        let current: Vec<PageRow> = transaction
            .query(
                "SELECT doc_id, page_hash, source FROM retr_pages WHERE tenant = $1 AND generation = $2",
                &[&tenant, &old],
            )
            .await
            .map_err(db("write"))?
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        let committed: BTreeMap<&str, &str> =
            current.iter().map(|(doc, hash, _)| (doc.as_str(), hash.as_str())).collect();
        if let Some((doc, _)) =
            batch.kept_pages.iter().find(|(doc, hash)| committed.get(doc.as_str()) != Some(&hash.as_str()))
        {
            return Err(IngestError::Internal(format!(
                "page {doc:?} changed in postgres during this run (another ingest of the source?); run it again"
            )));
        }
        let mut pages: BTreeMap<String, String> = batch.kept_pages.clone();
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
                .map_err(db("write"))?
                .get(0);
            transaction.rollback().await.map_err(db("write"))?;
            return Ok(WriteOutcome {
                location: self.location.clone(),
                bytes: None,
                removed_docs: 0,
                version: u64::try_from(version).ok(),
            });
        }

        // 1. The new and changed pages' records (a page version already stored is kept).
        let IngestBatch { records, embedding_model, indexed_at, .. } = batch;
        let rows: Vec<(Level, Record)> = [(Level::Doc, records.docs), (Level::Section, records.sections)]
            .into_iter()
            .chain([(Level::Chunk, records.chunks)])
            .flat_map(|(level, records)| records.into_iter().map(move |record| (level, record)))
            .collect();
        let counts = write_records(&transaction, tenant, rows, &written).await?;
        counts.store(&transaction, tenant).await?;
        if build_hnsw {
            // The graph of a large tenant needs the memory to be built in one pass.
            transaction.batch_execute("SET LOCAL maintenance_work_mem = '1GB'").await.map_err(db("write"))?;
            store::ensure_hnsw_index(&transaction).await.map_err(pg_error)?;
        }

        // 2. The next generation, made current.
        let generation = old + 1;
        let next_pages: BTreeMap<String, String> =
            next.iter().map(|(doc, hash, _)| (doc.clone(), hash.clone())).collect();
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
            .map_err(db("write"))?;
        let version: i64 = transaction
            .query_one(
                "UPDATE retr_tenants SET generation = $2, \
                 version = GREATEST($3, (SELECT coalesce(max(version), 0) + 1 FROM retr_tenants)), \
                 embedding_model = $4, indexed_at = $5, updated_at = now() WHERE tenant = $1 RETURNING version",
                &[&tenant, &generation, &now_nanos(), &embedding_model, &indexed_at],
            )
            .await
            .map_err(db("write"))?
            .get(0);

        // 3. What the new generation no longer names: the older page lists, and the records of
        // the page versions it dropped (by key, so the cost is that of the change).
        transaction
            .execute("DELETE FROM retr_pages WHERE tenant = $1 AND generation <> $2", &[&tenant, &generation])
            .await
            .map_err(db("write"))?;
        let (dropped_docs, dropped_hashes): (Vec<String>, Vec<String>) = current
            .iter()
            .filter(|(doc, hash, _)| next_pages.get(doc) != Some(hash))
            .map(|(doc, hash, _)| (doc.clone(), hash.clone()))
            .unzip();
        drop_terms(&transaction, tenant, &dropped_docs, &dropped_hashes).await?;
        transaction
            .execute(
                "DELETE FROM retr_records r USING unnest($2::text[], $3::text[]) AS d(doc_id, page_hash) \
                 WHERE r.tenant = $1 AND r.doc_id = d.doc_id AND r.page_hash = d.page_hash",
                &[&tenant, &dropped_docs, &dropped_hashes],
            )
            .await
            .map_err(db("write"))?;
        transaction.execute("SELECT pg_notify('retr_tenants', $1)", &[&tenant]).await.map_err(db("write"))?;
        transaction.commit().await.map_err(db("commit"))?;
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

/// What the records written by one run add to their tenant's lexical statistics: per level and
/// term the records holding it, per level the records and their summed length in terms.
#[derive(Debug, Default)]
struct TermCounts {
    df: HashMap<(i16, String), i64>,
    levels: HashMap<i16, (i64, i64)>,
}

impl TermCounts {
    fn merge(&mut self, other: TermCounts) {
        for (key, count) in other.df {
            *self.df.entry(key).or_default() += count;
        }
        for (level, (records, length)) in other.levels {
            let entry = self.levels.entry(level).or_default();
            entry.0 += records;
            entry.1 += length;
        }
    }

    /// Adds these counts to the tenant's `retr_term_df` and `retr_level_stats`.
    async fn store(self, transaction: &deadpool_postgres::Transaction<'_>, tenant: &str) -> Result<(), IngestError> {
        let mut levels: Vec<i16> = Vec::with_capacity(self.df.len());
        let mut terms: Vec<String> = Vec::with_capacity(self.df.len());
        let mut counts: Vec<i64> = Vec::with_capacity(self.df.len());
        for ((level, term), count) in self.df {
            levels.push(level);
            terms.push(term);
            counts.push(count);
        }
        transaction
            .execute(
                "INSERT INTO retr_term_df (tenant, level, term, df) \
                 SELECT $1, l, t, c FROM unnest($2::int2[], $3::text[], $4::int8[]) AS u(l, t, c) \
                 ON CONFLICT (tenant, level, term) DO UPDATE SET df = retr_term_df.df + EXCLUDED.df",
                &[&tenant, &levels, &terms, &counts],
            )
            .await
            .map_err(db("term statistics"))?;
        let (levels, (records, lengths)): (Vec<i16>, (Vec<i64>, Vec<i64>)) = self.levels.into_iter().unzip();
        transaction
            .execute(
                "INSERT INTO retr_level_stats (tenant, level, documents, total_length) \
                 SELECT $1, l, n, s FROM unnest($2::int2[], $3::int8[], $4::int8[]) AS u(l, n, s) \
                 ON CONFLICT (tenant, level) DO UPDATE SET documents = retr_level_stats.documents + EXCLUDED.documents, \
                 total_length = retr_level_stats.total_length + EXCLUDED.total_length",
                &[&tenant, &levels, &records, &lengths],
            )
            .await
            .map_err(db("term statistics"))?;
        Ok(())
    }
}

/// Takes the records of the page versions `(docs, hashes)` out of the tenant's lexical side: their
/// terms, and what they counted in the document frequencies and level statistics. Records
/// written before the schema had terms (`terms_length` null) counted nothing.
async fn drop_terms(
    transaction: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    docs: &[String],
    hashes: &[String],
) -> Result<(), IngestError> {
    const GONE: &str = "SELECT r.rid, r.level, r.terms_length FROM retr_records r \
         JOIN unnest($2::text[], $3::text[]) AS d(doc_id, page_hash) \
         ON r.doc_id = d.doc_id AND r.page_hash = d.page_hash \
         WHERE r.tenant = $1 AND r.terms_length IS NOT NULL";
    let statements = [
        format!(
            "UPDATE retr_term_df f SET df = f.df - g.c FROM \
             (SELECT t.level, t.term, count(*) AS c FROM retr_terms t JOIN ({GONE}) AS gone \
              ON t.tenant = $1 AND t.rid = gone.rid GROUP BY t.level, t.term) AS g \
             WHERE f.tenant = $1 AND f.level = g.level AND f.term = g.term"
        ),
        format!(
            "UPDATE retr_level_stats s SET documents = s.documents - g.n, total_length = s.total_length - g.l FROM \
             (SELECT level, count(*) AS n, sum(terms_length) AS l FROM ({GONE}) AS gone GROUP BY level) AS g \
             WHERE s.tenant = $1 AND s.level = g.level"
        ),
        format!("DELETE FROM retr_terms t USING ({GONE}) AS gone WHERE t.tenant = $1 AND t.rid = gone.rid"),
        "DELETE FROM retr_term_df WHERE tenant = $1 AND df <= 0 AND $2::text[] IS NOT NULL AND $3::text[] IS NOT NULL"
            .to_string(),
    ];
    for statement in statements {
        transaction.execute(statement.as_str(), &[&tenant, &docs, &hashes]).await.map_err(db("write"))?;
    }
    Ok(())
}

/// Inserts `rows` under their pages' hashes in `transaction`, `ROWS_PER_INSERT` to a statement
/// and `INSERTS_IN_FLIGHT` statements pipelined at once on its connection, each record with its
/// terms (`retr_terms`); a row of a page version already stored is kept, and so are its terms.
/// Returns what the rows written add to the tenant's lexical statistics.
async fn write_records(
    transaction: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    rows: Vec<(Level, Record)>,
    hashes: &BTreeMap<String, String>,
) -> Result<TermCounts, IngestError> {
    // Each level's average length in terms over the records written: the `impact` of a posting
    // (its BM25 weight without the IDF) is computed with it. It only orders a term's postings;
    // scores are computed at query time with the tenant's own average.
    let mut lengths = [(0u64, 0u64); 3];
    for (level, record) in &rows {
        let slot = &mut lengths[store::level_number(*level) as usize];
        slot.0 += 1;
        slot.1 += crate::index::lexical::lexical_terms(record).len() as u64;
    }
    let averages = lengths.map(|(records, total)| if records == 0 { 0.0 } else { total as f64 / records as f64 });
    let mut batches = Vec::new();
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let batch: Vec<(Level, Record)> = rows.by_ref().take(ROWS_PER_INSERT).collect();
        batches.push(batch);
    }
    let results: Vec<Result<TermCounts, IngestError>> = futures_util::stream::iter(batches)
        .map(|batch| insert_batch(transaction, tenant, batch, hashes, &averages))
        .buffer_unordered(INSERTS_IN_FLIGHT)
        .collect()
        .await;
    let mut counts = TermCounts::default();
    for result in results {
        counts.merge(result?);
    }
    Ok(counts)
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
    /// The record's BM25 terms (the in-memory index's, `lexical_terms`) with their counts.
    terms: HashMap<String, i32>,
    terms_length: i32,
}

async fn insert_batch(
    client: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    batch: Vec<(Level, Record)>,
    hashes: &BTreeMap<String, String>,
    averages: &[f64; 3],
) -> Result<TermCounts, IngestError> {
    let rows: Vec<RecordRow> = batch
        .into_iter()
        .map(|(level, record)| {
            let meta = &record.meta;
            let all_terms = crate::index::lexical::lexical_terms(&record);
            let terms_length = i32::try_from(all_terms.len()).unwrap_or(i32::MAX);
            let mut terms: HashMap<String, i32> = HashMap::new();
            for term in all_terms {
                *terms.entry(term).or_default() += 1;
            }
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
                terms,
                terms_length,
            }
        })
        .collect();
    const COLUMNS: usize = 17;
    let mut statement = String::from(
        "INSERT INTO retr_records (tenant, doc_id, page_hash, level, id, section_id, domain, section, platform, \
         role, page_type, product, version, meta, text, embedding, terms_length) VALUES ",
    );
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(rows.len() * COLUMNS);
    let tenant = tenant.to_string();
    for (number, row) in rows.iter().enumerate() {
        let first = number * COLUMNS;
        let placeholders: Vec<String> = (1..=COLUMNS).map(|column| format!("${}", first + column)).collect();
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
        params.extend([&row.meta as &(dyn ToSql + Sync), &row.text, &row.embedding, &row.terms_length]);
    }
    statement
        .push_str(" ON CONFLICT (tenant, doc_id, page_hash, level, id) DO NOTHING RETURNING doc_id, level, id, rid");
    let inserted = client.query(statement.as_str(), &params).await.map_err(db("write"))?;
    let rids: HashMap<(String, i16, String), i64> =
        inserted.iter().map(|row| ((row.get(0), row.get(1), row.get(2)), row.get(3))).collect();

    // The inserted records' terms, one row per record and term.
    let mut counts = TermCounts::default();
    let (mut levels, mut terms, mut numbers, mut tfs, mut lengths, mut impacts) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::<f32>::new());
    let params = crate::index::lexical::Bm25Params::default();
    for row in rows {
        let Some(&rid) = rids.get(&(row.doc_id, row.level, row.id)) else { continue };
        let level_counts = counts.levels.entry(row.level).or_default();
        level_counts.0 += 1;
        level_counts.1 += i64::from(row.terms_length);
        let average = averages[row.level as usize];
        let norm = if average > 0.0 { f64::from(row.terms_length) / average } else { 1.0 };
        let (k1, b) = (f64::from(params.k1), f64::from(params.b));
        for (term, tf) in row.terms {
            *counts.df.entry((row.level, term.clone())).or_default() += 1;
            let tf_f = f64::from(tf);
            impacts.push((tf_f * (k1 + 1.0) / (tf_f + k1 * (1.0 - b + b * norm))) as f32);
            levels.push(row.level);
            terms.push(term);
            numbers.push(rid);
            tfs.push(tf);
            lengths.push(row.terms_length);
        }
    }
    if !terms.is_empty() {
        client
            .execute(
                "INSERT INTO retr_terms (tenant, level, term, rid, tf, dl, impact) \
                 SELECT $1, l, t, r, f, d, i FROM unnest($2::int2[], $3::text[], $4::int8[], $5::int4[], \
                 $6::int4[], $7::float4[]) AS u(l, t, r, f, d, i)",
                &[&tenant, &levels, &terms, &numbers, &tfs, &lengths, &impacts],
            )
            .await
            .map_err(db("write terms"))?;
    }
    Ok(counts)
}
