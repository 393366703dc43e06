//! The `eval` command: ranking quality (nDCG@10, Recall@10, MRR@10) and query latency of dense,
//! lexical and hybrid retrieval on a BEIR-style corpus (formats of ../shared/eval/xquad-ru).

pub mod cache;
pub mod data;
pub mod metrics;
pub mod runner;

use crate::config::Settings;
use crate::embed::{EmbedError, Embedder};
use crate::search::boosting_config::BoostingConfig;
use std::path::PathBuf;
use std::sync::Arc;

pub use runner::{evaluate, run_eval, EvalOptions, EvalReport, Ranker, SystemScores};

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, message: String },
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("index: {0}")]
    Index(String),
}

/// Arguments of `retrieval-service eval`.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// Passages, JSON lines {id, title, text}.
    #[arg(long)]
    pub corpus: PathBuf,
    /// Queries, JSON lines {id, text}.
    #[arg(long)]
    pub queries: PathBuf,
    /// Judgments, TSV query_id, passage_id, relevance (header line optional).
    #[arg(long)]
    pub qrels: PathBuf,
    /// Embedding cache (JSON lines keyed by model, input kind and text).
    #[arg(long, default_value = ".cache/eval-embeddings.jsonl")]
    pub embedding_cache: PathBuf,
    /// Cut-off of the metrics.
    #[arg(long, default_value_t = 10)]
    pub cutoff: usize,
    /// Candidates taken from each of the dense and lexical lists before fusion.
    #[arg(long, default_value_t = 100)]
    pub depth: usize,
    /// RRF k; defaults to `fusion.k` of boosting.yaml.
    #[arg(long)]
    pub rrf_k: Option<f32>,
    /// Weight of the dense list; defaults to boosting.yaml.
    #[arg(long)]
    pub dense_weight: Option<f32>,
    /// Weight of the lexical list; defaults to boosting.yaml.
    #[arg(long)]
    pub lexical_weight: Option<f32>,
    /// Keep the passage title out of BM25 (by default BM25 sees it, as `lexical_text` does in
    /// the service).
    #[arg(long)]
    pub lexical_without_title: bool,
    /// Embed "title\ntext" instead of the text alone.
    #[arg(long)]
    pub title_in_dense: bool,
}

/// Reads the files, wraps `embedder` in the persistent cache and runs `run_eval`.
pub async fn run(settings: &Settings, embedder: Arc<dyn Embedder>, args: &EvalArgs) -> Result<EvalReport, EvalError> {
    let corpus = data::read_corpus(&args.corpus)?;
    let queries = data::read_queries(&args.queries)?;
    let qrels = data::read_qrels(&args.qrels)?;
    let boosting = BoostingConfig::load_shared(&settings.boosting_path);
    let mut fusion = boosting.fusion.clone();
    fusion.k = args.rrf_k.unwrap_or(fusion.k);
    fusion.dense_weight = args.dense_weight.unwrap_or(fusion.dense_weight);
    fusion.lexical_weight = args.lexical_weight.unwrap_or(fusion.lexical_weight);
    let options = EvalOptions {
        cutoff: args.cutoff.max(1),
        depth: args.depth.max(1),
        fusion,
        title_in_lexical: !args.lexical_without_title,
        title_in_dense: args.title_in_dense,
        boosting: Some(boosting),
    };
    let cached = Arc::new(cache::CachedEmbedder::open(embedder, &args.embedding_cache, settings.embedding_batch_size));
    let report = run_eval(&corpus, &queries, &qrels, cached.clone(), &options).await?;
    tracing::info!(embedded = cached.misses(), "eval finished");
    Ok(report)
}
