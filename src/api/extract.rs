//! `ApiJson`: axum's JSON extractor with rejections rendered as our JSON error body.

use crate::error::{ApiError, ErrorCode};
use axum::extract::rejection::JsonRejection;
use axum::extract::FromRequest;
use axum::http::StatusCode;

/// Like `axum::Json`, but a malformed body, a wrong type, a missing field, a missing
/// content type or an oversized body becomes `{"error":{"code","message"}}` with a 4xx status.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let message = rejection.body_text();
        match rejection {
            JsonRejection::JsonDataError(_) => ApiError::new(ErrorCode::InvalidRequest, message),
            JsonRejection::JsonSyntaxError(_) => ApiError::new(ErrorCode::InvalidJson, message),
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected a request with `Content-Type: application/json`",
            ),
            JsonRejection::BytesRejection(ref bytes) if bytes.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
            }
            JsonRejection::BytesRejection(_) => ApiError::new(ErrorCode::InvalidJson, message),
            _ => ApiError::new(ErrorCode::InvalidJson, message),
        }
    }
}
