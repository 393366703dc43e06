//! The `learn` command: refits a tenant's re-ranker on its feedback (`RETR_FEEDBACK_DIR`, and
//! labelled questions given as feedback), keeps it only when it beats the service's own order on
//! the feedback it was not fitted on, and writes it beside the feedback, where a running service
//! picks it up (`learn::LearnedRerankers`). `--held-out` scores it on other labelled questions.

use crate::config::Settings;
use retrieval_engine::{
    eval::{read_questions, FileCachedEmbedder},
    learn,
    learn::LabelledSearch,
    Embedder, FeedbackStore, TenantId,
};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `retrieval-service learn`.
#[derive(Debug, Clone, clap::Args)]
pub struct LearnArgs {
    /// The snapshot written by `ingest` that the feedback's queries are asked against.
    #[arg(long)]
    pub(crate) index: PathBuf,
    /// The tenant whose re-ranker is refitted.
    #[arg(long)]
    pub(crate) tenant: String,
    /// Labelled question files (comma-separated; JSON lines {id, query, relevant: [source paths]})
    /// taken as feedback too: their relevant pages as the hits used.
    #[arg(long, value_delimiter = ',')]
    pub(crate) questions: Vec<PathBuf>,
    /// Labelled question files to score the service's order and the refitted model on
    /// (never fitted on).
    #[arg(long, value_delimiter = ',')]
    pub(crate) held_out: Vec<PathBuf>,
    /// The L2 penalty on the weights besides the score's: higher, more feedback is needed to
    /// move. Default: chosen from the feedback (out of fold, among 1, 3, 10, … 1000).
    #[arg(long)]
    pub(crate) regularization: Option<f64>,
    /// Report only; write no model.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Query embedding cache (JSON lines), shared with `eval`.
    #[arg(long, default_value = ".cache/eval-embeddings.jsonl")]
    pub(crate) embedding_cache: PathBuf,
}

fn labelled_questions(files: &[PathBuf]) -> Result<Vec<LabelledSearch>, String> {
    let mut searches = Vec::new();
    for file in files {
        for question in read_questions(file).map_err(|error| error.to_string())? {
            searches.push(LabelledSearch {
                key: format!("{}:{}", file.display(), question.id),
                query: question.query,
                used: question.relevant,
            });
        }
    }
    Ok(searches)
}

