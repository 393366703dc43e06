//! The search: a request checked (`validate`), then run as named stages over one pinned source
//! (`stages`: route, expand, embed, retrieve — the cascade of `cascade`, each level's candidates
//! fused and boosted by `ranking` —, learned order, disambiguate, answer) by the `SearchService`
//! (`service`), which holds the index, the embedder, the tuning and the runtime settings.

pub(crate) mod boosting;
pub(crate) mod boosting_config;
pub(crate) mod browse;
pub(crate) mod cascade;
pub(crate) mod confidence;
pub(crate) mod error;
pub(crate) mod fusion;
pub(crate) mod learned;
mod learning;
mod limits;
pub(crate) mod prompt_context;
pub(crate) mod ranking;
pub(crate) mod rerank;
pub(crate) mod routing;
pub(crate) mod schema;
mod service;
pub(crate) mod settings;
pub(crate) mod stages;
pub(crate) mod synonyms;
pub(crate) mod tenant;
pub(crate) mod transliteration;
pub(crate) mod tuning;
pub(crate) mod types;
pub(crate) mod validate;

pub(crate) use error::Result;
pub use error::SearchError;
pub use limits::{is_blank, is_blank_char, validate_tenant, MAX_ID_LIST, MAX_TAG_CHARS};
pub use service::SearchService;
pub use tenant::TenantId;
pub use types::*;

#[cfg(test)]
mod tests;
