//! `GET` / `POST /internal/retrieval/config`: the runtime subset of the settings, changed
//! without a restart (`GET` also names the tuning files in use). A rejected update changes
//! nothing. With `RETR_ADMIN_TOKEN` set, an update needs `Authorization: Bearer <token>`.
//! `POST /internal/retrieval/config/reload` (and `SIGHUP`): the tuning files read again.

use super::auth::AdminAuth;
use super::extract::ApiJson;
use crate::config::{RouterMode, RuntimeSettings};
use crate::error::{ApiError, ErrorCode};
use crate::AppState;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

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

/// The runtime settings, and the tuning files in use.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ConfigResponse {
    #[serde(flatten)]
    pub(crate) settings: RuntimeSettings,
    pub(crate) tuning: TuningInUse,
}

/// The themes, boosting and synonyms files in use: those read at start-up or by the last reload
/// that went through.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct TuningInUse {
    /// How many reloads replaced the files since start-up.
    pub(crate) generation: u64,
    /// The files the tuning was read from (an absent one is not listed).
    pub(crate) files: Vec<TuningFile>,
}

/// One tuning file as it was read.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct TuningFile {
    /// `RETR_THEMES_PATH`, `RETR_BOOSTING_PATH` or `RETR_SYNONYMS_DIR`.
    pub(crate) setting: String,
    /// SHA-256 of the bytes read (`sha256sum` of the file); for the synonyms directory, of each
    /// `.txt` file's name and bytes in name order.
    pub(crate) sha256: String,
    pub(crate) bytes: u64,
    /// Its top-level sections; for the synonyms directory, its `.txt` files.
    pub(crate) sections: Vec<String>,
}

/// The runtime settings and the tuning files in use.
#[utoipa::path(get, path = "/internal/retrieval/config", tag = "config",
    responses((status = 200, description = "the runtime settings and the tuning files in use", body = ConfigResponse)))]
pub(crate) async fn get_config(State(state): State<AppState>) -> Json<ConfigResponse> {
    let tuning = state.search.tuning();
    let files = tuning
        .files
        .iter()
        .map(|file| TuningFile {
            setting: file.setting.to_string(),
            sha256: file.sha256.clone(),
            bytes: file.bytes,
            sections: file.sections.clone(),
        })
        .collect();
    Json(ConfigResponse {
        settings: state.search.runtime_settings(),
        tuning: TuningInUse { generation: tuning.generation, files },
    })
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
/// puts them in use together; when any is broken (or empty, or lacks a section the file in use
/// has) the ones in use stay, the answer is 422 with every problem, and `/health` says `degraded`
/// until a reload succeeds. One reload runs at a time: another one meanwhile is answered 409
/// `reload_in_progress`; one that has not finished within `RETR_CONFIG_RELOAD_TIMEOUT_SECONDS` is
/// answered 504 `timeout` and changes nothing. Searches already running finish with the files
/// they started with.
#[utoipa::path(post, path = "/internal/retrieval/config/reload", tag = "config",
    responses((status = 200, description = "the files are in use", body = ReloadResponse)))]
pub(crate) async fn reload_config(
    State(state): State<AppState>,
    _admin: AdminAuth,
) -> Result<Json<ReloadResponse>, ApiError> {
    reload_tuning(&state).await.map_err(ReloadError::into_api_error)?;
    let status = state.search.tuning_status();
    Ok(Json(ReloadResponse {
        status: "reloaded".into(),
        generation: status.generation,
        missing_config: status.missing,
    }))
}

/// Why a reload changed nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum ReloadError {
    /// Another reload is running (it has been for `seconds`).
    InProgress { seconds: f64, reading: &'static str },
    /// A file is broken, empty, too large or lacks a section: every problem, each starting with
    /// its setting.
    Rejected(Vec<String>),
    /// Reading the files took longer than `RETR_CONFIG_RELOAD_TIMEOUT_SECONDS`.
    TimedOut(String),
    /// No thread could be started to read the files.
    Unavailable(String),
}

