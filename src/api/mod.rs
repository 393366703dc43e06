//! The HTTP layer: routes, the JSON error fallbacks, request ids, tracing, timeouts, metrics.

mod admission;
pub(crate) mod auth;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod dify;
pub(crate) mod extract;
pub(crate) mod feedback;
pub(crate) mod health;
pub(crate) mod keys;
mod mcp;
pub(crate) mod openapi;
mod paths;
pub(crate) mod reload;
pub(crate) mod search;
pub(crate) mod state;
mod strict;
pub(crate) mod ui;
pub(crate) mod window;

use crate::config::RequestLogLevel;
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::HeaderName;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tracing::Instrument;

use openapi::openapi_document;
pub(crate) use paths::PREFIX;

const REQUEST_ID_HEADER: &str = "x-request-id";
/// Longest accepted request URI (path and query); longer is a JSON 414. No endpoint needs more.
/// (URIs over 64 KiB never reach the router: hyper answers them with a bare 414.)
pub(crate) const MAX_URI_BYTES: usize = 8192;

/// Longest client `X-Request-Id` kept; a longer one is replaced by a generated id.
pub(crate) const MAX_REQUEST_ID_CHARS: usize = 64;
/// Longest part of a request path written to logs (the router refuses longer URIs anyway).
const LOGGED_PATH_BYTES: usize = 256;

/// Whether a client's `X-Request-Id` is kept as the request's id: 1 to
/// [`MAX_REQUEST_ID_CHARS`] characters of `[A-Za-z0-9._:-]`. Anything else (a 400 KB header,
/// quotes, control characters) would be written into every log line of the request and echoed,
/// so it is replaced by a generated id.
pub fn is_valid_request_id(value: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID_CHARS).contains(&value.len())
        && value.iter().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'-'))
}

/// Drops a client's request id that [`is_valid_request_id`] refuses (or a repeated one), so the
/// request gets a generated id instead.
async fn screen_request_id(mut request: Request, next: Next) -> Response {
    let headers = request.headers_mut();
    let mut given = headers.get_all(REQUEST_ID_HEADER).iter();
    let keep = match (given.next(), given.next()) {
        (None, _) => true,
        (Some(value), None) => is_valid_request_id(value.as_bytes()),
        (Some(_), Some(_)) => false,
    };
    if !keep {
        headers.remove(REQUEST_ID_HEADER);
    }
    next.run(request).await
}

/// At most [`LOGGED_PATH_BYTES`] of `path` (cut on a character boundary) for a log field.
fn loggable_path(path: &str) -> &str {
    if path.len() <= LOGGED_PATH_BYTES {
        return path;
    }
    let mut end = LOGGED_PATH_BYTES;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    &path[..end]
}

/// Request ids `<process-start-hex>-<counter>`: unique per process, cheap, no RNG needed.
#[derive(Clone)]
struct CounterRequestId {
    prefix: String,
    next: std::sync::Arc<AtomicU64>,
}

impl MakeRequestId for CounterRequestId {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}-{number}", self.prefix).parse().ok().map(RequestId::new)
    }
}

/// Builds the service's router over `state`; tests drive it with `oneshot` without a socket.
pub(crate) fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/search", post(search::search))
        .route("/config", get(config::get_config).post(config::update_config))
        .route("/config/reload", post(config::reload_config))
        .route("/chunks/window", post(window::window))
        .route("/context", post(context::context))
        .route("/feedback", post(feedback::post_feedback).get(feedback::get_feedback).delete(feedback::delete_feedback))
        .route(mcp::PATH, mcp::route(&state))
        .route("/stats", get(health::stats))
        .route("/health", get(health::health))
        .route("/openapi.json", get(openapi_document))
        .route("/tenants", get(ui::tenants))
        .route("/ui", get(ui::page))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::style));
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let request_ids = CounterRequestId { prefix: format!("{:x}", started.as_millis()), next: Default::default() };
    let header = HeaderName::from_static(REQUEST_ID_HEADER);
    Router::new()
        .nest(PREFIX, api)
        .route(&format!("{}/retrieval", state.settings.dify_base_path), post(dify::retrieval))
        .route("/health", get(health::health))
        .route("/metrics", get(health::metrics))
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), admission::admit))
        .layer(middleware::from_fn(reject_long_uri))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
        .layer(PropagateRequestIdLayer::new(header.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            let request_id = request.headers().get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
            let method = retrieval_engine::method_label(request.method().as_str());
            let path = loggable_path(request.uri().path());
            tracing::info_span!("request", method, path, request_id)
        }))
        .layer(SetRequestIdLayer::new(header, request_ids))
        .layer(middleware::from_fn(screen_request_id))
        .with_state(state)
}

