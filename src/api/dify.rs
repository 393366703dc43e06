//! The Dify External Knowledge API (`POST {RETR_DIFY_BASE_PATH}/retrieval`), so that a Dify
//! workspace can use this service as an external knowledge base with no glue code, and get the
//! service's ranking as Dify's client really handles it.
//!
//! - `knowledge_id` names a knowledge base: a tenant, optionally narrowed by a fixed metadata
//!   filter and a theme (`RETR_DIFY_KNOWLEDGE_BASES`, `knowledge.rs`); without that file every
//!   tenant is a knowledge base under its own id.
//! - The whole search pipeline runs (routing, hybrid ranking, boosting, the cascade); each record
//!   is one hit with the text of the section or chunk the cascade chose, in the service's order.
//! - Dify re-sorts the records by `score`, so `score` is the final rank score mapped into [0, 1]
//!   ([`record_scores`]): strictly decreasing in the service's order, so sorting by it keeps the
//!   ranking. `score_threshold` applies to it.
//! - The request is read as Dify sends it (`request.rs`): `null` settings are defaults, `top_k`
//!   above 50 is 50, unknown fields are ignored and logged once per name; `metadata_condition`
//!   compiles to a `MetadataCondition` checked on every candidate record (`condition.rs`).
//! - Dify sends a question of any length, or none: the query is searched without the blank
//!   characters around it; a blank one (spaces, zero-width and other invisible characters) has no
//!   records (counted as `blank_query`); one over `RETR_MAX_QUERY_CHARS` is searched by its
//!   beginning ([`truncate_query`]), flagged `query_truncated` and counted
//!   (`retrieval_dify_queries_truncated_total`). `/search` keeps refusing both.
//! - Dify waits 5 s for an answer, then retries. A request is answered within
//!   `RETR_DIFY_TIME_BUDGET_SECONDS`: past three quarters of it the full pipeline is dropped and
//!   the answer is ranked lexically (no query embedding, reranker or LLM router), flagged in
//!   `degradations`; when even that cannot finish in time, 504 before the budget ends.
//! - Keys come from the API key store (`RETR_API_KEYS`): a key reads only the knowledge bases of
//!   the tenants it is granted. Errors are Dify's `{"error_code", "error_msg"}`: 1001 (401) no or
//!   a malformed `Authorization` header, 1002 (403) an unknown key or one that may not read that
//!   knowledge base (also when it does not exist, so a key learns nothing of other tenants'
//!   knowledge bases), 2001 (404) no such knowledge base; any other error carries its HTTP status
//!   as `error_code` (422 a request the contract does not allow, 503 the index unavailable, …).
//!   Every answer is counted in `retrieval_dify_requests_total` by outcome (a closed set), and
//!   every failure is logged with its reason.

mod condition;
mod error;
mod field_names;
pub(crate) mod knowledge;
mod request;

pub(crate) use condition::condition_schema;
pub(crate) use error::{DifyError, DifyErrorBody, DifyKey};
pub(crate) use knowledge::KnowledgeBases;
pub(crate) use request::{
    DifyCondition, DifyMetadataCondition, DifyRetrievalRequest, LogicalOperator, RetrievalSetting,
};

use super::auth::Grant;
use super::extract::ApiJson;
use crate::config::{RouterMode, MAX_RESULTS_CAP};
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::extract::{OriginalUri, Request, State};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use retrieval_engine::{
    condition::{Clause, MetadataCondition},
    is_blank_char, Degradation, RankingMode, RetrievalHit, SearchRequest, SearchResponse,
};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The share of the time budget the full pipeline gets before the lexical fallback starts.
const FULL_PIPELINE_SHARE: f64 = 0.75;
/// The degradation of an answer ranked lexically because the full pipeline was too slow.
const TIME_BUDGET: &str = "time_budget";
/// The degradation of an answer to the beginning of a query over `RETR_MAX_QUERY_CHARS`.
const QUERY_TRUNCATED: &str = "query_truncated";
/// How far back from the limit a cut looks for the end of a word, in characters.
const WORD_END_WINDOW: usize = 64;

