//! The in-memory backend: exact cosine and BM25 over a snapshot file (or the bundled demo
//! corpus), reloaded in the background when the file changes without interrupting searches.

use super::replica::{Replica, SnapshotSource};
use super::{IndexError, IndexErrorKind, Result};
use crate::model::Snapshot;
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

mod build;
mod engine;
mod memo;
mod snapshot;

pub use build::{rebuild_tenant, IndexBuilder};
pub use engine::{LoadedIndex, TenantIndex};
pub use snapshot::{read_snapshot_file, write_snapshot_file};

type FileStamp = (SystemTime, u64);

/// The version of a snapshot file: its modification time in nanoseconds since the epoch (what
/// `ingest` prints, and what `/search` reports once the file is loaded).
pub fn file_version(path: &Path) -> Option<u64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(modified.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn file_stamp(path: &Path) -> Option<FileStamp> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// The in-memory backend: a replica of a snapshot file (polled for changes) or of a fixed snapshot.
/// Searches read the current `LoadedIndex` through an `Arc`, so a reload swaps it without
/// blocking or failing requests that are running.
///
/// The snapshot file is one JSON document, so a change is read whole: unlike Chroma's change log
/// it names no tenant, and only re-reading the file tells what changed.
#[derive(Debug)]
pub struct InMemoryIndex {
    path: Option<PathBuf>,
    replica: Replica,
    /// The file's modification time and size when it was last read.
    stamp: Mutex<Option<FileStamp>>,
    /// The tenants loaded from the file (`RETR_TENANTS`).
    scope: super::scope::TenantScope,
}

impl InMemoryIndex {
    /// An index over a fixed snapshot (the bundled demo corpus, tests); never reloads.
    pub fn from_snapshot(snapshot: Snapshot) -> Result<Self> {
        let loaded = LoadedIndex::build(snapshot)?;
        Ok(Self {
            path: None,
            replica: Replica::fixed(Arc::new(loaded), None, None),
            stamp: Mutex::new(None),
            scope: Default::default(),
        })
    }

    /// An index backed by a snapshot file. A missing or corrupt file is not fatal: the error is
    /// kept and reported by searches and `/health` until a valid file appears.
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        Self::from_file_scoped(path, super::scope::TenantScope::All)
    }

    /// `from_file`, keeping only the tenants of `scope` from every load.
    pub fn from_file_scoped(path: impl Into<PathBuf>, scope: super::scope::TenantScope) -> Self {
        let index = Self { path: Some(path.into()), replica: Replica::refreshed(), stamp: Mutex::new(None), scope };
        index.reload_if_changed();
        index
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Reloads the file when its modification time or size changed. A failed load keeps the
    /// previously loaded index serving and records the error. Blocking; returns true on a reload.
    pub fn reload_if_changed(&self) -> bool {
        let Some(path) = &self.path else { return false };
        let stamp = file_stamp(path);
        let mut known = self.stamp.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if stamp.is_some() && *known == stamp {
            // Unchanged: current if it loaded, still broken (and its error kept) if it did not.
            if self.replica.last_error().is_none() {
                self.replica.confirm(None);
            }
            return false;
        }
        let started = std::time::Instant::now();
        let version = file_version(path);
        let result = read_snapshot_file(path)
            .map(|mut snapshot| {
                self.scope.retain(&mut snapshot);
                snapshot
            })
            .and_then(LoadedIndex::build);
        *known = stamp;
        match result {
            Ok(loaded) => {
                tracing::info!(path = %path.display(), "index snapshot loaded");
                let records = loaded.record_count() as u64;
                self.replica.swap(Arc::new(loaded), version, started.elapsed(), records);
                super::replica::release_freed_memory();
                true
            }
            Err(error) => {
                self.replica.fail(error);
                false
            }
        }
    }

    /// Polls the snapshot file every `interval` on a blocking thread until the index is dropped.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration) {
        if self.path.is_some() {
            super::replica::spawn_refresher(self, interval);
        }
    }

    /// The error of the last load attempt, when it failed (also while an older index still serves).
    pub fn last_error(&self) -> Option<IndexError> {
        self.replica.last_error()
    }
}

