//! Searching in the database (`RETR_POSTGRES_SEARCH=database`): for tenants whose index does not
//! fit one machine's memory. Nothing is loaded; each call of the cascade is one SQL statement:
//!
//! - `knn`: the level's HNSW index (`ORDER BY embedding <=> query`, pgvector's iterative scan so
//!   that a filter still yields `k` rows), re-sorted by the one ordering rule of every ranker;
//! - `lexical`: BM25 over `retr_terms` with the in-memory engine's terms and formula, its IDF and
//!   average length read at query time from the tenant level's statistics (`retr_term_df`,
//!   `retr_level_stats`), so the weights are those a build over the same records computes. Each
//!   query term's postings are read weightiest first (`impact`, the weight without the IDF), at
//!   most `RETR_POSTGRES_LEXICAL_DEPTH` of them: the scores are the in-memory engine's exactly
//!   while no query term is held by more records of the level than that; past it, a record that
//!   holds a very common term only weakly is scored without that term (a term in most records
//!   weighs little: its IDF is near zero);
//! - `get`, `text_search`: plain filtered reads in id order (a doc's chunks for the window
//!   endpoint are a `get`).
//!
//! Fusion, boosts, routing, clarification and the cascade are the service's own, unchanged.
//!
//! Filters: the tenant and the level are always in the `WHERE`; the topic fields, ids and tags are
//! too. A Dify metadata condition is checked on the rows read (`RecordFilter::matches`), reading
//! more rows until `k` pass or the level is exhausted.
//!
//! The service holds it as its `VectorIndex` (that impl is in `index/source.rs`, beside the
//! `Source::Sql` a search reads it through).
//!
//! Servers: a search pins one server (`pin`): the primary, or when it does not answer, the first
//! standby that does; its answer then carries a `backend_stale` degradation naming the standby,
//! and `/health` says where searches read. A primary found down is asked again after a pause,
//! not on every call.

use super::store::{self, NamedPool};
use super::PostgresSettings;
use crate::index::lexical::Bm25Params;
use crate::index::{
    sort_scored, IndexError, IndexErrorKind, IndexStats, RecordFilter, RecordRef, ReplicaStatus, Result, ScoredRecord,
    TenantStats,
};
use crate::model::{Level, Record};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::types::ToSql;

/// A statement's parameter, owned.
type Param = Box<dyn ToSql + Sync + Send>;

/// Rows read at most per round while a condition filters them in the service.
const CONDITION_ROUND_MAX: i64 = 20_000;

/// A list restricted to at most this many pages reads their records directly (the lexical list
/// their terms by record, the dense list every record's distance) rather than through an index
/// over the whole level.
const FEW_PAGES: usize = 200;

/// How long a primary that did not answer is passed over before it is asked again.
const PRIMARY_RETRY_AFTER: Duration = Duration::from_secs(2);

/// What every view of one in-database index shares.
#[derive(Debug)]
struct Shared {
    /// The primary, then the standbys in order.
    servers: Vec<NamedPool>,
    scope: crate::scope::TenantScope,
    params: Bm25Params,
    /// Postings read per query term, the weightiest first (`RETR_POSTGRES_LEXICAL_DEPTH`).
    lexical_depth: usize,
    refresh_interval: Duration,
    state: Mutex<PollState>,
    /// The embedding column's dimension, once a write has set it (it never changes after).
    dimension: std::sync::OnceLock<usize>,
}

#[derive(Debug, Default)]
struct PollState {
    /// The highest version of the served tenants, at the last poll that reached a server.
    version: Option<u64>,
    /// When a server last answered a poll.
    confirmed: Option<Instant>,
    /// Why the last poll failed, while polls keep failing.
    error: Option<IndexError>,
    /// The server the last poll read from.
    source: Option<usize>,
    /// Until when the primary is passed over.
    primary_down_until: Option<Instant>,
    polls: u64,
}

/// A PostgreSQL index searched in place. `pin` gives a view that keeps every call of one search
/// on one server.
#[derive(Debug)]
pub struct PostgresSearchIndex {
    shared: Arc<Shared>,
    /// The server this view's calls read from, once its first call found one (`None` for the
    /// shared index itself, whose calls each choose).
    pinned: Option<Mutex<Option<usize>>>,
}

