//! `POST /internal/retrieval/search`.

use super::extract::ApiJson;
use crate::error::ApiError;
use crate::search::{SearchRequest, SearchResponse};
use crate::state::AppState;
use axum::extract::State;
use axum::Json;

pub async fn search(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    Ok(Json(state.search.search(&request).await?))
}
