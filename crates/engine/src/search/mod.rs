//! The search pipeline: request validation, query embedding (with fallback), the cascade,
//! and the window lookup. Backend-agnostic: everything goes through `VectorIndex`.

pub(crate) mod boosting;
pub(crate) mod boosting_config;
pub(crate) mod browse;
pub(crate) mod cascade;
pub(crate) mod confidence;
pub(crate) mod error;
pub(crate) mod fusion;
pub(crate) mod learned;
pub(crate) mod prompt_context;
pub(crate) mod ranking;
pub(crate) mod rerank;
pub(crate) mod routing;
pub(crate) mod schema;
pub(crate) mod settings;
pub(crate) mod synonyms;
pub(crate) mod tenant;
pub(crate) mod transliteration;
pub(crate) mod tuning;
pub(crate) mod types;

pub(crate) use error::Result;
pub use error::SearchError;
pub use tenant::TenantId;
pub use types::*;

use crate::embed::{embed_query_with_fallback, Embedder, PseudoEmbedder};
use crate::index::{RecordFilter, VectorIndex};
use crate::metrics::Metrics;
use crate::model::Record;
use crate::rerank::Reranker;
use crate::router::RouterMode;
use crate::router::{route_query, LlmRouter, RoutingResult, ThemeLabels};
use boosting::BoostContext;
use boosting_config::BoostingConfig;
use ranking::{RankingContext, RankingMode};
use settings::{RuntimeSettings, MAX_RESULTS_CAP};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

pub(crate) use crate::model::MAX_TENANT_ID_CHARS;
/// Longest accepted id list in a filter: each list the caller sends, and their union.
pub const MAX_ID_LIST: usize = 1000;
/// Longest accepted id (doc, section or chunk id), in characters.
pub(crate) const MAX_ID_CHARS: usize = 1024;
/// Most tags in `filters.tags`, and the longest tag (also `product`, `version`) in characters.
pub(crate) const MAX_TAGS: usize = 100;
pub const MAX_TAG_CHARS: usize = 200;

/// Runs searches against one index with one embedder; shared by every handler through `AppState`.
/// Built with [`SearchService::new`] and the `with_*` setters; handlers use its methods.
pub struct SearchService {
    index: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    /// The themes, boosting and synonyms in use (replaced whole by a reload); a search reads
    /// them once.
    tuning: RwLock<Arc<tuning::Tuning>>,
    /// The files' state: missing ones, the last rejected reload, the reload count.
    tuning_status: RwLock<tuning::TuningStatus>,
    /// Per tenant: the themes it is routed over and its spellings, learned from its pages once
    /// per index version and tuning generation.
    learned: learned::LearnedPerTenant,
    llm_router: Option<Arc<LlmRouter>>,
    reranker: Arc<dyn Reranker>,
    rerank_timeout: std::time::Duration,
    runtime: RwLock<RuntimeSettings>,
    metrics: Arc<Metrics>,
    max_query_chars: usize,
    default_dimension: usize,
    /// How long a search waits for its `min_index_version`.
    version_wait: std::time::Duration,
    /// The tenants this instance serves (`RETR_TENANTS`).
    scope: crate::scope::TenantScope,
    /// Each tenant's re-ranker learned from its feedback (`crate::learn`), when it has one.
    learned_rerankers: Arc<crate::learn::LearnedRerankers>,
}

