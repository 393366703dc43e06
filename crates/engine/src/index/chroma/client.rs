//! A thin client of Chroma's v2 HTTP API: one `reqwest::Client` with the configured timeout on
//! every call, collection calls by name or UUID, errors classified by status, transient failures
//! retried per the shared policy (`upstream::RetryPolicy`).

use super::wire::{CollectionInfo, ErrorBody, GetResponse, PreFlightChecks, QueryResponse};
use crate::index::{IndexError, IndexErrorKind, Result};
use crate::metrics::Metrics;
use crate::upstream::{RetryPolicy, UpstreamErrorKind};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The serving policy: a transient failure (no answer or a dropped connection, 429, 5xx) is
/// retried twice (50 ms, then 100 ms, or what `Retry-After` asks up to 1 s): a local Chroma
/// sometimes fails a read racing a write ("Error finding id"). Every call here is idempotent.
pub(crate) const SERVING_RETRY: RetryPolicy =
    RetryPolicy { max_attempts: 3, first_delay: Duration::from_millis(50), max_retry_after: Duration::from_secs(1) };

/// The batch job's policy (`ingest`): a busy or restarting Chroma gets ~15 s of backoff (0.5 s
/// doubling over six attempts, or `Retry-After` up to 30 s) before the run gives up.
pub(crate) const INGEST_RETRY: RetryPolicy =
    RetryPolicy { max_attempts: 6, first_delay: Duration::from_millis(500), max_retry_after: Duration::from_secs(30) };

/// The kind of a Chroma error response (`upstream::classify`, seen as an index error): pure, so
/// it is tested without a server.
pub(crate) fn classify(status: u16, body: &str) -> IndexErrorKind {
    match crate::upstream::classify(status, body) {
        UpstreamErrorKind::NotFound => IndexErrorKind::NotFound,
        UpstreamErrorKind::BadRequest => IndexErrorKind::BadRequest,
        UpstreamErrorKind::Timeout | UpstreamErrorKind::RateLimited | UpstreamErrorKind::Unavailable => {
            IndexErrorKind::Unavailable
        }
        // Chroma may answer a malformed query with another status and `InvalidArgument` in the body.
        UpstreamErrorKind::Unauthorized
        | UpstreamErrorKind::InvalidResponse
        | UpstreamErrorKind::Internal
        | UpstreamErrorKind::NotConfigured => {
            if body.contains("InvalidArgument") {
                IndexErrorKind::BadRequest
            } else {
                IndexErrorKind::Internal
            }
        }
    }
}

/// For logs and the command line (callers of the service see `IndexError::public_message`);
/// credentials Chroma may echo are redacted.
fn error_message(status: u16, body: &str) -> String {
    let message = match serde_json::from_str::<ErrorBody>(body) {
        Ok(parsed) if !parsed.message.is_empty() => {
            format!("chroma answered {status} {}: {}", parsed.error, parsed.message)
        }
        _ => format!("chroma answered {status}: {}", body.chars().take(300).collect::<String>()),
    };
    crate::upstream::redact(&message)
}

#[derive(Debug, Clone)]
pub(crate) struct ChromaClient {
    http: reqwest::Client,
    /// Where each call is recorded (`retrieval_upstream_request_duration_seconds`), once set.
    metrics: Arc<OnceLock<Arc<Metrics>>>,
    api_url: String,
    database_url: String,
    retry: RetryPolicy,
}

impl ChromaClient {
    /// `timeout` bounds each attempt; `retry` says how often a transient failure is tried again.
    pub(crate) fn new(host: &str, tenant: &str, database: &str, timeout: Duration, retry: RetryPolicy) -> Result<Self> {
        let http = crate::upstream::build(crate::upstream::http_client_builder(timeout).pool_max_idle_per_host(32))
            .map_err(|error| IndexError::new(IndexErrorKind::Internal, error.message))?;
        let api_url = format!("{}/api/v2", host.trim_end_matches('/'));
        let database_url = format!("{api_url}/tenants/{tenant}/databases/{database}");
        Ok(Self { http, metrics: Arc::default(), api_url, database_url, retry })
    }

