//! Fitting a re-ranker: a pairwise logistic model (a used page against the other candidates of
//! the same search) over standardised feature differences, with an L2 penalty on every weight
//! but the service's score, so that with little feedback the model stays the service's own order
//! and only consistent evidence moves it. Solved by Newton's method (15 weights).

use super::features::{Row, FEATURES};

/// One search of the feedback: its candidates' rows in the service's order and which of them
/// the answer used.
#[derive(Debug, Clone)]
pub struct Example {
    pub rows: Vec<Row>,
    pub used: Vec<bool>,
    /// Decides the example's fold (the feedback's trace id).
    pub key: String,
}

impl Example {
    pub fn has_used(&self) -> bool {
        self.used.iter().any(|used| *used)
    }
}

/// The service's own order: the score alone.
pub fn default_weights() -> Vec<f64> {
    let mut weights = vec![0.0; FEATURES.len()];
    weights[0] = 1.0;
    weights
}

/// Negatives paired with each used candidate (the first ones in the service's order).
const NEGATIVES_PER_POSITIVE: usize = 10;
/// The penalty on the score's own weight: only there to keep a separable score finite.
const SCORE_PENALTY: f64 = 1e-3;

/// 1-based place of the first used candidate when ordered by `weights` (ties keep the service's
/// order), if within `cutoff`.
pub(crate) fn first_used_place(example: &Example, weights: &[f64], cutoff: usize) -> Option<usize> {
    let mut order: Vec<(usize, f64)> = example
        .rows
        .iter()
        .enumerate()
        .map(|(place, row)| (place, row.iter().zip(weights).map(|(x, w)| x * w).sum()))
        .collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    order.iter().take(cutoff).position(|(place, _)| example.used[*place]).map(|p| p + 1)
}

/// MRR@10 of the first used candidate over `examples` (0 for one with none in the top 10).
pub fn mrr(examples: &[&Example], weights: &[f64]) -> f64 {
    if examples.is_empty() {
        return 0.0;
    }
    let total: f64 = examples.iter().filter_map(|e| first_used_place(e, weights, 10)).map(|p| 1.0 / p as f64).sum();
    total / examples.len() as f64
}

/// The fitted weights (in the features' own units), or the default ones when `examples` give
/// no pair.
pub fn fit(examples: &[&Example], regularization: f64) -> Vec<f64> {
    let n = FEATURES.len();
    let mut pairs: Vec<Vec<f64>> = Vec::new();
    for example in examples {
        let positives = example.used.iter().enumerate().filter(|(_, u)| **u).map(|(i, _)| i);
        for positive in positives {
            let negatives =
                example.used.iter().enumerate().filter(|(_, u)| !**u).map(|(i, _)| i).take(NEGATIVES_PER_POSITIVE);
            for negative in negatives {
                pairs.push((0..n).map(|j| example.rows[positive][j] - example.rows[negative][j]).collect());
            }
        }
    }
    if pairs.is_empty() {
        return default_weights();
    }
    // Pair differences are symmetric around 0: scale each feature by its root mean square.
    let scale: Vec<f64> = (0..n)
        .map(|j| (pairs.iter().map(|d| d[j] * d[j]).sum::<f64>() / pairs.len() as f64).sqrt().max(1e-6))
        .collect();
    for pair in &mut pairs {
        for j in 0..n {
            pair[j] /= scale[j];
        }
    }
    let penalty: Vec<f64> = (0..n).map(|j| if j == 0 { SCORE_PENALTY } else { regularization }).collect();
    let mut weights = vec![0.0; n];
    for _ in 0..50 {
        let mut gradient: Vec<f64> = (0..n).map(|j| 2.0 * penalty[j] * weights[j]).collect();
        let mut hessian = vec![vec![0.0; n]; n];
        for j in 0..n {
            hessian[j][j] = 2.0 * penalty[j];
        }
        for pair in &pairs {
            let margin: f64 = pair.iter().zip(&weights).map(|(x, w)| x * w).sum();
            let p = 1.0 / (1.0 + (-margin).exp());
            let curvature = p * (1.0 - p);
            for j in 0..n {
                gradient[j] -= (1.0 - p) * pair[j];
                for k in 0..n {
                    hessian[j][k] += curvature * pair[j] * pair[k];
                }
            }
        }
        let Some(step) = solve(hessian, gradient) else { break };
        let mut largest: f64 = 0.0;
        for j in 0..n {
            weights[j] -= step[j];
            largest = largest.max(step[j].abs());
        }
        if largest < 1e-7 {
            break;
        }
    }
    if weights.iter().any(|w| !w.is_finite()) || weights[0] <= 0.0 {
        return default_weights();
    }
    // Back to the features' units, the score's weight 1 (an order does not change with a
    // positive factor).
    let unit = weights[0] / scale[0];
    (0..n).map(|j| weights[j] / scale[j] / unit).collect()
}

