//! The Dify External Knowledge API (`POST {RETR_DIFY_BASE_PATH}/retrieval`), so that a Dify
//! workspace can use this service as an external knowledge base with no glue code.
//!
//! - `knowledge_id` names a knowledge base: a tenant, optionally narrowed by a fixed metadata
//!   filter and a theme (`RETR_DIFY_KNOWLEDGE_BASES`, a small YAML file); without that file every
//!   tenant is a knowledge base under its own id.
//! - The whole search pipeline runs (routing, hybrid ranking, boosting, the cascade); each record
//!   is one hit with the text of the section or chunk the cascade chose, in the service's order.
//! - `score` is the hit's relevance in [0, 1] (the fused dense + lexical score before boosts, the
//!   one `min_score` applies to); `score_threshold` drops the hits below it.
//! - `metadata_condition` compiles to a `MetadataCondition` checked on every candidate record;
//!   an unknown field or operator, or a value of the wrong kind, is a 422, never a wider search.
//! - Keys come from the API key store (`RETR_API_KEYS`): a key reads only the knowledge bases of
//!   the tenants it is granted. Errors are Dify's `{"error_code", "error_msg"}`: 1001 (401) no or
//!   a malformed `Authorization` header, 1002 (403) an unknown key or one that may not read that
//!   knowledge base (also when it does not exist, so a key learns nothing of other tenants'
//!   knowledge bases), 2001 (404) no such knowledge base; any other error carries its HTTP status
//!   as `error_code` (422 a request the contract does not allow, 503 the index unavailable, …).

use super::auth::Grant;
use super::extract::ApiJson;
use crate::config::MAX_RESULTS_CAP;
use crate::error::{ApiError, ErrorCode};
use crate::index::condition::{unix_seconds, Clause, Comparison, Field, Logic, MetadataCondition, Number, Test};
use crate::search::{validate_tenant, SearchRequest, TenantId, MAX_ID_LIST, MAX_TAG_CHARS};
use crate::state::AppState;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// Where the endpoint is mounted unless `RETR_DIFY_BASE_PATH` says otherwise; Dify appends
/// `/retrieval` to the endpoint URL it is given.
pub const DEFAULT_BASE_PATH: &str = "/internal/retrieval/dify";
/// Most conditions one `metadata_condition` may hold.
pub const MAX_CONDITIONS: usize = 64;

/// `RETR_DIFY_BASE_PATH`: `/` and then segments of letters, digits, `.`, `_`, `~` and `-`,
/// without a trailing `/` (Dify appends `/retrieval`).
pub fn validate_base_path(base: &str) -> Result<(), String> {
    let segments = base.strip_prefix('/').map(|rest| rest.split('/'));
    let valid = segments.is_some_and(|mut segments| {
        segments.all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_~".contains(&b)))
    });
    if !valid || base.len() > 256 {
        return Err(format!(
            "must look like /internal/retrieval/dify (`/`-separated segments of letters, digits, . _ ~ -, \
             no trailing `/`, at most 256 bytes), got {base:?}"
        ));
    }
    Ok(())
}

/// A Dify error: `{"error_code", "error_msg"}` with an HTTP status.
#[derive(Debug)]
pub struct DifyError {
    status: StatusCode,
    code: u32,
    message: String,
}

/// The body of every error of the Dify endpoint.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DifyErrorBody {
    /// 1001 no or a malformed `Authorization` header, 1002 authorization failed, 2001 no such
    /// knowledge base; any other error: its HTTP status.
    pub error_code: u32,
    pub error_msg: String,
}

impl DifyError {
    fn malformed_authorization() -> Self {
        let message = "Invalid Authorization header format. Expected 'Bearer <api-key>' format.";
        Self { status: StatusCode::UNAUTHORIZED, code: 1001, message: message.into() }
    }

    fn authorization_failed(message: impl Into<String>) -> Self {
        Self { status: StatusCode::FORBIDDEN, code: 1002, message: message.into() }
    }

