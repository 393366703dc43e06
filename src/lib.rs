//! Retrieval Service: hybrid doc→section→chunk search over product documentation.

pub mod api;
pub mod config;
pub mod embed;
pub mod error;
pub mod eval;
/// Test support: the fixture corpus (unit tests, and the integration tests through the
/// `test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
pub mod index;
pub mod ingest;
pub mod log_writer;
pub mod metrics;
pub mod model;
pub mod rerank;
pub mod router;
pub mod scope;
pub mod search;
pub mod secret;
pub mod server;
pub mod startup;
pub mod state;
pub mod text;
pub mod upstream;
pub mod yaml;

pub use state::AppState;

/// The service's router (see `api::router`).
pub fn app(state: AppState) -> axum::Router {
    api::router(state)
}
