//! Out-of-fold figures for the page-level evaluation: k folds stratified by question file,
//! platform and ambiguity (fixed seed), so a choice made on some questions is judged on others.
//!
//! Two things are chosen from labelled questions and judged out-of-fold here:
//! - the router mode: each fold takes the mode with the best MRR@10 on the other folds, and its
//!   MRR on the held-out fold is what counts;
//! - the `confidence` model: refitted on the other folds, scored on the held-out fold (AUC,
//!   Brier score, reliability bins), beside the shipped model's figures on every question.

use super::pages::{aggregate, ModeScores, PageQuestion, QuestionOutcome};
use crate::search::confidence::{auc, reliability, ConfidenceModel, Features};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// One question with the file it came from.
#[derive(Debug, Clone)]
pub struct Labelled {
    pub file: String,
    /// Which index the question was asked against (the number of its group in `eval`).
    pub group: usize,
    pub question: PageQuestion,
}

/// (file, platform, ambiguous): the questions dealt over the folds together.
type Stratum = (String, String, bool);

/// The fold (0..k) of each question: within each stratum (file, platform, ambiguous), questions
/// are ordered by a hash of (seed, id) and dealt round-robin, so every fold gets its share of
/// each stratum and the split never depends on the order of the file.
pub(crate) fn assign_folds(questions: &[Labelled], folds: usize, seed: u64) -> Vec<usize> {
    let folds = folds.max(2);
    let mut strata: BTreeMap<Stratum, Vec<(Vec<u8>, usize)>> = BTreeMap::new();
    for (i, labelled) in questions.iter().enumerate() {
        let q = &labelled.question;
        let key = (labelled.file.clone(), q.platform.clone().unwrap_or_default(), q.ambiguous);
        let mut hasher = Sha256::new();
        hasher.update(seed.to_le_bytes());
        hasher.update(labelled.file.as_bytes());
        hasher.update(q.id.as_bytes());
        strata.entry(key).or_default().push((hasher.finalize().to_vec(), i));
    }
    let mut assignment = vec![0; questions.len()];
    // Continue the deal across strata, so small strata do not all start at fold 0.
    let mut next = 0usize;
    for members in strata.values_mut() {
        members.sort();
        for (_, i) in members.iter() {
            assignment[*i] = next % folds;
            next += 1;
        }
    }
    assignment
}

/// Mean and standard deviation of a list.
fn spread(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The out-of-fold figures.
#[derive(Debug, Clone)]
pub struct CrossValidation {
    pub(crate) folds: usize,
    pub(crate) seed: u64,
    /// Per mode: (mode, MRR@10 of each held-out fold).
    pub(crate) mode_folds: Vec<(String, Vec<f64>)>,
    /// The mode each fold chose on its training folds, and the pooled held-out scores of those
    /// choices.
    pub(crate) chosen: Vec<String>,
    pub(crate) chosen_scores: ModeScores,
    /// Confidence refitted per fold: AUC, Brier score and reliability bins on the held-out answers.
    pub(crate) confidence_auc: Option<f64>,
    pub(crate) confidence_brier: f64,
    pub(crate) confidence_bins: Vec<(f64, f64, usize)>,
    /// The shipped model (`ConfidenceModel::default`) on every question (not out-of-fold).
    pub(crate) shipped_auc: Option<f64>,
    pub(crate) shipped_brier: f64,
    /// The model fitted on every question (what `ConfidenceModel::default` would become).
    pub(crate) fitted_on_all: ConfidenceModel,
    /// `router.ambiguity_min_ratio` and `router.learned_named_probability` fitted per fold, and
    /// the held-out flag rates with them: (thresholds, ambiguous flagged, clear flagged).
    pub(crate) ambiguity: (Vec<Thresholds>, f64, f64),
    /// The thresholds fitted on every question.
    pub(crate) ambiguity_on_all: Thresholds,
    /// Whether any answer was routed by the question's words over learned themes (else the
    /// named probability is not fitted: nothing depends on it).
    pub(crate) words_routed: bool,
}

/// Most wrongly flagged clear questions a fitted ambiguity threshold may cost (training rate).
pub(crate) const MAX_CLEAR_FLAGGED: f64 = 0.08;

/// A question for the clarification thresholds: is it ambiguous, its split ratio, and the
/// probability its words gave the best learned theme.
type SplitMember = (bool, Option<f32>, Option<f32>);

/// `router.ambiguity_min_ratio` and `router.learned_named_probability` (above 1: never named).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Thresholds {
    pub(crate) ratio: f32,
    pub(crate) named: f32,
}

