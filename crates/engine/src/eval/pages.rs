//! Page-level evaluation on real users' questions: every question of a set in the format of
//! a corpus's `dev_questions.jsonl` ({"id","query","relevant":[source paths],
//! "platform","ambiguous"}) goes through the real `SearchService` (routing, the cascade, fusion,
//! boosting, clarification) over an ingested snapshot, once per router mode. Reports page MRR@10,
//! hit@k, recall@10, platform questions right first, ambiguity flags, where each miss happened
//! (doc step, section step, or ranked below the cut-off) and writes a failures file.

use super::file_cached_embedder::FileCachedEmbedder;
use super::EvalError;
use crate::embed::Embedder;
use crate::index::{InMemoryIndex, VectorIndex};
use crate::router::RouterMode;
use crate::router::Theme;
use crate::search::{SearchRequest, SearchResponse, SearchService};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// One labelled question: relevant pages are `source` paths (relative to the tree root).
#[derive(Debug, Clone, Deserialize)]
pub struct PageQuestion {
    pub id: String,
    pub query: String,
    pub relevant: Vec<String>,
    #[serde(default)]
    pub platform: Option<String>,
    #[serde(default)]
    pub ambiguous: bool,
}

impl PageQuestion {
    /// The platform a question is specific to (`None` for general or unlabelled questions).
    fn specific_platform(&self) -> Option<&str> {
        self.platform.as_deref().filter(|p| !p.is_empty() && *p != "general")
    }
}

pub fn read_questions(path: &Path) -> Result<Vec<PageQuestion>, EvalError> {
    super::data::read_jsonl(path)
}

/// Where a question's relevant pages were lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MissStage {
    /// No relevant page among the docs the doc step chose.
    DocStep,
    /// A relevant doc was chosen, but none of its sections passed the section step.
    SectionStep,
    /// Relevant sections were ranked, but below the cut-off of the answer.
    BelowCutoff,
}

/// The outcome of one question in one router mode.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionOutcome {
    pub(crate) id: String,
    pub(crate) query: String,
    pub(crate) mode: String,
    /// 1-based position of the first hit on a relevant page.
    pub(crate) rank: Option<usize>,
    pub(crate) miss: Option<MissStage>,
    pub(crate) relevant: Vec<String>,
    pub(crate) platform: Option<String>,
    pub(crate) ambiguous: bool,
    pub(crate) flagged: bool,
    pub(crate) filter_applied: bool,
    pub(crate) primary_theme: Option<String>,
    /// The answer's hits: (source, heading, score).
    pub(crate) top_hits: Vec<(String, String, f32)>,
    pub(crate) took_ms: f64,
    /// The answer's `confidence`, and what it was computed from (`eval` refits it out-of-fold).
    pub(crate) confidence: f32,
    #[serde(skip)]
    pub(crate) confidence_features: Option<crate::search::confidence::Features>,
    /// For a question about one platform: whether the router's primary theme is of that platform.
    pub(crate) router_right: Option<bool>,
    /// How strongly the hits split across themes when no keyword or user metadata named a theme
    /// (`None`: no split).
    pub(crate) split_ratio: Option<f32>,
    /// Learned themes ranked by the question's words: the best one's probability.
    pub(crate) words_probability: Option<f32>,
}

/// Aggregates of one router mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModeScores {
    pub(crate) mode: String,
    pub questions: usize,
    pub(crate) mrr: f64,
    pub(crate) hit1: f64,
    pub(crate) hit3: f64,
    pub hit10: f64,
    /// Share of a question's relevant pages among the hits, averaged.
    pub(crate) recall10: f64,
    pub(crate) platform_questions: usize,
    pub(crate) platform_first: f64,
    /// Platform questions whose router's primary theme is of that platform.
    pub(crate) router_right: f64,
    pub(crate) ambiguous_questions: usize,
    pub(crate) ambiguous_flagged: f64,
    pub(crate) clear_flagged: f64,
    pub miss_doc: usize,
    pub(crate) miss_section: usize,
    pub(crate) miss_below: usize,
    pub(crate) took_mean_ms: f64,
    pub(crate) took_p99_ms: f64,
}

