//! The evaluation runner: a flat in-memory index over the corpus (one doc = one section = one
//! chunk per passage), pluggable `Ranker`s, and the metrics table.

use super::data::{EvalQuery, Passage, Qrels};
use super::metrics::{mrr_at_k, ndcg_at_k, recall_at_k};
use super::EvalError;
use crate::embed::{Embedder, InputKind};
use crate::index::InMemoryIndex;
use crate::model::{Metadata, Record, SharedStr, Snapshot};
use crate::router::RouterMode;
use crate::search::boosting_config::{BoostingConfig, FusionConfig};
use crate::search::ranking::RankingMode;
use crate::search::settings::{RuntimeSettings, MAX_RESULTS_CAP};
use crate::search::{SearchRequest, SearchService};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Instant;

/// The tenant every eval record belongs to.
pub(crate) const EVAL_TENANT: &str = "eval";

fn eval_tenant() -> crate::search::TenantId {
    crate::search::TenantId::new(EVAL_TENANT).expect("EVAL_TENANT is a valid tenant id")
}

#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The k of nDCG@k, Recall@k and MRR@k.
    pub cutoff: usize,
    /// How many candidates of each list the hybrid ranker fuses.
    pub depth: usize,
    pub fusion: FusionConfig,
    /// Whether BM25 sees the passage title besides its text.
    pub title_in_lexical: bool,
    /// Whether the passage embedding is computed from "title\ntext" instead of the text alone.
    pub title_in_dense: bool,
    /// When set, an extra "hybrid+boosting" row applies this config after fusion.
    pub boosting: Option<Arc<BoostingConfig>>,
    /// `RETR_APPROXIMATE_MIN_RECORDS`: levels this big are ranked through their partition, built
    /// before the first query (0: exactly).
    pub approximate_min_records: usize,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            cutoff: 10,
            depth: 100,
            fusion: FusionConfig::default(),
            title_in_lexical: true,
            title_in_dense: false,
            boosting: None,
            approximate_min_records: 0,
        }
    }
}

/// Ranks passages for one query; returns passage ids, best first. Implement it over the real
/// search pipeline to evaluate the service end to end.
#[async_trait]
pub(crate) trait Ranker: Send + Sync {
    fn name(&self) -> String;
    async fn rank(&self, query: &EvalQuery, query_embedding: &[f32], limit: usize) -> Result<Vec<String>, EvalError>;
}

/// The text a passage is embedded from.
pub(crate) fn passage_embedding_text(passage: &Passage, options: &EvalOptions) -> String {
    if options.title_in_dense && !passage.title.is_empty() {
        format!("{}\n{}", passage.title, passage.text)
    } else {
        passage.text.clone()
    }
}

/// A flat snapshot: per passage a doc, a section and a chunk record sharing its id (`doc_id`),
/// its text and its embedding. Without `title_in_lexical` the title is left out of the records,
/// because `lexical_text` adds a record's title to what BM25 sees.
pub(crate) fn build_snapshot(corpus: &[Passage], embeddings: Vec<Vec<f32>>, options: &EvalOptions) -> Snapshot {
    let dimension = embeddings.first().map_or(0, Vec::len);
    let mut snapshot = Snapshot {
        format_version: Snapshot::FORMAT_VERSION,
        embedding_model: String::new(),
        dimension,
        ..Snapshot::default()
    };
    for (passage, embedding) in corpus.iter().zip(embeddings) {
        let meta = Metadata {
            tenant_id: EVAL_TENANT.into(),
            doc_id: passage.id.as_str().into(),
            title: if options.title_in_lexical { passage.title.as_str().into() } else { SharedStr::default() },
            content_length: passage.text.chars().count() as u32,
            ..Metadata::default()
        };
        let section_id = format!("{}#s0", passage.id);
        let chunk_id = format!("{section_id}#c0");
        let record = |id: &str, meta: Metadata| Record {
            id: id.to_string(),
            meta,
            text: passage.text.as_str().into(),
            embedding: embedding.clone(),
        };
        snapshot.docs.push(record(&passage.id, meta.clone()));
        let section_meta = Metadata { section_id: Some(section_id.clone()), ..meta.clone() };
        snapshot.sections.push(record(&section_id, section_meta.clone()));
        let chunk_meta = Metadata { chunk_id: Some(chunk_id.clone()), ..section_meta };
        snapshot.chunks.push(record(&chunk_id, chunk_meta));
    }
    snapshot
}

/// Ranks through the service's own search pipeline (`SearchService`, the cascade, fusion and
/// boosting the API uses) in one ranking mode; hits map back to passage ids by `doc_id`.
pub(crate) struct PipelineRanker {
    pub(crate) service: Arc<SearchService>,
    pub(crate) mode: RankingMode,
    pub(crate) label: &'static str,
}

