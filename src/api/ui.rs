//! The retrieval playground (`GET /internal/retrieval/ui`): one page over the service's own API,
//! its assets compiled into the binary (no build step, no CDN), and `GET /internal/retrieval/tenants`,
//! which feeds its tenant picker.

use super::auth::TenantKey;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

const INDEX_HTML: &str = include_str!("ui/index.html");
const APP_JS: &str = include_str!("ui/app.js");
const APP_CSS: &str = include_str!("ui/app.css");

/// Only this origin's own scripts, styles and API; the page may not be framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The playground page.
pub(crate) async fn page() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

/// One tenant of `GET /tenants`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct TenantSummary {
    pub(crate) tenant_id: String,
    pub(crate) docs: usize,
    pub(crate) sections: usize,
    pub(crate) chunks: usize,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct TenantsResponse {
    pub(crate) tenants: Vec<TenantSummary>,
}

/// The tenants the caller may read (every tenant when no API keys are configured), with counts.
#[utoipa::path(get, path = "/internal/retrieval/tenants", tag = "meta",
    responses((status = 200, description = "the readable tenants, by id", body = TenantsResponse)))]
pub(crate) async fn tenants(State(state): State<AppState>, key: TenantKey) -> Result<Json<TenantsResponse>, ApiError> {
    let stats = state.search.index().stats().await.map_err(retrieval_engine::SearchError::from)?;
    let tenants = stats
        .tenants
        .into_iter()
        .filter(|(tenant_id, _)| key.allows(tenant_id))
        .map(|(tenant_id, counts)| TenantSummary {
            tenant_id,
            docs: counts.docs,
            sections: counts.sections,
            chunks: counts.chunks,
        })
        .collect();
    Ok(Json(TenantsResponse { tenants }))
}
