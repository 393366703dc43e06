//! Start-up wiring: settings → backends → `AppState`. Shared by `main` and the end-to-end tests.

use crate::config::{ConfigError, Settings, VectorBackend};
use crate::AppState;
use retrieval_engine::{
    learn::LearnedRerankers, Embedder, FeedbackStore, InMemoryIndex, Metrics, SearchService, SnapshotSource,
    VectorIndex,
};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("{0}")]
    Backend(String),
}

/// The settings of the binary: `Settings::read`, then every check of `validate_settings`, so one
/// start-up attempt reports every problem.
pub fn load_settings(
    file: Option<&std::path::Path>,
    env: &std::collections::HashMap<String, String>,
) -> Result<Settings, ConfigError> {
    let settings = Settings::read(file, env)?;
    validate_settings(&settings)?;
    Ok(settings)
}

/// `Settings::validate` and the files the HTTP layer reads: a key file (`RETR_API_KEYS`) or a
/// knowledge-base file (`RETR_DIFY_KNOWLEDGE_BASES`) that is configured but cannot be used stops
/// start-up, naming the setting and the problem (its line, for the key file).
pub fn validate_settings(settings: &Settings) -> Result<(), ConfigError> {
    let mut problems = settings.problems();
    if let Err(error) = crate::api::auth::ApiKeys::load(&settings.api_keys) {
        problems.push(("api_keys".into(), error));
    }
    if let Err(error) = crate::api::dify::KnowledgeBases::load(&settings.dify_knowledge_bases) {
        problems.push(("dify_knowledge_bases".into(), error));
    }
    if let Some(dir) = &settings.feedback_dir {
        if let Err(error) = check_writable_dir(dir) {
            problems.push(("feedback_dir".into(), format!("{}: {error}", dir.display())));
        }
    }
    ConfigError::from_problems(problems)
}

/// Creates `dir` when missing and checks that a file can be written and synced in it.
fn check_writable_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(".write-check");
    std::fs::write(&probe, b"ok")?;
    std::fs::File::open(&probe)?.sync_all()?;
    std::fs::remove_file(&probe)
}

/// The query/passage embedder the settings select (pseudo-embeddings when no API base is set);
/// its calls are recorded in `metrics` when given.
pub fn build_embedder(settings: &Settings, metrics: Option<Arc<Metrics>>) -> Result<Arc<dyn Embedder>, StartupError> {
    retrieval_engine::build_embedder(&settings.embedding_client(), metrics)
        .map_err(|error| StartupError::Backend(format!("embedding client: {error}")))
}

/// The embedder of `ingest` and `eval` (long timeout, ingest batch size).
pub fn build_ingest_embedder(settings: &Settings) -> Result<Arc<dyn Embedder>, StartupError> {
    retrieval_engine::build_ingest_embedder(&settings.embedding_client())
        .map_err(|error| StartupError::Backend(format!("embedding client: {error}")))
}

/// The topic mapping rules: `RETR_MAPPING_PATH` when the file exists, else the built-in default.
pub fn load_mapping(settings: &Settings) -> Result<retrieval_engine::ingest::MappingRules, StartupError> {
    if settings.mapping_path.exists() {
        retrieval_engine::ingest::MappingRules::from_file(&settings.mapping_path)
            .map_err(|error| StartupError::Backend(format!("RETR_MAPPING_PATH: {error}")))
    } else {
        Ok(retrieval_engine::ingest::MappingRules::builtin())
    }
}