/// Whether `path` is `{base}/retrieval` up to empty segments: an endpoint registered in Dify with
/// a trailing `/` is called at `{base}//retrieval`.
pub(crate) fn is_retrieval_path(base: &str, path: &str) -> bool {
    let wanted = base.split('/').chain(["retrieval"]).filter(|segment| !segment.is_empty());
    path.split('/').filter(|segment| !segment.is_empty()).eq(wanted)
}

/// Serves a request no route matched when its path is the endpoint's with extra slashes (405 for
/// another method than POST); gives any other request back.
pub(crate) async fn serve_unrouted(state: AppState, request: Request) -> Result<Response, Request> {
    let path = request.extensions().get::<OriginalUri>().map_or(request.uri().path(), |uri| uri.path());
    if !is_retrieval_path(&state.settings.dify_base_path, path) {
        return Err(request);
    }
    if request.method() != Method::POST {
        let mut response =
            ApiError::new(ErrorCode::MethodNotAllowed, "method not allowed on this route").into_response();
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
        return Ok(response);
    }
    Ok(retrieval.call(request, state).await)
}

/// `POST {base}/retrieval`: Dify's response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DifyRetrievalResponse {
    /// Best first, in decreasing `score`.
    pub(crate) records: Vec<DifyRecord>,
    /// What the answer had to do without (as in `/search`), e.g. `time_budget`: ranked lexically
    /// because the full pipeline did not answer in time. Dify ignores it.
    pub(crate) degradations: Vec<Degradation>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DifyRecord {
    /// The passage: the text of the section or chunk the cascade chose.
    pub(crate) content: String,
    /// The final relevance in [0, 1]: the final rank score divided by the larger of 1 and the
    /// best final rank score of the answer, strictly decreasing in the records' order.
    pub(crate) score: f32,
    pub(crate) title: String,
    /// Never null.
    pub(crate) metadata: DifyRecordMetadata,
}

/// Where the passage comes from and what it is about.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DifyRecordMetadata {
    pub(crate) knowledge_id: String,
    pub(crate) id: String,
    /// `doc`, `section` or `chunk`.
    pub(crate) level: String,
    /// The page's id (Dify's document id; without it Dify would use the title).
    pub(crate) document_id: String,
    pub(crate) doc_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) section_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chunk_id: Option<String>,
    pub(crate) url: String,
    pub(crate) source: String,
    pub(crate) product: String,
    pub(crate) version: String,
    pub(crate) tags: Vec<String>,
    pub(crate) domain: String,
    pub(crate) section: String,
    pub(crate) platform: String,
    pub(crate) role: String,
    pub(crate) page_type: String,
    pub(crate) heading: String,
    pub(crate) heading_path: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) theme_label: Option<String>,
    /// The hit's final ranking score (boosts included; may exceed 1).
    pub(crate) rank_score: f32,
    /// The fused dense + lexical relevance before boosts, in [0, 1] (`/search`'s `relevance`).
    pub(crate) relevance: f32,
}

/// Dify's External Knowledge API: the records of one knowledge base that answer `query`.
#[utoipa::path(post, path = "/internal/retrieval/dify/retrieval", tag = "dify", request_body = DifyRetrievalRequest,
    responses(
        (status = 200, description = "records, best first in decreasing score; `{\"records\": [], …}` when nothing matches", body = DifyRetrievalResponse),
        (status = 400, description = "malformed JSON", body = DifyErrorBody),
        (status = 401, description = "1001: no or a malformed `Authorization` header (with RETR_API_KEYS set)", body = DifyErrorBody),
        (status = 403, description = "1002: unknown key, or the key may not read that knowledge base", body = DifyErrorBody),
        (status = 404, description = "2001: no such knowledge base", body = DifyErrorBody),
        (status = 413, description = "request body too large", body = DifyErrorBody),
        (status = 421, description = "the knowledge base's tenant is served by another instance (RETR_TENANTS)", body = DifyErrorBody),
        (status = 415, description = "not `application/json`", body = DifyErrorBody),
        (status = 422, description = "a request the contract does not allow (field, operator, value, range, repeated key)", body = DifyErrorBody),
        (status = 503, description = "index or backend unavailable", body = DifyErrorBody),
        (status = 504, description = "not answered within RETR_DIFY_TIME_BUDGET_SECONDS", body = DifyErrorBody),
    ))]