    /// Records every call from now on in `metrics`.
    pub(crate) fn set_metrics(&self, metrics: Arc<Metrics>) {
        let _ = self.metrics.set(metrics);
    }

    /// The server's advisory batch size and whether it accepts base64 embeddings.
    pub(crate) async fn pre_flight_checks(&self) -> Result<PreFlightChecks> {
        self.send(self.http.get(format!("{}/pre-flight-checks", self.api_url)), "pre-flight checks").await
    }

    /// Creates the tenant and the database when they are missing (409 means they exist).
    pub(crate) async fn ensure_database(&self, tenant: &str, database: &str) -> Result<()> {
        let tenants = self.http.post(format!("{}/tenants", self.api_url)).json(&json!({"name": tenant}));
        self.send_allowing_conflict(tenants, "create tenant").await?;
        let databases =
            self.http.post(format!("{}/tenants/{tenant}/databases", self.api_url)).json(&json!({"name": database}));
        self.send_allowing_conflict(databases, "create database").await
    }

    pub(crate) async fn collection(&self, name: &str) -> Result<CollectionInfo> {
        self.send(self.http.get(format!("{}/collections/{name}", self.database_url)), "get collection").await
    }

    /// Creates the collection with cosine space, or returns the existing one unchanged.
    pub(crate) async fn get_or_create(&self, name: &str, metadata: &Map<String, Value>) -> Result<CollectionInfo> {
        let body = json!({
            "name": name,
            "configuration": {"hnsw": {"space": "cosine"}},
            "metadata": metadata,
            "get_or_create": true,
        });
        self.send(self.http.post(format!("{}/collections", self.database_url)).json(&body), "create collection").await
    }

    /// Replaces the collection metadata (Chroma does not merge it).
    pub(crate) async fn set_metadata(&self, id: &str, metadata: &Map<String, Value>) -> Result<()> {
        let request =
            self.http.put(format!("{}/collections/{id}", self.database_url)).json(&json!({"new_metadata": metadata}));
        self.send::<Value>(request, "update collection").await.map(|_| ())
    }

    pub(crate) async fn count(&self, id: &str) -> Result<usize> {
        self.send(self.http.get(format!("{}/collections/{id}/count", self.database_url)), "count").await
    }

    pub(crate) async fn get(&self, id: &str, body: &Value) -> Result<GetResponse> {
        self.post(id, "get", body).await
    }

    pub(crate) async fn query(&self, id: &str, body: &Value) -> Result<QueryResponse> {
        self.post(id, "query", body).await
    }

    pub(crate) async fn upsert(&self, id: &str, body: &Value) -> Result<()> {
        self.post::<Value>(id, "upsert", body).await.map(|_| ())
    }

    /// Deletes the records matching `body` (`ids` and/or `where`); returns Chroma's count.
    pub(crate) async fn delete(&self, id: &str, body: &Value) -> Result<usize> {
        let answer: Value = self.post(id, "delete", body).await?;
        Ok(answer.get("deleted").and_then(Value::as_u64).unwrap_or(0) as usize)
    }

    async fn post<T: DeserializeOwned>(&self, id: &str, operation: &'static str, body: &Value) -> Result<T> {
        let request = self.http.post(format!("{}/collections/{id}/{operation}", self.database_url)).json(body);
        self.send(request, operation).await
    }

    async fn send_allowing_conflict(&self, request: reqwest::RequestBuilder, operation: &'static str) -> Result<()> {
        let (status, body) = self.execute_with_retries(request, operation).await?;
        if (200..300).contains(&status) || status == 409 {
            return Ok(());
        }
        let body = String::from_utf8_lossy(&body);
        Err(IndexError::new(classify(status, &body), error_message(status, &body)))
    }

    /// Sends `request` (retried per the client's policy) and reads a success answer.
    async fn send<T: DeserializeOwned>(&self, request: reqwest::RequestBuilder, operation: &'static str) -> Result<T> {
        let (status, body) = self.execute_with_retries(request, operation).await?;
        if !(200..300).contains(&status) {
            let body = String::from_utf8_lossy(&body);
            return Err(IndexError::new(classify(status, &body), error_message(status, &body)));
        }
        serde_json::from_slice(&body).map_err(|error| {
            IndexError::new(IndexErrorKind::Internal, format!("chroma {operation} answered unreadable JSON: {error}"))
        })
    }