    fn no_knowledge_base(knowledge_id: &str) -> Self {
        let message = format!("The knowledge base {knowledge_id:?} does not exist.");
        Self { status: StatusCode::NOT_FOUND, code: 2001, message }
    }

    fn invalid(message: impl Into<String>) -> Self {
        ApiError::invalid(message).into()
    }
}

impl From<ApiError> for DifyError {
    fn from(error: ApiError) -> Self {
        let status = error.code.status();
        let message = if error.code == ErrorCode::Internal { "internal error".to_string() } else { error.message };
        if status.is_server_error() {
            tracing::warn!(code = error.code.as_str(), error = %message, "dify retrieval failed");
        }
        Self { status, code: u32::from(status.as_u16()), message }
    }
}

impl IntoResponse for DifyError {
    fn into_response(self) -> Response {
        let body = DifyErrorBody { error_code: self.code, error_msg: self.message };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The caller's grant: `None` when no key store is configured (open, as in mock mode).
pub struct DifyKey(Option<Arc<Grant>>);

impl FromRequestParts<AppState> for DifyKey {
    type Rejection = DifyError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, DifyError> {
        if !state.api_keys.is_enabled() {
            return Ok(DifyKey(None));
        }
        let key =
            super::auth::bearer(parts).filter(|key| !key.is_empty()).ok_or_else(DifyError::malformed_authorization)?;
        match state.api_keys.grant(key) {
            Some(grant) => Ok(DifyKey(Some(Arc::clone(grant)))),
            None => Err(DifyError::authorization_failed("Authorization failed: unknown API key.")),
        }
    }
}

/// One knowledge base: a tenant, a fixed filter every hit passes, and optionally a theme.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeBase {
    pub tenant_id: TenantId,
    pub theme: Option<String>,
    pub filter: Vec<Clause>,
}

/// The knowledge bases `knowledge_id` may name (`RETR_DIFY_KNOWLEDGE_BASES`).
#[derive(Debug, Clone, Default)]
pub struct KnowledgeBases {
    /// `None`: no file; every tenant is a knowledge base under its own id.
    bases: Option<HashMap<String, KnowledgeBase>>,
}

/// `RETR_DIFY_KNOWLEDGE_BASES` as written:
/// ```yaml
/// knowledge_bases:
///   adguard-windows:            # the knowledge_id Dify sends
///     tenant_id: adguard
///     filter: {platform: windows, tags: [setup]}   # every hit passes each (a list: any of)
///     theme: windows            # optional: the search is filtered to this theme
/// ```
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KnowledgeFile {
    knowledge_bases: BTreeMap<String, KnowledgeEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KnowledgeEntry {
    tenant_id: String,
    #[serde(default)]
    filter: BTreeMap<String, OneOrMany>,
    theme: Option<String>,
    /// For the people who read the file; not used.
    #[allow(dead_code)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl KnowledgeBases {
    /// Knowledge bases that name nothing: where a configured file cannot be used, refuse.
    pub fn none() -> Self {
        Self { bases: Some(HashMap::new()) }
    }

    /// Reads the file; an empty path means every tenant is a knowledge base.
    pub fn load(path: &Path) -> Result<Self, String> {
        if path.as_os_str().is_empty() {
            return Ok(Self::default());
        }
        let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        Self::parse(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let file: KnowledgeFile = serde_yaml_ng::from_str(text).map_err(|error| error.to_string())?;
        let mut bases = HashMap::with_capacity(file.knowledge_bases.len());
        for (id, entry) in file.knowledge_bases {
            validate_tenant(&id).map_err(|error| format!("knowledge base id {id:?}: {error}"))?;
            let tenant_id = TenantId::new(entry.tenant_id).map_err(|error| format!("{id}: {error}"))?;
            let mut filter = Vec::with_capacity(entry.filter.len());
            for (name, wanted) in entry.filter {
                let field = Field::parse(&name).ok_or_else(|| format!("{id}: filter: {}", unknown_field(&name)))?;
                filter.push(Clause::Field(
                    field,
                    match wanted {
                        OneOrMany::One(value) => Test::Is(value),
                        OneOrMany::Many(values) if !values.is_empty() => Test::In(values),
                        OneOrMany::Many(_) => {
                            return Err(format!("{id}: filter.{name}: an empty list matches nothing"))
                        }
                    },
                ));
            }
            bases.insert(id, KnowledgeBase { tenant_id, theme: entry.theme, filter });
        }
        if bases.is_empty() {
            return Err("no knowledge base in the file (every knowledge_id would be refused)".into());
        }
        Ok(Self { bases: Some(bases) })
    }

    /// The knowledge base `knowledge_id` names, if any.
    pub fn resolve(&self, knowledge_id: &str) -> Option<KnowledgeBase> {
        match &self.bases {
            Some(bases) => bases.get(knowledge_id).cloned(),
            None => TenantId::new(knowledge_id).ok().map(|tenant_id| KnowledgeBase {
                tenant_id,
                theme: None,
                filter: Vec::new(),
            }),
        }
    }

    /// Every theme the knowledge bases name (checked against the themes at start-up).
    pub fn themes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.bases.iter().flatten().filter_map(|(id, base)| Some((id.as_str(), base.theme.as_deref()?)))
    }
}

fn unknown_field(name: &str) -> String {
    let fields: Vec<&str> = Field::ALL.iter().map(|field| field.name()).collect();
    format!("unsupported metadata field {name:?}; the fields are {}", fields.join(", "))
}

/// `POST {base}/retrieval`: Dify's request.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DifyRetrievalRequest {
    /// The knowledge base: a tenant id, or an id of `RETR_DIFY_KNOWLEDGE_BASES`.
    pub knowledge_id: String,
    pub query: String,
    pub retrieval_setting: RetrievalSetting,
    pub metadata_condition: Option<DifyMetadataCondition>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrievalSetting {
    /// How many records at most (1..=50).
    #[schema(minimum = 1, maximum = 50)]
    pub top_k: i64,
    /// The lowest `score` returned, in [0, 1]; 0.0 disables it.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub score_threshold: f64,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DifyMetadataCondition {
    /// `and` (the default) or `or`.
    pub logical_operator: Option<LogicalOperator>,
    pub conditions: Vec<DifyCondition>,
}

#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogicalOperator {
    And,
    Or,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DifyCondition {
    /// A metadata field: product, version, tags, domain, section, platform, role, page_type,
    /// source, url, doc_id or indexed_at (older Dify versions send a one-element list).
    #[schema(value_type = Object)]
    pub name: Value,
    /// contains, not contains, start with, end with, is, is not, in, not in, empty, not empty,
    /// =, ≠, >, <, ≥, ≤, before, after.
    pub comparison_operator: String,
    /// A string, a number, or a list of strings (`in`, `not in`); omitted for `empty`/`not empty`.
    #[schema(value_type = Object)]
    pub value: Option<Value>,
}

/// `POST {base}/retrieval`: Dify's response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DifyRetrievalResponse {
    pub records: Vec<DifyRecord>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DifyRecord {
    /// The passage: the text of the section or chunk the cascade chose.
    pub content: String,
    /// The hit's relevance in [0, 1].
    pub score: f32,
    pub title: String,
    /// Never null.
    pub metadata: DifyRecordMetadata,
}

/// Where the passage comes from and what it is about.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DifyRecordMetadata {
    pub knowledge_id: String,
    pub id: String,
    /// `doc`, `section` or `chunk`.
    pub level: String,
    pub doc_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_id: Option<String>,
    pub url: String,
    pub source: String,
    pub product: String,
    pub version: String,
    pub tags: Vec<String>,
    pub domain: String,
    pub section: String,
    pub platform: String,
    pub role: String,
    pub page_type: String,
    pub heading: String,
    pub heading_path: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theme_label: Option<String>,
    /// The hit's final ranking score (boosts included; the records are in its order).
    pub rank_score: f32,
}

/// Dify's External Knowledge API: the records of one knowledge base that answer `query`.
#[utoipa::path(post, path = "/internal/retrieval/dify/retrieval", tag = "dify", request_body = DifyRetrievalRequest,
    responses(
        (status = 200, description = "records, best first; `{\"records\": []}` when nothing matches", body = DifyRetrievalResponse),
        (status = 400, description = "malformed JSON", body = DifyErrorBody),
        (status = 401, description = "1001: no or a malformed `Authorization` header (with RETR_API_KEYS set)", body = DifyErrorBody),
        (status = 403, description = "1002: unknown key, or the key may not read that knowledge base", body = DifyErrorBody),
        (status = 404, description = "2001: no such knowledge base", body = DifyErrorBody),
        (status = 413, description = "request body too large", body = DifyErrorBody),
        (status = 421, description = "the knowledge base's tenant is served by another instance (RETR_TENANTS)", body = DifyErrorBody),
        (status = 415, description = "not `application/json`", body = DifyErrorBody),
        (status = 422, description = "a request the contract does not allow (field, operator, value, range)", body = DifyErrorBody),
        (status = 503, description = "index or backend unavailable", body = DifyErrorBody),
        (status = 504, description = "a dependency timed out", body = DifyErrorBody),
    ))]
