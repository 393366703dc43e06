//! The OpenAPI document (`GET /internal/retrieval/openapi.json`), generated from the Rust types:
//! utoipa derives every request and response schema from the structs the handlers parse and
//! return, and the paths from the handlers' annotations. What a derive cannot say is added here
//! from the same constants the validation uses (id and tag limits, setting ranges, the query's
//! blank set) and from this deployment's configuration (theme ids, the query length limit, the
//! index's vector dimension, whether reranking and LLM routing can be switched on), so that what
//! the document calls valid is what the service accepts. Schemathesis checks it against the running
//! binary in the test command.

use super::context::{ContextResponse, ContextSource};
use super::dify::{
    DifyCondition, DifyErrorBody, DifyMetadataCondition, DifyRecord, DifyRecordMetadata, DifyRetrievalRequest,
    DifyRetrievalResponse, LogicalOperator, RetrievalSetting, MAX_CONDITIONS,
};
use super::health::{HealthResponse, ReplicaHealth, StatsCounts, StatsResponse};
use super::ui::{TenantSummary, TenantsResponse};
use super::window::{WindowChunk, WindowRequest, WindowResponse, MAX_WINDOW};
use crate::config::{
    RouterMode, RuntimeSettings, DEFAULT_DIFY_BASE_PATH, MAX_RESULTS_CAP, MAX_TOPK_PER_DOC, MAX_TOP_K,
};
use crate::error::ErrorCode;
use crate::model::Level;
use crate::router::{Clarification, ClarificationOption, RoutingResult, ThemeFields};
use crate::search::routing::RoutingInfo;
use crate::search::{
    Degradation, Explain, ExplainBoost, HitMetadata, RetrievalHit, SearchFilters, SearchRequest, SearchResponse, Steps,
    MAX_ID_CHARS, MAX_ID_LIST, MAX_TAGS, MAX_TAG_CHARS, MAX_TENANT_ID_CHARS, MAX_TRACE_ID_CHARS,
};
use crate::state::AppState;
use serde_json::{json, Value};
use utoipa::OpenApi;

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
        super::openapi_document,
        super::dify::retrieval,
        super::ui::tenants,
    ),
    components(schemas(
        SearchRequest,
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
        super::config::ReloadResponse,
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
    ))
)]
struct ApiDoc;

/// Characters that alone make a text blank (`search::is_blank`): whitespace, control characters
/// and invisible format characters. The query must hold one character outside this class.
const BLANK_CLASS: &str =
    "\\t\\n\\u000b\\f\\r \\u0000-\\u001f\\u007f-\\u00a0\\u00ad\\u034f\\u061c\\u115f\\u1160\\u1680\
\\u17b4\\u17b5\\u180b-\\u180f\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0";

/// `char::is_whitespace` (Unicode White_Space), as a character class for `pattern`.
const RUST_WHITESPACE_CLASS: &str =
    "\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

