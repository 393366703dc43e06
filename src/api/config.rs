//! `GET` / `POST /internal/retrieval/config`: the runtime subset of the settings, changed
//! without a restart. A rejected update changes nothing. With `RETR_ADMIN_TOKEN` set, an update
//! needs `Authorization: Bearer <token>`.

use super::auth::AdminAuth;
use super::extract::ApiJson;
use crate::config::{RouterMode, RuntimeSettings};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;

/// A partial update of the runtime settings: any subset of them; absent or `null` leaves a
/// setting as it is. Each limit is `RuntimeSettings`' (a test keeps the two schemas alike).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RuntimeSettingsUpdate)]
pub(crate) struct RuntimePatch {
    #[schema(minimum = 1, maximum = 50)]
    max_results: Option<usize>,
    #[schema(minimum = 1, maximum = 1000)]
    doc_top_k: Option<usize>,
    #[schema(minimum = 1, maximum = 1000)]
    section_top_k: Option<usize>,
    #[schema(minimum = 1, maximum = 1000)]
    chunk_top_k: Option<usize>,
    #[schema(minimum = 1, maximum = 50)]
    topk_per_doc: Option<usize>,
    #[schema(minimum = 0, maximum = 1000)]
    min_docs: Option<usize>,
    #[schema(minimum = -1, maximum = 1)]
    min_score: Option<f32>,
    enable_filters: Option<bool>,
    rerank_enabled: Option<bool>,
    #[schema(minimum = 1, maximum = 1000)]
    rerank_top_n: Option<usize>,
    theme_router_mode: Option<RouterMode>,
}

impl RuntimePatch {
    fn apply(self, mut settings: RuntimeSettings) -> RuntimeSettings {
        let RuntimePatch {
            max_results,
            doc_top_k,
            section_top_k,
            chunk_top_k,
            topk_per_doc,
            min_docs,
            min_score,
            enable_filters,
            rerank_enabled,
            rerank_top_n,
            theme_router_mode,
        } = self;
        settings.max_results = max_results.unwrap_or(settings.max_results);
        settings.doc_top_k = doc_top_k.unwrap_or(settings.doc_top_k);
        settings.section_top_k = section_top_k.unwrap_or(settings.section_top_k);
        settings.chunk_top_k = chunk_top_k.unwrap_or(settings.chunk_top_k);
        settings.topk_per_doc = topk_per_doc.unwrap_or(settings.topk_per_doc);
        settings.min_docs = min_docs.unwrap_or(settings.min_docs);
        settings.min_score = min_score.unwrap_or(settings.min_score);
        settings.enable_filters = enable_filters.unwrap_or(settings.enable_filters);
        settings.rerank_enabled = rerank_enabled.unwrap_or(settings.rerank_enabled);
        settings.rerank_top_n = rerank_top_n.unwrap_or(settings.rerank_top_n);
        settings.theme_router_mode = theme_router_mode.unwrap_or(settings.theme_router_mode);
        settings
    }
}

/// The runtime settings.
#[utoipa::path(get, path = "/internal/retrieval/config", tag = "config",
    responses((status = 200, description = "the runtime settings", body = RuntimeSettings)))]
pub(crate) async fn get_config(State(state): State<AppState>) -> Json<RuntimeSettings> {
    Json(state.search.runtime_settings())
}

/// A partial update of the runtime settings, validated; nothing changes on error.
#[utoipa::path(post, path = "/internal/retrieval/config", tag = "config",
    request_body = RuntimePatch,
    responses((status = 200, description = "the new runtime settings", body = RuntimeSettings)))]
