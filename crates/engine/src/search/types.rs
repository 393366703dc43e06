//! Search requests and responses as the pipeline sees them (also the JSON shapes of the API).

use super::tenant::TenantId;
use crate::model::{Level, Metadata};
use crate::router::{Clarification, RoutingResult, UserMetadata};
use serde::{Deserialize, Serialize};

/// Metadata filters of a search request; every field narrows the result when set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFilters {
    #[schema(schema_with = super::schema::tag_value)]
    pub(crate) product: Option<String>,
    #[schema(schema_with = super::schema::tag_value)]
    pub(crate) version: Option<String>,
    #[serde(default)]
    #[schema(schema_with = super::schema::tags)]
    pub(crate) tags: Vec<String>,
    #[schema(schema_with = super::schema::id_list)]
    pub(crate) doc_ids: Option<Vec<String>>,
    #[schema(schema_with = super::schema::id_list)]
    pub(crate) section_ids: Option<Vec<String>>,
}

/// `POST /internal/retrieval/search`. Unknown fields are rejected so that a misspelt filter
/// never silently widens a search.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    #[schema(schema_with = super::schema::query)]
    pub query: String,
    #[schema(schema_with = super::schema::tenant_id)]
    pub tenant_id: super::TenantId,
    #[schema(minimum = 1, maximum = 9223372036854775807i64)]
    pub max_results: Option<i64>,
    /// `null` is absent too (the strict parser reads it as `{}`).
    #[serde(default)]
    #[schema(nullable)]
    pub filters: SearchFilters,
    #[schema(schema_with = super::schema::id_list)]
    pub doc_ids: Option<Vec<String>>,
    #[schema(schema_with = super::schema::id_list)]
    pub section_ids: Option<Vec<String>>,
    pub enable_filters: Option<bool>,
    pub rerank_enabled: Option<bool>,
    #[schema(schema_with = super::schema::trace_id)]
    pub trace_id: Option<String>,
    #[serde(default, deserialize_with = "strict_user_metadata")]
    #[schema(value_type = Option<StrictUserMetadata>)]
    pub user_metadata: Option<UserMetadata>,
    #[serde(default)]
    pub include_steps: bool,
    #[serde(default)]
    pub explain: bool,
    #[schema(schema_with = super::schema::query_embedding)]
    pub query_embedding: Option<Vec<f32>>,
    /// A theme chosen by the user after a clarification: the search is filtered to it.
    pub theme: Option<String>,
    /// This search's theme router mode instead of the runtime setting (`llm` needs a chat endpoint).
    pub router_mode: Option<crate::router::RouterMode>,
    /// This search's doc gate instead of the runtime `doc_top_k` (1–1000).
    #[schema(minimum = 1, maximum = 1000)]
    pub doc_top_k: Option<i64>,
    /// This search's section step instead of the runtime `section_top_k` (1–1000).
    #[schema(minimum = 1, maximum = 1000)]
    pub section_top_k: Option<i64>,
    /// This search's hits per doc instead of the runtime `topk_per_doc` (1–50).
    #[schema(minimum = 1, maximum = 50)]
    pub topk_per_doc: Option<i64>,
    /// Read-your-writes: answer only from an index at least this version (what `ingest`
    /// printed); the service waits up to `RETR_INDEX_VERSION_WAIT_SECONDS` for it, then answers
    /// 503 `index_not_ready`. A string of digits (versions exceed JavaScript's safe integers).
    #[schema(pattern = "^[0-9]{1,19}$")]
    pub min_index_version: Option<String>,
    /// Metadata conditions every hit must pass, whatever `enable_filters` says. Not part of the
    /// `/search` body: the Dify endpoint sets it (its `metadata_condition` and the knowledge
    /// base's fixed filter).
    #[serde(skip)]
    pub condition: Option<std::sync::Arc<crate::index::condition::MetadataCondition>>,
}

impl SearchRequest {
    /// A request for `query` in `tenant_id` with every option at its default.
    pub fn new(tenant_id: super::TenantId, query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            tenant_id,
            max_results: None,
            filters: SearchFilters::default(),
            doc_ids: None,
            section_ids: None,
            enable_filters: None,
            rerank_enabled: None,
            trace_id: None,
            user_metadata: None,
            include_steps: false,
            explain: false,
            query_embedding: None,
            theme: None,
            router_mode: None,
            doc_top_k: None,
            section_top_k: None,
            topk_per_doc: None,
            min_index_version: None,
            condition: None,
        }
    }
}

/// `user_metadata` as the request spells it: unknown fields are rejected here too (a
/// `{"tenant_id": …}` inside it must not pass silently).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UserMetadata)]
struct StrictUserMetadata {
    role: Option<String>,
    product: Option<String>,
    platform: Option<String>,
}

fn strict_user_metadata<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<UserMetadata>, D::Error> {
    Ok(Option::<StrictUserMetadata>::deserialize(deserializer)?.map(|m| UserMetadata {
        role: m.role,
        product: m.product,
        platform: m.platform,
    }))
}

/// Topic and location fields of a hit (never the raw text).
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct HitMetadata {
    pub url: String,
    pub source: String,
    pub product: String,
    pub version: String,
    pub tags: Vec<String>,
    pub domain: String,
    pub section: String,
    pub platform: String,
    pub role: String,
    pub page_type: String,
    pub heading: String,
    pub heading_path: Vec<String>,
    pub(crate) page: u32,
    pub(crate) chunk_index: u32,
    pub theme_label: Option<String>,
}

