//! The retrieval engine: hybrid doc→section→chunk search over product documentation, without the
//! HTTP service around it. The index (in memory or over Chroma), the search pipeline, the theme
//! routers, the embedding and rerank clients, the ingest pipeline and the evaluation logic.
//!
//! This crate does not know the service (`retrieval-service`): no HTTP server, no CLI, no
//! process-wide settings. What a part needs from the configuration it takes as its own small
//! settings type (`embed::EmbeddingClientSettings`, `rerank::RerankClientSettings`,
//! `index::chroma::ChromaSettings`, `search::settings::RuntimeSettings`, …), which the service
//! builds from its `Settings`.
//!
//! The public surface is what other crates use (the service, its binary, tests, benches and
//! examples); everything else is `pub(crate)` or private, and `unreachable_pub` (a workspace lint,
//! in the root Cargo.toml) flags a `pub` item no other crate can reach.

pub mod embed;
pub mod eval;
pub mod feedback;
/// Test support: the fixture corpus (unit tests, and the service's tests through the
/// `test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
pub mod index;
pub mod ingest;
pub mod learn;
pub mod metrics;
pub mod model;
pub mod rerank;
pub mod router;
pub mod scope;
pub mod search;
pub mod secret;
pub mod shared_str;
pub mod text;
pub mod upstream;
pub mod yaml;
