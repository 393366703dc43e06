//! Embedders: the `Embedder` trait, the SHA256 pseudo-embedder, the OpenAI-compatible HTTP client
//! (`http.rs`), the query cache (`query_cache.rs`) and the query-time fallback (`fallback.rs`).

mod embedder;
pub(crate) mod fallback;
pub(crate) mod http;
pub(crate) mod pseudo;
pub(crate) mod query_cache;
mod settings;

pub(crate) use embedder::Result;
pub use embedder::{EmbedError, EmbedErrorKind, Embedder, InputKind};
pub use fallback::{build_embedder, build_ingest_embedder, embed_query_with_fallback, PseudoCorpus};
pub use http::{HttpEmbedder, HttpEmbedderConfig};
pub use pseudo::PseudoEmbedder;
pub use settings::EmbeddingClientSettings;