impl ReloadError {
    fn into_api_error(self) -> ApiError {
        match self {
            ReloadError::InProgress { seconds, reading } => ApiError::new(
                ErrorCode::ReloadInProgress,
                format!(
                    "a config reload has been running for {seconds:.1} s{}; retry when it has finished",
                    if reading.is_empty() { String::new() } else { format!(" (reading {reading})") }
                ),
            ),
            ReloadError::Rejected(problems) => ApiError::invalid(problems.join("; ")),
            ReloadError::TimedOut(problem) => ApiError::new(ErrorCode::Timeout, problem),
            ReloadError::Unavailable(problem) => ApiError::new(ErrorCode::Overloaded, problem),
        }
    }
}

/// Reads the themes, boosting and synonyms files again (`POST /internal/retrieval/config/reload`,
/// `SIGHUP`) and puts them in use together, or keeps the ones in use when any is broken or a Dify
/// knowledge base names a theme the new themes file lacks. The files are read, once each, on a
/// thread of their own (never on the async workers, so a read that blocks delays no request),
/// with one reload at a time and the answer bounded by `RETR_CONFIG_RELOAD_TIMEOUT_SECONDS`.
/// A rejected or timed-out reload's problems are shown by `/health` and `/metrics` until a reload
/// succeeds.
pub async fn reload_tuning(state: &AppState) -> Result<(), ReloadError> {
    let ticket = state.reloads.take().map_err(|busy| {
        tracing::warn!(
            running_for_seconds = busy.seconds,
            reading = busy.reading,
            "config reload refused: another one is running"
        );
        ReloadError::InProgress { seconds: busy.seconds, reading: busy.reading }
    })?;
    let files = state.settings.tuning_files();
    let installed = state.search.tuning();
    let dify = Arc::clone(&state.dify);
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("config-reload".into())
        .spawn(move || {
            let loaded = files.load_reporting(Some(&installed), &|setting| ticket.reading(setting)).and_then(
                |(tuning, missing)| {
                    let unknown = dify.themes_missing_from(&tuning.theme_set);
                    if unknown.is_empty() {
                        Ok((tuning, missing))
                    } else {
                        Err(unknown)
                    }
                },
            );
            // The slot goes with the outcome, held until it is put in use. Nobody listens after a
            // timeout: what was read is dropped, never put in use, and the slot is freed here.
            let _ = sender.send((loaded, ticket));
        })
        .map_err(|error| {
            ReloadError::Unavailable(format!("cannot start a thread to read the config files: {error}"))
        })?;
    let timeout = Duration::from_secs_f64(state.settings.config_reload_timeout_seconds);
    // The slot, once the outcome is here: freed when this function returns, after the outcome is
    // in use, so the next reload compares with what this one put in use.
    let mut held_slot = None;
    let outcome = match tokio::time::timeout(timeout, receiver).await {
        Ok(Ok((loaded, ticket))) => {
            held_slot = Some(ticket);
            loaded.map_err(ReloadError::Rejected)
        }
        Ok(Err(_)) => Err(ReloadError::Rejected(vec!["the reload stopped before it had read the files".into()])),
        Err(_) => {
            let reading = state.reloads.reading().filter(|setting| !setting.is_empty()).unwrap_or("the config files");
            Err(ReloadError::TimedOut(format!(
                "{reading}: reading the file did not finish within {} s (RETR_CONFIG_RELOAD_TIMEOUT_SECONDS); \
                 the files in use stay",
                timeout.as_secs_f64()
            )))
        }
    };
    match &outcome {
        Ok(_) => tracing::info!("config files reloaded (themes, boosting, synonyms)"),
        Err(error) => tracing::warn!(?error, "config reload rejected; the files in use stay"),
    }
    state.metrics.config_reload(outcome.is_ok());
    match outcome {
        Ok(loaded) => {
            state.search.reload_tuning(Ok(loaded));
            drop(held_slot);
            Ok(())
        }
        Err(error) => {
            let problems = match &error {
                ReloadError::Rejected(problems) => problems.clone(),
                ReloadError::TimedOut(problem) | ReloadError::Unavailable(problem) => vec![problem.clone()],
                ReloadError::InProgress { .. } => Vec::new(),
            };
            state.search.reload_tuning(Err(problems));
            drop(held_slot);
            Err(error)
        }
    }
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
