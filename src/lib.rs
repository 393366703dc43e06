//! Retrieval Service: hybrid doc→section→chunk search over product documentation.

pub mod api;
pub mod config;
pub mod embed;
pub mod error;
pub mod eval;
#[doc(hidden)]
pub mod fixtures;
pub mod index;
pub mod ingest;
pub mod metrics;
pub mod model;
pub mod rerank;
pub mod router;
pub mod search;
pub mod server;
pub mod startup;
pub mod state;
pub mod text;
pub mod upstream;

pub use state::AppState;

/// The service's router (see `api::router`).
pub fn app(state: AppState) -> axum::Router {
    api::router(state)
}
