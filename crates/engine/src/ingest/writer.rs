//! Writing an ingest run: replace one tenant's records from one source and keep everything else.
//!
//! Source ownership: a tree's doc ids are `{source_name}/{path}`, so a doc belongs to source S
//! of tenant T when its doc id starts with `S/`; a JSONL record without its own `source` field
//! has `source == S`. Replacing a source removes every record (all levels) of the tenant whose
//! doc belongs to the source or whose doc id is among the new docs, then adds the new records:
//! pages deleted from the tree disappear, re-ingesting gives no duplicates, other tenants and
//! sources stay untouched. (JSONL records carrying their own `source` are replaced by id only.)
//!
//! Pages are content-hashed (`page_hashes`): a writer that knows the hashes of the version it
//! holds (`IndexWriter::stored_pages`) lets a run skip embedding and writing the pages that did
//! not change (`IngestBatch::kept_pages`).

use super::records::RecordSet;
use super::IngestError;
use crate::index::memory::{read_snapshot_file, write_snapshot_file};
use crate::index::IndexErrorKind;
use crate::model::{Metadata, Record, SharedStr, Snapshot};
use async_trait::async_trait;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// Which records an ingest run owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceScope {
    pub tenant_id: String,
    pub source_name: String,
}

impl SourceScope {
    /// True when the record with `meta` came from this tenant's source.
    pub(crate) fn owns(&self, meta: &Metadata) -> bool {
        meta.tenant_id == self.tenant_id
            && (meta.source == self.source_name
                || meta.doc_id.strip_prefix(self.source_name.as_str()).is_some_and(|rest| rest.starts_with('/')))
    }
}

/// The embedded records of one run, with the model that embedded them.
#[derive(Debug, Clone)]
pub struct IngestBatch {
    pub records: RecordSet,
    pub embedding_model: String,
    pub dimension: usize,
    pub indexed_at: String,
    /// Pages of this run (doc id → page hash) that the index already holds unchanged
    /// (`IndexWriter::stored_pages`): their records are not in `records` and stay as stored.
    pub kept_pages: BTreeMap<String, String>,
}

/// The content hash of each page (doc) in `records`: over the embedding model and, on every
/// level, each record's id, text and metadata except `indexed_at` (not the vectors, so it is
/// known before embedding). An equal hash means the stored page is this one.
pub fn page_hashes(records: &RecordSet, embedding_model: &str) -> BTreeMap<String, String> {
    let mut pages: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for record in records.docs.iter().chain(&records.sections).chain(&records.chunks) {
        pages.entry(record.meta.doc_id.as_str()).or_default().push(record);
    }
    pages
        .into_iter()
        .map(|(doc_id, mut page)| {
            page.sort_by(|a, b| (a.level() as u8, a.id.as_str()).cmp(&(b.level() as u8, b.id.as_str())));
            let mut hasher = Sha256::new();
            hasher.update(embedding_model.as_bytes());
            for record in page {
                let meta = Metadata { indexed_at: SharedStr::default(), ..record.meta.clone() };
                hasher.update([0]);
                hasher.update(record.id.as_bytes());
                hasher.update([0]);
                hasher.update(record.text.as_bytes());
                hasher.update([0]);
                hasher.update(serde_json::to_vec(&meta).unwrap_or_default());
            }
            // 128 bits: a collision between two versions of one page is not a concern.
            let hash: String = hasher.finalize()[..16].iter().map(|byte| format!("{byte:02x}")).collect();
            (doc_id.to_string(), hash)
        })
        .collect()
}

/// `records` without the records of `docs`.
pub fn without_pages(records: RecordSet, docs: &BTreeMap<String, String>) -> RecordSet {
    let keep = |level: Vec<Record>| -> Vec<Record> {
        level.into_iter().filter(|record| !docs.contains_key(record.meta.doc_id.as_str())).collect()
    };
    RecordSet { docs: keep(records.docs), sections: keep(records.sections), chunks: keep(records.chunks) }
}

/// What a writer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Where the data went (snapshot path, Chroma URL + collections).
    pub location: String,
    /// Size of the written file, for file backends.
    pub bytes: Option<u64>,
    /// Docs of this source that were in the index before and are not any more.
    pub removed_docs: usize,
    /// The index version this write produced (read-your-writes: a search may ask for it as
    /// `min_index_version`).
    pub version: Option<u64>,
}

/// A backend an ingest run can write to (the snapshot file here; Chroma implements it too).
///
/// `replace_source` must follow the ownership rule of this module, refuse vectors of another
/// dimension than the stored ones with `IngestError::DimensionMismatch`, and leave the index
/// unchanged when it fails.
#[async_trait]
pub trait IndexWriter: Send + Sync {
    async fn replace_source(&self, scope: &SourceScope, batch: IngestBatch) -> Result<WriteOutcome, IngestError>;