pub(crate) async fn retrieval(
    State(state): State<AppState>,
    key: Result<DifyKey, DifyError>,
    body: Result<ApiJson<Value>, ApiError>,
) -> Response {
    match answer(&state, key, body).await {
        Ok(Answered::Blank(response)) => {
            state.metrics.observe_dify("blank_query");
            Json(response).into_response()
        }
        Ok(Answered::Searched(response)) => {
            let outcome = match &response.degradations {
                none if none.is_empty() => "ok",
                some if some.iter().any(|degradation| degradation.code == TIME_BUDGET) => "lexical_fallback",
                _ => "degraded",
            };
            state.metrics.observe_dify(outcome);
            Json(response).into_response()
        }
        Err(error) => {
            error.log();
            state.metrics.observe_dify(error.reason);
            error.into_response()
        }
    }
}

/// A request answered: searched, or with no records for a blank query (counted apart).
enum Answered {
    Searched(DifyRetrievalResponse),
    Blank(DifyRetrievalResponse),
}

async fn answer(
    state: &AppState,
    key: Result<DifyKey, DifyError>,
    body: Result<ApiJson<Value>, ApiError>,
) -> Result<Answered, DifyError> {
    let started = Instant::now();
    let DifyKey(grant) = key?;
    let ApiJson(body) = body?;
    let (request, unknown) = request::read(body)?;
    state.dify.unknown_fields().notice(&unknown);
    let base = match state.dify.resolve(&request.knowledge_id) {
        Some(base) if grant.as_ref().is_none_or(|grant| grant.allows(&base.tenant_id)) => base,
        // A restricted key learns nothing of knowledge bases it may not read, existing or not.
        _ if grant.as_ref().is_some_and(|grant| !matches!(**grant, Grant::AllTenants)) => {
            return Err(DifyError::authorization_failed(format!(
                "Authorization failed: this API key may not read the knowledge base {:?} (or it does not exist).",
                request.knowledge_id
            )));
        }
        _ => return Err(DifyError::no_knowledge_base(&request.knowledge_id)),
    };
    let setting = request.retrieval_setting.unwrap_or_default();
    let top_k = match setting.top_k {
        Some(top_k) if top_k < 1 => {
            return Err(DifyError::invalid(format!("retrieval_setting.top_k: must be at least 1, got {top_k}")));
        }
        top_k => top_k.map(|top_k| top_k.min(MAX_RESULTS_CAP as i64)),
    };
    let threshold = setting.score_threshold.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&threshold) {
        return Err(DifyError::invalid(format!(
            "retrieval_setting.score_threshold: must be within 0..=1, got {threshold}"
        )));
    }
    let mut clauses = base.filter.clone();
    if let Some(condition) = &request.metadata_condition {
        clauses.extend(condition::compile(condition)?.map(Clause::Group));
    }
    // Dify sends whatever its user or workflow holds: blank characters around the question are
    // dropped, a blank question has no records, an overlong one is searched by its beginning.
    let query = request.query.trim_matches(is_blank_char);
    if query.is_empty() {
        check_tenant(state, &base.tenant_id, &request.knowledge_id).await?;
        tracing::info!(knowledge_id = ?request.knowledge_id, "dify request: the query is blank; no records");
        return Ok(Answered::Blank(DifyRetrievalResponse { records: Vec::new(), degradations: Vec::new() }));
    }
    let max_query_chars = state.settings.max_query_chars;
    let truncated = truncate_query(query, max_query_chars);
    let truncation = truncated.map(|kept| {
        let (length, kept_chars) = (query.chars().count(), kept.chars().count());
        state.metrics.dify_queries_truncated.inc();
        tracing::info!(
            knowledge_id = ?request.knowledge_id,
            query_chars = length,
            kept_chars,
            "dify request: the query is over RETR_MAX_QUERY_CHARS; searching with its beginning"
        );
        Degradation::new(
            QUERY_TRUNCATED,
            format!(
                "the query is {length} characters long, over the limit of {max_query_chars} (RETR_MAX_QUERY_CHARS); \
                 searched with its first {kept_chars} characters"
            ),
        )
    });
    let search = SearchRequest {
        max_results: top_k,
        theme: base.theme.clone(),
        condition: (!clauses.is_empty()).then(|| Arc::new(MetadataCondition::all(clauses))),
        ..SearchRequest::new(base.tenant_id.clone(), truncated.unwrap_or(query).to_string())
    };
    let (answer, texts) = within_budget(state, &search, started).await.map_err(|error| match error {
        Budget::Over(budget) => DifyError::over_budget(budget),
        Budget::Failed(error) if error.code == ErrorCode::TenantNotFound => {
            DifyError::no_knowledge_base(&request.knowledge_id)
        }
        Budget::Failed(error) => error.into(),
    })?;
    Ok(Answered::Searched(DifyRetrievalResponse {
        records: records(&request.knowledge_id, answer.hits, &texts, threshold as f32),
        degradations: truncation.into_iter().chain(answer.degradations).collect(),
    }))
}

