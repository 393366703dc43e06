//! The Chroma backend. Chroma (HTTP API v2) is the store of record; searches run on an
//! in-process replica of its three collections (a `LoadedIndex`, the in-memory backend's exact
//! engine), so every query is exact and identical to the in-memory backend, and a search costs
//! no Chroma round trip at all.
//!
//! Freshness: every write through `ChromaIndex` logs what it changed (`changes`) and bumps the
//! `index_version` metadata of the docs collection. The refresher polls the collections (UUID,
//! count, version) and the change log every `index_reload_interval_ms`. A logged change re-reads
//! only the changed docs of the changed tenant and swaps only that tenant's part of the replica;
//! a change nothing explains (a collection recreated under the same name, counts or a version
//! that no entry accounts for) reloads the whole replica. A write through this instance makes the
//! next read refresh first.
//!
//! Atomic re-ingest (`manifest`): an ingest stages its pages' records under content-hashed ids,
//! then commits one manifest per source; the replica serves only what the manifests name and
//! re-reads the docs whose committed page changed, so a search sees a tenant as it was before an
//! ingest or as it is after it, never in between. When Chroma cannot be reached, searches keep
//! answering from the last good replica, flagged stale; without one they fail with `Unavailable`.
//!
//! Restarts (`copy`): with a local copy directory, the replica is also kept on disk with a note of
//! the Chroma state it reflects; a restart installs it and catches up through the change log.

mod change_poll;
mod changes;
pub use changes::ChangeScope;
mod client;
mod copy;
mod manifest;
pub(crate) use manifest::Manifest;
mod markers;
mod settings;
pub use settings::ChromaSettings;
mod sync_state;
mod wire;
mod write_limits;
mod writer;
use markers::level_slot;
pub(crate) use markers::parse_version;
use sync_state::{Signature, SyncState};

use super::memory::{IndexBuilder, LoadedIndex};
use super::replica::{Replica, SnapshotSource};
use super::{sort_scored, IndexError, IndexErrorKind, RecordFilter, Result, ScoredRecord};
use crate::model::Level;
use async_trait::async_trait;
use changes::ChangeEntry;
use client::ChromaClient;
use manifest::{ManifestHead, Tally, Visibility};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Records fetched per `get` page when the replica is loaded.
const LOAD_PAGE_SIZE: usize = 1000;

/// Pages requested at once while loading: Chroma serves concurrent reads ~1.8× faster in total.
const LOAD_PAGES_IN_FLIGHT: usize = 4;

/// How many times a full load is read again when a commit lands while it reads (the commit's
/// deletes may have removed records of the version it started from).
const LOAD_ATTEMPTS: usize = 3;

/// The Chroma-backed index: see the module documentation for the query plan.
#[derive(Debug)]
pub struct ChromaIndex {
    client: ChromaClient,
    tenant: String,
    database: String,
    collection_names: [String; 3],
    collection_ids: RwLock<Option<[String; 3]>>,
    /// The change log's collection (`{collection}_changes`) and its UUID once known.
    changes_name: String,
    changes_collection: RwLock<Option<String>>,
    /// The ingest manifests' collection (`{collection}_manifests`) and its UUID once known.
    manifests_name: String,
    manifests_collection: RwLock<Option<String>>,
    replica: Replica,
    sync: Mutex<SyncState>,
    reload: tokio::sync::Mutex<()>,
    dirty: AtomicBool,
    refresh_interval: Duration,
    write_concurrency: usize,
    /// One permit per upsert batch in flight, shared by every write through this index.
    write_permits: Semaphore,
    write_limits: tokio::sync::OnceCell<write_limits::WriteLimits>,
    /// The tenants the replica holds (`RETR_TENANTS`); writes may touch any tenant.
    scope: crate::scope::TenantScope,
    /// The replica's local copy, when kept (`copy`).
    local_copy: Option<Arc<copy::LocalCopy>>,
}

