//! `AppState`: everything handlers share, built once at start-up (no globals).
//!
//! Part of the HTTP layer: the axum `State` of the handlers, holding values of that layer (the API
//! key store, the Dify knowledge bases, the OpenAPI document cache, the config reload slot), taken
//! from the `api` files that define them and import no `AppState` (`api::keys`,
//! `api::dify::knowledge`, `api::openapi::document_cache`, `api::reload`), so no import runs in a circle.
//! It lives in `api/` so that `api` and the state it holds are one module: `server` and `startup`
//! (which builds it) import it as `crate::AppState` (re-exported by `lib.rs`); nothing below the
//! HTTP layer (search and the engine's parts) may import it.

use crate::config::Settings;
use retrieval_engine::SearchService;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub(crate) settings: Arc<Settings>,
    pub search: Arc<SearchService>,
    /// Every metric of `/metrics`; the search service records into the same one.
    pub(crate) metrics: Arc<retrieval_engine::Metrics>,
    /// Whether a rerank endpoint exists, so `/config` can refuse to enable reranking without one.
    pub(crate) rerank_configured: bool,
    /// Permits for requests in progress (`RETR_MAX_IN_FLIGHT_REQUESTS`); none left → 503.
    pub(crate) in_flight: Arc<tokio::sync::Semaphore>,
    /// Tenant-scoped API keys (`RETR_API_KEYS`); disabled when no file is configured.
    pub(crate) api_keys: Arc<crate::api::keys::ApiKeys>,
    /// The knowledge bases of the Dify endpoint (`RETR_DIFY_KNOWLEDGE_BASES`).
    pub(crate) dify: Arc<crate::api::dify::knowledge::KnowledgeBases>,
    /// The OpenAPI document, built once (per index dimension) and served as bytes.
    pub(crate) openapi: Arc<crate::api::openapi::document_cache::DocumentCache>,
    /// Why every answer is degraded from start-up on (mock mode's demo corpus embedded with
    /// pseudo-embeddings because the embedding server was down); `/health` says it.
    pub(crate) degraded_since_start: Option<String>,
    /// The config reload in progress: one at a time.
    pub(crate) reloads: Arc<crate::api::reload::ReloadSlot>,
    /// The tenants' feedback logs (`RETR_FEEDBACK_DIR`); none when feedback is off.
    pub(crate) feedback: Option<Arc<retrieval_engine::FeedbackStore>>,
}