/// Solves `a x = b` (a symmetric positive definite) by Gaussian elimination with pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for column in 0..n {
        let pivot = (column..n).max_by(|&i, &j| a[i][column].abs().total_cmp(&a[j][column].abs()))?;
        if a[pivot][column].abs() < 1e-12 {
            return None;
        }
        a.swap(column, pivot);
        b.swap(column, pivot);
        let (upper, lower) = a.split_at_mut(column + 1);
        let pivot_row = &upper[column];
        for (offset, target) in lower.iter_mut().enumerate() {
            let factor = target[column] / pivot_row[column];
            for (value, pivot_value) in target[column..].iter_mut().zip(&pivot_row[column..]) {
                *value -= factor * pivot_value;
            }
            b[column + 1 + offset] -= factor * b[column];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let rest: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - rest) / a[row][row];
    }
    Some(x)
}

/// The fold (of `folds`) an example is held out in: FNV-1a of its key, so a record keeps its
/// fold as feedback grows.
pub(crate) fn fold_of(key: &str, folds: usize) -> usize {
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in key.bytes() {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    (hash % folds.max(1) as u64) as usize
}

/// The penalties a refit chooses from when none is given.
pub(crate) const REGULARIZATION_GRID: [f64; 7] = [1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0];

/// The penalty of `REGULARIZATION_GRID` whose models rank the used pages best out of fold
/// (folds of `salt`ed keys, so that inside an outer fold the inner folds are not the outer ones);
/// a tie goes to the larger penalty.
pub fn choose_regularization(examples: &[&Example], folds: usize, salt: &str) -> f64 {
    let mut best = (f64::MIN, REGULARIZATION_GRID[REGULARIZATION_GRID.len() - 1]);
    for &regularization in REGULARIZATION_GRID.iter().rev() {
        let learned = out_of_fold_with(examples, folds, salt, &|train| fit(train, regularization)).mrr_learned;
        if learned > best.0 + 1e-9 {
            best = (learned, regularization);
        }
    }
    best.1
}

/// Out-of-fold MRR@10 over `examples` (one without a used candidate counts 0) of the default
/// order and of the weights `fitted` gives for each fold's training part, and the examples scored.
fn out_of_fold_with(
    examples: &[&Example],
    folds: usize,
    salt: &str,
    fitted: &dyn Fn(&[&Example]) -> Vec<f64>,
) -> OutOfFold {
    let (mut default_total, mut learned_total) = (0.0, 0.0);
    let (mut wins, mut losses) = (0, 0);
    let reciprocal =
        |example: &Example, weights: &[f64]| first_used_place(example, weights, 10).map_or(0.0, |p| 1.0 / p as f64);
    for fold in 0..folds {
        let (held, train): (Vec<&Example>, Vec<&Example>) =
            examples.iter().copied().partition(|e| fold_of(&format!("{salt}{}", e.key), folds) == fold);
        if held.is_empty() {
            continue;
        }
        let usable: Vec<&Example> = train.into_iter().filter(|e| e.has_used()).collect();
        let weights = fitted(&usable);
        for example in held {
            let (before, after) = (reciprocal(example, &default_weights()), reciprocal(example, &weights));
            default_total += before;
            learned_total += after;
            wins += usize::from(after > before);
            losses += usize::from(after < before);
        }
    }
    let count = examples.len().max(1) as f64;
    OutOfFold {
        mrr_default: default_total / count,
        mrr_learned: learned_total / count,
        records: examples.len(),
        wins,
        losses,
    }
}

/// Out-of-fold figures of a refit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OutOfFold {
    pub mrr_default: f64,
    pub mrr_learned: f64,
    /// Searches scored (one whose used pages are not among the candidates counts 0).
    pub records: usize,
    /// Searches whose used page the learned order puts higher / lower than the service's.
    pub wins: usize,
    pub losses: usize,
}