impl ChromaIndex {
    /// A client for `settings`; makes no call yet (Chroma may be down at start-up).
    pub fn new(settings: &ChromaSettings) -> Result<Arc<Self>> {
        let timeout = Duration::from_secs_f64(settings.timeout_seconds);
        Self::with_client(settings, timeout, client::SERVING_RETRY)
    }

    /// The index `ingest` writes through: each call has the batch job's own timeout
    /// (`ingest_timeout_seconds`) and a more patient retry than serving.
    /// It keeps no local copy: the directory belongs to the serving instance.
    pub fn for_ingest(settings: &ChromaSettings) -> Result<Arc<Self>> {
        let timeout = Duration::from_secs_f64(settings.ingest_timeout_seconds);
        let settings = ChromaSettings { local_copy_dir: None, ..settings.clone() };
        Self::with_client(&settings, timeout, client::INGEST_RETRY)
    }

    fn with_client(
        settings: &ChromaSettings,
        timeout: Duration,
        retry: crate::upstream::RetryPolicy,
    ) -> Result<Arc<Self>> {
        let client = ChromaClient::new(&settings.host, &settings.tenant, &settings.database, timeout, retry)?;
        let replica = Replica::refreshed();
        replica.set_probe_deadline(timeout);
        let prefix = &settings.collection;
        Ok(Arc::new(Self {
            client,
            tenant: settings.tenant.clone(),
            database: settings.database.clone(),
            collection_names: [format!("{prefix}_docs"), format!("{prefix}_sections"), format!("{prefix}_chunks")],
            collection_ids: RwLock::new(None),
            changes_name: format!("{prefix}_changes"),
            changes_collection: RwLock::new(None),
            manifests_name: format!("{prefix}_manifests"),
            manifests_collection: RwLock::new(None),
            replica,
            sync: Mutex::new(SyncState::default()),
            reload: tokio::sync::Mutex::new(()),
            dirty: AtomicBool::new(false),
            refresh_interval: Duration::from_millis(settings.refresh_interval_ms),
            write_concurrency: settings.write_concurrency.max(1),
            write_permits: Semaphore::new(settings.write_concurrency.max(1)),
            write_limits: tokio::sync::OnceCell::new(),
            scope: settings.scope.clone(),
            local_copy: settings.local_copy_dir.clone().map(|directory| {
                let source = format!(
                    "chroma tenant {:?}, database {:?}, collections {prefix:?}, tenants {:?}",
                    settings.tenant, settings.database, settings.scope
                );
                copy::LocalCopy::new(directory, source)
            }),
        }))
    }

    /// Records every Chroma call from now on in `metrics` (`retrieval_upstream_request_duration_seconds`).
    pub fn set_metrics(&self, metrics: Arc<crate::metrics::Metrics>) {
        self.client.set_metrics(metrics);
    }

    pub(crate) fn collection_name(&self, level: Level) -> &str {
        &self.collection_names[level_slot(level)]
    }

    /// Polls Chroma every `refresh_interval_ms` (first poll at once) and refreshes the
    /// replica when the collections changed, until the index is dropped.
    pub fn spawn_refresher(self: &Arc<Self>) {
        super::replica::spawn_refresher(self, self.refresh_interval);
    }

    /// Polls the collections and the change log and brings the replica up to date (or a write
    /// through this instance happened). Returns whether a new replica was installed; a failure is
    /// what searches and `health` report until the next refresh.
    pub async fn refresh(&self) -> Result<bool> {
        let _guard = self.reload.lock().await;
        let force = self.dirty.swap(false, Ordering::AcqRel);
        let outcome = self.refresh_locked().await;
        match &outcome {
            Err(error) => {
                if force {
                    self.dirty.store(true, Ordering::Release);
                }
                self.replica.fail(error.clone());
            }
            Ok(_) => self.keep_local_copy(),
        }
        outcome
    }

