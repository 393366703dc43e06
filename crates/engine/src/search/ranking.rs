//! Ranking of one cascade level in three stages: **candidates** (the dense and lexical lists read
//! from the search's `Source`, the only async step), **fuse** (normalised-score sum or RRF) and
//! **boost** (the rules of boosting.yaml): the single place where a level's candidates are scored
//! and ordered. `fuse` and `boost` are plain functions over the candidates.

use super::boosting::{boost_and_keep_best, BoostContext, BoostEffect, BoostFactors, BoostInput, Boostable};
use super::boosting_config::{BoostingConfig, FusionMethod};
use super::fusion::{FusedItem, RankedList, ReciprocalRankFusion};
use super::Result;
use crate::index::{keep_first_sorted_by, RecordFilter, RecordRef, ScoredRecord, Source};
use crate::model::Level;
use serde_json::json;
use std::sync::Arc;

/// Candidates taken from each ranker before fusion (the reference RRF fuses each system's top 100).
pub(crate) const FUSION_DEPTH: usize = 100;

/// Which rankers feed the fusion; `Hybrid` is the service's mode, the others exist for `eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankingMode {
    Dense,
    Lexical,
    Hybrid,
}

/// Per-request ranking inputs shared by the three levels.
pub(crate) struct RankingContext<'a> {
    pub(crate) mode: RankingMode,
    pub(crate) vector: &'a [f32],
    pub(crate) terms: &'a [String],
    pub(crate) boosting: &'a BoostingConfig,
    pub(crate) boost_context: BoostContext,
}

/// The theme label of a ranked record (`infer_theme_label` over its metadata).
pub(crate) fn theme_label(ranked: &Ranked, labels: &crate::router::ThemeLabels<'_>) -> Option<String> {
    labels.label(&ranked.record.meta, ranked.record.features().map(|features| &features.topics))
}

/// A record ranked at one level, with the evidence of how it got its score.
#[derive(Debug, Clone)]
pub struct Ranked {
    /// The record, with its derived features when the index keeps them (boosting reads them).
    pub(crate) record: RecordRef,
    /// The final score: boosted normalised fused score (0 for padded docs).
    pub(crate) score: f32,
    pub(crate) dense: Option<(usize, f32)>,
    pub(crate) lexical: Option<(usize, f32)>,
    pub(crate) fused: f32,
    pub(crate) fused_normalized: f32,
    pub(crate) boost: Option<BoostFactors>,
    pub(crate) padded: bool,
    pub(crate) rerank_score: Option<f32>,
    /// What the page's second-best section added to this section's score
    /// (`cascade.second_section_weight`).
    pub(crate) page_evidence: Option<f32>,
}

impl Ranked {
    pub fn unscored(record: impl Into<RecordRef>, score: f32, padded: bool) -> Self {
        Self {
            record: record.into(),
            score,
            dense: None,
            lexical: None,
            fused: 0.0,
            fused_normalized: score,
            boost: None,
            padded,
            rerank_score: None,
            page_evidence: None,
        }
    }

    /// How the score was made (`explain: true`).
    pub(crate) fn explain(&self) -> serde_json::Value {
        let factors: Vec<serde_json::Value> = self
            .boost
            .iter()
            .flat_map(|factors| factors.effects())
            .map(|(rule, effect)| match effect {
                BoostEffect::Multiply(factor) => json!({"rule": rule, "multiply": factor}),
                BoostEffect::Add(addend) => json!({"rule": rule, "add": addend}),
            })
            .collect();
        json!({
            "dense_rank": self.dense.map(|d| d.0),
            "dense_score": self.dense.map(|d| d.1),
            "lexical_rank": self.lexical.map(|l| l.0),
            "lexical_score": self.lexical.map(|l| l.1),
            "fused_score": self.fused,
            "fused_normalized": self.fused_normalized,
            "boosts": factors,
            "rerank_score": self.rerank_score,
            "page_evidence": self.page_evidence,
            "padded": self.padded,
            "final_score": self.score,
        })
    }
}

impl Boostable for Ranked {
    fn id(&self) -> &str {
        &self.record.id
    }
    fn base_score(&self) -> f32 {
        self.fused_normalized
    }
    fn boost_input(&self) -> BoostInput<'_> {
        BoostInput { meta: &self.record.meta, text: Some(self.record.text.as_str()), features: self.record.features() }
    }
    fn set_boost(&mut self, score: f32, factors: BoostFactors) {
        self.score = score;
        self.boost = Some(factors);
    }
    fn boosted_score(&self) -> f32 {
        self.score
    }
}