/// Builds the index the settings select. Must run inside a tokio runtime (starts the reloader).
/// Chroma calls are recorded in `metrics` when given; PostgreSQL (`RETR_POSTGRES_URL`) is read
/// by a replica like Chroma's. In mock mode, when `embedder` fails, the demo corpus is embedded
/// with pseudo-embeddings (`build_state` then embeds queries the same way).
pub async fn build_index(
    settings: &Settings,
    embedder: &dyn Embedder,
    metrics: Option<Arc<Metrics>>,
) -> Result<Arc<dyn VectorIndex>, StartupError> {
    match settings.backend() {
        VectorBackend::Memory => match &settings.index_path {
            Some(path) => {
                let index = Arc::new(InMemoryIndex::from_file_with(
                    path.clone(),
                    settings.tenant_scope(),
                    settings.index_local_copy,
                ));
                index.replica().set_approximate_min_records(settings.approximate_min_records);
                index.spawn_reloader(Duration::from_millis(settings.index_reload_interval_ms));
                Ok(index)
            }
            None => Ok(build_demo_index(settings, embedder).await?.0),
        },
        VectorBackend::Chroma => {
            let index = retrieval_engine::ChromaIndex::new(&settings.chroma())
                .map_err(|error| StartupError::Backend(format!("chroma client: {error}")))?;
            index.replica().set_approximate_min_records(settings.approximate_min_records);
            if let Some(metrics) = metrics {
                index.set_metrics(metrics);
            }
            // A first load before serving; Chroma being down is not fatal (searches answer 503
            // and the refresher recovers by itself).
            if let Err(error) = index.refresh().await {
                tracing::warn!(%error, host = %retrieval_engine::upstream::redact(&settings.chroma_host), "chroma index not loaded yet");
            }
            index.spawn_refresher();
            Ok(index)
        }
        VectorBackend::Postgres if settings.postgres_search == crate::config::PostgresSearchMode::Database => {
            let index = retrieval_engine::PostgresSearchIndex::new(&settings.postgres())
                .map_err(|error| StartupError::Backend(format!("postgres client: {error}")))?;
            // A first poll before serving; the database being down is not fatal (searches answer
            // 503 until a server answers).
            if let Err(error) = index.poll().await {
                tracing::warn!(%error, "postgres not reachable yet");
            }
            index.spawn_refresher();
            Ok(index)
        }
        VectorBackend::Postgres => {
            let index = retrieval_engine::PostgresIndex::new(&settings.postgres())
                .map_err(|error| StartupError::Backend(format!("postgres client: {error}")))?;
            index.replica().set_approximate_min_records(settings.approximate_min_records);
            // A first load before serving; the database being down is not fatal (searches answer
            // 503 until a first load, and the refresher recovers by itself).
            if let Err(error) = index.refresh().await {
                tracing::warn!(%error, "postgres index not loaded yet");
            }
            index.spawn_refresher();
            Ok(index)
        }
    }
}

/// The index of mock mode: the bundled demo corpus embedded through `embedder`. When the embedder
/// fails (an embedding server configured but down), the corpus is embedded with pseudo-embeddings
/// instead, and the second value says why: queries must then be embedded the same way
/// (`build_state` does so, and reports it).
async fn build_demo_index(
    settings: &Settings,
    embedder: &dyn Embedder,
) -> Result<(Arc<dyn VectorIndex>, Option<String>), StartupError> {
    use retrieval_engine::ingest::{demo_snapshot, IngestError};
    let mapping = load_mapping(settings)?;
    let (mut snapshot, fallback) = match demo_snapshot(embedder, &mapping).await {
        Ok(snapshot) => (snapshot, None),
        Err(error @ (IngestError::Embedding(_) | IngestError::BadEmbedding(_))) => {
            let failure = match &error {
                IngestError::Embedding(error) => format!("{:?}", error.kind),
                _ => "unusable vectors".to_string(),
            };
            let reason = format!(
                "mock mode: the embedding server (RETR_EMBEDDING_API_BASE) failed ({failure}) when the demo corpus \
                 was embedded at start-up; the corpus and every query use pseudo-embeddings until a restart with \
                 the server up"
            );
            tracing::warn!(%error, "{reason}");
            let pseudo = retrieval_engine::PseudoEmbedder::new(settings.embedding_dimension);
            let snapshot = demo_snapshot(&pseudo, &mapping)
                .await
                .map_err(|error| StartupError::Backend(format!("cannot build the demo corpus: {error}")))?;
            (snapshot, Some(reason))
        }
        Err(error) => return Err(StartupError::Backend(format!("cannot build the demo corpus: {error}"))),
    };
    settings.tenant_scope().retain(&mut snapshot);
    let index = InMemoryIndex::from_snapshot(snapshot)
        .map_err(|error| StartupError::Backend(format!("demo corpus: {error}")))?;
    index.replica().set_approximate_min_records(settings.approximate_min_records);
    tracing::info!("mock mode: serving the bundled demo corpus (tenants demo, acme)");
    Ok((Arc::new(index), fallback))
}

/// The tuning files (themes, boosting.yaml, synonyms), read once each and checked: one present
/// but unusable (a themes file that does not parse or defines no theme, a boosting.yaml that
/// holds nothing or lacks a section, a value that would be ignored, a synonyms file unreadable or
/// with a malformed line, a file over `RETR_CONFIG_MAX_FILE_BYTES` or not a regular file) stops
/// start-up, naming the setting and the file, instead of running silently without what it says.
/// Returns the tuning and the settings whose file is absent.
pub(crate) fn load_config_files(settings: &Settings) -> Result<(retrieval_engine::Tuning, Vec<String>), StartupError> {
    let files = settings.tuning_files();
    files.load(None).map_err(|problems| {
        let paths = [
            ("RETR_THEMES_PATH", &files.themes),
            ("RETR_BOOSTING_PATH", &files.boosting),
            ("RETR_SYNONYMS_DIR", &files.synonyms),
        ];
        let named = paths
            .iter()
            .filter(|(setting, _)| problems.iter().any(|problem| problem.starts_with(setting)))
            .map(|(setting, path)| format!("  {setting} is {}", path.display()))
            .collect::<Vec<_>>();
        StartupError::Backend(format!(
            "the config files cannot be used, so the service does not start:\n  {}\n{}",
            problems.join("\n  "),
            named.join("\n")
        ))
    })
}

