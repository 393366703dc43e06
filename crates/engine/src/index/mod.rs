//! Index backends: the `VectorIndex` trait the service holds its index by (health, stats, the
//! version, and `pin`, which hands a search its `Source`), the `Source` a search reads, the
//! record filter every backend applies, the in-memory engine and the BM25 lexical index.

pub(crate) mod change;
pub(crate) mod chroma;
mod codec;
pub(crate) mod condition;
pub(crate) mod features;
pub(crate) mod file_index;
pub(crate) mod filter;
mod in_parts;
pub(crate) mod lexical;
pub(crate) mod memory;
pub(crate) mod partition;
pub(crate) mod postgres;
mod record_ref;
pub(crate) mod replica;
mod source;
mod tenant_level;
mod vectors;

use crate::model::{Level, Record};
use async_trait::async_trait;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use chroma::{ChromaIndex, ChromaSettings};
pub(crate) use features::RecordFeatures;
pub use file_index::InMemoryIndex;
pub use filter::RecordFilter;
pub use postgres::{PostgresIndex, PostgresSearchIndex, PostgresSearchMode, PostgresSettings};
pub(crate) use record_ref::{LevelStore, RecordRef};

pub(crate) use source::Source;

/// The number of the record whose id is `id` among `records`, which a level keeps in id order.
pub(crate) fn number_by_id<R: AsRef<Record>>(records: &[R], id: &str) -> Option<usize> {
    records.binary_search_by(|record| record.as_ref().id.as_str().cmp(id)).ok()
}