/// Score-aware fusion of the dense and lexical lists (record numbers, best first): each list's
/// scores are normalised to [0, 1] — cosine min–max over its candidates, BM25 by its best score —
/// and summed with the list weights; `normalized` divides by the weight total. With `best`
/// `Some(k)`: only the first `k` of those with a positive normalised score, sorted best first, ties
/// by number; with `None`: all, in number order (for a caller that orders them itself).
fn score_fusion(lists: &[RankedList<'_, usize>; 2], dense: &[f32], lexical: &[f32], best: Option<usize>) -> Vec<Fused> {
    let weights: Vec<f32> =
        lists.iter().map(|l| if l.weight.is_finite() && l.weight > 0.0 { l.weight } else { 0.0 }).collect();
    let total: f32 = weights.iter().sum();
    let mut ranks: Vec<[Option<usize>; 2]> = vec![[None, None]; dense.len()];
    for (which, list) in lists.iter().enumerate() {
        for (position, &number) in list.ids.iter().enumerate() {
            ranks[number][which].get_or_insert(position + 1);
        }
    }
    let range = |ids: &[usize], scores: &[f32]| {
        let (mut low, mut high) = (f32::INFINITY, f32::NEG_INFINITY);
        for &number in ids {
            low = low.min(scores[number]);
            high = high.max(scores[number]);
        }
        (low, high)
    };
    let (dense_low, dense_high) = range(lists[0].ids, dense);
    let (_, lexical_high) = range(lists[1].ids, lexical);
    // Every record is in one of the lists: the filter only guards, and the capacity is exact.
    let mut items: Vec<Fused> = Vec::with_capacity(ranks.len());
    items.extend(ranks.iter().enumerate().filter(|(_, r)| r[0].is_some() || r[1].is_some()).map(|(number, r)| {
        let dense_part = match r[0] {
            Some(_) if dense_high > dense_low => (dense[number] - dense_low) / (dense_high - dense_low),
            Some(_) => 1.0,
            None => 0.0,
        };
        let lexical_part = match r[1] {
            Some(_) if lexical_high > 0.0 => lexical[number] / lexical_high,
            _ => 0.0,
        };
        let score = weights[0] * dense_part + weights[1] * lexical_part;
        let normalized = if total > 0.0 { (score / total).clamp(0.0, 1.0) } else { 0.0 };
        Fused { number, ranks: *r, score, normalized }
    }));
    if let Some(k) = best {
        // Numbers are distinct: the order is total, so selecting the best `k` and sorting them
        // gives the head of a full sort.
        items.retain(|item| item.normalized > 0.0);
        keep_first_sorted_by(&mut items, k, |a, b| b.score.total_cmp(&a.score).then(a.number.cmp(&b.number)));
    }
    items
}

/// One record of a level after fusion: its number, its 1-based rank in the dense and the lexical
/// list, and the fused score, raw and normalised (no allocation per candidate).
struct Fused {
    number: usize,
    ranks: [Option<usize>; 2],
    score: f32,
    normalized: f32,
}

impl From<FusedItem<usize>> for Fused {
    fn from(item: FusedItem<usize>) -> Self {
        let rank = |list: usize| item.ranks.get(list).copied().flatten();
        Self { number: item.id, ranks: [rank(0), rank(1)], score: item.score, normalized: item.normalized }
    }
}

/// The distinct records of the two lists in id order, and the number (index in that order) of
/// every entry of `dense` followed by every entry of `lexical`.
fn number_by_id<'a>(dense: &'a [ScoredRecord], lexical: &'a [ScoredRecord]) -> (Vec<&'a ScoredRecord>, Vec<usize>) {
    let entries: Vec<&ScoredRecord> = dense.iter().chain(lexical).collect();
    // When the index numbered every entry in one scope (one load), its numbers are the id order.
    let id_numbers = id_numbers(&entries);
    if let Some(numbered) = id_numbers.as_deref().and_then(|numbers| by_bitmap(&entries, numbers)) {
        return numbered;
    }
    let mut order: Vec<usize> = (0..entries.len()).collect();
    match &id_numbers {
        Some(numbers) => order.sort_unstable_by_key(|&entry| (numbers[entry], entry)),
        None => order.sort_unstable_by(|&a, &b| entries[a].record.id.cmp(&entries[b].record.id).then(a.cmp(&b))),
    }
    let mut records: Vec<&ScoredRecord> = Vec::with_capacity(entries.len());
    let mut numbers = vec![0; entries.len()];
    let mut previous: Option<usize> = None;
    for entry in order {
        let scored = entries[entry];
        let same = previous.is_some_and(|previous| match &id_numbers {
            Some(numbers) => numbers[previous] == numbers[entry],
            None => entries[previous].record.id == scored.record.id,
        });
        previous = Some(entry);
        if !same {
            records.push(scored);
        }
        numbers[entry] = records.len() - 1;
    }
    (records, numbers)
}

