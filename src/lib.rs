//! Retrieval Service: hybrid doc→section→chunk search over product documentation.

pub mod config;
pub mod embed;
pub mod eval;
pub mod index;
pub mod model;
pub mod rerank;
pub mod search;
pub mod text;