    /// The page hashes (`page_hashes`) of the version of `scope` the index holds now; a run
    /// neither embeds nor writes the pages whose hash is unchanged. None by default.
    async fn stored_pages(&self, _scope: &SourceScope) -> Result<BTreeMap<String, String>, IngestError> {
        Ok(BTreeMap::new())
    }
}

/// Writes the in-memory backend's snapshot file atomically.
#[derive(Debug, Clone)]
pub struct SnapshotWriter {
    pub path: PathBuf,
}

#[async_trait]
impl IndexWriter for SnapshotWriter {
    async fn replace_source(&self, scope: &SourceScope, batch: IngestBatch) -> Result<WriteOutcome, IngestError> {
        let path = self.path.clone();
        let scope = scope.clone();
        tokio::task::spawn_blocking(move || {
            // Read, merge and rename under the file's lock: a second writer waits for the first
            // to finish and then merges into what it wrote, so neither run's records are lost.
            let _lock = lock_snapshot(&path)?;
            let existing = match read_snapshot_file(&path) {
                Ok(snapshot) => Some(snapshot),
                Err(error) if error.kind == IndexErrorKind::NotFound => None,
                Err(error) => {
                    return Err(IngestError::Snapshot(format!(
                        "existing snapshot {} cannot be read ({error}); move it away to start a new one",
                        path.display()
                    )))
                }
            };
            let (snapshot, removed_docs) = merge_snapshot(existing, &scope, batch)?;
            write_snapshot_file(&path, &snapshot)
                .map_err(|error| IngestError::Snapshot(format!("cannot write {}: {error}", path.display())))?;
            let bytes = std::fs::metadata(&path).ok().map(|m| m.len());
            let version = crate::index::file_index::file_version(&path);
            Ok(WriteOutcome { location: path.display().to_string(), bytes, removed_docs, version })
        })
        .await
        .map_err(|error| IngestError::Internal(format!("snapshot writer task failed: {error}")))?
    }
}

/// Takes the exclusive lock of the snapshot at `path`: an advisory lock on `.{name}.lock` beside
/// it, held by every ingest writing the file and released when the returned file is dropped (also
/// when the process dies, so a killed writer never leaves the lock held). Waits while another
/// ingest holds it, saying so once.
fn lock_snapshot(path: &std::path::Path) -> Result<std::fs::File, IngestError> {
    let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("snapshot.json");
    let lock_path = directory.join(format!(".{name}.lock"));
    let cannot = |error: std::io::Error| IngestError::Snapshot(format!("cannot lock {}: {error}", lock_path.display()));
    std::fs::create_dir_all(directory).map_err(cannot)?;
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(cannot)?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            tracing::warn!(path = %path.display(), "another ingest is writing this snapshot; waiting for it to finish");
        }
        Err(std::fs::TryLockError::Error(error)) => return Err(cannot(error)),
    }
    file.lock().map_err(cannot)?;
    Ok(file)
}

