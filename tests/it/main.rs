//! The integration tests, as one test binary (one link of the crate instead of one per file):
//! each file is a module. `cargo test --test it <module>::` runs one module's tests.

mod common;

mod api;
mod atomic_ingest;
mod backends;
mod boosting_config;
mod chroma_backend;
mod chroma_writer;
mod config_reload;
mod degradation;
mod dify;
mod dify_client;
mod e2e_readme;
mod embed_contract;
mod embed_e2e;
mod eval;
mod feedback;
mod hardening;
mod health;
mod ingest;
mod logs;
mod mcp;
mod postgres_backend;
mod reload;
mod rerank_contract;
mod router;
mod scenarios;
mod secrets;
mod server;
mod sharding;
mod ui;
mod upstream_contract;