/// Scores one answer against one question.
pub(crate) fn judge(question: &PageQuestion, response: &SearchResponse, mode: &str, cutoff: usize) -> QuestionOutcome {
    let relevant: HashSet<&str> = question.relevant.iter().map(String::as_str).collect();
    let hits = &response.hits[..response.hits.len().min(cutoff)];
    let rank = hits.iter().position(|hit| relevant.contains(hit.metadata.source.as_str())).map(|p| p + 1);
    let miss = match (rank, &response.steps) {
        (Some(_), _) => None,
        (None, Some(steps)) => {
            if !steps.docs.iter().any(|d| relevant.contains(d.metadata.source.as_str())) {
                Some(MissStage::DocStep)
            } else if !steps.sections.iter().any(|s| relevant.contains(s.metadata.source.as_str())) {
                Some(MissStage::SectionStep)
            } else {
                Some(MissStage::BelowCutoff)
            }
        }
        (None, None) => Some(MissStage::BelowCutoff),
    };
    QuestionOutcome {
        id: question.id.clone(),
        query: question.query.clone(),
        mode: mode.to_string(),
        rank,
        miss,
        relevant: question.relevant.clone(),
        platform: question.platform.clone(),
        ambiguous: question.ambiguous,
        flagged: response.routing.result.requires_disambiguation,
        filter_applied: response.routing.filter_applied,
        primary_theme: response.routing.result.primary_theme.clone(),
        top_hits: hits
            .iter()
            .map(|hit| (hit.metadata.source.clone(), hit.metadata.heading.clone(), hit.score))
            .collect(),
        took_ms: response.took_ms,
        confidence: response.confidence,
        confidence_features: response.confidence_features,
        router_right: None,
        split_ratio: response.split_ratio,
        words_probability: response.words_probability,
    }
}

/// Whether the router named the question's platform: the primary theme's `platform` (or, for a
/// theme without one, its `section`, else its id) equals the question's platform. `None` for a question about no
/// single platform.
pub(crate) fn router_names_platform(
    question: &PageQuestion,
    response: &SearchResponse,
    themes: &[Theme],
) -> Option<bool> {
    let wanted = question.specific_platform()?;
    let primary = response.routing.result.primary_theme.as_deref();
    Some(primary.and_then(|id| themes.iter().find(|t| t.id == id)).is_some_and(|theme| {
        [theme.platform.as_deref(), theme.section.as_deref(), Some(theme.id.as_str())]
            .into_iter()
            .flatten()
            .find(|value| !value.is_empty())
            .is_some_and(|value| value.eq_ignore_ascii_case(wanted))
    }))
}

/// Aggregates the outcomes of one mode.
pub(crate) fn aggregate(mode: &str, questions: &[PageQuestion], outcomes: &[QuestionOutcome]) -> ModeScores {
    let n = outcomes.len().max(1) as f64;
    let mut scores = ModeScores { mode: mode.to_string(), questions: outcomes.len(), ..ModeScores::default() };
    let mut took: Vec<f64> = Vec::new();
    let (mut platform_first, mut ambiguous_flagged, mut clear_flagged, mut clear) = (0usize, 0usize, 0usize, 0usize);
    let mut router_right = 0usize;
    for (question, outcome) in questions.iter().zip(outcomes) {
        let rank = outcome.rank.unwrap_or(usize::MAX);
        scores.mrr += outcome.rank.map_or(0.0, |r| 1.0 / r as f64);
        scores.hit1 += f64::from(u8::from(rank <= 1));
        scores.hit3 += f64::from(u8::from(rank <= 3));
        scores.hit10 += f64::from(u8::from(rank <= 10));
        let relevant: HashSet<&str> = question.relevant.iter().map(String::as_str).collect();
        let found: HashSet<&str> =
            outcome.top_hits.iter().map(|(source, _, _)| source.as_str()).filter(|s| relevant.contains(s)).collect();
        scores.recall10 += found.len() as f64 / relevant.len().max(1) as f64;
        if question.specific_platform().is_some() {
            scores.platform_questions += 1;
            platform_first += usize::from(rank <= 1);
            router_right += usize::from(outcome.router_right == Some(true));
        }
        if question.ambiguous {
            scores.ambiguous_questions += 1;
            ambiguous_flagged += usize::from(outcome.flagged);
        } else {
            clear += 1;
            clear_flagged += usize::from(outcome.flagged);
        }
        match outcome.miss {
            Some(MissStage::DocStep) => scores.miss_doc += 1,
            Some(MissStage::SectionStep) => scores.miss_section += 1,
            Some(MissStage::BelowCutoff) => scores.miss_below += 1,
            None => {}
        }
        took.push(outcome.took_ms);
    }
    scores.mrr /= n;
    scores.hit1 /= n;
    scores.hit3 /= n;
    scores.hit10 /= n;
    scores.recall10 /= n;
    scores.platform_first = platform_first as f64 / scores.platform_questions.max(1) as f64;
    scores.router_right = router_right as f64 / scores.platform_questions.max(1) as f64;
    scores.ambiguous_flagged = ambiguous_flagged as f64 / scores.ambiguous_questions.max(1) as f64;
    scores.clear_flagged = clear_flagged as f64 / clear.max(1) as f64;
    scores.took_mean_ms = took.iter().sum::<f64>() / n;
    took.sort_by(f64::total_cmp);
    scores.took_p99_ms = super::runner::percentile(&took, 0.99);
    scores
}

