//! What a search thread keeps between the steps of one search (scores, resolved id lists), per
//! level build.

use crate::index::vectors::top_k_of;
use std::sync::Arc;

/// What a thread keeps of one build of a tenant level (`scope`) for one key, so that the next
/// call with the same key on the same build reads it instead of computing it again:
/// - the scores of every record for one query (its vector, or its terms). The cascade ranks a
///   tenant's sections over the whole tenant for the doc step and again, restricted to the chosen
///   pages, for the section step; a score is a function of the level and the query alone (BM25
///   statistics are the level's), so the restricted ranking reads them here instead of scanning
///   the vectors and postings again;
/// - the record numbers a filter's page and section id lists resolved to (`LevelData::candidates`).
///
/// The build is compared by pointer and the key in full, so a stale or foreign entry is never read.
pub(super) struct Kept<K, V> {
    pub(super) scope: Arc<()>,
    pub(super) key: K,
    pub(super) value: V,
}

pub(super) type Slot<K, V> = std::thread::LocalKey<std::cell::RefCell<Option<Kept<K, V>>>>;

/// A filter's page and section id lists.
pub(super) type IdLists = (Option<Vec<String>>, Option<Vec<String>>);

thread_local! {
    pub(super) static RESOLVED_IDS: std::cell::RefCell<Option<Kept<IdLists, Vec<usize>>>> = const { std::cell::RefCell::new(None) };
    pub(super) static DENSE_SCORES: std::cell::RefCell<Option<Kept<Vec<f32>, Vec<f32>>>> = const { std::cell::RefCell::new(None) };
    pub(super) static LEXICAL_SCORES: std::cell::RefCell<Option<Kept<Vec<String>, Vec<f32>>>> = const { std::cell::RefCell::new(None) };
}

impl<K: 'static, V: 'static> Kept<K, V> {
    /// Keeps `value` for `key` on the level build `scope`, in place of what the thread kept.
    pub(super) fn remember(slot: &'static Slot<K, V>, scope: &Arc<()>, key: K, value: V) {
        slot.with(|slot| *slot.borrow_mut() = Some(Kept { scope: Arc::clone(scope), key, value }));
    }

    /// What the thread kept (of any build), taken out of its slot: its key and value, to reuse
    /// their buffers.
    pub(super) fn take(slot: &'static Slot<K, V>) -> Option<(K, V)> {
        slot.with(|slot| slot.borrow_mut().take().map(|kept| (kept.key, kept.value)))
    }

    /// `read` of the value kept on exactly this level build for a key `is_key` accepts, if any.
    pub(super) fn recall<T>(
        slot: &'static Slot<K, V>,
        scope: &Arc<()>,
        is_key: impl FnOnce(&K) -> bool,
        read: impl FnOnce(&V) -> T,
    ) -> Option<T> {
        slot.with(|slot| {
            let slot = slot.borrow();
            let kept = slot.as_ref().filter(|kept| Arc::ptr_eq(&kept.scope, scope))?;
            is_key(&kept.key).then(|| read(&kept.value))
        })
    }
}

impl<K: Clone + 'static> Kept<Vec<K>, Vec<f32>> {
    /// A ranking of every record of a level: `score` writes each record's score, by number, into
    /// the buffer the thread kept the last scores in; they are kept there for `key` on the build
    /// `scope` (for the restricted rankings of the same query), and the best `k` that `keep`
    /// accepts are returned.
    pub(super) fn rank_every_record(
        slot: &'static Slot<Vec<K>, Vec<f32>>,
        scope: &Arc<()>,
        key: &[K],
        k: usize,
        keep: impl Fn(f32) -> bool,
        score: impl FnOnce(&mut Vec<f32>),
    ) -> Vec<(f32, usize)> {
        let (mut kept_key, mut scores) = Self::take(slot).unwrap_or_default();
        score(&mut scores);
        let best = top_k_of(&scores, k, keep);
        kept_key.clear();
        kept_key.extend_from_slice(key);
        Self::remember(slot, scope, kept_key, scores);
        best
    }
}