/// The LLM theme router: chat completions at the rerank endpoint, when one is configured.
pub(crate) fn build_llm_router(
    settings: &Settings,
    metrics: Option<Arc<Metrics>>,
) -> Option<Arc<retrieval_engine::LlmRouter>> {
    if settings.rerank_api_base.is_empty() || settings.rerank_backend != crate::config::RerankBackend::Chat {
        return None;
    }
    let timeout = Duration::from_secs_f64(settings.theme_router_timeout_seconds);
    match retrieval_engine::LlmRouter::new(
        &settings.rerank_api_base,
        &settings.rerank_model,
        settings.rerank_api_key.clone(),
        timeout,
    ) {
        Ok(router) => Some(Arc::new(router.with_metrics(metrics))),
        Err(error) => {
            tracing::warn!(%error, "llm theme router unavailable; llm mode will use the heuristic");
            None
        }
    }
}

/// Assembles the shared state from settings and ready-made parts (tests inject their own index).
pub fn state_with(settings: Settings, index: Arc<dyn VectorIndex>, embedder: Arc<dyn Embedder>) -> AppState {
    let metrics = Arc::new(Metrics::new());
    let reranker = build_reranker(&settings, &metrics);
    let tuning = load_config_files_leniently(&settings);
    state_from_parts(settings, index, embedder, reranker, metrics, tuning)
}

/// The tuning files as they are, a problem logged and what it affects left out (the states the
/// tests build; `serve` refuses to start on a problem: `load_config_files`).
fn load_config_files_leniently(settings: &Settings) -> (retrieval_engine::Tuning, Vec<String>) {
    let (tuning, missing) = settings.tuning_files().load_leniently();
    for setting in &missing {
        tracing::warn!(setting = %setting, "optional config file missing; running without it");
    }
    (tuning, missing)
}

fn build_reranker(settings: &Settings, metrics: &Arc<Metrics>) -> Arc<dyn retrieval_engine::Reranker> {
    retrieval_engine::build_reranker(&settings.rerank_client(), Some(Arc::clone(metrics))).unwrap_or_else(|error| {
        tracing::warn!(%error, "rerank client unavailable; reranking will report a degradation");
        Arc::new(retrieval_engine::NoopReranker)
    })
}

/// `state_with` recording into `metrics` (give the embedder the same, as `build_state` does).
pub fn state_with_metrics(
    settings: Settings,
    index: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    metrics: Arc<Metrics>,
) -> AppState {
    let reranker = build_reranker(&settings, &metrics);
    let tuning = load_config_files_leniently(&settings);
    state_from_parts(settings, index, embedder, reranker, metrics, tuning)
}

/// The state over ready-made parts, recording into `metrics` (the clients built for it too).
fn state_from_parts(
    settings: Settings,
    index: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    reranker: Arc<dyn retrieval_engine::Reranker>,
    metrics: Arc<Metrics>,
    (tuning, missing_config): (retrieval_engine::Tuning, Vec<String>),
) -> AppState {
    let learned = Arc::new(LearnedRerankers::new(settings.feedback_dir.clone()));
    let search = SearchService::new(index, embedder, settings.runtime())
        .with_learned_rerankers(learned)
        .with_tuning(tuning, missing_config)
        .with_llm_router(build_llm_router(&settings, Some(Arc::clone(&metrics))))
        .with_reranker(reranker, Duration::from_secs_f64(settings.rerank_timeout_seconds))
        .with_metrics(Arc::clone(&metrics))
        .with_limits(settings.max_query_chars, settings.embedding_dimension)
        .with_version_wait(Duration::from_secs_f64(settings.index_version_wait_seconds))
        .with_tenant_scope(settings.tenant_scope());
    // A key file that cannot be read or parsed fails closed: no key is accepted. (`serve` never
    // gets here with such a file: `load_settings` reports it at start-up.)
    let api_keys = crate::api::auth::ApiKeys::load(&settings.api_keys).unwrap_or_else(|error| {
        tracing::error!(%error, "RETR_API_KEYS unusable: every data request will be refused");
        crate::api::auth::ApiKeys::deny_all()
    });
    // Like the key file: one that cannot be used names no knowledge base (`serve` never gets here
    // with such a file).
    let dify = crate::api::dify::KnowledgeBases::load(&settings.dify_knowledge_bases).unwrap_or_else(|error| {
        tracing::error!(%error, "RETR_DIFY_KNOWLEDGE_BASES unusable: every Dify request will be refused");
        crate::api::dify::KnowledgeBases::none()
    });
    let feedback =
        settings.feedback_dir.as_ref().and_then(|dir| match FeedbackStore::open(dir, settings.feedback_limits()) {
            Ok(store) => Some(Arc::new(store)),
            Err(error) => {
                tracing::error!(%error, "RETR_FEEDBACK_DIR unusable: feedback is off");
                None
            }
        });
    AppState {
        feedback,
        degraded_since_start: None,
        openapi: Arc::default(),
        reloads: Arc::default(),
        dify: Arc::new(dify),
        api_keys: Arc::new(api_keys),
        rerank_configured: !settings.rerank_api_base.is_empty(),
        in_flight: Arc::new(tokio::sync::Semaphore::new(settings.max_in_flight_requests)),
        settings: Arc::new(settings),
        search: Arc::new(search),
        metrics,
    }
}

