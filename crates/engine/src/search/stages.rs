//! A search as named stages, in the order `SearchService::search_on` (service.rs) runs them over
//! one `Source` (the pinned snapshot, or the database held to one server):
//!
//! 1. **check** — the request, its runtime overrides and its filter (`validate.rs`), before
//!    anything is read;
//! 2. **route** — the question over the tenant's themes ([`choose_theme`], [`route`]);
//! 3. **expand** — the lexical terms with synonyms and learned spellings ([`lexical_terms`]);
//! 4. **embed** — the query vector ([`embed`]);
//! 5. **retrieve** — the cascade (`cascade::run`: docs → sections → chunks → text fallback),
//!    once, or again under the router's theme filter when the evidence agrees ([`retrieve`]).
//!    Inside each level: **candidates** (`ranking::candidates`, the reads), **fuse** and
//!    **boost** (`ranking::fuse`, `ranking::boost`: plain functions over the candidates);
//! 6. **learned order** — the tenant's learned re-ranker, or the learner's rows ([`learned_order`]);
//! 7. **disambiguate** — the split between themes and the covering of named themes ([`disambiguate`]);
//! 8. **answer** — hits, steps, clarification, confidence ([`answer`]).
//!
//! Only `embed`, `route` (an LLM router) and `retrieve` wait on anything; the others are plain
//! functions.

use super::boosting::BoostContext;
use super::cascade::{self, CascadeInput, CascadeOutput, RerankStep};
use super::confidence;
use super::error::{Result, SearchError};
use super::learned::Learned;
use super::ranking::{self, RankingContext, RankingMode};
use super::routing;
use super::settings::RuntimeSettings;
use super::tuning::Tuning;
use super::types::{Degradation, RetrievalHit, RoutingInfo, SearchRequest, SearchResponse};
use crate::embed::{embed_query_with_fallback, Embedder, PseudoEmbedder};
use crate::index::{RecordFilter, Source};
use crate::learn::features::HitEvidence;
use crate::learn::{Candidate, LearnedReranker};
use crate::metrics::Metrics;
use crate::rerank::Reranker;
use crate::router::{route_query, LlmRouter, RouterMode, RoutingResult, Theme, ThemeFields, ThemeLabels, ThemeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a search does with the tenant's learned re-ranker.
pub(crate) enum LearnedUse<'a> {
    /// Re-orders the first candidates with it, when the tenant has one.
    Apply,
    /// Ignores it and hands every candidate's features to the learner.
    Collect(&'a mut Vec<Candidate>),
}

/// The theme the caller chose (`theme`), which always filters; an unknown one is a 422.
pub(crate) fn choose_theme(request: &SearchRequest, themes: &ThemeSet) -> Result<Option<Theme>> {
    match &request.theme {
        Some(id) => Ok(Some(
            themes
                .iter()
                .find(|t| &t.id == id)
                .cloned()
                .ok_or_else(|| SearchError::invalid("theme", format!("unknown theme {id:?}")))?,
        )),
        None => Ok(None),
    }
}

/// The stage **route**: the question over the tenant's themes in the request's router mode, unless
/// the caller chose a theme.
pub(crate) async fn route(
    request: &SearchRequest,
    themes: &ThemeSet,
    chosen_theme: Option<&Theme>,
    runtime: &RuntimeSettings,
    tuning: &Tuning,
    llm_router: Option<&LlmRouter>,
) -> RoutingResult {
    match chosen_theme {
        Some(_) => RoutingResult::empty(runtime.theme_router_mode),
        None => {
            route_query(
                &request.query,
                request.user_metadata.as_ref(),
                themes,
                runtime.theme_router_mode,
                &tuning.router_config,
                llm_router,
            )
            .await
        }
    }
}

/// The stage **expand**: the query's lexical terms, widened with the tenant's synonyms and the
/// spellings learned from its pages.
pub(crate) fn lexical_terms(request: &SearchRequest, tuning: &Tuning, learned: &Learned) -> Vec<String> {
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
    terms
}

/// The stage **embed**: the caller's precomputed vector (dimension-checked), else the
/// embedder's, else — when the embedder fails — the pseudo-embedding, with a degradation.
/// `default_dimension` stands in while the source knows none.
pub(crate) async fn embed(
    source: &Source,
    request: &SearchRequest,
    embedder: &dyn Embedder,
    default_dimension: usize,
    metrics: &Metrics,
    degradations: &mut Vec<Degradation>,
) -> Result<Vec<f32>> {
    let dimension = source.dimension().await?.unwrap_or(default_dimension);
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
    let (vector, degradation) = embed_query_with_fallback(embedder, &pseudo, &request.query).await;
    if let Some(message) = degradation {
        metrics.embedding_fallbacks.inc();
        degradations.push(Degradation::new("embedding_fallback", message));
    }
    Ok(vector)
}

/// What every run of the cascade of one search shares: all but the record filter.
pub(crate) struct Retrieval<'a> {
    pub(crate) mode: RankingMode,
    pub(crate) vector: &'a [f32],
    pub(crate) terms: &'a [String],
    pub(crate) tuning: &'a Tuning,
    pub(crate) boost_context: BoostContext,
    pub(crate) runtime: &'a RuntimeSettings,
    /// The reranker, when reranking is on for this request.
    pub(crate) reranker: Option<(&'a dyn Reranker, Duration)>,
    pub(crate) query: &'a str,
    /// Hits wanted from the cascade (more than answered when a learned re-ranker reads them).
    pub(crate) candidates: usize,
    /// Words of the query for the text fallback (original spelling).
    pub(crate) query_words: Vec<String>,
    pub(crate) chunks_wanted: bool,
}

impl Retrieval<'_> {
    fn input(&self, filter: RecordFilter) -> CascadeInput<'_> {
        CascadeInput {
            filter,
            ranking: RankingContext {
                mode: self.mode,
                vector: self.vector,
                terms: self.terms,
                boosting: &self.tuning.boosting,
                boost_context: self.boost_context.clone(),
            },
            settings: self.runtime,
            rerank: self.reranker.map(|(reranker, timeout)| RerankStep { reranker, query: self.query, timeout }),
            max_results: self.candidates,
            query_words: self.query_words.clone(),
            chunks_wanted: self.chunks_wanted,
        }
    }
}

