//! `POST / GET / DELETE /internal/retrieval/feedback`: what the orchestrator's answer to a search
//! used, stored durably per tenant (`retrieval_engine::FeedbackStore`) for the tenant's re-ranker to
//! learn from (`retrieval-service learn`).
//!
//! The caller sends the search's query with its `trace_id`: the orchestrator holds both, the
//! record then means the same after a restart and on whichever instance receives it (several
//! instances behind one address, `RETR_TENANTS` shards), and searches keep no memory of their
//! own. A key reads, writes and deletes only the feedback of the tenants it is granted.

use super::auth::TenantKey;
use super::extract::ApiJson;
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::extract::{Query, State};
use axum::Json;
use retrieval_engine::{
    learn::LearnedReranker, openapi, FeedbackRecord, FeedbackStore, TenantId, Verdict, MAX_FEEDBACK_IDS,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Longest accepted `trace_id` (as `/search` accepts).
pub(crate) const MAX_TRACE_ID_CHARS: usize = 256;
/// Longest accepted hit id.
const MAX_ID_CHARS: usize = 1024;
/// Records `GET` returns at most.
const MAX_LIST: usize = 1000;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedbackRequest {
    #[schema(schema_with = openapi::tenant_id)]
    tenant_id: TenantId,
    /// The `trace_id` the search was made with (at most 256 characters).
    #[schema(schema_with = openapi::id)]
    trace_id: String,
    /// The search's query, as sent to `/search`.
    #[schema(schema_with = openapi::query)]
    query: String,
    /// The hits the answer used: hit ids (or their pages' doc ids), at most 50; empty when it used none.
    #[schema(schema_with = id_array)]
    used: Vec<String>,
    /// The hits shown to the answer's writer, when known (at most 50); `null` is absent.
    #[schema(schema_with = optional_id_array)]
    shown: Option<Vec<String>>,
    /// The user's verdict on the answer, when given.
    verdict: Option<Verdict>,
}

/// `used` / `shown`: at most `MAX_FEEDBACK_IDS` ids (`openapi::id`).
fn id_array() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new().items(openapi::id()).max_items(Some(MAX_FEEDBACK_IDS)).build()
}

/// `shown`: as `used`, or `null`.
fn optional_id_array() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{SchemaType, Type};
    utoipa::openapi::schema::ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(openapi::id())
        .max_items(Some(MAX_FEEDBACK_IDS))
        .build()
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct FeedbackStored {
    /// `stored`: the record is on disk (synced) when this answer is sent.
    status: &'static str,
    tenant_id: String,
    trace_id: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct FeedbackQuery {
    tenant_id: Option<TenantId>,
    limit: Option<usize>,
}

/// One stored record as `GET` returns it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct FeedbackItem {
    /// When it was stored, milliseconds since the Unix epoch.
    at_ms: u64,
    trace_id: String,
    query: String,
    used: Vec<String>,
    shown: Vec<String>,
    verdict: Option<Verdict>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct FeedbackList {
    tenant_id: String,
    /// Records kept for the tenant (within the size and age bounds).
    count: usize,
    /// The newest `limit` records, oldest first.
    records: Vec<FeedbackItem>,
    /// The re-ranker learned from the tenant's feedback that searches use, if any.
    reranker: Option<LearnedReranker>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct FeedbackDeleted {
    tenant_id: String,
    /// Records deleted.
    deleted: usize,
}

fn store(state: &AppState) -> Result<&Arc<FeedbackStore>, ApiError> {
    state.feedback.as_ref().ok_or_else(|| {
        ApiError::new(ErrorCode::NotFound, "feedback is off on this instance (RETR_FEEDBACK_DIR is not set)")
    })
}

/// A trace id or a hit id: not empty or whitespace (`str::trim`, as `openapi::id` says), at
/// most `max_chars` characters.
fn check_id(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(format!("{field}: must not be empty")));
    }
    if value.chars().nth(max_chars).is_some() {
        return Err(ApiError::invalid(format!("{field}: must be at most {max_chars} characters")));
    }
    Ok(())
}

/// The query: not blank as `/search` counts it.
fn check_text(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    if retrieval_engine::is_blank(value) {
        return Err(ApiError::invalid(format!("{field}: must not be empty")));
    }
    if value.chars().nth(max_chars).is_some() {
        return Err(ApiError::invalid(format!("{field}: must be at most {max_chars} characters")));
    }
    Ok(())
}

fn check_ids(field: &str, ids: &[String]) -> Result<(), ApiError> {
    if ids.len() > MAX_FEEDBACK_IDS {
        return Err(ApiError::invalid(format!("{field}: at most {MAX_FEEDBACK_IDS} ids, got {}", ids.len())));
    }
    for (position, id) in ids.iter().enumerate() {
        check_id(&format!("{field}[{position}]"), id, MAX_ID_CHARS)?;
    }
    Ok(())
}

/// The tenant must be this instance's and exist in its index: feedback is never stored for a
/// tenant nobody can search.
async fn check_tenant(state: &AppState, tenant_id: &TenantId) -> Result<(), ApiError> {
    state.search.check_served(tenant_id)?;
    let exists = state.search.index().tenant_exists(tenant_id).await.map_err(retrieval_engine::SearchError::from)?;
    if !exists {
        return Err(retrieval_engine::SearchError::UnknownTenant(tenant_id.to_string()).into());
    }
    Ok(())
}

