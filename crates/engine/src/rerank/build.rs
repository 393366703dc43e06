//! `build_reranker`: the reranker the settings select.

use super::{
    ChatReranker, NoopReranker, RerankApiReranker, RerankBackend, RerankClientConfig, RerankClientSettings, Reranker,
    Result,
};
use std::sync::Arc;

/// The reranker the settings select: `NoopReranker` when `api_base` is empty, otherwise the
/// `backend` client (chat completions or a dedicated `/rerank` API).
pub fn build_reranker(
    settings: &RerankClientSettings,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) -> Result<Arc<dyn Reranker>> {
    if settings.api_base.trim().is_empty() {
        return Ok(Arc::new(NoopReranker));
    }
    let config = RerankClientConfig { metrics, ..RerankClientConfig::from_settings(settings) };
    Ok(match settings.backend {
        RerankBackend::Chat => Arc::new(ChatReranker::new(config)?),
        RerankBackend::RerankApi => Arc::new(RerankApiReranker::new(config)?),
    })
}
