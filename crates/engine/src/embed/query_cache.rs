//! `QueryCachedEmbedder`: a bounded least-recently-used cache of query embeddings wrapped around any
//! `Embedder`, so a repeated question does not pay the provider round trip again.

use super::{EmbedError, EmbedErrorKind, Embedder, InputKind, Result};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    model: String,
    kind: InputKind,
    text: String,
}

#[derive(Debug, Default)]
struct LruMap {
    entries: HashMap<CacheKey, (Vec<f32>, u64)>,
    recency: BTreeMap<u64, CacheKey>,
    clock: u64,
}

impl LruMap {
    fn get(&mut self, key: &CacheKey) -> Option<Vec<f32>> {
        self.clock += 1;
        let clock = self.clock;
        let (vector, used) = self.entries.get_mut(key)?;
        self.recency.remove(used);
        *used = clock;
        self.recency.insert(clock, key.clone());
        Some(vector.clone())
    }

    fn insert(&mut self, key: CacheKey, vector: Vec<f32>, capacity: usize) {
        self.clock += 1;
        if let Some((_, used)) = self.entries.insert(key.clone(), (vector, self.clock)) {
            self.recency.remove(&used);
        }
        self.recency.insert(self.clock, key);
        while self.entries.len() > capacity {
            let Some((_, oldest)) = self.recency.pop_first() else { break };
            self.entries.remove(&oldest);
        }
    }
}

/// Caches query embeddings (keyed by model, input kind and text) up to `capacity` entries; passage
/// embeddings pass straight through. A capacity of 0 disables the cache.
pub(crate) struct QueryCachedEmbedder {
    inner: Arc<dyn Embedder>,
    capacity: usize,
    map: Mutex<LruMap>,
}

impl QueryCachedEmbedder {
    pub(crate) fn new(inner: Arc<dyn Embedder>, capacity: usize) -> Self {
        Self { inner, capacity, map: Mutex::new(LruMap::default()) }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruMap> {
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn key(&self, kind: InputKind, text: &str) -> CacheKey {
        CacheKey { model: self.inner.model_name().to_string(), kind, text: text.to_string() }
    }
}

#[async_trait]
impl Embedder for QueryCachedEmbedder {
    async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>> {
        if self.capacity == 0 || kind == InputKind::Passage {
            return self.inner.embed(texts, kind).await;
        }
        let mut vectors: Vec<Option<Vec<f32>>> = {
            let mut map = self.lock();
            texts.iter().map(|text| map.get(&self.key(kind, text))).collect()
        };
        let missing: Vec<usize> = (0..texts.len()).filter(|&position| vectors[position].is_none()).collect();
        if !missing.is_empty() {
            let missing_texts: Vec<String> = missing.iter().map(|&position| texts[position].clone()).collect();
            let fresh = self.inner.embed(&missing_texts, kind).await?;
            if fresh.len() != missing.len() {
                let message = format!("expected {} vectors, got {}", missing.len(), fresh.len());
                return Err(EmbedError::new(EmbedErrorKind::InvalidResponse, message));
            }
            let mut map = self.lock();
            for (position, vector) in missing.into_iter().zip(fresh) {
                map.insert(self.key(kind, &texts[position]), vector.clone(), self.capacity);
                vectors[position] = Some(vector);
            }
        }
        Ok(vectors.into_iter().map(Option::unwrap_or_default).collect())
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn is_pseudo(&self) -> bool {
        self.inner.is_pseudo()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Embeds a text as `[len, call number]` and counts how many texts reached it.
    #[derive(Default)]
    struct CountingEmbedder {
        texts_seen: AtomicUsize,
        fail: bool,
    }

    #[async_trait]
    impl Embedder for CountingEmbedder {
        async fn embed(&self, texts: &[String], _kind: InputKind) -> Result<Vec<Vec<f32>>> {
            if self.fail {
                return Err(EmbedError::new(EmbedErrorKind::Unavailable, "down"));
            }
            let seen = self.texts_seen.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().enumerate().map(|(i, text)| vec![text.len() as f32, (seen + i) as f32]).collect())
        }
        fn model_name(&self) -> &str {
            "counting"
        }
    }

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| text.to_string()).collect()
    }

    #[tokio::test]
    async fn repeated_queries_hit_the_cache_and_keep_order() {
        let inner = Arc::new(CountingEmbedder::default());
        let cached = QueryCachedEmbedder::new(inner.clone(), 8);
        let first = cached.embed(&strings(&["a", "bb"]), InputKind::Query).await.unwrap();
        let second = cached.embed(&strings(&["bb", "ccc", "a"]), InputKind::Query).await.unwrap();
        assert_eq!(inner.texts_seen.load(Ordering::SeqCst), 3);
        assert_eq!(second[0], first[1]);
        assert_eq!(second[2], first[0]);
        assert_eq!(second[1][0], 3.0);
    }

    #[tokio::test]
    async fn passages_and_disabled_cache_pass_through() {
        let inner = Arc::new(CountingEmbedder::default());
        let cached = QueryCachedEmbedder::new(inner.clone(), 8);
        cached.embed(&strings(&["a"]), InputKind::Passage).await.unwrap();
        cached.embed(&strings(&["a"]), InputKind::Passage).await.unwrap();
        assert_eq!(inner.texts_seen.load(Ordering::SeqCst), 2);
        assert!(cached.is_empty());

        let disabled = QueryCachedEmbedder::new(inner.clone(), 0);
        disabled.embed(&strings(&["q"]), InputKind::Query).await.unwrap();
        disabled.embed(&strings(&["q"]), InputKind::Query).await.unwrap();
        assert_eq!(inner.texts_seen.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn least_recently_used_entry_is_evicted_at_capacity() {
        let inner = Arc::new(CountingEmbedder::default());
        let cached = QueryCachedEmbedder::new(inner.clone(), 2);
        cached.embed(&strings(&["a", "b"]), InputKind::Query).await.unwrap();
        cached.embed(&strings(&["a"]), InputKind::Query).await.unwrap();
        cached.embed(&strings(&["c"]), InputKind::Query).await.unwrap();
        assert_eq!(cached.len(), 2);
        assert_eq!(inner.texts_seen.load(Ordering::SeqCst), 3);
        cached.embed(&strings(&["a"]), InputKind::Query).await.unwrap();
        assert_eq!(inner.texts_seen.load(Ordering::SeqCst), 3, "a was used recently and must stay");
        cached.embed(&strings(&["b"]), InputKind::Query).await.unwrap();
        assert_eq!(inner.texts_seen.load(Ordering::SeqCst), 4, "b was the oldest and must have been evicted");
    }

    #[tokio::test]
    async fn failures_are_not_cached() {
        let cached = QueryCachedEmbedder::new(Arc::new(CountingEmbedder { fail: true, ..Default::default() }), 4);
        assert!(cached.embed(&strings(&["a"]), InputKind::Query).await.is_err());
        assert!(cached.is_empty());
    }
}
