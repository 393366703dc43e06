//! What both rerank clients share: their settings, the status classification and one bounded POST.

use super::{RerankError, RerankErrorKind, Result};
use crate::config::{Secret, Settings};
use std::time::{Duration, Instant};

const ERROR_BODY_CHARS: usize = 300;

#[derive(Debug, Clone)]
pub struct RerankClientConfig {
    pub api_base: String,
    pub api_key: Secret,
    pub model: String,
    /// The deadline of one whole rerank call: connecting, sending and reading the answer.
    pub timeout: Duration,
}

impl RerankClientConfig {
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            api_base: settings.rerank_api_base.clone(),
            api_key: settings.rerank_api_key.clone(),
            model: settings.rerank_model.clone(),
            timeout: Duration::from_secs_f64(settings.rerank_timeout_seconds),
        }
    }
}

/// Classifies a non-success answer of a rerank provider; a 2xx here means an unusable body.
pub fn classify(status: u16, body: &str) -> RerankErrorKind {
    match status {
        200..=299 => RerankErrorKind::InvalidResponse,
        429 if body.contains("insufficient_quota") => RerankErrorKind::Unauthorized,
        429 => RerankErrorKind::RateLimited,
        408 => RerankErrorKind::Timeout,
        401 | 403 => RerankErrorKind::Unauthorized,
        404 => RerankErrorKind::NotFound,
        400..=499 => RerankErrorKind::BadRequest,
        500..=599 => RerankErrorKind::Unavailable,
        _ => RerankErrorKind::InvalidResponse,
    }
}

/// The HTTP side of a rerank client: one `reqwest::Client` and one POST with an overall deadline.
#[derive(Debug, Clone)]
pub(crate) struct RerankHttp {
    pub(crate) config: RerankClientConfig,
    client: reqwest::Client,
}

impl RerankHttp {
    pub(crate) fn new(config: RerankClientConfig) -> Result<Self> {
        let client =
            reqwest::Client::builder().timeout(config.timeout).connect_timeout(config.timeout).build().map_err(
                |error| RerankError::new(RerankErrorKind::Internal, format!("building the HTTP client: {error}")),
            )?;
        Ok(Self { config, client })
    }

    /// `{base}/{path}`, the base taken as given (it carries any version segment).
    pub(crate) fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.config.api_base.trim_end_matches('/'))
    }

    /// `{base}/v1/{path}`, accepting a base with or without a trailing `/v1`.
    pub(crate) fn v1_endpoint(&self, path: &str) -> String {
        crate::upstream::openai_endpoint(&self.config.api_base, path)
    }

    /// POSTs `body` and returns the success body; every failure, including the deadline, is an error.
    pub(crate) async fn post_json(&self, url: &str, body: &serde_json::Value) -> Result<String> {
        let started = Instant::now();
        let outcome = tokio::time::timeout(self.config.timeout, self.post_once(url, body)).await;
        let outcome = outcome.unwrap_or_else(|_| {
            Err(RerankError::new(
                RerankErrorKind::Timeout,
                format!("no answer within {} ms", self.config.timeout.as_millis()),
            ))
        });
        tracing::debug!(
            model = %self.config.model,
            ok = outcome.is_ok(),
            latency_ms = started.elapsed().as_millis() as u64,
            "rerank request finished"
        );
        outcome
    }

    async fn post_once(&self, url: &str, body: &serde_json::Value) -> Result<String> {
        let mut request = self.client.post(url).json(body);
        if !self.config.api_key.is_empty() {
            request = request.bearer_auth(self.config.api_key.expose());
        }
        let response = request.send().await.map_err(|error| transport_error(&error))?;
        let status = response.status();
        let text = response.text().await.map_err(|error| transport_error(&error))?;
        if !status.is_success() {
            let snippet: String = text.chars().take(ERROR_BODY_CHARS).collect();
            let message = format!("HTTP {} from {url}: {snippet}", status.as_u16());
            return Err(RerankError::new(classify(status.as_u16(), &text), message));
        }
        Ok(text)
    }
}

fn transport_error(error: &reqwest::Error) -> RerankError {
    let kind = if error.is_timeout() { RerankErrorKind::Timeout } else { RerankErrorKind::Unavailable };
    RerankError::new(kind, format!("request failed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_table() {
        let cases: &[(u16, &str, RerankErrorKind)] = &[
            (400, "bad", RerankErrorKind::BadRequest),
            (401, "", RerankErrorKind::Unauthorized),
            (403, "", RerankErrorKind::Unauthorized),
            (404, "", RerankErrorKind::NotFound),
            (408, "", RerankErrorKind::Timeout),
            (429, "", RerankErrorKind::RateLimited),
            (429, "insufficient_quota", RerankErrorKind::Unauthorized),
            (500, "", RerankErrorKind::Unavailable),
            (503, "", RerankErrorKind::Unavailable),
            (200, "", RerankErrorKind::InvalidResponse),
        ];
        for (status, body, expected) in cases {
            assert_eq!(classify(*status, body), *expected, "status {status}");
        }
    }

    #[test]
    fn endpoint_accepts_base_with_or_without_v1() {
        let mut config = RerankClientConfig::from_settings(&Settings::default());
        for (base, expected) in [
            ("http://h:1", "http://h:1/v1/chat/completions"),
            ("http://h:1/", "http://h:1/v1/chat/completions"),
            ("https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"),
        ] {
            config.api_base = base.into();
            assert_eq!(RerankHttp::new(config.clone()).unwrap().v1_endpoint("chat/completions"), expected);
        }
    }
}
