//! What a tenant's search learns from its own users: a re-ranker of the first hits fitted on the
//! feedback the orchestrator reported (`crate::feedback`), kept only when it beats the service's
//! own order on the feedback it was not fitted on, and read by every search of that tenant
//! (`model::LearnedRerankers`). The searches it learns from are asked by
//! `SearchService::learning_examples`: this module knows nothing of the search itself.

pub(crate) mod features;
pub(crate) mod fit;
pub(crate) mod model;

pub(crate) use features::Row;
pub use features::FEATURES;
pub use fit::{choose_regularization, default_weights, fit, mrr, Example};
pub use model::{model_path, save, HeldOutScore, LearnedReranker, LearnedRerankers, OFF_FILE};

use crate::feedback::{FeedbackRecord, Verdict};

/// Hits a learned re-ranker re-orders (the search takes this many, then cuts to what was asked).
pub(crate) const CANDIDATES: usize = 20;
/// Searches with a used hit among their candidates needed before a model is fitted at all.
pub(crate) const MIN_RECORDS: usize = 30;
/// Held-out parts of the feedback (each scored by a model fitted on the others).
pub const FOLDS: usize = 5;
/// A model is kept only when its held-out wins over the service's order are this unlikely to be
/// chance (one-sided sign test over the searches whose used page moved).
pub(crate) const MAX_P_VALUE: f64 = 0.05;

/// One candidate hit of a search, as the learner reads it.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub hit_id: String,
    pub doc_id: String,
    pub source: String,
    pub row: Row,
}

/// A search and what its answer used: a feedback record, or a labelled question (its relevant
/// pages as used).
#[derive(Debug, Clone)]
pub struct LabelledSearch {
    pub key: String,
    pub query: String,
    /// Hit ids, doc ids or source paths.
    pub used: Vec<String>,
}

impl LabelledSearch {
    /// The record as a labelled search, unless it says nothing to learn from: no used hit, or the
    /// user found the answer unhelpful (what it used was not the answer).
    pub fn from_feedback(record: &FeedbackRecord) -> Option<Self> {
        if record.used.is_empty() || record.verdict == Some(Verdict::Unhelpful) {
            return None;
        }
        Some(Self { key: record.trace_id.clone(), query: record.query.clone(), used: record.used.clone() })
    }
}

/// The result of a refit.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub held_out: HeldOutScore,
    /// The model fitted on all the feedback, when it beat the default order held out.
    pub model: Option<LearnedReranker>,
    /// Why it was kept or not.
    pub reason: String,
}

/// Fits a model on `examples` and keeps it only when, out of fold, it ranks the used pages
/// higher than the service's own order. `regularization` `None`: chosen from the feedback
/// (`fit::choose_regularization`), and the held-out figure includes that choice.
pub fn learn(examples: &[Example], regularization: Option<f64>) -> Outcome {
    let refs: Vec<&Example> = examples.iter().collect();
    let scored = fit::out_of_fold(&refs, regularization, FOLDS);
    let p_value = scored.sign_test_p();
    let held_out = HeldOutScore {
        records: scored.records,
        mrr_default: scored.mrr_default,
        mrr_learned: scored.mrr_learned,
        wins: scored.wins,
        losses: scored.losses,
        p_value,
    };
    let (mrr_default, mrr_learned) = (scored.mrr_default, scored.mrr_learned);
    let usable_count = refs.iter().filter(|e| e.has_used()).count();
    if usable_count < MIN_RECORDS {
        let reason =
            format!("{usable_count} searches with a used hit among the candidates; at least {MIN_RECORDS} needed");
        return Outcome { held_out, model: None, reason };
    }
    let versus = format!(
        "MRR@10 {mrr_learned:.4} vs {mrr_default:.4}, {} searches up, {} down, sign test p = {p_value:.3}",
        scored.wins, scored.losses
    );
    if mrr_learned <= mrr_default || p_value >= MAX_P_VALUE {
        let reason = format!("held out it does not beat the default order clearly enough ({versus})");
        return Outcome { held_out, model: None, reason };
    }
    let usable: Vec<&Example> = refs.into_iter().filter(|e| e.has_used()).collect();
    let regularization = regularization.unwrap_or_else(|| fit::choose_regularization(&usable, FOLDS, "inner:"));
    let model = LearnedReranker {
        features: FEATURES.iter().map(|f| f.to_string()).collect(),
        weights: fit::fit(&usable, regularization),
        candidates: CANDIDATES,
        regularization,
        trained_records: usable.len(),
        held_out: held_out.clone(),
        fitted_at_ms: crate::feedback::now_ms(),
    };
    let reason = format!("held out it beats the default order ({versus})");
    Outcome { held_out, model: Some(model), reason }
}
