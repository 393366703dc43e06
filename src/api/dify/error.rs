//! Dify's errors (`{"error_code", "error_msg"}` with the reason each is counted and logged
//! under) and the caller's API key as Dify sends it.

use crate::api::auth::Grant;
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// A Dify error: `{"error_code", "error_msg"}` with an HTTP status, and the reason it is counted
/// and logged under (a closed set).
#[derive(Debug)]
pub(crate) struct DifyError {
    status: StatusCode,
    code: u32,
    message: String,
    pub(super) reason: &'static str,
    /// What went wrong inside, for the log only (an internal error's body says nothing of it).
    cause: Option<String>,
}

/// The body of every error of the Dify endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DifyErrorBody {
    /// 1001 no or a malformed `Authorization` header, 1002 authorization failed, 2001 no such
    /// knowledge base; any other error: its HTTP status.
    pub(crate) error_code: u32,
    pub(crate) error_msg: String,
}

impl DifyError {
    pub(super) fn malformed_authorization() -> Self {
        let message = "Invalid Authorization header format. Expected 'Bearer <api-key>' format.";
        Self {
            status: StatusCode::UNAUTHORIZED,
            code: 1001,
            message: message.into(),
            reason: "unauthorized",
            cause: None,
        }
    }

    pub(super) fn authorization_failed(message: impl Into<String>) -> Self {
        let message = message.into();
        Self { status: StatusCode::FORBIDDEN, code: 1002, message, reason: "forbidden", cause: None }
    }

    pub(super) fn no_knowledge_base(knowledge_id: &str) -> Self {
        let message = format!("The knowledge base {knowledge_id:?} does not exist.");
        Self { status: StatusCode::NOT_FOUND, code: 2001, message, reason: "no_knowledge_base", cause: None }
    }

    pub(super) fn invalid(message: impl Into<String>) -> Self {
        ApiError::invalid(message).into()
    }

    pub(super) fn over_budget(budget: Duration) -> Self {
        let message = format!(
            "the request could not be answered within the time budget of {} s (RETR_DIFY_TIME_BUDGET_SECONDS)",
            budget.as_secs_f64()
        );
        let error: DifyError = ApiError::new(ErrorCode::Timeout, message).into();
        Self { reason: "over_budget", ..error }
    }

    /// One line per failed request: its reason, status and message (4xx at info, 5xx at warn).
    pub(super) fn log(&self) {
        let message: String = self.message.chars().take(300).collect();
        let cause = self.cause.as_deref().unwrap_or("");
        let (reason, status, error_code) = (self.reason, self.status.as_u16(), self.code);
        if self.status.is_server_error() {
            tracing::warn!(reason, status, error_code, error = ?message, cause, "dify request failed");
        } else {
            tracing::info!(reason, status, error_code, error = ?message, "dify request refused");
        }
    }
}

impl From<ApiError> for DifyError {
    fn from(error: ApiError) -> Self {
        let status = error.code.status();
        let (message, cause) = match error.code {
            ErrorCode::Internal => ("internal error".to_string(), Some(error.message)),
            _ => (error.message, None),
        };
        Self { status, code: u32::from(status.as_u16()), message, reason: error.code.as_str(), cause }
    }
}

impl IntoResponse for DifyError {
    fn into_response(self) -> Response {
        let body = DifyErrorBody { error_code: self.code, error_msg: self.message };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The caller's grant: `None` when no key store is configured (open, as in mock mode).
pub(crate) struct DifyKey(pub(super) Option<Arc<Grant>>);

impl FromRequestParts<AppState> for DifyKey {
    type Rejection = DifyError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, DifyError> {
        if !state.api_keys.is_enabled() {
            return Ok(DifyKey(None));
        }
        let key = crate::api::auth::bearer(parts)
            .filter(|key| !key.is_empty())
            .ok_or_else(DifyError::malformed_authorization)?;
        match state.api_keys.grant(key) {
            Some(grant) => Ok(DifyKey(Some(Arc::clone(grant)))),
            None => Err(DifyError::authorization_failed("Authorization failed: unknown API key.")),
        }
    }
}
