//! The search pipeline: request validation, query embedding (with fallback), the cascade,
//! and the window lookup. Backend-agnostic: everything goes through `VectorIndex`.

pub mod boosting;
pub mod boosting_config;
pub mod cascade;
pub mod error;
pub mod fusion;
pub mod types;

pub use error::{Result, SearchError};
pub use types::*;

use crate::config::{RuntimeSettings, MAX_RESULTS_CAP};
use crate::embed::{Embedder, InputKind, PseudoEmbedder};
use crate::index::{RecordFilter, VectorIndex};
use crate::model::Record;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Longest accepted tenant id; tenant ids are `[A-Za-z0-9._-]`.
pub const MAX_TENANT_ID_CHARS: usize = 128;
/// Longest accepted id list in a filter.
pub const MAX_ID_LIST: usize = 1000;

/// Process-wide counters read by `/metrics`.
#[derive(Debug, Default)]
pub struct SearchCounters {
    pub searches: AtomicU64,
    pub embedding_fallbacks: AtomicU64,
    pub rerank_failures: AtomicU64,
    pub text_fallbacks: AtomicU64,
}

/// Runs searches against one index with one embedder; shared by every handler through `AppState`.
pub struct SearchService {
    pub index: Arc<dyn VectorIndex>,
    pub embedder: Arc<dyn Embedder>,
    pub runtime: Arc<RwLock<RuntimeSettings>>,
    pub counters: Arc<SearchCounters>,
    pub max_query_chars: usize,
    pub default_dimension: usize,
}

/// Window request after validation.
#[derive(Debug, Clone)]
pub struct WindowQuery {
    pub tenant_id: String,
    pub doc_id: String,
    pub anchor_chunk_id: String,
    pub before: usize,
    pub after: usize,
}

pub fn validate_tenant(tenant_id: &str) -> Result<()> {
    if tenant_id.trim().is_empty() {
        return Err(SearchError::invalid("tenant_id", "must not be empty"));
    }
    if tenant_id.chars().count() > MAX_TENANT_ID_CHARS
        || !tenant_id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(SearchError::invalid(
            "tenant_id",
            format!("must be 1–{MAX_TENANT_ID_CHARS} characters of [A-Za-z0-9._-]"),
        ));
    }
    Ok(())
}

fn id_list(field: &str, values: &[Option<Vec<String>>]) -> Result<Option<Vec<String>>> {
    let mut merged: Vec<String> = Vec::new();
    for list in values.iter().flatten() {
        for value in list {
            if value.is_empty() {
                return Err(SearchError::invalid(field, "ids must not be empty strings"));
            }
            if !merged.contains(value) {
                merged.push(value.clone());
            }
        }
    }
    if merged.len() > MAX_ID_LIST {
        return Err(SearchError::invalid(field, format!("at most {MAX_ID_LIST} ids")));
    }
    Ok(if merged.is_empty() { None } else { Some(merged) })
}

/// Builds the record filter: the tenant always; the request's filters only when enabled.
/// Top-level `doc_ids`/`section_ids` and those under `filters` are merged (union).
pub fn build_filter(request: &SearchRequest, enable_filters: bool) -> Result<RecordFilter> {
    let mut filter = RecordFilter::tenant(request.tenant_id.clone());
    let doc_ids = id_list("doc_ids", &[request.doc_ids.clone(), request.filters.doc_ids.clone()])?;
    let section_ids = id_list("section_ids", &[request.section_ids.clone(), request.filters.section_ids.clone()])?;
    if !enable_filters {
        return Ok(filter);
    }
    let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    filter.product = non_empty(&request.filters.product);
    filter.version = non_empty(&request.filters.version);
    filter.tags = request.filters.tags.iter().filter(|t| !t.is_empty()).cloned().collect();
    filter.doc_ids = doc_ids;
    filter.section_ids = section_ids;
    Ok(filter)
}

