//! The OpenAPI document (`GET /internal/retrieval/openapi.json`), generated from the Rust types:
//! utoipa derives every request and response schema from the structs the handlers parse and
//! return, limits and patterns included (the types' `#[schema]` attributes, built from the
//! validation's own constants: `search::schema`), and the paths from the handlers' annotations.
//! Two things are added here:
//!
//! - what the handlers' annotations cannot say ([`add_by_rule`]): the responses the middleware
//!   gives on every route it covers, with the JSON error body; the `/health` alias under the
//!   prefix; a Dify condition's schema (JSON built from the condition compiler's tables);
//! - what depends on this deployment ([`Deployment`], [`fill_in`]): the query length limit, the
//!   index's vector dimension, the theme ids, whether reranking, LLM routing and index versions
//!   exist, the Dify base path and the credentials asked for.
//!
//! So what the document calls valid is what the service accepts; Schemathesis checks it against
//! the running binary in the test command.

use super::config::RuntimePatch;
use super::context::{ContextRequest, ContextResponse, ContextSource};
use super::dify::{
    DifyCondition, DifyErrorBody, DifyMetadataCondition, DifyRecord, DifyRecordMetadata, DifyRetrievalRequest,
    DifyRetrievalResponse, LogicalOperator, RetrievalSetting,
};
use super::health::{HealthResponse, ReplicaHealth, StatsCounts, StatsResponse};
use super::ui::{TenantSummary, TenantsResponse};
use super::window::{WindowChunk, WindowRequest, WindowResponse};
use crate::config::{RouterMode, RuntimeSettings, DEFAULT_DIFY_BASE_PATH};
use crate::error::ErrorCode;
use crate::AppState;
use retrieval_engine::{
    Clarification, ClarificationOption, Degradation, Explain, ExplainBoost, HitMetadata, Level, RetrievalHit,
    RoutingInfo, RoutingResult, SearchFilters, SearchRequest, SearchResponse, Steps, ThemeFields,
};
use serde_json::{json, Value};
use utoipa::OpenApi;

pub(crate) mod document_cache;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Retrieval Service",
        description = "Hybrid doc → section → chunk retrieval over product documentation. Every error is \
                       {\"error\": {\"code\", \"message\"}}; `null` in an optional field means \"absent\"."
    ),
    paths(
        super::search::search,
        super::context::context,
        super::window::window,
        super::config::get_config,
        super::config::update_config,
        super::config::reload_config,
        super::health::stats,
        super::health::health,
        super::health::metrics,
        openapi_document,
        super::dify::retrieval,
        super::ui::tenants,
        super::feedback::post_feedback,
        super::feedback::get_feedback,
        super::feedback::delete_feedback,
    ),
    components(schemas(
        SearchRequest,
        ContextRequest,
        SearchFilters,
        SearchResponse,
        RetrievalHit,
        HitMetadata,
        Explain,
        ExplainBoost,
        Steps,
        Degradation,
        RoutingInfo,
        RoutingResult,
        ThemeFields,
        Clarification,
        ClarificationOption,
        Level,
        RouterMode,
        RuntimeSettings,
        RuntimePatch,
        super::config::ReloadResponse,
        super::config::ConfigResponse,
        super::config::TuningInUse,
        super::config::TuningFile,
        WindowRequest,
        WindowResponse,
        WindowChunk,
        ContextResponse,
        ContextSource,
        HealthResponse,
        ReplicaHealth,
        StatsResponse,
        StatsCounts,
        DifyRetrievalRequest,
        RetrievalSetting,
        DifyMetadataCondition,
        LogicalOperator,
        DifyCondition,
        DifyRetrievalResponse,
        DifyRecord,
        DifyRecordMetadata,
        DifyErrorBody,
        TenantsResponse,
        TenantSummary,
        super::feedback::FeedbackRequest,
        super::feedback::FeedbackStored,
        super::feedback::FeedbackList,
        super::feedback::FeedbackItem,
        super::feedback::FeedbackDeleted,
        retrieval_engine::Verdict,
        retrieval_engine::learn::LearnedReranker,
        retrieval_engine::learn::HeldOutScore,
    ))
)]
struct ApiDoc;