fn stored_failure(error: retrieval_engine::StoreError) -> ApiError {
    ApiError::new(ErrorCode::Internal, error.to_string())
}

/// Stores what the answer to a search used; answered once the record is on disk.
#[utoipa::path(post, path = "/internal/retrieval/feedback", tag = "feedback", request_body = FeedbackRequest,
    responses((status = 200, description = "stored (synced to disk)", body = FeedbackStored),
        (status = 404, description = "feedback is off (`RETR_FEEDBACK_DIR` unset), or no such tenant")))]
pub(crate) async fn post_feedback(
    State(state): State<AppState>,
    key: TenantKey,
    ApiJson(request): ApiJson<FeedbackRequest>,
) -> Result<Json<FeedbackStored>, ApiError> {
    key.check(&request.tenant_id)?;
    check_id("trace_id", &request.trace_id, MAX_TRACE_ID_CHARS)?;
    check_text("query", &request.query, state.settings.max_query_chars)?;
    check_ids("used", &request.used)?;
    let shown = request.shown.unwrap_or_default();
    check_ids("shown", &shown)?;
    let store = store(&state)?;
    check_tenant(&state, &request.tenant_id).await?;
    let record = FeedbackRecord {
        at_ms: retrieval_engine::now_ms(),
        trace_id: request.trace_id,
        query: request.query,
        used: request.used,
        shown,
        verdict: request.verdict,
    };
    store.append(&request.tenant_id, &record).await.map_err(stored_failure)?;
    Ok(Json(FeedbackStored { status: "stored", tenant_id: request.tenant_id.to_string(), trace_id: record.trace_id }))
}

fn tenant_of(
    query: Result<Query<FeedbackQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<(TenantId, Option<usize>), ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::invalid(rejection.body_text()))?;
    let tenant_id = query.tenant_id.ok_or_else(|| ApiError::invalid("tenant_id: query parameter is required"))?;
    Ok((tenant_id, query.limit))
}

/// The tenant's newest feedback records and the re-ranker learned from them.
#[utoipa::path(get, path = "/internal/retrieval/feedback", tag = "feedback",
    params(("tenant_id" = String, Query, pattern = "^[A-Za-z0-9._-]{1,128}$", description = "whose feedback"),
        ("limit" = Option<usize>, Query, minimum = 0, maximum = 1000, description = "newest records returned (default 20)")),
    responses((status = 200, description = "the tenant's feedback", body = FeedbackList),
        (status = 404, description = "feedback is off (`RETR_FEEDBACK_DIR` unset), or no such tenant")))]
pub(crate) async fn get_feedback(
    State(state): State<AppState>,
    key: TenantKey,
    query: Result<Query<FeedbackQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<FeedbackList>, ApiError> {
    let (tenant_id, limit) = tenant_of(query)?;
    key.check(&tenant_id)?;
    let limit = limit.unwrap_or(20);
    if limit > MAX_LIST {
        return Err(ApiError::invalid(format!("limit: must be at most {MAX_LIST}, got {limit}")));
    }
    let store = Arc::clone(store(&state)?);
    check_tenant(&state, &tenant_id).await?;
    let tenant = tenant_id.to_string();
    let records = tokio::task::spawn_blocking(move || store.read(&tenant))
        .await
        .map_err(|error| ApiError::new(ErrorCode::Internal, error.to_string()))?
        .map_err(stored_failure)?;
    let count = records.len();
    let records = records
        .into_iter()
        .skip(count.saturating_sub(limit))
        .map(|r| FeedbackItem {
            at_ms: r.at_ms,
            trace_id: r.trace_id,
            query: r.query,
            used: r.used,
            shown: r.shown,
            verdict: r.verdict,
        })
        .collect();
    let reranker = state.search.learned_rerankers().get(&tenant_id).map(|model| model.as_ref().clone());
    Ok(Json(FeedbackList { tenant_id: tenant_id.to_string(), count, records, reranker }))
}

/// Deletes every feedback record of the tenant.
#[utoipa::path(delete, path = "/internal/retrieval/feedback", tag = "feedback",
    params(("tenant_id" = String, Query, pattern = "^[A-Za-z0-9._-]{1,128}$", description = "whose feedback")),
    responses((status = 200, description = "deleted", body = FeedbackDeleted),
        (status = 404, description = "feedback is off (`RETR_FEEDBACK_DIR` unset), or no such tenant")))]
pub(crate) async fn delete_feedback(
    State(state): State<AppState>,
    key: TenantKey,
    query: Result<Query<FeedbackQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<FeedbackDeleted>, ApiError> {
    let (tenant_id, _) = tenant_of(query)?;
    key.check(&tenant_id)?;
    let store = store(&state)?;
    state.search.check_served(&tenant_id)?;
    let deleted = store.delete(&tenant_id).await.map_err(stored_failure)?;
    Ok(Json(FeedbackDeleted { tenant_id: tenant_id.to_string(), deleted }))
}