/// The beginning of `query` (no blank character first) searched in its place when it is longer
/// than `max` characters: its first `max` characters, cut back to the end of a word when the cut
/// falls inside one and a blank character lies within the last `WORD_END_WINDOW` of them, without
/// the blank characters it ends with. `None` when `query` is within `max`.
fn truncate_query(query: &str, max: usize) -> Option<&str> {
    let (cut, _) = query.char_indices().nth(max)?;
    let (kept, rest) = query.split_at(cut);
    let inside_word = !rest.starts_with(is_blank_char) && !kept.ends_with(is_blank_char);
    let kept = match kept.char_indices().rev().nth(WORD_END_WINDOW.saturating_sub(1)) {
        _ if !inside_word => kept,
        window => {
            let window_start = window.map_or(0, |(at, _)| at);
            kept[window_start..].rfind(is_blank_char).map_or(kept, |at| &kept[..window_start + at])
        }
    };
    Some(kept.trim_end_matches(is_blank_char))
}

/// What a search checks of the knowledge base's tenant first, for an answer without a search:
/// this instance serves it (421) and it exists (2001).
async fn check_tenant(state: &AppState, tenant_id: &str, knowledge_id: &str) -> Result<(), DifyError> {
    state.search.check_served(tenant_id).map_err(ApiError::from)?;
    match state.search.index().tenant_exists(tenant_id).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(DifyError::no_knowledge_base(knowledge_id)),
        Err(error) => Err(ApiError::from(retrieval_engine::SearchError::from(error)).into()),
    }
}

enum Budget {
    Over(Duration),
    Failed(ApiError),
}

/// The search and the hits' texts within the Dify time budget from `started`: the full pipeline
/// for `FULL_PIPELINE_SHARE` of it, else the lexical ranking alone for the rest (flagged).
async fn within_budget(
    state: &AppState,
    search: &SearchRequest,
    started: Instant,
) -> Result<(SearchResponse, HashMap<String, String>), Budget> {
    let budget = Duration::from_secs_f64(state.settings.dify_time_budget_seconds);
    let full =
        tokio::time::timeout_at(started + budget.mul_f64(FULL_PIPELINE_SHARE), state.search.search_with_texts(search));
    if let Ok(result) = full.await {
        return result.map_err(|error| Budget::Failed(error.into()));
    }
    tracing::warn!(
        tenant_id = %search.tenant_id,
        budget_seconds = budget.as_secs_f64(),
        "dify request: the full pipeline is too slow for the time budget; ranking lexically"
    );
    let lexical = tokio::time::timeout_at(started + budget, lexical_search(state, search));
    let (mut answer, texts) = lexical.await.map_err(|_| Budget::Over(budget))?.map_err(Budget::Failed)?;
    answer.degradations.push(Degradation::new(
        TIME_BUDGET,
        format!(
            "the full pipeline did not answer within {:.2} s of the {} s Dify time budget \
             (RETR_DIFY_TIME_BUDGET_SECONDS); ranked lexically, without the query embedding, reranker or LLM router",
            budget.mul_f64(FULL_PIPELINE_SHARE).as_secs_f64(),
            budget.as_secs_f64()
        ),
    ));
    Ok((answer, texts))
}

