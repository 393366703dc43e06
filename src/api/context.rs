//! `POST /internal/retrieval/context`: a search turned into one prompt-ready context string.

use super::auth::TenantKey;
use super::extract::ApiJson;
use crate::error::ApiError;
use crate::AppState;
use axum::extract::State;
use axum::Json;
use retrieval_engine::{
    Clarification, Degradation, RoutingInfo, SearchRequest, DEFAULT_CONTEXT_CHARS, MAX_CONTEXT_CHARS,
};
use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;

/// One source of the context, numbered as in the context text.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ContextSource {
    pub(crate) number: usize,
    pub(crate) id: String,
    pub(crate) doc_id: String,
    pub(crate) title: String,
    pub(crate) url: String,
    pub(crate) source: String,
    pub(crate) relevance: f32,
    pub(crate) theme_label: Option<String>,
}

/// The answer of `POST /context`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ContextResponse {
    /// The prompt-ready text (sources numbered, grouped by theme when the question spans several).
    pub(crate) context: String,
    pub(crate) system_prompt_rule: Option<String>,
    pub(crate) sources: Vec<ContextSource>,
    pub(crate) truncated: bool,
    pub(crate) hits_level: String,
    pub(crate) routing: RoutingInfo,
    pub(crate) clarification: Option<Clarification>,
    pub(crate) degradations: Vec<Degradation>,
    pub(crate) trace_id: Option<String>,
}

/// `POST /context`: every `/search` field plus `max_context_chars`, parsed by the same strict
/// path as `/search` (repeated keys and unknown fields rejected, nested objects included).
#[derive(Debug)]
pub(crate) struct ContextRequest {
    pub(crate) search: SearchRequest,
    pub(crate) max_context_chars: Option<i64>,
}

/// `SearchRequest`'s schema with `max_context_chars` added.
impl utoipa::PartialSchema for ContextRequest {
    fn schema() -> RefOr<Schema> {
        let mut schema = SearchRequest::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.description =
                Some("`POST /internal/retrieval/context`: every `/search` field plus `max_context_chars`.".into());
            let budget = ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .description(Some("The context's length budget in characters."))
                .minimum(Some(1))
                .maximum(Some(MAX_CONTEXT_CHARS))
                .default(Some(DEFAULT_CONTEXT_CHARS.into()));
            object.properties.insert("max_context_chars".into(), budget.into());
        }
        schema
    }
}

impl utoipa::ToSchema for ContextRequest {}

impl<'de> Deserialize<'de> for ContextRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let max_context_chars = match fields.remove("max_context_chars") {
            None => None,
            Some(value) => Option::<i64>::deserialize(value)
                .map_err(|error| D::Error::custom(format!("max_context_chars: {error}")))?,
        };
        // Under the strict rules too (`null` for an object field is absent, as on /search).
        let search =
            SearchRequest::deserialize(super::strict::Strict(Value::Object(fields))).map_err(D::Error::custom)?;
        Ok(ContextRequest { search, max_context_chars })
    }
}

/// A search turned into one prompt-ready context string with numbered sources.
#[utoipa::path(post, path = "/internal/retrieval/context", tag = "search",
    request_body = ContextRequest,
    responses((status = 200, description = "the context", body = ContextResponse)))]
pub(crate) async fn context(
    State(state): State<AppState>,
    key: TenantKey,
    ApiJson(body): ApiJson<ContextRequest>,
) -> Result<Json<ContextResponse>, ApiError> {
    key.check(&body.search.tenant_id)?;
    let budget = match body.max_context_chars {
        None => DEFAULT_CONTEXT_CHARS,
        Some(value) if (1..=MAX_CONTEXT_CHARS as i64).contains(&value) => value as usize,
        Some(value) => {
            return Err(ApiError::invalid(format!(
                "max_context_chars: must be within 1..={MAX_CONTEXT_CHARS}, got {value}"
            )))
        }
    };
    let request = body.search;
    let answer = state.search.context(&request, budget).await?;
    // Numbered as in the context text (grouped by theme when it is).
    let sources: Vec<ContextSource> = answer
        .formatted
        .order
        .iter()
        .enumerate()
        .map(|(number, &source_index)| {
            let hit = &answer.search.hits[answer.source_hits[source_index]];
            ContextSource {
                number: number + 1,
                id: hit.id.clone(),
                doc_id: hit.doc_id.clone(),
                title: hit.title.clone(),
                url: hit.metadata.url.clone(),
                source: hit.metadata.source.clone(),
                relevance: hit.relevance,
                theme_label: hit.metadata.theme_label.clone(),
            }
        })
        .collect();
    Ok(Json(ContextResponse {
        context: answer.formatted.context,
        system_prompt_rule: answer.formatted.system_prompt_rule,
        sources,
        truncated: answer.formatted.truncated,
        hits_level: answer.search.hits_level,
        routing: answer.search.routing,
        clarification: answer.search.clarification,
        degradations: answer.search.degradations,
        trace_id: answer.search.trace_id,
    }))
}