/// The named probabilities tried (1.01: a learned theme is never named by words).
const NAMED_CANDIDATES: [f32; 5] = [0.9, 0.95, 0.99, 0.999, 1.01];

/// Whether a member is flagged: its hits split at least `ratio` and its words did not name a
/// learned theme.
fn flagged(member: &SplitMember, thresholds: Thresholds) -> bool {
    let (_, ratio, words) = member;
    ratio.is_some_and(|r| r >= thresholds.ratio) && !words.is_some_and(|p| p >= thresholds.named)
}

/// Flag rates of thresholds: (ambiguous flagged, clear flagged) over `members`.
fn flag_rates(members: &[SplitMember], thresholds: Thresholds) -> (f64, f64) {
    let (mut ambiguous, mut ambiguous_flagged, mut clear, mut clear_flagged) = (0usize, 0usize, 0usize, 0usize);
    for member in members {
        if member.0 {
            ambiguous += 1;
            ambiguous_flagged += usize::from(flagged(member, thresholds));
        } else {
            clear += 1;
            clear_flagged += usize::from(flagged(member, thresholds));
        }
    }
    (ambiguous_flagged as f64 / ambiguous.max(1) as f64, clear_flagged as f64 / clear.max(1) as f64)
}

/// The clarification thresholds for `members`: the pair that flags the most ambiguous questions
/// while wrongly flagging at most `MAX_CLEAR_FLAGGED` of the clear ones (the fewest clear ones
/// when none does); ties go to the higher ratio, then the higher named probability. With no
/// member routed by words, the named probability stays the default.
pub(crate) fn fit_ambiguity_thresholds(members: &[SplitMember]) -> Thresholds {
    let mut ratios: Vec<f32> = members.iter().filter_map(|(_, r, _)| *r).collect();
    ratios.push(0.0);
    ratios.push(1.01);
    ratios.sort_by(f32::total_cmp);
    ratios.dedup();
    let named: Vec<f32> = if members.iter().any(|(_, _, words)| words.is_some()) {
        NAMED_CANDIDATES.to_vec()
    } else {
        vec![crate::router::LEARNED_NAMED_PROBABILITY]
    };
    let rated: Vec<(Thresholds, f64, f64)> = named
        .iter()
        .flat_map(|&named| ratios.iter().map(move |&ratio| Thresholds { ratio, named }))
        .map(|t| {
            let (ambiguous, clear) = flag_rates(members, t);
            (t, ambiguous, clear)
        })
        .collect();
    let higher = |a: &Thresholds, b: &Thresholds| a.ratio.total_cmp(&b.ratio).then(a.named.total_cmp(&b.named));
    let feasible = rated.iter().filter(|(_, _, clear)| *clear <= MAX_CLEAR_FLAGGED);
    let best = feasible.max_by(|a, b| a.1.total_cmp(&b.1).then(higher(&a.0, &b.0)));
    match best {
        Some(best) => best.0,
        None => rated
            .iter()
            .min_by(|a, b| a.2.total_cmp(&b.2).then(higher(&b.0, &a.0)))
            .map_or(Thresholds { ratio: 1.01, named: 1.01 }, |r| r.0),
    }
}

