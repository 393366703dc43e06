//! The PostgreSQL backend (pgvector). PostgreSQL is the store of record (`store` has the schema);
//! searches run on an in-process replica of the tenants this instance serves (a `LoadedIndex`,
//! the in-memory backend's exact engine), so every answer is identical to the in-memory
//! backend's and a search costs no database round trip.
//!
//! Loading: only the served tenants' rows are read (`RETR_TENANTS` as a `WHERE` on the tenant),
//! each tenant at its current generation, inside one read-only repeatable-read transaction, so a
//! load sees every tenant as one committed ingest left it, never half of an ingest.
//!
//! Freshness: the refresher polls `retr_tenants` every `refresh_interval_ms` (one small query).
//! A tenant whose generation moved has its page list read again; only the pages whose content
//! hash changed (and the pages removed) are read and swapped into the replica.
//!
//! Faults: when the primary does not answer, the poll reads from the standbys (`standby_urls`,
//! in order); the replica then says where it reads from (`ReplicaStatus::source`) and every
//! answer carries a `backend_stale` degradation naming it. When no server answers, searches keep
//! answering from the last good replica, flagged stale; without one they fail with `Unavailable`.

mod in_database;
pub(crate) mod store;

pub use in_database::PostgresSearchIndex;

use super::change::ChangeScope;
use super::memory::{IndexBuilder, LoadedIndex};
use super::replica::{Replica, SnapshotSource};
use super::{IndexError, IndexErrorKind, Result};
use crate::model::{Level, Record};
use crate::secret::Secret;
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::NamedPool;

/// What the PostgreSQL backend takes from the configuration (`RETR_POSTGRES_*`,
/// `RETR_INDEX_RELOAD_INTERVAL_MS`, `RETR_TENANTS`).
#[derive(Debug, Clone)]
pub struct PostgresSettings {
    /// The primary's connection URL (a secret: it holds the password).
    pub url: Secret,
    /// Read-only standbys, tried in order when the primary does not answer.
    pub standby_urls: Vec<Secret>,
    /// Connections per server at most.
    pub pool_size: usize,
    /// Each statement's bound while serving (`statement_timeout`).
    pub statement_timeout_seconds: f64,
    /// Each statement's bound in `ingest`.
    pub ingest_statement_timeout_seconds: f64,
    /// How long a connection may take to open.
    pub connect_timeout_seconds: f64,
    /// How often the refresher polls the tenants' versions.
    pub refresh_interval_ms: u64,
    /// Whether `ingest` builds (and keeps up) an HNSW index of the vectors. Searches run on the
    /// replica and never use it; it makes writes ~12× slower.
    pub hnsw_index: bool,
    /// The tenants the replica holds.
    pub scope: crate::scope::TenantScope,
    /// Where searches run: on the in-process replica, or in the database.
    pub search: PostgresSearchMode,
    /// The HNSW candidate list of a search in the database (`hnsw.ef_search`): larger finds
    /// more of the exact neighbours, slower.
    pub ef_search: usize,
    /// Postings read per query term by a search in the database, the weightiest first.
    pub lexical_depth: usize,
}

/// Where the PostgreSQL backend's searches run (`RETR_POSTGRES_SEARCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PostgresSearchMode {
    /// Each instance loads its tenants into the in-memory engine and refreshes them.
    #[default]
    Replica,
    /// Each call of the cascade is a statement on the database (`PostgresSearchIndex`): for
    /// tenants larger than one machine's memory.
    Database,
}

/// Whether `url` is a `postgres://` (or `postgresql://`) connection URL this backend can use.
pub fn is_valid_url(url: &str) -> bool {
    (url.starts_with("postgres://") || url.starts_with("postgresql://"))
        && url.parse::<tokio_postgres::Config>().is_ok()
}