    /// Hands the replica, current as the sync state says, to the local copy (which writes what
    /// is due in the background).
    fn keep_local_copy(&self) {
        let (Some(copy), Some(loaded)) = (&self.local_copy, self.replica.current()) else { return };
        if let Some(note) = copy::SyncNote::of(&self.sync(), markers::now_ms()) {
            copy.keep(loaded, note);
        }
    }

    /// Installs the local copy as the first replica, aged by the time since it was confirmed, and
    /// takes its sync state: the poll that follows catches up from there (or reloads in full when
    /// the copy is of other collections or too old for the change log).
    async fn restore_local_copy(&self) {
        let Some(copy) = self.local_copy.clone() else { return };
        if copy.tried() {
            return;
        }
        let started = Instant::now();
        let Ok(Some((loaded, note))) = tokio::task::spawn_blocking(move || copy.restore()).await else { return };
        let age_ms = (markers::now_ms() - note.confirmed_at_ms).max(0);
        tracing::info!(
            records = loaded.record_count() as u64,
            age_seconds = age_ms / 1000,
            seconds = started.elapsed().as_secs_f64(),
            "chroma replica restored from the local copy; catching up from chroma"
        );
        let version = parse_version(&note.signature.version);
        self.replica.restore(Arc::new(loaded), version, Duration::from_millis(age_ms as u64), started.elapsed());
        // A copy older than the change log can be trusted to explain is served (flagged stale
        // while Chroma is down) but never caught up from: without a signature, the poll reloads.
        // (The poll's own age check may not see that age: an `Instant` cannot reach back past
        // the machine's boot, where the copy's confirmation may lie.)
        if age_ms <= changes::TRUSTED_GAP_MS {
            *self.sync() = note.into_state();
        }
    }