/// What a search does with the tenant's learned re-ranker.
enum LearnedUse<'a> {
    /// Re-orders the first candidates with it, when the tenant has one.
    Apply,
    /// Ignores it and hands every candidate's features to the learner.
    Collect(&'a mut Vec<crate::learn::Candidate>),
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

pub fn validate_tenant(tenant_id: &str) -> Result<()> {
    crate::model::validate_tenant_id(tenant_id).map_err(|message| SearchError::invalid("tenant_id", message))
}

/// Longest accepted `trace_id`, in characters.
pub(crate) const MAX_TRACE_ID_CHARS: usize = 256;

/// The characters that alone make a text blank: whitespace, control characters and invisible
/// format characters (zero-width spaces and joiners, direction marks, soft hyphens, variation
/// selectors, BOM, tag characters). [`is_blank`] and the OpenAPI document's `query` pattern
/// (`schema::query`) both read this table.
pub(crate) const BLANK_CHARS: [std::ops::RangeInclusive<char>; 18] = [
    '\u{0}'..='\u{20}',
    '\u{7F}'..='\u{A0}',
    '\u{AD}'..='\u{AD}',
    '\u{34F}'..='\u{34F}',
    '\u{61C}'..='\u{61C}',
    '\u{115F}'..='\u{1160}',
    '\u{1680}'..='\u{1680}',
    '\u{17B4}'..='\u{17B5}',
    '\u{180B}'..='\u{180F}',
    '\u{2000}'..='\u{200F}',
    '\u{2028}'..='\u{202F}',
    '\u{205F}'..='\u{206F}',
    '\u{3000}'..='\u{3000}',
    '\u{3164}'..='\u{3164}',
    '\u{FE00}'..='\u{FE0F}',
    '\u{FEFF}'..='\u{FEFF}',
    '\u{FFA0}'..='\u{FFA0}',
    '\u{E0000}'..='\u{E007F}',
];

/// Whether a text has nothing but [`BLANK_CHARS`].
pub fn is_blank(text: &str) -> bool {
    text.chars().all(is_blank_char)
}

/// Whether `c` is one of [`BLANK_CHARS`].
pub fn is_blank_char(c: char) -> bool {
    BLANK_CHARS.iter().any(|range| range.contains(&c))
}

/// Rejects a string longer than `max` characters without counting past the limit.
fn check_chars(field: &str, what: &str, value: &str, max: usize) -> Result<()> {
    if value.chars().nth(max).is_some() {
        return Err(SearchError::invalid(field, format!("{what} must be at most {max} characters")));
    }
    Ok(())
}

/// Checks an id (doc, section or chunk id) from a request: non-empty, at most `MAX_ID_CHARS`.
pub(crate) fn validate_id(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(SearchError::invalid(field, "must not be empty"));
    }
    check_chars(field, "an id", value, MAX_ID_CHARS)
}

/// The union of the caller's id lists, in first-seen order. Every list's length is checked
/// before anything is done with its entries, so an oversized list costs nothing but its parse.
fn id_list(field: &str, lists: &[Option<&[String]>]) -> Result<Option<Vec<String>>> {
    for list in lists.iter().flatten() {
        if list.len() > MAX_ID_LIST {
            return Err(SearchError::invalid(field, format!("at most {MAX_ID_LIST} ids, got {}", list.len())));
        }
    }
    let total: usize = lists.iter().flatten().map(|list| list.len()).sum();
    let mut seen: HashSet<&str> = HashSet::with_capacity(total);
    let mut merged: Vec<String> = Vec::with_capacity(total.min(MAX_ID_LIST));
    for value in lists.iter().flatten().flat_map(|list| list.iter()) {
        if value.is_empty() {
            return Err(SearchError::invalid(field, "ids must not be empty strings"));
        }
        check_chars(field, "an id", value, MAX_ID_CHARS)?;
        if seen.insert(value.as_str()) {
            merged.push(value.clone());
        }
    }
    if merged.len() > MAX_ID_LIST {
        return Err(SearchError::invalid(field, format!("at most {MAX_ID_LIST} distinct ids, got {}", merged.len())));
    }
    Ok(if merged.is_empty() { None } else { Some(merged) })
}

/// `filters.tags` without empty or repeated entries; at most `MAX_TAGS` of at most
/// `MAX_TAG_CHARS` characters each.
fn tag_list(tags: &[String]) -> Result<Vec<String>> {
    if tags.len() > MAX_TAGS {
        return Err(SearchError::invalid("filters.tags", format!("at most {MAX_TAGS} tags, got {}", tags.len())));
    }
    let mut seen: HashSet<&str> = HashSet::with_capacity(tags.len());
    let mut kept = Vec::with_capacity(tags.len());
    for tag in tags {
        check_chars("filters.tags", "a tag", tag, MAX_TAG_CHARS)?;
        if !tag.is_empty() && seen.insert(tag.as_str()) {
            kept.push(tag.clone());
        }
    }
    Ok(kept)
}

/// Builds the record filter: the tenant and the request's `condition` always; the request's
/// filters only when enabled.
/// Top-level `doc_ids`/`section_ids` and those under `filters` are merged (union). Every list
/// and value is validated (and bounded) also when filters are disabled.
pub(crate) fn build_filter(request: &SearchRequest, enable_filters: bool) -> Result<RecordFilter> {
    let mut filter = RecordFilter::tenant(request.tenant_id.clone());
    filter.condition = request.condition.clone();
    let doc_ids = id_list("doc_ids", &[request.doc_ids.as_deref(), request.filters.doc_ids.as_deref()])?;
    let section_ids =
        id_list("section_ids", &[request.section_ids.as_deref(), request.filters.section_ids.as_deref()])?;
    let tags = tag_list(&request.filters.tags)?;
    for (field, value) in [("filters.product", &request.filters.product), ("filters.version", &request.filters.version)]
    {
        if let Some(value) = value {
            check_chars(field, "the value", value, MAX_TAG_CHARS)?;
        }
    }
    if !enable_filters {
        return Ok(filter);
    }
    let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    filter.product = non_empty(&request.filters.product);
    filter.version = non_empty(&request.filters.version);
    filter.tags = tags;
    filter.doc_ids = doc_ids;
    filter.section_ids = section_ids;
    Ok(filter)
}