/// Where `url` points, without the user or password: `postgres://host:port/database` (what logs
/// and reports print).
pub fn describe_url(url: &Secret) -> String {
    let Ok(config) = url.expose().parse::<tokio_postgres::Config>() else {
        return "postgres (an invalid URL)".into();
    };
    let host = config
        .get_hosts()
        .first()
        .map(|host| match host {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("postgres://{host}:{port}/{}", config.get_dbname().unwrap_or_default())
}

/// What the replica knows of one served tenant: the generation it holds and its pages.
#[derive(Debug, Clone, Default)]
struct TenantState {
    generation: i64,
    /// Doc id → page hash.
    pages: HashMap<String, String>,
}

/// One row of `retr_tenants`.
#[derive(Debug, Clone)]
struct TenantRow {
    tenant: String,
    generation: i64,
    version: i64,
    embedding_model: String,
    indexed_at: String,
}

/// The PostgreSQL-backed index: see the module documentation.
#[derive(Debug)]
pub struct PostgresIndex {
    primary: NamedPool,
    standbys: Vec<NamedPool>,
    replica: Replica,
    sync: Mutex<BTreeMap<String, TenantState>>,
    reload: tokio::sync::Mutex<()>,
    refresh_interval: Duration,
    scope: crate::scope::TenantScope,
    hnsw_index: bool,
}

impl PostgresIndex {
    /// An index over the configured servers; connects to none yet (the database may be down at
    /// start-up). An unusable URL is refused here, without repeating it.
    pub fn new(settings: &PostgresSettings) -> Result<Arc<Self>> {
        Self::with_timeout(settings, settings.statement_timeout_seconds)
    }

    /// The index `ingest` writes through: each statement has the batch job's own bound.
    pub fn for_ingest(settings: &PostgresSettings) -> Result<Arc<Self>> {
        let settings = PostgresSettings { standby_urls: Vec::new(), ..settings.clone() };
        Self::with_timeout(&settings, settings.ingest_statement_timeout_seconds)
    }

    fn with_timeout(settings: &PostgresSettings, statement_timeout_seconds: f64) -> Result<Arc<Self>> {
        let statement_timeout = Duration::from_secs_f64(statement_timeout_seconds);
        let connect_timeout = Duration::from_secs_f64(settings.connect_timeout_seconds);
        let primary = store::pool("primary", &settings.url, settings.pool_size, statement_timeout, connect_timeout)?;
        let standbys = settings
            .standby_urls
            .iter()
            .enumerate()
            .map(|(number, url)| {
                store::pool(
                    &format!("standby {}", number + 1),
                    url,
                    settings.pool_size,
                    statement_timeout,
                    connect_timeout,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Self {
            primary,
            standbys,
            replica: Replica::refreshed(),
            sync: Mutex::new(BTreeMap::new()),
            reload: tokio::sync::Mutex::new(()),
            refresh_interval: Duration::from_millis(settings.refresh_interval_ms),
            scope: settings.scope.clone(),
            hnsw_index: settings.hnsw_index || settings.search == PostgresSearchMode::Database,
        }))
    }

    /// Whether writes build and keep an HNSW index of the vectors.
    pub(crate) fn hnsw_index(&self) -> bool {
        self.hnsw_index
    }

    /// The primary's pool (writes).
    pub(crate) fn primary(&self) -> &NamedPool {
        &self.primary
    }

    /// Polls the tenants every `refresh_interval_ms` (first poll at once) and refreshes the
    /// replica when they changed, until the index is dropped.
    pub fn spawn_refresher(self: &Arc<Self>) {
        super::replica::spawn_refresher(self, self.refresh_interval);
    }

    fn sync(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, TenantState>> {
        self.sync.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Polls the servers (the primary, else each standby in turn) and brings the replica up to
    /// date. Returns whether a new replica was installed; a failure is what searches and
    /// `health` report until the next refresh.
    pub async fn refresh(&self) -> Result<bool> {
        let _guard = self.reload.lock().await;
        let mut failures: Vec<IndexError> = Vec::new();
        for pool in std::iter::once(&self.primary).chain(&self.standbys) {
            match self.refresh_from(pool).await {
                Ok(changed) => {
                    self.note_source(pool, &failures);
                    return Ok(changed);
                }
                // Another server may answer; a missing schema or a broken row would be the same there.
                Err(error) if error.kind == IndexErrorKind::Unavailable => failures.push(error),
                Err(error) => {
                    self.replica.fail(error.clone());
                    return Err(error);
                }
            }
        }
        let message = failures.iter().map(|error| error.message.as_str()).collect::<Vec<_>>().join("; ");
        let error = IndexError::new(IndexErrorKind::Unavailable, message);
        self.replica.fail(error.clone());
        Err(error)
    }

    /// Records where the replica was read from: a standby is a degradation `health` names.
    fn note_source(&self, pool: &NamedPool, failures: &[IndexError]) {
        let note = (pool.name != self.primary.name)
            .then(|| format!("the postgres primary does not answer; the replica is read from the {}", pool.name));
        let previous = self.replica.source();
        if previous.as_deref() != Some(pool.name.as_str()) {
            if note.is_some() {
                let reason = failures.first().map(|error| error.message.clone()).unwrap_or_default();
                tracing::warn!(source = %pool.name, %reason, "postgres primary unavailable; reading from a standby");
            } else if previous.is_some() {
                tracing::info!("postgres primary answers again; reading from it");
            }
        }
        self.replica.set_source(pool.name.clone(), note);
    }

    async fn refresh_from(&self, pool: &NamedPool) -> Result<bool> {
        let started = Instant::now();
        let mut client = pool.pool.get().await.map_err(|error| store::pool_error(&pool.name, error))?;
        let what = format!("{} read", pool.name);
        let transaction = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|error| store::db_error(&what, &error))?;
        store::check_schema(&transaction).await?;
        let only: Option<Vec<String>> = match &self.scope {
            crate::scope::TenantScope::Only(tenants) => Some(tenants.iter().cloned().collect()),
            _ => None,
        };
        let rows = transaction
            .query(
                "SELECT tenant, generation, version, embedding_model, indexed_at FROM retr_tenants \
                 WHERE generation > 0 AND ($1::text[] IS NULL OR tenant = ANY($1)) ORDER BY tenant",
                &[&only],
            )
            .await
            .map_err(|error| store::db_error(&what, &error))?;
        let tenants: Vec<TenantRow> = rows
            .iter()
            .map(|row| TenantRow {
                tenant: row.get(0),
                generation: row.get(1),
                version: row.get(2),
                embedding_model: row.get(3),
                indexed_at: row.get(4),
            })
            .filter(|row| self.scope.serves(&row.tenant))
            .collect();
        let version = tenants.iter().map(|row| row.version.max(0) as u64).max();
        let latest = tenants.iter().max_by_key(|row| row.version);
        let (model, indexed_at) =
            latest.map(|row| (row.embedding_model.clone(), row.indexed_at.clone())).unwrap_or_default();

        let known: HashMap<String, i64> =
            self.sync().iter().map(|(tenant, state)| (tenant.clone(), state.generation)).collect();
        let base = self.replica.current().filter(|base| base.dimension() > 0);
        let Some(base) = base else {
            return self.load_all(&transaction, &what, tenants, version, model, indexed_at, started).await;
        };
        let changed: Vec<&TenantRow> =
            tenants.iter().filter(|row| known.get(&row.tenant) != Some(&row.generation)).collect();
        let present: BTreeSet<&str> = tenants.iter().map(|row| row.tenant.as_str()).collect();
        let removed: Vec<String> = known.keys().filter(|tenant| !present.contains(tenant.as_str())).cloned().collect();
        if changed.is_empty() && removed.is_empty() {
            if base.stats_info() != (model.as_str(), indexed_at.as_str()) && !model.is_empty() {
                let mut updated = LoadedIndex::clone(&base);
                updated.set_info(&model, &indexed_at);
                self.replica.replace(Arc::new(updated));
            }
            self.replica.confirm(version);
            return Ok(false);
        }
        let mut parts = Vec::new();
        let mut states = Vec::new();
        let mut fetched = 0usize;
        for row in changed {
            let pages = read_pages(&transaction, &what, &row.tenant, row.generation).await?;
            let previous = self.sync().get(&row.tenant).map(|state| state.pages.clone());
            let (scope, docs): (ChangeScope, Option<Vec<String>>) = match previous {
                None => (ChangeScope::Tenant, None),
                Some(previous) => {
                    let mut docs: BTreeSet<String> = pages
                        .iter()
                        .filter(|(doc, hash)| previous.get(*doc) != Some(*hash))
                        .map(|(doc, _)| doc.clone())
                        .collect();
                    docs.extend(previous.keys().filter(|doc| !pages.contains_key(*doc)).cloned());
                    let read: Vec<String> = docs.iter().filter(|doc| pages.contains_key(*doc)).cloned().collect();
                    (ChangeScope::Docs(docs), Some(read))
                }
            };
            let mut levels: [Vec<Record>; 3] = Default::default();
            let mut add = |level: Level, record: Record| {
                levels[slot(level)].push(record);
                Ok(())
            };
            fetched +=
                read_records(&transaction, &what, &row.tenant, row.generation, docs.as_deref(), &mut add).await?;
            let (base, tenant, dimension) = (Arc::clone(&base), row.tenant.clone(), base.dimension());
            let part = tokio::task::spawn_blocking(move || {
                super::memory::rebuild_tenant(&base, &tenant, &scope, levels, dimension)
            })
            .await
            .map_err(|error| {
                IndexError::new(IndexErrorKind::Internal, format!("tenant rebuild panicked: {error}"))
            })??;
            parts.push((row.tenant.clone(), part));
            states.push((row.tenant.clone(), TenantState { generation: row.generation, pages }));
        }
        for tenant in &removed {
            parts.push((tenant.clone(), None));
        }
        let tenants_changed = parts.len();
        let mut next = base.with_tenants(parts);
        if !model.is_empty() {
            next.set_info(&model, &indexed_at);
        }
        tracing::info!(
            tenants = tenants_changed,
            records = fetched,
            source = %pool.name,
            latency_ms = started.elapsed().as_millis() as u64,
            "postgres replica refreshed incrementally"
        );
        self.replica.swap(Arc::new(next), version, started.elapsed(), fetched as u64);
        let mut sync = self.sync();
        for tenant in removed {
            sync.remove(&tenant);
        }
        sync.extend(states);
        Ok(true)
    }

    /// Reads every served tenant at its current generation into a new replica.
    #[allow(clippy::too_many_arguments)]
    async fn load_all(
        &self,
        transaction: &deadpool_postgres::Transaction<'_>,
        what: &str,
        tenants: Vec<TenantRow>,
        version: Option<u64>,
        model: String,
        indexed_at: String,
        started: Instant,
    ) -> Result<bool> {
        if tenants.is_empty() {
            return Err(IndexError::new(
                IndexErrorKind::NotFound,
                "postgres holds no tenant this instance serves — run ingest",
            ));
        }
        let mut builder = IndexBuilder::new(0);
        let mut states = BTreeMap::new();
        let mut fetched = 0usize;
        for row in &tenants {
            let pages = read_pages(transaction, what, &row.tenant, row.generation).await?;
            let mut add = |level: Level, record: Record| builder.add(level, record);
            fetched += read_records(transaction, what, &row.tenant, row.generation, None, &mut add).await?;
            states.insert(row.tenant.clone(), TenantState { generation: row.generation, pages });
        }
        let loaded = tokio::task::spawn_blocking(move || builder.finish(model, indexed_at))
            .await
            .map_err(|error| IndexError::new(IndexErrorKind::Internal, format!("replica build panicked: {error}")))??;
        tracing::info!(
            tenants = tenants.len(),
            records = fetched,
            latency_ms = started.elapsed().as_millis() as u64,
            "postgres replica loaded"
        );
        self.replica.swap(Arc::new(loaded), version, started.elapsed(), fetched as u64);
        tokio::task::spawn_blocking(super::memory::release_freed_memory);
        *self.sync() = states;
        Ok(true)
    }
}

fn slot(level: Level) -> usize {
    match level {
        Level::Doc => 0,
        Level::Section => 1,
        Level::Chunk => 2,
    }
}

/// The pages (doc id → page hash) of one generation of a tenant.
async fn read_pages(
    client: &impl deadpool_postgres::GenericClient,
    what: &str,
    tenant: &str,
    generation: i64,
) -> Result<HashMap<String, String>> {
    let rows = client
        .query(
            "SELECT doc_id, page_hash FROM retr_pages WHERE tenant = $1 AND generation = $2",
            &[&tenant, &generation],
        )
        .await
        .map_err(|error| store::db_error(what, &error))?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// Rows read by one statement while loading: each statement stays well inside the serving
/// statement timeout however big the tenant.
const LOAD_PAGE_ROWS: i64 = 5000;

/// Reads the records of one generation of a tenant (of the pages `docs` only, when given) into
/// `add`, `LOAD_PAGE_ROWS` at a time in key order; returns how many were read.
async fn read_records(
    client: &impl deadpool_postgres::GenericClient,
    what: &str,
    tenant: &str,
    generation: i64,
    docs: Option<&[String]>,
    add: &mut impl FnMut(Level, Record) -> Result<()>,
) -> Result<usize> {
    let statement = format!(
        "SELECT {} FROM retr_pages p JOIN retr_records r \
         ON r.tenant = p.tenant AND r.doc_id = p.doc_id AND r.page_hash = p.page_hash \
         WHERE p.tenant = $1 AND p.generation = $2 AND ($3::text[] IS NULL OR p.doc_id = ANY($3)) \
         AND p.doc_id >= $4 AND (r.doc_id, r.level, r.id) > ($4, $5, $6) \
         ORDER BY r.doc_id, r.level, r.id LIMIT $7",
        store::RECORD_COLUMNS
    );
    let docs: Option<Vec<String>> = docs.map(<[String]>::to_vec);
    let mut after: (String, i16, String) = (String::new(), -1, String::new());
    let mut count = 0;
    loop {
        let rows = client
            .query(statement.as_str(), &[&tenant, &generation, &docs, &after.0, &after.1, &after.2, &LOAD_PAGE_ROWS])
            .await
            .map_err(|error| store::db_error(what, &error))?;
        let full = rows.len() as i64 == LOAD_PAGE_ROWS;
        for row in &rows {
            let (level, record) = store::record_from_row(row)?;
            after = (record.meta.doc_id.to_string(), store::level_number(level), record.id.clone());
            add(level, record)?;
            count += 1;
        }
        if !full {
            return Ok(count);
        }
    }
}

#[async_trait]
impl SnapshotSource for PostgresIndex {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    fn replica(&self) -> &Replica {
        &self.replica
    }

    async fn poll(self: Arc<Self>) -> Result<bool> {
        self.refresh().await
    }

    /// Awaits the first load; retries a failed first load at most once per refresh interval
    /// without making concurrent searches wait. With a replica in hand, a search never waits on
    /// the database: the refresher retries in the background.
    async fn before_read(&self) {
        let (attempted_at, failing) = self.replica.attempt();
        let retry_due = failing
            && self.replica.current().is_none()
            && attempted_at.is_none_or(|attempted| attempted.elapsed() >= self.refresh_interval);
        if attempted_at.is_none() || (retry_due && self.reload.try_lock().is_ok()) {
            let _ = self.refresh().await;
        }
    }
}
