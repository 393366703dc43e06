//! Reciprocal-rank fusion of ranked lists (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion
//! outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009).

use crate::index::keep_first_sorted_by;
use rustc_hash::FxHashMap as HashMap;
use std::hash::Hash;

/// One input list of a fusion: ids best first, and the weight of the list.
#[derive(Debug, Clone, Copy)]
pub struct RankedList<'a, Id> {
    pub(crate) ids: &'a [Id],
    pub(crate) weight: f32,
}

impl<'a, Id> RankedList<'a, Id> {
    pub fn new(ids: &'a [Id], weight: f32) -> Self {
        Self { ids, weight }
    }
}

/// One fused item: its 1-based rank in each input list (`None` when absent), the raw RRF score and
/// the score normalised to [0, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct FusedItem<Id> {
    pub(crate) id: Id,
    pub(crate) ranks: Vec<Option<usize>>,
    pub(crate) score: f32,
    pub(crate) normalized: f32,
}

/// Weighted reciprocal-rank fusion: `score(d) = Σ_i w_i / (k + rank_i(d))`, ranks from 1.
///
/// `normalized = score / Σ_i w_i / (k + 1)`, the score of an item ranked first in every list, so
/// it lies in [0, 1] whatever `k` and the weights are. Additive theme boosts (+0.08 / +0.04) and
/// `min_score` are defined on this normalised scale; the raw score depends on `k` and is only
/// reported for explanation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReciprocalRankFusion {
    pub(crate) k: f32,
}

impl Default for ReciprocalRankFusion {
    fn default() -> Self {
        Self { k: Self::DEFAULT_K }
    }
}

impl ReciprocalRankFusion {
    /// k = 60 is the constant of the paper, chosen there on TREC runs and widely reused since: it
    /// damps the influence of the very top ranks so that one list cannot dominate.
    pub(crate) const DEFAULT_K: f32 = 60.0;

    /// A fusion with constant `k`; a negative or non-finite `k` falls back to the default.
    pub fn new(k: f32) -> Self {
        if k.is_finite() && k >= 0.0 {
            Self { k }
        } else {
            Self::default()
        }
    }