pub async fn retrieval(
    State(state): State<AppState>,
    DifyKey(grant): DifyKey,
    body: Result<ApiJson<DifyRetrievalRequest>, ApiError>,
) -> Result<Json<DifyRetrievalResponse>, DifyError> {
    let ApiJson(request) = body?;
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
    let setting = &request.retrieval_setting;
    if !(1..=MAX_RESULTS_CAP as i64).contains(&setting.top_k) {
        return Err(DifyError::invalid(format!(
            "retrieval_setting.top_k: must be within 1..={MAX_RESULTS_CAP}, got {}",
            setting.top_k
        )));
    }
    if !(0.0..=1.0).contains(&setting.score_threshold) {
        return Err(DifyError::invalid(format!(
            "retrieval_setting.score_threshold: must be within 0..=1, got {}",
            setting.score_threshold
        )));
    }
    let mut clauses = base.filter.clone();
    if let Some(condition) = &request.metadata_condition {
        clauses.push(Clause::Group(compile(condition)?));
    }
    let search = SearchRequest {
        max_results: Some(setting.top_k),
        theme: base.theme.clone(),
        condition: (!clauses.is_empty()).then(|| Arc::new(MetadataCondition::all(clauses))),
        ..SearchRequest::new(base.tenant_id.clone(), request.query.clone())
    };
    let (answer, texts) =
        state.search.search_with_texts(&search).await.map_err(|error| match ApiError::from(error) {
            not_found if not_found.code == ErrorCode::TenantNotFound => {
                DifyError::no_knowledge_base(&request.knowledge_id)
            }
            other => other.into(),
        })?;
    let threshold = setting.score_threshold as f32;
    let records = answer
        .hits
        .into_iter()
        .filter_map(|hit| {
            let score = hit.relevance.clamp(0.0, 1.0);
            let content = texts.get(&hit.id)?.clone();
            (score >= threshold).then(|| DifyRecord {
                content,
                score,
                title: hit.title,
                metadata: DifyRecordMetadata {
                    knowledge_id: request.knowledge_id.clone(),
                    id: hit.id,
                    level: hit.level.as_str().to_string(),
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
                },
            })
        })
        .collect();
    Ok(Json(DifyRetrievalResponse { records }))
}

