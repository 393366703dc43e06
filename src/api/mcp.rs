//! The MCP endpoint (`POST /internal/retrieval/mcp`): the Model Context Protocol's streamable HTTP
//! transport, so that an agent host discovers and calls the service's tools (`tools.rs`) with no
//! wrapper. The protocol is the official Rust SDK's (`rmcp`), run stateless with JSON responses:
//!
//! - No session is kept between requests (each carries its key), so none expires, piles up or
//!   outlives a client; `GET` (a server-to-client stream) and `DELETE` (ending a session) are 405.
//!   A client that disconnects cancels its tool call; nothing stays behind.
//! - Keys: with `RETR_API_KEYS` set every request needs `Authorization: Bearer <key>` (else 401
//!   with `WWW-Authenticate: Bearer` before the body is read); each tool checks the tenant it is
//!   asked for against the key and answers a tool error for another tenant's. The admin token is
//!   not a key.
//! - The body is read within `RETR_MAX_BODY_BYTES` (413) and checked before the SDK sees it: one
//!   JSON-RPC message under the HTTP API's strict JSON rules (no repeated key at any depth, arrays
//!   capped). Malformed JSON answers a JSON-RPC parse error (-32700), a batch or anything else that
//!   is not one JSON-RPC message an invalid request (-32600), both with HTTP 400; an unknown method
//!   is the SDK's -32601.
//! - The router's layers apply as to every route: the request timeout, the in-flight limit, the
//!   request log and the metrics.
//! - `Host` is not checked against a list (the SDK's default accepts loopback names only): the
//!   service is reached by whatever name its deployment gives it, and the keys guard the data.

mod tools;

use super::auth::TenantKey;
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{post, MethodRouter};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The endpoint's path under `/internal/retrieval`.
pub(crate) const PATH: &str = "/mcp";

/// JSON-RPC's error codes for a body that is not JSON, and for one that is not a request.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

type Mcp = StreamableHttpService<tools::Tools, NeverSessionManager>;

/// The route of the endpoint (`POST` only), serving the tools over `state`.
pub(crate) fn route(state: &AppState) -> MethodRouter<AppState> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_max_request_body_bytes(state.settings.max_body_bytes)
        .disable_allowed_hosts();
    let tools = tools::Tools::new(state.clone());
    let service: Arc<Mcp> = Arc::new(StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    ));
    post(move |key: TenantKey, request: Request| {
        let service = Arc::clone(&service);
        async move { serve(&service, key, request).await }
    })
}

/// Checks the body (see the module documentation), then hands the request to the SDK with the
/// caller's key in its extensions, where the tools read it.
async fn serve(service: &Mcp, key: TenantKey, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(key);
    let body = if is_json(&parts.headers) {
        // `Bytes` honours the router's `DefaultBodyLimit` (RETR_MAX_BODY_BYTES).
        let bytes = match Bytes::from_request(Request::from_parts(parts.clone(), body), &()).await {
            Ok(bytes) => bytes,
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large").into_response();
            }
            Err(rejection) => return ApiError::new(ErrorCode::InvalidJson, rejection.body_text()).into_response(),
        };
        if let Some(response) = reject_message(&bytes) {
            return response;
        }
        Body::from(bytes)
    } else {
        // The SDK answers 415 without reading it.
        body
    };
    service.handle(Request::from_parts(parts, body)).await.map(Body::new).into_response()
}

/// `application/json`, with or without parameters (what the SDK accepts).
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The JSON-RPC error to answer when `bytes` is not one JSON-RPC message the SDK can read.
fn reject_message(bytes: &[u8]) -> Option<Response> {
    let value: Value = match super::extract::parse_strict(bytes) {
        Ok(value) => value,
        Err(error) if error.code == ErrorCode::InvalidJson => {
            return Some(rpc_error(Value::Null, PARSE_ERROR, format!("parse error: {}", error.message)))
        }
        Err(error) => return Some(rpc_error(Value::Null, INVALID_REQUEST, error.message)),
    };
    if value.is_array() {
        return Some(rpc_error(
            Value::Null,
            INVALID_REQUEST,
            "a batch is not accepted: send one JSON-RPC message per request".into(),
        ));
    }
    match ClientJsonRpcMessage::deserialize(&value) {
        Ok(_) => None,
        Err(error) => {
            // The id when it is one a response may carry (a string or an integer), else null.
            let id = value.get("id").filter(|id| id.is_string() || id.is_i64() || id.is_u64()).cloned();
            Some(rpc_error(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                format!("not a valid JSON-RPC message: {error}"),
            ))
        }
    }
}

/// A JSON-RPC error response, HTTP 400.
fn rpc_error(id: Value, code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = (StatusCode::BAD_REQUEST, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