impl SearchService {
    pub fn runtime_settings(&self) -> RuntimeSettings {
        self.runtime.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn validate(&self, request: &SearchRequest, runtime: &RuntimeSettings) -> Result<usize> {
        if request.query.trim().is_empty() {
            return Err(SearchError::invalid("query", "must not be empty"));
        }
        let length = request.query.chars().count();
        if length > self.max_query_chars {
            return Err(SearchError::invalid(
                "query",
                format!("is {length} characters long; the limit is {}", self.max_query_chars),
            ));
        }
        validate_tenant(&request.tenant_id)?;
        if let Some(trace_id) = &request.trace_id {
            if trace_id.len() > 256 {
                return Err(SearchError::invalid("trace_id", "must be at most 256 bytes"));
            }
        }
        match request.max_results {
            Some(value) if value < 1 => {
                Err(SearchError::invalid("max_results", format!("must be at least 1, got {value}")))
            }
            Some(value) => Ok((value as usize).min(MAX_RESULTS_CAP)),
            None => Ok(runtime.max_results.min(MAX_RESULTS_CAP)),
        }
    }

    async fn index_dimension(&self) -> Result<usize> {
        Ok(self.index.dimension().await?.unwrap_or(self.default_dimension))
    }

    /// The query vector: the caller's precomputed one (dimension-checked), else the embedder's,
    /// else — when the embedder fails — the pseudo-embedding, with a degradation.
    async fn query_vector(&self, request: &SearchRequest, degradations: &mut Vec<Degradation>) -> Result<Vec<f32>> {
        let dimension = self.index_dimension().await?;
        if let Some(vector) = &request.query_embedding {
            if vector.len() != dimension {
                return Err(SearchError::invalid(
                    "query_embedding",
                    format!("has dimension {}, the index has {dimension}", vector.len()),
                ));
            }
            if vector.iter().any(|v| !v.is_finite()) {
                return Err(SearchError::invalid("query_embedding", "must contain finite numbers only"));
            }
            return Ok(vector.clone());
        }
        let texts = [request.query.clone()];
        let result = self.embedder.embed(&texts, InputKind::Query).await;
        match result {
            Ok(mut vectors) if vectors.len() == 1 && vectors[0].len() == dimension => Ok(vectors.remove(0)),
            Ok(vectors) => {
                let got = vectors.first().map(Vec::len).unwrap_or(0);
                Ok(self.fallback_vector(
                    request,
                    dimension,
                    degradations,
                    format!("embedder returned a {got}-d vector, the index has {dimension}"),
                ))
            }
            Err(error) => Ok(self.fallback_vector(request, dimension, degradations, error.to_string())),
        }
    }

    fn fallback_vector(
        &self,
        request: &SearchRequest,
        dimension: usize,
        degradations: &mut Vec<Degradation>,
        reason: String,
    ) -> Vec<f32> {
        tracing::warn!(trace_id = request.trace_id.as_deref().unwrap_or(""), %reason, "embedding failed; using pseudo-embeddings");
        self.counters.embedding_fallbacks.fetch_add(1, Ordering::Relaxed);
        degradations.push(Degradation::new(
            "embedding_fallback",
            format!("query embedded with SHA256 pseudo-embeddings (lexical quality only): {reason}"),
        ));
        PseudoEmbedder::new(dimension).embed_one(&request.query)
    }

    /// Runs one search end to end.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let started = Instant::now();
        let runtime = self.runtime_settings();
        let max_results = self.validate(request, &runtime)?;
        let filter = build_filter(request, request.enable_filters.unwrap_or(runtime.enable_filters))?;
        if !self.index.tenant_exists(&request.tenant_id).await? {
            return Err(SearchError::UnknownTenant(request.tenant_id.clone()));
        }
        self.counters.searches.fetch_add(1, Ordering::Relaxed);
        let mut degradations = Vec::new();
        let vector = self.query_vector(request, &mut degradations).await?;
        let query_words: Vec<String> =
            request.query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_string).collect();
        let output = cascade::run(
            self.index.as_ref(),
            cascade::CascadeInput { filter, vector: &vector, settings: &runtime, max_results, query_words },
        )
        .await?;
        if output.fallback_used {
            self.counters.text_fallbacks.fetch_add(1, Ordering::Relaxed);
        }
        let hits: Vec<RetrievalHit> = output.hits.iter().map(cascade::to_hit).collect();
        tracing::info!(
            trace_id = request.trace_id.as_deref().unwrap_or(""),
            tenant_id = %request.tenant_id,
            num_hits = hits.len(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "search done"
        );
        Ok(SearchResponse {
            hits,
            hits_level: output.hits_level.map(|l| l.as_str().to_string()).unwrap_or_else(|| "none".to_string()),
            steps: request.include_steps.then(|| cascade::steps(&output)),
            trace_id: request.trace_id.clone(),
            took_ms: started.elapsed().as_secs_f64() * 1000.0,
            degradations,
        })
    }

    /// The chunks around an anchor chunk of one doc, sorted by (page, chunk_index).
    pub async fn window(&self, query: &WindowQuery) -> Result<Vec<Arc<Record>>> {
        validate_tenant(&query.tenant_id)?;
        let mut chunks = self.index.doc_chunks(&query.tenant_id, &query.doc_id).await?;
        if chunks.is_empty() {
            return Err(SearchError::NotFound(format!(
                "doc {:?} not found for tenant {:?}",
                query.doc_id, query.tenant_id
            )));
        }
        chunks.sort_by(|a, b| (a.meta.page, a.meta.chunk_index, &a.id).cmp(&(b.meta.page, b.meta.chunk_index, &b.id)));
        let Some(anchor) = chunks.iter().position(|c| c.id == query.anchor_chunk_id) else {
            return Err(SearchError::NotFound(format!(
                "chunk {:?} not found in doc {:?}",
                query.anchor_chunk_id, query.doc_id
            )));
        };
        let start = anchor.saturating_sub(query.before);
        let end = anchor.saturating_add(query.after).saturating_add(1).min(chunks.len());
        Ok(chunks[start..end].to_vec())
    }
}

#[cfg(test)]
mod tests;
