//! Rerankers: the `Reranker` trait, the no-op reranker and `build_reranker`; the chat-completions
//! (`chat.rs`) and dedicated rerank-API (`rerank_api.rs`) clients live beside it, and `merge.rs`
//! turns any answer into a complete reordering of the original candidates.

pub mod chat;
pub mod client;
pub mod merge;
pub mod rerank_api;

use crate::config::{RerankBackend, Settings};
use async_trait::async_trait;
use std::sync::Arc;

pub use chat::ChatReranker;
pub use client::{classify, RerankClientConfig};
pub use merge::merge_rerank;
pub use rerank_api::RerankApiReranker;

/// One section offered to the reranker: its id and a short, size-capped description.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankCandidate {
    pub section_id: String,
    pub title: String,
    pub heading: String,
    pub excerpt: String,
}

/// A score the reranker gave one section id.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankScore {
    pub section_id: String,
    pub score: f32,
}

/// Why a rerank call failed: the outbound core's kinds (`NotConfigured` when no reranker is set
/// up). Nothing is retried: a rerank failure only keeps the original order.
pub type RerankErrorKind = crate::upstream::UpstreamErrorKind;

#[derive(Debug, Clone, thiserror::Error)]
#[error("rerank failed ({kind:?}): {message}")]
pub struct RerankError {
    pub kind: RerankErrorKind,
    pub message: String,
}

impl RerankError {
    pub fn new(kind: RerankErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

pub type Result<T> = std::result::Result<T, RerankError>;

/// Scores candidates for a query. The answer may be partial or contain unknown ids; the search
/// layer (`search::rerank::apply`) keeps every original candidate exactly once.
#[async_trait]
pub trait Reranker: Send + Sync {
    async fn rerank(&self, query: &str, candidates: &[RerankCandidate]) -> Result<Vec<RerankScore>>;
}

/// Used when no rerank endpoint is configured: reranking is then reported as unavailable.
#[derive(Debug, Default)]
pub struct NoopReranker;

#[async_trait]
impl Reranker for NoopReranker {
    async fn rerank(&self, _query: &str, _candidates: &[RerankCandidate]) -> Result<Vec<RerankScore>> {
        Err(RerankError::new(
            RerankErrorKind::NotConfigured,
            "no rerank endpoint configured (RETR_RERANK_API_BASE is empty)",
        ))
    }
}

/// The reranker the settings select: `NoopReranker` when `rerank_api_base` is empty, otherwise the
/// `rerank_backend` client (chat completions or a dedicated `/rerank` API).
pub fn build_reranker(settings: &Settings, metrics: Option<Arc<crate::metrics::Metrics>>) -> Result<Arc<dyn Reranker>> {
    if settings.rerank_api_base.trim().is_empty() {
        return Ok(Arc::new(NoopReranker));
    }
    let config = RerankClientConfig { metrics, ..RerankClientConfig::from_settings(settings) };
    Ok(match settings.rerank_backend {
        RerankBackend::Chat => Arc::new(ChatReranker::new(config)?),
        RerankBackend::RerankApi => Arc::new(RerankApiReranker::new(config)?),
    })
}
