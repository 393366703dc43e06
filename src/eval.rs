//! The `eval` command: its arguments and the wiring around the engine's evaluation
//! (`retrieval_engine::eval`): the settings it reads and the search service it asks, built as
//! `serve` builds it (`startup::state_with`).

use retrieval_engine::{
    eval,
    eval::{run_eval, EvalError, EvalOptions, EvalReport, Report},
    BoostingConfig, Embedder, VectorIndex,
};

use crate::config::Settings;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `retrieval-service eval`: either a BEIR-style passage set (`--corpus`,
/// `--queries`, `--qrels`) or page-level questions over an ingested snapshot (`--questions`,
/// `--index`).
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// Passages, JSON lines {id, title, text}.
    #[arg(long, required_unless_present = "questions", requires_all = ["queries", "qrels"])]
    pub(crate) corpus: Option<PathBuf>,
    /// Queries, JSON lines {id, text}.
    #[arg(long)]
    pub(crate) queries: Option<PathBuf>,
    /// Judgments, TSV query_id, passage_id, relevance (header line optional).
    #[arg(long)]
    pub(crate) qrels: Option<PathBuf>,
    /// Page-level question files (comma-separated), JSON lines {id, query, relevant: [source
    /// paths], platform, ambiguous}; needs --index. Each file is reported on its own, then all of
    /// them out-of-fold (--folds).
    #[arg(long, requires = "index", conflicts_with = "corpus", value_delimiter = ',')]
    pub(crate) questions: Option<Vec<PathBuf>>,
    /// The snapshot(s) written by `ingest` that the questions are asked against: one for every
    /// question file, or one per question file in the same order (comma-separated). `postgres`:
    /// the configured PostgreSQL database (`RETR_POSTGRES_URL`), searched in it.
    #[arg(long, value_delimiter = ',')]
    pub(crate) index: Option<Vec<PathBuf>>,
    /// Folds of the out-of-fold figures (stratified by file, platform and ambiguity).
    #[arg(long, default_value_t = 5)]
    pub(crate) folds: usize,
    /// Seed of the fold split.
    #[arg(long, default_value_t = 20261127)]
    pub(crate) seed: u64,
    /// Tenant to ask (default: the snapshot's only tenant).
    #[arg(long)]
    pub(crate) tenant: Option<String>,
    /// Router modes to compare (comma-separated: none, heuristic, llm).
    #[arg(long, default_value = "none,heuristic", value_delimiter = ',')]
    pub(crate) modes: Vec<String>,
    /// Where the misses (with their hits and miss stage) are written, JSON lines.
    #[arg(long, default_value = ".cache/eval-failures.jsonl")]
    pub(crate) failures: PathBuf,
    /// Embedding cache (JSON lines keyed by model, input kind and text).
    #[arg(long, default_value = ".cache/eval-embeddings.jsonl")]
    pub(crate) embedding_cache: PathBuf,
    /// Cut-off of the metrics.
    #[arg(long, default_value_t = 10)]
    pub(crate) cutoff: usize,
    /// Candidates taken from each of the dense and lexical lists before fusion.
    #[arg(long, default_value_t = 100)]
    pub(crate) depth: usize,
    /// RRF k; defaults to `fusion.k` of boosting.yaml.
    #[arg(long)]
    pub(crate) rrf_k: Option<f32>,
    /// Weight of the dense list; defaults to boosting.yaml.
    #[arg(long)]
    pub(crate) dense_weight: Option<f32>,
    /// Weight of the lexical list; defaults to boosting.yaml.
    #[arg(long)]
    pub(crate) lexical_weight: Option<f32>,
    /// Keep the passage title out of BM25 (by default BM25 sees it, as `lexical_text` does in
    /// the service).
    #[arg(long)]
    pub(crate) lexical_without_title: bool,
    /// Embed "title\ntext" instead of the text alone.
    #[arg(long)]
    pub(crate) title_in_dense: bool,
}

