//! `POST /internal/retrieval/chunks/window`: the only endpoint that returns raw chunk text.

use super::auth::TenantKey;
use super::extract::ApiJson;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::Json;
use retrieval_engine::{openapi, WindowQuery};
use serde::{Deserialize, Serialize};

/// Largest accepted `window_before` / `window_after`.
pub(crate) const MAX_WINDOW: i64 = 50;
const DEFAULT_WINDOW: i64 = 1;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WindowRequest {
    #[schema(schema_with = openapi::tenant_id)]
    tenant_id: retrieval_engine::TenantId,
    #[schema(schema_with = openapi::id)]
    doc_id: String,
    #[schema(schema_with = openapi::id)]
    anchor_chunk_id: String,
    /// Chunks before the anchor (default 1).
    #[schema(minimum = 0, maximum = 50)]
    window_before: Option<i64>,
    /// Chunks after the anchor (default 1).
    #[schema(minimum = 0, maximum = 50)]
    window_after: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct WindowChunk {
    chunk_id: String,
    page: u32,
    chunk_index: u32,
    text: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct WindowResponse {
    doc_id: String,
    chunks: Vec<WindowChunk>,
}

fn window_size(field: &str, value: Option<i64>) -> Result<usize, ApiError> {
    let value = value.unwrap_or(DEFAULT_WINDOW);
    if !(0..=MAX_WINDOW).contains(&value) {
        return Err(ApiError::invalid(format!("{field}: must be within 0..={MAX_WINDOW}, got {value}")));
    }
    Ok(value as usize)
}

/// The chunks around an anchor chunk of one doc (the only endpoint that returns raw text).
#[utoipa::path(post, path = "/internal/retrieval/chunks/window", tag = "search", request_body = WindowRequest,
    responses((status = 200, description = "the chunks in page order", body = WindowResponse)))]
pub(crate) async fn window(
    State(state): State<AppState>,
    key: TenantKey,
    ApiJson(request): ApiJson<WindowRequest>,
) -> Result<Json<WindowResponse>, ApiError> {
    key.check(&request.tenant_id)?;
    for (field, value) in [("doc_id", &request.doc_id), ("anchor_chunk_id", &request.anchor_chunk_id)] {
        if value.trim().is_empty() {
            return Err(ApiError::invalid(format!("{field}: must not be empty")));
        }
    }
    let query = WindowQuery {
        before: window_size("window_before", request.window_before)?,
        after: window_size("window_after", request.window_after)?,
        tenant_id: request.tenant_id,
        doc_id: request.doc_id,
        anchor_chunk_id: request.anchor_chunk_id,
    };
    let chunks = state.search.window(&query).await?;
    Ok(Json(WindowResponse {
        doc_id: query.doc_id,
        chunks: chunks
            .iter()
            .map(|chunk| WindowChunk {
                chunk_id: chunk.id.clone(),
                page: chunk.meta.page,
                chunk_index: chunk.meta.chunk_index,
                text: chunk.text.to_string(),
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    #[test]
    fn the_schema_states_the_window_limit() {
        let schema = serde_json::to_value(super::WindowRequest::schema()).unwrap();
        for field in ["window_before", "window_after"] {
            assert_eq!(schema["properties"][field]["maximum"], super::MAX_WINDOW, "{field}");
        }
    }
}
