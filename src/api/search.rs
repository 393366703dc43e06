//! `POST /internal/retrieval/search`.

use super::auth::TenantKey;
use super::extract::ApiJson;
use crate::error::ApiError;
use crate::search::{SearchRequest, SearchResponse};
use crate::state::AppState;
use axum::extract::State;
use axum::Json;

pub async fn search(
    State(state): State<AppState>,
    key: TenantKey,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    key.check(&request.tenant_id)?;
    Ok(Json(state.search.search(&request).await?))
}