/// Merges `extra` into the schema object at `schema` (keeps what the derive wrote, e.g. `null`).
fn merge(schema: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (schema.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// `search::validate_tenant`'s rule as a pattern.
fn tenant_pattern() -> String {
    format!("^[A-Za-z0-9._-]{{1,{MAX_TENANT_ID_CHARS}}}$")
}

fn id_list() -> Value {
    json!({"maxItems": MAX_ID_LIST, "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}})
}

/// The statuses every operation can answer besides its own, by rule: the JSON error body of
/// `error.rs` for each.
fn add_error_statuses(document: &mut Value) {
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
            if ["/search", "/context", "/chunks/window", "/stats"].iter().any(|p| path.ends_with(p)) {
                codes.extend(["401", "403", "404", "421", "422"]);
            }
            if path.ends_with("/tenants") {
                codes.push("401");
            }
            if path.ends_with("/config") && method == "post" {
                codes.push("401");
            }
            let responses = &mut operation["responses"];
            for code in codes {
                if responses.get(code).is_none() {
                    responses[code] = json!({"$ref": "#/components/responses/Error"});
                }
            }
        }
    }
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
    document["components"]["schemas"]["ErrorBody"] = json!({
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "string", "enum": codes}, "message": {"type": "string"}}}}
    });
    document["components"]["responses"] = json!({"Error": {"description": "error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}});
}

/// The limits validation applies (`search::build_filter`, `SearchService::validate`, …).
fn add_request_limits(schemas: &mut Value) {
    let tenant = json!({"pattern": tenant_pattern()});
    let search = &mut schemas["SearchRequest"]["properties"];
    merge(&mut search["query"], json!({"minLength": 1, "pattern": format!("[^{BLANK_CLASS}]")}));
    merge(&mut search["tenant_id"], tenant.clone());
    merge(&mut search["max_results"], json!({"minimum": 1, "maximum": i64::MAX}));
    merge(&mut search["trace_id"], json!({"maxLength": MAX_TRACE_ID_CHARS}));
    merge(&mut search["doc_ids"], id_list());
    merge(&mut search["doc_top_k"], json!({"minimum": 1, "maximum": MAX_TOP_K}));
    merge(&mut search["min_index_version"], json!({"pattern": "^[0-9]{1,19}$"}));
    merge(&mut search["section_top_k"], json!({"minimum": 1, "maximum": MAX_TOP_K}));
    merge(&mut search["topk_per_doc"], json!({"minimum": 1, "maximum": MAX_TOPK_PER_DOC}));
    merge(&mut search["section_ids"], id_list());
    // `null` is "absent" here too (the strict parser reads it as `{}`).
    search["filters"] = json!({"oneOf": [{"type": "null"}, search["filters"].clone()]});
    merge(
        &mut search["query_embedding"]["items"],
        json!({"minimum": -f64::from(f32::MAX), "maximum": f64::from(f32::MAX)}),
    );
    let filters = &mut schemas["SearchFilters"]["properties"];
    merge(&mut filters["doc_ids"], id_list());
    merge(&mut filters["section_ids"], id_list());
    merge(&mut filters["tags"], json!({"maxItems": MAX_TAGS, "items": {"type": "string", "maxLength": MAX_TAG_CHARS}}));
    merge(&mut filters["product"], json!({"maxLength": MAX_TAG_CHARS}));
    merge(&mut filters["version"], json!({"maxLength": MAX_TAG_CHARS}));
    let window = &mut schemas["WindowRequest"]["properties"];
    merge(&mut window["tenant_id"], tenant);
    // Not blank as the validation (`str::trim`) counts it: Rust's whitespace, which holds U+0085
    // where a schema's `\S` would not.
    for field in ["doc_id", "anchor_chunk_id"] {
        merge(
            &mut window[field],
            json!({"minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": format!("[^{RUST_WHITESPACE_CLASS}]")}),
        );
    }
    for field in ["window_before", "window_after"] {
        merge(&mut window[field], json!({"minimum": 0, "maximum": MAX_WINDOW}));
    }
    let runtime = &mut schemas["RuntimeSettings"]["properties"];
    for (field, low, high) in [
        ("max_results", 1, MAX_RESULTS_CAP),
        ("doc_top_k", 1, MAX_TOP_K),
        ("section_top_k", 1, MAX_TOP_K),
        ("chunk_top_k", 1, MAX_TOP_K),
        ("topk_per_doc", 1, MAX_TOPK_PER_DOC),
        ("min_docs", 0, MAX_TOP_K),
        ("rerank_top_n", 1, MAX_TOP_K),
    ] {
        merge(&mut runtime[field], json!({"minimum": low, "maximum": high}));
    }
    merge(&mut runtime["min_score"], json!({"minimum": -1, "maximum": 1}));
}

/// A copy of `schema` whose every property may be absent or `null` (an update leaves it as is).
fn all_optional(schema: &Value) -> Value {
    let mut update = schema.clone();
    if let Some(object) = update.as_object_mut() {
        object.remove("required");
        object.insert("additionalProperties".into(), false.into());
    }
    if let Some(properties) = update["properties"].as_object_mut() {
        for property in properties.values_mut() {
            *property = json!({"oneOf": [{"type": "null"}, property.clone()]});
        }
    }
    update
}

/// The document as this deployment serves it.
/// The serialised document, built once per index vector dimension: the dimension (known once
/// the index is loaded) is the only input that changes after start-up, and building the
/// document costs milliseconds of CPU.
#[derive(Debug, Default)]
pub struct DocumentCache(std::sync::Mutex<Option<((usize, u64), axum::body::Bytes)>>);

impl DocumentCache {
    /// The document as JSON bytes for this deployment, the index's current dimension and the
    /// themes in use (a config reload may change them).
    pub async fn get(&self, state: &AppState) -> axum::body::Bytes {
        let dimension = index_dimension(state).await;
        let key = (dimension, state.search.tuning().generation);
        let cached = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = cached.as_ref().filter(|(built_for, _)| *built_for == key);
        if let Some((_, bytes)) = current {
            return bytes.clone();
        }
        drop(cached);
        let bytes = axum::body::Bytes::from(serde_json::to_vec(&build(state, dimension)).unwrap_or_default());
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((key, bytes.clone()));
        bytes
    }
}

async fn index_dimension(state: &AppState) -> usize {
    match state.search.index().dimension().await {
        Ok(Some(dimension)) => dimension,
        _ => state.settings.embedding_dimension,
    }
}

fn build(state: &AppState, dimension: usize) -> Value {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|_| json!({}));
    // `/health` is also served under the prefix.
    let health = document["paths"]["/health"].clone();
    document["paths"][format!("{}/health", super::PREFIX)] = health;
    add_error_statuses(&mut document);
    let themes: Vec<Value> = state.search.theme_list().iter().map(|theme| theme.id.clone().into()).collect();
    let schemas = &mut document["components"]["schemas"];
    add_request_limits(schemas);
    {
        let search = &mut schemas["SearchRequest"]["properties"];
        merge(&mut search["query"], json!({"maxLength": state.settings.max_query_chars}));
        merge(&mut search["query_embedding"], json!({"minItems": dimension, "maxItems": dimension}));
        if themes.is_empty() {
            if let Some(properties) = search.as_object_mut() {
                properties.remove("theme");
            }
        } else {
            let mut values = themes;
            values.push(Value::Null);
            search["theme"] = json!({"type": ["string", "null"], "enum": values,
                "description": "a theme id offered by a clarification: the search is filtered to it"});
        }
    }
    if !state.search.has_llm_router() {
        // The search's own router mode: the derive's enum less `llm` (and `null`: absent).
        schemas["SearchRequest"]["properties"]["router_mode"] = json!({"type": ["string", "null"],
            "enum": ["none", "heuristic", null], "description": "llm needs a chat endpoint, which this deployment has not"});
    }
    if state.search.index().replica_status().is_none() {
        // A fixed snapshot has no versions: no search can wait for one.
        if let Some(properties) = schemas["SearchRequest"]["properties"].as_object_mut() {
            properties.remove("min_index_version");
        }
    }
    // `/context` takes every `/search` field plus `max_context_chars`.
    let mut context = schemas["SearchRequest"].clone();
    context["properties"]["max_context_chars"] = json!({
        "type": ["integer", "null"], "minimum": 1, "maximum": crate::search::context::MAX_CONTEXT_CHARS,
        "default": crate::search::context::DEFAULT_CONTEXT_CHARS
    });
    schemas["ContextRequest"] = context;
    {
        let runtime = &mut schemas["RuntimeSettings"]["properties"];
        if !state.rerank_configured {
            runtime["rerank_enabled"] = json!({"type": "boolean", "enum": [false],
                "description": "true needs a rerank endpoint (RETR_RERANK_API_BASE), which this deployment has not"});
        }
        if !state.search.has_llm_router() {
            runtime["theme_router_mode"] = json!({"type": "string", "enum": ["none", "heuristic"],
                "description": "llm needs a chat endpoint, which this deployment has not"});
        }
    }
    schemas["RuntimeSettingsUpdate"] = all_optional(&schemas["RuntimeSettings"]);
    let body = |name: &str| json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}});
    let prefix = super::PREFIX;
    document["paths"][format!("{prefix}/context")]["post"]["requestBody"] = body("ContextRequest");
    document["paths"][format!("{prefix}/config")]["post"]["requestBody"] = body("RuntimeSettingsUpdate");
    if let Some(parameters) = document["paths"][format!("{prefix}/stats")]["get"]["parameters"].as_array_mut() {
        for parameter in parameters.iter_mut().filter(|p| p["name"] == "tenant_id") {
            parameter["schema"] = json!({"type": "string", "pattern": tenant_pattern()});
        }
    }
    add_dify(&mut document, state);
    add_security(&mut document, state);
    document
}

