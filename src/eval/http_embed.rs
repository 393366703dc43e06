//! A minimal OpenAI-compatible embeddings client for the eval command only.
//! To be replaced by `embed::HttpEmbedder` when that is merged; no retries, no fallback.

use crate::embed::{EmbedError, EmbedErrorKind, Embedder, InputKind, Result};
use async_trait::async_trait;
use serde::Deserialize;
use std::time::Duration;

pub struct EvalHttpEmbedder {
    client: reqwest::Client,
    endpoint: String,
    model: String,
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

/// Maps an HTTP status to an error kind.
pub fn classify(status: u16) -> EmbedErrorKind {
    match status {
        401 | 403 => EmbedErrorKind::Unauthorized,
        404 => EmbedErrorKind::NotFound,
        408 => EmbedErrorKind::Timeout,
        429 => EmbedErrorKind::RateLimited,
        400..=499 => EmbedErrorKind::BadRequest,
        _ => EmbedErrorKind::Unavailable,
    }
}

impl EvalHttpEmbedder {
    /// `api_base` like `http://127.0.0.1:18471` (with or without `/v1`).
    pub fn new(api_base: &str, model: &str, timeout: Duration) -> Result<Self> {
        let base = api_base.trim_end_matches('/');
        let endpoint =
            if base.ends_with("/v1") { format!("{base}/embeddings") } else { format!("{base}/v1/embeddings") };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|error| EmbedError::new(EmbedErrorKind::Internal, error.to_string()))?;
        Ok(Self { client, endpoint, model: model.to_string() })
    }
}

#[async_trait]
impl Embedder for EvalHttpEmbedder {
    async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>> {
        let body = serde_json::json!({"model": self.model, "input": texts, "input_type": kind.as_str()});
        let response = self.client.post(&self.endpoint).json(&body).send().await.map_err(|error| {
            let kind = if error.is_timeout() { EmbedErrorKind::Timeout } else { EmbedErrorKind::Unavailable };
            EmbedError::new(kind, error.to_string())
        })?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let text = response.text().await.unwrap_or_default();
            return Err(EmbedError::new(
                classify(status),
                format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()),
            ));
        }
        let mut parsed: EmbeddingResponse = response
            .json()
            .await
            .map_err(|error| EmbedError::new(EmbedErrorKind::InvalidResponse, error.to_string()))?;
        parsed.data.sort_by_key(|item| item.index);
        if parsed.data.len() != texts.len() {
            return Err(EmbedError::new(
                EmbedErrorKind::InvalidResponse,
                format!("asked for {} embeddings, got {}", texts.len(), parsed.data.len()),
            ));
        }
        Ok(parsed.data.into_iter().map(|item| item.embedding).collect())
    }

    fn model_name(&self) -> &str {
        &self.model
    }
}