pub(crate) async fn update_config(
    State(state): State<AppState>,
    _admin: AdminAuth,
    ApiJson(patch): ApiJson<RuntimePatch>,
) -> Result<Json<RuntimeSettings>, ApiError> {
    let wants_rerank = patch.rerank_enabled == Some(true);
    let wants_llm = patch.theme_router_mode == Some(RouterMode::Llm);
    let updated = state.search.update_runtime(|current| {
        let updated = patch.apply(current.clone());
        let mut problems: Vec<String> = updated.problems().into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
        if wants_rerank && !state.rerank_configured {
            problems.push("rerank_enabled: no rerank endpoint is configured (RETR_RERANK_API_BASE)".to_string());
        }
        if wants_llm && !state.search.has_llm_router() {
            problems.push(
                "theme_router_mode: llm needs a chat endpoint (RETR_RERANK_API_BASE with RETR_RERANK_BACKEND=chat)"
                    .to_string(),
            );
        }
        if problems.is_empty() {
            Ok(updated)
        } else {
            Err(ApiError::invalid(problems.join("; ")))
        }
    })?;
    tracing::info!(?updated, "runtime settings updated");
    Ok(Json(updated))
}

/// What a config reload did.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ReloadResponse {
    /// `reloaded`.
    pub(crate) status: String,
    /// How many reloads replaced the files since start-up.
    pub(crate) generation: u64,
    /// The optional config files that are configured but absent, by setting: the service runs
    /// without them.
    pub(crate) missing_config: Vec<String>,
}

/// Reads the themes file, boosting.yaml and the synonyms directory again (also on `SIGHUP`) and
/// puts them in use together; when any is broken the ones in use stay, the answer is 422 with
/// every problem, and `/health` says `degraded` until a reload succeeds. Searches already running
/// finish with the files they started with.
#[utoipa::path(post, path = "/internal/retrieval/config/reload", tag = "config",
    responses((status = 200, description = "the files are in use", body = ReloadResponse)))]
pub(crate) async fn reload_config(
    State(state): State<AppState>,
    _admin: AdminAuth,
) -> Result<Json<ReloadResponse>, ApiError> {
    reload_tuning(&state).map_err(|problems| ApiError::invalid(problems.join("; ")))?;
    let status = state.search.tuning_status();
    Ok(Json(ReloadResponse {
        status: "reloaded".into(),
        generation: status.generation,
        missing_config: status.missing,
    }))
}

/// Reads the themes, boosting and synonyms files again (`POST /internal/retrieval/config/reload`,
/// `SIGHUP`) and puts them in use together, or keeps the ones in use when any is broken or a Dify
/// knowledge base names a theme the new themes file lacks. Returns the problems of a rejected
/// reload; `/health` and `/metrics` show them until a reload succeeds.
pub fn reload_tuning(state: &AppState) -> Result<(), Vec<String>> {
    let files = state.settings.tuning_files();
    let loaded = files.load().and_then(|tuning| {
        let unknown = state.dify.themes_missing_from(&tuning.theme_set);
        if unknown.is_empty() {
            Ok((tuning, files.missing()))
        } else {
            Err(unknown)
        }
    });
    let outcome = loaded.as_ref().map(|_| ()).map_err(Clone::clone);
    match &outcome {
        Ok(()) => tracing::info!("config files reloaded (themes, boosting, synonyms)"),
        Err(problems) => {
            tracing::warn!(problems = %problems.join("; "), "config reload rejected; the files in use stay")
        }
    }
    state.metrics.config_reload(outcome.is_ok());
    state.search.reload_tuning(loaded);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use utoipa::PartialSchema;

    /// An update's field is the setting's, or `null`.
    #[test]
    fn the_update_schema_is_the_settings_schema_with_every_field_optional() {
        let settings = serde_json::to_value(RuntimeSettings::schema()).unwrap();
        let update = serde_json::to_value(RuntimePatch::schema()).unwrap();
        assert_eq!(update["additionalProperties"], false);
        assert!(update.get("required").is_none());
        let fields = settings["properties"].as_object().unwrap();
        assert_eq!(fields.len(), update["properties"].as_object().unwrap().len());
        for (name, setting) in fields {
            let mut optional = update["properties"][name].clone();
            if let Some(Value::Array(one_of)) = optional.get("oneOf") {
                assert_eq!(one_of, &vec![json!({"type": "null"}), setting.clone()], "{name}");
                continue;
            }
            assert_eq!(optional["type"], json!([setting["type"], "null"]), "{name}");
            optional["type"] = setting["type"].clone();
            assert_eq!(&optional, setting, "{name}");
        }
    }
}