/// `search` ranked lexically only, with nothing but the index to wait for: a placeholder query
/// vector (the lexical mode never reads it), no reranking, and the rule router instead of the LLM.
async fn lexical_search(
    state: &AppState,
    search: &SearchRequest,
) -> Result<(SearchResponse, HashMap<String, String>), ApiError> {
    let index = state.search.index();
    let dimension = index.dimension().await.map_err(retrieval_engine::SearchError::from)?;
    let router_mode = match state.search.runtime_settings().theme_router_mode {
        RouterMode::Llm => RouterMode::Heuristic,
        other => other,
    };
    let lexical = SearchRequest {
        query_embedding: Some(vec![0.0; dimension.unwrap_or(state.settings.embedding_dimension)]),
        rerank_enabled: Some(false),
        router_mode: Some(router_mode),
        ..search.clone()
    };
    Ok(state.search.search_with_texts_in_mode(&lexical, RankingMode::Lexical).await?)
}

/// The records of `hits` (in their order; a hit whose text is gone is left out) whose score is at
/// least `threshold`.
fn records(
    knowledge_id: &str,
    hits: Vec<RetrievalHit>,
    texts: &HashMap<String, String>,
    threshold: f32,
) -> Vec<DifyRecord> {
    let scores = record_scores(&hits.iter().map(|hit| hit.score).collect::<Vec<_>>());
    hits.into_iter()
        .zip(scores)
        .take_while(|(_, score)| *score >= threshold)
        .filter_map(|(hit, score)| {
            let content = texts.get(&hit.id)?.clone();
            Some(DifyRecord {
                content,
                score,
                title: hit.title,
                metadata: DifyRecordMetadata {
                    knowledge_id: knowledge_id.to_string(),
                    id: hit.id,
                    level: hit.level.as_str().to_string(),
                    document_id: hit.doc_id.clone(),
                    doc_id: hit.doc_id,
                    section_id: hit.section_id,
                    chunk_id: hit.chunk_id,
                    url: hit.metadata.url,
                    source: hit.metadata.source,
                    product: hit.metadata.product,
                    version: hit.metadata.version,
                    tags: hit.metadata.tags,
                    domain: hit.metadata.domain,
                    section: hit.metadata.section,
                    platform: hit.metadata.platform,
                    role: hit.metadata.role,
                    page_type: hit.metadata.page_type,
                    heading: hit.metadata.heading,
                    heading_path: hit.metadata.heading_path,
                    theme_label: hit.metadata.theme_label,
                    rank_score: hit.score,
                    relevance: hit.relevance,
                },
            })
        })
        .collect()
}

/// The gap kept between two neighbouring records' scores (far above an f32's resolution in [0, 1]).
const SCORE_STEP: f64 = 1e-6;