/// Each entry's number in id order, when all are records of one loaded level: their places in
/// its store, which holds them by ascending id.
fn id_numbers(entries: &[&ScoredRecord]) -> Option<Vec<u32>> {
    let (store, _) = entries.first()?.record.stored_at()?;
    entries
        .iter()
        .map(|scored| scored.record.stored_at().filter(|(at, _)| Arc::ptr_eq(at, store)).map(|(_, number)| number))
        .collect()
}

/// `number_by_id` for entries numbered in one scope, through a bitmap of their numbers instead of
/// a sort: a record's place in id order is the count of smaller numbers present, and the first
/// entry of a number is the record kept. `None` when the numbers are too sparse for a bitmap.
fn by_bitmap<'a>(entries: &[&'a ScoredRecord], numbers: &[u32]) -> Option<(Vec<&'a ScoredRecord>, Vec<usize>)> {
    let size = numbers.iter().map(|&number| number as usize + 1).max().unwrap_or(0);
    let words = size.div_ceil(64);
    if words > 4 * entries.len().max(1) {
        return None;
    }
    let mut present = vec![0u64; words];
    for &number in numbers {
        present[number as usize / 64] |= 1 << (number % 64);
    }
    // below[w]: how many numbers present lie in the words before `w`.
    let mut below = Vec::with_capacity(words);
    let mut count = 0usize;
    for word in &present {
        below.push(count);
        count += word.count_ones() as usize;
    }
    let rank = |number: u32| {
        let (word, bit) = (number as usize / 64, number % 64);
        below[word] + (present[word] & ((1u64 << bit) - 1)).count_ones() as usize
    };
    let mut records: Vec<Option<&'a ScoredRecord>> = vec![None; count];
    let places: Vec<usize> = numbers
        .iter()
        .zip(entries)
        .map(|(&number, &scored)| {
            let place = rank(number);
            records[place].get_or_insert(scored);
            place
        })
        .collect();
    Some((records.into_iter().map(|record| record.expect("every present number has an entry")).collect(), places))
}

/// The dense and the lexical candidates of one level, as the source ranked them (best first).
pub(crate) struct Candidates {
    dense: Vec<ScoredRecord>,
    lexical: Vec<ScoredRecord>,
}

/// The stage **candidates**: the top `depth` records of `level` matching `filter` by cosine and by
/// BM25, as the ranking mode asks. The only reads of a level: what follows is plain computing.
pub(crate) async fn candidates(
    source: &Source,
    level: Level,
    filter: &RecordFilter,
    context: &RankingContext<'_>,
    depth: usize,
) -> Result<Candidates> {
    let dense = match context.mode {
        RankingMode::Dense | RankingMode::Hybrid => source.knn(level, filter, context.vector, depth).await?,
        RankingMode::Lexical => Vec::new(),
    };
    let lexical = match context.mode {
        RankingMode::Lexical | RankingMode::Hybrid if !context.terms.is_empty() => {
            source.lexical(level, filter, context.terms, depth).await?
        }
        RankingMode::Lexical | RankingMode::Hybrid | RankingMode::Dense => Vec::new(),
    };
    Ok(Candidates { dense, lexical })
}

/// The top `k` records of `level` matching `filter`, best first: its candidates, fused, boosted.
pub(crate) async fn rank_level(
    source: &Source,
    level: Level,
    filter: &RecordFilter,
    context: &RankingContext<'_>,
    k: usize,
) -> Result<Vec<Ranked>> {
    let found = candidates(source, level, filter, context, k.max(FUSION_DEPTH)).await?;
    Ok(fuse_and_boost(&found, context, k))
}

