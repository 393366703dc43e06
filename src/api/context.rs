//! `POST /internal/retrieval/context`: a search turned into one prompt-ready context string.

use super::extract::ApiJson;
use crate::error::ApiError;
use crate::search::context::{DEFAULT_CONTEXT_CHARS, MAX_CONTEXT_CHARS};
use crate::search::SearchRequest;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

/// Takes every `/search` field plus `max_context_chars`; unknown fields are rejected as on `/search`.
pub async fn context(State(state): State<AppState>, ApiJson(body): ApiJson<Value>) -> Result<Json<Value>, ApiError> {
    let Value::Object(mut fields) = body else {
        return Err(ApiError::invalid("the body must be a JSON object"));
    };
    let budget = match fields.remove("max_context_chars") {
        None | Some(Value::Null) => DEFAULT_CONTEXT_CHARS,
        Some(Value::Number(number)) => match number.as_u64() {
            Some(value) if (1..=MAX_CONTEXT_CHARS as u64).contains(&value) => value as usize,
            _ => return Err(ApiError::invalid(format!("max_context_chars: must be within 1..={MAX_CONTEXT_CHARS}"))),
        },
        Some(other) => return Err(ApiError::invalid(format!("max_context_chars: expected an integer, got {other}"))),
    };
    let request: SearchRequest =
        serde_json::from_value(Value::Object(fields)).map_err(|error| ApiError::invalid(error.to_string()))?;
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