/// Merges a run into an existing snapshot (or a new one); returns it and the number of docs of
/// the source that were removed. Mixing dimensions or models with records that stay is refused.
pub(crate) fn merge_snapshot(
    existing: Option<Snapshot>,
    scope: &SourceScope,
    batch: IngestBatch,
) -> Result<(Snapshot, usize), IngestError> {
    let mut snapshot =
        existing.unwrap_or_else(|| Snapshot { format_version: Snapshot::FORMAT_VERSION, ..Snapshot::default() });
    let kept: HashSet<&str> = batch.kept_pages.keys().map(String::as_str).collect();
    let new_doc_ids: HashSet<&str> =
        batch.records.docs.iter().map(|r| r.meta.doc_id.as_str()).chain(kept.iter().copied()).collect();
    let replaced: HashSet<String> = snapshot
        .docs
        .iter()
        .chain(&snapshot.sections)
        .chain(&snapshot.chunks)
        .filter(|r| {
            r.meta.tenant_id == scope.tenant_id
                && !kept.contains(r.meta.doc_id.as_str())
                && (scope.owns(&r.meta) || new_doc_ids.contains(r.meta.doc_id.as_str()))
        })
        .map(|r| r.meta.doc_id.to_string())
        .collect();
    let removed_docs = replaced.iter().filter(|id| !new_doc_ids.contains(id.as_str())).count();
    let keep =
        |record: &Record| !(record.meta.tenant_id == scope.tenant_id && replaced.contains(record.meta.doc_id.as_str()));
    snapshot.docs.retain(keep);
    snapshot.sections.retain(keep);
    snapshot.chunks.retain(keep);
    if let Some(kept) = snapshot.docs.first().or(snapshot.chunks.first()) {
        let kept_dimension = kept.embedding.len();
        if kept_dimension != batch.dimension {
            return Err(IngestError::DimensionMismatch { existing: kept_dimension, new: batch.dimension });
        }
        if !snapshot.embedding_model.is_empty() && snapshot.embedding_model != batch.embedding_model {
            return Err(IngestError::ModelMismatch {
                existing: snapshot.embedding_model.clone(),
                new: batch.embedding_model,
            });
        }
    }
    let records = batch.records;
    snapshot.docs.extend(records.docs);
    snapshot.sections.extend(records.sections);
    snapshot.chunks.extend(records.chunks);
    for level in [&mut snapshot.docs, &mut snapshot.sections, &mut snapshot.chunks] {
        level.sort_by(|a, b| {
            (a.meta.tenant_id.as_str(), a.id.as_str()).cmp(&(b.meta.tenant_id.as_str(), b.id.as_str()))
        });
    }
    snapshot.format_version = Snapshot::FORMAT_VERSION;
    snapshot.embedding_model = batch.embedding_model;
    snapshot.dimension = batch.dimension;
    snapshot.indexed_at = batch.indexed_at;
    Ok((snapshot, removed_docs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str, indexed_at: &str) -> RecordSet {
        let meta = Metadata {
            tenant_id: "t".into(),
            doc_id: "docs/a.md".into(),
            indexed_at: indexed_at.into(),
            ..Metadata::default()
        };
        let section = Metadata { section_id: Some("docs/a.md#s0".into()), ..meta.clone() };
        let record = |id: &str, meta: &Metadata, embedding: f32| Record {
            id: id.into(),
            meta: meta.clone(),
            text: text.into(),
            embedding: vec![embedding],
        };
        RecordSet {
            docs: vec![record("docs/a.md", &meta, 1.0)],
            sections: vec![record("docs/a.md#s0", &section, 2.0)],
            chunks: Vec::new(),
        }
    }

    #[test]
    fn a_page_hash_changes_with_content_and_model_only() {
        let hash = |records: &RecordSet, model: &str| page_hashes(records, model)["docs/a.md"].clone();
        let first = hash(&page("text", "2026-01-01"), "m");
        assert_eq!(first.len(), 32);
        assert_eq!(hash(&page("text", "2026-02-02"), "m"), first, "indexed_at is not content");
        let mut other_vectors = page("text", "2026-01-01");
        other_vectors.docs[0].embedding = vec![9.0];
        assert_eq!(hash(&other_vectors, "m"), first, "vectors are not hashed (known before embedding)");
        assert_ne!(hash(&page("other text", "2026-01-01"), "m"), first);
        assert_ne!(hash(&page("text", "2026-01-01"), "other model"), first);
        let mut retitled = page("text", "2026-01-01");
        retitled.sections[0].meta.title = "new".into();
        assert_ne!(hash(&retitled, "m"), first, "any level's metadata counts");
    }

    fn tenant_page(tenant: &str) -> RecordSet {
        let mut records = page(&format!("page of {tenant}"), "2026-01-01");
        for record in records.docs.iter_mut().chain(&mut records.sections) {
            record.meta.tenant_id = tenant.into();
        }
        records
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_ingests_of_one_snapshot_keep_every_run() {
        let directory = tempfile::tempdir().unwrap();
        let writer = SnapshotWriter { path: directory.path().join("index.json") };
        let runs = (0..12).map(|i| {
            let writer = writer.clone();
            tokio::spawn(async move {
                let tenant = format!("tenant-{i}");
                let scope = SourceScope { tenant_id: tenant.clone(), source_name: "docs".into() };
                let batch = IngestBatch {
                    records: tenant_page(&tenant),
                    embedding_model: "m".into(),
                    dimension: 1,
                    indexed_at: "2026-01-01".into(),
                    kept_pages: BTreeMap::new(),
                };
                writer.replace_source(&scope, batch).await.unwrap();
            })
        });
        for run in runs.collect::<Vec<_>>() {
            run.await.unwrap();
        }
        let snapshot = read_snapshot_file(&writer.path).unwrap();
        let tenants: HashSet<&str> = snapshot.docs.iter().map(|r| r.meta.tenant_id.as_str()).collect();
        assert_eq!(tenants.len(), 12, "every concurrent run's tenant is in the snapshot: {tenants:?}");
    }

    #[tokio::test]
    async fn an_ingest_keeps_the_permissions_of_the_snapshot_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let directory = tempfile::tempdir().unwrap();
        let writer = SnapshotWriter { path: directory.path().join("index.json") };
        let batch = |tenant: &str| IngestBatch {
            records: tenant_page(tenant),
            embedding_model: "m".into(),
            dimension: 1,
            indexed_at: "2026-01-01".into(),
            kept_pages: BTreeMap::new(),
        };
        let scope = |tenant: &str| SourceScope { tenant_id: tenant.into(), source_name: "docs".into() };
        writer.replace_source(&scope("a"), batch("a")).await.unwrap();
        std::fs::set_permissions(&writer.path, std::fs::Permissions::from_mode(0o600)).unwrap();
        writer.replace_source(&scope("b"), batch("b")).await.unwrap();
        let mode = std::fs::metadata(&writer.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
