//! The only HTTP-aware error file: stable error codes, their statuses, and the one JSON error
//! body `{"error":{"code","message"}}` every failure is rendered as.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use retrieval_engine::{IndexErrorKind, SearchError};
use serde_json::json;

/// Stable, snake_case error codes (part of the API contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorCode {
    /// A malformed HTTP message (`Content-Length` together with `Transfer-Encoding`).
    BadRequest,
    /// The request body did not arrive within `RETR_BODY_READ_TIMEOUT_SECONDS`.
    RequestTimeout,
    InvalidJson,
    InvalidRequest,
    UnsupportedMediaType,
    PayloadTooLarge,
    /// A request URI longer than `api::MAX_URI_BYTES`.
    UriTooLong,
    /// A mutating endpoint without the admin token (`RETR_ADMIN_TOKEN`).
    Unauthorized,
    /// A data endpoint asked for a tenant the caller's API key is not granted (`RETR_API_KEYS`).
    Forbidden,
    RouteNotFound,
    MethodNotAllowed,
    TenantNotFound,
    NotFound,
    IndexNotFound,
    /// The tenant is served by another instance (`RETR_TENANTS`).
    TenantNotServed,
    /// A request's `min_index_version` was not reached within the wait.
    IndexNotReady,
    /// A config reload while another one runs.
    ReloadInProgress,
    IndexCorrupted,
    BackendUnavailable,
    /// More requests in progress than `RETR_MAX_IN_FLIGHT_REQUESTS`: shed with 503 and `Retry-After`.
    Overloaded,
    Timeout,
    Internal,
}

impl ErrorCode {
    /// Every code, for the OpenAPI document.
    pub(crate) const ALL: [ErrorCode; 22] = [
        ErrorCode::BadRequest,
        ErrorCode::RequestTimeout,
        ErrorCode::InvalidJson,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UriTooLong,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::RouteNotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::TenantNotFound,
        ErrorCode::NotFound,
        ErrorCode::IndexNotFound,
        ErrorCode::TenantNotServed,
        ErrorCode::IndexNotReady,
        ErrorCode::ReloadInProgress,
        ErrorCode::IndexCorrupted,
        ErrorCode::BackendUnavailable,
        ErrorCode::Overloaded,
        ErrorCode::Timeout,
        ErrorCode::Internal,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UriTooLong => "uri_too_long",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::RouteNotFound => "route_not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::TenantNotFound => "tenant_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::IndexNotFound => "index_not_found",
            ErrorCode::TenantNotServed => "tenant_not_served",
            ErrorCode::IndexNotReady => "index_not_ready",
            ErrorCode::ReloadInProgress => "reload_in_progress",
            ErrorCode::IndexCorrupted => "index_corrupted",
            ErrorCode::BackendUnavailable => "backend_unavailable",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Internal => "internal",
        }
    }

    pub(crate) fn status(self) -> StatusCode {
        match self {
            ErrorCode::BadRequest | ErrorCode::InvalidJson => StatusCode::BAD_REQUEST,
            ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::InvalidRequest => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::UriTooLong => StatusCode::URI_TOO_LONG,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::RouteNotFound | ErrorCode::TenantNotFound | ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::TenantNotServed => StatusCode::MISDIRECTED_REQUEST,
            ErrorCode::ReloadInProgress => StatusCode::CONFLICT,
            ErrorCode::IndexNotFound
            | ErrorCode::IndexNotReady
            | ErrorCode::IndexCorrupted
            | ErrorCode::BackendUnavailable
            | ErrorCode::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error on its way out as an HTTP response.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.code.status();
        let message = if status.is_server_error() && self.code == ErrorCode::Internal {
            tracing::error!(error = %self.message, "internal error");
            "internal error".to_string()
        } else {
            // Shed requests are counted in /metrics, not logged one by one (that is when logs flood).
            if status.is_server_error() && self.code != ErrorCode::Overloaded {
                tracing::warn!(code = self.code.as_str(), error = %self.message, "request failed");
            }
            self.message
        };
        (status, Json(json!({"error": {"code": self.code.as_str(), "message": message}}))).into_response()
    }
}

impl From<SearchError> for ApiError {
    fn from(error: SearchError) -> Self {
        match error {
            SearchError::InvalidRequest { .. } => ApiError::new(ErrorCode::InvalidRequest, error.to_string()),
            SearchError::UnknownTenant(_) => ApiError::new(ErrorCode::TenantNotFound, error.to_string()),
            SearchError::NotFound(message) => ApiError::new(ErrorCode::NotFound, message),
            SearchError::IndexNotReady(message) => ApiError::new(ErrorCode::IndexNotReady, message),
            SearchError::TenantNotServed(message) => ApiError::new(ErrorCode::TenantNotServed, message),
            SearchError::Index(index_error) => {
                let code = match index_error.kind {
                    IndexErrorKind::NotFound => ErrorCode::IndexNotFound,
                    IndexErrorKind::Corrupt => ErrorCode::IndexCorrupted,
                    IndexErrorKind::Unavailable => ErrorCode::BackendUnavailable,
                    IndexErrorKind::BadRequest => ErrorCode::InvalidRequest,
                    IndexErrorKind::Internal => ErrorCode::Internal,
                };
                if index_error.kind != IndexErrorKind::BadRequest {
                    tracing::warn!(error = %index_error.message, "index error");
                }
                ApiError::new(code, index_error.public_message())
            }
        }
    }
}
