//! Optional authentication, off unless configured:
//! - `RETR_ADMIN_TOKEN`: the mutating endpoints (`POST /internal/retrieval/config`) need
//!   `Authorization: Bearer <token>`;
//! - `RETR_API_KEYS`: a file of keys and the tenants each may read; every data endpoint (search,
//!   context, chunk window, stats, the MCP endpoint) then needs `Authorization: Bearer <key>`, and a key never reads
//!   a tenant it is not granted, whatever the body says.
//!
//! Both are checked from the request head, before its body is read (`admission::refuse_before_body`): a
//! caller without them gets 401 at once (no `100 Continue`) and its connection is closed, so it
//! cannot hold a connection by sending a body slowly.

use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;

pub(crate) use super::keys::{ApiKeys, Grant};

/// The `Bearer` credential of a request, if it sends one.
pub(super) fn bearer(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(ErrorCode::Unauthorized, message).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// An extractor for the data endpoints: with `RETR_API_KEYS` set, the request must carry a known
/// key (else 401), and the handler checks the tenant it asks for with [`TenantKey::check`] (else
/// 403). Put it before the body extractor so an unauthenticated caller learns nothing from validation.
#[derive(Debug, Clone)]
pub(crate) struct TenantKey(Option<Arc<Grant>>);

impl TenantKey {
    /// Whether the key may read `tenant_id` (always, when no key store is configured).
    pub(crate) fn allows(&self, tenant_id: &str) -> bool {
        self.0.as_ref().is_none_or(|grant| grant.allows(tenant_id))
    }

    /// `Ok` when the key may read `tenant_id` (or no key store is configured).
    pub(crate) fn check(&self, tenant_id: &str) -> Result<(), ApiError> {
        match &self.0 {
            Some(grant) if !grant.allows(tenant_id) => {
                Err(ApiError::new(ErrorCode::Forbidden, "this API key may not read that tenant"))
            }
            Some(_) | None => Ok(()),
        }
    }
}

impl FromRequestParts<AppState> for TenantKey {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        if !state.api_keys.is_enabled() {
            return Ok(TenantKey(None));
        }
        match bearer(parts).and_then(|key| state.api_keys.grant(key)) {
            Some(grant) => Ok(TenantKey(Some(Arc::clone(grant)))),
            None => Err(unauthorized("this endpoint needs `Authorization: Bearer <API key>` (RETR_API_KEYS)")),
        }
    }
}

/// An extractor that lets a request through only with the admin token (or when none is set).
/// Put it before the body extractor so an unauthenticated caller learns nothing from validation.
#[derive(Debug)]
pub(crate) struct AdminAuth;

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let expected = state.settings.admin_token.expose();
        if expected.is_empty() {
            return Ok(AdminAuth);
        }
        match bearer(parts) {
            Some(token) if same_secret(token, expected) => Ok(AdminAuth),
            _ => Err(unauthorized("this endpoint needs `Authorization: Bearer <RETR_ADMIN_TOKEN>`")),
        }
    }
}

/// An extractor for `/metrics`: with `RETR_API_KEYS` set (and `RETR_METRICS_OPEN` false) the
/// request must carry the admin token or a key granted every tenant (`*`), since the metrics name
/// every tenant and its record counts. Open otherwise.
#[derive(Debug)]
pub(crate) struct MetricsAuth;

impl FromRequestParts<AppState> for MetricsAuth {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        if !metrics_need_credentials(state) {
            return Ok(MetricsAuth);
        }
        let admin = state.settings.admin_token.expose();
        let allowed = bearer(parts).is_some_and(|given| {
            (!admin.is_empty() && same_secret(given, admin))
                || state.api_keys.grant(given).is_some_and(|grant| **grant == Grant::AllTenants)
        });
        if allowed {
            Ok(MetricsAuth)
        } else {
            Err(unauthorized("/metrics needs `Authorization: Bearer <RETR_ADMIN_TOKEN or a * API key>`"))
        }
    }
}

/// Whether `/metrics` asks for credentials in this deployment.
pub(crate) fn metrics_need_credentials(state: &AppState) -> bool {
    state.api_keys.is_enabled() && !state.settings.metrics_open
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
    fn a_byte_order_mark_is_not_part_of_the_first_key() {
        let keys = super::ApiKeys::parse("\u{feff}acme-frontend-2c9f4e1a7b: acme\nops-7d0b9a64e2c1f3a8: *\n").unwrap();
        assert!(keys.grant("acme-frontend-2c9f4e1a7b").is_some_and(|grant| grant.allows("acme")));
        assert!(keys.grant("\u{feff}acme-frontend-2c9f4e1a7b").is_none());
    }

    #[test]
    fn secrets_compare_by_value() {
        assert!(same_secret("s3cret-token-0123", "s3cret-token-0123"));
        assert!(!same_secret("s3cret-token-0124", "s3cret-token-0123"));
        assert!(!same_secret("", "s3cret-token-0123"));
        assert!(!same_secret("s3cret-token-01234", "s3cret-token-0123"));
    }
}
