//! `ingest --backend chroma`: replaces one source of one tenant in Chroma with the same ownership
//! rule as the snapshot writer (`SourceScope::owns`), so both backends re-ingest identically.

use super::writer::{IndexWriter, IngestBatch, SourceScope, WriteOutcome};
use super::IngestError;
use crate::index::{ChromaIndex, RecordFilter};
use crate::model::Level;
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::sync::Arc;

pub struct ChromaSourceWriter {
    index: Arc<ChromaIndex>,
    location: String,
}

impl ChromaSourceWriter {
    pub fn new(index: Arc<ChromaIndex>, location: impl Into<String>) -> Self {
        Self { index, location: location.into() }
    }
}

fn chroma_error(error: crate::index::IndexError) -> IngestError {
    IngestError::Internal(format!("chroma: {error}"))
}

#[async_trait]
impl IndexWriter for ChromaSourceWriter {
    async fn replace_source(&self, scope: &SourceScope, batch: IngestBatch) -> Result<WriteOutcome, IngestError> {
        self.index.ensure_collections().await.map_err(chroma_error)?;
        // Chroma tells which docs this source owns now (their metadata only: no replica is
        // loaded, so an ingest costs the same whatever the size of the index).
        let existing = self.index.tenant_doc_metadata(&scope.tenant_id).await.map_err(chroma_error)?;
        let owned: BTreeSet<String> =
            existing.iter().filter(|meta| scope.owns(meta)).map(|meta| meta.doc_id.clone()).collect();
        let incoming: BTreeSet<String> = batch.records.docs.iter().map(|record| record.meta.doc_id.clone()).collect();
        let removed_docs = owned.difference(&incoming).count();
        let to_delete: Vec<String> = owned.union(&incoming).cloned().collect();
        for ids in to_delete.chunks(500) {
            let filter = RecordFilter { doc_ids: Some(ids.to_vec()), ..RecordFilter::tenant(scope.tenant_id.clone()) };
            for level in Level::ALL {
                self.index.delete_matching(level, &filter).await.map_err(chroma_error)?;
            }
        }
        self.index.upsert(Level::Doc, &batch.records.docs).await.map_err(chroma_error)?;
        self.index.upsert(Level::Section, &batch.records.sections).await.map_err(chroma_error)?;
        self.index.upsert(Level::Chunk, &batch.records.chunks).await.map_err(chroma_error)?;
        self.index.set_index_info(&batch.embedding_model, &batch.indexed_at).await.map_err(chroma_error)?;
        let version = self.index.stored_version().await.map_err(chroma_error)?;
        Ok(WriteOutcome { location: self.location.clone(), bytes: None, removed_docs, version })
    }
}