#[async_trait]
impl Ranker for PipelineRanker {
    fn name(&self) -> String {
        self.label.to_string()
    }
    async fn rank(&self, query: &EvalQuery, embedding: &[f32], limit: usize) -> Result<Vec<String>, EvalError> {
        let request = SearchRequest {
            max_results: Some(limit as i64),
            query_embedding: Some(embedding.to_vec()),
            ..SearchRequest::new(eval_tenant(), query.text.clone())
        };
        let response =
            self.service.search_with_mode(&request, self.mode).await.map_err(|e| EvalError::Index(e.to_string()))?;
        Ok(response.hits.into_iter().map(|hit| hit.doc_id).collect())
    }
}

/// A search service over the flat eval index: no themes, no rerank, the doc level wide enough
/// (`depth` docs) that the cascade does not cut a flat corpus, and `cutoff` hits.
pub(crate) fn pipeline_service(index: Arc<InMemoryIndex>, options: &EvalOptions) -> Arc<SearchService> {
    let mut boosting = options.boosting.as_deref().cloned().unwrap_or_default();
    boosting.fusion = options.fusion.clone();
    let cutoff = options.cutoff.clamp(1, MAX_RESULTS_CAP);
    let runtime = RuntimeSettings {
        max_results: cutoff,
        doc_top_k: options.depth.max(cutoff),
        section_top_k: cutoff,
        chunk_top_k: cutoff,
        topk_per_doc: 1,
        min_docs: 0,
        min_score: 0.0,
        enable_filters: true,
        rerank_enabled: false,
        rerank_top_n: 1,
        theme_router_mode: RouterMode::None,
    };
    // Every eval query carries its precomputed embedding: the embedder is never asked.
    let unused_embedder = Arc::new(crate::embed::PseudoEmbedder::new(1));
    Arc::new(SearchService::new(index, unused_embedder, runtime).with_boosting(Arc::new(boosting)))
}

/// Metrics and latency of one ranker over every judged query.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemScores {
    pub name: String,
    pub(crate) ndcg: f64,
    pub recall: f64,
    pub mrr: f64,
    pub(crate) latency_mean_ms: f64,
    pub(crate) latency_p50_ms: f64,
    pub(crate) latency_p99_ms: f64,
}

/// The `fraction` percentile (nearest rank) of ascending `sorted`; 0 when empty.
pub(crate) fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let position = ((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len());
    sorted[position - 1]
}

/// Runs every ranker on every query that has judgments; query vectors are given in query order.
pub(crate) async fn evaluate(
    rankers: &[Arc<dyn Ranker>],
    queries: &[EvalQuery],
    query_embeddings: &[Vec<f32>],
    qrels: &Qrels,
    cutoff: usize,
) -> Result<Vec<SystemScores>, EvalError> {
    let judged: Vec<(&EvalQuery, &Vec<f32>)> =
        queries.iter().zip(query_embeddings).filter(|(query, _)| qrels.contains_key(&query.id)).collect();
    let mut systems = Vec::new();
    for ranker in rankers {
        let (mut ndcg, mut recall, mut mrr) = (0.0, 0.0, 0.0);
        let mut latencies = Vec::with_capacity(judged.len());
        for (query, embedding) in &judged {
            let started = Instant::now();
            let ranking = ranker.rank(query, embedding, cutoff).await?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            let judgments = &qrels[&query.id];
            let query_ndcg = ndcg_at_k(&ranking, judgments, cutoff);
            tracing::debug!(system = ranker.name(), query = %query.id, ndcg = query_ndcg, "query scored");
            ndcg += query_ndcg;
            recall += recall_at_k(&ranking, judgments, cutoff);
            mrr += mrr_at_k(&ranking, judgments, cutoff);
        }
        let count = judged.len().max(1) as f64;
        let mean = latencies.iter().sum::<f64>() / count;
        latencies.sort_by(f64::total_cmp);
        systems.push(SystemScores {
            name: ranker.name(),
            ndcg: ndcg / count,
            recall: recall / count,
            mrr: mrr / count,
            latency_mean_ms: mean,
            latency_p50_ms: percentile(&latencies, 0.5),
            latency_p99_ms: percentile(&latencies, 0.99),
        });
    }
    Ok(systems)
}

/// The outcome of one eval run; `Display` prints the table.
#[derive(Debug, Clone)]
pub struct EvalReport {
    pub(crate) passages: usize,
    pub(crate) queries: usize,
    pub judged_queries: usize,
    pub(crate) cutoff: usize,
    pub(crate) embedding_model: String,
    pub(crate) embedding_ms: f64,
    pub systems: Vec<SystemScores>,
}

