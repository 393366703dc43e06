//! Where one search reads its candidates: a `Source`, fixed from the search's first read to its
//! last (`VectorIndex::pin`). Two kinds, named by an enum rather than a trait: the pinned
//! in-memory snapshot of a replica (every read a plain function call over it) and the PostgreSQL
//! database searched in place (every read one SQL statement, all on one server). The search
//! stages (`search::stages`) read through it and nothing else.
//!
//! Also here, because `pin` hands out a `Source`: the two `VectorIndex` implementations, the
//! handle the service keeps of its index (health, stats, the version, the window reads): every
//! `SnapshotSource` (a replica's current snapshot) and the database searched in place.

use super::features::TopicTable;
use super::memory::LoadedIndex;
use super::postgres::PostgresSearchIndex;
use super::replica::{PinnedSnapshot, SnapshotSource};
use super::{IndexError, IndexErrorKind, IndexStats, RecordFilter, ReplicaStatus, Result, ScoredRecord, VectorIndex};
use crate::model::{Level, Record};
use async_trait::async_trait;
use std::sync::Arc;

/// What one search reads.
#[derive(Clone)]
pub enum Source {
    /// One snapshot of a replica (the snapshot file, Chroma or PostgreSQL copied into memory).
    Snapshot(PinnedSnapshot),
    /// The PostgreSQL database itself (`RETR_POSTGRES_SEARCH=database`), a view kept on one server.
    Sql(Arc<PostgresSearchIndex>),
}

impl Source {
    /// Exact (or exact-equivalent) cosine top-`k` of `level` records matching `filter`.
    pub async fn knn(&self, level: Level, filter: &RecordFilter, query: &[f32], k: usize) -> Result<Vec<ScoredRecord>> {
        match self {
            Source::Snapshot(pinned) => {
                pinned.loaded.knn_approximate(level, filter, query, k, pinned.approximate_min_records)
            }
            Source::Sql(database) => database.knn(level, filter, query, k).await,
        }
    }

    /// BM25 top-`k` of `level` records matching `filter` for the stemmed query `terms`.
    pub async fn lexical(
        &self,
        level: Level,
        filter: &RecordFilter,
        terms: &[String],
        k: usize,
    ) -> Result<Vec<ScoredRecord>> {
        match self {
            Source::Snapshot(pinned) => Ok(pinned.loaded.lexical(level, filter, terms, k)),
            Source::Sql(database) => database.lexical(level, filter, terms, k).await,
        }
    }

    /// Up to `limit` records matching `filter`, by id.
    pub async fn get(&self, level: Level, filter: &RecordFilter, limit: usize) -> Result<Vec<Arc<Record>>> {
        match self {
            Source::Snapshot(pinned) => Ok(pinned.loaded.get(level, filter, limit)),
            Source::Sql(database) => database.get(level, filter, limit).await,
        }
    }

    /// Up to `limit` records whose text contains any of `needles` (case-sensitive), by id.
    pub async fn text_search(
        &self,
        level: Level,
        filter: &RecordFilter,
        needles: &[String],
        limit: usize,
    ) -> Result<Vec<Arc<Record>>> {
        match self {
            Source::Snapshot(pinned) => Ok(pinned.loaded.text_search(level, filter, needles, limit)),
            Source::Sql(database) => database.text_search(level, filter, needles, limit).await,
        }
    }

    /// Whether the tenant has any doc.
    pub async fn tenant_exists(&self, tenant_id: &str) -> Result<bool> {
        match self {
            Source::Snapshot(pinned) => Ok(pinned.loaded.has_tenant(tenant_id)),
            Source::Sql(database) => database.tenant_exists(tenant_id).await,
        }
    }

    /// The vector dimension, when known.
    pub async fn dimension(&self) -> Result<Option<usize>> {
        match self {
            Source::Snapshot(pinned) => Ok(Some(pinned.loaded.dimension()).filter(|&dimension| dimension > 0)),
            Source::Sql(database) => database.dimension().await,
        }
    }

    /// Why answers may be out of date (`backend_stale`), `None` when current. The database's
    /// view says which server its reads so far went to.
    pub fn staleness(&self) -> Option<String> {
        match self {
            Source::Snapshot(pinned) => pinned.staleness.clone(),
            Source::Sql(database) => database.staleness(),
        }
    }

    /// The version of the data read.
    pub fn version(&self) -> Option<u64> {
        match self {
            Source::Snapshot(pinned) => pinned.version,
            Source::Sql(database) => database.version(),
        }
    }

    /// The topic numbers the records' features hold; `None` when records carry no features
    /// (themes are then matched on strings).
    pub(crate) fn topics(&self) -> Option<Arc<TopicTable>> {
        match self {
            Source::Snapshot(pinned) => Some(Arc::clone(pinned.loaded.topics())),
            Source::Sql(_) => None,
        }
    }
}

/// The database searched in place as the service's index: its calls read from whichever server
/// answers; `pin` keeps a search's reads on one.
#[async_trait]
impl VectorIndex for PostgresSearchIndex {
    fn backend_name(&self) -> &'static str {
        PostgresSearchIndex::backend_name(self)
    }

    async fn stats(&self) -> Result<IndexStats> {
        PostgresSearchIndex::stats(self).await
    }

    async fn health(&self) -> Result<()> {
        PostgresSearchIndex::health(self).await
    }

    fn staleness(&self) -> Option<String> {
        PostgresSearchIndex::staleness(self)
    }

    fn replica_status(&self) -> Option<ReplicaStatus> {
        PostgresSearchIndex::replica_status(self)
    }

    fn version(&self) -> Option<u64> {
        PostgresSearchIndex::version(self)
    }

    async fn pin(&self) -> Result<Source> {
        Ok(Source::Sql(self.pinned_view()))
    }
}

async fn loaded<S: SnapshotSource + ?Sized>(source: &S) -> Result<Arc<LoadedIndex>> {
    source.before_read().await;
    source.replica().snapshot()
}

#[async_trait]
impl<S: SnapshotSource> VectorIndex for S {
    fn backend_name(&self) -> &'static str {
        SnapshotSource::backend_name(self)
    }

    async fn stats(&self) -> Result<IndexStats> {
        let mut stats = loaded(self).await?.stats();
        stats.backend = SnapshotSource::backend_name(self).to_string();
        Ok(stats)
    }

    /// From the replica's state only: `/health` never waits on the source (the refresher polls
    /// it in the background and records failures, which `staleness` reports).
    async fn health(&self) -> Result<()> {
        self.replica().snapshot().map(|_| ())
    }

    fn staleness(&self) -> Option<String> {
        self.replica().staleness(SnapshotSource::backend_name(self))
    }

    fn replica_status(&self) -> Option<ReplicaStatus> {
        self.replica().status()
    }

    fn version(&self) -> Option<u64> {
        self.replica().version()
    }

    async fn pin(&self) -> Result<Source> {
        self.before_read().await;
        match self.replica().pin(SnapshotSource::backend_name(self)) {
            Some(pinned) => Ok(Source::Snapshot(pinned)),
            None => Err(self
                .replica()
                .snapshot()
                .err()
                .unwrap_or_else(|| IndexError::new(IndexErrorKind::Unavailable, "the index is not loaded yet"))),
        }
    }
}