impl PostgresSearchIndex {
    /// An index over the configured servers; connects to none yet.
    pub fn new(settings: &PostgresSettings) -> Result<Arc<Self>> {
        let statement_timeout = Duration::from_secs_f64(settings.statement_timeout_seconds);
        let connect_timeout = Duration::from_secs_f64(settings.connect_timeout_seconds);
        let options =
            [("hnsw.ef_search", settings.ef_search.to_string()), ("hnsw.iterative_scan", "relaxed_order".into())];
        let mut servers = vec![store::pool_with(
            "primary",
            &settings.url,
            settings.pool_size,
            statement_timeout,
            connect_timeout,
            &options,
        )?];
        for (number, url) in settings.standby_urls.iter().enumerate() {
            servers.push(store::pool_with(
                &format!("standby {}", number + 1),
                url,
                settings.pool_size,
                statement_timeout,
                connect_timeout,
                &options,
            )?);
        }
        Ok(Arc::new(Self {
            shared: Arc::new(Shared {
                servers,
                scope: settings.scope.clone(),
                params: Bm25Params::default(),
                lexical_depth: settings.lexical_depth.max(1),
                refresh_interval: Duration::from_millis(settings.refresh_interval_ms.max(50)),
                state: Mutex::new(PollState::default()),
                dimension: std::sync::OnceLock::new(),
            }),
            pinned: None,
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PollState> {
        self.shared.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Polls the tenants' versions every `refresh_interval_ms` (first poll at once), for
    /// `min_index_version` and `/health`, until the index is dropped.
    pub fn spawn_refresher(self: &Arc<Self>) {
        crate::index::replica::spawn_poller(self, self.shared.refresh_interval, |index| async move {
            let _ = index.poll().await;
        });
    }

    /// Reads the served tenants' highest version from the first server that answers.
    pub async fn poll(&self) -> Result<()> {
        let only: Option<Vec<String>> = match &self.shared.scope {
            crate::scope::TenantScope::Only(tenants) => Some(tenants.iter().cloned().collect()),
            _ => None,
        };
        let result = self
            .query(
                "SELECT tenant, version FROM retr_tenants WHERE generation > 0 AND ($1::text[] IS NULL OR tenant = ANY($1))",
                vec![Box::new(only)],
            )
            .await;
        let mut state = self.state();
        state.polls += 1;
        match result {
            Ok((server, rows)) => {
                let version = rows
                    .iter()
                    .filter(|row| self.shared.scope.serves(row.get::<_, &str>(0)))
                    .map(|row| row.get::<_, i64>(1).max(0) as u64)
                    .max();
                // Never an older version than one already reported (read-your-writes).
                state.version = match (state.version, version) {
                    (Some(seen), Some(new)) => Some(seen.max(new)),
                    (seen, new) => new.or(seen),
                };
                state.confirmed = Some(Instant::now());
                state.error = None;
                state.source = Some(server);
                Ok(())
            }
            Err(error) => {
                state.error = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Runs `sql` on this view's server, or on the first that answers (the primary, then each
    /// standby), which a pinned view then keeps. Returns the server's number with the rows.
    async fn query(&self, sql: &str, params: Vec<Param>) -> Result<(usize, Vec<tokio_postgres::Row>)> {
        let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|param| param.as_ref() as _).collect();
        let remembered = self.pinned.as_ref().and_then(|slot| *slot.lock().unwrap_or_else(|p| p.into_inner()));
        let first = match remembered {
            Some(server) => server,
            None => {
                let state = self.state();
                let primary_down = state.primary_down_until.is_some_and(|until| Instant::now() < until);
                usize::from(primary_down && self.shared.servers.len() > 1)
            }
        };
        let mut failures: Vec<String> = Vec::new();
        for (number, server) in self.shared.servers.iter().enumerate().skip(first) {
            let outcome = match server.pool.get().await {
                Ok(client) => client.query(sql, &params).await.map_err(|error| store::db_error(&server.name, &error)),
                Err(error) => Err(store::pool_error(&server.name, error)),
            };
            match outcome {
                Ok(rows) => {
                    if let Some(slot) = &self.pinned {
                        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(number);
                    }
                    if number == 0 {
                        self.state().primary_down_until = None;
                    }
                    return Ok((number, rows));
                }
                // Another server may answer; a bad statement or a broken row would be the same there.
                Err(error) if error.kind == IndexErrorKind::Unavailable => {
                    if number == 0 {
                        self.state().primary_down_until = Some(Instant::now() + PRIMARY_RETRY_AFTER);
                    }
                    failures.push(error.message);
                }
                Err(error) => return Err(error),
            }
            if remembered.is_some() {
                // A search stays on the server it started on: its lists come from one place.
                break;
            }
        }
        Err(IndexError::new(IndexErrorKind::Unavailable, failures.join("; ")))
    }

    /// Rows of `sql` as ranked records: `RECORD_COLUMNS` then the score.
    async fn scored(&self, sql: &str, params: Vec<Param>) -> Result<Vec<ScoredRecord>> {
        let (_, rows) = self.query(sql, params).await?;
        rows.iter()
            .map(|row| {
                let (_, record) = store::record_from_row(row)?;
                let score: f64 = row
                    .try_get(15)
                    .map_err(|error| IndexError::new(IndexErrorKind::Corrupt, format!("postgres score: {error}")))?;
                Ok(ScoredRecord { record: RecordRef::own(Arc::new(record), None), score: score as f32 })
            })
            .collect()
    }

    /// Ranked records through `statement(limit)`, at least `k` of them passing `filter`'s
    /// condition when it has one (checked here; the rest of the filter is in the SQL).
    async fn ranked(
        &self,
        filter: &RecordFilter,
        k: usize,
        statement: impl Fn(i64) -> (String, Vec<Param>),
    ) -> Result<Vec<ScoredRecord>> {
        let k = i64::try_from(k.max(1)).unwrap_or(i64::MAX);
        if filter.condition.is_none() {
            let (sql, params) = statement(k);
            let mut results = self.scored(&sql, params).await?;
            sort_scored(&mut results);
            return Ok(results);
        }
        let mut limit = k.saturating_mul(4).min(CONDITION_ROUND_MAX).max(k);
        loop {
            let (sql, params) = statement(limit);
            let read = self.scored(&sql, params).await?;
            let exhausted = (read.len() as i64) < limit;
            let mut passed: Vec<ScoredRecord> =
                read.into_iter().filter(|scored| filter.matches(&scored.record.meta)).collect();
            if passed.len() as i64 >= k || exhausted || limit >= CONDITION_ROUND_MAX * 8 {
                sort_scored(&mut passed);
                passed.truncate(k as usize);
                return Ok(passed);
            }
            limit = limit.saturating_mul(4);
        }
    }

    /// Records in id order through `sql` (`RECORD_COLUMNS`), those passing `filter`'s condition.
    async fn records(&self, filter: &RecordFilter, sql: &str, params: Vec<Param>) -> Result<Vec<Arc<Record>>> {
        let (_, rows) = self.query(sql, params).await?;
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let (_, record) = store::record_from_row(row)?;
            if filter.condition.as_ref().is_none_or(|condition| condition.matches(&record.meta)) {
                records.push(Arc::new(record));
            }
        }
        Ok(records)
    }

    fn served(&self, tenant_id: &str) -> bool {
        self.shared.scope.serves(tenant_id)
    }
}

/// The `WHERE` of a level's records passing `filter` (all but its condition), its parameters
/// numbered from `$1` (the tenant) on.
fn where_clause(level: Level, filter: &RecordFilter, params: &mut Vec<Param>) -> String {
    params.push(Box::new(filter.tenant_id.clone()));
    // The level is a constant of this program, not a value from outside: a literal, so that the
    // planner can use the level's partial HNSW index.
    let mut clause = format!("r.tenant = $1 AND r.level = {}", store::level_number(level));
    let mut equal = |column: &str, value: &Option<String>, params: &mut Vec<Param>| {
        if let Some(value) = value {
            params.push(Box::new(value.clone()));
            clause.push_str(&format!(" AND r.{column} = ${}", params.len()));
        }
    };
    equal("product", &filter.product, params);
    equal("version", &filter.version, params);
    equal("domain", &filter.domain, params);
    equal("section", &filter.section, params);
    equal("platform", &filter.platform, params);
    equal("role", &filter.role, params);
    if let Some(doc_ids) = &filter.doc_ids {
        params.push(Box::new(doc_ids.clone()));
        clause.push_str(&format!(" AND r.doc_id = ANY(${})", params.len()));
    }
    if let Some(section_ids) = &filter.section_ids {
        params.push(Box::new(section_ids.clone()));
        clause.push_str(&format!(" AND r.section_id = ANY(${})", params.len()));
    }
    if !filter.tags.is_empty() {
        params.push(Box::new(serde_json::Value::from(filter.tags.clone())));
        clause.push_str(&format!(" AND r.meta->'tags' @> ${}", params.len()));
    }
    clause
}

/// Whether `filter` holds a list to a few pages (`FEW_PAGES`), read by record.
fn few_pages(filter: &RecordFilter) -> bool {
    filter.doc_ids.as_ref().is_some_and(|ids| ids.len() <= FEW_PAGES)
}

/// `limit` as a statement parameter (`usize::MAX`: no limit).
fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// The reads of the cascade, each one SQL statement (the module's comment says which), and
/// what `/health`, `/stats` and a search's degradations ask.
impl PostgresSearchIndex {
    pub fn backend_name(&self) -> &'static str {
        "postgres"
    }

    pub async fn knn(&self, level: Level, filter: &RecordFilter, query: &[f32], k: usize) -> Result<Vec<ScoredRecord>> {
        if !self.served(&filter.tenant_id) {
            return Ok(Vec::new());
        }
        let vector = pgvector::Vector::from(query.to_vec());
        let few_pages = few_pages(filter);
        self.ranked(filter, k, |limit| {
            let mut params: Vec<Param> = Vec::new();
            let clause = where_clause(level, filter, &mut params);
            params.push(Box::new(vector.clone()));
            let at = params.len();
            params.push(Box::new(limit));
            // A few pages' records (the cascade's sections and chunks of the chosen pages) are
            // scanned exactly, through the primary key's (tenant, doc_id): the HNSW index, walked
            // with such a filter, reads far more of the level and may still miss some of them.
            // `OFFSET 0` keeps the planner from ordering the filtered records by that index.
            let sql = if few_pages {
                format!(
                    "SELECT {columns}, 1 - r.distance FROM (SELECT r.*, r.embedding <=> ${at} AS distance \
                     FROM retr_records r WHERE {clause} OFFSET 0) AS r ORDER BY r.distance, r.id LIMIT ${limit}",
                    columns = store::RECORD_COLUMNS,
                    limit = at + 1,
                )
            } else {
                format!(
                    "SELECT {columns}, 1 - (r.embedding <=> ${at}) FROM retr_records r WHERE {clause} \
                     ORDER BY r.embedding <=> ${at} LIMIT ${limit}",
                    columns = store::RECORD_COLUMNS,
                    limit = at + 1,
                )
            };
            (sql, params)
        })
        .await
    }

    pub async fn lexical(
        &self,
        level: Level,
        filter: &RecordFilter,
        terms: &[String],
        k: usize,
    ) -> Result<Vec<ScoredRecord>> {
        if !self.served(&filter.tenant_id) || terms.is_empty() {
            return Ok(Vec::new());
        }
        let mut distinct: Vec<String> = terms.to_vec();
        distinct.sort();
        distinct.dedup();
        let (k1, b) = (f64::from(self.shared.params.k1), f64::from(self.shared.params.b));
        let few_pages = few_pages(filter);
        let number = store::level_number(level);
        let depth = self.shared.lexical_depth;
        self.ranked(filter, k, |limit| {
            let mut params: Vec<Param> = Vec::new();
            let clause = where_clause(level, filter, &mut params);
            // Every parameter after the tenant's is a field of the filter that narrows the level.
            let narrowed = params.len() > 1 || filter.condition.is_some();
            let first = params.len();
            params.push(Box::new(distinct.clone()));
            params.push(Box::new(k1));
            params.push(Box::new(b));
            params.push(Box::new(limit));
            let (terms, limit) = (first + 1, first + 4);
            let (k1, b) = (format!("${}::float8", first + 2), format!("${}::float8", first + 3));
            // The postings scored: a few pages' (the cascade's sections and chunks of the chosen
            // pages) read by record, every one of them, as the in-memory `score_among`; else each
            // query term's, weightiest first, at most `depth` of them.
            let postings = if few_pages {
                format!(
                    "FROM (SELECT r.rid FROM retr_records r WHERE {clause}) AS c \
                     JOIN retr_terms t ON t.tenant = $1 AND t.rid = c.rid JOIN q ON q.term = t.term, s"
                )
            } else {
                format!(
                    "FROM q CROSS JOIN LATERAL (SELECT p.rid, p.tf, p.dl FROM retr_terms p \
                     WHERE p.tenant = $1 AND p.level = {number} AND p.term = q.term \
                     ORDER BY p.impact DESC LIMIT {depth}) AS t, s"
                )
            };
            // The scores: the BM25 of `Bm25Index::weight`, with the IDF of `idf` over the tenant
            // level's records and its average length.
            let scored = format!(
                "WITH s AS (SELECT documents::float8 AS n, \
                   CASE WHEN documents > 0 THEN total_length::float8 / documents ELSE 0 END AS avgdl \
                   FROM retr_level_stats WHERE tenant = $1 AND level = {number}), \
                 q AS (SELECT f.term, ln(1 + (s.n - f.df + 0.5) / (f.df + 0.5)) AS idf \
                   FROM retr_term_df f, s WHERE f.tenant = $1 AND f.level = {number} AND f.term = ANY(${terms}) \
                   AND f.df > 0), \
                 scored AS (SELECT t.rid, sum(q.idf * t.tf * ({k1} + 1) / (t.tf + {k1} * (1 - {b} + {b} * \
                   CASE WHEN s.avgdl > 0 THEN t.dl / s.avgdl ELSE 1 END))) AS score {postings} GROUP BY t.rid)"
            );
            let columns = store::RECORD_COLUMNS;
            // Without a filter the best `limit` are chosen before their rows are read; with one,
            // every scored record's row is checked (the few pages' were chosen by it already).
            let sql = if few_pages || narrowed {
                let check = if few_pages { String::new() } else { format!(" WHERE {clause}") };
                format!(
                    "{scored} SELECT {columns}, scored.score FROM scored JOIN retr_records r \
                     ON r.tenant = $1 AND r.rid = scored.rid{check} ORDER BY scored.score DESC, r.id LIMIT ${limit}"
                )
            } else {
                format!(
                    "{scored}, best AS (SELECT rid, score FROM scored ORDER BY score DESC LIMIT ${limit}) \
                     SELECT {columns}, best.score FROM best JOIN retr_records r \
                     ON r.tenant = $1 AND r.rid = best.rid WHERE {clause}"
                )
            };
            (sql, params)
        })
        .await
    }

    pub async fn get(&self, level: Level, filter: &RecordFilter, limit: usize) -> Result<Vec<Arc<Record>>> {
        if !self.served(&filter.tenant_id) || limit == 0 {
            return Ok(Vec::new());
        }
        let mut params: Vec<Param> = Vec::new();
        let clause = where_clause(level, filter, &mut params);
        let read = if filter.condition.is_some() { usize::MAX } else { limit };
        params.push(Box::new(limit_param(read)));
        let sql = format!(
            "SELECT {} FROM retr_records r WHERE {clause} ORDER BY r.id LIMIT ${}",
            store::RECORD_COLUMNS,
            params.len()
        );
        let mut records = self.records(filter, &sql, params).await?;
        records.truncate(limit);
        Ok(records)
    }

    pub async fn text_search(
        &self,
        level: Level,
        filter: &RecordFilter,
        needles: &[String],
        limit: usize,
    ) -> Result<Vec<Arc<Record>>> {
        let needles: Vec<String> = needles.iter().filter(|needle| !needle.is_empty()).cloned().collect();
        if !self.served(&filter.tenant_id) || needles.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut params: Vec<Param> = Vec::new();
        let clause = where_clause(level, filter, &mut params);
        params.push(Box::new(needles));
        let at = params.len();
        let read = if filter.condition.is_some() { usize::MAX } else { limit };
        params.push(Box::new(limit_param(read)));
        let sql = format!(
            "SELECT {} FROM retr_records r WHERE {clause} \
             AND EXISTS (SELECT 1 FROM unnest(${at}::text[]) AS n(needle) WHERE strpos(r.text, n.needle) > 0) \
             ORDER BY r.id LIMIT ${}",
            store::RECORD_COLUMNS,
            at + 1
        );
        let mut records = self.records(filter, &sql, params).await?;
        records.truncate(limit);
        Ok(records)
    }

    pub async fn tenant_exists(&self, tenant_id: &str) -> Result<bool> {
        if !self.served(tenant_id) {
            return Ok(false);
        }
        let (_, rows) = self
            .query(
                "SELECT EXISTS (SELECT 1 FROM retr_records WHERE tenant = $1 AND level = 0)",
                vec![Box::new(tenant_id.to_string())],
            )
            .await
            .map_err(schema_missing_is_not_found)?;
        Ok(rows.first().is_some_and(|row| row.get(0)))
    }

    pub async fn dimension(&self) -> Result<Option<usize>> {
        if let Some(&dimension) = self.shared.dimension.get() {
            return Ok(Some(dimension));
        }
        let (_, rows) = self
            .query(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('retr_records') AND attname = 'embedding'",
                Vec::new(),
            )
            .await?;
        let dimension =
            rows.first().map(|row| row.get::<_, i32>(0)).filter(|&typmod| typmod > 0).map(|typmod| typmod as usize);
        if let Some(dimension) = dimension {
            let _ = self.shared.dimension.set(dimension);
        }
        Ok(dimension)
    }

    pub async fn stats(&self) -> Result<IndexStats> {
        let (_, rows) = self
            .query(
                "SELECT t.tenant, t.embedding_model, t.indexed_at, \
                   coalesce((SELECT documents FROM retr_level_stats s WHERE s.tenant = t.tenant AND s.level = 0), 0), \
                   coalesce((SELECT documents FROM retr_level_stats s WHERE s.tenant = t.tenant AND s.level = 1), 0), \
                   coalesce((SELECT documents FROM retr_level_stats s WHERE s.tenant = t.tenant AND s.level = 2), 0), \
                   ARRAY(SELECT DISTINCT r.meta->>'source' FROM retr_records r \
                         WHERE r.tenant = t.tenant AND r.level = 0 AND r.meta ? 'source' ORDER BY 1) \
                 FROM retr_tenants t WHERE t.generation > 0 ORDER BY t.tenant",
                Vec::new(),
            )
            .await
            .map_err(schema_missing_is_not_found)?;
        let mut stats = IndexStats { backend: "postgres".into(), ..IndexStats::default() };
        for row in rows.iter().filter(|row| self.served(row.get::<_, &str>(0))) {
            let count = |index: usize| usize::try_from(row.get::<_, i64>(index)).unwrap_or(0);
            let indexed_at: String = row.get(2);
            if indexed_at > stats.indexed_at {
                stats.indexed_at = indexed_at.clone();
                stats.embedding_model = row.get(1);
            }
            stats.tenants.insert(
                row.get(0),
                TenantStats {
                    docs: count(3),
                    sections: count(4),
                    chunks: count(5),
                    source_files: row.get(6),
                    indexed_at,
                },
            );
        }
        stats.dimension = self.dimension().await?.unwrap_or(0);
        Ok(stats)
    }

    pub async fn health(&self) -> Result<()> {
        let (_, rows) = self.query("SELECT to_regclass('retr_schema_version') IS NOT NULL", Vec::new()).await?;
        if rows.first().is_some_and(|row| row.get::<_, bool>(0)) {
            Ok(())
        } else {
            Err(IndexError::new(IndexErrorKind::NotFound, "the postgres schema does not exist yet — run ingest"))
        }
    }

    pub fn staleness(&self) -> Option<String> {
        let server = match &self.pinned {
            Some(slot) => (*slot.lock().unwrap_or_else(|p| p.into_inner()))?,
            None => {
                let state = self.state();
                if state.error.is_some() {
                    return Some("the postgres servers do not answer".into());
                }
                state.source?
            }
        };
        (server > 0).then(|| {
            format!("the postgres primary does not answer; searches read from the {}", self.shared.servers[server].name)
        })
    }

    pub fn replica_status(&self) -> Option<ReplicaStatus> {
        let state = self.state();
        Some(ReplicaStatus {
            age_seconds: state.confirmed.map(|at| at.elapsed().as_secs_f64()),
            last_refresh_error: state.error.as_ref().map(IndexError::public_message),
            last_load_seconds: None,
            records_loaded_total: 0,
            source: state.source.map(|server| self.shared.servers[server].name.clone()),
        })
    }

    pub fn version(&self) -> Option<u64> {
        self.state().version
    }

    /// A view whose calls all read from one server: the first that answers its first call.
    pub(crate) fn pinned_view(&self) -> Arc<Self> {
        Arc::new(Self { shared: Arc::clone(&self.shared), pinned: Some(Mutex::new(None)) })
    }
}

/// A database without the schema yet (nothing ingested): `NotFound`, as an empty snapshot is.
fn schema_missing_is_not_found(error: IndexError) -> IndexError {
    if error.kind == IndexErrorKind::Internal && error.message.contains("42P01") {
        IndexError::new(IndexErrorKind::NotFound, "the postgres schema does not exist yet — run ingest")
    } else {
        error
    }
}