/// The stages **fuse** then **boost** over one level's candidates: the best `k`, best first.
pub(crate) fn fuse_and_boost(found: &Candidates, context: &RankingContext<'_>, k: usize) -> Vec<Ranked> {
    let mut ranked = fuse(found, context, k, true);
    boost(&mut ranked, k, context);
    ranked
}

/// The stage **fuse**: the dense and lexical lists fused into one (`fusion` in boosting.yaml:
/// normalised scores summed, or RRF), records with no positive fused score left out. With
/// `boosted` every fused record is kept in fused order (boosting re-sorts them all); without, only
/// the best `k`, which is then the final order.
pub(crate) fn fuse(found: &Candidates, context: &RankingContext<'_>, k: usize, boosted: bool) -> Vec<Ranked> {
    let (dense, lexical) = (&found.dense, &found.lexical);
    // Records are numbered in id order, so fusing numbers breaks ties by id without cloning ids.
    let (records, numbers) = number_by_id(dense, lexical);
    let (dense_numbers, lexical_numbers) = numbers.split_at(dense.len());
    let mut dense_scores = vec![0.0; records.len()];
    let mut lexical_scores = vec![0.0; records.len()];
    for (scored, &number) in dense.iter().zip(dense_numbers) {
        dense_scores[number] = scored.score;
    }
    for (scored, &number) in lexical.iter().zip(lexical_numbers) {
        lexical_scores[number] = scored.score;
    }
    let fusion_config = &context.boosting.fusion;
    let (dense_weight, lexical_weight) = match context.mode {
        RankingMode::Dense => (1.0, 0.0),
        RankingMode::Lexical => (0.0, 1.0),
        RankingMode::Hybrid => (fusion_config.dense_weight, fusion_config.lexical_weight),
    };
    let lists = [RankedList::new(dense_numbers, dense_weight), RankedList::new(lexical_numbers, lexical_weight)];
    let fused = match fusion_config.method {
        FusionMethod::Rrf => ReciprocalRankFusion::new(fusion_config.k)
            .fuse(&lists, records.len())
            .into_iter()
            .map(Fused::from)
            .collect(),
        // Boosted, the fused order is not read: boosting sorts the whole list by boosted score,
        // ties by id, and the records' ids are distinct, so that order is total.
        FusionMethod::Score => score_fusion(&lists, &dense_scores, &lexical_scores, (!boosted).then_some(k)),
    };
    // Unboosted, the fused order is the final one: only the first `k` become `Ranked`.
    let kept = if boosted { usize::MAX } else { k };
    let mut ranked: Vec<Ranked> = Vec::with_capacity(fused.len().min(kept));
    ranked.extend(fused.into_iter().filter(|item| item.normalized > 0.0).take(kept).map(|item| Ranked {
        dense: item.ranks[0].map(|rank| (rank, dense_scores[item.number])),
        lexical: item.ranks[1].map(|rank| (rank, lexical_scores[item.number])),
        score: item.normalized,
        fused: item.score,
        fused_normalized: item.normalized,
        boost: None,
        padded: false,
        rerank_score: None,
        page_evidence: None,
        record: records[item.number].record.clone(),
    }));
    ranked
}