    fn sync(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.sync.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn refresh_locked(&self) -> Result<bool> {
        if self.replica.current().is_none() {
            self.restore_local_copy().await;
        }
        // The probe: cheap calls that say whether anything changed. One that goes unanswered past
        // one call's timeout makes the replica stale at once (`Replica::probe`).
        let probe = self.replica.probe();
        let signature = self.poll_signature().await?;
        let heads = self.poll_manifest_heads().await?;
        drop(probe);
        let (previous, cursor_ms, full) = {
            let sync = self.sync();
            let same_collections =
                sync.signature.as_ref().is_some_and(|previous| previous.collection_ids == signature.collection_ids);
            // Entries older than the retention may be pruned: a replica that long out of touch
            // cannot trust the log to hold every change it missed.
            let retention = Duration::from_millis(changes::TRUSTED_GAP_MS as u64).as_secs_f64();
            let out_of_touch =
                self.replica.status().and_then(|status| status.age_seconds).is_none_or(|age| age > retention);
            let full = self.replica.current().is_none() || !same_collections || out_of_touch;
            (sync.signature.clone(), sync.cursor_ms, full)
        };
        if full {
            return self.reload_all(signature).await;
        }
        let entries = self.poll_changes(cursor_ms - changes::LOOKBACK_MS).await?;
        let (new, version_known) = {
            let state = self.sync();
            let new: Vec<ChangeEntry> =
                entries.into_iter().filter(|entry| !state.applied.contains_key(&entry.id)).collect();
            let unchanged = previous.as_ref().is_some_and(|previous| previous.version == signature.version);
            let version_known = unchanged
                || state.applied.values().any(|(version, _)| *version == signature.version)
                || new.iter().any(|entry| entry.version == signature.version);
            (new, version_known)
        };
        let counts_unexplained = new.is_empty()
            && previous.as_ref().is_some_and(|previous| previous.counts != signature.counts)
            && previous.as_ref().is_some_and(|previous| previous.version == signature.version);
        if counts_unexplained {
            // A writer logs each write right after it: counts that moved without an entry are
            // either a write outside the service or one caught between its data and its entry.
            // Only the first reloads; it is the same state again at the next poll.
            let mut sync = self.sync();
            if sync.unexplained.as_ref() != Some(&signature) {
                sync.unexplained = Some(signature);
                return Ok(false);
            }
        }
        if !version_known || counts_unexplained {
            tracing::info!(version = %signature.version, "chroma changed without a logged change; reloading the replica");
            return self.reload_all(signature).await;
        }
        let manifests = self.manifests_after(&heads).await?;
        let mut by_tenant = self.manifest_changes(manifests.as_ref());
        for entry in new.iter().filter(|entry| self.scope.serves(&entry.tenant_id)) {
            // A staged or swept ingest write changes nothing served: it names no doc.
            if entry.scope == ChangeScope::Docs(BTreeSet::new()) {
                continue;
            }
            let scope = match by_tenant.remove(&entry.tenant_id) {
                Some(scope) => scope.merge(entry.scope.clone()),
                None => entry.scope.clone(),
            };
            by_tenant.insert(entry.tenant_id.clone(), scope);
        }
        if by_tenant.is_empty() {
            // Nothing served changed: staged writes, sweeps, or tenants this instance does not serve.
            if let Some(loaded) = self.replica.current() {
                if loaded.stats_info() != (signature.embedding_model.as_str(), signature.indexed_at.as_str()) {
                    let mut updated = LoadedIndex::clone(&loaded);
                    updated.set_info(&signature.embedding_model, &signature.indexed_at);
                    self.replica.replace(Arc::new(updated));
                }
            }
            self.replica.confirm(parse_version(&signature.version));
            let mut sync = self.sync();
            for entry in new {
                sync.cursor_ms = sync.cursor_ms.max(entry.at_ms);
                sync.applied.insert(entry.id, (entry.version, entry.at_ms));
            }
            if let Some(manifests) = manifests {
                sync.manifests = manifests;
            }
            sync.signature = Some(signature);
            sync.unexplained = None;
            return Ok(false);
        }
        let served = manifests.unwrap_or_else(|| self.sync().manifests.clone());
        self.apply_changes(signature, new, by_tenant, served, &heads).await
    }

    /// The manifests after `heads` when they differ from the ones served (`None`: unchanged).
    async fn manifests_after(&self, heads: &[ManifestHead]) -> Result<Option<BTreeMap<String, Arc<Manifest>>>> {
        let served = self.sync().manifests.clone();
        let unchanged = heads.len() == served.len()
            && heads.iter().all(|head| served.get(&head.id).is_some_and(|known| known.generation == head.generation));
        if unchanged {
            return Ok(None);
        }
        let stale: Vec<String> = heads
            .iter()
            .filter(|head| served.get(&head.id).is_none_or(|known| known.generation != head.generation))
            .map(|head| head.id.clone())
            .collect();
        let fetched = self.fetch_manifests(Some(&stale)).await?;
        let mut next: BTreeMap<String, Arc<Manifest>> =
            served.into_iter().filter(|(id, _)| heads.iter().any(|head| head.id == *id)).collect();
        for manifest in fetched {
            next.insert(manifest.id(), Arc::new(manifest));
        }
        Ok(Some(next))
    }

    /// What each served tenant must re-read when the manifests become `next`.
    fn manifest_changes(&self, next: Option<&BTreeMap<String, Arc<Manifest>>>) -> BTreeMap<String, ChangeScope> {
        let Some(next) = next else {
            return BTreeMap::new();
        };
        let served = self.sync().manifests.clone();
        let tenants: BTreeSet<&str> =
            served.values().chain(next.values()).map(|manifest| manifest.tenant_id.as_str()).collect();
        let of = |manifests: &BTreeMap<String, Arc<Manifest>>, tenant: &str| -> Vec<Arc<Manifest>> {
            manifests.values().filter(|manifest| manifest.tenant_id == tenant).cloned().collect()
        };
        let mut changes = BTreeMap::new();
        for tenant in tenants.into_iter().filter(|tenant| self.scope.serves(tenant)) {
            let (before, after) = (of(&served, tenant), of(next, tenant));
            let before: Vec<&Manifest> = before.iter().map(Arc::as_ref).collect();
            let after: Vec<&Manifest> = after.iter().map(Arc::as_ref).collect();
            let served = || {
                let Some(loaded) = self.replica.current() else { return Vec::new() };
                let filter = super::RecordFilter::tenant(tenant);
                loaded.get(Level::Doc, &filter, usize::MAX).iter().map(|doc| doc.meta.clone()).collect()
            };
            match manifest::tenant_change(&before, &after, served) {
                None => {}
                Some(None) => {
                    changes.insert(tenant.to_string(), ChangeScope::Tenant);
                }
                Some(Some(docs)) => {
                    changes.insert(tenant.to_string(), ChangeScope::Docs(docs));
                }
            }
        }
        changes
    }

    /// Whether a manifest was committed since `heads` were read: records of the version read may
    /// have been deleted meanwhile, so what was read is not installed.
    async fn committed_since(&self, heads: &[ManifestHead]) -> Result<bool> {
        Ok(self.poll_manifest_heads().await? != heads)
    }

    /// Reads the whole replica again. The change log is read first, so a write landing during
    /// the load is applied (again, harmlessly) by the next refresh.
    async fn reload_all(&self, signature: Signature) -> Result<bool> {
        let started = Instant::now();
        let entries = self.poll_changes(markers::now_ms() - changes::RETENTION_MS).await?;
        let mut attempt = 1;
        let mut incomplete = false;
        let (loaded, manifests) = loop {
            let manifests: BTreeMap<String, Arc<Manifest>> = self
                .fetch_manifests(None)
                .await?
                .into_iter()
                .map(|manifest| (manifest.id(), Arc::new(manifest)))
                .collect();
            let loaded = self.load_replica(&signature, &Visibility::new(manifests.values())).await;
            let read: Vec<ManifestHead> = manifests
                .values()
                .map(|manifest| ManifestHead { id: manifest.id(), generation: manifest.generation.clone() })
                .collect();
            let shortfall = loaded.as_ref().ok().and_then(|(_, shortfall)| shortfall.clone());
            let overtaken = self.committed_since(&read).await?;
            if (shortfall.is_none() && !overtaken) || attempt >= LOAD_ATTEMPTS {
                if let Some(shortfall) = &shortfall {
                    if self.replica.current().is_some() {
                        tracing::warn!(%shortfall, "chroma answered part of a committed page; keeping the previous replica");
                        return Ok(false);
                    }
                    tracing::warn!(%shortfall, "chroma answered part of a committed page; serving it until the next poll");
                    incomplete = true;
                }
                break (loaded.map(|(loaded, _)| loaded), manifests);
            }
            tracing::info!(attempt, ?shortfall, overtaken, "the replica load raced an ingest; loading again");
            attempt += 1;
        };
        let loaded = match loaded {
            Ok(replica) => replica,
            Err(error) if self.replica.current().is_some() => {
                // Chroma answers, so the replica we have keeps serving; the next poll retries.
                tracing::warn!(%error, "chroma replica reload failed; keeping the previous replica");
                return Ok(false);
            }
            Err(error) => return Err(error),
        };
        tracing::info!(
            docs = signature.counts[0],
            sections = signature.counts[1],
            chunks = signature.counts[2],
            latency_ms = started.elapsed().as_millis() as u64,
            "chroma replica loaded"
        );
        let records = loaded.record_count() as u64;
        self.replica.swap(Arc::new(loaded), parse_version(&signature.version), started.elapsed(), records);
        tokio::task::spawn_blocking(super::memory::release_freed_memory);
        let mut state = self.sync();
        state.applied = entries.iter().map(|entry| (entry.id.clone(), (entry.version.clone(), entry.at_ms))).collect();
        state.cursor_ms = entries.iter().map(|entry| entry.at_ms).max().unwrap_or_else(markers::now_ms);
        // A write that raced the load changes the signature again, so the next poll catches up.
        // An incomplete first load is read again in full at the next poll.
        state.signature = (!incomplete).then_some(signature);
        state.unexplained = None;
        state.manifests = manifests;
        Ok(true)
    }

    /// Re-reads what the new change-log entries name and swaps only the changed tenants' parts.
    /// Returns whether a new replica was installed: not when an ingest committed while the
    /// changes were read (the next poll reads them again under the new manifests).
    async fn apply_changes(
        &self,
        signature: Signature,
        new: Vec<ChangeEntry>,
        by_tenant: BTreeMap<String, ChangeScope>,
        manifests: BTreeMap<String, Arc<Manifest>>,
        heads: &[ManifestHead],
    ) -> Result<bool> {
        let started = Instant::now();
        let visibility = Visibility::new(manifests.values());
        let Some(base) = self.replica.current() else {
            return Err(IndexError::new(IndexErrorKind::Unavailable, "chroma replica not loaded yet"));
        };
        let mut parts = Vec::new();
        let mut fetched = 0usize;
        let mut fetch_time = Duration::ZERO;
        for (tenant, scope) in by_tenant {
            let fetch_started = Instant::now();
            let Some(levels) = self.fetch_changed(&tenant, &scope, &visibility).await? else {
                return Ok(false);
            };
            fetch_time += fetch_started.elapsed();
            fetched += levels.iter().map(Vec::len).sum::<usize>();
            let (base, dimension) = (Arc::clone(&base), base.dimension());
            let tenant_for_build = tenant.clone();
            let part = tokio::task::spawn_blocking(move || {
                super::memory::rebuild_tenant(&base, &tenant_for_build, &scope, levels, dimension)
            })
            .await
            .map_err(|error| {
                IndexError::new(IndexErrorKind::Internal, format!("tenant rebuild panicked: {error}"))
            })??;
            parts.push((tenant, part));
        }
        if self.committed_since(heads).await? {
            tracing::info!("an ingest committed while the replica read its changes; reading them again");
            return Ok(false);
        }
        let tenants = parts.len();
        let mut next = base.with_tenants(parts);
        next.set_info(&signature.embedding_model, &signature.indexed_at);
        tracing::info!(
            tenants,
            records = fetched,
            latency_ms = started.elapsed().as_millis() as u64,
            fetch_ms = fetch_time.as_millis() as u64,
            "chroma replica refreshed incrementally"
        );
        self.replica.swap(Arc::new(next), parse_version(&signature.version), started.elapsed(), fetched as u64);
        let mut state = self.sync();
        for entry in new {
            state.cursor_ms = state.cursor_ms.max(entry.at_ms);
            state.applied.insert(entry.id, (entry.version, entry.at_ms));
        }
        // Entries out of the look-back window are never polled again.
        let horizon = state.cursor_ms - 2 * changes::LOOKBACK_MS;
        state.applied.retain(|_, (_, at_ms)| *at_ms >= horizon);
        state.signature = Some(signature);
        state.unexplained = None;
        state.manifests = manifests;
        Ok(true)
    }

    fn collection_id_list(&self) -> Result<[String; 3]> {
        self.collection_ids
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .ok_or_else(|| IndexError::new(IndexErrorKind::Unavailable, "chroma collections not resolved yet"))
    }

    /// The metadata of every doc of one tenant, read from Chroma (not the replica): what an
    /// ingest needs to know which docs a source owns, without loading any replica.
    pub(crate) async fn tenant_doc_metadata(&self, tenant: &str) -> Result<Vec<crate::model::Metadata>> {
        let collection_id = self.collection_id(Level::Doc).await?;
        let mut metas = Vec::new();
        loop {
            let body = json!({
                "where": {"tenant_id": {"$eq": tenant}},
                "include": ["metadatas"],
                "limit": LOAD_PAGE_SIZE,
                "offset": metas.len(),
            });
            let page = self.client.get(&collection_id, &body).await?.into_metadatas()?;
            let full = page.len() == LOAD_PAGE_SIZE;
            metas.extend(page);
            if !full {
                return Ok(metas);
            }
        }
    }

    /// Every record of the three collections, fetched in pages of which up to
    /// `LOAD_PAGES_IN_FLIGHT` are requested at once; each page goes into the index builder as it
    /// arrives (its vectors into the tenant levels' buffers), then the tenants are indexed off the
    /// async threads.
    /// Also returns the first committed page it did not read whole (`Tally::shortfall`).
    async fn load_replica(
        &self,
        signature: &Signature,
        visibility: &Visibility,
    ) -> Result<(LoadedIndex, Option<String>)> {
        if signature.counts.iter().all(|&count| count == 0) {
            return Err(IndexError::new(IndexErrorKind::NotFound, "chroma collections are empty — run ingest"));
        }
        let permits = Arc::new(Semaphore::new(LOAD_PAGES_IN_FLIGHT));
        let fetch_page = |slot: usize, offset: usize| {
            let (client, collection_id, permits) =
                (self.client.clone(), signature.collection_ids[slot].clone(), Arc::clone(&permits));
            async move {
                let _permit = permits.acquire_owned().await.map_err(|error| {
                    IndexError::new(IndexErrorKind::Internal, format!("replica load cancelled: {error}"))
                })?;
                let body = json!({
                    "include": ["embeddings", "metadatas", "documents"],
                    "limit": LOAD_PAGE_SIZE,
                    "offset": offset,
                });
                client.get(&collection_id, &body).await?.into_records()
            }
        };
        let mut pages = JoinSet::new();
        let mut requested = [0usize; 3];
        for (slot, &count) in signature.counts.iter().enumerate() {
            for offset in (0..count.max(1)).step_by(LOAD_PAGE_SIZE) {
                let page = fetch_page(slot, offset);
                pages.spawn(async move { page.await.map(|records| (slot, records)) });
                requested[slot] = offset + LOAD_PAGE_SIZE;
            }
        }
        let mut builder = IndexBuilder::new(0);
        let mut tally = Tally::default();
        let mut received = [0usize; 3];
        while let Some(joined) = pages.join_next().await {
            let (slot, records) = joined.map_err(|error| {
                IndexError::new(IndexErrorKind::Internal, format!("page fetch panicked: {error}"))
            })??;
            received[slot] += records.len();
            self.add_served(&mut builder, &mut tally, slot, records, visibility)?;
        }
        // A collection that grew since it was counted: read on until a page comes back short.
        for slot in 0..3 {
            let mut offset = requested[slot];
            while received[slot] >= offset {
                let records = fetch_page(slot, offset).await?;
                let full = records.len() == LOAD_PAGE_SIZE;
                received[slot] += records.len();
                self.add_served(&mut builder, &mut tally, slot, records, visibility)?;
                offset += LOAD_PAGE_SIZE;
                if !full {
                    break;
                }
            }
        }
        let indexed_at = if signature.indexed_at.is_empty() {
            builder.latest_doc_indexed_at().to_string()
        } else {
            signature.indexed_at.clone()
        };
        let shortfall = visibility
            .tenants()
            .filter(|tenant| self.scope.serves(tenant))
            .find_map(|tenant| tally.shortfall(visibility, tenant, visibility.pages(tenant)));
        let embedding_model = signature.embedding_model.clone();
        let loaded = tokio::task::spawn_blocking(move || builder.finish(embedding_model, indexed_at))
            .await
            .map_err(|error| IndexError::new(IndexErrorKind::Internal, format!("replica build panicked: {error}")))??;
        Ok((loaded, shortfall))
    }

    /// Adds the records of a loaded page that are served: of a tenant this instance serves, and
    /// of the committed version (`visibility`).
    fn add_served(
        &self,
        builder: &mut IndexBuilder,
        tally: &mut Tally,
        slot: usize,
        records: Vec<wire::StoredRecord>,
        visibility: &Visibility,
    ) -> Result<()> {
        for (record, page_hash) in records {
            if self.scope.serves(&record.meta.tenant_id) && visibility.admits(&record.meta, page_hash.as_deref()) {
                tally.add(slot, &record.meta);
                builder.add(Level::ALL[slot], record)?;
            }
        }
        Ok(())
    }

    async fn poll_signature(&self) -> Result<Signature> {
        let [docs_name, sections_name, chunks_name] = &self.collection_names;
        let (docs, sections, chunks) = tokio::try_join!(
            self.client.collection(docs_name),
            self.client.collection(sections_name),
            self.client.collection(chunks_name),
        )
        .map_err(|error| match error.kind {
            IndexErrorKind::NotFound => IndexError::new(
                IndexErrorKind::NotFound,
                format!("chroma collections {docs_name}/{sections_name}/{chunks_name} not found — run ingest"),
            ),
            IndexErrorKind::Corrupt
            | IndexErrorKind::Unavailable
            | IndexErrorKind::BadRequest
            | IndexErrorKind::Internal => error,
        })?;
        let (docs_count, sections_count, chunks_count) = tokio::try_join!(
            self.client.count(&docs.id),
            self.client.count(&sections.id),
            self.client.count(&chunks.id),
        )?;
        let collection_ids = [docs.id.clone(), sections.id.clone(), chunks.id.clone()];
        *self.collection_ids.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(collection_ids.clone());
        Ok(Signature {
            collection_ids,
            counts: [docs_count, sections_count, chunks_count],
            version: docs.metadata_string(markers::VERSION_KEY).unwrap_or_default().to_string(),
            embedding_model: docs.metadata_string(markers::MODEL_KEY).unwrap_or_default().to_string(),
            indexed_at: docs.metadata_string(markers::INDEXED_AT_KEY).unwrap_or_default().to_string(),
        })
    }

    /// The naive plan: one filtered kNN query answered by Chroma's HNSW index. Kept for the
    /// benchmark's comparison and the contract test of the `where` translation; searches use
    /// the replica.
    pub async fn knn_remote(
        &self,
        level: Level,
        filter: &RecordFilter,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<ScoredRecord>> {
        let Some(where_clause) = wire::where_clause(filter) else {
            return Ok(Vec::new());
        };
        if k == 0 {
            return Ok(Vec::new());
        }
        let collection_id = self.collection_id(level).await?;
        let body = json!({
            "query_embeddings": [query],
            "n_results": k,
            "where": where_clause,
            "include": ["distances", "metadatas", "documents"],
        });
        let response = self.client.query(&collection_id, &body).await?;
        let mut results = wire::scored_records(response)?;
        sort_scored(&mut results);
        Ok(results)
    }
}

#[async_trait]
impl SnapshotSource for ChromaIndex {
    fn backend_name(&self) -> &'static str {
        "chroma"
    }

    fn replica(&self) -> &Replica {
        &self.replica
    }

    async fn poll(self: Arc<Self>) -> Result<bool> {
        self.refresh().await
    }

    /// Refreshes first after a write through this instance, and for the first load; retries a
    /// failed first load at most once per refresh interval without making concurrent searches
    /// wait. With a replica in hand, a search never waits on an unreachable Chroma: the refresher
    /// retries in the background and the search answers from the replica (flagged stale).
    async fn before_read(&self) {
        if self.dirty.load(Ordering::Acquire) {
            let _ = self.refresh().await;
            return;
        }
        let (attempted_at, failing) = self.replica.attempt();
        let retry_due = failing
            && self.replica.current().is_none()
            && attempted_at.is_none_or(|attempted| attempted.elapsed() >= self.refresh_interval);
        // The first load is awaited; a retry is skipped when another task is already refreshing.
        if attempted_at.is_none() || (retry_due && self.reload.try_lock().is_ok()) {
            let _ = self.refresh().await;
        }
    }
}
