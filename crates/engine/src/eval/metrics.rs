//! Ranking metrics over one query: nDCG@k with graded relevance, Recall@k and MRR@k.

use std::collections::HashMap;

/// Relevance grades of one query's judged passages (passage id → grade; 0 = not relevant).
pub(crate) type Judgments = HashMap<String, u32>;

/// nDCG@k with linear gain and `log2(rank + 1)` discount, as trec_eval / pytrec_eval compute it
/// (the BEIR convention). 0 when the query has no relevant passage.
pub(crate) fn ndcg_at_k(ranking: &[String], judgments: &Judgments, k: usize) -> f64 {
    let discounted = |grades: &mut dyn Iterator<Item = u32>| -> f64 {
        grades.take(k).enumerate().map(|(position, grade)| grade as f64 / ((position + 2) as f64).log2()).sum()
    };
    let mut ideal_grades: Vec<u32> = judgments.values().copied().filter(|&g| g > 0).collect();
    ideal_grades.sort_unstable_by(|a, b| b.cmp(a));
    let ideal = discounted(&mut ideal_grades.into_iter());
    if ideal == 0.0 {
        return 0.0;
    }
    let actual = discounted(&mut ranking.iter().map(|id| judgments.get(id).copied().unwrap_or(0)));
    actual / ideal
}

/// Share of the relevant passages found in the top `k`; 0 when the query has none.
pub(crate) fn recall_at_k(ranking: &[String], judgments: &Judgments, k: usize) -> f64 {
    let relevant = judgments.values().filter(|&&g| g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranking.iter().take(k).filter(|id| judgments.get(*id).is_some_and(|&g| g > 0)).count();
    found as f64 / relevant as f64
}

/// Reciprocal rank of the first relevant passage within the top `k`; 0 when none is there.
pub(crate) fn mrr_at_k(ranking: &[String], judgments: &Judgments, k: usize) -> f64 {
    ranking
        .iter()
        .take(k)
        .position(|id| judgments.get(id).is_some_and(|&g| g > 0))
        .map_or(0.0, |position| 1.0 / (position + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranking(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn judged(pairs: &[(&str, u32)]) -> Judgments {
        pairs.iter().map(|(id, g)| (id.to_string(), *g)).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn ndcg_binary_single_relevant() {
        let j = judged(&[("p", 1)]);
        assert!(close(ndcg_at_k(&ranking(&["p", "x"]), &j, 10), 1.0));
        assert!(close(ndcg_at_k(&ranking(&["x", "p"]), &j, 10), 1.0 / 3f64.log2()));
        assert!(close(ndcg_at_k(&ranking(&["x", "y", "p"]), &j, 2), 0.0));
    }

    #[test]
    fn ndcg_graded_hand_computed() {
        // Ranking b(1), x(0), a(2); ideal a(2), b(1).
        // DCG = 1/log2(2) + 2/log2(4) = 1 + 1 = 2; IDCG = 2/1 + 1/log2(3) = 2.630930
        let j = judged(&[("a", 2), ("b", 1), ("c", 0)]);
        let expected = 2.0 / (2.0 + 1.0 / 3f64.log2());
        assert!(close(ndcg_at_k(&ranking(&["b", "x", "a"]), &j, 10), expected));
        assert!((expected - 0.760_187_5).abs() < 1e-6);
    }

    #[test]
    fn recall_counts_relevant_only() {
        let j = judged(&[("a", 1), ("b", 2), ("c", 0)]);
        assert!(close(recall_at_k(&ranking(&["c", "a", "x"]), &j, 10), 0.5));
        assert!(close(recall_at_k(&ranking(&["b", "a"]), &j, 1), 0.5));
        assert!(close(recall_at_k(&ranking(&["a", "b"]), &j, 10), 1.0));
        assert!(close(recall_at_k(&ranking(&["a"]), &judged(&[]), 10), 0.0));
    }

    #[test]
    fn mrr_first_relevant_within_cutoff() {
        let j = judged(&[("a", 1), ("b", 1)]);
        assert!(close(mrr_at_k(&ranking(&["x", "y", "b", "a"]), &j, 10), 1.0 / 3.0));
        assert!(close(mrr_at_k(&ranking(&["x", "y", "b"]), &j, 2), 0.0));
        assert!(close(mrr_at_k(&ranking(&[]), &j, 10), 0.0));
    }
}