/// One result. By contract it never carries the record's text.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct RetrievalHit {
    pub id: String,
    pub level: Level,
    pub doc_id: String,
    pub section_id: Option<String>,
    pub chunk_id: Option<String>,
    pub title: String,
    pub(crate) summary: String,
    /// The final ranking score: the fused relevance after boosts (may exceed 1).
    pub score: f32,
    /// The fused dense+lexical relevance normalised to [0, 1], before boosts; `min_score` applies to it.
    pub relevance: f32,
    pub metadata: HitMetadata,
    /// How the score was made (`explain: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Explain>)]
    pub(crate) explain: Option<serde_json::Value>,
}

/// The schema of `RetrievalHit::explain` (built by `Ranked::explain`; a test keeps the two equal).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Explain {
    pub(crate) dense_rank: Option<usize>,
    pub(crate) dense_score: Option<f32>,
    pub(crate) lexical_rank: Option<usize>,
    pub(crate) lexical_score: Option<f32>,
    pub(crate) fused_score: f32,
    pub(crate) fused_normalized: f32,
    /// The boosting rules in the order applied, each with `multiply` or `add`.
    pub(crate) boosts: Vec<ExplainBoost>,
    pub(crate) rerank_score: Option<f32>,
    /// What the page's second-best ranked section added to a section's score
    /// (`cascade.second_section_weight` of boosting.yaml); null at the other levels.
    pub(crate) page_evidence: Option<f32>,
    pub(crate) padded: bool,
    pub(crate) final_score: f32,
}

/// One boosting rule's effect in `Explain::boosts`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ExplainBoost {
    pub(crate) rule: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) multiply: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) add: Option<f32>,
}

impl RetrievalHit {
    pub(crate) fn from_metadata(id: &str, level: Level, meta: &Metadata, score: f32) -> Self {
        Self {
            id: id.to_string(),
            level,
            doc_id: meta.doc_id.to_string(),
            section_id: meta.section_id.clone(),
            chunk_id: meta.chunk_id.clone(),
            title: meta.title.to_string(),
            summary: meta.summary.to_string(),
            score,
            relevance: score,
            metadata: HitMetadata {
                url: meta.url.to_string(),
                source: meta.source.to_string(),
                product: meta.product.to_string(),
                version: meta.version.to_string(),
                tags: meta.tags.clone(),
                domain: meta.domain.to_string(),
                section: meta.section.to_string(),
                platform: meta.platform.to_string(),
                role: meta.role.to_string(),
                page_type: meta.page_type.to_string(),
                heading: meta.heading.clone(),
                heading_path: meta.heading_path.clone(),
                page: meta.page,
                chunk_index: meta.chunk_index,
                theme_label: None,
            },
            explain: None,
        }
    }
}

/// The intermediate hits of each cascade stage (`include_steps: true`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Steps {
    pub(crate) docs: Vec<RetrievalHit>,
    pub(crate) sections: Vec<RetrievalHit>,
    pub(crate) chunks: Vec<RetrievalHit>,
    /// Doc ids added by `min_docs` padding rather than by similarity.
    pub(crate) padded_doc_ids: Vec<String>,
    pub(crate) fallback_used: bool,
}

/// Something that went wrong but did not fail the search, so callers can judge the result.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Degradation {
    pub code: String,
    pub(crate) message: String,
}

impl Degradation {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self { code: code.to_string(), message: message.into() }
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SearchResponse {
    pub hits: Vec<RetrievalHit>,
    /// `section` or `chunk`: which level the hits come from (`none` when there are no hits).
    pub hits_level: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) steps: Option<Steps>,
    pub trace_id: Option<String>,
    pub(crate) took_ms: f64,
    /// The version of the index this answer was read from (absent for a fixed snapshot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) index_version: Option<String>,
    pub degradations: Vec<Degradation>,
    /// The theme router's result and whether it filtered.
    pub routing: RoutingInfo,
    /// Present when the query is ambiguous and the top hits span several themes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clarification: Option<Clarification>,
    /// The probability that the first hit answers the question, in [0, 1] (0 without hits):
    /// a calibrated estimate an orchestrator can compare with a threshold to say "I don't know"
    /// instead of answering from the wrong page.
    pub(crate) confidence: f32,
    /// What `confidence` was computed from (`eval` fits the model on them); not serialised.
    #[serde(skip)]
    pub(crate) confidence_features: Option<super::confidence::Features>,
    /// How strongly the hits split across themes (the routing step's split ratio) when the question named
    /// none; `eval` fits `router.ambiguity_min_ratio` on it. Not serialised.
    #[serde(skip)]
    pub(crate) split_ratio: Option<f32>,
    /// Learned themes ranked by the question's words: the best one's probability (`eval` fits
    /// `router.learned_named_probability` on it). Not serialised.
    #[serde(skip)]
    pub(crate) words_probability: Option<f32>,
}

impl SearchResponse {
    /// `confidence`: the probability that the first hit answers the question, in [0, 1].
    pub fn confidence(&self) -> f32 {
        self.confidence
    }
}

/// The routing part of a search response.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RoutingInfo {
    #[serde(flatten)]
    pub(crate) result: RoutingResult,
    /// True when the hits were restricted to the primary theme's metadata (hard filter).
    pub(crate) filter_applied: bool,
    /// The theme chosen by the caller (request field `theme`), which always filters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chosen_theme: Option<String>,
}

/// Window request after validation.
#[derive(Debug, Clone)]
pub struct WindowQuery {
    pub tenant_id: TenantId,
    pub doc_id: String,
    pub anchor_chunk_id: String,
    pub before: usize,
    pub after: usize,
}