/// Dify's `score` of each of `rank_scores` (final rank scores in the service's order): each
/// divided by the larger of 1 and the best of them, capped by the score before it, then squeezed
/// so that each is at least `SCORE_STEP` below the one before. The result lies in (0, 1] and
/// strictly decreases, so any client that sorts by it, stable or not, keeps the service's order.
pub(crate) fn record_scores(rank_scores: &[f32]) -> Vec<f32> {
    let count = rank_scores.len();
    let finite = |score: f32| if score.is_finite() { f64::from(score).max(0.0) } else { 0.0 };
    let scale = rank_scores.iter().map(|&score| finite(score)).fold(1.0, f64::max);
    let squeeze = 1.0 - count as f64 * SCORE_STEP;
    let mut previous = 1.0;
    rank_scores
        .iter()
        .enumerate()
        .map(|(place, &score)| {
            let capped = (finite(score) / scale).min(previous);
            previous = capped;
            (capped * squeeze + (count - place) as f64 * SCORE_STEP) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_strictly_decrease_in_the_given_order_and_stay_in_the_unit_interval() {
        let cases: [&[f32]; 6] = [
            &[1.0, 0.461, 0.222, 0.208, 0.188, 0.211],
            &[2.4, 1.2, 1.2, 1.2, 0.3],
            &[0.0, 0.0, 0.0],
            &[0.5, f32::NAN, 0.7, -1.0, f32::INFINITY],
            &[1.0; 50],
            &[],
        ];
        for rank_scores in cases {
            let scores = record_scores(rank_scores);
            assert_eq!(scores.len(), rank_scores.len());
            assert!(scores.iter().all(|score| (0.0..=1.0).contains(score) && *score > 0.0), "{scores:?}");
            assert!(scores.windows(2).all(|pair| pair[0] > pair[1]), "{rank_scores:?} → {scores:?}");
        }
    }

    #[test]
    fn scores_keep_the_rank_scores_proportions_where_they_are_in_order() {
        // Below 1: the rank score itself (up to the tiny step).
        let scores = record_scores(&[0.9, 0.45, 0.3]);
        for (score, expected) in scores.iter().zip([0.9, 0.45, 0.3]) {
            assert!((score - expected).abs() < 1e-4, "{scores:?}");
        }
        // Above 1 (boosts): divided by the best.
        let scores = record_scores(&[2.0, 1.0, 0.5]);
        assert!((scores[0] - 1.0).abs() < 1e-6 && (scores[1] - 0.5).abs() < 1e-4 && (scores[2] - 0.25).abs() < 1e-4);
    }

    #[test]
    fn an_overlong_query_keeps_its_first_words_within_the_limit() {
        assert_eq!(truncate_query("short", 10), None);
        assert_eq!(truncate_query("exactly ten", 11), None);
        // The cut falls inside "gamma": back to the end of "beta".
        assert_eq!(truncate_query("alpha beta gamma", 13), Some("alpha beta"));
        // The cut falls on a space: the words before it stay whole.
        assert_eq!(truncate_query("alpha beta gamma", 10), Some("alpha beta"));
        assert_eq!(truncate_query("alpha beta gamma", 11), Some("alpha beta"));
        // No word end within the window: cut at the limit, on a character boundary.
        let word = "ж".repeat(200);
        assert_eq!(truncate_query(&word, 100), Some("ж".repeat(100).as_str()));
        let far = format!("a {}", "б".repeat(200));
        assert_eq!(truncate_query(&far, 150).map(|kept| kept.chars().count()), Some(150));
        // Invisible characters count as blank: a zero-width space ends a word.
        assert_eq!(truncate_query("один\u{200b}два три", 6), Some("один"));
        for max in 1..40 {
            let text = "Подключение Android SDK через Gradle и CocoaPods";
            let kept = truncate_query(text, max).unwrap();
            assert!(!kept.is_empty() && kept.chars().count() <= max && text.starts_with(kept), "{max}: {kept:?}");
        }
    }

    #[test]
    fn the_retrieval_path_allows_extra_slashes_only() {
        let base = "/internal/retrieval/dify";
        for path in [
            "/internal/retrieval/dify/retrieval",
            "/internal/retrieval/dify//retrieval",
            "/internal/retrieval/dify/retrieval/",
            "//internal//retrieval/dify///retrieval//",
        ] {
            assert!(is_retrieval_path(base, path), "{path}");
        }
        for path in ["/internal/retrieval/dify", "/internal/retrieval/dify/retrieval/x", "/dify/retrieval", "/"] {
            assert!(!is_retrieval_path(base, path), "{path}");
        }
    }
}