/// Compiles Dify's `metadata_condition`; anything this service cannot check exactly is refused.
fn compile(condition: &DifyMetadataCondition) -> Result<MetadataCondition, DifyError> {
    if condition.conditions.len() > MAX_CONDITIONS {
        return Err(DifyError::invalid(format!(
            "metadata_condition.conditions: at most {MAX_CONDITIONS} conditions, got {}",
            condition.conditions.len()
        )));
    }
    let logic = match condition.logical_operator {
        Some(LogicalOperator::Or) => Logic::Any,
        Some(LogicalOperator::And) | None => Logic::All,
    };
    let clauses = condition
        .conditions
        .iter()
        .enumerate()
        .map(|(index, item)| {
            compile_one(item)
                .map_err(|message| DifyError::invalid(format!("metadata_condition.conditions[{index}]: {message}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MetadataCondition { logic, clauses })
}

/// The operators by the kind of value they take (the OpenAPI document says the same).
pub const TEXT_OPERATORS: [&str; 6] = ["contains", "not contains", "start with", "end with", "is", "is not"];
pub const LIST_OPERATORS: [&str; 2] = ["in", "not in"];
pub const PRESENCE_OPERATORS: [&str; 2] = ["empty", "not empty"];
pub const NUMBER_OPERATORS: [&str; 6] = ["=", "≠", ">", "<", "≥", "≤"];
pub const DATE_OPERATORS: [&str; 2] = ["before", "after"];

/// The fields the numeric comparisons apply to (every scalar field but the date).
pub fn number_fields() -> Vec<&'static str> {
    Field::ALL.iter().filter(|f| !matches!(f, Field::Tags | Field::IndexedAt)).map(|f| f.name()).collect()
}

/// The schema of one condition: one shape per family of operators, so that what the document
/// calls valid is exactly what `compile_one` accepts.
pub fn condition_schema() -> Value {
    let names = |fields: Vec<&str>| {
        json!({"oneOf": [
            {"type": "string", "enum": fields},
            {"type": "array", "items": {"type": "string", "enum": fields}, "minItems": 1, "maxItems": 1},
        ]})
    };
    let all_fields: Vec<&str> = Field::ALL.iter().map(|f| f.name()).collect();
    let text = json!({"type": "string", "maxLength": MAX_TAG_CHARS});
    let family = |operators: &[&str], name: Value, value: Option<Value>| {
        let mut properties = json!({"name": name, "comparison_operator": {"type": "string", "enum": operators}});
        let mut required = vec!["name", "comparison_operator"];
        if let Some(value) = value {
            properties["value"] = value;
            required.push("value");
        } else {
            properties["value"] = json!({});
        }
        json!({"type": "object", "additionalProperties": false, "required": required, "properties": properties})
    };
    json!({"oneOf": [
        family(&TEXT_OPERATORS, names(all_fields.clone()), Some(json!({"oneOf": [text, {"type": "number"}]}))),
        family(&LIST_OPERATORS, names(all_fields.clone()), Some(json!({"oneOf": [
            {"type": "array", "items": text, "maxItems": MAX_ID_LIST}, text]}))),
        family(&PRESENCE_OPERATORS, names(all_fields), None),
        family(&NUMBER_OPERATORS, names(number_fields()), Some(json!({"oneOf": [{"type": "number"},
            {"type": "string", "pattern": "^[vV]?[0-9]{1,18}(\\.[0-9]{1,18})*$"}]}))),
        family(&DATE_OPERATORS, names(vec![Field::IndexedAt.name()]), Some(json!({"anyOf": [
            {"type": "number"}, {"type": "string", "format": "date-time"}, {"type": "string", "format": "date"}]}))),
    ]})
}

fn compile_one(condition: &DifyCondition) -> Result<Clause, String> {
    let name = match &condition.name {
        Value::String(name) => name.as_str(),
        Value::Array(names) => match names.as_slice() {
            [Value::String(name)] => name.as_str(),
            _ => return Err("name: one field name (a string, or a list of exactly one)".into()),
        },
        _ => return Err("name: a field name is a string".into()),
    };
    let field = Field::parse(name).ok_or_else(|| unknown_field(name))?;
    let operator = condition.comparison_operator.as_str();
    let value = condition.value.as_ref();
    let bounded = |text: &str| -> Result<String, String> {
        if text.chars().count() > MAX_TAG_CHARS {
            return Err(format!("value: at most {MAX_TAG_CHARS} characters"));
        }
        Ok(text.to_string())
    };
    let text = || -> Result<String, String> {
        match value {
            Some(Value::String(text)) => bounded(text),
            Some(Value::Number(number)) => Ok(number.to_string()),
            _ => Err(format!("value: `{operator}` takes a string or a number")),
        }
    };
    let list = || -> Result<Vec<String>, String> {
        let items: Vec<String> = match value {
            Some(Value::Array(items)) if items.len() <= MAX_ID_LIST => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => bounded(text),
                    _ => Err(format!("value: `{operator}` takes a list of strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Array(_)) => return Err(format!("value: at most {MAX_ID_LIST} items")),
            // A string is a comma-separated list (as Dify's own filters send `in`).
            Some(Value::String(text)) => bounded(text)?.split(',').map(|item| item.trim().to_string()).collect(),
            _ => return Err(format!("value: `{operator}` takes a list of strings")),
        };
        Ok(items)
    };
    let number = || -> Result<Number, String> {
        if matches!(field, Field::Tags | Field::IndexedAt) {
            return Err(format!("`{operator}` compares numbers; `{}` holds none", field.name()));
        }
        match value {
            Some(Value::Number(number)) => Ok(Number::of_json(field, number)),
            Some(Value::String(text)) if Number::is_version_text(text.strip_suffix('\n').unwrap_or(text)) => {
                Number::parse(field, text).ok_or_else(|| format!("value: {text:?} is not a number"))
            }
            _ => Err(format!("value: `{operator}` takes a number or a version (`1.10`)")),
        }
    };
    let instant = || -> Result<i64, String> {
        if field != Field::IndexedAt {
            return Err(format!("`{operator}` compares dates; the date field is `indexed_at`, not `{}`", field.name()));
        }
        let parsed = match value {
            Some(Value::Number(number)) => number.as_f64().map(|seconds| seconds.floor() as i64),
            Some(Value::String(text)) => unix_seconds(text),
            _ => None,
        };
        parsed.ok_or_else(|| format!("value: `{operator}` takes a date (Unix seconds, YYYY-MM-DD or RFC 3339)"))
    };
    let test = match operator {
        "contains" => Test::Contains(text()?.to_lowercase()),
        "not contains" => Test::NotContains(text()?.to_lowercase()),
        "start with" => Test::StartsWith(text()?.to_lowercase()),
        "end with" => Test::EndsWith(text()?.to_lowercase()),
        "is" => Test::Is(text()?),
        "is not" => Test::IsNot(text()?),
        "in" => Test::In(list()?),
        "not in" => Test::NotIn(list()?),
        "empty" => Test::Empty,
        "not empty" => Test::NotEmpty,
        "=" => Test::Compare(Comparison::Equal, number()?),
        "≠" => Test::Compare(Comparison::NotEqual, number()?),
        ">" => Test::Compare(Comparison::Greater, number()?),
        "<" => Test::Compare(Comparison::Less, number()?),
        "≥" => Test::Compare(Comparison::GreaterOrEqual, number()?),
        "≤" => Test::Compare(Comparison::LessOrEqual, number()?),
        "before" => Test::Before(instant()?),
        "after" => Test::After(instant()?),
        other => {
            let all = [&TEXT_OPERATORS[..], &LIST_OPERATORS, &PRESENCE_OPERATORS, &NUMBER_OPERATORS, &DATE_OPERATORS]
                .concat()
                .join(", ");
            return Err(format!("unsupported comparison_operator {other:?}; the operators are {all}"));
        }
    };
    Ok(Clause::Field(field, test))
}
