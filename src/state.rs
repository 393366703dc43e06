//! `AppState`: everything handlers share, built once at start-up (no globals).

use crate::config::Settings;
use crate::search::SearchService;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub search: Arc<SearchService>,
    /// Every metric of `/metrics`; the search service records into the same one.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Whether a rerank endpoint exists, so `/config` can refuse to enable reranking without one.
    pub rerank_configured: bool,
    /// Permits for requests in progress (`RETR_MAX_IN_FLIGHT_REQUESTS`); none left → 503.
    pub in_flight: Arc<tokio::sync::Semaphore>,
    /// Tenant-scoped API keys (`RETR_API_KEYS`); disabled when no file is configured.
    pub api_keys: Arc<crate::api::auth::ApiKeys>,
    /// The knowledge bases of the Dify endpoint (`RETR_DIFY_KNOWLEDGE_BASES`).
    pub dify: Arc<crate::api::dify::KnowledgeBases>,
    /// The OpenAPI document, built once (per index dimension) and served as bytes.
    pub openapi: Arc<crate::api::openapi::DocumentCache>,
}
