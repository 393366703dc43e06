//! The in-memory backend: a replica of a snapshot file (or of the bundled demo corpus), searched
//! by the in-memory index (`index::memory`) and reloaded in the background when the file changes,
//! without interrupting searches.

use super::memory::{load_snapshot_file, LoadedIndex};
use super::replica::{Replica, SnapshotSource};
use super::{IndexError, IndexErrorKind, Result};
use crate::model::Snapshot;
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

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
    scope: crate::scope::TenantScope,
    /// Where the local copy of each load is kept (`memory::local_copy`), when it is.
    copy_dir: Option<PathBuf>,
}

impl InMemoryIndex {
    /// An index over a fixed snapshot (the bundled demo corpus, tests); never reloads.
    pub fn from_snapshot(snapshot: Snapshot) -> Result<Self> {
        let loaded = LoadedIndex::build(snapshot)?;
        Ok(Self {
            path: None,
            replica: Replica::fixed(Arc::new(loaded), None),
            stamp: Mutex::new(None),
            scope: Default::default(),
            copy_dir: None,
        })
    }

    /// This fixed index with tenant-wide rankings of levels of `min_records` records and more (0:
    /// none) taken from their partitions, all built here first, so that every search — the
    /// first one too — ranks alike (`eval`).
    pub(crate) fn approximate_from(self, min_records: usize) -> Self {
        self.replica.set_approximate_min_records(min_records);
        if let Ok(loaded) = self.replica.snapshot() {
            loaded.build_partitions(min_records, Duration::from_secs(3600));
        }
        self
    }

