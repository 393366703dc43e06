//! The search service: one index and one embedder, the tuning and runtime settings in use, the
//! tenants' learnings; its `search_on` runs one search as the named stages of `stages.rs`.

use super::boosting::BoostContext;
use super::boosting_config::BoostingConfig;
use super::error::{Result, SearchError};
use super::learned;
use super::limits::validate_id;
use super::ranking::RankingMode;
use super::routing;
use super::settings::RuntimeSettings;
use super::stages::{self, LearnedUse};
use super::tenant::TenantId;
use super::tuning;
use super::types::{Degradation, SearchRequest, SearchResponse, WindowQuery};
use super::validate::{self, build_filter};
use crate::embed::Embedder;
use crate::index::{IndexError, Source, VectorIndex};
use crate::metrics::Metrics;
use crate::model::Record;
use crate::rerank::Reranker;
use crate::router::{LlmRouter, ThemeLabels};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// A search's source, or why there is none (nothing loaded): reported after the request's checks.
pub(crate) type Pinned = std::result::Result<Source, IndexError>;

/// Runs searches against one index with one embedder; shared by every handler through `AppState`.
/// Built with [`SearchService::new`] and the `with_*` setters; handlers use its methods.
pub struct SearchService {
    pub(crate) index: Arc<dyn VectorIndex>,
    embedder: Arc<dyn Embedder>,
    /// The themes, boosting and synonyms in use (replaced whole by a reload); a search reads
    /// them once.
    tuning: RwLock<Arc<tuning::Tuning>>,
    /// The files' state: missing ones, the last rejected reload, the reload count.
    tuning_status: RwLock<tuning::TuningStatus>,
    /// Per tenant: the themes it is routed over and its spellings, learned from its pages once
    /// per index version and tuning generation.
    pub(super) learned: learned::LearnedPerTenant,
    llm_router: Option<Arc<LlmRouter>>,
    reranker: Arc<dyn Reranker>,
    rerank_timeout: std::time::Duration,
    pub(super) runtime: RwLock<RuntimeSettings>,
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
    pub(crate) async fn themes_for(&self, source: &Source, tenant: &TenantId) -> Arc<crate::router::ThemeSet> {
        Arc::clone(&self.learned.get(&self.tuning(), source, tenant).await.themes)
    }

    pub fn runtime_settings(&self) -> RuntimeSettings {
        self.runtime.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Runs one search end to end.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.search_with_mode(request, RankingMode::Hybrid).await
    }

    /// Runs one search with the given ranking mode (`eval` compares the modes).
    pub async fn search_with_mode(&self, request: &SearchRequest, mode: RankingMode) -> Result<SearchResponse> {
        let pinned = self.pin_for(request).await?;
        self.search_on(&pinned, request, mode, LearnedUse::Apply).await
    }

    /// What every search does before it reads: the tenant is this instance's, the index has
    /// reached the request's `min_index_version`, and the source is pinned. Without one (nothing
    /// loaded), why: the search reports it after checking the request.
    pub(crate) async fn pin_for(&self, request: &SearchRequest) -> Result<Pinned> {
        self.check_served(&request.tenant_id)?;
        if let Some(version) = &request.min_index_version {
            self.wait_for_version(version).await?;
        }
        Ok(self.index.pin().await)
    }

    /// The stage **embed** with this service's embedder (`stages::embed`).
    pub(crate) async fn embed_query(
        &self,
        source: &Source,
        request: &SearchRequest,
        degradations: &mut Vec<Degradation>,
    ) -> Result<Vec<f32>> {
        stages::embed(source, request, self.embedder.as_ref(), self.default_dimension, &self.metrics, degradations)
            .await
    }

    /// One search over one pinned source, stage by stage (`stages.rs`).
    pub(crate) async fn search_on(
        &self,
        pinned: &Pinned,
        request: &SearchRequest,
        mode: RankingMode,
        mut learned_use: LearnedUse<'_>,
    ) -> Result<SearchResponse> {
        let started = Instant::now();
        // check
        let runtime = validate::request_runtime(self.runtime_settings(), request, self.llm_router.is_some())?;
        let max_results = validate::max_results(request, &runtime, self.max_query_chars)?;
        let request_filter = build_filter(request, request.enable_filters.unwrap_or(runtime.enable_filters))?;
        let source = pinned.as_ref().map_err(|error| SearchError::from(error.clone()))?;
        if !source.tenant_exists(&request.tenant_id).await? {
            return Err(SearchError::UnknownTenant(request.tenant_id.to_string()));
        }
        // route
        let tuning = self.tuning();
        let learned = self.learned.get(&tuning, source, &request.tenant_id).await;
        let themes = Arc::clone(&learned.themes);
        let chosen_theme = stages::choose_theme(request, &themes)?;
        self.metrics.searches.inc();
        let mut degradations = Vec::new();
        let routing =
            stages::route(request, &themes, chosen_theme.as_ref(), &runtime, &tuning, self.llm_router.as_deref()).await;
        if let Some(message) = source.staleness() {
            degradations.push(Degradation::new("backend_stale", message));
        }
        if let Some(message) = &routing.degradation {
            degradations.push(Degradation::new("router_fallback", message.clone()));
        }
        let filters = stages::Filters::new(request_filter, chosen_theme.as_ref(), &routing);
        // expand, embed
        let terms = stages::lexical_terms(request, &tuning, &learned);
        let vector = self.embed_query(source, request, &mut degradations).await?;
        // retrieve: the cascade, each level's candidates fused and boosted
        let topics = source.topics();
        let learned_model = stages::learned_model(&learned_use, &self.learned_rerankers, &request.tenant_id);
        let retrieval = stages::Retrieval {
            mode,
            vector: &vector,
            terms: &terms,
            tuning: &tuning,
            boost_context: BoostContext {
                routing: routing::routing_hint(&routing, &themes),
                config_key: Some(tuning.boost_key),
                topics: topics.clone(),
                ..BoostContext::default()
            },
            runtime: &runtime,
            reranker: request
                .rerank_enabled
                .unwrap_or(runtime.rerank_enabled)
                .then_some((self.reranker.as_ref(), self.rerank_timeout)),
            query: &request.query,
            candidates: stages::cascade_depth(&learned_use, learned_model.as_deref(), max_results),
            query_words: request
                .query
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect(),
            chunks_wanted: request.include_steps,
        };
        let (mut output, filter_applied) =
            stages::retrieve(source, &retrieval, filters, chosen_theme.is_some(), max_results, &mut degradations)
                .await?;
        // learned order, disambiguate
        let labels = ThemeLabels::new(&themes, topics.as_deref());
        let mut routing = routing;
        stages::learned_order(
            &mut output,
            &mut learned_use,
            learned_model.as_deref(),
            &request.query,
            &routing,
            &labels,
            max_results,
        );
        let words_probability = routing.words_probability;
        let split = match chosen_theme.is_none() && !filter_applied {
            true => stages::disambiguate(&mut routing, &mut output, &tuning, &labels, max_results),
            false => None,
        };
        if let Some(degradation) = output.rerank_degradation.take() {
            self.metrics.rerank_failures.inc();
            degradations.push(degradation);
        }
        if output.fallback_used {
            self.metrics.text_fallbacks.inc();
        }
        // answer
        let answered = stages::Answered {
            routing,
            chosen_theme,
            filter_applied,
            split,
            words_probability,
            degradations,
            index_version: source.version(),
            started,
        };
        Ok(stages::answer(request, &output, &labels, answered))
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