/// The report of a page-level run; `Display` prints the table.
#[derive(Debug, Clone)]
pub struct PagesReport {
    pub(crate) questions: usize,
    pub(crate) docs: usize,
    pub modes: Vec<ModeScores>,
    pub(crate) failures_path: Option<String>,
    /// Every question's outcome, per mode (in the order of `modes` and of the questions).
    pub outcomes: Vec<Vec<QuestionOutcome>>,
}

impl std::fmt::Display for PagesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} questions over {} pages", self.questions, self.docs)?;
        writeln!(
            f,
            "{:<10} {:>7} {:>6} {:>6} {:>6} {:>9} {:>10} {:>9} {:>9} {:>9} {:>13} {:>8} {:>8}",
            "router",
            "MRR@10",
            "hit@1",
            "hit@3",
            "hit@10",
            "recall@10",
            "plat_first",
            "router_ok",
            "amb_flag",
            "clear_flag",
            "miss doc/sec/10",
            "mean ms",
            "p99 ms"
        )?;
        for m in &self.modes {
            writeln!(
                f,
                "{:<10} {:>7.3} {:>6.3} {:>6.3} {:>6.3} {:>9.3} {:>10.3} {:>9.3} {:>9.3} {:>9.3} {:>13} {:>8.2} {:>8.2}",
                m.mode,
                m.mrr,
                m.hit1,
                m.hit3,
                m.hit10,
                m.recall10,
                m.platform_first,
                m.router_right,
                m.ambiguous_flagged,
                m.clear_flagged,
                format!("{}/{}/{}", m.miss_doc, m.miss_section, m.miss_below),
                m.took_mean_ms,
                m.took_p99_ms
            )?;
        }
        if let Some(path) = &self.failures_path {
            write!(f, "misses with their hits: {path}")?;
        }
        Ok(())
    }
}

/// What a page-level run takes from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagesSettings {
    /// Tenant levels of at least this many records are ranked through a partition, as in `serve`.
    pub approximate_min_records: usize,
    /// Questions per embedding call when the cache lacks them.
    pub embedding_batch_size: usize,
}

/// Builds the search service a run asks, over the run's index and its cached query embedder:
/// the service builds it as `serve` does (themes, boosting, synonyms, reranker, LLM router).
pub(crate) type BuildService<'a> =
    &'a (dyn Fn(Arc<dyn VectorIndex>, Arc<dyn Embedder>) -> Arc<SearchService> + Send + Sync);

/// What a page-level run needs besides the settings.
pub struct PagesRun<'a> {
    pub questions: &'a [PageQuestion],
    pub snapshot: &'a Path,
    /// An index to search instead of the snapshot file (a database the configuration names).
    pub index: Option<Arc<dyn VectorIndex>>,
    pub tenant: Option<String>,
    pub modes: Vec<RouterMode>,
    pub cutoff: usize,
    pub failures: Option<&'a Path>,
    pub embedding_cache: &'a Path,
}