impl std::fmt::Display for EvalReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = self.cutoff;
        writeln!(
            f,
            "{} passages, {} queries ({} judged), embeddings: {} ({:.0} ms incl. cache)",
            self.passages, self.queries, self.judged_queries, self.embedding_model, self.embedding_ms
        )?;
        writeln!(
            f,
            "{:<16} {:>9} {:>10} {:>8} {:>9} {:>8} {:>8}",
            "system",
            format!("nDCG@{k}"),
            format!("Recall@{k}"),
            format!("MRR@{k}"),
            "mean ms",
            "p50 ms",
            "p99 ms"
        )?;
        for system in &self.systems {
            writeln!(
                f,
                "{:<16} {:>9.4} {:>10.4} {:>8.4} {:>9.3} {:>8.3} {:>8.3}",
                system.name,
                system.ndcg,
                system.recall,
                system.mrr,
                system.latency_mean_ms,
                system.latency_p50_ms,
                system.latency_p99_ms
            )?;
        }
        Ok(())
    }
}

/// Embeds the corpus and the queries, builds the flat index and evaluates dense, lexical and
/// hybrid (and hybrid+boosting when `options.boosting` is set). Query latency excludes the
/// query embedding, which is precomputed (and cached) for every system alike.
pub async fn run_eval(
    corpus: &[Passage],
    queries: &[EvalQuery],
    qrels: &Qrels,
    embedder: Arc<dyn Embedder>,
    options: &EvalOptions,
) -> Result<EvalReport, EvalError> {
    let started = Instant::now();
    let passage_texts: Vec<String> = corpus.iter().map(|p| passage_embedding_text(p, options)).collect();
    let passage_vectors = embedder.embed(&passage_texts, InputKind::Passage).await?;
    let query_texts: Vec<String> = queries.iter().map(|q| q.text.clone()).collect();
    let query_vectors = embedder.embed(&query_texts, InputKind::Query).await?;
    let embedding_ms = started.elapsed().as_secs_f64() * 1000.0;

    let snapshot = build_snapshot(corpus, passage_vectors, options);
    let index = InMemoryIndex::from_snapshot(snapshot).map_err(|e| EvalError::Index(e.to_string()))?;
    let index = Arc::new(index.approximate_from(options.approximate_min_records));
    let service = pipeline_service(index, options);
    let pipeline =
        |mode, label| -> Arc<dyn Ranker> { Arc::new(PipelineRanker { service: service.clone(), mode, label }) };
    let rankers: Vec<Arc<dyn Ranker>> = vec![
        pipeline(RankingMode::Dense, "dense"),
        pipeline(RankingMode::Lexical, "lexical"),
        pipeline(RankingMode::Hybrid, "hybrid"),
    ];
    let systems = evaluate(&rankers, queries, &query_vectors, qrels, options.cutoff).await?;
    Ok(EvalReport {
        passages: corpus.len(),
        queries: queries.len(),
        judged_queries: queries.iter().filter(|q| qrels.contains_key(&q.id)).count(),
        cutoff: options.cutoff,
        embedding_model: embedder.model_name().to_string(),
        embedding_ms,
        systems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::PseudoEmbedder;

    #[tokio::test]
    async fn every_system_finds_distinct_passages_on_a_tiny_corpus() {
        let passage = |id: &str, text: &str| Passage { id: id.into(), title: String::new(), text: text.into() };
        let corpus = vec![
            passage("p1", "Сертификат устанавливается на Android через настройки безопасности"),
            passage("p2", "Отчёты супервизора показывают нагрузку операторов"),
            passage("p3", "Токен API выдаёт администратор в личном кабинете"),
        ];
        let query = |id: &str, text: &str| EvalQuery { id: id.into(), text: text.into() };
        let queries = vec![
            query("q1", "установка сертификата android"),
            query("q2", "отчёты супервизора"),
            query("q3", "unjudged"),
        ];
        let qrels: Qrels = [("q1", "p1"), ("q2", "p2")]
            .iter()
            .map(|(q, p)| (q.to_string(), [(p.to_string(), 1)].into_iter().collect()))
            .collect();
        let report = run_eval(&corpus, &queries, &qrels, Arc::new(PseudoEmbedder::new(64)), &EvalOptions::default())
            .await
            .unwrap();
        assert_eq!(report.judged_queries, 2);
        let names: Vec<&str> = report.systems.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["dense", "lexical", "hybrid"]);
        for system in &report.systems {
            assert_eq!((system.ndcg, system.recall, system.mrr), (1.0, 1.0, 1.0), "{system:?}");
        }
        assert!(report.to_string().contains("nDCG@10"));
    }
}
