//! What both rerank clients share: their settings, the status classification and one bounded POST.

use super::RerankClientSettings;
use super::{RerankError, Result};
use crate::metrics::Metrics;
use crate::secret::Secret;
use crate::upstream::{Call, RetryPolicy};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RerankClientConfig {
    pub api_base: String,
    pub api_key: Secret,
    pub model: String,
    /// The deadline of one whole rerank call: connecting, sending and reading the answer.
    pub timeout: Duration,
    /// Where each call is recorded (`retrieval_upstream_request_duration_seconds`), if anywhere.
    pub metrics: Option<Arc<Metrics>>,
}

impl RerankClientConfig {
    pub(crate) fn from_settings(settings: &RerankClientSettings) -> Self {
        Self {
            api_base: settings.api_base.clone(),
            api_key: settings.api_key.clone(),
            model: settings.model.clone(),
            timeout: Duration::from_secs_f64(settings.timeout_seconds),
            metrics: None,
        }
    }
}

impl From<crate::upstream::UpstreamError> for RerankError {
    fn from(error: crate::upstream::UpstreamError) -> Self {
        RerankError::new(error.kind, error.message)
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
        let client = crate::upstream::http_client(config.timeout)?;
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

    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// One rerank call to `url`: not retried (a failure only keeps the original order), bounded
    /// as a whole by the timeout.
    pub(crate) fn call<'a>(&'a self, url: &'a str) -> Call<'a> {
        Call {
            upstream: "rerank",
            url,
            bearer: Some(self.config.api_key.expose()),
            attempt_timeout: self.config.timeout,
            deadline: Some(Instant::now() + self.config.timeout),
            retry: RetryPolicy::ONCE,
            metrics: self.config.metrics.as_deref(),
        }
    }

    /// POSTs `body` and returns the success body; every failure, including the deadline, is an error.
    pub(crate) async fn post_json(&self, url: &str, body: &serde_json::Value) -> Result<String> {
        Ok(crate::upstream::post_json(&self.client, &self.call(url), body).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::RerankErrorKind;

    /// Classifies a non-success answer of a rerank provider (`upstream::classify`); a 2xx here
    /// means an unusable body.
    fn classify(status: u16, body: &str) -> RerankErrorKind {
        crate::upstream::classify(status, body)
    }

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
            (504, "", RerankErrorKind::Timeout),
            (200, "", RerankErrorKind::InvalidResponse),
        ];
        for (status, body, expected) in cases {
            assert_eq!(classify(*status, body), *expected, "status {status}");
        }
    }

    #[test]
    fn endpoint_accepts_base_with_or_without_v1() {
        let mut config = RerankClientConfig::from_settings(&RerankClientSettings::for_tests());
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
