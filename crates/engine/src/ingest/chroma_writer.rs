//! `ingest --backend chroma`: replaces one source of one tenant in Chroma with the same ownership
//! rule as the snapshot writer (`SourceScope::owns`), so both backends re-ingest identically, and
//! atomically for searches (`index::chroma::manifest`): the new or changed pages are staged under
//! content-hashed ids, one manifest write switches the served version, then what the new version
//! no longer has is deleted. A run that fails or is killed before the switch leaves the previous
//! version served; running it again completes it.

use super::writer::{page_hashes, IndexWriter, IngestBatch, SourceScope, WriteOutcome};
use super::IngestError;
use crate::index::chroma::{ChangeScope, Manifest};
use crate::index::ChromaIndex;
use crate::model::{Level, Record};
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub struct ChromaSourceWriter {
    index: Arc<ChromaIndex>,
    location: String,
}

impl ChromaSourceWriter {
    /// Writes through `index`: build it with `ChromaIndex::for_ingest` (the batch job's timeout
    /// and retries) in a run of the command.
    pub fn new(index: Arc<ChromaIndex>, location: impl Into<String>) -> Self {
        Self { index, location: location.into() }
    }
}

fn chroma_error(error: crate::index::IndexError) -> IngestError {
    IngestError::Internal(format!("chroma: {error}"))
}

/// The records of pages whose committed hash is not already theirs: the ones to stage.
fn to_stage(
    records: Vec<Record>,
    committed: &BTreeMap<String, String>,
    pages: &BTreeMap<String, String>,
) -> Vec<Record> {
    records
        .into_iter()
        .filter(|record| committed.get(record.meta.doc_id.as_str()) != pages.get(record.meta.doc_id.as_str()))
        .collect()
}

#[async_trait]
impl IndexWriter for ChromaSourceWriter {
    async fn stored_pages(&self, scope: &SourceScope) -> Result<BTreeMap<String, String>, IngestError> {
        let manifests = self.index.tenant_manifests(&scope.tenant_id).await.map_err(chroma_error)?;
        Ok(manifests
            .into_iter()
            .find(|manifest| manifest.source == scope.source_name)
            .map(|m| m.pages)
            .unwrap_or_default())
    }

    async fn replace_source(&self, scope: &SourceScope, batch: IngestBatch) -> Result<WriteOutcome, IngestError> {
        let (tenant, source) = (scope.tenant_id.as_str(), scope.source_name.as_str());
        self.index.ensure_collections().await.map_err(chroma_error)?;
        let manifests = self.index.tenant_manifests(tenant).await.map_err(chroma_error)?;
        let previous = manifests.iter().find(|manifest| manifest.source == source);
        let committed = previous.map(|manifest| manifest.pages.clone()).unwrap_or_default();
        let written = page_hashes(&batch.records, &batch.embedding_model);
        if let Some((doc, _)) = batch.kept_pages.iter().find(|(doc, hash)| committed.get(*doc) != Some(*hash)) {
            return Err(IngestError::Internal(format!(
                "page {doc:?} changed in Chroma during this run (another ingest of the source?); run it again"
            )));
        }
        let mut pages = batch.kept_pages.clone();
        pages.extend(written.clone());
        // Each page's record count per level: replicas check they read a page whole.
        let mut counts: BTreeMap<String, [usize; 3]> =
            batch.kept_pages.keys().filter_map(|doc| Some((doc.clone(), *previous?.records.get(doc)?))).collect();
        for (slot, level) in
            [&batch.records.docs, &batch.records.sections, &batch.records.chunks].into_iter().enumerate()
        {
            for record in level {
                counts.entry(record.meta.doc_id.to_string()).or_default()[slot] += 1;
            }
        }

        // Before the first versioned ingest of the source: the docs its unversioned records own.
        let unversioned: BTreeSet<String> = if previous.is_none() {
            let existing = self.index.tenant_doc_metadata(tenant).await.map_err(chroma_error)?;
            existing.iter().filter(|meta| scope.owns(meta)).map(|meta| meta.doc_id.to_string()).collect()
        } else {
            BTreeSet::new()
        };

        // 1. Stage the new and changed pages: nobody serves them yet.
        let IngestBatch { records, embedding_model, indexed_at, .. } = batch;
        for (level, level_records) in
            [(Level::Doc, records.docs), (Level::Section, records.sections), (Level::Chunk, records.chunks)]
        {
            let staged = to_stage(level_records, &committed, &written);
            if !staged.is_empty() {
                self.index.stage(level, &staged, source, &written).await.map_err(chroma_error)?;
            }
        }

        // 2. Switch: one manifest write, this source's and those of sources it takes docs from.
        let mut commit = vec![Manifest {
            tenant_id: tenant.to_string(),
            source: source.to_string(),
            generation: String::new(),
            pages: pages.clone(),
            records: counts,
        }];
        let mut taken = BTreeSet::new();
        for other in manifests.iter().filter(|manifest| manifest.source != source) {
            let mut other = other.clone();
            let before = other.pages.len();
            other.pages.retain(|doc, _| {
                let ours = pages.contains_key(doc);
                if ours {
                    taken.insert(doc.clone());
                }
                !ours
            });
            other.records.retain(|doc, _| other.pages.contains_key(doc));
            if other.pages.len() != before {
                commit.push(other);
            }
        }
        let removed: BTreeSet<String> =
            committed.keys().chain(&unversioned).filter(|doc| !pages.contains_key(*doc)).cloned().collect();
        let mut changed: BTreeSet<String> =
            pages.iter().filter(|(doc, hash)| committed.get(*doc) != Some(*hash)).map(|(doc, _)| doc.clone()).collect();
        changed.extend(removed.iter().cloned());
        changed.extend(taken.iter().cloned());
        self.index
            .commit(&commit, vec![(tenant.to_string(), ChangeScope::Docs(changed))])
            .await
            .map_err(chroma_error)?;

        // 3. Delete what the new version no longer has. It is served already: a failure here only
        // leaves records nobody serves, which the next run of the source deletes.
        let mut swept_docs = unversioned;
        swept_docs.extend(taken);
        if let Err(error) = self.index.sweep_source(tenant, source, &pages, &swept_docs).await {
            tracing::warn!(%error, tenant_id = tenant, source, "superseded records not deleted; the next ingest of the source deletes them");
        }
        if let Err(error) = self.index.set_index_info(&embedding_model, &indexed_at).await {
            tracing::warn!(%error, "chroma index info not updated");
        }
        let version = self.index.stored_version().await.map_err(chroma_error)?;
        Ok(WriteOutcome { location: self.location.clone(), bytes: None, removed_docs: removed.len(), version })
    }
}