/// What a page-level run takes from the settings.
fn pages_settings(settings: &Settings) -> eval::PagesSettings {
    eval::PagesSettings {
        approximate_min_records: settings.approximate_min_records,
        embedding_batch_size: settings.ingest_embedding_batch_size,
    }
}

/// Runs the page-level evaluation (`--questions`) or the passage-level one.
pub async fn run(settings: &Settings, embedder: Arc<dyn Embedder>, args: &EvalArgs) -> Result<Report, EvalError> {
    match (&args.questions, &args.index) {
        (Some(questions), Some(index)) => {
            if index.len() != 1 && index.len() != questions.len() {
                return Err(EvalError::Index(format!(
                    "{} question files but {} indexes: give one index, or one per question file",
                    questions.len(),
                    index.len()
                )));
            }
            let modes = args
                .modes
                .iter()
                .map(|m| {
                    crate::config::RouterMode::parse(m)
                        .ok_or_else(|| EvalError::Index(format!("unknown router mode {m:?} (none, heuristic, llm)")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            // The search service `serve` would build, over each index.
            let build_service = |index: Arc<dyn VectorIndex>, embedder: Arc<dyn Embedder>| {
                crate::startup::state_with(settings.clone(), index, embedder).search
            };
            // Question files that share an index are asked through one service.
            let mut groups: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
            for (i, file) in questions.iter().enumerate() {
                let snapshot = index.get(i).unwrap_or(&index[0]).clone();
                match groups.iter_mut().find(|(s, _)| *s == snapshot) {
                    Some((_, files)) => files.push(file.clone()),
                    None => groups.push((snapshot, vec![file.clone()])),
                }
            }
            let mut labelled: Vec<eval::Labelled> = Vec::new();
            let mut outcomes: Vec<Vec<eval::QuestionOutcome>> = vec![Vec::new(); modes.len()];
            let mut reports = Vec::new();
            for (number, (snapshot, files)) in groups.iter().enumerate() {
                let mut group_questions = Vec::new();
                for file in files {
                    let name = file.display().to_string();
                    for question in eval::read_questions(file)? {
                        labelled.push(eval::Labelled { file: name.clone(), group: number, question: question.clone() });
                        group_questions.push(question);
                    }
                }
                let failures = numbered(&args.failures, number);
                let run = eval::PagesRun {
                    questions: &group_questions,
                    snapshot,
                    index: configured_index(settings, snapshot).await?,
                    tenant: args.tenant.clone(),
                    modes: modes.clone(),
                    cutoff: args.cutoff.max(1),
                    failures: Some(&failures),
                    embedding_cache: &args.embedding_cache,
                };
                let mut report =
                    eval::run_pages(pages_settings(settings), Arc::clone(&embedder), &run, &build_service).await?;
                for (all, mode) in outcomes.iter_mut().zip(std::mem::take(&mut report.outcomes)) {
                    all.extend(mode);
                }
                reports.push(report);
            }
            let names: Vec<String> = modes.iter().map(|m| m.as_str().to_string()).collect();
            let serve_mode = modes.iter().position(|m| *m == settings.theme_router_mode).unwrap_or(0);
            let per_file = eval::per_file_scores(&labelled, &names, &outcomes);
            let cross = eval::cross_validate(&labelled, &names, &outcomes, serve_mode, args.folds, args.seed);
            Ok(Report::Pages(Box::new(eval::MultiReport { reports, per_file, cross })))
        }
        _ => run_passages(settings, embedder, args).await.map(Report::Passages),
    }
}

/// The index `--index postgres` names: the configured PostgreSQL database, searched in it
/// (`RETR_POSTGRES_URL`, `RETR_POSTGRES_*`), as `serve` with `RETR_POSTGRES_SEARCH=database` does.
/// Any other value is a snapshot file (`None`).
async fn configured_index(
    settings: &Settings,
    index: &std::path::Path,
) -> Result<Option<Arc<dyn VectorIndex>>, EvalError> {
    if index != std::path::Path::new("postgres") {
        return Ok(None);
    }
    let database = retrieval_engine::PostgresSearchIndex::new(&settings.postgres())
        .map_err(|error| EvalError::Index(format!("postgres: {error}")))?;
    database.poll().await.map_err(|error| EvalError::Index(format!("postgres: {error}")))?;
    Ok(Some(database))
}

/// `path` for the first index group, `path` with `-<n>` before its extension for the others.
fn numbered(path: &std::path::Path, number: usize) -> PathBuf {
    if number == 0 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{number}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{number}"),
    };
    path.with_file_name(name)
}

/// Reads the files, wraps `embedder` in the persistent cache and runs `run_eval`.
pub(crate) async fn run_passages(
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    args: &EvalArgs,
) -> Result<EvalReport, EvalError> {
    let missing = |name: &str| EvalError::Index(format!("--{name} is required without --questions"));
    let corpus = eval::read_corpus(args.corpus.as_deref().ok_or_else(|| missing("corpus"))?)?;
    let queries = eval::read_queries(args.queries.as_deref().ok_or_else(|| missing("queries"))?)?;
    let qrels = eval::read_qrels(args.qrels.as_deref().ok_or_else(|| missing("qrels"))?)?;
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
        approximate_min_records: settings.approximate_min_records,
    };
    let cached =
        Arc::new(eval::FileCachedEmbedder::open(embedder, &args.embedding_cache, settings.ingest_embedding_batch_size));
    let report = run_eval(&corpus, &queries, &qrels, cached.clone(), &options).await?;
    tracing::info!(embedded = cached.misses(), "eval finished");
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use retrieval_engine::eval::{run_pages, PageQuestion, PagesRun};
    use retrieval_engine::PseudoEmbedder;
    use retrieval_engine::RouterMode;

    #[tokio::test]
    async fn demo_questions_are_judged_with_miss_stages_and_failures() {
        let embedder: Arc<dyn Embedder> = Arc::new(PseudoEmbedder::new(384));
        let mapping = retrieval_engine::ingest::MappingRules::builtin();
        let snapshot = retrieval_engine::ingest::demo_snapshot(embedder.as_ref(), &mapping).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("demo.json");
        retrieval_engine::write_snapshot_file(&index, &snapshot).unwrap();
        let question = |id: &str, query: &str, relevant: &str| PageQuestion {
            id: id.into(),
            query: query.into(),
            relevant: vec![relevant.into()],
            platform: None,
            ambiguous: false,
        };
        let questions = vec![
            question("hit", "как сбросить пароль", "docs/faq/login-problems.md"),
            question("miss", "как сбросить пароль", "no/such/page.md"),
        ];
        let failures = dir.path().join("failures.jsonl");
        let settings = Settings { themes_path: "config/themes.yaml".into(), ..Settings::default() };
        let run = PagesRun {
            questions: &questions,
            snapshot: &index,
            index: None,
            tenant: Some("demo".into()),
            modes: vec![RouterMode::None, RouterMode::Heuristic],
            cutoff: 10,
            failures: Some(&failures),
            embedding_cache: &dir.path().join("cache.jsonl"),
        };
        let build_service = |index: Arc<dyn VectorIndex>, embedder: Arc<dyn Embedder>| {
            crate::startup::state_with(settings.clone(), index, embedder).search
        };
        let report = run_pages(pages_settings(&settings), embedder, &run, &build_service).await.unwrap();
        assert_eq!(report.modes.len(), 2);
        for mode in &report.modes {
            assert_eq!((mode.questions, mode.hit10, mode.miss_doc), (2, 0.5, 1), "{mode:?}");
        }
        let lines = std::fs::read_to_string(&failures).unwrap();
        let misses: Vec<serde_json::Value> = lines
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|outcome| outcome["id"] == "miss")
            .collect();
        for miss in &misses {
            assert_eq!(miss["miss"], "doc_step");
            assert!(!miss["top_hits"].as_array().unwrap().is_empty(), "a miss lists its hits");
        }
        assert_eq!(misses.len(), 2, "one miss per router mode");
        assert!(report.to_string().contains("MRR@10"));
    }
}
