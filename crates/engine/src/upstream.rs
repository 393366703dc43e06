//! What every outbound HTTP client shares (the embedding client, both rerank clients, the LLM theme
//! router, the Chroma client): one `reqwest::Client` builder, one error kind with
//! `is_retryable`, one pure `classify(status, body)`, one retry policy honouring `Retry-After`,
//! one `post_json` with a deadline, one chat-completions call, and one rule for OpenAI-style base
//! URLs. Each client keeps only its own request shape and response parsing, and maps
//! [`UpstreamErrorKind`] onto its module's error kind where the rest of the code matches on it.

use crate::metrics::Metrics;
use serde::Serialize;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How much of an error body an error message quotes.
const ERROR_BODY_CHARS: usize = 300;

/// Why an outbound call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// The request itself is wrong (4xx, an input too long): sending it again fails again.
    BadRequest,
    /// 401/403, or a 429 for an exhausted quota: waiting does not help.
    Unauthorized,
    NotFound,
    /// No answer in time (a client timeout, 408, 504).
    Timeout,
    /// 429: the provider asks to slow down (with `Retry-After`, usually).
    RateLimited,
    /// Cannot connect, or a 5xx: the server is down or overloaded.
    Unavailable,
    /// A 2xx whose body is not what the API promises.
    InvalidResponse,
    Internal,
    /// No call was made: the client has no endpoint configured (a reranker that is off).
    NotConfigured,
}

impl UpstreamErrorKind {
    /// Transient failures, worth another attempt.
    pub(crate) fn is_retryable(self) -> bool {
        matches!(self, Self::Timeout | Self::RateLimited | Self::Unavailable)
    }

    /// The label of `retrieval_upstream_request_duration_seconds`'s `outcome`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::Unauthorized => "unauthorized",
            Self::NotFound => "not_found",
            Self::Timeout => "timeout",
            Self::RateLimited => "rate_limited",
            Self::Unavailable => "unavailable",
            Self::InvalidResponse => "invalid_response",
            Self::Internal => "internal",
            Self::NotConfigured => "not_configured",
        }
    }
}

/// A failed outbound call: its kind, a message for logs and degradations, and the delay the
/// server asked for (`Retry-After`), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamError {
    pub kind: UpstreamErrorKind,
    pub message: String,
    pub(crate) retry_after: Option<Duration>,
}

impl UpstreamError {
    pub(crate) fn new(kind: UpstreamErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry_after: None }
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{:?}: {}", self.kind, self.message)
    }
}

/// The kind of a non-success answer, by status and body; a 2xx reaching here had an unusable body.
pub(crate) fn classify(status: u16, body: &str) -> UpstreamErrorKind {
    let lower = || body.to_ascii_lowercase();
    match status {
        200..=299 => UpstreamErrorKind::InvalidResponse,
        // OpenAI answers 429 for an exhausted quota too; waiting does not help.
        429 if lower().contains("insufficient_quota") => UpstreamErrorKind::Unauthorized,
        429 => UpstreamErrorKind::RateLimited,
        408 | 504 => UpstreamErrorKind::Timeout,
        401 | 403 => UpstreamErrorKind::Unauthorized,
        404 => UpstreamErrorKind::NotFound,
        // TEI answers 424 when the model fails on this input: retrying the same input fails again.
        424 => UpstreamErrorKind::Internal,
        400..=499 => UpstreamErrorKind::BadRequest,
        500..=599 if lower().contains("maximum context length") || lower().contains("too long") => {
            UpstreamErrorKind::BadRequest
        }
        500..=599 => UpstreamErrorKind::Unavailable,
        _ => UpstreamErrorKind::InvalidResponse,
    }
}

/// The one `reqwest::Client` builder: `timeout` bounds connecting and each whole request.
pub(crate) fn http_client_builder(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).pool_idle_timeout(Duration::from_secs(90))
}

/// A client from [`http_client_builder`].
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, UpstreamError> {
    build(http_client_builder(timeout))
}

/// Builds `builder` (a client builder's only failure is the TLS back end failing to initialise).
pub(crate) fn build(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, UpstreamError> {
    builder
        .build()
        .map_err(|error| UpstreamError::new(UpstreamErrorKind::Internal, format!("building the HTTP client: {error}")))
}

/// A transport failure (no HTTP answer, or its body could not be read). The message is ours;
/// reqwest's own text (it names the URL, which may carry credentials) goes to the log, redacted.
pub(crate) fn transport_error(upstream: &str, error: &reqwest::Error) -> UpstreamError {
    let (kind, message) = if error.is_timeout() {
        (UpstreamErrorKind::Timeout, "no answer in time")
    } else if error.is_decode() {
        (UpstreamErrorKind::InvalidResponse, "its answer could not be read")
    } else {
        (UpstreamErrorKind::Unavailable, "cannot connect, or the connection failed")
    };
    tracing::warn!(upstream, error = %redact(&error.to_string()), "upstream request failed");
    UpstreamError::new(kind, format!("{upstream}: {message}"))
}

/// `Retry-After` in seconds (the HTTP-date form is ignored: providers send seconds).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map(Duration::from_secs_f64)
}