impl OutOfFold {
    /// The one-sided sign test's p-value of "the learned order is better": the chance of at
    /// least `wins` wins among `wins + losses` changed searches if each were a coin toss.
    pub(crate) fn sign_test_p(&self) -> f64 {
        let n = self.wins + self.losses;
        if n == 0 {
            return 1.0;
        }
        // Σ_{k ≥ wins} C(n, k) / 2^n, in logarithms (n may be thousands).
        let ln_choose = |k: usize| -> f64 { (1..=k).map(|i| ((n - k + i) as f64).ln() - (i as f64).ln()).sum::<f64>() };
        (self.wins..=n).map(|k| (ln_choose(k) - n as f64 * std::f64::consts::LN_2).exp()).sum::<f64>().min(1.0)
    }
}

/// Out-of-fold MRR@10 of the default order and of the model fitted without each fold: with the
/// given penalty, or (`None`) with the penalty chosen on each training part alone (nested), so
/// the figure judges the whole refit on feedback it never saw.
pub(crate) fn out_of_fold(examples: &[&Example], regularization: Option<f64>, folds: usize) -> OutOfFold {
    out_of_fold_with(examples, folds, "", &|train| {
        let chosen = regularization.unwrap_or_else(|| choose_regularization(train, folds, "inner:"));
        fit(train, chosen)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Searches where the used hit is always the one with the best title overlap (feature 10),
    /// placed second or third by the score.
    fn examples(count: usize) -> Vec<Example> {
        (0..count)
            .map(|i| {
                let used_place = 1 + i % 2;
                let rows = (0..10)
                    .map(|place| {
                        let mut row = [0.0; FEATURES.len()];
                        row[0] = 1.0 - place as f64 * 0.05;
                        row[10] = if place == used_place { 0.8 } else { 0.1 + (place % 3) as f64 * 0.05 };
                        row
                    })
                    .collect();
                Example { rows, used: (0..10).map(|p| p == used_place).collect(), key: format!("t{i}") }
            })
            .collect()
    }

    #[test]
    fn consistent_feedback_moves_the_order_and_is_measured_held_out() {
        let all = examples(60);
        let refs: Vec<&Example> = all.iter().collect();
        let weights = fit(&refs, 1.0);
        assert!(weights[10] > 0.0, "{weights:?}");
        assert!(mrr(&refs, &weights) > 0.9);
        assert!(mrr(&refs, &default_weights()) < 0.5);
        let scored = out_of_fold(&refs, Some(1.0), 5);
        assert_eq!(scored.records, 60);
        assert!(scored.mrr_learned > scored.mrr_default + 0.3, "{scored:?}");
        assert!(scored.sign_test_p() < 0.001, "{scored:?}");
    }

    #[test]
    fn little_feedback_changes_little() {
        let all = examples(2);
        let refs: Vec<&Example> = all.iter().collect();
        let few = fit(&refs, 100.0);
        let many_examples = examples(400);
        let many = fit(&many_examples.iter().collect::<Vec<_>>(), 100.0);
        assert!(few[10].abs() < many[10].abs() / 5.0, "{} vs {}", few[10], many[10]);
    }

    #[test]
    fn the_chosen_penalty_is_measured_on_feedback_it_was_not_chosen_on() {
        let all = examples(60);
        let refs: Vec<&Example> = all.iter().collect();
        assert!(REGULARIZATION_GRID.contains(&choose_regularization(&refs, 5, "")));
        let scored = out_of_fold(&refs, None, 5);
        assert!(scored.mrr_learned > scored.mrr_default + 0.3, "{scored:?}");
    }

    #[test]
    fn no_pairs_keep_the_default_order() {
        let mut none = examples(3);
        for example in &mut none {
            example.used.iter_mut().for_each(|used| *used = false);
        }
        assert_eq!(fit(&none.iter().collect::<Vec<_>>(), 1.0), default_weights());
    }

    #[test]
    fn the_sign_test_asks_for_more_wins_than_chance_gives() {
        let scored = |wins, losses| OutOfFold { mrr_default: 0.0, mrr_learned: 0.0, records: 100, wins, losses };
        assert!((scored(1, 0).sign_test_p() - 0.5).abs() < 1e-12);
        assert!((scored(5, 5).sign_test_p() - 0.623046875).abs() < 1e-9);
        assert!(scored(15, 5).sign_test_p() < 0.05);
        assert!(scored(12, 8).sign_test_p() > 0.05);
        assert_eq!(scored(0, 0).sign_test_p(), 1.0);
    }

    #[test]
    fn folds_are_stable_and_spread() {
        assert_eq!(fold_of("trace-1", 5), fold_of("trace-1", 5));
        let counts = (0..1000).fold([0; 5], |mut counts, i| {
            counts[fold_of(&format!("t{i}"), 5)] += 1;
            counts
        });
        assert!(counts.iter().all(|&c| c > 150), "{counts:?}");
    }
}
