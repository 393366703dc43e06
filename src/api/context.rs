//! `POST /internal/retrieval/context`: a search turned into one prompt-ready context string.

use super::auth::TenantKey;
use super::extract::ApiJson;
use crate::error::ApiError;
use crate::search::context::{DEFAULT_CONTEXT_CHARS, MAX_CONTEXT_CHARS};
use crate::search::SearchRequest;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// `POST /context`: every `/search` field plus `max_context_chars`, parsed by the same strict
/// path as `/search` (repeated keys and unknown fields rejected, nested objects included).
#[derive(Debug)]
pub struct ContextRequest {
    pub search: SearchRequest,
    pub max_context_chars: Option<i64>,
}

impl<'de> Deserialize<'de> for ContextRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(deserializer)?;
        let max_context_chars = match fields.remove("max_context_chars") {
            None => None,
            Some(value) => Option::<i64>::deserialize(value)
                .map_err(|error| D::Error::custom(format!("max_context_chars: {error}")))?,
        };
        let search = SearchRequest::deserialize(Value::Object(fields)).map_err(D::Error::custom)?;
        Ok(ContextRequest { search, max_context_chars })
    }
}

pub async fn context(
    State(state): State<AppState>,
    key: TenantKey,
    ApiJson(body): ApiJson<ContextRequest>,
) -> Result<Json<Value>, ApiError> {
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
    let sources: Vec<Value> = answer
        .formatted
        .order
        .iter()
        .enumerate()
        .map(|(number, &source_index)| {
            let hit = &answer.search.hits[answer.source_hits[source_index]];
            json!({
                "number": number + 1,
                "id": hit.id,
                "doc_id": hit.doc_id,
                "title": hit.title,
                "url": hit.metadata.url,
                "source": hit.metadata.source,
                "relevance": hit.relevance,
                "theme_label": hit.metadata.theme_label,
            })
        })
        .collect();
    Ok(Json(json!({
        "context": answer.formatted.context,
        "system_prompt_rule": answer.formatted.system_prompt_rule,
        "sources": sources,
        "truncated": answer.formatted.truncated,
        "hits_level": answer.search.hits_level,
        "routing": answer.search.routing,
        "clarification": answer.search.clarification,
        "degradations": answer.search.degradations,
        "trace_id": answer.search.trace_id,
    })))
}
