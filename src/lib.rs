//! Retrieval Service: hybrid doc→section→chunk search over product documentation. The HTTP
//! service, the CLI commands and the settings around the engine crate (`retrieval_engine`).
//!
//! The public surface is what the binary (`main.rs`), the integration tests, benches and examples
//! use; `unreachable_pub` (a workspace lint, in the root Cargo.toml) flags a `pub` item they cannot
//! reach.

pub mod api;
pub mod config;
pub(crate) mod error;
pub mod eval;
pub mod ingest;
pub mod learn;
pub mod log_writer;
pub mod server;
pub mod startup;

// The engine's modules under short paths inside the service (`crate::index::…`); not re-exported:
// the binary, the tests and the benches name engine items by their own crate
// (`retrieval_engine::index::…`).
pub(crate) use retrieval_engine::{
    embed, index, metrics, model, rerank, router, scope, search, secret, upstream, yaml,
};

// `AppState` is the HTTP layer's (`api::state`); `crate::state` and `retrieval_service::state`
// name it there.
pub use api::state;
pub use api::state::AppState;

/// The service's router (see `api::router`).
pub fn app(state: AppState) -> axum::Router {
    api::router(state)
}
