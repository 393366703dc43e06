//! Rerankers: the `Reranker` trait and the no-op reranker; the chat-completions and dedicated
//! rerank-API clients live beside it.

use async_trait::async_trait;

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

#[derive(Debug, Clone, thiserror::Error)]
#[error("rerank failed: {0}")]
pub struct RerankError(pub String);

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
        Err(RerankError("no rerank endpoint configured (RETR_RERANK_API_BASE is empty)".to_string()))
    }
}
