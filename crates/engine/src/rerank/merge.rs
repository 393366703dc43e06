//! `merge_rerank`: applies a (possibly partial or noisy) rerank answer to the original order.

use super::RerankScore;
use std::collections::HashMap;

/// Every original id exactly once: the ids the reranker scored first, by score descending (ties
/// keep the original order), then the unscored ids in their original order. Scores for ids not in
/// `original_ids`, repeated scores (the first wins), non-finite scores and repeated original ids are
/// ignored, so nothing new can appear and nothing can be lost.
pub fn merge_rerank(original_ids: &[String], scores: &[RerankScore]) -> Vec<(String, Option<f32>)> {
    let mut first_position: HashMap<&str, usize> = HashMap::new();
    for (position, id) in original_ids.iter().enumerate() {
        first_position.entry(id.as_str()).or_insert(position);
    }
    let mut score_of: HashMap<usize, f32> = HashMap::new();
    for score in scores.iter().filter(|score| score.score.is_finite()) {
        if let Some(&position) = first_position.get(score.section_id.as_str()) {
            score_of.entry(position).or_insert(score.score);
        }
    }
    let mut unscored: Vec<usize> =
        first_position.values().copied().filter(|position| !score_of.contains_key(position)).collect();
    unscored.sort_unstable();
    let mut scored: Vec<(usize, f32)> = score_of.into_iter().collect();
    scored.sort_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
    scored
        .into_iter()
        .map(|(position, score)| (original_ids[position].clone(), Some(score)))
        .chain(unscored.into_iter().map(|position| (original_ids[position].clone(), None)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(values: &[&str]) -> Vec<String> {
        values.iter().map(|value| value.to_string()).collect()
    }

    fn score(id: &str, score: f32) -> RerankScore {
        RerankScore { section_id: id.into(), score }
    }

    fn order(merged: &[(String, Option<f32>)]) -> Vec<&str> {
        merged.iter().map(|(id, _)| id.as_str()).collect()
    }

    #[test]
    fn scored_first_by_score_then_unscored_in_original_order() {
        let merged = merge_rerank(&ids(&["a", "b", "c", "d", "e"]), &[score("d", 0.9), score("b", 0.95)]);
        assert_eq!(order(&merged), ["b", "d", "a", "c", "e"]);
        assert_eq!(merged[0].1, Some(0.95));
        assert_eq!(merged[2].1, None);
    }

    #[test]
    fn noisy_answers_never_add_or_lose_ids() {
        let original = ids(&["a", "b", "c"]);
        let cases: Vec<(Vec<RerankScore>, Vec<&str>)> = vec![
            (vec![], vec!["a", "b", "c"]),
            (vec![score("zzz", 1.0), score("c", 0.1)], vec!["c", "a", "b"]),
            (vec![score("b", 0.2), score("b", 0.9), score("a", 0.5)], vec!["a", "b", "c"]),
            (vec![score("a", f32::NAN), score("c", 0.3)], vec!["c", "a", "b"]),
            (vec![score("c", 0.5), score("a", 0.5)], vec!["a", "c", "b"]),
        ];
        for (scores, expected) in cases {
            assert_eq!(order(&merge_rerank(&original, &scores)), expected, "{scores:?}");
        }
    }

    #[test]
    fn repeated_original_ids_appear_once() {
        let merged = merge_rerank(&ids(&["a", "b", "a"]), &[score("a", 1.0)]);
        assert_eq!(order(&merged), ["a", "b"]);
    }
}
