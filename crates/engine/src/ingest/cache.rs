//! The persistent embedding cache: a JSON-lines file of `{"key","model","embedding"}` where `key`
//! is the hex SHA-256 of model name, input kind and text. Re-ingesting unchanged text costs no
//! embedding call. New entries are appended after every batch, so an interrupted run keeps
//! the work it did; unreadable lines are ignored (the text is simply embedded again).

use crate::embed::InputKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Serialize, Deserialize)]
struct CacheLine {
    key: String,
    model: String,
    embedding: Vec<f32>,
}

#[derive(Debug, Default)]
pub struct EmbeddingCache {
    path: Option<PathBuf>,
    entries: HashMap<String, Vec<f32>>,
}

/// The cache key of `text` embedded by `model` as `kind`.
pub(crate) fn cache_key(model: &str, kind: InputKind, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update([0]);
    hasher.update(kind.as_str().as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

impl EmbeddingCache {
    /// A cache that only lives for this run.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Opens (or prepares to create) the cache file at `path`, loading entries of `model` only.
    /// Returns the cache and the number of lines that could not be read.
    pub fn open(path: &Path, model: &str) -> std::io::Result<(Self, usize)> {
        let mut cache = Self { path: Some(path.to_path_buf()), entries: HashMap::new() };
        let content = match std::fs::read(path) {
            Ok(content) => content,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((cache, 0)),
            Err(error) => return Err(error),
        };
        let mut bad_lines = 0;
        for line in content.split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
            match serde_json::from_slice::<CacheLine>(line) {
                Ok(entry) if entry.model == model && !entry.embedding.is_empty() => {
                    cache.entries.insert(entry.key, entry.embedding);
                }
                Ok(_) => {}
                Err(_) => bad_lines += 1,
            }
        }
        Ok((cache, bad_lines))
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Vec<f32>> {
        self.entries.get(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds entries in memory and appends them to the file (if any).
    pub(crate) fn insert_all(&mut self, model: &str, entries: Vec<(String, Vec<f32>)>) -> std::io::Result<()> {
        let mut lines = Vec::new();
        if self.path.is_some() {
            for (key, embedding) in &entries {
                let line = CacheLine { key: key.clone(), model: model.to_string(), embedding: embedding.clone() };
                serde_json::to_writer(&mut lines, &line).map_err(std::io::Error::other)?;
                lines.push(b'\n');
            }
        }
        self.entries.extend(entries);
        if let Some(path) = &self.path {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
            file.write_all(&lines)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persists_per_model_and_survives_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/cache.jsonl");
        let key = cache_key("m", InputKind::Passage, "текст");
        assert_ne!(key, cache_key("m", InputKind::Query, "текст"));
        assert_ne!(key, cache_key("other", InputKind::Passage, "текст"));
        let (mut cache, _) = EmbeddingCache::open(&path, "m").unwrap();
        cache.insert_all("m", vec![(key.clone(), vec![0.5, 0.25])]).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{not json\n").unwrap();
        let (reopened, bad) = EmbeddingCache::open(&path, "m").unwrap();
        assert_eq!((reopened.get(&key), bad), (Some(&vec![0.5, 0.25]), 1));
        let (other_model, _) = EmbeddingCache::open(&path, "other").unwrap();
        assert!(other_model.is_empty());
    }
}