/// Runs the command and returns its report.
pub async fn run(settings: &Settings, embedder: Arc<dyn Embedder>, args: &LearnArgs) -> Result<String, String> {
    let tenant = TenantId::new(args.tenant.clone()).map_err(|error| format!("--tenant: {error}"))?;
    if let Some(regularization) = args.regularization.filter(|r| !(*r >= 0.0 && r.is_finite())) {
        return Err(format!("--regularization: must be a number ≥ 0, got {regularization}"));
    }
    let mut searches = Vec::new();
    let mut stored = 0;
    if let Some(dir) = &settings.feedback_dir {
        let store = FeedbackStore::open(dir, settings.feedback_limits()).map_err(|error| error.to_string())?;
        let records = store.read(&tenant).map_err(|error| error.to_string())?;
        stored = records.len();
        searches.extend(records.iter().filter_map(LabelledSearch::from_feedback));
    }
    let from_store = searches.len();
    searches.extend(labelled_questions(&args.questions)?);
    let held_out = labelled_questions(&args.held_out)?;
    if searches.is_empty() {
        return Err(
            "no feedback to learn from: RETR_FEEDBACK_DIR holds none for this tenant and no --questions given".into()
        );
    }
    let snapshot = retrieval_engine::read_snapshot_file(&args.index).map_err(|error| format!("--index: {error}"))?;
    let index = Arc::new(retrieval_engine::InMemoryIndex::from_snapshot(snapshot).map_err(|error| error.to_string())?);
    let cached: Arc<dyn Embedder> =
        Arc::new(FileCachedEmbedder::open(embedder, &args.embedding_cache, settings.ingest_embedding_batch_size));
    let queries: Vec<String> = searches.iter().chain(&held_out).map(|s| s.query.clone()).collect();
    cached.embed(&queries, retrieval_engine::InputKind::Query).await.map_err(|error| error.to_string())?;
    let service = crate::startup::state_with(settings.clone(), index, cached).search;
    let examples = service.learning_examples(&tenant, &searches).await.map_err(|error| error.to_string())?;
    let outcome = learn::learn(&examples, args.regularization);
    let mut report = String::new();
    let _ = writeln!(
        report,
        "tenant {tenant}: {} searches to learn from ({from_store} of {stored} stored feedback records, {} labelled \
         questions)",
        searches.len(),
        searches.len() - from_store
    );
    let held = &outcome.held_out;
    let _ = writeln!(
        report,
        "held-out feedback ({} folds, {} searches): MRR@10 {:.4} (service's order) → {:.4} (learned)",
        learn::FOLDS,
        held.records,
        held.mrr_default,
        held.mrr_learned
    );
    let usable: Vec<&learn::Example> = examples.iter().filter(|e| e.has_used()).collect();
    let regularization =
        args.regularization.unwrap_or_else(|| learn::choose_regularization(&usable, learn::FOLDS, "inner:"));
    let fitted = learn::fit(&usable, regularization);
    let weights: Vec<String> =
        learn::FEATURES.iter().zip(&fitted).map(|(name, weight)| format!("{name} {weight:+.4}")).collect();
    let _ = writeln!(report, "regularization {regularization}; weights: {}", weights.join(", "));
    if !held_out.is_empty() {
        let scored = service.learning_examples(&tenant, &held_out).await.map_err(|error| error.to_string())?;
        let refs: Vec<&learn::Example> = scored.iter().collect();
        let kept = outcome.model.as_ref().map_or(learn::default_weights(), |model| model.weights.clone());
        let _ = writeln!(
            report,
            "--held-out ({} questions): MRR@10 {:.4} (service's order) → {:.4} (what the service would use) / {:.4} \
             (the fitted model, kept or not)",
            refs.len(),
            learn::mrr(&refs, &learn::default_weights()),
            learn::mrr(&refs, &kept),
            learn::mrr(&refs, &fitted)
        );
    }
    let _ = writeln!(report, "{}", outcome.reason);
    match (&outcome.model, &settings.feedback_dir, args.dry_run) {
        (Some(_), _, true) => report.push_str("dry run: no model written\n"),
        (Some(model), Some(dir), false) => {
            let path = learn::save(dir, &tenant, model).map_err(|error| error.to_string())?;
            let _ = writeln!(report, "model written to {} (a running service swaps it in)", path.display());
        }
        (Some(_), None, false) => report.push_str("RETR_FEEDBACK_DIR is not set: no model written\n"),
        (None, _, _) => report.push_str("no model written: the tenant keeps the service's order (or its last model)\n"),
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use retrieval_engine::fixtures;
    use retrieval_engine::{now_ms, FeedbackRecord, Verdict};

    fn record(trace: &str, used: &[&str], verdict: Option<Verdict>) -> FeedbackRecord {
        FeedbackRecord {
            at_ms: now_ms(),
            trace_id: trace.into(),
            query: "лицензия".into(),
            used: used.iter().map(|u| u.to_string()).collect(),
            shown: vec![],
            verdict,
        }
    }

    #[tokio::test]
    async fn learn_reads_the_tenants_feedback_and_keeps_the_defaults_without_enough_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("index.json");
        retrieval_engine::write_snapshot_file(&snapshot, &fixtures::snapshot()).unwrap();
        let feedback = dir.path().join("feedback");
        let settings = Settings {
            embedding_dimension: fixtures::DIMENSION,
            feedback_dir: Some(feedback.clone()),
            ..Settings::default()
        };
        let store = FeedbackStore::open(&feedback, settings.feedback_limits()).unwrap();
        store.append("t1", &record("a", &["docs/faq/flat"], Some(Verdict::Helpful))).await.unwrap();
        store.append("t1", &record("b", &["docs/faq/flat"], Some(Verdict::Unhelpful))).await.unwrap();
        store.append("t1", &record("c", &[], None)).await.unwrap();
        store.append("t2", &record("d", &["docs/faq/flat"], None)).await.unwrap();
        drop(store);
        let args = LearnArgs {
            index: snapshot,
            tenant: "t1".into(),
            questions: vec![],
            held_out: vec![],
            regularization: None,
            dry_run: false,
            embedding_cache: dir.path().join("cache.jsonl"),
        };
        let embedder: Arc<dyn Embedder> = Arc::new(retrieval_engine::PseudoEmbedder::new(fixtures::DIMENSION));
        let report = run(&settings, Arc::clone(&embedder), &args).await.unwrap();
        // One of t1's three records says what was used and was not found unhelpful; t2's is not read.
        assert!(report.contains("1 searches to learn from (1 of 3 stored feedback records"), "{report}");
        assert!(report.contains("at least 30 needed"), "{report}");
        assert!(!retrieval_engine::learn::model_path(&feedback, "t1").exists());
        let nobody = LearnArgs { tenant: "t3".into(), ..args };
        assert!(run(&settings, embedder, &nobody).await.unwrap_err().contains("no feedback to learn from"));
    }
}