/// How a call is retried: at most `max_attempts` attempts for retryable failures, waiting
/// `first_delay` and doubling, or what `Retry-After` asks (at most `max_retry_after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub first_delay: Duration,
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// One attempt, no retry (rerank, LLM routing: a failure only costs their improvement).
    pub const ONCE: RetryPolicy =
        RetryPolicy { max_attempts: 1, first_delay: Duration::ZERO, max_retry_after: Duration::ZERO };

    /// The wait before attempt `attempt + 1` after a failure of attempt `attempt` (from 1).
    pub(crate) fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(wait) => wait.min(self.max_retry_after),
            None => self.first_delay.saturating_mul(1 << (attempt.max(1) - 1).min(16)),
        }
    }
}

/// What replaces a redacted credential.
const REDACTED: &str = "***";

/// Names whose value is a credential, in headers, JSON, query strings and form bodies.
const SECRET_NAMES: [&str; 10] = [
    "authorization",
    "api_key",
    "api-key",
    "apikey",
    "password",
    "passwd",
    "secret",
    "token",
    "access_key",
    "credential",
];

/// `text` (an upstream's error body, a URL, a transport error) with the credentials it may carry
/// replaced by `***`: `Bearer`/`Basic` credentials, the password (or token) of a URL's
/// `user:password@`, `sk-…` keys, and the value of any field, header or parameter named like a
/// credential (`authorization`, `api_key`, `x-api-key`, `password`, `token`, `secret`, …). For logs
/// only: callers never see upstream text at all.
pub fn redact(text: &str) -> String {
    let mut spans = Vec::new();
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let token_end = |from: usize, stop: &dyn Fn(u8) -> bool| {
        let mut end = from;
        while end < bytes.len() && !stop(bytes[end]) {
            end += 1;
        }
        end
    };
    let is_space = |byte: u8| byte.is_ascii_whitespace();
    let ends_word = |byte: u8| byte.is_ascii_whitespace() || matches!(byte, b'"' | b'\'' | b',' | b';' | b'&' | b'}');
    // `Bearer x`, `Basic x`.
    for scheme in ["bearer ", "basic "] {
        for (at, _) in lower.match_indices(scheme) {
            let start = token_end(at + scheme.len(), &|byte| !is_space(byte));
            spans.push((start, token_end(start, &ends_word)));
        }
    }
    // `scheme://user:password@host`: the password, or a lone user part (often a token).
    for (at, _) in lower.match_indices("://") {
        let start = at + 3;
        let authority_end = token_end(start, &|byte| matches!(byte, b'/' | b'?' | b'#') || ends_word(byte));
        if let Some(user_end) = text[start..authority_end].rfind('@').map(|offset| start + offset) {
            match text[start..user_end].find(':') {
                Some(colon) => spans.push((start + colon + 1, user_end)),
                None => spans.push((start, user_end)),
            }
        }
    }
    // OpenAI-style keys anywhere.
    for (at, _) in lower.match_indices("sk-") {
        let boundary = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        let end = token_end(at + 3, &|byte| !(byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_')));
        if boundary && end - at >= 11 {
            spans.push((at, end));
        }
    }
    // `name: value`, `"name": "value"`, `name=value` for credential-like names.
    for name in SECRET_NAMES {
        for (at, _) in lower.match_indices(name) {
            let mut cursor = token_end(at + name.len(), &|byte| {
                !(byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'"' | b'\''))
            });
            cursor = token_end(cursor, &|byte| !is_space(byte));
            if cursor >= bytes.len() || !matches!(bytes[cursor], b':' | b'=') {
                continue;
            }
            cursor = token_end(cursor + 1, &|byte| !is_space(byte));
            let quote = bytes.get(cursor).copied().filter(|byte| matches!(byte, b'"' | b'\''));
            let start = cursor + usize::from(quote.is_some());
            let end = match quote {
                Some(quote) => token_end(start, &|byte| byte == quote),
                // An unquoted header value (`Authorization: Bearer x`) runs to the end of its line.
                None if name == "authorization" => token_end(start, &|byte| matches!(byte, b'\n' | b'\r' | b',')),
                None => token_end(start, &ends_word),
            };
            if end > start {
                spans.push((start, end));
            }
        }
    }
    spans.sort_unstable();
    let mut redacted = String::with_capacity(text.len());
    let mut written = 0;
    for (start, end) in spans {
        if end <= written {
            continue;
        }
        let start = start.max(written);
        redacted.push_str(&text[written..start]);
        redacted.push_str(REDACTED);
        written = end;
    }
    redacted.push_str(&text[written..]);
    redacted
}

/// One outbound call: where, with which key, how long and how often.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `embedding`, `rerank`, `llm_router` or `chroma` (the metric's `upstream` label).
    pub upstream: &'static str,
    pub url: &'a str,
    pub bearer: Option<&'a str>,
    /// Each attempt's bound (the client's own timeout applies too).
    pub attempt_timeout: Duration,
    /// The whole call's bound across attempts and waits; `None`: attempts are bounded one by one.
    pub deadline: Option<Instant>,
    pub retry: RetryPolicy,
    pub metrics: Option<&'a Metrics>,
}

