//! Writing to Chroma: collections created on demand, batched upserts with base64 embeddings
//! (several batches in flight), deletes by `where`, the version marker readers poll, and the
//! staged writes, commits and sweeps of an atomic ingest (`manifest`).

use super::changes::{self, ChangeScope};
use super::manifest::{self, Manifest, ManifestHead};
use super::markers::{level_slot, now_ms, parse_version, INDEXED_AT_KEY, MODEL_KEY, VERSION_KEY};
use super::wire::{EmbeddingEncoding, Versioned};
use super::write_limits::{WriteLimits, UPSERT_BATCH_SIZE};
use super::{wire, ChromaIndex};
use crate::index::{IndexError, IndexErrorKind, RecordFilter, Result};
use crate::model::{Level, Record, Snapshot};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static VERSION_COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_version() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_nanos()).unwrap_or_default();
    format!("{nanos}-{}-{}", std::process::id(), VERSION_COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Manifests per `get` page (each lists a source's pages: a few hundred kB at most).
const MANIFEST_PAGE_SIZE: usize = 100;

/// The service's own collections besides the three levels.
#[derive(Debug, Clone, Copy)]
enum Side {
    Changes,
    Manifests,
}

/// Change-log entries for writes that changed nothing served in these tenants (no doc named).
fn unchanged_tenants<'a>(tenants: impl IntoIterator<Item = &'a str>) -> Vec<(String, ChangeScope)> {
    let tenants: BTreeSet<&str> = tenants.into_iter().collect();
    tenants.into_iter().map(|tenant| (tenant.to_string(), ChangeScope::Docs(BTreeSet::new()))).collect()
}

/// What writing `records` changes: the docs they belong to, per tenant.
fn changed_docs(records: &[Record]) -> Vec<(String, ChangeScope)> {
    let mut docs: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for record in records {
        docs.entry(record.meta.tenant_id.as_str()).or_default().insert(record.meta.doc_id.to_string());
    }
    docs.into_iter().map(|(tenant, docs)| (tenant.to_string(), ChangeScope::Docs(docs))).collect()
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
    pub(crate) async fn ensure_collections(&self) -> Result<[String; 3]> {
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

    /// The server's write limits, asked once; a server without pre-flight checks (older than
    /// the pinned version) gets the default batch size and float embeddings.
    async fn write_limits(&self) -> Result<WriteLimits> {
        let limits = self
            .write_limits
            .get_or_try_init(|| async {
                match self.client.pre_flight_checks().await {
                    Ok(checks) => Ok(WriteLimits::from_checks(&checks)),
                    Err(error) if error.kind == IndexErrorKind::NotFound => {
                        Ok(WriteLimits { batch_size: UPSERT_BATCH_SIZE, encoding: EmbeddingEncoding::Floats })
                    }
                    Err(error) => Err(error),
                }
            })
            .await?;
        Ok(*limits)
    }

    /// Inserts or replaces `records` of `level` in batches of at most the server's batch size,
    /// at most `chroma_write_concurrency` batches in flight on this index (across concurrent
    /// calls), then bumps the version marker. The first
    /// failed batch fails the call (batches not yet sent are not sent); the marker is bumped
    /// anyway, since earlier batches may have been written.
    pub async fn upsert(&self, level: Level, records: &[Record]) -> Result<()> {
        self.upsert_records(level, records, None).await
    }

    /// Writes the records of an ingest's new or changed pages next to the served version, under
    /// content-hashed ids (`page_hashes`: doc id → page hash) tagged with `source`. Nobody serves
    /// them until `commit` names their pages; the change log hears of a write that changed nothing
    /// served (no doc named), so replicas neither re-read nor reload.
    pub(crate) async fn stage(
        &self,
        level: Level,
        records: &[Record],
        source: &str,
        page_hashes: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.upsert_records(level, records, Some(Versioned { source, page_hashes })).await
    }

    async fn upsert_records(&self, level: Level, records: &[Record], versioned: Option<Versioned<'_>>) -> Result<()> {
        records.iter().try_for_each(|record| validate(level, record))?;
        let limits = self.write_limits().await?;
        // Collected (futures are lazy) rather than mapped inside the stream: a closure in the
        // stream's type trips rustc's higher-ranked `Send` check in async-trait callers.
        let batches: Vec<_> = records
            .chunks(limits.batch_size)
            .map(|batch| self.upsert_batch(level, batch, limits.encoding, versioned))
            .collect();
        let written = futures_util::stream::iter(batches)
            .buffer_unordered(self.write_concurrency)
            .try_for_each(|()| std::future::ready(Ok(())))
            .await;
        tracing::debug!(
            level = level.as_str(),
            num_records = records.len(),
            batch_size = limits.batch_size,
            concurrency = self.write_concurrency,
            ok = written.is_ok(),
            "chroma upsert"
        );
        let changes = match versioned {
            None => changed_docs(records),
            Some(_) => unchanged_tenants(records.iter().map(|record| record.meta.tenant_id.as_str())),
        };
        let marked = self.mark_written(changes).await;
        written.and(marked)
    }

    async fn upsert_batch(
        &self,
        level: Level,
        batch: &[Record],
        encoding: EmbeddingEncoding,
        versioned: Option<Versioned<'_>>,
    ) -> Result<()> {
        let _permit = self
            .write_permits
            .acquire()
            .await
            .map_err(|_| IndexError::new(IndexErrorKind::Internal, "chroma write permits closed"))?;
        let body = wire::upsert_body(batch, encoding, versioned)?;
        let client = &self.client;
        let body = &body;
        self.on_collection(level, |id| async move { client.upsert(&id, body).await }).await
    }

    /// Deletes the `level` records matching `filter`; returns how many Chroma deleted.
    pub async fn delete_matching(&self, level: Level, filter: &RecordFilter) -> Result<usize> {
        let Some(where_clause) = wire::where_clause(filter) else {
            return Ok(0);
        };
        let scope = match (&filter.doc_ids, filter.section_ids.is_none()) {
            (Some(doc_ids), true) => ChangeScope::Docs(doc_ids.iter().cloned().collect()),
            _ => ChangeScope::Tenant,
        };
        self.delete_where(level, json!({ "where": where_clause }), vec![(filter.tenant_id.clone(), scope)]).await
    }

    /// Deletes every record of one tenant on all three levels, and its ingest manifests.
    pub async fn delete_tenant(&self, tenant_id: &str) -> Result<usize> {
        self.delete_manifests(&[tenant_id]).await?;
        let mut deleted = 0;
        for level in Level::ALL {
            let body = json!({"where": {"tenant_id": {"$eq": tenant_id}}});
            deleted += self.delete_where(level, body, vec![(tenant_id.to_string(), ChangeScope::Tenant)]).await?;
        }
        Ok(deleted)
    }

    /// Deletes every record of one source file of one tenant on all three levels (re-ingest).
    pub async fn delete_source(&self, tenant_id: &str, source: &str) -> Result<usize> {
        let where_clause = json!({"$and": [{"tenant_id": {"$eq": tenant_id}}, {"source": {"$eq": source}}]});
        let mut deleted = 0;
        for level in Level::ALL {
            let body = json!({ "where": where_clause });
            deleted += self.delete_where(level, body, vec![(tenant_id.to_string(), ChangeScope::Tenant)]).await?;
        }
        Ok(deleted)
    }

    async fn delete_where(&self, level: Level, body: Value, changes: Vec<(String, ChangeScope)>) -> Result<usize> {
        let client = &self.client;
        let body = &body;
        let deleted = self.on_collection(level, |id| async move { client.delete(&id, body).await }).await?;
        self.mark_written(changes).await?;
        Ok(deleted)
    }

    /// Replaces the records of every tenant present in `snapshot` with the snapshot's (their ingest
    /// manifests go first, so the new records are served as they come), and records its model
    /// and date; tenants absent from it are left alone. The three levels are
    /// written at once (Chroma writes one collection at a time, different collections in
    /// parallel), within the index's write concurrency.
    pub async fn replace_tenants(&self, snapshot: &Snapshot) -> Result<()> {
        let tenants: BTreeSet<&str> =
            Level::ALL.iter().flat_map(|&level| snapshot.records(level)).map(|r| r.meta.tenant_id.as_str()).collect();
        if !tenants.is_empty() {
            self.delete_manifests(&tenants.iter().copied().collect::<Vec<_>>()).await?;
            let body = json!({"where": {"tenant_id": {"$in": tenants}}});
            let changes: Vec<(String, ChangeScope)> =
                tenants.iter().map(|tenant| (tenant.to_string(), ChangeScope::Tenant)).collect();
            let [docs, sections, chunks] =
                Level::ALL.map(|level| self.delete_where(level, body.clone(), changes.clone()));
            tokio::try_join!(docs, sections, chunks)?;
        }
        let [docs, sections, chunks] = Level::ALL.map(|level| self.upsert(level, snapshot.records(level)));
        tokio::try_join!(docs, sections, chunks)?;
        self.set_index_info(&snapshot.embedding_model, &snapshot.indexed_at).await
    }

    /// Stores the embedding model and indexing date on the docs collection (reported by stats).
    pub(crate) async fn set_index_info(&self, embedding_model: &str, indexed_at: &str) -> Result<()> {
        self.update_docs_metadata(&[(MODEL_KEY, embedding_model), (INDEXED_AT_KEY, indexed_at)]).await
    }

    /// The version marker Chroma holds now (the last write's, through any instance).
    pub async fn stored_version(&self) -> Result<Option<u64>> {
        let info = self.client.collection(self.collection_name(Level::Doc)).await?;
        Ok(info.metadata_string(VERSION_KEY).and_then(parse_version))
    }

    /// Logs what a write changed (`changes`), then bumps the version marker readers poll to
    /// the entries' version, and makes this instance's next read refresh. When logging fails
    /// the marker is bumped anyway: readers see a version no entry explains and reload in full.
    async fn mark_written(&self, changes: Vec<(String, ChangeScope)>) -> Result<()> {
        let version = next_version();
        let logged = if changes.is_empty() { Ok(()) } else { self.log_changes(&version, &changes).await };
        let marked = self.update_docs_metadata(&[(VERSION_KEY, &version)]).await;
        self.dirty.store(true, Ordering::Release);
        logged.and(marked)
    }

    /// Appends the entries of one write to the change log and prunes entries past retention.
    async fn log_changes(&self, version: &str, changes: &[(String, ChangeScope)]) -> Result<()> {
        let at_ms = now_ms();
        let body = changes::entries_body(version, at_ms, changes);
        let client = &self.client;
        let body = &body;
        self.on_side_collection(Side::Changes, |id| async move { client.upsert(&id, body).await }).await?;
        let prune = json!({"where": {"at_ms": {"$lt": at_ms - changes::RETENTION_MS}}});
        let prune = &prune;
        self.on_side_collection(Side::Changes, |id| async move { client.delete(&id, prune).await }).await.map(|_| ())
    }

    /// The UUID of one of the service's own collections, created when missing.
    async fn side_collection_id(&self, side: Side) -> Result<String> {
        let (name, cache, role) = self.side(side);
        let cached = cache.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        if let Some(id) = cached {
            return Ok(id);
        }
        let mut metadata = Map::new();
        metadata.insert("role".into(), Value::from(role));
        let info = self.client.get_or_create(name, &metadata).await?;
        *cache.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(info.id.clone());
        Ok(info.id)
    }

    fn side(&self, side: Side) -> (&str, &std::sync::RwLock<Option<String>>, &'static str) {
        match side {
            Side::Changes => (&self.changes_name, &self.changes_collection, "change log of the retrieval service"),
            Side::Manifests => {
                (&self.manifests_name, &self.manifests_collection, "ingest manifests of the retrieval service")
            }
        }
    }

    /// `on_collection` for one of the service's own collections.
    async fn on_side_collection<T, F, Fut>(&self, side: Side, operation: F) -> Result<T>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match operation(self.side_collection_id(side).await?).await {
            Err(error) if error.kind == IndexErrorKind::NotFound => {
                *self.side(side).1.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
                operation(self.side_collection_id(side).await?).await
            }
            outcome => outcome,
        }
    }

    /// The manifests' id and generation, by id (none when no ingest ever committed): what a
    /// replica polls to see commits.
    pub(super) async fn poll_manifest_heads(&self) -> Result<Vec<ManifestHead>> {
        let Some(collection_id) = self.manifests_collection_if_any().await? else {
            return Ok(Vec::new());
        };
        let mut heads = Vec::new();
        let mut offset = 0;
        loop {
            let body = json!({"include": ["metadatas"], "limit": MANIFEST_PAGE_SIZE, "offset": offset});
            let page = self.client.get(&collection_id, &body).await?;
            let count = page.ids.len();
            let metadatas = page.metadatas.unwrap_or_default().into_iter().chain(std::iter::repeat(None));
            for (id, metadata) in page.ids.into_iter().zip(metadatas) {
                match manifest::parse_head(id.clone(), metadata.as_ref()) {
                    Some(head) => heads.push(head),
                    None => tracing::warn!(%id, "ignoring a malformed ingest manifest"),
                }
            }
            if count < MANIFEST_PAGE_SIZE {
                heads.sort_by(|a, b| a.id.cmp(&b.id));
                return Ok(heads);
            }
            offset += MANIFEST_PAGE_SIZE;
        }
    }

    /// The manifests with these ids, or every manifest.
    pub(super) async fn fetch_manifests(&self, ids: Option<&[String]>) -> Result<Vec<Manifest>> {
        let Some(collection_id) = self.manifests_collection_if_any().await? else {
            return Ok(Vec::new());
        };
        match ids {
            None => self.manifests_where(&collection_id, Map::new()).await,
            Some(ids) => {
                let mut manifests = Vec::new();
                for ids in ids.chunks(MANIFEST_PAGE_SIZE) {
                    let mut selection = Map::new();
                    selection.insert("ids".into(), json!(ids));
                    manifests.extend(self.manifests_where(&collection_id, selection).await?);
                }
                Ok(manifests)
            }
        }
    }

    /// The manifests of every source of one tenant, read from Chroma: what an ingest builds on.
    pub(crate) async fn tenant_manifests(&self, tenant_id: &str) -> Result<Vec<Manifest>> {
        let Some(collection_id) = self.manifests_collection_if_any().await? else {
            return Ok(Vec::new());
        };
        let mut selection = Map::new();
        selection.insert("where".into(), json!({"tenant_id": {"$eq": tenant_id}}));
        self.manifests_where(&collection_id, selection).await
    }

    async fn manifests_where(&self, collection_id: &str, selection: Map<String, Value>) -> Result<Vec<Manifest>> {
        let mut manifests = Vec::new();
        let mut offset = 0;
        loop {
            let mut body = selection.clone();
            body.insert("include".into(), json!(["metadatas", "documents"]));
            body.insert("limit".into(), json!(MANIFEST_PAGE_SIZE));
            body.insert("offset".into(), json!(offset));
            let page = self.client.get(collection_id, &Value::Object(body)).await?;
            let count = page.ids.len();
            let metadatas = page.metadatas.unwrap_or_default().into_iter().chain(std::iter::repeat(None));
            let documents = page.documents.unwrap_or_default().into_iter().chain(std::iter::repeat(None));
            for ((id, metadata), document) in page.ids.into_iter().zip(metadatas).zip(documents) {
                match manifest::parse_manifest(metadata.as_ref(), document.as_deref()) {
                    Some(manifest) => manifests.push(manifest),
                    None => tracing::warn!(%id, "ignoring a malformed ingest manifest"),
                }
            }
            if count < MANIFEST_PAGE_SIZE {
                return Ok(manifests);
            }
            offset += MANIFEST_PAGE_SIZE;
        }
    }

    /// The manifests' collection UUID, `None` when it was never created (no reader creates it).
    async fn manifests_collection_if_any(&self) -> Result<Option<String>> {
        match self.client.collection(&self.manifests_name).await {
            Ok(info) => Ok(Some(info.id)),
            Err(error) if error.kind == IndexErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Commits an ingest: upserts `manifests` in one request (from then on replicas serve the
    /// pages they name), then logs `changed` (the docs whose served page changed) and bumps the
    /// version marker. The commit is the manifest write alone: a replica that misses the entry
    /// still sees the manifest's new generation at its next poll.
    /// Each manifest gets a new generation (what replicas compare).
    pub(crate) async fn commit(&self, manifests: &[Manifest], changed: Vec<(String, ChangeScope)>) -> Result<()> {
        let generation = next_version();
        let manifests: Vec<Manifest> =
            manifests.iter().map(|manifest| Manifest { generation: generation.clone(), ..manifest.clone() }).collect();
        let body = manifest::upsert_body(&manifests);
        let client = &self.client;
        let body = &body;
        self.on_side_collection(Side::Manifests, |id| async move { client.upsert(&id, body).await }).await?;
        self.mark_written(changed).await
    }

    /// Deletes what the committed version of `source` in `tenant_id` no longer has: its staged or
    /// superseded records (whose page hash is not among `pages`' hashes), and every record of
    /// `docs` (docs the source took over, or owned before it had a manifest) other than the
    /// committed page. Nothing deleted is served, so the change log hears of no doc.
    pub(crate) async fn sweep_source(
        &self,
        tenant_id: &str,
        source: &str,
        pages: &BTreeMap<String, String>,
        docs: &BTreeSet<String>,
    ) -> Result<usize> {
        let tenant = json!({"tenant_id": {"$eq": tenant_id}});
        let not_among = |hashes: Vec<&String>| -> Option<Value> {
            (!hashes.is_empty()).then(|| json!({ manifest::PAGE_HASH_KEY: {"$nin": hashes} }))
        };
        let mut clauses = Vec::new();
        let mut of_source = vec![tenant.clone(), json!({ manifest::INGEST_SOURCE_KEY: {"$eq": source} })];
        of_source.extend(not_among(pages.values().collect()));
        clauses.push(json!({ "$and": of_source }));
        let docs: Vec<&String> = docs.iter().collect();
        for docs in docs.chunks(changes::IDS_PER_FETCH) {
            let mut of_docs = vec![tenant.clone(), json!({"doc_id": {"$in": docs}})];
            of_docs.extend(not_among(docs.iter().filter_map(|doc| pages.get(*doc)).collect()));
            clauses.push(json!({ "$and": of_docs }));
        }
        let mut deleted = 0;
        for level in Level::ALL {
            for clause in &clauses {
                let client = &self.client;
                let body = json!({ "where": clause });
                let body = &body;
                deleted += self.on_collection(level, |id| async move { client.delete(&id, body).await }).await?;
            }
        }
        self.mark_written(unchanged_tenants([tenant_id])).await?;
        Ok(deleted)
    }

    /// Deletes the ingest manifests of `tenants` (their records are being replaced or deleted).
    async fn delete_manifests(&self, tenants: &[&str]) -> Result<()> {
        if tenants.is_empty() || self.manifests_collection_if_any().await?.is_none() {
            return Ok(());
        }
        let body = json!({"where": {"tenant_id": {"$in": tenants}}});
        let client = &self.client;
        let body = &body;
        self.on_side_collection(Side::Manifests, |id| async move { client.delete(&id, body).await }).await.map(|_| ())
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