/// What utoipa's annotations cannot say, by rule: the statuses every operation can answer besides
/// its own, that is what the middleware answers on the routes it covers (URI length, load
/// shedding, the request timeout; the JSON body extractor; tenant keys and scope), each with the
/// JSON error body of `error.rs`; `/health` also under the prefix (one handler, two routes); a
/// Dify condition's schema, one shape per operator family (`dify::condition_schema`, written as
/// JSON, which utoipa's schema types cannot take whole).
fn add_by_rule(document: &mut Value) {
    let health = document["paths"]["/health"].clone();
    document["paths"][format!("{}/health", super::PREFIX)] = health;
    let Some(paths) = document["paths"].as_object_mut() else { return };
    for (path, operations) in paths.iter_mut() {
        let Some(operations) = operations.as_object_mut() else { continue };
        for (method, operation) in operations.iter_mut() {
            let mut codes: Vec<&str> = Vec::new();
            if path.starts_with(super::PREFIX) && !path.ends_with("/health") && !path.ends_with("/openapi.json") {
                codes.extend(["414", "503", "504"]);
            }
            if method == "post" {
                codes.extend(["400", "413", "415", "422"]);
            }
            if ["/search", "/context", "/chunks/window", "/stats", "/feedback"].iter().any(|p| path.ends_with(p)) {
                codes.extend(["401", "403", "404", "421", "422"]);
            }
            if path.ends_with("/tenants") {
                codes.push("401");
            }
            if path.ends_with("/config") && method == "post" {
                codes.push("401");
            }
            // One reload at a time: another one meanwhile is 409 `reload_in_progress`.
            if path.ends_with("/config/reload") {
                codes.push("409");
            }
            let responses = &mut operation["responses"];
            for code in codes {
                if responses.get(code).is_none() {
                    responses[code] = json!({"$ref": "#/components/responses/Error"});
                }
            }
        }
    }
    // The Dify endpoint answers in Dify's shape, except where the middleware answers first.
    let dify = &mut document["paths"][format!("{DEFAULT_DIFY_BASE_PATH}/retrieval")]["post"]["responses"];
    if dify.is_object() {
        let either = json!({"content": {"application/json": {"schema": {"anyOf": [
            {"$ref": "#/components/schemas/DifyErrorBody"}, {"$ref": "#/components/schemas/ErrorBody"}]}}}});
        for code in ["503", "504"] {
            merge(&mut dify[code], either.clone());
        }
        dify["414"] = json!({"$ref": "#/components/responses/Error"});
    }
    document["components"]["schemas"]["DifyCondition"] = super::dify::condition_schema();
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
    document["components"]["schemas"]["ErrorBody"] = json!({
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "string", "enum": codes}, "message": {"type": "string"}}}}
    });
    document["components"]["responses"] = json!({"Error": {"description": "error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}});
}

/// Merges `extra` into the schema object at `schema` (keeps what the derive wrote).
fn merge(schema: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (schema.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// The document as JSON bytes for this deployment, the index's current dimension and the themes
/// in use, built once for each and kept in `state.openapi`.
pub(crate) async fn document(state: &AppState) -> axum::body::Bytes {
    let dimension = index_dimension(state).await;
    let key = (dimension, state.search.tuning().generation);
    state.openapi.get_or_build(key, || {
        let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|_| json!({}));
        add_by_rule(&mut document);
        fill_in(&mut document, &Deployment::of(state, dimension));
        axum::body::Bytes::from(serde_json::to_vec(&document).unwrap_or_default())
    })
}

async fn index_dimension(state: &AppState) -> usize {
    match state.search.index().dimension().await {
        Ok(Some(dimension)) => dimension,
        _ => state.settings.embedding_dimension,
    }
}

/// What the document depends on in this deployment.
#[derive(Debug, Clone, PartialEq)]
struct Deployment {
    /// `RETR_MAX_QUERY_CHARS`.
    max_query_chars: usize,
    /// The index's vector dimension: the length of a `query_embedding`.
    dimension: usize,
    /// The theme ids in use (none: a search takes no `theme`).
    themes: Vec<String>,
    /// Whether an LLM router is configured (else `llm` is no router mode).
    llm_router: bool,
    /// Whether a rerank endpoint is configured (else reranking cannot be switched on).
    rerank: bool,
    /// Whether the index has versions (a fixed snapshot has none, so no search can wait for one).
    versioned: bool,
    /// `RETR_DIFY_BASE_PATH`.
    dify_base_path: String,
    /// Whether data endpoints need an API key (`RETR_API_KEYS`).
    api_keys: bool,
    /// Whether updating the settings needs the admin token (`RETR_ADMIN_TOKEN`).
    admin_token: bool,
    /// Whether `/metrics` needs credentials.
    metrics_credentials: bool,
}

impl Deployment {
    fn of(state: &AppState, dimension: usize) -> Self {
        Self {
            max_query_chars: state.settings.max_query_chars,
            dimension,
            themes: state.search.theme_list().iter().map(|theme| theme.id.clone()).collect(),
            llm_router: state.search.has_llm_router(),
            rerank: state.rerank_configured,
            versioned: state.search.index().replica_status().is_some(),
            dify_base_path: state.settings.dify_base_path.clone(),
            api_keys: state.api_keys.is_enabled(),
            admin_token: !state.settings.admin_token.is_empty(),
            metrics_credentials: super::auth::metrics_need_credentials(state),
        }
    }
}

/// Fills in what depends on this deployment (the derived document knows none of it).
fn fill_in(document: &mut Value, deployment: &Deployment) {
    let no_llm = "llm needs a chat endpoint, which this deployment has not";
    let modes: Vec<Value> = [RouterMode::None, RouterMode::Heuristic].iter().map(|mode| mode.as_str().into()).collect();
    let with_null = |values: &[Value]| values.iter().cloned().chain([Value::Null]).collect::<Vec<_>>();
    let schemas = &mut document["components"]["schemas"];
    for name in ["SearchRequest", "ContextRequest"] {
        let search = &mut schemas[name]["properties"];
        merge(&mut search["query"], json!({"maxLength": deployment.max_query_chars}));
        merge(
            &mut search["query_embedding"],
            json!({"minItems": deployment.dimension, "maxItems": deployment.dimension}),
        );
        if deployment.themes.is_empty() {
            remove(search, "theme");
        } else {
            let themes: Vec<Value> = deployment.themes.iter().map(|theme| theme.as_str().into()).collect();
            merge(&mut search["theme"], json!({"enum": with_null(&themes)}));
        }
        if !deployment.llm_router {
            search["router_mode"] =
                json!({"type": ["string", "null"], "enum": with_null(&modes), "description": no_llm});
        }
        if !deployment.versioned {
            remove(search, "min_index_version");
        }
    }
    let feedback = &mut schemas["FeedbackRequest"]["properties"];
    merge(&mut feedback["query"], json!({"maxLength": deployment.max_query_chars}));
    merge(&mut feedback["trace_id"], json!({"maxLength": super::feedback::MAX_TRACE_ID_CHARS}));
    let no_rerank = "true needs a rerank endpoint (RETR_RERANK_API_BASE), which this deployment has not";
    for (name, nullable) in [("RuntimeSettings", false), ("RuntimeSettingsUpdate", true)] {
        let types = |kind: &str| if nullable { json!([kind, "null"]) } else { json!(kind) };
        let settings = &mut schemas[name]["properties"];
        if !deployment.rerank {
            let values = if nullable { json!([false, null]) } else { json!([false]) };
            settings["rerank_enabled"] = json!({"type": types("boolean"), "enum": values, "description": no_rerank});
        }
        if !deployment.llm_router {
            let values = if nullable { with_null(&modes) } else { modes.clone() };
            settings["theme_router_mode"] = json!({"type": types("string"), "enum": values, "description": no_llm});
        }
    }
    let default_path = format!("{DEFAULT_DIFY_BASE_PATH}/retrieval");
    let dify_path = format!("{}/retrieval", deployment.dify_base_path);
    if let Some(operations) = document["paths"].as_object_mut().and_then(|paths| paths.remove(&default_path)) {
        document["paths"][&dify_path] = operations;
    }
    add_security(document, deployment, &dify_path);
}

fn remove(properties: &mut Value, name: &str) {
    if let Some(properties) = properties.as_object_mut() {
        properties.remove(name);
    }
}

/// Declares the bearer credentials this deployment asks for: the API key of `RETR_API_KEYS` on
/// every data endpoint (and `/metrics` unless `RETR_METRICS_OPEN`), the admin token on
/// `POST /config`. Nothing is declared for a credential that is not configured.
fn add_security(document: &mut Value, deployment: &Deployment, dify_path: &str) {
    let Some(paths) = document["paths"].as_object_mut() else { return };
    let mut declared = false;
    for (path, operations) in paths.iter_mut() {
        let Some(operations) = operations.as_object_mut() else { continue };
        for (method, operation) in operations.iter_mut() {
            let data = ["/search", "/context", "/chunks/window", "/stats", "/tenants", "/feedback"]
                .iter()
                .any(|p| path.ends_with(p))
                || path == dify_path;
            let needed = (deployment.api_keys && data)
                || (deployment.admin_token
                    && method == "post"
                    && (path.ends_with("/config") || path.ends_with("/config/reload")))
                || (deployment.metrics_credentials && path == "/metrics");
            if !needed {
                continue;
            }
            operation["security"] = json!([{"bearer": []}]);
            if operation["responses"].get("401").is_none() {
                operation["responses"]["401"] = json!({"$ref": "#/components/responses/Error"});
            }
            declared = true;
        }
    }
    if declared {
        document["components"]["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer",
            "description": "an API key of RETR_API_KEYS, or RETR_ADMIN_TOKEN for POST /config (and /metrics)"}});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(deployment: &Deployment) -> Value {
        let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap();
        add_by_rule(&mut document);
        fill_in(&mut document, deployment);
        document
    }

    fn bare() -> Deployment {
        Deployment {
            max_query_chars: 321,
            dimension: 7,
            themes: Vec::new(),
            llm_router: false,
            rerank: false,
            versioned: false,
            dify_base_path: DEFAULT_DIFY_BASE_PATH.into(),
            api_keys: false,
            admin_token: false,
            metrics_credentials: false,
        }
    }

    #[test]
    fn a_bare_deployment_offers_only_what_it_accepts() {
        let document = document(&bare());
        let schemas = &document["components"]["schemas"];
        for name in ["SearchRequest", "ContextRequest"] {
            let search = &schemas[name]["properties"];
            assert_eq!(search["query"]["maxLength"], 321, "{name}");
            assert_eq!(
                (&search["query_embedding"]["minItems"], &search["query_embedding"]["maxItems"]),
                (&7.into(), &7.into())
            );
            assert!(search.get("theme").is_none() && search.get("min_index_version").is_none(), "{name}");
            assert_eq!(search["router_mode"]["enum"], json!(["none", "heuristic", null]), "{name}");
        }
        // Dify's query has no limit: past it, its beginning is searched.
        let dify_query = &schemas["DifyRetrievalRequest"]["properties"]["query"];
        assert!(dify_query["type"] == "string" && dify_query.get("maxLength").is_none(), "{dify_query}");
        assert_eq!(schemas["RuntimeSettings"]["properties"]["rerank_enabled"]["enum"], json!([false]));
        assert_eq!(schemas["RuntimeSettings"]["properties"]["theme_router_mode"]["enum"], json!(["none", "heuristic"]));
        assert_eq!(schemas["RuntimeSettingsUpdate"]["properties"]["rerank_enabled"]["enum"], json!([false, null]));
        assert!(document["components"].get("securitySchemes").is_none());
        assert!(document["paths"][format!("{DEFAULT_DIFY_BASE_PATH}/retrieval")]["post"].is_object());
    }

    #[test]
    fn a_full_deployment_offers_its_themes_versions_modes_and_credentials() {
        let deployment = Deployment {
            themes: vec!["sdk".into(), "api".into()],
            llm_router: true,
            rerank: true,
            versioned: true,
            dify_base_path: "/kb".into(),
            api_keys: true,
            admin_token: true,
            metrics_credentials: true,
            ..bare()
        };
        let document = document(&deployment);
        let schemas = &document["components"]["schemas"];
        let derived = serde_json::to_value(ApiDoc::openapi()).unwrap();
        for name in ["SearchRequest", "ContextRequest"] {
            let search = &schemas[name]["properties"];
            assert_eq!(search["theme"]["enum"], json!(["sdk", "api", null]), "{name}");
            assert_eq!(search["router_mode"], derived["components"]["schemas"][name]["properties"]["router_mode"]);
            assert!(search["min_index_version"]["pattern"].is_string(), "{name}");
        }
        assert_eq!(schemas["RuntimeSettings"], derived["components"]["schemas"]["RuntimeSettings"]);
        assert!(document["paths"]["/kb/retrieval"]["post"]["security"].is_array());
        assert!(document["paths"][format!("{DEFAULT_DIFY_BASE_PATH}/retrieval")].is_null());
        for (path, method) in
            [("/internal/retrieval/search", "post"), ("/internal/retrieval/config", "post"), ("/metrics", "get")]
        {
            assert_eq!(document["paths"][path][method]["security"], json!([{"bearer": []}]), "{path}");
        }
        assert!(document["paths"]["/health"]["get"].get("security").is_none());
    }

    /// The annotation's pattern is a literal (utoipa's `params` take no function): it is the rule's.
    #[test]
    fn the_stats_tenant_parameter_has_the_tenant_rule() {
        let document = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let parameter = &document["paths"]["/internal/retrieval/stats"]["get"]["parameters"][0];
        assert_eq!(parameter["schema"]["pattern"], retrieval_engine::openapi::tenant_id_pattern());
        assert_eq!(parameter["required"], true);
    }
}

/// The OpenAPI document of the whole API, as this deployment serves it.
#[utoipa::path(get, path = "/internal/retrieval/openapi.json", tag = "meta",
    responses((status = 200, description = "this document (OpenAPI 3.1)", body = Object)))]
pub(super) async fn openapi_document(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let bytes = document(&state).await;
    ([(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"))], bytes)
        .into_response()
}