    /// Fuses `lists` and returns at most `limit` items, by descending score with ties broken by
    /// ascending id. An id repeated within one list counts at its best rank only. Negative or
    /// non-finite weights count as 0.
    pub fn fuse<Id>(&self, lists: &[RankedList<'_, Id>], limit: usize) -> Vec<FusedItem<Id>>
    where
        Id: Clone + Eq + Hash + Ord,
    {
        let weights: Vec<f64> = lists
            .iter()
            .map(|list| if list.weight.is_finite() && list.weight > 0.0 { list.weight as f64 } else { 0.0 })
            .collect();
        let k = self.k as f64;
        // Each distinct id gets a slot; its ranks live in one flat table (`lists.len()` per slot),
        // so only the items returned allocate their own list of ranks.
        // Sized for every entry distinct: the table and the lists never grow while filled.
        let entries: usize = lists.iter().map(|list| list.ids.len()).sum();
        let mut slot_of: HashMap<&Id, usize> = HashMap::with_capacity_and_hasher(entries, Default::default());
        let mut ids: Vec<&Id> = Vec::with_capacity(entries);
        let mut ranks: Vec<Option<usize>> = Vec::with_capacity(entries * lists.len());
        for (list_number, list) in lists.iter().enumerate() {
            for (position, id) in list.ids.iter().enumerate() {
                let slot = *slot_of.entry(id).or_insert_with(|| {
                    ids.push(id);
                    ranks.extend(std::iter::repeat_n(None, lists.len()));
                    ids.len() - 1
                });
                ranks[slot * lists.len() + list_number].get_or_insert(position + 1);
            }
        }
        let ranks_of = |slot: usize| &ranks[slot * lists.len()..(slot + 1) * lists.len()];
        let best_possible: f64 = weights.iter().map(|w| w / (k + 1.0)).sum();
        let mut scored: Vec<(f64, usize)> = (0..ids.len())
            .map(|slot| {
                let score: f64 = ranks_of(slot)
                    .iter()
                    .zip(&weights)
                    .filter_map(|(rank, weight)| rank.map(|rank| weight / (k + rank as f64)))
                    .sum();
                (score, slot)
            })
            .collect();
        let order = |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then_with(|| ids[a.1].cmp(ids[b.1]));
        keep_first_sorted_by(&mut scored, limit, order);
        scored
            .into_iter()
            .map(|(score, slot)| {
                let normalized = if best_possible > 0.0 { (score / best_possible).clamp(0.0, 1.0) } else { 0.0 };
                FusedItem {
                    id: ids[slot].clone(),
                    ranks: ranks_of(slot).to_vec(),
                    score: score as f32,
                    normalized: normalized as f32,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A small deterministic generator (xorshift64*), enough for property loops without a crate.
    struct Pseudo(u64);

    impl Pseudo {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn random_lists(rng: &mut Pseudo) -> (Vec<Vec<u32>>, Vec<f32>) {
        let list_count = 1 + rng.below(4);
        let universe = 1 + rng.below(30) as u32;
        let lists = (0..list_count)
            .map(|_| {
                let mut ids: Vec<u32> = (0..universe).collect();
                for i in (1..ids.len()).rev() {
                    ids.swap(i, rng.below(i + 1));
                }
                ids.truncate(rng.below(universe as usize + 1));
                ids
            })
            .collect();
        let weights = (0..list_count).map(|_| [0.0, 0.5, 1.0, 2.0][rng.below(4)]).collect();
        (lists, weights)
    }

    fn fuse(lists: &[Vec<u32>], weights: &[f32], limit: usize) -> Vec<FusedItem<u32>> {
        let ranked: Vec<RankedList<'_, u32>> = lists.iter().zip(weights).map(|(l, &w)| RankedList::new(l, w)).collect();
        ReciprocalRankFusion::default().fuse(&ranked, limit)
    }

    #[test]
    fn scores_follow_the_formula() {
        let dense = ["a", "b", "c"];
        let lexical = ["b", "d"];
        let fused =
            ReciprocalRankFusion::new(60.0).fuse(&[RankedList::new(&dense, 1.0), RankedList::new(&lexical, 2.0)], 10);
        let ids: Vec<&str> = fused.iter().map(|item| item.id).collect();
        assert_eq!(ids, vec!["b", "d", "a", "c"]);
        let b = &fused[0];
        assert_eq!(b.ranks, vec![Some(2), Some(1)]);
        assert!((b.score - (1.0 / 62.0 + 2.0 / 61.0)).abs() < 1e-7);
        assert!((b.normalized - (1.0 / 62.0 + 2.0 / 61.0) / (3.0 / 61.0)).abs() < 1e-6);
        assert_eq!(fused[1].ranks, vec![None, Some(2)]);
    }

    #[test]
    fn first_everywhere_normalises_to_one() {
        let dense = ["x", "y"];
        let lexical = ["x"];
        let fused =
            ReciprocalRankFusion::new(10.0).fuse(&[RankedList::new(&dense, 0.7), RankedList::new(&lexical, 1.3)], 5);
        assert_eq!(fused[0].id, "x");
        assert!((fused[0].normalized - 1.0).abs() < 1e-6);
        assert!(fused[1].normalized < 1.0 && fused[1].normalized > 0.0);
    }

    #[test]
    fn empty_inputs_give_empty_output() {
        let empty: [&str; 0] = [];
        assert!(ReciprocalRankFusion::default().fuse::<&str>(&[], 10).is_empty());
        assert!(ReciprocalRankFusion::default().fuse(&[RankedList::new(&empty, 1.0)], 10).is_empty());
        assert!(ReciprocalRankFusion::default().fuse(&[RankedList::new(&["a"], 1.0)], 0).is_empty());
    }

    #[test]
    fn zero_weights_keep_items_but_score_zero() {
        let fused = ReciprocalRankFusion::default().fuse(&[RankedList::new(&["b", "a"], 0.0)], 10);
        assert_eq!(fused.iter().map(|i| i.id).collect::<Vec<_>>(), vec!["a", "b"]);
        assert!(fused.iter().all(|i| i.score == 0.0 && i.normalized == 0.0));
    }

    #[test]
    fn bad_k_falls_back_to_default() {
        assert_eq!(ReciprocalRankFusion::new(-1.0).k, 60.0);
        assert_eq!(ReciprocalRankFusion::new(f32::NAN).k, 60.0);
        assert_eq!(ReciprocalRankFusion::new(0.0).k, 0.0);
    }

    #[test]
    fn property_no_duplicates_limit_and_order() {
        let mut rng = Pseudo(0x9E37_79B9_7F4A_7C15);
        for _ in 0..500 {
            let (lists, weights) = random_lists(&mut rng);
            let limit = rng.below(40);
            let fused = fuse(&lists, &weights, limit);
            let union: HashSet<u32> = lists.iter().flatten().copied().collect();
            assert!(fused.len() <= limit);
            assert_eq!(fused.len(), limit.min(union.len()));
            let unique: HashSet<u32> = fused.iter().map(|i| i.id).collect();
            assert_eq!(unique.len(), fused.len(), "duplicate ids in {fused:?}");
            for pair in fused.windows(2) {
                assert!(
                    pair[0].score > pair[1].score || (pair[0].score == pair[1].score && pair[0].id < pair[1].id),
                    "not sorted by score then id: {pair:?}"
                );
            }
            assert!(fused.iter().all(|i| (0.0..=1.0).contains(&i.normalized)));
        }
    }

    #[test]
    fn property_stable_ties_and_determinism() {
        let mut rng = Pseudo(42);
        for _ in 0..200 {
            let (lists, weights) = random_lists(&mut rng);
            let first = fuse(&lists, &weights, 100);
            let again = fuse(&lists, &weights, 100);
            assert_eq!(first, again);
            let reversed: Vec<Vec<u32>> = lists.iter().rev().cloned().collect();
            let reversed_weights: Vec<f32> = weights.iter().rev().copied().collect();
            let swapped = fuse(&reversed, &reversed_weights, 100);
            let ids = |items: &[FusedItem<u32>]| items.iter().map(|i| i.id).collect::<Vec<_>>();
            assert_eq!(ids(&first), ids(&swapped), "list order changed the ranking");
        }
    }

    #[test]
    fn property_monotonic_in_ranks() {
        let mut rng = Pseudo(7);
        for _ in 0..300 {
            let (lists, weights) = random_lists(&mut rng);
            let fused = fuse(&lists, &weights, usize::MAX);
            for a in &fused {
                for b in &fused {
                    let dominates = a.ranks.iter().zip(&b.ranks).all(|(ra, rb)| match (ra, rb) {
                        (Some(ra), Some(rb)) => ra <= rb,
                        (Some(_), None) | (None, None) => true,
                        (None, Some(_)) => false,
                    });
                    if dominates {
                        assert!(a.score >= b.score, "{a:?} is ranked higher everywhere but scores below {b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn repeated_id_counts_once_at_best_rank() {
        let fused = ReciprocalRankFusion::default().fuse(&[RankedList::new(&["a", "b", "a"], 1.0)], 10);
        assert_eq!(fused.len(), 2);
        assert_eq!(fused[0].ranks, vec![Some(1)]);
        assert!((fused[0].normalized - 1.0).abs() < 1e-6);
    }
}
