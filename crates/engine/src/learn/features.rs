//! What a learned re-ranker reads of each candidate hit: 15 numbers that mean the same on any
//! site (the set `bench/rerank_probe.py` reads over HTTP), computed from the cascade's own
//! evidence, so the service and the learner see the same values.

use crate::model::Metadata;

/// The features, in the order of a row and of a model's weights.
pub const FEATURES: [&str; 15] = [
    "score",
    "gap to first",
    "log place",
    "cosine",
    "cosine gap",
    "log cosine rank",
    "lexical / best",
    "log lexical rank",
    "page evidence",
    "log doc-step rank",
    "title overlap",
    "heading overlap",
    "router agrees",
    "boost factor",
    "log section place",
];

pub(crate) type Row = [f64; FEATURES.len()];

/// The words of a text as the overlap features compare them: lower-cased runs of letters and
/// digits of at least 3 characters, cut to their first 5 (a crude stem that works across
/// Russian and English inflections).
fn words(text: &str) -> std::collections::HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .map(|word| word.chars().take(5).collect())
        .collect()
}

/// What a row is computed from: one hit's evidence as the cascade ranked it.
pub(crate) struct HitEvidence<'a> {
    pub(crate) meta: &'a Metadata,
    /// The final score.
    pub(crate) score: f32,
    /// Rank (1-based) and cosine in the dense list, when the hit was in it.
    pub(crate) dense: Option<(usize, f32)>,
    /// Rank (1-based) and BM25 in the lexical list, when the hit was in it.
    pub(crate) lexical: Option<(usize, f32)>,
    pub(crate) fused_normalized: f32,
    pub(crate) page_evidence: Option<f32>,
}

/// One row per hit, in the hits' order. `docs` is the doc ids of the doc step's list (its order
/// gives the doc-step rank), `labels` the hits' theme labels and `primary_theme` the router's.
pub(crate) fn rows(
    query: &str,
    hits: &[HitEvidence<'_>],
    docs: &[&str],
    labels: &[Option<String>],
    primary_theme: Option<&str>,
) -> Vec<Row> {
    let Some(first) = hits.first() else { return Vec::new() };
    let asked = words(query);
    let share = |text: &str| {
        let found = words(text);
        asked.iter().filter(|word| found.contains(*word)).count() as f64 / asked.len().max(1) as f64
    };
    let doc_rank: std::collections::HashMap<&str, usize> =
        docs.iter().enumerate().rev().map(|(rank, doc)| (*doc, rank)).collect();
    let best_cosine = hits.iter().filter_map(|hit| hit.dense.map(|d| d.1 as f64)).fold(0.0, f64::max);
    let best_lexical = hits.iter().filter_map(|hit| hit.lexical.map(|l| l.1 as f64)).fold(0.0, f64::max);
    let best_lexical = if best_lexical > 0.0 { best_lexical } else { 1.0 };
    hits.iter()
        .enumerate()
        .map(|(place, hit)| {
            let meta = hit.meta;
            let cosine = hit.dense.map(|d| d.1 as f64);
            let score = hit.score as f64;
            let fused = if hit.fused_normalized != 0.0 { hit.fused_normalized as f64 } else { 1.0 };
            [
                score,
                score - first.score as f64,
                ((place + 1) as f64).ln(),
                cosine.unwrap_or(0.0),
                cosine.unwrap_or(best_cosine - 0.1) - best_cosine,
                (hit.dense.map_or(101, |d| d.0) as f64).ln(),
                hit.lexical.map_or(0.0, |l| l.1 as f64) / best_lexical,
                (hit.lexical.map_or(101, |l| l.0) as f64).ln(),
                hit.page_evidence.unwrap_or(0.0) as f64,
                ((doc_rank.get(&*meta.doc_id).copied().unwrap_or(30) + 1) as f64).ln(),
                share(&meta.title),
                share(&meta.heading_path.join(" ")),
                match (primary_theme, labels.get(place).and_then(Option::as_deref)) {
                    (Some(primary), Some(label)) if primary == label => 1.0,
                    _ => 0.0,
                },
                score / fused,
                (1.0 + meta.page as f64).ln(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn words_are_cut_to_five_letters_and_short_ones_dropped() {
        let found = words("Как настроить DNS-серверы в AdGuard");
        for expected in ["как", "настр", "dns", "серве", "adgua"] {
            assert!(found.contains(expected), "{expected} in {found:?}");
        }
        assert!(!found.contains("в"));
    }
}
