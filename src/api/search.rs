//! `POST /internal/retrieval/search`.

use super::auth::TenantKey;
use super::extract::ApiJson;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::Json;
use retrieval_engine::{SearchRequest, SearchResponse};

/// Search: the cascade's hits (never with text), routing, and any degradation.
#[utoipa::path(post, path = "/internal/retrieval/search", tag = "search", request_body = SearchRequest,
    responses((status = 200, description = "hits, best first (never with text)", body = SearchResponse)))]
pub(crate) async fn search(
    State(state): State<AppState>,
    key: TenantKey,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    key.check(&request.tenant_id)?;
    #[cfg(feature = "ceiling-probe")]
    if let Some(response) = retrieval_engine::ceiling_probe::answer(&state.search, &request).await? {
        return Ok(Json(response));
    }
    Ok(Json(state.search.search(&request).await?))
}
