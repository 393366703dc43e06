//! Rerankers: the `Reranker` trait, the no-op reranker and `build_reranker`; the chat-completions
//! (`chat.rs`) and dedicated rerank-API (`rerank_api.rs`) clients live beside it, and `merge.rs`
//! turns any answer into a complete reordering of the original candidates.

mod build;
pub(crate) mod chat;
pub(crate) mod client;
pub(crate) mod merge;
pub(crate) mod rerank_api;
mod reranker;

pub use build::build_reranker;
pub use chat::ChatReranker;
pub use client::RerankClientConfig;
pub use merge::merge_rerank;
pub use rerank_api::RerankApiReranker;
pub(crate) use reranker::Result;
pub use reranker::{
    NoopReranker, RerankBackend, RerankCandidate, RerankClientSettings, RerankError, RerankErrorKind, RerankScore,
    Reranker,
};