/// 404, unless the path is the Dify endpoint's with extra slashes (an endpoint registered in
/// Dify with a trailing `/` is called at `{base}//retrieval`).
async fn route_not_found(State(state): State<AppState>, request: Request) -> Response {
    match dify::serve_unrouted(state, request).await {
        Ok(response) => response,
        Err(_) => ApiError::new(ErrorCode::RouteNotFound, "no such route").into_response(),
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, "method not allowed on this route")
}

/// A URI over `MAX_URI_BYTES` is 414 `uri_too_long` with the usual JSON error body.
async fn reject_long_uri(request: Request, next: Next) -> Response {
    let length = request.uri().path_and_query().map(|p| p.as_str().len()).unwrap_or(0);
    if length > MAX_URI_BYTES {
        return ApiError::new(
            ErrorCode::UriTooLong,
            format!("the request URI is {length} bytes long; the limit is {MAX_URI_BYTES}"),
        )
        .into_response();
    }
    next.run(request).await
}

/// The one line per request, at `RETR_REQUEST_LOG_LEVEL` (inside the request span: it carries
/// the request id).
fn log_request(level: RequestLogLevel, method: &axum::http::Method, path: &str, status: u16, elapsed: Duration) {
    let latency_ms = elapsed.as_secs_f64() * 1000.0;
    let method = retrieval_engine::method_label(method.as_str());
    let path = loggable_path(path);
    macro_rules! line {
        ($macro:ident) => {
            tracing::$macro!(method, path, status, latency_ms, "request done")
        };
    }
    match level {
        RequestLogLevel::Off => {}
        RequestLogLevel::Error => line!(error),
        RequestLogLevel::Warn => line!(warn),
        RequestLogLevel::Info => line!(info),
        RequestLogLevel::Debug => line!(debug),
        RequestLogLevel::Trace => line!(trace),
    }
}

/// Counts a request in `requests_in_flight` while it lives (also when the caller leaves and the
/// request future is dropped).
struct InFlight(std::sync::Arc<retrieval_engine::Metrics>);

impl InFlight {
    fn enter(metrics: &std::sync::Arc<retrieval_engine::Metrics>) -> Self {
        metrics.requests_in_flight.inc();
        Self(std::sync::Arc::clone(metrics))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.requests_in_flight.dec();
    }
}

/// Bounds every request by `request_timeout_seconds`, catches handler panics as a JSON 500 and
/// records metrics.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let path = request.uri().path().to_string();
    let route = request.extensions().get::<MatchedPath>().map(|matched| matched.as_str().to_string());
    let _in_flight = InFlight::enter(&state.metrics);
    let timeout = Duration::from_secs_f64(state.settings.request_timeout_seconds);
    let method = request.method().clone();
    // The handler runs in its own task; it keeps the request span (and so the request id).
    let run = tokio::spawn(tokio::time::timeout(timeout, next.run(request)).instrument(tracing::Span::current()));
    let response = match run.await {
        Ok(Ok(response)) => response,
        Ok(Err(_elapsed)) => {
            ApiError::new(ErrorCode::Timeout, format!("request exceeded {} s", timeout.as_secs_f64())).into_response()
        }
        Err(join_error) => {
            ApiError::new(ErrorCode::Internal, format!("handler panicked: {join_error}")).into_response()
        }
    };
    let elapsed = started.elapsed();
    state.metrics.observe_request(route.as_deref(), method.as_str(), response.status().as_u16(), elapsed);
    log_request(state.settings.request_log_level, &method, &path, response.status().as_u16(), elapsed);
    response
}