/// Runs every question through the `SearchService` that `build_service` makes (the service's
/// `eval` builds it exactly as `serve` does), over the snapshot; query embeddings are cached on
/// disk.
pub async fn run_pages(
    settings: PagesSettings,
    embedder: Arc<dyn Embedder>,
    run: &PagesRun<'_>,
    build_service: BuildService<'_>,
) -> Result<PagesReport, EvalError> {
    let index: Arc<dyn VectorIndex> = match &run.index {
        Some(index) => Arc::clone(index),
        None => {
            let snapshot =
                crate::index::memory::read_snapshot_file(run.snapshot).map_err(|e| EvalError::Index(e.to_string()))?;
            let index = InMemoryIndex::from_snapshot(snapshot).map_err(|e| EvalError::Index(e.to_string()))?;
            Arc::new(index.approximate_from(settings.approximate_min_records))
        }
    };
    let stats = crate::index::VectorIndex::stats(index.as_ref()).await.map_err(|e| EvalError::Index(e.to_string()))?;
    // Query vectors from another model than the index's would rank at random: refuse, don't guess.
    if !stats.embedding_model.is_empty() && stats.embedding_model != embedder.model_name() {
        return Err(EvalError::Index(format!(
            "the index was embedded with {:?} but queries would be embedded with {:?}; \
             set RETR_EMBEDDING_* as for ingest",
            stats.embedding_model,
            embedder.model_name()
        )));
    }
    let tenant = match &run.tenant {
        Some(tenant) => tenant.clone(),
        None if stats.tenants.len() == 1 => stats.tenants.keys().next().cloned().unwrap_or_default(),
        None => {
            return Err(EvalError::Index(format!(
                "the index holds tenants {:?}; pass --tenant",
                stats.tenants.keys().collect::<Vec<_>>()
            )))
        }
    };
    let docs = stats.tenants.get(&tenant).map_or(0, |t| t.docs);
    let tenant_id = crate::search::TenantId::new(tenant.clone()).map_err(|e| EvalError::Index(e.to_string()))?;
    let cached: Arc<dyn Embedder> =
        Arc::new(FileCachedEmbedder::open(embedder, run.embedding_cache, settings.embedding_batch_size));
    // Embed every question once up front (cached on disk), so the latency column is the search
    // alone in every mode, as for precomputed query embeddings.
    let texts: Vec<String> = run.questions.iter().map(|q| q.query.clone()).collect();
    cached.embed(&texts, crate::embed::InputKind::Query).await?;
    let service = build_service(Arc::clone(&index) as _, Arc::clone(&cached));

    let source = index.pin().await.map_err(|e| EvalError::Index(e.to_string()))?;
    let themes = service.themes_for(&source, &tenant_id).await;
    let mut modes = Vec::new();
    let mut failures = Vec::new();
    let mut all_outcomes = Vec::new();
    for &mode in &run.modes {
        service
            .update_runtime(|current| {
                Ok::<_, std::convert::Infallible>(crate::search::settings::RuntimeSettings {
                    theme_router_mode: mode,
                    ..current.clone()
                })
            })
            .ok();
        let mut outcomes = Vec::with_capacity(run.questions.len());
        for question in run.questions {
            let request = SearchRequest {
                max_results: Some(run.cutoff as i64),
                include_steps: true,
                ..SearchRequest::new(tenant_id.clone(), question.query.clone())
            };
            let response = service.search(&request).await.map_err(|e| EvalError::Index(e.to_string()))?;
            let mut outcome = judge(question, &response, mode.as_str(), run.cutoff);
            outcome.router_right = router_names_platform(question, &response, &themes);
            outcomes.push(outcome);
        }
        modes.push(aggregate(mode.as_str(), run.questions, &outcomes));
        failures.extend(outcomes.iter().filter(|o| o.rank != Some(1) || o.flagged != o.ambiguous).cloned());
        all_outcomes.push(outcomes);
    }
    let failures_path = match run.failures {
        Some(path) => {
            let write = || -> std::io::Result<()> {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
                for failure in &failures {
                    serde_json::to_writer(&mut file, failure).map_err(std::io::Error::other)?;
                    file.write_all(b"\n")?;
                }
                file.flush()
            };
            write().map_err(|source| EvalError::Io { path: path.to_path_buf(), source })?;
            Some(path.display().to_string())
        }
        None => None,
    };
    Ok(PagesReport { questions: run.questions.len(), docs, modes, failures_path, outcomes: all_outcomes })
}
