//! The retrieval engine: hybrid doc→section→chunk search over product documentation, without the
//! HTTP service around it. The index (in memory, over Chroma or PostgreSQL), the search pipeline,
//! the theme routers, the embedding and rerank clients, the ingest pipeline and the evaluation.
//!
//! This crate does not know the service (`retrieval-service`): no HTTP server, no CLI, no
//! process-wide settings. What a part needs from the configuration it takes as its own small
//! settings type ([`EmbeddingClientSettings`], [`RerankClientSettings`], [`ChromaSettings`],
//! [`RuntimeSettings`], …), which the service builds from its `Settings`.
//!
//! # The public surface
//!
//! Every module is private. What other crates use (the service, its binary, tests, benches and
//! examples) is re-exported here, by name, grouped by the part it comes from; a few parts with a
//! vocabulary of their own are public modules that re-export their own surface:
//!
//! - [`condition`]: metadata conditions a search filters on (the Dify endpoint builds them);
//! - [`eval`]: the offline evaluation behind the service's `eval` command;
//! - [`ingest`]: loading, splitting, embedding and writing pages (the `ingest` command);
//! - [`learn`]: a tenant's re-ranker learned from its feedback (the `learn` command);
//! - [`openapi`]: the OpenAPI schemas of request fields whose rules are the engine's validation;
//! - [`upstream`]: calls to upstream HTTP services (timeouts, retries, redaction);
//! - [`yaml`]: reading YAML files;
//! - `fixtures` (feature `test-support`): the corpus of the tests;
//! - `ceiling_probe` (feature `ceiling-probe`): the throughput probe of `bench/ceiling.sh`.
//!
//! `unreachable_pub` (a workspace lint, in the root Cargo.toml) flags a `pub` item no other crate
//! can reach, so a `pub` inside a module means "re-exported here".

mod embed;
pub mod eval;
mod feedback;
mod index;
pub mod ingest;
pub mod learn;
mod metrics;
mod model;
mod rerank;
mod router;
mod scope;
mod search;
mod secret;
mod shared_str;
mod text;
pub mod upstream;
pub mod yaml;

#[cfg(feature = "ceiling-probe")]
pub mod ceiling_probe;
/// Test support: the fixture corpus (unit tests, and the service's tests through the
/// `test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;

// Records and snapshots.
pub use model::{Level, Metadata, Record, Snapshot};
pub use scope::TenantScope;
pub use secret::Secret;
pub use text::terms;

// The index and its backends.
pub use index::chroma::ChangeScope;
pub use index::features::BoostCacheKey;
pub use index::file_index::file_version;
pub use index::lexical::{Bm25Index, Bm25Params};
pub use index::memory::{read_snapshot_file, rebuild_tenant, write_snapshot_file, LoadedIndex};
pub use index::partition::DEFAULT_MIN_RECORDS;
pub use index::postgres::{describe_url as describe_postgres_url, is_valid_url as is_valid_postgres_url};
pub use index::replica::SnapshotSource;
pub use index::{
    ChromaIndex, ChromaSettings, InMemoryIndex, IndexErrorKind, PostgresIndex, PostgresSearchIndex, PostgresSearchMode,
    PostgresSettings, RecordFilter, ScoredRecord, VectorIndex,
};

// Searching.
pub use search::boosting::{boost_and_keep_best, BoostContext, Boostable};
pub use search::boosting_config::{BoostingConfig, ConfigWarning, FusionMethod};
pub use search::fusion::{RankedList, ReciprocalRankFusion};
pub use search::prompt_context::{DEFAULT_CONTEXT_CHARS, MAX_CONTEXT_CHARS};
pub use search::ranking::{Ranked, RankingMode};
pub use search::settings::{RuntimeSettings, MAX_RESULTS_CAP};
pub use search::tuning::{Tuning, TuningFiles, DEFAULT_MAX_FILE_BYTES, THEMES_SETTING};
pub use search::{
    is_blank, is_blank_char, validate_tenant, Degradation, Explain, ExplainBoost, HitMetadata, RetrievalHit,
    RoutingInfo, SearchError, SearchFilters, SearchRequest, SearchResponse, SearchService, Steps, TenantId,
    WindowQuery, MAX_ID_LIST, MAX_TAG_CHARS,
};

// Theme routing and the prompt context.
pub use router::{
    build_clarification, format_context, infer_theme_label, parse_themes_yaml, route_heuristic, route_query,
    Clarification, ClarificationOption, ContextSource, LlmRouter, RouterConfig, RouterMode, RoutingResult, Theme,
    ThemeFields, ThemeSet, ThemesFile, ThemesProvider, UserMetadata, YamlThemesProvider, MULTI_THEME_RULE,
};

// Embedding and re-ranking clients.
pub use embed::{
    build_embedder, build_ingest_embedder, embed_query_with_fallback, EmbedError, EmbedErrorKind, Embedder,
    EmbeddingClientSettings, HttpEmbedder, HttpEmbedderConfig, InputKind, PseudoCorpus, PseudoEmbedder,
};
pub use rerank::{
    build_reranker, merge_rerank, ChatReranker, NoopReranker, RerankApiReranker, RerankBackend, RerankCandidate,
    RerankClientConfig, RerankClientSettings, RerankError, RerankErrorKind, RerankScore, Reranker,
};

// Feedback and metrics.
pub use feedback::{now_ms, FeedbackLimits, FeedbackRecord, FeedbackStore, StoreError, Verdict, MAX_FEEDBACK_IDS};
pub use metrics::{method_label, Metrics, METRICS_CONTENT_TYPE};

/// Metadata conditions: clauses over the records' metadata fields that every hit of a search must
/// pass (`SearchRequest::condition`).
pub mod condition {
    pub use crate::index::condition::{
        unix_seconds, Clause, Comparison, Field, Logic, MetadataCondition, Number, Test, ValueList,
    };
}

/// The OpenAPI schemas of request fields whose rules are the engine's validation constants, for
/// the service's request types (the engine's own types use them through `schema_with`).
pub mod openapi {
    pub use crate::search::schema::{id, query, tenant_id, tenant_id_pattern};
}