    /// An index backed by a snapshot file. A missing or corrupt file is not fatal: the error is
    /// kept and reported by searches and `/health` until a valid file appears.
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        Self::from_file_scoped(path, crate::scope::TenantScope::All)
    }

    /// `from_file`, keeping only the tenants of `scope` from every load.
    pub fn from_file_scoped(path: impl Into<PathBuf>, scope: crate::scope::TenantScope) -> Self {
        Self::from_file_with(path, scope, false)
    }

    /// `from_file_scoped`; with `local_copy`, every load is also kept as a binary copy in the
    /// directory `<path>.copy` (`memory::local_copy`), which the next start reads instead of the
    /// file as long as the file is unchanged (same size and modification time).
    pub fn from_file_with(path: impl Into<PathBuf>, scope: crate::scope::TenantScope, local_copy: bool) -> Self {
        let path = path.into();
        let copy_dir = local_copy.then(|| {
            let mut name = path.as_os_str().to_owned();
            name.push(".copy");
            PathBuf::from(name)
        });
        let index = Self { path: Some(path), replica: Replica::refreshed(), stamp: Mutex::new(None), scope, copy_dir };
        index.reload_if_changed();
        index
    }

    /// What a local copy of the file as it is now must say it copies: its size, its modification
    /// time and the tenants kept from it.
    fn copy_source(&self, stamp: Option<FileStamp>) -> Option<String> {
        let (modified, size) = stamp?;
        let nanos = modified.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
        Some(format!("{size} bytes, modified {nanos}, tenants {:?}", self.scope))
    }

    /// The local copy of the file as it is now, when there is a whole one.
    fn read_copy(&self, source: Option<&str>) -> Option<LoadedIndex> {
        let (directory, source) = (self.copy_dir.as_ref()?, source?);
        match super::memory::local_copy::read(directory, source) {
            Ok(copy) => copy,
            Err(error) => {
                tracing::warn!(directory = %directory.display(), %error, "local copy of the index unreadable; reading the snapshot");
                None
            }
        }
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
        let source = self.copy_source(stamp);
        let copy = self.read_copy(source.as_deref());
        let from_copy = copy.is_some();
        let result = match copy {
            Some(loaded) => Ok(loaded),
            None => {
                load_snapshot_file(path, &|record| self.scope.serves(&record.meta.tenant_id), self.replica.current())
            }
        };
        *known = stamp;
        match result {
            Ok(loaded) => {
                tracing::info!(path = %path.display(), from_copy, seconds = started.elapsed().as_secs_f64(), "index snapshot loaded");
                let records = loaded.record_count() as u64;
                let loaded = Arc::new(loaded);
                self.replica.swap(Arc::clone(&loaded), version, started.elapsed(), records);
                super::memory::release_freed_memory();
                if let (false, Some(directory), Some(source)) = (from_copy, &self.copy_dir, &source) {
                    write_copy_in_background(directory.clone(), source.clone(), loaded);
                }
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

/// Writes the local copy of `loaded` on a thread of its own, so that serving starts (or a reload
/// is swapped in) without waiting for it; copies are written one at a time (`local_copy::write`).
fn write_copy_in_background(directory: PathBuf, source: String, loaded: Arc<LoadedIndex>) {
    let spawned = std::thread::Builder::new().name("local-copy".into()).spawn(move || {
        super::memory::local_copy::give_way_to_searches();
        let started = std::time::Instant::now();
        match super::memory::local_copy::write(&directory, &source, &loaded) {
            Ok(()) => tracing::info!(directory = %directory.display(), seconds = started.elapsed().as_secs_f64(), "local copy of the index written"),
            Err(error) => tracing::warn!(directory = %directory.display(), %error, "local copy of the index not written"),
        }
    });
    if let Err(error) = spawned {
        tracing::warn!(%error, "local copy of the index not written: no thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::index::memory::{local_copy, write_snapshot_file};
    use crate::index::{RecordFilter, VectorIndex};
    use crate::model::Level;

    fn directory_listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().to_string_lossy().into()).collect();
        names.sort();
        names
    }

    fn manifest_source(manifest: &str) -> &str {
        let start = manifest.find("\"source\":\"").expect("a source") + "\"source\":\"".len();
        &manifest[start..start + manifest[start..].find('"').expect("a closing quote")]
    }

    /// `index_version` (the file's modification time) never goes backwards: not for a write after
    /// the clock went back, nor for a served index when an older file is put in place.
    #[test]
    fn the_index_version_never_goes_backwards() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("index.json");
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        // The file was written by a clock an hour ahead of this one (or this clock went back).
        let ahead = std::time::SystemTime::now() + Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(ahead).unwrap();
        let before = file_version(&path).unwrap();
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        let written = file_version(&path).unwrap();
        assert!(written > before, "{written} after {before}");

        let index = InMemoryIndex::from_file_with(&path, crate::scope::TenantScope::All, false);
        assert_eq!(index.replica().version(), Some(written));
        // An older file put in place (a backup restored with its times): it is served, but the
        // version stays where it was.
        let mut older = fixtures::snapshot();
        older.docs.pop();
        write_snapshot_file(&directory.path().join("backup.json"), &older).unwrap();
        std::fs::rename(directory.path().join("backup.json"), &path).unwrap();
        let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(an_hour_ago).unwrap();
        assert!(index.reload_if_changed());
        assert_eq!(index.replica().version(), Some(written));
    }

    /// A service restarted over an unchanged snapshot file starts from the copy and answers the
    /// same; once the file changes, the new file is read (not the stale copy) and copied again.
    #[test]
    fn a_file_index_restarts_from_its_copy_until_the_file_changes() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("index.json");
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        let scope = crate::scope::TenantScope::All;
        let first = InMemoryIndex::from_file_with(&path, scope.clone(), true);
        let copy_dir = directory.path().join("index.json.copy");
        // The copy is written in the background once the file is loaded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !copy_dir.join("manifest.json").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(copy_dir.join("manifest.json").exists());
        let restarted = InMemoryIndex::from_file_with(&path, scope.clone(), true);
        let (a, b) = (first.replica().snapshot().unwrap(), restarted.replica().snapshot().unwrap());
        assert_eq!(a.level_counts(), b.level_counts());

        // A damaged copy is not served: the file is read instead (and the copy written again).
        let manifest = std::fs::read_to_string(copy_dir.join("manifest.json")).unwrap();
        for name in directory_listing(&copy_dir).iter().filter(|name| name.ends_with(".bin")) {
            std::fs::write(copy_dir.join(name), b"RSCOPY02 but nothing else").unwrap();
        }
        let after_damage = InMemoryIndex::from_file_with(&path, scope.clone(), true);
        assert_eq!(after_damage.replica().snapshot().unwrap().level_counts(), a.level_counts());
        assert!(after_damage.replica().last_error().is_none());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while local_copy::read(&copy_dir, manifest_source(&manifest)).ok().flatten().is_none() {
            assert!(std::time::Instant::now() < deadline, "the copy was not written again");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }

        let mut smaller = fixtures::snapshot();
        smaller.docs.retain(|doc| doc.meta.tenant_id != "t2");
        smaller.sections.retain(|record| record.meta.tenant_id != "t2");
        smaller.chunks.retain(|record| record.meta.tenant_id != "t2");
        // A different size, so the stamp differs even within the file system's time resolution.
        write_snapshot_file(&path, &smaller).unwrap();
        let after_change = InMemoryIndex::from_file_with(&path, scope, true);
        let loaded = after_change.replica().snapshot().unwrap();
        assert_eq!(loaded.level_counts(), LoadedIndex::build(smaller).unwrap().level_counts());
        assert!(loaded.tenant("t2").is_none());
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
}