impl SearchService {
    /// A service over `index` with `embedder` for queries and `runtime` as its starting runtime
    /// settings: no themes, no LLM router, neutral boosting, no synonyms, no reranker, its own
    /// metrics, no query length limit. The `with_*` setters change each.
    pub fn new(index: Arc<dyn VectorIndex>, embedder: Arc<dyn Embedder>, runtime: RuntimeSettings) -> Self {
        Self {
            index,
            embedder,
            tuning: Default::default(),
            tuning_status: Default::default(),
            learned: Default::default(),
            llm_router: None,
            reranker: Arc::new(crate::rerank::NoopReranker),
            rerank_timeout: std::time::Duration::from_secs(10),
            runtime: RwLock::new(runtime),
            metrics: Default::default(),
            max_query_chars: usize::MAX,
            default_dimension: 0,
            version_wait: std::time::Duration::from_secs(5),
            scope: Default::default(),
            learned_rerankers: Default::default(),
        }
    }

    /// The tenants' learned re-rankers, read by every search (refreshed by their owner).
    pub fn with_learned_rerankers(mut self, rerankers: Arc<crate::learn::LearnedRerankers>) -> Self {
        self.learned_rerankers = rerankers;
        self
    }

    pub fn learned_rerankers(&self) -> &Arc<crate::learn::LearnedRerankers> {
        &self.learned_rerankers
    }

    /// The first `learn::CANDIDATES` hits of a search in the service's own order (no learned
    /// model), each with the features a learned re-ranker reads.
    pub(crate) async fn candidates(&self, request: &SearchRequest) -> Result<Vec<crate::learn::Candidate>> {
        let index = self.pin_for(request).await?;
        let mut candidates = Vec::new();
        self.search_on(&index, request, RankingMode::Hybrid, LearnedUse::Collect(&mut candidates)).await?;
        Ok(candidates)
    }

    pub fn with_llm_router(mut self, llm_router: Option<Arc<LlmRouter>>) -> Self {
        self.llm_router = llm_router;
        self
    }

    pub(crate) fn with_boosting(mut self, boosting: Arc<BoostingConfig>) -> Self {
        let tuning = self.tuning().as_ref().clone().with_boosting(boosting);
        self.set_tuning(tuning);
        self
    }

    /// The whole tuning at once, with the files that were missing when it was loaded.
    pub fn with_tuning(mut self, tuning: tuning::Tuning, missing: Vec<String>) -> Self {
        self.set_tuning(tuning);
        self.tuning_status.get_mut().unwrap_or_else(|p| p.into_inner()).missing = missing;
        self
    }

    fn set_tuning(&mut self, tuning: tuning::Tuning) {
        *self.tuning.get_mut().unwrap_or_else(|p| p.into_inner()) = Arc::new(tuning);
        self.learned = Default::default();
    }