/// A record with the score one ranker gave it (cosine similarity or BM25). Its derived features,
/// when the backend keeps them, are `record.features()` (`None`: readers derive what they need
/// themselves).
#[derive(Debug, Clone)]
pub struct ScoredRecord {
    pub record: RecordRef,
    pub score: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexErrorKind {
    /// No index has been written yet (snapshot file missing, collection absent).
    NotFound,
    /// The index exists but cannot be read (corrupt or empty snapshot).
    Corrupt,
    /// The backend did not answer in time or refused the connection.
    Unavailable,
    /// The caller asked for something the index cannot do (e.g. wrong vector dimension).
    BadRequest,
    Internal,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct IndexError {
    pub kind: IndexErrorKind,
    pub message: String,
}

impl IndexError {
    pub(crate) fn new(kind: IndexErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// What a caller of the service may read: written by us from the kind alone, never the
    /// detail in `message` (file paths, Chroma's URL and answers), which goes to logs. A
    /// `BadRequest` message is about the caller's own request and is kept.
    pub fn public_message(&self) -> String {
        match self.kind {
            IndexErrorKind::NotFound => "index not found: run ingest".into(),
            IndexErrorKind::Corrupt => "index empty or corrupted".into(),
            IndexErrorKind::Unavailable => "the index backend does not answer".into(),
            IndexErrorKind::BadRequest => self.message.clone(),
            IndexErrorKind::Internal => "internal index error".into(),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, IndexError>;

/// Counts and sources of one tenant's index: what `/stats` reports, so ops can see what was ingested.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TenantStats {
    pub docs: usize,
    pub sections: usize,
    pub chunks: usize,
    pub source_files: Vec<String>,
    pub indexed_at: String,
}

/// How current a reloading replica is (`/health`, `/metrics`): `None` for a fixed snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaStatus {
    /// Seconds since the replica was last confirmed current (loaded, or its source polled unchanged).
    pub age_seconds: Option<f64>,
    /// Why the last refresh failed, while it keeps failing.
    pub last_refresh_error: Option<String>,
    /// How long the last full load or incremental refresh took, in seconds.
    pub last_load_seconds: Option<f64>,
    /// Records fetched by every load and refresh since start-up.
    pub records_loaded_total: u64,
    /// Which server the replica was last read from (`primary`, `standby 1`), for a source with
    /// standbys (PostgreSQL).
    pub source: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexStats {
    pub backend: String,
    pub embedding_model: String,
    pub dimension: usize,
    pub indexed_at: String,
    pub tenants: BTreeMap<String, TenantStats>,
}

/// A searchable store of docs, sections and chunks.
///
/// Every method takes a `RecordFilter` whose `tenant_id` is always applied: no implementation may
/// return a record of another tenant. Results of `knn` and `lexical` are sorted by descending score
/// with ties broken by id, so that both backends return identical lists for identical data.
#[async_trait]
pub trait VectorIndex: Send + Sync {
    fn backend_name(&self) -> &'static str;

    // The reads of one call: the same as a search's, through a `Source` pinned for that call.

    /// Exact (or exact-equivalent) cosine top-`k` of `level` records matching `filter`; `k ≥ 1`.
    async fn knn(&self, level: Level, filter: &RecordFilter, query: &[f32], k: usize) -> Result<Vec<ScoredRecord>> {
        self.pin().await?.knn(level, filter, query, k).await
    }

    /// BM25 top-`k` of `level` records matching `filter` for the stemmed query `terms`.
    async fn lexical(
        &self,
        level: Level,
        filter: &RecordFilter,
        terms: &[String],
        k: usize,
    ) -> Result<Vec<ScoredRecord>> {
        self.pin().await?.lexical(level, filter, terms, k).await
    }

    /// Up to `limit` records matching `filter` in a stable order (by id); used for padding.
    async fn get(&self, level: Level, filter: &RecordFilter, limit: usize) -> Result<Vec<Arc<Record>>> {
        self.pin().await?.get(level, filter, limit).await
    }

    /// Up to `limit` records whose text contains any of `needles` (case-sensitive substring, as
    /// Chroma's `$contains`), in a stable order; the last-resort fallback of the cascade.
    async fn text_search(
        &self,
        level: Level,
        filter: &RecordFilter,
        needles: &[String],
        limit: usize,
    ) -> Result<Vec<Arc<Record>>> {
        self.pin().await?.text_search(level, filter, needles, limit).await
    }

    /// Every chunk of one doc of one tenant, in any order (the window endpoint sorts them).
    async fn doc_chunks(&self, tenant_id: &str, doc_id: &str) -> Result<Vec<Arc<Record>>> {
        let filter = RecordFilter { doc_ids: Some(vec![doc_id.to_string()]), ..RecordFilter::tenant(tenant_id) };
        self.get(Level::Chunk, &filter, usize::MAX).await
    }

    /// Whether the tenant has any doc in the index.
    async fn tenant_exists(&self, tenant_id: &str) -> Result<bool> {
        self.pin().await?.tenant_exists(tenant_id).await
    }

    /// The vector dimension of the index, when known.
    async fn dimension(&self) -> Result<Option<usize>> {
        self.pin().await?.dimension().await
    }

    async fn stats(&self) -> Result<IndexStats>;

    /// `Ok` when the backend can serve searches.
    async fn health(&self) -> Result<()>;

    /// Why answers may be out of date (the store of record cannot be reached and searches are
    /// answered from the last good replica), or `None` when they are current.
    fn staleness(&self) -> Option<String> {
        None
    }

    /// The replica's freshness, when the index reloads from a source (a snapshot file, Chroma).
    fn replica_status(&self) -> Option<ReplicaStatus> {
        None
    }

    /// The version of the data searches read now: the store's write version (Chroma), or the
    /// snapshot file's modification time in nanoseconds (file backend). Grows with every write;
    /// `None` for a fixed snapshot (the demo corpus, tests).
    fn version(&self) -> Option<u64> {
        None
    }

    /// What one search reads, fixed from its first read to its last even when a reload lands in
    /// between: the current snapshot, or the database held to one server. Without a loaded
    /// snapshot, why there is none.
    async fn pin(&self) -> Result<Source>;
}

/// Cosine similarity; 0 when either vector is zero or the lengths differ, never NaN.
#[cfg(test)]
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    let similarity = dot / (norm_a.sqrt() * norm_b.sqrt());
    if similarity.is_finite() {
        similarity.clamp(-1.0, 1.0)
    } else {
        0.0
    }
}

/// Sorts by descending score, ties by ascending id: the one ordering rule of every ranker.
pub(crate) fn sort_scored(results: &mut [ScoredRecord]) {
    results.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.record.id.cmp(&b.record.id)));
}

/// Keeps the first `k` of `items` in `order`, sorted: a partial selection of those `k`, then a
/// sort of them only. With a total order (no two items equal) this is the head of a full sort,
/// whatever the unstable selection does.
#[inline]
pub(crate) fn keep_first_sorted_by<T>(
    items: &mut Vec<T>,
    k: usize,
    mut order: impl FnMut(&T, &T) -> std::cmp::Ordering,
) {
    if k == 0 {
        items.clear();
        return;
    }
    if items.len() > k {
        items.select_nth_unstable_by(k - 1, &mut order);
        items.truncate(k);
    }
    items.sort_unstable_by(order);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_zero_vector_is_zero() {
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[], &[]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
    }

    #[test]
    fn cosine_matches_formula() {
        assert!((cosine(&[1.0, 0.0], &[0.8, 0.6]) - 0.8).abs() < 1e-6);
        assert!((cosine(&[1.0, 0.0], &[-2.0, 0.0]) + 1.0).abs() < 1e-6);
    }
}
