//! The `Reranker` trait, its candidates, scores and error, the client settings and the no-op
//! reranker.

use crate::secret::Secret;
use async_trait::async_trait;

/// Which API the rerank endpoint speaks (`RETR_RERANK_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerankBackend {
    /// OpenAI chat completions asked for `[{"section_id","score"}]`.
    Chat,
    /// A dedicated `POST /rerank` API (Cohere / Jina / TEI shape).
    RerankApi,
}

/// What the rerank clients take from the configuration (the service maps its `RETR_RERANK_*`
/// settings onto it).
#[derive(Debug, Clone, PartialEq)]
pub struct RerankClientSettings {
    pub backend: RerankBackend,
    /// The endpoint's base URL; empty: no reranker (`NoopReranker`).
    pub api_base: String,
    pub api_key: Secret,
    pub model: String,
    /// The deadline of one whole rerank call.
    pub timeout_seconds: f64,
}

#[cfg(test)]
impl RerankClientSettings {
    /// Test settings: the chat backend, no endpoint.
    pub(crate) fn for_tests() -> Self {
        Self {
            backend: RerankBackend::Chat,
            api_base: String::new(),
            api_key: Secret::default(),
            model: "gpt-4o-mini".into(),
            timeout_seconds: 10.0,
        }
    }
}

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
    pub(crate) section_id: String,
    pub(crate) score: f32,
}

/// Why a rerank call failed: the outbound core's kinds (`NotConfigured` when no reranker is set
/// up). Nothing is retried: a rerank failure only keeps the original order.
pub type RerankErrorKind = crate::upstream::UpstreamErrorKind;

#[derive(Debug, Clone, thiserror::Error)]
#[error("rerank failed ({kind:?}): {message}")]
pub struct RerankError {
    pub kind: RerankErrorKind,
    pub(crate) message: String,
}

impl RerankError {
    pub(crate) fn new(kind: RerankErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

pub(crate) type Result<T> = std::result::Result<T, RerankError>;

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
