//! Optional admin authentication: with `RETR_ADMIN_TOKEN` set, the mutating endpoints
//! (`POST /internal/retrieval/config`) need `Authorization: Bearer <token>`.

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// An extractor that lets a request through only with the admin token (or when none is set).
/// Put it before the body extractor so an unauthenticated caller learns nothing from validation.
#[derive(Debug)]
pub struct AdminAuth;

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let expected = state.settings.admin_token.expose();
        if expected.is_empty() {
            return Ok(AdminAuth);
        }
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        match given {
            Some(token) if same_secret(token, expected) => Ok(AdminAuth),
            _ => {
                let mut response = ApiError::new(
                    ErrorCode::Unauthorized,
                    "this endpoint needs `Authorization: Bearer <RETR_ADMIN_TOKEN>`",
                )
                .into_response();
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                Err(response)
            }
        }
    }
}

/// Compares two secrets in time independent of where they differ: the SHA-256 digests (fixed
/// length) are compared with no early exit.
fn same_secret(given: &str, expected: &str) -> bool {
    let (given, expected) = (Sha256::digest(given.as_bytes()), Sha256::digest(expected.as_bytes()));
    let difference = given.iter().zip(expected.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_by_value() {
        assert!(same_secret("s3cret-token-0123", "s3cret-token-0123"));
        assert!(!same_secret("s3cret-token-0124", "s3cret-token-0123"));
        assert!(!same_secret("", "s3cret-token-0123"));
        assert!(!same_secret("s3cret-token-01234", "s3cret-token-0123"));
    }
}