    /// Sends `request`; a transient failure — no answer in time, a refused or dropped connection,
    /// 429 or 5xx (`UpstreamErrorKind::is_retryable`) — is retried per the client's policy,
    /// waiting what `Retry-After` asks when the server says. Every call here is idempotent: reads,
    /// upserts by id, deletes by condition, metadata replacement, creations that accept 409.
    async fn execute_with_retries(
        &self,
        request: reqwest::RequestBuilder,
        operation: &'static str,
    ) -> Result<(u16, Vec<u8>)> {
        let mut attempt = 1;
        loop {
            let Some(this_try) = request.try_clone() else {
                return self.execute(request, operation).await.map(|(status, _, body)| (status, body));
            };
            let outcome = self.execute(this_try, operation).await;
            let (retryable, retry_after) = match &outcome {
                Ok((status, retry_after, _)) => (crate::upstream::classify(*status, "").is_retryable(), *retry_after),
                Err(error) => (error.kind == IndexErrorKind::Unavailable, None),
            };
            if !retryable || attempt >= self.retry.max_attempts {
                return outcome.map(|(status, _, body)| (status, body));
            }
            let delay = self.retry.delay(attempt, retry_after);
            let status = outcome.as_ref().map_or(0, |(status, _, _)| *status);
            tracing::debug!(
                operation,
                status,
                attempt,
                delay_ms = delay.as_millis() as u64,
                "chroma call failed; retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    #[tracing::instrument(level = "debug", skip(self, request), fields(status, latency_ms))]
    async fn execute(
        &self,
        request: reqwest::RequestBuilder,
        operation: &'static str,
    ) -> Result<(u16, Option<Duration>, Vec<u8>)> {
        let started = Instant::now();
        let unavailable = |error: reqwest::Error| {
            let what = if error.is_timeout() { "timed out" } else { "failed" };
            // reqwest's text names the URL, which may carry `user:password@`.
            let error = crate::upstream::redact(&error.to_string());
            IndexError::new(IndexErrorKind::Unavailable, format!("chroma {operation} {what}: {error}"))
        };
        let observe = |outcome: &'static str| {
            if let Some(metrics) = self.metrics.get() {
                metrics.observe_upstream("chroma", outcome, started.elapsed());
            }
        };
        let response = request.send().await.map_err(|error| {
            observe(if error.is_timeout() { "timeout" } else { "unavailable" });
            unavailable(error)
        })?;
        let status = response.status().as_u16();
        let retry_after = crate::upstream::retry_after(response.headers());
        let body = response.bytes().await.map_err(|error| {
            observe("unavailable");
            unavailable(error)
        })?;
        let body = body.to_vec();
        observe(if (200..300).contains(&status) { "ok" } else { crate::upstream::classify(status, "").as_str() });
        let span = tracing::Span::current();
        span.record("status", status);
        span.record("latency_ms", started.elapsed().as_millis() as u64);
        Ok((status, retry_after, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_maps_statuses_to_kinds() {
        let cases = [
            (404, IndexErrorKind::NotFound),
            (400, IndexErrorKind::BadRequest),
            (409, IndexErrorKind::BadRequest),
            (413, IndexErrorKind::BadRequest),
            (422, IndexErrorKind::BadRequest),
            (429, IndexErrorKind::Unavailable),
            (500, IndexErrorKind::Unavailable),
            (503, IndexErrorKind::Unavailable),
            (301, IndexErrorKind::Internal),
        ];
        for (status, kind) in cases {
            assert_eq!(classify(status, ""), kind, "status {status}");
        }
    }

    #[test]
    fn error_message_uses_chroma_body_or_raw_text() {
        let json = r#"{"error":"NotFoundError","message":"Collection [x] does not exist"}"#;
        assert_eq!(error_message(404, json), "chroma answered 404 NotFoundError: Collection [x] does not exist");
        assert_eq!(error_message(413, "Payload too large"), "chroma answered 413: Payload too large");
    }
}