/// POSTs `body` as JSON and returns the success body. Retryable failures are retried per
/// `call.retry` while time is left before `call.deadline`; each attempt is recorded in the
/// upstream latency metric with its outcome.
pub async fn post_json<B: Serialize + ?Sized>(
    client: &reqwest::Client,
    call: &Call<'_>,
    body: &B,
) -> Result<String, UpstreamError> {
    let mut attempt = 1u32;
    loop {
        let left = call.deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        let attempt_timeout = left.map_or(call.attempt_timeout, |left| left.min(call.attempt_timeout));
        let started = Instant::now();
        let outcome = match tokio::time::timeout(attempt_timeout, post_once(client, call, body)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(UpstreamError::new(
                UpstreamErrorKind::Timeout,
                format!("no answer within {} ms", attempt_timeout.as_millis()),
            )),
        };
        if let Some(metrics) = call.metrics {
            let label = outcome.as_ref().map_or_else(|error| error.kind.as_str(), |_| "ok");
            metrics.observe_upstream(call.upstream, label, started.elapsed());
        }
        let error = match outcome {
            Ok(text) => return Ok(text),
            Err(error) => error,
        };
        if !error.kind.is_retryable() || attempt >= call.retry.max_attempts {
            return Err(error);
        }
        let delay = call.retry.delay(attempt, error.retry_after);
        if let Some(deadline) = call.deadline {
            if Instant::now() + delay >= deadline {
                let message = format!("{} (no time left to retry)", error.message);
                return Err(UpstreamError { message, ..error });
            }
        }
        tracing::warn!(
            upstream = call.upstream,
            attempt,
            kind = ?error.kind,
            delay_ms = delay.as_millis() as u64,
            error = %error.message,
            "upstream attempt failed, retrying"
        );
        tokio::time::sleep(delay).await;
        attempt += 1;
    }
}