/// Declares the bearer credentials this deployment asks for: the API key of `RETR_API_KEYS` on
/// every data endpoint (and `/metrics` unless `RETR_METRICS_OPEN`), the admin token on
/// `POST /config`. Nothing is declared for a credential that is not configured.
fn add_security(document: &mut Value, state: &AppState) {
    let keys = state.api_keys.is_enabled();
    let admin = !state.settings.admin_token.is_empty();
    let metrics = super::auth::metrics_need_credentials(state);
    let dify_path = format!("{}/retrieval", state.settings.dify_base_path);
    let Some(paths) = document["paths"].as_object_mut() else { return };
    let mut declared = false;
    for (path, operations) in paths.iter_mut() {
        let Some(operations) = operations.as_object_mut() else { continue };
        for (method, operation) in operations.iter_mut() {
            let data =
                ["/search", "/context", "/chunks/window", "/stats", "/tenants"].iter().any(|p| path.ends_with(p))
                    || *path == dify_path;
            let needed = (keys && data)
                || (admin && method == "post" && (path.ends_with("/config") || path.ends_with("/config/reload")))
                || (metrics && path == "/metrics");
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

/// The Dify endpoint at the configured base path, its conditions one shape per operator family
/// (`dify::condition_schema`), and the errors it answers in the service's own shape (load
/// shedding, the request timeout, a too long URI) besides its own.
fn add_dify(document: &mut Value, state: &AppState) {
    let schemas = &mut document["components"]["schemas"];
    schemas["DifyCondition"] = super::dify::condition_schema();
    let request = &mut schemas["DifyRetrievalRequest"]["properties"];
    merge(&mut request["knowledge_id"], json!({"pattern": tenant_pattern()}));
    merge(
        &mut request["query"],
        json!({"minLength": 1, "pattern": format!("[^{BLANK_CLASS}]"), "maxLength": state.settings.max_query_chars}),
    );
    merge(&mut schemas["DifyMetadataCondition"]["properties"]["conditions"], json!({"maxItems": MAX_CONDITIONS}));
    merge(&mut schemas["RetrievalSetting"]["properties"]["top_k"], json!({"maximum": i64::MAX}));
    // Dify's request is read tolerantly: fields it does not know are ignored (and logged).
    for name in ["DifyRetrievalRequest", "RetrievalSetting", "DifyMetadataCondition"] {
        if let Some(schema) = schemas[name].as_object_mut() {
            schema.remove("additionalProperties");
        }
    }
    let default_path = format!("{DEFAULT_DIFY_BASE_PATH}/retrieval");
    let Some(mut path) = document["paths"].as_object_mut().and_then(|paths| paths.remove(&default_path)) else {
        return;
    };
    let either = json!({"content": {"application/json": {"schema": {"anyOf": [
        {"$ref": "#/components/schemas/DifyErrorBody"}, {"$ref": "#/components/schemas/ErrorBody"}]}}}});
    let responses = &mut path["post"]["responses"];
    for code in ["503", "504"] {
        merge(&mut responses[code], either.clone());
    }
    responses["414"] = json!({"$ref": "#/components/responses/Error"});
    document["paths"][format!("{}/retrieval", state.settings.dify_base_path)] = path;
}
