//! Start-up wiring: settings → backends → `AppState`. Shared by `main` and the end-to-end tests.

use crate::api::metrics::HttpMetrics;
use crate::config::{Settings, VectorBackend};
use crate::embed::{Embedder, PseudoEmbedder};
use crate::index::{InMemoryIndex, VectorIndex};
use crate::search::{SearchCounters, SearchService};
use crate::state::AppState;
use std::sync::{Arc, RwLock};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("{0}")]
    Backend(String),
}

/// The query/passage embedder the settings select.
pub fn build_embedder(settings: &Settings) -> Arc<dyn Embedder> {
    Arc::new(PseudoEmbedder::new(settings.embedding_dimension))
}

/// The topic mapping rules: `RETR_MAPPING_PATH` when the file exists, else the built-in default.
pub fn load_mapping(settings: &Settings) -> Result<crate::ingest::mapping::MappingRules, StartupError> {
    if settings.mapping_path.exists() {
        crate::ingest::mapping::MappingRules::from_file(&settings.mapping_path)
            .map_err(|error| StartupError::Backend(format!("RETR_MAPPING_PATH: {error}")))
    } else {
        Ok(crate::ingest::mapping::MappingRules::builtin())
    }
}

/// Builds the index the settings select. Must run inside a tokio runtime (starts the reloader).
pub async fn build_index(settings: &Settings, embedder: &dyn Embedder) -> Result<Arc<dyn VectorIndex>, StartupError> {
    match settings.backend() {
        VectorBackend::Memory => match &settings.index_path {
            Some(path) => {
                let index = Arc::new(InMemoryIndex::from_file(path.clone()));
                index.spawn_reloader(Duration::from_millis(settings.index_reload_interval_ms));
                Ok(index)
            }
            None => {
                let mapping = load_mapping(settings)?;
                let snapshot = crate::ingest::demo::demo_snapshot(embedder, &mapping)
                    .await
                    .map_err(|error| StartupError::Backend(format!("cannot build the demo corpus: {error}")))?;
                let index = InMemoryIndex::from_snapshot(snapshot)
                    .map_err(|error| StartupError::Backend(format!("demo corpus: {error}")))?;
                tracing::info!("mock mode: serving the bundled demo corpus (tenants demo, acme)");
                Ok(Arc::new(index))
            }
        },
        VectorBackend::Chroma => Err(StartupError::Backend("the chroma backend is not built yet".into())),
    }
}

/// Assembles the shared state from settings and ready-made parts (tests inject their own index).
pub fn state_with(settings: Settings, index: Arc<dyn VectorIndex>, embedder: Arc<dyn Embedder>) -> AppState {
    let search = SearchService {
        index,
        embedder,
        runtime: Arc::new(RwLock::new(settings.runtime())),
        counters: Arc::new(SearchCounters::default()),
        max_query_chars: settings.max_query_chars,
        default_dimension: settings.embedding_dimension,
    };
    AppState {
        rerank_configured: !settings.rerank_api_base.is_empty(),
        settings: Arc::new(settings),
        search: Arc::new(search),
        http_metrics: Arc::new(HttpMetrics::default()),
    }
}

pub async fn build_state(settings: Settings) -> Result<AppState, StartupError> {
    let embedder = build_embedder(&settings);
    let index = build_index(&settings, embedder.as_ref()).await?;
    Ok(state_with(settings, index, embedder))
}