    /// The themes, boosting and synonyms in use.
    pub fn tuning(&self) -> Arc<tuning::Tuning> {
        Arc::clone(&self.tuning.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn tuning_status(&self) -> tuning::TuningStatus {
        self.tuning_status.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the tuning with `loaded` (a reload whose files all checked out), or, with the
    /// reload's problems, keeps the one in use and remembers why until a reload succeeds.
    /// Searches already running finish with the tuning they started with.
    pub fn reload_tuning(&self, loaded: std::result::Result<(tuning::Tuning, Vec<String>), Vec<String>>) {
        let mut status = self.tuning_status.write().unwrap_or_else(|p| p.into_inner());
        match loaded {
            Ok((mut tuning, missing)) => {
                status.generation += 1;
                tuning.generation = status.generation;
                *self.tuning.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(tuning);
                status.missing = missing;
                status.reload_error = None;
                // What was learned per tenant is keyed by the generation too; this only frees it.
                self.learned.clear();
            }
            Err(problems) => status.reload_error = Some(problems),
        }
    }

    /// The reranker and how long a rerank may take before the search goes on without it.
    pub fn with_reranker(mut self, reranker: Arc<dyn Reranker>, timeout: std::time::Duration) -> Self {
        self.reranker = reranker;
        self.rerank_timeout = timeout;
        self
    }

    /// Where searches are counted (the `/metrics` of the service).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The longest accepted query, and the query vector dimension while the index has none.
    pub fn with_limits(mut self, max_query_chars: usize, default_dimension: usize) -> Self {
        self.max_query_chars = max_query_chars;
        self.default_dimension = default_dimension;
        self
    }

    /// The tenants this instance serves; a request for another is `TenantNotServed`.
    pub fn with_tenant_scope(mut self, scope: crate::scope::TenantScope) -> Self {
        self.scope = scope;
        self
    }

    /// `Ok` when this instance serves `tenant_id`; else the error that says so (never an empty
    /// answer that reads as "no hits").
    pub fn check_served(&self, tenant_id: &str) -> Result<()> {
        if self.scope.serves(tenant_id) {
            return Ok(());
        }
        Err(SearchError::TenantNotServed(format!(
            "tenant {tenant_id:?} is served by another instance: this one serves {} (RETR_TENANTS)",
            self.scope
        )))
    }

    /// How long a search waits for the `min_index_version` it asks for.
    pub fn with_version_wait(mut self, wait: std::time::Duration) -> Self {
        self.version_wait = wait;
        self
    }

    /// Waits until the index reaches `min_index_version` (a string of digits), at most
    /// `version_wait`; then `IndexNotReady`. An index without versions never reaches one.
    async fn wait_for_version(&self, min_index_version: &str) -> Result<()> {
        let wanted: u64 = min_index_version
            .parse()
            .ok()
            .filter(|_| min_index_version.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| SearchError::invalid("min_index_version", "must be a version number (digits)"))?;
        // A fixed snapshot (the demo corpus) never changes: nothing to wait for.
        let wait = if self.index.replica_status().is_some() { self.version_wait } else { Duration::ZERO };
        let deadline = Instant::now() + wait;
        loop {
            let current = self.index.version();
            if current.is_some_and(|current| current >= wanted) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let now = current.map_or("none (a fixed snapshot)".to_string(), |v| v.to_string());
                return Err(SearchError::IndexNotReady(format!(
                    "the index is at version {now}, not yet {wanted}, after waiting {wait:?}; retry later"
                )));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The index searches read (health, stats and the OpenAPI completion ask it too).
    pub fn index(&self) -> &dyn VectorIndex {
        self.index.as_ref()
    }

    /// Whether an LLM theme router is configured (`theme_router_mode: llm` needs one).
    pub fn has_llm_router(&self) -> bool {
        self.llm_router.is_some()
    }

    /// Applies `update` to the runtime settings under the write lock: the settings it returns
    /// replace the current ones; on `Err` nothing changes.
    pub fn update_runtime<E>(
        &self,
        update: impl FnOnce(&RuntimeSettings) -> std::result::Result<RuntimeSettings, E>,
    ) -> std::result::Result<RuntimeSettings, E> {
        let mut current = self.runtime.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let updated = update(&current)?;
        *current = updated.clone();
        Ok(updated)
    }

    /// The themes, read from the provider once and shared (a provider is not asked per request).
    /// Their keyword rules are compiled then too.
    pub fn theme_list(&self) -> Arc<crate::router::ThemeSet> {
        Arc::clone(&self.tuning().theme_set)
    }

    /// The themes a tenant is routed over: the themes file's when at least one of them describes
    /// some of the tenant's docs (the file overrides), else the themes learned from the tenant's
    /// own index (`router::learned`), so a site nobody wrote a file for still gets routing and
    /// clarification. Chosen once per tenant and index version.
    pub(crate) async fn themes_for(
        &self,
        index: &Arc<dyn VectorIndex>,
        tenant: &TenantId,
    ) -> Arc<crate::router::ThemeSet> {
        Arc::clone(&self.learned.get(&self.tuning(), index, tenant).await.themes)
    }

    pub fn runtime_settings(&self) -> RuntimeSettings {
        self.runtime.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The runtime settings with this request's overrides (`router_mode`, the top-k knobs), each
    /// checked against the same ranges as `POST /config`; the shared settings never change.
    fn request_runtime(&self, request: &SearchRequest) -> Result<RuntimeSettings> {
        let mut runtime = self.runtime_settings();
        let knob = |field: &str, value: Option<i64>, current: usize| -> Result<usize> {
            match value {
                None => Ok(current),
                Some(value) if value < 1 => {
                    Err(SearchError::invalid(field, format!("must be at least 1, got {value}")))
                }
                Some(value) => Ok(usize::try_from(value).unwrap_or(usize::MAX)),
            }
        };
        runtime.doc_top_k = knob("doc_top_k", request.doc_top_k, runtime.doc_top_k)?;
        runtime.section_top_k = knob("section_top_k", request.section_top_k, runtime.section_top_k)?;
        runtime.topk_per_doc = knob("topk_per_doc", request.topk_per_doc, runtime.topk_per_doc)?;
        if let Some(mode) = request.router_mode {
            if mode == RouterMode::Llm && self.llm_router.is_none() {
                return Err(SearchError::invalid("router_mode", "llm needs a chat endpoint, which is not configured"));
            }
            runtime.theme_router_mode = mode;
        }
        let overridden = ["doc_top_k", "section_top_k", "topk_per_doc"];
        if let Some((field, problem)) =
            runtime.problems().into_iter().find(|(field, _)| overridden.contains(&field.as_str()))
        {
            return Err(SearchError::invalid(field, problem));
        }
        Ok(runtime)
    }

    fn validate(&self, request: &SearchRequest, runtime: &RuntimeSettings) -> Result<usize> {
        if is_blank(&request.query) {
            return Err(SearchError::invalid("query", "must not be empty (or only spaces and invisible characters)"));
        }
        let length = request.query.chars().count();
        if length > self.max_query_chars {
            return Err(SearchError::invalid(
                "query",
                format!("is {length} characters long; the limit is {}", self.max_query_chars),
            ));
        }
        if let Some(trace_id) = &request.trace_id {
            check_chars("trace_id", "the trace id", trace_id, MAX_TRACE_ID_CHARS)?;
        }
        match request.max_results {
            Some(value) if value < 1 => {
                Err(SearchError::invalid("max_results", format!("must be at least 1, got {value}")))
            }
            Some(value) => Ok((value as usize).min(MAX_RESULTS_CAP)),
            None => Ok(runtime.max_results.min(MAX_RESULTS_CAP)),
        }
    }

    async fn index_dimension(&self, index: &dyn VectorIndex) -> Result<usize> {
        Ok(index.dimension().await?.unwrap_or(self.default_dimension))
    }

    /// The query vector: the caller's precomputed one (dimension-checked), else the embedder's,
    /// else — when the embedder fails — the pseudo-embedding, with a degradation.
    pub(crate) async fn query_vector(
        &self,
        index: &dyn VectorIndex,
        request: &SearchRequest,
        degradations: &mut Vec<Degradation>,
    ) -> Result<Vec<f32>> {
        let dimension = self.index_dimension(index).await?;
        if let Some(vector) = &request.query_embedding {
            if vector.len() != dimension {
                return Err(SearchError::invalid(
                    "query_embedding",
                    format!("has dimension {}, the index has {dimension}", vector.len()),
                ));
            }
            if vector.iter().any(|v| !v.is_finite()) {
                return Err(SearchError::invalid("query_embedding", "must contain finite numbers only"));
            }
            return Ok(vector.clone());
        }
        let pseudo = PseudoEmbedder::new(dimension);
        let (vector, degradation) = embed_query_with_fallback(self.embedder.as_ref(), &pseudo, &request.query).await;
        if let Some(message) = degradation {
            self.metrics.embedding_fallbacks.inc();
            degradations.push(Degradation::new("embedding_fallback", message));
        }
        Ok(vector)
    }

    /// Runs one search end to end.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.search_with_mode(request, RankingMode::Hybrid).await
    }

    /// Runs one search with the given ranking mode (`eval` compares the modes).
    pub async fn search_with_mode(&self, request: &SearchRequest, mode: RankingMode) -> Result<SearchResponse> {
        let index = self.pin_for(request).await?;
        self.search_on(&index, request, mode, LearnedUse::Apply).await
    }

    /// Searches, then reads the hits' texts from the same snapshot (`/context`, the Dify API).
    pub async fn search_with_texts(
        &self,
        request: &SearchRequest,
    ) -> Result<(SearchResponse, HashMap<String, String>)> {
        let index = self.pin_for(request).await?;
        let response = self.search_on(&index, request, RankingMode::Hybrid, LearnedUse::Apply).await?;
        let texts = prompt_context::hit_texts(index.as_ref(), &request.tenant_id, &response.hits).await?;
        Ok((response, texts))
    }

    /// What every search does before it reads: the tenant is this instance's, the index has
    /// reached the request's `min_index_version`, and the current snapshot is pinned (nothing
    /// loaded: the index itself, whose own calls say why).
    pub(crate) async fn pin_for(&self, request: &SearchRequest) -> Result<Arc<dyn VectorIndex>> {
        self.check_served(&request.tenant_id)?;
        if let Some(version) = &request.min_index_version {
            self.wait_for_version(version).await?;
        }
        Ok(self.index.pin().await.unwrap_or_else(|| Arc::clone(&self.index)))
    }

    /// One search, every index call on `index` (one pinned snapshot).
    async fn search_on(
        &self,
        pinned: &Arc<dyn VectorIndex>,
        request: &SearchRequest,
        mode: RankingMode,
        mut learned_use: LearnedUse<'_>,
    ) -> Result<SearchResponse> {
        let index = pinned.as_ref();
        let started = Instant::now();
        let runtime = self.request_runtime(request)?;
        let max_results = self.validate(request, &runtime)?;
        let mut filter = build_filter(request, request.enable_filters.unwrap_or(runtime.enable_filters))?;
        if !index.tenant_exists(&request.tenant_id).await? {
            return Err(SearchError::UnknownTenant(request.tenant_id.to_string()));
        }
        let tuning = self.tuning();
        let learned = self.learned.get(&tuning, pinned, &request.tenant_id).await;
        let themes = Arc::clone(&learned.themes);
        let chosen_theme = match &request.theme {
            Some(id) => Some(
                themes
                    .iter()
                    .find(|t| &t.id == id)
                    .cloned()
                    .ok_or_else(|| SearchError::invalid("theme", format!("unknown theme {id:?}")))?,
            ),
            None => None,
        };
        self.metrics.searches.inc();
        let mut degradations = Vec::new();

        let routing = match &chosen_theme {
            Some(_) => RoutingResult::empty(runtime.theme_router_mode),
            None => {
                route_query(
                    &request.query,
                    request.user_metadata.as_ref(),
                    &themes,
                    runtime.theme_router_mode,
                    &tuning.router_config,
                    self.llm_router.as_deref(),
                )
                .await
            }
        };
        if let Some(message) = index.staleness() {
            degradations.push(Degradation::new("backend_stale", message));
        }
        if let Some(message) = &routing.degradation {
            degradations.push(Degradation::new("router_fallback", message.clone()));
        }
        let hard_filter = chosen_theme.as_ref().map(|t| t.fields()).or_else(|| routing.hard_filter.clone());
        let soft_filter = filter.clone();
        if let Some(fields) = &hard_filter {
            fields.apply_to(&mut filter);
        }

        // Synonyms widen the lexical query only: added to the embedded text they pull the
        // question's vector away from its own meaning and lower page MRR (docs/quality.md).
        let mut terms = crate::text::terms(&request.query);
        // Latin names written in Cyrillic and back, learned from the tenant's pages: from the
        // words the user wrote, not from the synonyms' («macos» → «мак» → «make»).
        let spelling = &tuning.boosting.transliteration;
        let transliterated =
            if spelling.enabled { learned.spellings.expand(&request.query, &terms, spelling) } else { Vec::new() };
        let synonyms = tuning.synonyms.expand(&request.tenant_id, &terms);
        terms.extend(synonyms);
        for term in transliterated {
            if !terms.contains(&term) {
                tracing::debug!(query = %request.query, term = %term, "transliterated lexical term");
                terms.push(term);
            }
        }
        let vector = self.query_vector(index, request, &mut degradations).await?;
        let query_words: Vec<String> =
            request.query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_string).collect();
        // The topic numbers of the index this search reads (pinned: one snapshot throughout).
        let topics = index.topics();
        let boost_context = BoostContext {
            routing: routing::routing_hint(&routing, &themes),
            config_key: Some(tuning.boost_key),
            topics: topics.clone(),
            ..BoostContext::default()
        };
        let rerank_enabled = request.rerank_enabled.unwrap_or(runtime.rerank_enabled);
        let learned_model = match learned_use {
            LearnedUse::Apply => self.learned_rerankers.get(&request.tenant_id),
            LearnedUse::Collect(_) => None,
        };
        // A learned re-ranker (or its learner) sees more candidates than are answered.
        let candidates = match (&learned_use, &learned_model) {
            (LearnedUse::Collect(_), _) => max_results.max(crate::learn::CANDIDATES),
            (LearnedUse::Apply, Some(model)) => max_results.max(model.candidates),
            (LearnedUse::Apply, None) => max_results,
        };
        let run = |filter: crate::index::RecordFilter| {
            let input = cascade::CascadeInput {
                filter,
                ranking: RankingContext {
                    mode,
                    vector: &vector,
                    terms: &terms,
                    boosting: &tuning.boosting,
                    boost_context: boost_context.clone(),
                },
                settings: &runtime,
                rerank: rerank_enabled.then_some(cascade::RerankStep {
                    reranker: self.reranker.as_ref(),
                    query: &request.query,
                    timeout: self.rerank_timeout,
                }),
                max_results: candidates,
                query_words: query_words.clone(),
                chunks_wanted: request.include_steps,
            };
            cascade::run(index, input)
        };
        // The caller's chosen theme always filters. The router's proposed filter applies only when
        // the retrieval evidence agrees: the unfiltered search's best `hard_filter_agreeing_hits`
        // hits are all of that theme (a theme keyword *mentioned* in a question is not proof).
        let proposed_by_router = chosen_theme.is_none() && hard_filter.is_some();
        let mut output = run(if proposed_by_router { soft_filter.clone() } else { filter.clone() }).await?;
        let mut filter_applied = chosen_theme.is_some();
        if let (true, Some(fields)) = (proposed_by_router, &hard_filter) {
            let needed = tuning.router_config.hard_filter_agreeing_hits.max(1);
            let agrees = output.hits.len() >= needed.min(max_results)
                && output.hits.iter().take(needed).all(|hit| fields.matches(&hit.record.meta));
            if agrees {
                let filtered = run(filter).await?;
                if filtered.hits.is_empty() {
                    degradations.push(Degradation::new(
                        "router_filter_empty",
                        "the router's theme filter matched no record of this tenant; answered without it",
                    ));
                } else {
                    output = filtered;
                    filter_applied = true;
                }
            }
        }
        let labels = ThemeLabels::new(&themes, topics.as_deref());
        if matches!(learned_use, LearnedUse::Collect(_)) || learned_model.is_some() {
            let hit_labels: Vec<Option<String>> =
                output.hits.iter().map(|hit| ranking::theme_label(hit, &labels)).collect();
            let rows = crate::learn::features::rows(
                &request.query,
                &output.hits,
                &output.docs,
                &hit_labels,
                routing.primary_theme.as_deref(),
            );
            match (&mut learned_use, &learned_model) {
                (LearnedUse::Collect(into), _) => {
                    into.extend(output.hits.iter().zip(rows).map(|(hit, row)| crate::learn::Candidate {
                        hit_id: hit.record.id.clone(),
                        doc_id: hit.record.meta.doc_id.to_string(),
                        source: hit.record.meta.source.to_string(),
                        row,
                    }));
                }
                (LearnedUse::Apply, Some(model)) => {
                    let mut scored: Vec<(f64, ranking::Ranked)> =
                        rows.iter().map(|row| model.score(row)).zip(output.hits.drain(..)).collect();
                    // Stable: equal learned scores keep the service's order.
                    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
                    output.hits = scored
                        .into_iter()
                        .map(|(score, mut hit)| {
                            hit.rerank_score = Some(score as f32);
                            hit
                        })
                        .collect();
                }
                (LearnedUse::Apply, None) => {}
            }
            output.hits.truncate(max_results);
        }
        let mut routing = routing;
        let words_probability = routing.words_probability;
        let mut split = None;
        if chosen_theme.is_none() && !filter_applied {
            if routing.mode_used != RouterMode::None {
                // Ambiguity from the evidence: the question names no theme and its hits split. The
                // split is kept when only the question's words named a learned theme: `eval`
                // fits the probability that names one together with the ratio.
                split = routing::split_ratio(&output.hits, tuning.router_config.ambiguity_top_hits, &labels)
                    .filter(|_| !routing.named_by_rules());
                routing.requires_disambiguation =
                    !routing.named() && split.is_some_and(|ratio| ratio >= tuning.router_config.ambiguity_min_ratio);
            }
            routing::cover_named_themes(&mut output, &routing, &labels, max_results);
        }
        if let Some(degradation) = output.rerank_degradation.take() {
            self.metrics.rerank_failures.inc();
            degradations.push(degradation);
        }
        if output.fallback_used {
            self.metrics.text_fallbacks.inc();
        }
        let clarification =
            if chosen_theme.is_none() { routing::clarification(&routing, &output.hits, &labels) } else { None };
        let signal =
            confidence::RoutingSignal {
                first_hit_of_named_theme: routing.primary_theme.as_ref().filter(|_| routing.named()).map(|theme| {
                    output.hits.first().and_then(|hit| routing::label(hit, &labels)).as_ref() == Some(theme)
                }),
                split: routing.requires_disambiguation,
            };
        let confidence_features = confidence::features(&request.query, &output.hits, &output.docs, signal);
        let confidence = confidence::ConfidenceModel::default().probability(confidence_features.as_ref());
        let hits: Vec<RetrievalHit> =
            output.hits.iter().map(|r| cascade::to_hit(r, request.explain, &labels)).collect();
        // Details of the search; the request line itself is written at RETR_REQUEST_LOG_LEVEL.
        tracing::debug!(
            trace_id = request.trace_id.as_deref().unwrap_or(""),
            tenant_id = %request.tenant_id,
            num_hits = hits.len(),
            primary_theme = routing.primary_theme.as_deref().unwrap_or(""),
            filter_applied,
            degradations = degradations.len(),
            latency_ms = started.elapsed().as_secs_f64() * 1000.0,
            "search done"
        );
        Ok(SearchResponse {
            hits,
            hits_level: output.hits_level.map(|l| l.as_str().to_string()).unwrap_or_else(|| "none".to_string()),
            steps: request.include_steps.then(|| cascade::steps(&output, request.explain, &labels)),
            trace_id: request.trace_id.clone(),
            took_ms: started.elapsed().as_secs_f64() * 1000.0,
            index_version: index.version().map(|version| version.to_string()),
            degradations,
            routing: RoutingInfo { result: routing, filter_applied, chosen_theme: chosen_theme.map(|t| t.id) },
            clarification,
            confidence,
            confidence_features,
            split_ratio: split,
            words_probability,
        })
    }

    /// The chunks around an anchor chunk of one doc, sorted by (page, chunk_index).
    pub async fn window(&self, query: &WindowQuery) -> Result<Vec<Arc<Record>>> {
        self.window_around(query, "anchor_chunk_id", |_, chunk| chunk.id == query.anchor_chunk_id).await
    }

    /// The window around a hit of any level (the MCP `read_passage` tool): `anchor_chunk_id` may
    /// name a chunk, a section (all of its chunks) or the doc itself (its first chunk), and
    /// `before`/`after` count chunks outside that span.
    pub async fn passage(&self, query: &WindowQuery) -> Result<Vec<Arc<Record>>> {
        let anchor = query.anchor_chunk_id.as_str();
        if anchor == query.doc_id {
            return self.window_around(query, "hit_id", |position, _| position == 0).await;
        }
        self.window_around(query, "hit_id", |_, chunk| {
            chunk.id == anchor || chunk.meta.section_id.as_deref() == Some(anchor)
        })
        .await
    }

    /// The chunks of one doc from `query.before` chunks before the first one `anchor` accepts
    /// (given its position in the doc and the chunk) to `query.after` chunks after the last one it
    /// accepts, in (page, chunk_index) order; `anchor_field` names `query.anchor_chunk_id`.
    async fn window_around(
        &self,
        query: &WindowQuery,
        anchor_field: &str,
        anchor: impl Fn(usize, &Record) -> bool,
    ) -> Result<Vec<Arc<Record>>> {
        self.check_served(&query.tenant_id)?;
        validate_id("doc_id", &query.doc_id)?;
        validate_id(anchor_field, &query.anchor_chunk_id)?;
        let mut chunks = self.index.doc_chunks(&query.tenant_id, &query.doc_id).await?;
        if chunks.is_empty() {
            return Err(SearchError::NotFound(format!(
                "doc {:?} not found for tenant {:?}",
                query.doc_id, query.tenant_id
            )));
        }
        chunks.sort_by(|a, b| (a.meta.page, a.meta.chunk_index, &a.id).cmp(&(b.meta.page, b.meta.chunk_index, &b.id)));
        let matching: Vec<usize> = chunks
            .iter()
            .enumerate()
            .filter(|(position, chunk)| anchor(*position, chunk))
            .map(|(position, _)| position)
            .collect();
        let (Some(&first), Some(&last)) = (matching.first(), matching.last()) else {
            let noun = if anchor_field == "anchor_chunk_id" { "chunk" } else { "hit" };
            return Err(SearchError::NotFound(format!(
                "{noun} {:?} not found in doc {:?}",
                query.anchor_chunk_id, query.doc_id
            )));
        };
        let start = first.saturating_sub(query.before);
        let end = last.saturating_add(query.after).saturating_add(1).min(chunks.len());
        Ok(chunks[start..end].to_vec())
    }
}

#[cfg(test)]
mod tests;
