//! A persistent embedding cache for the eval command: an `Embedder` wrapper over the ingest
//! layer's `EmbeddingCache` (same file format and keys), so a second run embeds nothing.

use crate::embed::{EmbedError, EmbedErrorKind, Embedder, InputKind, Result};
use crate::ingest::cache::{cache_key, EmbeddingCache};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Wraps an embedder; texts already in the cache file are not sent to it again.
pub struct FileCachedEmbedder {
    inner: Arc<dyn Embedder>,
    path: PathBuf,
    batch_size: usize,
    cache: Mutex<EmbeddingCache>,
    misses: AtomicUsize,
}

impl FileCachedEmbedder {
    /// Opens (or starts) the cache at `path`; an unreadable file or lines are not fatal.
    pub fn open(inner: Arc<dyn Embedder>, path: &Path, batch_size: usize) -> Self {
        let cache = match EmbeddingCache::open(path, inner.model_name()) {
            Ok((cache, _bad_lines)) => cache,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "embedding cache unreadable; starting empty");
                EmbeddingCache::in_memory()
            }
        };
        tracing::info!(path = %path.display(), entries = cache.len(), "embedding cache opened");
        Self {
            inner,
            path: path.to_path_buf(),
            batch_size: batch_size.max(1),
            cache: Mutex::new(cache),
            misses: AtomicUsize::new(0),
        }
    }

    /// How many texts were sent to the wrapped embedder since opening.
    pub fn misses(&self) -> usize {
        self.misses.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Embedder for FileCachedEmbedder {
    async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>> {
        let model = self.inner.model_name().to_string();
        let keys: Vec<String> = texts.iter().map(|text| cache_key(&model, kind, text)).collect();
        let missing: Vec<usize> = {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let mut seen = std::collections::HashSet::new();
            (0..texts.len()).filter(|&i| cache.get(&keys[i]).is_none() && seen.insert(&keys[i])).collect()
        };
        for batch in missing.chunks(self.batch_size) {
            let batch_texts: Vec<String> = batch.iter().map(|&i| texts[i].clone()).collect();
            let vectors = self.inner.embed(&batch_texts, kind).await?;
            if vectors.len() != batch.len() {
                return Err(EmbedError::new(
                    EmbedErrorKind::InvalidResponse,
                    format!("asked for {} embeddings, got {}", batch.len(), vectors.len()),
                ));
            }
            self.misses.fetch_add(batch.len(), Ordering::Relaxed);
            let entries: Vec<(String, Vec<f32>)> = batch.iter().map(|&i| keys[i].clone()).zip(vectors).collect();
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(error) = cache.insert_all(&model, entries) {
                tracing::warn!(path = %self.path.display(), %error, "embedding cache not written");
            }
        }
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        keys.iter()
            .map(|key| {
                cache.get(key).cloned().ok_or_else(|| EmbedError::new(EmbedErrorKind::Internal, "cache entry vanished"))
            })
            .collect()
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
    use crate::embed::PseudoEmbedder;

    struct Counting {
        inner: PseudoEmbedder,
        calls: AtomicUsize,
        texts: AtomicUsize,
    }

    #[async_trait]
    impl Embedder for Counting {
        async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            self.texts.fetch_add(texts.len(), Ordering::Relaxed);
            self.inner.embed(texts, kind).await
        }
        fn model_name(&self) -> &str {
            "counting"
        }
    }

    #[tokio::test]
    async fn second_run_makes_no_embedding_calls() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cache/embeddings.jsonl");
        let counting = Arc::new(Counting {
            inner: PseudoEmbedder::new(16),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
        });
        let texts: Vec<String> = ["один", "два", "три", "один"].iter().map(|s| s.to_string()).collect();
        let first =
            FileCachedEmbedder::open(counting.clone(), &path, 2).embed(&texts, InputKind::Passage).await.unwrap();
        assert_eq!(counting.texts.load(Ordering::Relaxed), 3, "the repeated text is embedded once");
        assert_eq!(counting.calls.load(Ordering::Relaxed), 2, "batches of two");
        assert_eq!(first[0], first[3]);

        let reopened = FileCachedEmbedder::open(counting.clone(), &path, 2);
        let second = reopened.embed(&texts, InputKind::Passage).await.unwrap();
        assert_eq!(second, first);
        assert_eq!(counting.calls.load(Ordering::Relaxed), 2, "nothing re-embedded after reopening");
        assert_eq!(reopened.misses(), 0);

        reopened.embed(&texts[..1], InputKind::Query).await.unwrap();
        assert_eq!(reopened.misses(), 1, "a query is cached apart from the same text as a passage");
    }

    #[test]
    fn keys_separate_model_kind_and_text() {
        use crate::ingest::cache::cache_key;
        let key = cache_key("m", InputKind::Query, "a");
        assert_ne!(key, cache_key("m", InputKind::Passage, "a"));
        assert_ne!(key, cache_key("n", InputKind::Query, "a"));
        assert_ne!(cache_key("m", InputKind::Query, "ab"), cache_key("m", InputKind::Query, "a\0b"));
        assert_eq!(key.len(), 64);
    }
}
