//! What the embedding clients take from the configuration (the service maps its
//! `RETR_EMBEDDING_*` and `RETR_INGEST_EMBEDDING_*` settings onto it).

use crate::secret::Secret;

/// The embedding provider and how searches and batch jobs call it.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingClientSettings {
    /// The provider's base URL; empty: pseudo-embeddings.
    pub api_base: String,
    pub api_key: Secret,
    pub model: String,
    /// The dimension every vector must have (and the pseudo-embedder's).
    pub dimension: usize,
    pub max_attempts: u32,
    pub retry_delay_seconds: f64,
    pub timeout_seconds: f64,
    pub batch_size: usize,
    pub send_input_type: bool,
    pub query_prefix: String,
    pub passage_prefix: String,
    /// Entries of the query cache in front of the searches' client.
    pub cache_size: usize,
    /// The timeout of one call of a batch job (`ingest`, `eval`).
    pub ingest_timeout_seconds: f64,
    /// Texts per call of a batch job.
    pub ingest_batch_size: usize,
}

#[cfg(test)]
impl EmbeddingClientSettings {
    /// Test settings: no provider (pseudo-embeddings), the dimension of the fixtures' model.
    pub(crate) fn for_tests() -> Self {
        Self {
            api_base: String::new(),
            api_key: Secret::default(),
            model: "multilingual-e5-small".into(),
            dimension: 384,
            max_attempts: 3,
            retry_delay_seconds: 0.5,
            timeout_seconds: 10.0,
            batch_size: 32,
            send_input_type: true,
            query_prefix: String::new(),
            passage_prefix: String::new(),
            cache_size: 1024,
            ingest_timeout_seconds: 300.0,
            ingest_batch_size: 4,
        }
    }
}