fn brier(scored: &[(f32, bool)]) -> f64 {
    let n = scored.len().max(1) as f64;
    scored.iter().map(|(p, y)| (f64::from(*p) - f64::from(u8::from(*y))).powi(2)).sum::<f64>() / n
}

/// Cross-validates: `outcomes[m][i]` is question `i`'s outcome in mode `m`.
pub fn cross_validate(
    questions: &[Labelled],
    modes: &[String],
    outcomes: &[Vec<QuestionOutcome>],
    serve_mode: usize,
    folds: usize,
    seed: u64,
) -> CrossValidation {
    let folds = folds.max(2);
    let fold_of = assign_folds(questions, folds, seed);
    let plain: Vec<PageQuestion> = questions.iter().map(|l| l.question.clone()).collect();
    let mrr = |mode: usize, keep: &dyn Fn(usize) -> bool| -> f64 {
        let picked: Vec<&QuestionOutcome> = (0..plain.len()).filter(|&i| keep(i)).map(|i| &outcomes[mode][i]).collect();
        picked.iter().map(|o| o.rank.map_or(0.0, |r| 1.0 / r as f64)).sum::<f64>() / picked.len().max(1) as f64
    };
    let mode_folds: Vec<(String, Vec<f64>)> = modes
        .iter()
        .enumerate()
        .map(|(m, name)| (name.clone(), (0..folds).map(|f| mrr(m, &|i| fold_of[i] == f)).collect()))
        .collect();
    let mut chosen = Vec::new();
    let mut chosen_questions = Vec::new();
    let mut chosen_outcomes = Vec::new();
    let mut held_out_scored: Vec<(f32, bool)> = Vec::new();
    let mut thresholds = Vec::new();
    let mut held_out_flags: Vec<(bool, bool)> = Vec::new();
    let split_of = |mode: usize, i: usize| {
        (plain[i].ambiguous, outcomes[mode][i].split_ratio, outcomes[mode][i].words_probability)
    };
    // The confidence model is fitted and judged on the answers of the mode chosen in each fold.
    for fold in 0..folds {
        let best = (0..modes.len())
            .max_by(|&a, &b| mrr(a, &|i| fold_of[i] != fold).total_cmp(&mrr(b, &|i| fold_of[i] != fold)))
            .unwrap_or(0);
        chosen.push(modes.get(best).cloned().unwrap_or_default());
        for i in (0..plain.len()).filter(|&i| fold_of[i] == fold) {
            chosen_questions.push(plain[i].clone());
            chosen_outcomes.push(outcomes[best][i].clone());
        }
        let train: Vec<(Features, bool)> =
            (0..plain.len()).filter(|&i| fold_of[i] != fold).filter_map(|i| sample(&outcomes[best][i])).collect();
        let train_splits: Vec<SplitMember> =
            (0..plain.len()).filter(|&i| fold_of[i] != fold).map(|i| split_of(best, i)).collect();
        let fitted = fit_ambiguity_thresholds(&train_splits);
        thresholds.push(fitted);
        for i in (0..plain.len()).filter(|&i| fold_of[i] == fold) {
            let member = split_of(best, i);
            held_out_flags.push((member.0, flagged(&member, fitted)));
        }
        let model = ConfidenceModel::fit(&train);
        for i in (0..plain.len()).filter(|&i| fold_of[i] == fold) {
            let outcome = &outcomes[best][i];
            held_out_scored.push((model.probability(outcome.confidence_features.as_ref()), outcome.rank == Some(1)));
        }
    }
    // The shipped model and the fit on every question: the answers of the mode `serve` uses.
    let serve = outcomes.get(serve_mode);
    let all: Vec<(Features, bool)> = serve.map_or(Vec::new(), |o| o.iter().filter_map(sample).collect());
    let shipped: Vec<(f32, bool)> =
        serve.map_or(Vec::new(), |o| o.iter().map(|o| (o.confidence, o.rank == Some(1))).collect());
    let rate = |ambiguous: bool| {
        let members: Vec<bool> = held_out_flags.iter().filter(|(a, _)| *a == ambiguous).map(|(_, f)| *f).collect();
        members.iter().filter(|f| **f).count() as f64 / members.len().max(1) as f64
    };
    let ambiguity = (thresholds, rate(true), rate(false));
    let every_split: Vec<SplitMember> =
        (0..plain.len()).map(|i| split_of(serve_mode.min(outcomes.len().saturating_sub(1)), i)).collect();
    CrossValidation {
        ambiguity,
        ambiguity_on_all: fit_ambiguity_thresholds(&every_split),
        words_routed: outcomes.iter().flatten().any(|outcome| outcome.words_probability.is_some()),
        folds,
        seed,
        mode_folds,
        chosen,
        chosen_scores: aggregate("cv-chosen", &chosen_questions, &chosen_outcomes),
        confidence_auc: auc(&held_out_scored),
        confidence_brier: brier(&held_out_scored),
        confidence_bins: reliability(&held_out_scored, 5),
        shipped_auc: auc(&shipped),
        shipped_brier: brier(&shipped),
        fitted_on_all: ConfidenceModel::fit(&all),
    }
}