async fn post_once<B: Serialize + ?Sized>(
    client: &reqwest::Client,
    call: &Call<'_>,
    body: &B,
) -> Result<String, UpstreamError> {
    let mut request = client.post(call.url).json(body);
    if let Some(key) = call.bearer.filter(|key| !key.is_empty()) {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(|error| transport_error(call.upstream, &error))?;
    let status = response.status().as_u16();
    let wait = retry_after(response.headers());
    let text = response.text().await.map_err(|error| transport_error(call.upstream, &error))?;
    if !(200..300).contains(&status) {
        // The body is the upstream's text (it may echo our credentials): logs only, redacted;
        // the error, which reaches degradations, says what we know.
        let head: String = text.chars().take(4 * ERROR_BODY_CHARS).collect();
        let excerpt: String = redact(&head).chars().take(ERROR_BODY_CHARS).collect();
        tracing::warn!(upstream = call.upstream, status, url = %redact(call.url), body = %excerpt, "upstream answered an error");
        let mut error =
            UpstreamError::new(classify(status, &text), format!("{} answered HTTP {status}", call.upstream));
        error.retry_after = wait;
        return Err(error);
    }
    Ok(text)
}

/// One chat-completions call (the reranker's chat backend and the LLM theme router): a system and
/// a user message at temperature 0; returns the first choice's message content.
pub async fn chat_completion(
    client: &reqwest::Client,
    call: &Call<'_>,
    model: &str,
    system: &str,
    user: &str,
) -> Result<String, UpstreamError> {
    let body = json!({
        "model": model,
        "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    });
    let text = post_json(client, call, &body).await?;
    let invalid = |message: String| UpstreamError::new(UpstreamErrorKind::InvalidResponse, message);
    let answer: Value = serde_json::from_str(&text).map_err(|error| {
        tracing::warn!(upstream = call.upstream, %error, "the answer is not a chat completion");
        invalid("the answer is not a chat completion".into())
    })?;
    answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| invalid("chat completion without choices[0].message.content".into()))
}

/// `{base}/v1/{path}` for an OpenAI-style base given with or without its `/v1` segment
/// (`http://host:8000`, `http://host:8000/v1/` and `https://api.openai.com/v1` all work), so one
/// `RETR_*_API_BASE` value means the same server for every client that uses it.
pub(crate) fn openai_endpoint(api_base: &str, path: &str) -> String {
    let base = api_base.trim_end_matches('/');
    let path = path.trim_start_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/{path}")
    } else {
        format!("{base}/v1/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_with_or_without_v1_gives_the_same_endpoint() {
        for base in ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"] {
            assert_eq!(openai_endpoint(base, "chat/completions"), "http://h:1/v1/chat/completions", "{base}");
            assert_eq!(openai_endpoint(base, "/embeddings"), "http://h:1/v1/embeddings", "{base}");
        }
        assert_eq!(openai_endpoint("https://api.openai.com/v1", "embeddings"), "https://api.openai.com/v1/embeddings");
    }

    #[test]
    fn classify_table() {
        use UpstreamErrorKind::*;
        let table = [
            (200, "", InvalidResponse),
            (400, "", BadRequest),
            (401, "", Unauthorized),
            (403, "", Unauthorized),
            (404, "", NotFound),
            (408, "", Timeout),
            (409, "", BadRequest),
            (413, "", BadRequest),
            (422, "", BadRequest),
            (424, "", Internal),
            (429, "", RateLimited),
            (429, r#"{"error":{"code":"insufficient_quota"}}"#, Unauthorized),
            (500, "", Unavailable),
            (500, "This model's maximum context length is 512 tokens", BadRequest),
            (502, "", Unavailable),
            (503, "", Unavailable),
            (504, "", Timeout),
            (302, "", InvalidResponse),
        ];
        for (status, body, kind) in table {
            assert_eq!(classify(status, body), kind, "{status} {body}");
        }
    }

    #[test]
    fn credentials_are_redacted_from_upstream_text() {
        let table = [
            ("Authorization: Bearer sk-live-0123456789abcdef", "Authorization: ***"),
            ("header was bearer abc.def-ghi, rejected", "header was bearer ***, rejected"),
            (r#"{"headers":{"Authorization":"Bearer tok-123"}}"#, r#"{"headers":{"Authorization":"***"}}"#),
            (r#"{"api_key": "k-42", "model": "e5"}"#, r#"{"api_key": "***", "model": "e5"}"#),
            ("x-api-key: abcdef\nnext", "x-api-key: ***\nnext"),
            ("GET http://svc:pa55@h:8000/v1?x=1", "GET http://svc:***@h:8000/v1?x=1"),
            ("https://tok3n@h/v1", "https://***@h/v1"),
            ("https://h/v1?api_key=abc&x=1", "https://h/v1?api_key=***&x=1"),
            ("invalid key sk-proj-ABCDEFGHIJKLMNOP given", "invalid key *** given"),
            ("password=hunter2; retry", "password=***; retry"),
            ("model not found: e5-small", "model not found: e5-small"),
            ("http://h:8000/v1/embeddings", "http://h:8000/v1/embeddings"),
        ];
        for (text, expected) in table {
            assert_eq!(redact(text), expected, "{text}");
        }
    }

    #[test]
    fn only_transient_kinds_are_retried() {
        use UpstreamErrorKind::*;
        for kind in [Timeout, RateLimited, Unavailable] {
            assert!(kind.is_retryable(), "{kind:?}");
        }
        for kind in [BadRequest, Unauthorized, NotFound, InvalidResponse, Internal] {
            assert!(!kind.is_retryable(), "{kind:?}");
        }
    }

    #[test]
    fn retry_after_wins_over_backoff_up_to_its_cap() {
        let policy = RetryPolicy {
            max_attempts: 4,
            first_delay: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(2),
        };
        assert_eq!(policy.delay(1, None), Duration::from_millis(100));
        assert_eq!(policy.delay(3, None), Duration::from_millis(400));
        assert_eq!(policy.delay(1, Some(Duration::from_secs(1))), Duration::from_secs(1));
        assert_eq!(policy.delay(1, Some(Duration::from_secs(60))), Duration::from_secs(2));
    }
}