/// Reads the learned re-rankers' files again every `RETR_INDEX_RELOAD_INTERVAL_MS` (at least
/// every second), so a model `learn` wrote is used by the next searches without a restart.
fn spawn_reranker_refresher(state: &AppState) {
    let rerankers = Arc::clone(state.search.learned_rerankers());
    let interval = Duration::from_millis(state.settings.index_reload_interval_ms.clamp(100, 1000));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let rerankers = Arc::clone(&rerankers);
            let _ = tokio::task::spawn_blocking(move || rerankers.refresh()).await;
        }
    });
}

/// The state `serve` runs on: every outbound client records its calls in the state's metrics.
pub async fn build_state(settings: Settings) -> Result<AppState, StartupError> {
    build_state_with_metrics(settings, Arc::new(Metrics::new())).await
}

/// `build_state` recording into `metrics` (made before the state: the log writer counts its
/// dropped lines there from the first line on).
pub async fn build_state_with_metrics(settings: Settings, metrics: Arc<Metrics>) -> Result<AppState, StartupError> {
    let tuning = load_config_files(&settings)?;
    for setting in &tuning.1 {
        tracing::warn!(setting = %setting, "optional config file missing; running without it");
    }
    let mut embedder = build_embedder(&settings, Some(Arc::clone(&metrics)))?;
    let mut degraded_since_start = None;
    let index = if settings.backend() == VectorBackend::Memory && settings.index_path.is_none() {
        let (index, fallback) = build_demo_index(&settings, embedder.as_ref()).await?;
        if let Some(reason) = fallback {
            // The corpus's vectors are pseudo-embeddings: so must every query's be.
            embedder = Arc::new(retrieval_engine::PseudoCorpus::new(reason.clone()));
            degraded_since_start = Some(reason);
        }
        index
    } else {
        build_index(&settings, embedder.as_ref(), Some(Arc::clone(&metrics))).await?
    };
    let reranker = build_reranker(&settings, &metrics);
    let mut state = state_from_parts(settings, index, embedder, reranker, metrics, tuning);
    state.degraded_since_start = degraded_since_start;
    if state.settings.feedback_dir.is_some() {
        spawn_reranker_refresher(&state);
    }
    // Start-up names the first such knowledge base.
    if let Some(problem) = state.dify.themes_missing_from(&state.search.theme_list()).into_iter().next() {
        return Err(StartupError::Backend(problem));
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks of the files the HTTP layer reads run beside the settings' own, so one attempt
    /// reports both kinds of problem.
    #[test]
    fn load_settings_reports_the_settings_and_the_key_file_together() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys.txt");
        std::fs::write(&keys, "short: t1\n").unwrap();
        let env: std::collections::HashMap<String, String> = [
            ("RETR_API_KEYS".to_string(), keys.display().to_string()),
            ("RETR_MAX_RESULTS".to_string(), "51".to_string()),
        ]
        .into();
        let error = load_settings(None, &env).unwrap_err().to_string();
        assert!(error.contains("RETR_MAX_RESULTS") && error.contains("RETR_API_KEYS"), "{error}");
        assert!(error.contains("line 1"), "{error}");
        // `Settings::load` alone knows nothing of the key file.
        let error = Settings::load(None, &env).unwrap_err().to_string();
        assert!(error.contains("RETR_MAX_RESULTS") && !error.contains("RETR_API_KEYS"), "{error}");
    }
}
