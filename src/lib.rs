//! Retrieval Service: hybrid doc→section→chunk search over product documentation. The HTTP
//! service, the CLI commands and the settings around the engine crate (`retrieval_engine`).
//!
//! The public surface is what the binary (`main.rs`), the integration tests, benches and examples
//! use: the modules below and [`app`] with [`AppState`]; `unreachable_pub` (a workspace lint, in
//! the root Cargo.toml) flags a `pub` item they cannot reach. Engine items are named by their own
//! crate (`retrieval_engine::SearchService`), never through a module alias here.

mod api;
pub mod config;
pub(crate) mod error;
pub mod eval;
pub mod ingest;
pub mod learn;
pub mod log_writer;
pub mod server;
pub mod startup;

/// Reloads the themes, boosting and synonyms files (`POST /internal/retrieval/config/reload`; the
/// binary on SIGHUP).
pub use api::config::reload_tuning;
/// The strict JSON parser every request body goes through (the benches time it).
pub use api::extract::parse_strict;
/// Whether an `x-request-id` is one the service echoes (else it makes its own).
pub use api::is_valid_request_id;
/// What every handler shares (`api::state`).
pub use api::state::AppState;

/// The service's router (see `api::router`).
pub fn app(state: AppState) -> axum::Router {
    api::router(state)
}
