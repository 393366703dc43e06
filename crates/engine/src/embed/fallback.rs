//! Building the configured embedder, and the query-time fallback to pseudo-embeddings when the
//! provider fails (the search service counts each in its metrics).

use super::http::{HttpEmbedder, HttpEmbedderConfig};
use super::query_cache::QueryCachedEmbedder;
use super::EmbeddingClientSettings;
use super::{EmbedError, EmbedErrorKind, Embedder, InputKind, PseudoEmbedder};
use std::sync::Arc;

/// The embedder the settings select: the pseudo-embedder when `api_base` is empty, otherwise the
/// HTTP client behind a query cache of `cache_size` entries.
pub fn build_embedder(
    settings: &EmbeddingClientSettings,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) -> Result<Arc<dyn Embedder>, EmbedError> {
    if settings.api_base.trim().is_empty() {
        return Ok(Arc::new(PseudoEmbedder::new(settings.dimension)));
    }
    let mut http = HttpEmbedder::new(HttpEmbedderConfig::from_settings(settings))?;
    if let Some(metrics) = metrics {
        http = http.with_metrics(metrics);
    }
    Ok(Arc::new(QueryCachedEmbedder::new(Arc::new(http), settings.cache_size)))
}

/// The embedder of batch jobs (`ingest`, `eval`): the same server and model as searches, with the
/// batch jobs' timeout and batch size (`ingest_*`: a passage batch may take minutes on a CPU
/// server, a user's query may not), and no query cache.
pub fn build_ingest_embedder(settings: &EmbeddingClientSettings) -> Result<Arc<dyn Embedder>, EmbedError> {
    if settings.api_base.trim().is_empty() {
        return Ok(Arc::new(PseudoEmbedder::new(settings.dimension)));
    }
    let mut config = HttpEmbedderConfig::from_settings(settings);
    config.timeout = std::time::Duration::from_secs_f64(settings.ingest_timeout_seconds);
    config.batch_size = settings.ingest_batch_size.max(1);
    Ok(Arc::new(HttpEmbedder::new(config)?))
}

/// Embeds a query with `primary`; on any failure (after the client's own retries) or a vector whose
/// dimension differs from `pseudo.dimension()` (the index dimension), logs a warning and returns the pseudo-embedding with a degradation message for the response.
pub async fn embed_query_with_fallback(
    primary: &dyn Embedder,
    pseudo: &PseudoEmbedder,
    text: &str,
) -> (Vec<f32>, Option<String>) {
    let outcome = primary
        .embed(&[text.to_string()], InputKind::Query)
        .await
        .and_then(|vectors| single_vector(vectors, pseudo.dimension()));
    match outcome {
        Ok(vector) => (vector, None),
        Err(error) => {
            tracing::warn!(
                model = %primary.model_name(),
                kind = ?error.kind,
                error = %error.message,
                "query embedding failed, using pseudo-embeddings"
            );
            tracing::debug!(query = %text, "query embedded with pseudo-embeddings");
            let message = format!(
                "embedding provider failed ({:?}: {}); the query used SHA256 pseudo-embeddings, so dense ranking is lexical-quality only",
                error.kind, error.message
            );
            (pseudo.embed_one(text), Some(message))
        }
    }
}

/// The query embedder over a corpus that was embedded with pseudo-embeddings because the configured
/// embedder failed when the corpus was built (the demo corpus at start-up with the embedding server
/// down): every call fails with `reason`, so each query takes the pseudo-embedding of
/// [`embed_query_with_fallback`] — the only vectors the corpus's compare with — and each answer
/// carries `embedding_fallback` saying why.
#[derive(Debug, Clone)]
pub struct PseudoCorpus {
    reason: String,
}

impl PseudoCorpus {
    pub fn new(reason: impl Into<String>) -> Self {
        Self { reason: reason.into() }
    }
}

#[async_trait::async_trait]
impl Embedder for PseudoCorpus {
    async fn embed(&self, _texts: &[String], _kind: InputKind) -> super::Result<Vec<Vec<f32>>> {
        Err(EmbedError::new(EmbedErrorKind::Unavailable, self.reason.clone()))
    }

    fn model_name(&self) -> &str {
        PseudoEmbedder::MODEL_NAME
    }
}

fn single_vector(mut vectors: Vec<Vec<f32>>, dimension: usize) -> Result<Vec<f32>, EmbedError> {
    if vectors.len() != 1 {
        let message = format!("expected exactly one query vector, got {}", vectors.len());
        return Err(EmbedError::new(EmbedErrorKind::InvalidResponse, message));
    }
    let vector = vectors.remove(0);
    if vector.len() != dimension {
        let message = format!("query vector has dimension {}, the index has {dimension}", vector.len());
        return Err(EmbedError::new(EmbedErrorKind::InvalidResponse, message));
    }
    Ok(vector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;

    struct FixedEmbedder(super::super::Result<Vec<Vec<f32>>>);

    #[async_trait]
    impl Embedder for FixedEmbedder {
        async fn embed(&self, _texts: &[String], _kind: InputKind) -> super::super::Result<Vec<Vec<f32>>> {
            self.0.clone()
        }
        fn model_name(&self) -> &str {
            "fixed"
        }
    }

    #[tokio::test]
    async fn success_returns_the_primary_vector_without_degradation() {
        let pseudo = PseudoEmbedder::new(2);
        let (vector, degradation) =
            embed_query_with_fallback(&FixedEmbedder(Ok(vec![vec![0.6, 0.8]])), &pseudo, "q").await;
        assert_eq!((vector, degradation), (vec![0.6, 0.8], None));
    }

    #[tokio::test]
    async fn failures_and_wrong_dimensions_fall_back_with_a_degradation() {
        let pseudo = PseudoEmbedder::new(3);
        let failing: [super::super::Result<Vec<Vec<f32>>>; 4] = [
            Err(EmbedError::new(EmbedErrorKind::Timeout, "no answer")),
            Ok(vec![vec![1.0, 0.0]]),
            Ok(vec![]),
            Ok(vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]]),
        ];
        for answer in failing {
            let (vector, degradation) =
                embed_query_with_fallback(&FixedEmbedder(answer.clone()), &pseudo, "установка сертификата").await;
            assert_eq!(vector, pseudo.embed_one("установка сертификата"), "{answer:?}");
            assert!(degradation.unwrap().contains("pseudo-embeddings"));
        }
    }

    #[test]
    fn empty_base_builds_the_pseudo_embedder_otherwise_http() {
        let settings = EmbeddingClientSettings { dimension: 16, ..EmbeddingClientSettings::for_tests() };
        let embedder = build_embedder(&settings, None).unwrap();
        assert!(embedder.is_pseudo());
        assert_eq!(embedder.model_name(), PseudoEmbedder::MODEL_NAME);

        let settings =
            EmbeddingClientSettings { api_base: "http://127.0.0.1:9".into(), ..EmbeddingClientSettings::for_tests() };
        let embedder = build_embedder(&settings, None).unwrap();
        assert!(!embedder.is_pseudo());
        assert_eq!(embedder.model_name(), settings.model);
    }
}
