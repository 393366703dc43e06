//! What a request passes before it takes one of the `RETR_MAX_IN_FLIGHT_REQUESTS` work slots,
//! so that slow or waiting clients hold a connection, never a slot:
//! 0. the credentials its route needs are checked from its head (`refuse_before_body`):
//!    without them it is answered 401 and its connection closed, its body never read;
//! 1. its body is read whole, within `RETR_BODY_READ_TIMEOUT_SECONDS` (else 408
//!    `request_timeout`) and `RETR_MAX_BODY_BYTES` (else 413);
//! 2. a search's `min_index_version` is waited for (at most `RETR_INDEX_VERSION_WAIT_SECONDS`,
//!    else 503 `index_not_ready`);
//! 3. a slot is taken, or the request is shed at once with 503 `overloaded` and `Retry-After: 1`.
//!
//! `/health` and `/metrics` skip all of them, so that ops can still see the service under load.
//! Runs inside `guard`, so a slot is held until the handler has finished (also when the caller
//! left).

use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use std::time::{Duration, Instant};

/// The 401 (or Dify's error) for a request whose route needs credentials it does not carry, from
/// its head alone: `admit` calls it before reading the body, so the body of such a request is
/// never read (no `100 Continue` is sent) and the answer closes the connection. The same
/// extractors the handlers use decide, so both agree; a request let through is checked again by
/// its handler (with the tenant it asks for).
async fn refuse_before_body(parts: &mut Parts, state: &AppState) -> Option<Response> {
    use axum::extract::FromRequestParts;
    use axum::http::Method;
    let path = parts.uri.path();
    let under_prefix = |suffix: &str| path.strip_prefix(super::PREFIX) == Some(suffix);
    let refused = match parts.method {
        Method::POST
            if ["/search", "/context", "/chunks/window", "/feedback", super::mcp::PATH]
                .into_iter()
                .any(under_prefix) =>
        {
            super::auth::TenantKey::from_request_parts(parts, state).await.err()
        }
        Method::GET | Method::DELETE if ["/stats", "/tenants", "/feedback"].into_iter().any(under_prefix) => {
            super::auth::TenantKey::from_request_parts(parts, state).await.err()
        }
        Method::POST if ["/config", "/config/reload"].into_iter().any(under_prefix) => {
            super::auth::AdminAuth::from_request_parts(parts, state).await.err()
        }
        Method::POST if super::dify::is_retrieval_path(&state.settings.dify_base_path, path) => {
            super::dify::DifyKey::from_request_parts(parts, state).await.err().map(IntoResponse::into_response)
        }
        _ => None,
    };
    refused.map(|mut response| {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    })
}

pub(super) async fn admit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path == "/health" || path == "/metrics" || path == "/internal/retrieval/health" {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    if let Some(refusal) = refuse_before_body(&mut parts, &state).await {
        return refusal;
    }
    let bytes = match read_body(&state, body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = wait_for_min_version(&state, &bytes).await {
        return error.into_response();
    }
    let Ok(permit) = state.in_flight.clone().try_acquire_owned() else {
        state.metrics.requests_shed.inc();
        let mut response = ApiError::new(
            ErrorCode::Overloaded,
            format!("more than {} requests in progress; retry later", state.settings.max_in_flight_requests),
        )
        .into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    drop(permit);
    response
}

/// The whole body, read within the body deadline and the size limit.
async fn read_body(state: &AppState, body: Body) -> Result<Bytes, ApiError> {
    let limit = state.settings.max_body_bytes;
    let deadline = Duration::from_secs_f64(state.settings.body_read_timeout_seconds);
    let read = async {
        let mut stream = body.into_data_stream();
        let mut collected: Vec<u8> = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|_| ApiError::new(ErrorCode::BadRequest, "the request body could not be read"))?;
            if collected.len() + chunk.len() > limit {
                return Err(ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large"));
            }
            collected.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(collected))
    };
    tokio::time::timeout(deadline, read).await.unwrap_or_else(|_| {
        Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!("the request body did not arrive within {} s", deadline.as_secs_f64()),
        ))
    })
}

/// Waits, before a slot is taken, for the `min_index_version` a body asks for (only a body that
/// names one is parsed for it; the handler validates the field and answers for a malformed one).
async fn wait_for_min_version(state: &AppState, body: &[u8]) -> Result<(), ApiError> {
    const FIELD: &[u8] = b"min_index_version";
    if !body.windows(FIELD.len()).any(|window| window == FIELD) {
        return Ok(());
    }
    #[derive(serde::Deserialize)]
    struct MinVersion {
        min_index_version: Option<String>,
    }
    let Some(wanted) = serde_json::from_slice::<MinVersion>(body)
        .ok()
        .and_then(|parsed| parsed.min_index_version)
        .filter(|version| version.bytes().all(|byte| byte.is_ascii_digit()))
        .and_then(|version| version.parse::<u64>().ok())
    else {
        return Ok(());
    };
    let index = state.search.index();
    // A fixed snapshot never changes: the handler answers at once.
    if index.replica_status().is_none() {
        return Ok(());
    }
    let wait = Duration::from_secs_f64(state.settings.index_version_wait_seconds);
    let deadline = Instant::now() + wait;
    loop {
        let current = index.version();
        if current.is_some_and(|current| current >= wanted) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let now = current.map_or("none".to_string(), |version| version.to_string());
            return Err(ApiError::new(
                ErrorCode::IndexNotReady,
                format!("the index is at version {now}, not yet {wanted}, after waiting {wait:?}; retry later"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