/// The stage **boost**: the rules of boosting.yaml applied to each fused record, then the best
/// `k` by boosted score, ties by id (`boosting::boost_and_keep_best`).
pub(crate) fn boost(ranked: &mut Vec<Ranked>, k: usize, context: &RankingContext<'_>) {
    boost_and_keep_best(ranked, k, context.boosting, &context.boost_context);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::PseudoEmbedder;
    use crate::fixtures;
    use crate::index::{InMemoryIndex, LevelStore, RecordFeatures, VectorIndex};
    use crate::model::Record;
    use std::sync::Arc;

    #[test]
    fn dense_and_sparse_record_numbers_give_the_id_order() {
        // Dense numbers go through the bitmap, sparse ones through the sort; both must give the
        // distinct records in number order and each entry's place among them.
        // One level's store, records numbered by ascending id as the index numbers them.
        let records: Vec<Arc<Record>> = (0..=100_000u32)
            .map(|number| {
                Arc::new(Record {
                    id: format!("r{number:06}"),
                    meta: crate::model::Metadata::default(),
                    text: Default::default(),
                    embedding: Vec::new(),
                })
            })
            .collect();
        let features = vec![RecordFeatures::default(); records.len()];
        let store = Arc::new(LevelStore::new(records, features));
        let scored = |number: u32| ScoredRecord { record: RecordRef::stored(&store, number as usize), score: 0.5 };
        for (dense, lexical) in [
            (vec![5, 3, 64, 0], vec![3, 700, 5, 1]),
            (vec![100_000, 3], vec![7, 3, 100_000]),
            (vec![], vec![2, 1]),
            (vec![63, 64], vec![]),
        ] {
            let dense: Vec<ScoredRecord> = dense.into_iter().map(scored).collect();
            let lexical: Vec<ScoredRecord> = lexical.into_iter().map(scored).collect();
            let (records, numbers) = number_by_id(&dense, &lexical);
            let mut expected: Vec<String> = dense.iter().chain(&lexical).map(|s| s.record.id.clone()).collect();
            expected.sort();
            expected.dedup();
            let ids: Vec<String> = records.iter().map(|s| s.record.id.clone()).collect();
            assert_eq!(ids, expected);
            for (entry, &number) in dense.iter().chain(&lexical).zip(&numbers) {
                assert_eq!(records[number].record.id, entry.record.id);
            }
        }
    }

    #[test]
    fn score_fusion_keeps_the_head_of_the_fused_order() {
        // Many equal scores (ties broken by number) and records with no positive score: the best
        // `k` must be the first `k` positive ones of the whole list sorted best first.
        let n = 60;
        let dense: Vec<f32> = (0..n).map(|number| [0.2, 0.5, 0.9, 0.5][number % 4]).collect();
        let lexical: Vec<f32> = (0..n).map(|number| [0.0, 3.0, 1.5][number % 3]).collect();
        let dense_ids: Vec<usize> = (0..n).filter(|number| number % 5 != 0).collect();
        let lexical_ids: Vec<usize> = (0..n).filter(|number| number % 3 != 0).rev().collect();
        for weights in [(1.0, 1.0), (1.0, 0.0), (0.0, 1.0)] {
            let lists = [RankedList::new(&dense_ids, weights.0), RankedList::new(&lexical_ids, weights.1)];
            let mut all = score_fusion(&lists, &dense, &lexical, None);
            all.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.number.cmp(&b.number)));
            let positive: Vec<usize> =
                all.iter().filter(|item| item.normalized > 0.0).map(|item| item.number).collect();
            assert!(positive.len() > 10 && positive.len() < n, "{weights:?}: {}", positive.len());
            for k in [0, 1, 7, positive.len(), n + 5] {
                let best: Vec<usize> =
                    score_fusion(&lists, &dense, &lexical, Some(k)).iter().map(|item| item.number).collect();
                assert_eq!(best, positive.iter().take(k).copied().collect::<Vec<_>>(), "{weights:?}, k {k}");
            }
        }
    }

    #[tokio::test]
    async fn index_numbers_and_ids_number_records_alike() {
        let index = InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap();
        let filter = RecordFilter::tenant("t1");
        let query = PseudoEmbedder::new(fixtures::DIMENSION).embed_one("установка SDK");
        let terms = crate::text::terms("установка тегов");
        for level in Level::ALL {
            let dense = index.knn(level, &filter, &query, 100).await.unwrap();
            let lexical = index.lexical(level, &filter, &terms, 100).await.unwrap();
            assert!(dense.iter().chain(&lexical).all(|s| s.record.stored_at().is_some()));
            let strip = |list: &[ScoredRecord]| -> Vec<ScoredRecord> {
                list.iter().map(|s| ScoredRecord { record: s.record.to_arc().into(), score: s.score }).collect()
            };
            let (by_number, numbers) = number_by_id(&dense, &lexical);
            let (dense_plain, lexical_plain) = (strip(&dense), strip(&lexical));
            let (by_id, numbers_by_id) = number_by_id(&dense_plain, &lexical_plain);
            let ids = |records: &[&ScoredRecord]| records.iter().map(|s| s.record.id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&by_number), ids(&by_id), "{level:?}");
            assert_eq!(numbers, numbers_by_id, "{level:?}");
            let mut sorted = ids(&by_id);
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted, ids(&by_id), "{level:?}: distinct and in id order");
        }
    }
}
