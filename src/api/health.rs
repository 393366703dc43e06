//! `/health`, `/internal/retrieval/stats` and `/metrics`.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::Ordering;

pub async fn health(State(state): State<AppState>) -> impl IntoResponse {
    let backend = state.search.index.backend_name();
    match state.search.index.health().await {
        Ok(()) => {
            (StatusCode::OK, Json(json!({"status": "ok", "backend": backend, "mock_mode": state.settings.mock_mode})))
        }
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "backend": backend, "error": error.message})),
        ),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsQuery {
    tenant_id: Option<String>,
}

/// Index statistics of one tenant (seed 002 `get_index_stats`). The tenant is required: stats
/// of other tenants (their counts and file names) are never returned.
pub async fn stats(
    State(state): State<AppState>,
    key: super::auth::TenantKey,
    query: Result<Query<StatsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::invalid(rejection.body_text()))?;
    let tenant_id = query.tenant_id.ok_or_else(|| ApiError::invalid("tenant_id: query parameter is required"))?;
    key.check(&tenant_id)?;
    crate::search::validate_tenant(&tenant_id)?;
    let stats = state.search.index.stats().await.map_err(crate::search::SearchError::from)?;
    let Some(tenant) = stats.tenants.get(&tenant_id) else {
        return Err(crate::search::SearchError::UnknownTenant(tenant_id).into());
    };
    Ok(Json(json!({
        "tenant_id": tenant_id,
        "backend": stats.backend,
        "embedding_model": stats.embedding_model,
        "dimension": stats.dimension,
        "indexed_at": tenant.indexed_at,
        "counts": {"docs": tenant.docs, "sections": tenant.sections, "chunks": tenant.chunks},
        "source_files": tenant.source_files,
        "config": state.search.runtime_settings(),
    })))
}

/// Prometheus text exposition of the service's counters.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let counters = &state.search.counters;
    let mut body = String::new();
    let mut counter = |name: &str, help: &str, value: u64| {
        body.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"));
    };
    counter(
        "retrieval_searches_total",
        "Searches that reached the cascade.",
        counters.searches.load(Ordering::Relaxed),
    );
    counter(
        "retrieval_embedding_fallbacks_total",
        "Queries embedded with pseudo-embeddings because the provider failed.",
        crate::embed::embedding_fallback_count(),
    );
    counter(
        "retrieval_rerank_failures_total",
        "Reranks that failed and kept the original order.",
        counters.rerank_failures.load(Ordering::Relaxed),
    );
    counter(
        "retrieval_text_fallbacks_total",
        "Searches answered by the text fallback.",
        counters.text_fallbacks.load(Ordering::Relaxed),
    );
    state.http_metrics.render(&mut body);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