fn sample(outcome: &QuestionOutcome) -> Option<(Features, bool)> {
    outcome.confidence_features.map(|f| (f, outcome.rank == Some(1)))
}

impl std::fmt::Display for CrossValidation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "out-of-fold ({} folds stratified by file, platform and ambiguity; seed {}):",
            self.folds, self.seed
        )?;
        for (mode, folds) in &self.mode_folds {
            let (mean, sd) = spread(folds);
            let list: Vec<String> = folds.iter().map(|v| format!("{v:.3}")).collect();
            writeln!(f, "  {mode:<10} MRR@10 per fold {} -> {mean:.3} ± {sd:.3}", list.join(" "))?;
        }
        let s = &self.chosen_scores;
        writeln!(
            f,
            "  router mode chosen on the training folds ({}): held-out MRR@10 {:.3}, top 10 {:.3}, platform first {:.3}, router right {:.3}, ambiguous flagged {:.3}, clear flagged {:.3}",
            self.chosen.join(","),
            s.mrr,
            s.hit10,
            s.platform_first,
            s.router_right,
            s.ambiguous_flagged,
            s.clear_flagged
        )?;
        let auc_text = |auc: Option<f64>| auc.map_or("n/a".to_string(), |a| format!("{a:.3}"));
        writeln!(
            f,
            "  confidence (P first hit relevant), refitted per fold: held-out AUC {}, Brier {:.3}; shipped model on all: AUC {}, Brier {:.3}",
            auc_text(self.confidence_auc),
            self.confidence_brier,
            auc_text(self.shipped_auc),
            self.shipped_brier
        )?;
        let bins: Vec<String> =
            self.confidence_bins.iter().map(|(p, rate, n)| format!("{p:.2}->{rate:.2} (n={n})")).collect();
        writeln!(f, "  reliability (mean predicted -> observed): {}", bins.join(", "))?;
        let (thresholds, ambiguous, clear) = &self.ambiguity;
        let named = |t: &Thresholds| if t.named > 1.0 { "never".to_string() } else { format!("{}", t.named) };
        let show = |t: &Thresholds| {
            if self.words_routed {
                format!("{:.2}/{}", t.ratio, named(t))
            } else {
                format!("{:.2}", t.ratio)
            }
        };
        let list: Vec<String> = thresholds.iter().map(show).collect();
        let what =
            if self.words_routed { "ambiguity_min_ratio/learned_named_probability" } else { "ambiguity_min_ratio" };
        writeln!(
            f,
            "  {what} fitted per fold [{}]: held-out ambiguous flagged {ambiguous:.3}, clear flagged {clear:.3}; fitted on every question {}",
            list.join(", "),
            show(&self.ambiguity_on_all)
        )?;
        let m = &self.fitted_on_all;
        let weights: Vec<String> = m.weights.iter().map(|w| format!("{w:.3}")).collect();
        write!(f, "  fitted on every question: weights [{}], bias {:.3}", weights.join(", "), m.bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(id: usize, platform: &str, ambiguous: bool) -> Labelled {
        Labelled {
            file: "f".into(),
            group: 0,
            question: PageQuestion {
                id: format!("q{id}"),
                query: String::new(),
                relevant: vec![],
                platform: Some(platform.into()),
                ambiguous,
            },
        }
    }

    #[test]
    fn the_ambiguity_threshold_keeps_clear_questions_unflagged() {
        // Ambiguous questions split strongly (0.8–0.9), clear ones weakly (0.2–0.5) or not at all.
        let mut members = vec![(true, Some(0.9), None), (true, Some(0.8), None), (true, Some(0.85), None)];
        members.push((true, None, None));
        members.extend((0..20).map(|i| (false, if i % 2 == 0 { Some(0.2 + i as f32 * 0.015) } else { None }, None)));
        let fitted = fit_ambiguity_thresholds(&members);
        assert!(fitted.ratio > 0.5 && fitted.ratio <= 0.8, "{fitted:?}");
        assert_eq!(fitted.named, crate::router::LEARNED_NAMED_PROBABILITY, "no answer was routed by words");
        assert_eq!(flag_rates(&members, fitted), (0.75, 0.0));
        // Nothing separates them: the fewest clear flags win, i.e. flag nothing.
        let hopeless = vec![(true, Some(0.5), None), (false, Some(0.5), None), (false, Some(0.9), None)];
        assert_eq!(flag_rates(&hopeless, fit_ambiguity_thresholds(&hopeless)).1, 0.0);
    }

    /// Clear questions split as much as ambiguous ones, but their words name a learned theme
    /// with more certainty: the named probability is what separates them.
    #[test]
    fn the_named_probability_is_fitted_where_the_words_separate_clear_from_ambiguous() {
        let mut members: Vec<SplitMember> = (0..5).map(|_| (true, Some(0.9), Some(0.8))).collect();
        members.extend((0..20).map(|i| (false, Some(0.9), Some(if i < 19 { 0.999 } else { 0.8 }))));
        let fitted = fit_ambiguity_thresholds(&members);
        assert!(fitted.named > 0.8 && fitted.named <= 0.999, "{fitted:?}");
        assert_eq!(flag_rates(&members, fitted), (1.0, 0.05));
        // The ratio alone could only flag everything or nothing.
        let never = Thresholds { ratio: fitted.ratio, named: 1.01 };
        assert_eq!(flag_rates(&members, never), (1.0, 1.0));
    }

    #[test]
    fn folds_are_stratified_stable_and_independent_of_file_order() {
        let mut questions: Vec<Labelled> =
            (0..50).map(|i| question(i, if i % 2 == 0 { "a" } else { "b" }, i % 10 == 0)).collect();
        let folds = assign_folds(&questions, 5, 42);
        for fold in 0..5 {
            let members: Vec<usize> = (0..50).filter(|&i| folds[i] == fold).collect();
            assert_eq!(members.len(), 10, "fold {fold}");
            assert_eq!(members.iter().filter(|&&i| questions[i].question.ambiguous).count(), 1, "fold {fold}");
        }
        assert_eq!(folds, assign_folds(&questions, 5, 42), "same seed, same folds");
        assert_ne!(folds, assign_folds(&questions, 5, 43), "another seed, another split");
        let before: BTreeMap<String, usize> =
            questions.iter().zip(&folds).map(|(q, f)| (q.question.id.clone(), *f)).collect();
        questions.reverse();
        let after = assign_folds(&questions, 5, 42);
        for (q, f) in questions.iter().zip(&after) {
            assert_eq!(before[&q.question.id], *f);
        }
    }
}