/// The filters of one search: the request's (`soft`), and with a theme's fields applied
/// (`filter`) when the caller chose a theme or the router proposed one (`hard`).
pub(crate) struct Filters {
    pub(crate) filter: RecordFilter,
    pub(crate) soft: RecordFilter,
    pub(crate) hard: Option<ThemeFields>,
}

impl Filters {
    /// `request_filter` with the chosen theme's fields, else the router's proposed ones.
    pub(crate) fn new(request_filter: RecordFilter, chosen_theme: Option<&Theme>, routing: &RoutingResult) -> Self {
        let hard = chosen_theme.map(|t| t.fields()).or_else(|| routing.hard_filter.clone());
        let soft = request_filter.clone();
        let mut filter = request_filter;
        if let Some(fields) = &hard {
            fields.apply_to(&mut filter);
        }
        Self { filter, soft, hard }
    }
}

/// The stage **retrieve**: the cascade over `source`. The caller's chosen theme always filters.
/// The router's proposed filter applies only when the retrieval evidence agrees: the unfiltered
/// search's best `agreeing_hits` hits are all of that theme (a theme keyword *mentioned* in a
/// question is not proof). Returns the cascade's output and whether a theme filter applied.
pub(crate) async fn retrieve(
    source: &Source,
    retrieval: &Retrieval<'_>,
    filters: Filters,
    chosen_theme: bool,
    max_results: usize,
    degradations: &mut Vec<Degradation>,
) -> Result<(CascadeOutput, bool)> {
    let agreeing_hits = retrieval.tuning.router_config.hard_filter_agreeing_hits.max(1);
    let proposed_by_router = !chosen_theme && filters.hard.is_some();
    let first = if proposed_by_router { filters.soft.clone() } else { filters.filter.clone() };
    let mut output = cascade::run(source, retrieval.input(first)).await?;
    let mut filter_applied = chosen_theme;
    if let (true, Some(fields)) = (proposed_by_router, &filters.hard) {
        if router_filter_agrees(&output, fields, agreeing_hits, max_results) {
            let filtered = cascade::run(source, retrieval.input(filters.filter)).await?;
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
    Ok((output, filter_applied))
}

/// Whether the best `needed` hits of the unfiltered cascade are all of the proposed theme.
fn router_filter_agrees(output: &CascadeOutput, fields: &ThemeFields, needed: usize, max_results: usize) -> bool {
    output.hits.len() >= needed.min(max_results)
        && output.hits.iter().take(needed).all(|hit| fields.matches(&hit.record.meta))
}

/// The stage **learned order**: with the tenant's learned re-ranker (`model`), the first
/// candidates re-ordered by it; when collecting, every candidate's row handed to the learner.
/// Either way the hits are cut to `max_results`. Nothing happens with neither.
pub(crate) fn learned_order(
    output: &mut CascadeOutput,
    learned_use: &mut LearnedUse<'_>,
    model: Option<&LearnedReranker>,
    query: &str,
    routing: &RoutingResult,
    labels: &ThemeLabels<'_>,
    max_results: usize,
) {
    if matches!(learned_use, LearnedUse::Apply) && model.is_none() {
        return;
    }
    let hit_labels: Vec<Option<String>> = output.hits.iter().map(|hit| ranking::theme_label(hit, labels)).collect();
    let evidence: Vec<HitEvidence<'_>> = output
        .hits
        .iter()
        .map(|hit| HitEvidence {
            meta: &hit.record.meta,
            score: hit.score,
            dense: hit.dense,
            lexical: hit.lexical,
            fused_normalized: hit.fused_normalized,
            page_evidence: hit.page_evidence,
        })
        .collect();
    let docs: Vec<&str> = output.docs.iter().map(|doc| &*doc.record.meta.doc_id).collect();
    let rows = crate::learn::features::rows(query, &evidence, &docs, &hit_labels, routing.primary_theme.as_deref());
    match (learned_use, model) {
        (LearnedUse::Collect(into), _) => {
            into.extend(output.hits.iter().zip(rows).map(|(hit, row)| Candidate {
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

/// The stage **disambiguate**: when the question names no theme and no theme filter applied,
/// whether its hits split between themes (`requires_disambiguation`), and a hit of each theme
/// it named. Returns the split ratio, when there is one.
pub(crate) fn disambiguate(
    routing: &mut RoutingResult,
    output: &mut CascadeOutput,
    tuning: &Tuning,
    labels: &ThemeLabels<'_>,
    max_results: usize,
) -> Option<f32> {
    let mut split = None;
    if routing.mode_used != RouterMode::None {
        // Ambiguity from the evidence: the question names no theme and its hits split. The
        // split is kept when only the question's words named a learned theme: `eval`
        // fits the probability that names one together with the ratio.
        split = routing::split_ratio(&output.hits, tuning.router_config.ambiguity_top_hits, labels)
            .filter(|_| !routing.named_by_rules());
        routing.requires_disambiguation =
            !routing.named() && split.is_some_and(|ratio| ratio >= tuning.router_config.ambiguity_min_ratio);
    }
    routing::cover_named_themes(output, routing, labels, max_results);
    split
}

/// What the answer says besides the cascade's output.
pub(crate) struct Answered {
    pub(crate) routing: RoutingResult,
    pub(crate) chosen_theme: Option<Theme>,
    pub(crate) filter_applied: bool,
    pub(crate) split: Option<f32>,
    pub(crate) words_probability: Option<f32>,
    pub(crate) degradations: Vec<Degradation>,
    pub(crate) index_version: Option<u64>,
    pub(crate) started: Instant,
}

/// The stage **answer**: the hits (labelled with their themes), the cascade's steps when asked,
/// the clarification, the confidence of the first hit, and the routing as it was used.
pub(crate) fn answer(
    request: &SearchRequest,
    output: &CascadeOutput,
    labels: &ThemeLabels<'_>,
    answered: Answered,
) -> SearchResponse {
    let Answered { routing, chosen_theme, filter_applied, split, words_probability, degradations, .. } = answered;
    let clarification =
        if chosen_theme.is_none() { routing::clarification(&routing, &output.hits, labels) } else { None };
    let signal = confidence::RoutingSignal {
        first_hit_of_named_theme: routing
            .primary_theme
            .as_ref()
            .filter(|_| routing.named())
            .map(|theme| output.hits.first().and_then(|hit| routing::label(hit, labels)).as_ref() == Some(theme)),
        split: routing.requires_disambiguation,
    };
    let confidence_features = confidence::features(&request.query, &output.hits, &output.docs, signal);
    let confidence = confidence::ConfidenceModel::default().probability(confidence_features.as_ref());
    let hits: Vec<RetrievalHit> = output.hits.iter().map(|r| cascade::to_hit(r, request.explain, labels)).collect();
    // Details of the search; the request line itself is written at RETR_REQUEST_LOG_LEVEL.
    tracing::debug!(
        trace_id = request.trace_id.as_deref().unwrap_or(""),
        tenant_id = %request.tenant_id,
        num_hits = hits.len(),
        primary_theme = routing.primary_theme.as_deref().unwrap_or(""),
        filter_applied,
        degradations = degradations.len(),
        latency_ms = answered.started.elapsed().as_secs_f64() * 1000.0,
        "search done"
    );
    SearchResponse {
        hits,
        hits_level: output.hits_level.map(|l| l.as_str().to_string()).unwrap_or_else(|| "none".to_string()),
        steps: request.include_steps.then(|| cascade::steps(output, request.explain, labels)),
        trace_id: request.trace_id.clone(),
        took_ms: answered.started.elapsed().as_secs_f64() * 1000.0,
        index_version: answered.index_version.map(|version| version.to_string()),
        degradations,
        routing: RoutingInfo { result: routing, filter_applied, chosen_theme: chosen_theme.map(|t| t.id) },
        clarification,
        confidence,
        confidence_features,
        split_ratio: split,
        words_probability,
    }
}

/// The learned model a search applies: the tenant's, unless it collects for the learner.
pub(crate) fn learned_model(
    learned_use: &LearnedUse<'_>,
    rerankers: &crate::learn::LearnedRerankers,
    tenant_id: &str,
) -> Option<Arc<LearnedReranker>> {
    match learned_use {
        LearnedUse::Apply => rerankers.get(tenant_id),
        LearnedUse::Collect(_) => None,
    }
}

/// Hits the cascade is asked for: `max_results`, or more when a learned re-ranker (or its
/// learner) reads the first candidates.
pub(crate) fn cascade_depth(
    learned_use: &LearnedUse<'_>,
    model: Option<&LearnedReranker>,
    max_results: usize,
) -> usize {
    match (learned_use, model) {
        (LearnedUse::Collect(_), _) => max_results.max(crate::learn::CANDIDATES),
        (LearnedUse::Apply, Some(model)) => max_results.max(model.candidates),
        (LearnedUse::Apply, None) => max_results,
    }
}