#[async_trait]
impl SnapshotSource for InMemoryIndex {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Re-reads the file when it changed, on a blocking thread (the file is read and parsed whole).
    async fn poll(self: Arc<Self>) -> Result<bool> {
        tokio::task::spawn_blocking(move || self.reload_if_changed()).await.map_err(|error| {
            IndexError::new(IndexErrorKind::Internal, format!("snapshot reload task panicked: {error}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::engine::*;
    use super::*;
    use crate::embed::PseudoEmbedder;
    use crate::fixtures;
    use crate::index::VectorIndex;
    use crate::index::{IndexErrorKind, RecordFilter, ScoredRecord};
    use crate::model::{Level, Record, Snapshot};

    /// The definition the index must reproduce: every record of the level that passes the
    /// filter, scored by the rounded cosine, best first with ties by id, cut at `k`.
    fn reference_knn(
        snapshot: &Snapshot,
        level: Level,
        filter: &RecordFilter,
        query: &[f32],
        k: usize,
    ) -> Vec<(String, f32)> {
        let mut scored: Vec<ScoredRecord> = snapshot
            .records(level)
            .iter()
            .filter(|record| filter.matches(&record.meta))
            .map(|record| {
                let score = super::super::cosine(query, &record.embedding);
                ScoredRecord { record: Arc::new(record.clone()).into(), score: (score * 1e6).round() / 1e6 }
            })
            .collect();
        super::super::sort_scored(&mut scored);
        scored.into_iter().take(k).map(|s| (s.record.id.clone(), s.score)).collect()
    }

    fn ids_and_scores(results: &[ScoredRecord]) -> Vec<(String, f32)> {
        results.iter().map(|s| (s.record.id.clone(), s.score)).collect()
    }

    fn filters() -> Vec<RecordFilter> {
        let t1 = RecordFilter::tenant("t1");
        vec![
            t1.clone(),
            RecordFilter::tenant("t2"),
            RecordFilter::tenant("nobody"),
            RecordFilter { doc_ids: Some(vec!["sdk/ios/install".into(), "docs/admin/tags".into()]), ..t1.clone() },
            RecordFilter {
                section_ids: Some(vec!["docs/admin/tags#s1".into(), "sdk/ios/install#s2".into()]),
                ..t1.clone()
            },
            RecordFilter {
                doc_ids: Some(vec!["docs/admin/tags".into()]),
                section_ids: Some(vec!["docs/admin/tags#s1".into(), "sdk/ios/install#s1".into()]),
                ..t1.clone()
            },
            RecordFilter { doc_ids: Some(vec!["acme/secret-install".into()]), ..t1.clone() },
            RecordFilter { product: Some("sdk".into()), ..t1.clone() },
            RecordFilter { tags: vec!["ios".into()], doc_ids: Some(vec!["sdk/ios/install".into()]), ..t1 },
        ]
    }

    #[test]
    fn restricted_rankings_read_after_a_tenant_wide_one_agree_with_their_definitions() {
        // A tenant-wide ranking leaves its scores to the thread; a restricted ranking of the same
        // query reads them, and of another query must not.
        let snapshot = fixtures::snapshot();
        let index = LoadedIndex::build(snapshot.clone()).unwrap();
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let (first, second) = (embedder.embed_one("установка SDK на iOS"), embedder.embed_one("теги"));
        let (first_terms, second_terms) = (crate::text::terms("установка тегов"), crate::text::terms("android"));
        let everything = RecordFilter::tenant("t1");
        for level in Level::ALL {
            for filter in filters().into_iter().filter(|filter| filter.tenant_id == "t1") {
                for (query, other) in [(&first, &second), (&second, &first)] {
                    index.knn(level, &everything, query, 100).unwrap();
                    let got = ids_and_scores(&index.knn(level, &filter, query, 100).unwrap());
                    assert_eq!(got, reference_knn(&snapshot, level, &filter, query, 100), "{level:?} {filter:?}");
                    let got = ids_and_scores(&index.knn(level, &filter, other, 100).unwrap());
                    assert_eq!(got, reference_knn(&snapshot, level, &filter, other, 100), "{level:?} {filter:?}");
                }
                for (terms, other) in [(&first_terms, &second_terms), (&second_terms, &first_terms)] {
                    let all = ids_and_scores(&index.lexical(level, &everything, terms, usize::MAX));
                    let allowed: Vec<String> =
                        index.get(level, &filter, usize::MAX).iter().map(|record| record.id.clone()).collect();
                    let mut expected = all.clone();
                    expected.retain(|(id, _)| allowed.contains(id));
                    assert_eq!(ids_and_scores(&index.lexical(level, &filter, terms, usize::MAX)), expected);
                    let fresh = ids_and_scores(&index.lexical(level, &filter, other, usize::MAX));
                    index.lexical(level, &RecordFilter::tenant("t2"), other, usize::MAX);
                    assert_eq!(ids_and_scores(&index.lexical(level, &filter, other, usize::MAX)), fresh);
                }
            }
        }
    }

    #[test]
    fn pages_are_numbered_in_doc_id_order_across_the_levels_of_a_tenant() {
        let index = LoadedIndex::build(fixtures::snapshot()).unwrap();
        for tenant in ["t1", "t2"] {
            let tenant = index.tenant(tenant).unwrap();
            let mut pages: Vec<(String, u32, Arc<()>)> = Vec::new();
            for level in Level::ALL {
                let data = tenant.level(level);
                for (record, features) in data.store.records.iter().zip(&data.store.features) {
                    let page = features.page.as_ref().expect("every record has a page number");
                    pages.push((record.meta.doc_id.clone(), page.number, Arc::clone(&page.scope)));
                }
            }
            assert!(pages.iter().all(|(.., scope)| Arc::ptr_eq(scope, &pages[0].2)), "one scope per tenant build");
            let mut doc_ids: Vec<&str> = pages.iter().map(|(doc_id, ..)| doc_id.as_str()).collect();
            doc_ids.sort_unstable();
            doc_ids.dedup();
            for (doc_id, number, _) in &pages {
                assert_eq!(doc_ids[*number as usize], doc_id, "the number is the page's place in doc id order");
            }
        }
        let scope_of = |tenant: &str| {
            Arc::clone(&index.tenant(tenant).unwrap().level(Level::Doc).store.features[0].page.as_ref().unwrap().scope)
        };
        assert!(!Arc::ptr_eq(&scope_of("t1"), &scope_of("t2")), "numbers of two tenants never compare");
    }

    #[test]
    fn id_lists_resolved_for_one_tenant_are_not_reused_for_another() {
        // The thread remembers the last id lists it resolved; the same lists asked of another
        // tenant (or another level) must resolve there, never to the first tenant's records.
        let snapshot = fixtures::snapshot();
        let index = LoadedIndex::build(snapshot.clone()).unwrap();
        let query = PseudoEmbedder::new(fixtures::DIMENSION).embed_one("установка SDK");
        let terms = crate::text::terms("установка sdk gradle");
        let ids = Some(vec!["acme/secret-install".to_string(), "sdk/ios/install".to_string()]);
        for level in Level::ALL {
            for tenant in ["t1", "t2", "t1", "nobody", "t2"] {
                let filter = RecordFilter { doc_ids: ids.clone(), ..RecordFilter::tenant(tenant) };
                let dense = ids_and_scores(&index.knn(level, &filter, &query, 100).unwrap());
                assert_eq!(dense, reference_knn(&snapshot, level, &filter, &query, 100), "{level:?} {tenant}");
                let lexical = index.lexical(level, &filter, &terms, 100);
                assert!(lexical.iter().all(|s| s.record.meta.tenant_id == tenant), "{level:?} {tenant}");
                let expected: Vec<&str> = if tenant == "nobody" {
                    Vec::new()
                } else if tenant == "t1" {
                    vec!["sdk/ios/install"]
                } else {
                    vec!["acme/secret-install"]
                };
                let got = index.get(level, &filter, 100);
                let mut got_docs: Vec<&str> = got.iter().map(|r| r.meta.doc_id.as_str()).collect();
                got_docs.dedup();
                assert_eq!(got_docs, expected, "{level:?} {tenant}");
                assert!(!dense.is_empty() || tenant == "nobody", "{level:?} {tenant}");
            }
        }
    }

    #[test]
    fn knn_get_and_lexical_agree_with_their_definitions() {
        let snapshot = fixtures::snapshot();
        let index = LoadedIndex::build(snapshot.clone()).unwrap();
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let queries =
            [embedder.embed_one("установка SDK на iOS"), embedder.embed_one("теги"), vec![0.0; fixtures::DIMENSION]];
        let terms = crate::text::terms("установка тегов Android");
        for level in Level::ALL {
            for filter in filters() {
                let mut expected_ids: Vec<&Record> =
                    snapshot.records(level).iter().filter(|record| filter.matches(&record.meta)).collect();
                expected_ids.sort_by(|a, b| a.id.cmp(&b.id));
                let got: Vec<String> = index.get(level, &filter, usize::MAX).iter().map(|r| r.id.clone()).collect();
                assert_eq!(got, expected_ids.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), "{level:?} {filter:?}");
                for query in &queries {
                    for k in [1, 3, 100] {
                        let got = ids_and_scores(&index.knn(level, &filter, query, k).unwrap());
                        assert_eq!(
                            got,
                            reference_knn(&snapshot, level, &filter, query, k),
                            "{level:?} {filter:?} k={k}"
                        );
                    }
                }
                // BM25 statistics are the tenant's: a filter only removes records from the list.
                let everything = RecordFilter::tenant(filter.tenant_id.clone());
                let mut expected = ids_and_scores(&index.lexical(level, &everything, &terms, usize::MAX));
                let allowed: Vec<String> = expected_ids.iter().map(|r| r.id.clone()).collect();
                expected.retain(|(id, _)| allowed.contains(id));
                expected.truncate(2);
                assert_eq!(ids_and_scores(&index.lexical(level, &filter, &terms, 2)), expected, "{level:?} {filter:?}");
            }
        }
    }

    #[test]
    fn a_streamed_load_searches_like_a_snapshot_and_keeps_one_copy_of_a_repeated_record() {
        let snapshot = fixtures::snapshot();
        let whole = LoadedIndex::build(snapshot.clone()).unwrap();
        // Pages arrive in any order, across levels, and offset paging may repeat a record.
        let mut builder = IndexBuilder::new(0);
        for (level, records) in Level::ALL.into_iter().zip([&snapshot.docs, &snapshot.sections, &snapshot.chunks]).rev()
        {
            for record in records.iter().rev().chain(records.first()) {
                builder.add(level, record.clone()).unwrap();
            }
        }
        let streamed = builder.finish(snapshot.embedding_model.clone(), snapshot.indexed_at.clone()).unwrap();
        assert_eq!(streamed.level_counts(), whole.level_counts());
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let query = embedder.embed_one("установка SDK");
        let terms = crate::text::terms("установка SDK");
        for level in Level::ALL {
            let filter = RecordFilter::tenant("t1");
            let got = ids_and_scores(&streamed.knn(level, &filter, &query, 100).unwrap());
            assert_eq!(got, ids_and_scores(&whole.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
            let got = ids_and_scores(&streamed.lexical(level, &filter, &terms, 100));
            assert_eq!(got, ids_and_scores(&whole.lexical(level, &filter, &terms, 100)), "{level:?}");
        }
        let mut bad = fixtures::snapshot().chunks[0].clone();
        bad.embedding.pop();
        let error = IndexBuilder::new(fixtures::DIMENSION).add(Level::Chunk, bad).unwrap_err();
        assert_eq!(error.kind, IndexErrorKind::Corrupt);
        let empty = IndexBuilder::new(0).finish(String::new(), String::new()).unwrap_err();
        assert_eq!(empty.kind, IndexErrorKind::Corrupt);
    }

    /// A tenant rebuilt from a delta scores exactly like one built from the whole snapshot: kept
    /// records' vectors come back from the scan matrix unchanged, the changed doc's are the new ones.
    #[test]
    fn a_rebuilt_tenant_searches_like_a_fresh_build() {
        let snapshot = fixtures::snapshot();
        let base = LoadedIndex::build(snapshot.clone()).unwrap();
        let changed_doc = snapshot.docs.iter().find(|doc| doc.meta.tenant_id == "t1").unwrap().meta.doc_id.clone();
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let mut next = snapshot.clone();
        let mut fetched: [Vec<Record>; 3] = Default::default();
        for (slot, level) in Level::ALL.into_iter().enumerate() {
            let records = match level {
                Level::Doc => &mut next.docs,
                Level::Section => &mut next.sections,
                Level::Chunk => &mut next.chunks,
            };
            for record in records.iter_mut().filter(|r| r.meta.tenant_id == "t1" && r.meta.doc_id == changed_doc) {
                record.text = format!("{} обновлено", record.text);
                record.embedding = embedder.embed_one(&record.text);
                fetched[slot].push(record.clone());
            }
        }
        let scope = super::super::chroma::ChangeScope::Docs([changed_doc].into());
        let part = rebuild_tenant(&base, "t1", &scope, fetched, base.dimension()).unwrap();
        let rebuilt = base.with_tenants(vec![("t1".to_string(), part)]);
        let fresh = LoadedIndex::build(next).unwrap();
        let query = embedder.embed_one("обновлено установка");
        let terms = crate::text::terms("обновлено установка");
        for level in Level::ALL {
            for tenant in ["t1", "t2"] {
                let filter = RecordFilter::tenant(tenant);
                let got = ids_and_scores(&rebuilt.knn(level, &filter, &query, 100).unwrap());
                assert_eq!(got, ids_and_scores(&fresh.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
                let got = ids_and_scores(&rebuilt.lexical(level, &filter, &terms, 100));
                assert_eq!(got, ids_and_scores(&fresh.lexical(level, &filter, &terms, 100)), "{level:?}");
            }
        }
        assert!(Arc::ptr_eq(rebuilt.tenant("t2").unwrap(), base.tenant("t2").unwrap()), "t2 is shared, not copied");
    }

    #[tokio::test]
    async fn a_pinned_snapshot_stays_the_same_across_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        let index = InMemoryIndex::from_file(&path);
        let pinned = index.pin().await.expect("a loaded snapshot pins");
        let mut smaller = fixtures::snapshot();
        smaller.docs.retain(|record| record.meta.tenant_id == "t1");
        smaller.sections.retain(|record| record.meta.tenant_id == "t1");
        smaller.chunks.retain(|record| record.meta.tenant_id == "t1");
        // A different size, so the reload sees a change even within the file time's resolution.
        write_snapshot_file(&path, &smaller).unwrap();
        assert!(index.reload_if_changed());
        assert!(!index.tenant_exists("t2").await.unwrap(), "the index moved on");
        assert!(pinned.tenant_exists("t2").await.unwrap(), "the pinned snapshot did not");
        let filter = RecordFilter::tenant("t2");
        assert_eq!(pinned.get(Level::Doc, &filter, 10).await.unwrap().len(), 1);
    }

    fn directory_listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().to_string_lossy().into()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_failed_snapshot_write_leaves_no_temporary_file_and_the_old_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should go: everything works up to the rename, which fails.
        let path = dir.path().join("index.json");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), "x").unwrap();
        assert!(write_snapshot_file(&path, &fixtures::snapshot()).is_err());
        assert_eq!(directory_listing(dir.path()), ["index.json"], "no temporary file left behind");

        let path = dir.path().join("ok.json");
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        // A writer killed mid-write (its process is gone) left its temporary file: the next write
        // removes it; a live writer's (this process's) is left alone.
        let abandoned = dir.path().join(".ok.json.tmp-4294967-0");
        let live = dir.path().join(format!(".ok.json.tmp-{}-999", std::process::id()));
        std::fs::write(&abandoned, "{").unwrap();
        std::fs::write(&live, "{").unwrap();
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        assert!(!abandoned.exists(), "the killed writer's temporary file is removed");
        assert!(live.exists());
        assert_eq!(read_snapshot_file(&path).unwrap().docs.len(), fixtures::snapshot().docs.len());
    }
}
