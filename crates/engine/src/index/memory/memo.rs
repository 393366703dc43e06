//! What one build of a tenant level keeps between the steps of the searches over it (the scores
//! of its last few whole-level rankings, the record numbers its last few id lists resolved to):
//! a value the level owns, shared by the threads that search it.

use crate::index::vectors::top_k_of;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

/// How many entries each kind of memo of a level keeps. A search's second ranking of a level
/// follows its first with no wait between them, so the entry it needs is among the last few even
/// with other searches of the same tenant running beside it; a miss costs only the restricted
/// ranking's own scoring. Each entry of a score memo is a score per record of the level.
const ENTRIES: usize = 4;

/// The memos of one build of a tenant level (`LevelData::memo`). A rebuilt level starts with
/// empty ones, so an entry is never read against another build's records.
#[derive(Debug, Default)]
pub(super) struct Memo {
    /// The record numbers a filter's page and section id lists resolved to
    /// (`LevelData::candidates`): a cascade step ranks one restricted filter twice (dense, then
    /// lexical), and resolving its ids is a hash lookup per id.
    pub(super) resolved: Kept<IdLists, Vec<usize>>,
    /// The cosine score of every record for one query vector.
    pub(super) dense: Kept<Vec<f32>, Vec<f32>>,
    /// The BM25 score of every record for one query's terms.
    pub(super) lexical: Kept<Vec<String>, Vec<f32>>,
}

/// A filter's page and section id lists.
pub(super) type IdLists = (Option<Vec<String>>, Option<Vec<String>>);

/// The last `ENTRIES` values computed for their keys, newest last, so that the next call with
/// the same key reads one instead of computing it again. The cascade ranks a tenant's sections
/// over the whole tenant for the doc step and again, restricted to the chosen pages, for the
/// section step; a score is a function of the level and the query alone (BM25 statistics are the
/// level's), so the restricted ranking reads them here instead of scanning the vectors and
/// postings again. Keys are compared in full, so an entry is read only for its own key.
///
/// The lock is held only to find, add or drop an entry; a value is read and computed outside it
/// (entries are shared pointers).
pub(super) struct Kept<K, V> {
    entries: Mutex<VecDeque<Arc<(K, V)>>>,
}

impl<K, V> Default for Kept<K, V> {
    fn default() -> Self {
        Self { entries: Mutex::new(VecDeque::with_capacity(ENTRIES)) }
    }
}

impl<K, V> fmt::Debug for Kept<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kept").field("entries", &self.lock().len()).finish()
    }
}

impl<K, V> Kept<K, V> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<(K, V)>>> {
        // An entry is added or dropped whole: a panic elsewhere leaves nothing half done.
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps `value` for `key`, in place of the oldest entry when all are taken.
    pub(super) fn remember(&self, key: K, value: V) {
        let entry = Arc::new((key, value));
        let dropped = {
            let mut entries = self.lock();
            entries.push_back(entry);
            (entries.len() > ENTRIES).then(|| entries.pop_front())
        };
        drop(dropped);
    }

    /// When all entries are taken, the oldest, taken out to reuse its buffers (unless a reader
    /// still holds it; then it is only dropped).
    fn take_oldest(&self) -> Option<(K, V)> {
        let oldest = {
            let mut entries = self.lock();
            if entries.len() < ENTRIES {
                return None;
            }
            entries.pop_front()?
        };
        Arc::try_unwrap(oldest).ok()
    }

    /// `read` of the newest value kept for a key `is_key` accepts, if any.
    pub(super) fn recall<T>(&self, is_key: impl Fn(&K) -> bool, read: impl FnOnce(&V) -> T) -> Option<T> {
        let entry = self.lock().iter().rev().find(|entry| is_key(&entry.0)).map(Arc::clone)?;
        Some(read(&entry.1))
    }
}

impl<K: Clone> Kept<Vec<K>, Vec<f32>> {
    /// A ranking of every record of a level: `score` writes each record's score, by number, into
    /// a buffer (the oldest entry's, once all are taken); they are kept there for `key` (for the
    /// restricted rankings of the same query), and the best `k` that `keep` accepts are returned.
    pub(super) fn rank_every_record(
        &self,
        key: &[K],
        k: usize,
        keep: impl Fn(f32) -> bool,
        score: impl FnOnce(&mut Vec<f32>),
    ) -> Vec<(f32, usize)> {
        let (mut kept_key, mut scores) = self.take_oldest().unwrap_or_default();
        score(&mut scores);
        let best = top_k_of(&scores, k, keep);
        kept_key.clear();
        kept_key.extend_from_slice(key);
        self.remember(kept_key, scores);
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_entry_of_a_key_is_read_and_the_oldest_goes_first() {
        let kept: Kept<Vec<u32>, Vec<f32>> = Kept::default();
        assert_eq!(kept.recall(|_| true, Vec::clone), None);
        for query in 0..ENTRIES as u32 + 1 {
            let best = kept.rank_every_record(
                &[query],
                1,
                |_| true,
                |scores| {
                    scores.clear();
                    scores.extend([0.5, query as f32]);
                },
            );
            let expected = if query == 0 { (0.5, 0) } else { (query as f32, 1) };
            assert_eq!(best, vec![expected]);
        }
        // The first query's entry made room for the last one's.
        assert_eq!(kept.recall(|key| key == &[0], Vec::clone), None);
        for query in 1..ENTRIES as u32 + 1 {
            assert_eq!(kept.recall(|key| key == &[query], Vec::clone), Some(vec![0.5, query as f32]));
        }
        kept.remember(vec![1], vec![9.0]);
        assert_eq!(kept.recall(|key| key == &[1], |scores| scores[0]), Some(9.0), "the newer of two");
    }

    #[test]
    fn a_value_still_read_is_not_reused() {
        let kept: Kept<Vec<u32>, Vec<f32>> = Kept::default();
        for query in 0..ENTRIES as u32 {
            kept.remember(vec![query], vec![query as f32]);
        }
        let held = kept.lock().front().map(Arc::clone).expect("an entry");
        kept.rank_every_record(&[7], 1, |_| true, |scores| assert!(scores.is_empty(), "a fresh buffer"));
        assert_eq!(held.1, vec![0.0]);
        kept.rank_every_record(&[8], 1, |_| true, |scores| assert_eq!(scores, &vec![1.0], "the oldest's buffer"));
    }
}
