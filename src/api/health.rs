//! `/health`, `/internal/retrieval/stats` and `/metrics`.

use crate::config::RuntimeSettings;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};

/// `GET /health`: `ok` (200), `degraded` (200) or `unavailable` (503), computed from what the
/// service already holds (the replica's state, which its refresher keeps current in the
/// background; the config files found at start-up): it never waits on a dependency.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct HealthResponse {
    /// `ok`; `degraded` (200) when answers carry a degradation (the index's source cannot be
    /// refreshed and searches answer from the last good replica; the themes file is missing so
    /// theme routing is off; the last call to the embedding, rerank or LLM router upstream
    /// failed; the last reload of the config files was rejected; in mock mode, the embedding
    /// server was down at start-up so the demo corpus and the queries use pseudo-embeddings);
    /// `unavailable` (503) when no index is loaded.
    pub(crate) status: String,
    /// `memory` or `chroma`.
    pub(crate) backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mock_mode: Option<bool>,
    /// Why the status is not `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// How current the replica is, when the index reloads from a source (a snapshot file, Chroma).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) replica: Option<ReplicaHealth>,
    /// The optional config files that are configured but absent, by setting
    /// (`RETR_THEMES_PATH`, `RETR_BOOSTING_PATH`, `RETR_SYNONYMS_DIR`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) missing_config: Vec<String>,
}

/// The replica part of `/health`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ReplicaHealth {
    /// Seconds since the replica was last confirmed current; absent before the first load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) age_seconds: Option<f64>,
    /// Why the last refresh failed, while it keeps failing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) last_refresh_error: Option<String>,
    /// Which server the replica was last read from (`primary`, `standby 1`), for PostgreSQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
}

/// Liveness and backend health (also at `/internal/retrieval/health`).
#[utoipa::path(get, path = "/health", tag = "meta", responses(
    (status = 200, description = "ok, or degraded (answers carry a degradation)", body = HealthResponse),
    (status = 503, description = "no index loaded", body = HealthResponse)))]
pub(crate) async fn health(State(state): State<AppState>) -> impl IntoResponse {
    let index = state.search.index();
    let replica = index.replica_status().map(|status| ReplicaHealth {
        age_seconds: status.age_seconds,
        last_refresh_error: status.last_refresh_error,
        source: status.source,
    });
    let tuning = state.search.tuning_status();
    let missing_config = tuning.missing.clone();
    let themes_missing = missing_config.iter().any(|setting| setting == crate::config::THEMES_SETTING);
    let mut response = HealthResponse {
        status: "ok".into(),
        backend: index.backend_name().to_string(),
        mock_mode: Some(state.settings.mock_mode),
        error: None,
        replica,
        missing_config,
    };
    // `health` reads the replica's state only (no call to Chroma or the file system).
    if let Err(error) = index.health().await {
        response.status = "unavailable".into();
        response.mock_mode = None;
        response.error = Some(error.public_message());
        return (StatusCode::SERVICE_UNAVAILABLE, Json(response));
    }
    let mut reasons: Vec<String> = index.staleness().into_iter().collect();
    reasons.extend(state.degraded_since_start.clone());
    if themes_missing {
        reasons.push("the themes file (RETR_THEMES_PATH) is missing: theme routing is off (router_fallback)".into());
    }
    if tuning.reload_error.is_some() {
        reasons.push(format!(
            "the last config reload was rejected ({}); the previous themes, boosting and synonyms stay in use",
            tuning.rejected_settings().join(", ")
        ));
    }
    // Chroma's failures are the replica's staleness above; the others degrade the answers that
    // use them (embedding_fallback, rerank_failed, router_fallback) until a call succeeds again.
    for (upstream, outcome) in state.metrics.failing_upstreams() {
        if upstream != "chroma" {
            reasons.push(format!("the last call to the {upstream} upstream failed ({outcome})"));
        }
    }
    if !reasons.is_empty() {
        response.status = "degraded".into();
        response.error = Some(reasons.join("; "));
    }
    (StatusCode::OK, Json(response))
}

/// Record counts of one tenant.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct StatsCounts {
    pub(crate) docs: usize,
    pub(crate) sections: usize,
    pub(crate) chunks: usize,
}

/// `GET /stats`: one tenant's index statistics and the runtime settings.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct StatsResponse {
    pub(crate) tenant_id: String,
    pub(crate) backend: String,
    /// The version of the index these figures come from (absent for a fixed snapshot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) index_version: Option<String>,
    pub(crate) embedding_model: String,
    pub(crate) dimension: usize,
    pub(crate) indexed_at: String,
    pub(crate) counts: StatsCounts,
    pub(crate) source_files: Vec<String>,
    pub(crate) config: RuntimeSettings,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatsQuery {
    tenant_id: Option<retrieval_engine::TenantId>,
}

/// Index statistics of one tenant (counts, source files, when indexed). The tenant is required: stats
/// of other tenants (their counts and file names) are never returned.
#[utoipa::path(get, path = "/internal/retrieval/stats", tag = "meta",
    params(("tenant_id" = String, Query, pattern = "^[A-Za-z0-9._-]{1,128}$",
        description = "the tenant whose statistics to return")),
    responses((status = 200, description = "the tenant's statistics", body = StatsResponse)))]
pub(crate) async fn stats(
    State(state): State<AppState>,
    key: super::auth::TenantKey,
    query: Result<Query<StatsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::invalid(rejection.body_text()))?;
    let tenant_id = query.tenant_id.ok_or_else(|| ApiError::invalid("tenant_id: query parameter is required"))?;
    key.check(&tenant_id)?;
    state.search.check_served(&tenant_id)?;
    let stats = state.search.index().stats().await.map_err(retrieval_engine::SearchError::from)?;
    let Some(tenant) = stats.tenants.get(tenant_id.as_str()) else {
        return Err(retrieval_engine::SearchError::UnknownTenant(tenant_id.into()).into());
    };
    Ok(Json(StatsResponse {
        index_version: state.search.index().version().map(|version| version.to_string()),
        backend: stats.backend,
        embedding_model: stats.embedding_model,
        dimension: stats.dimension,
        indexed_at: tenant.indexed_at.clone(),
        counts: StatsCounts { docs: tenant.docs, sections: tenant.sections, chunks: tenant.chunks },
        source_files: tenant.source_files.clone(),
        config: state.search.runtime_settings(),
        tenant_id: tenant_id.into(),
    }))
}

/// Every metric, in the OpenMetrics text format (`crate::metrics`).
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "OpenMetrics text exposition", body = String,
        content_type = "application/openmetrics-text")))]
pub(crate) async fn metrics(_auth: super::auth::MetricsAuth, State(state): State<AppState>) -> impl IntoResponse {
    let index = state.search.index();
    let stats = index.stats().await.ok();
    if let Some(replica) = index.replica_status() {
        state.metrics.observe_replica(replica.records_loaded_total, replica.age_seconds, replica.last_load_seconds);
    }
    if let Some(stats) = &stats {
        state.metrics.observe_tenant_records(
            stats
                .tenants
                .iter()
                .map(|(tenant, counts)| (tenant.as_str(), [counts.docs, counts.sections, counts.chunks])),
        );
    }
    ([(header::CONTENT_TYPE, retrieval_engine::METRICS_CONTENT_TYPE)], state.metrics.render())
}
