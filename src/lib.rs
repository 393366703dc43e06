//! Retrieval Service: hybrid doc→section→chunk search over product documentation. The HTTP
//! service, the CLI commands and the settings around the engine crate (`retrieval_engine`).

pub mod api;
pub mod config;
pub mod error;
pub mod eval;
pub mod ingest;
pub mod log_writer;
pub mod server;
pub mod startup;
pub mod state;

// The engine's modules under their old paths (`crate::index::…`, `retrieval_service::search::…`).
// `eval` and `ingest` are the service's own modules: the engine's, plus the commands' wiring.
#[cfg(any(test, feature = "test-support"))]
pub use retrieval_engine::fixtures;
pub use retrieval_engine::{embed, index, metrics, model, rerank, router, scope, search, secret, text, upstream, yaml};

pub use state::AppState;

/// The service's router (see `api::router`).
pub fn app(state: AppState) -> axum::Router {
    api::router(state)
}
