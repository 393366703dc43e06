//! The `Embedder` trait, what a text is embedded as (`InputKind`), and the embedding error.

use async_trait::async_trait;

/// What a text is embedded as: e5-style models embed questions and passages differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    Query,
    Passage,
}

impl InputKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            InputKind::Query => "query",
            InputKind::Passage => "passage",
        }
    }
}

/// Why an embedding call failed: the shared kind of every outbound client (`upstream`), whose
/// `is_retryable` decides whether the client tries again.
pub type EmbedErrorKind = crate::upstream::UpstreamErrorKind;

#[derive(Debug, Clone, thiserror::Error)]
#[error("embedding failed ({kind:?}): {message}")]
pub struct EmbedError {
    pub kind: EmbedErrorKind,
    pub message: String,
}

impl EmbedError {
    pub fn new(kind: EmbedErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl From<crate::upstream::UpstreamError> for EmbedError {
    fn from(error: crate::upstream::UpstreamError) -> Self {
        Self { kind: error.kind, message: error.message }
    }
}

pub(crate) type Result<T> = std::result::Result<T, EmbedError>;

/// Turns texts into vectors. Implementations return exactly one vector per input, in input order.
#[async_trait]
pub trait Embedder: Send + Sync {
    async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>>;

    /// The model name recorded in snapshots and used as part of cache keys.
    fn model_name(&self) -> &str;

    /// True for the SHA256 pseudo-embedder, whose vectors carry lexical similarity only.
    fn is_pseudo(&self) -> bool {
        false
    }
}
