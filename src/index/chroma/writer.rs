//! Writing to Chroma: collections created on demand, batched upserts with base64 embeddings,
//! deletes by `where`, and the version marker readers poll.

use super::{level_slot, wire, ChromaIndex};
use crate::index::{IndexError, IndexErrorKind, RecordFilter, Result};
use crate::model::{Level, Record, Snapshot};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Docs-collection metadata keys: the version marker bumped after every write, and index info.
pub(super) const VERSION_KEY: &str = "index_version";
pub(super) const MODEL_KEY: &str = "embedding_model";
pub(super) const INDEXED_AT_KEY: &str = "indexed_at";

/// Records per upsert request: ~1.6 MB of base64 vectors at 384-d, far below Chroma's 40 MB cap.
pub const UPSERT_BATCH_SIZE: usize = 500;

static VERSION_COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_version() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_nanos()).unwrap_or_default();
    format!("{nanos}-{}-{}", std::process::id(), VERSION_COUNTER.fetch_add(1, Ordering::Relaxed))
}

fn validate(level: Level, record: &Record) -> Result<()> {
    let problem = if record.id.is_empty() || record.meta.tenant_id.is_empty() || record.meta.doc_id.is_empty() {
        Some("lacks id, tenant_id or doc_id")
    } else if record.level() != level {
        Some("is not of the level it is written to")
    } else if record.embedding.is_empty() || record.embedding.iter().any(|value| !value.is_finite()) {
        Some("has an empty or non-finite embedding")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(IndexError::new(IndexErrorKind::BadRequest, format!("record {:?} {problem}", record.id))),
        None => Ok(()),
    }
}

impl ChromaIndex {
    /// Creates the tenant, database and the three cosine collections when missing; caches the
    /// collection UUIDs.
    pub async fn ensure_collections(&self) -> Result<[String; 3]> {
        self.client.ensure_database(&self.tenant, &self.database).await?;
        let mut ids: [String; 3] = Default::default();
        for level in Level::ALL {
            let mut metadata = Map::new();
            metadata.insert("level".into(), Value::from(level.as_str()));
            let info = self.client.get_or_create(self.collection_name(level), &metadata).await?;
            ids[level_slot(level)] = info.id;
        }
        *self.collection_ids.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(ids.clone());
        Ok(ids)
    }

    pub(super) async fn collection_id(&self, level: Level) -> Result<String> {
        let cached = self.collection_ids.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let ids = match cached {
            Some(ids) => ids,
            None => self.ensure_collections().await?,
        };
        Ok(ids[level_slot(level)].clone())
    }

    /// Runs `operation` on the level's collection; when Chroma no longer knows the cached UUID
    /// (the collection was recreated), resolves the name again and retries once.
    async fn on_collection<T, F, Fut>(&self, level: Level, operation: F) -> Result<T>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match operation(self.collection_id(level).await?).await {
            Err(error) if error.kind == IndexErrorKind::NotFound => {
                *self.collection_ids.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
                operation(self.collection_id(level).await?).await
            }
            outcome => outcome,
        }
    }

    /// Inserts or replaces `records` of `level` in batches, then bumps the version marker.
    pub async fn upsert(&self, level: Level, records: &[Record]) -> Result<()> {
        records.iter().try_for_each(|record| validate(level, record))?;
        for batch in records.chunks(UPSERT_BATCH_SIZE) {
            let body = wire::upsert_body(batch)?;
            let client = &self.client;
            let body = &body;
            self.on_collection(level, |id| async move { client.upsert(&id, body).await }).await?;
        }
        tracing::debug!(level = level.as_str(), num_records = records.len(), "chroma upsert");
        self.mark_written().await
    }

    /// Deletes the `level` records matching `filter`; returns how many Chroma deleted.
    pub async fn delete_matching(&self, level: Level, filter: &RecordFilter) -> Result<usize> {
        let Some(where_clause) = wire::where_clause(filter) else {
            return Ok(0);
        };
        self.delete_where(level, json!({ "where": where_clause })).await
    }

    /// Deletes every record of one tenant on all three levels.
    pub async fn delete_tenant(&self, tenant_id: &str) -> Result<usize> {
        let mut deleted = 0;
        for level in Level::ALL {
            deleted += self.delete_where(level, json!({"where": {"tenant_id": {"$eq": tenant_id}}})).await?;
        }
        Ok(deleted)
    }

    /// Deletes every record of one source file of one tenant on all three levels (re-ingest).
    pub async fn delete_source(&self, tenant_id: &str, source: &str) -> Result<usize> {
        let where_clause = json!({"$and": [{"tenant_id": {"$eq": tenant_id}}, {"source": {"$eq": source}}]});
        let mut deleted = 0;
        for level in Level::ALL {
            deleted += self.delete_where(level, json!({ "where": where_clause })).await?;
        }
        Ok(deleted)
    }

    async fn delete_where(&self, level: Level, body: Value) -> Result<usize> {
        let client = &self.client;
        let body = &body;
        let deleted = self.on_collection(level, |id| async move { client.delete(&id, body).await }).await?;
        self.mark_written().await?;
        Ok(deleted)
    }

    /// Replaces the records of every tenant present in `snapshot` with the snapshot's, and
    /// records its model and date; tenants absent from it are left alone.
    pub async fn replace_tenants(&self, snapshot: &Snapshot) -> Result<()> {
        let tenants: BTreeSet<&str> =
            Level::ALL.iter().flat_map(|&level| snapshot.records(level)).map(|r| r.meta.tenant_id.as_str()).collect();
        for tenant in tenants {
            self.delete_tenant(tenant).await?;
        }
        for level in Level::ALL {
            self.upsert(level, snapshot.records(level)).await?;
        }
        self.set_index_info(&snapshot.embedding_model, &snapshot.indexed_at).await
    }

    /// Stores the embedding model and indexing date on the docs collection (reported by stats).
    pub async fn set_index_info(&self, embedding_model: &str, indexed_at: &str) -> Result<()> {
        self.update_docs_metadata(&[(MODEL_KEY, embedding_model), (INDEXED_AT_KEY, indexed_at)]).await
    }

    /// Bumps the version marker readers poll and makes this instance's next read reload.
    async fn mark_written(&self) -> Result<()> {
        let outcome = self.update_docs_metadata(&[(VERSION_KEY, &next_version())]).await;
        self.dirty.store(true, Ordering::Release);
        outcome
    }

    /// Chroma replaces collection metadata on update, so the current keys are read and merged.
    async fn update_docs_metadata(&self, entries: &[(&str, &str)]) -> Result<()> {
        let mut info = self.client.collection(self.collection_name(Level::Doc)).await;
        if matches!(&info, Err(error) if error.kind == IndexErrorKind::NotFound) {
            self.ensure_collections().await?;
            info = self.client.collection(self.collection_name(Level::Doc)).await;
        }
        let info = info?;
        let mut metadata = info.metadata.clone().unwrap_or_default();
        for (key, value) in entries {
            metadata.insert((*key).to_string(), Value::from(*value));
        }
        self.client.set_metadata(&info.id, &metadata).await
    }
}
