//! Embedding records as passages in batches through the `Embedder`, with the persistent cache
//! (identical texts are embedded once) and progress on stderr: a redrawn bar on a terminal,
//! plain lines (about every 10%) otherwise.

use super::cache::{cache_key, EmbeddingCache};
use super::records::RecordSet;
use super::IngestError;
use crate::embed::{Embedder, InputKind};
use std::collections::HashSet;
use std::io::{IsTerminal, Write};

/// What embedding cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedStats {
    /// Calls made to the embedder (batches).
    pub calls: usize,
    /// Distinct texts sent to the embedder.
    pub embedded_texts: usize,
    /// Records whose vector came from the cache (or from an identical text in this run).
    pub cache_hits: usize,
}

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Bar on a terminal, lines otherwise (stderr).
    Auto,
    Silent,
}

struct Reporter {
    mode: Option<bool>,
    total: usize,
    last_decile: usize,
}

impl Reporter {
    fn new(progress: Progress, total: usize) -> Self {
        let mode = match progress {
            Progress::Auto => Some(std::io::stderr().is_terminal()),
            Progress::Silent => None,
        };
        Self { mode, total, last_decile: 0 }
    }

    fn update(&mut self, done: usize) {
        let Some(terminal) = self.mode else { return };
        let total = self.total.max(1);
        let mut stderr = std::io::stderr().lock();
        if terminal {
            const WIDTH: usize = 30;
            let filled = done * WIDTH / total;
            let _ = write!(
                stderr,
                "\rembedding [{}{}] {done}/{} ",
                "#".repeat(filled),
                ".".repeat(WIDTH - filled),
                self.total
            );
            if done >= self.total {
                let _ = writeln!(stderr);
            }
        } else {
            let decile = done * 10 / total;
            if decile > self.last_decile || done >= self.total {
                self.last_decile = decile;
                let _ = writeln!(stderr, "embedding: {done}/{} texts ({}%)", self.total, done * 100 / total);
            }
        }
    }
}

/// Fills the `embedding` of every record. Vectors must all have one non-zero dimension;
/// the embedder must return one vector per text.
pub async fn embed_records(
    embedder: &dyn Embedder,
    records: &mut RecordSet,
    batch_size: usize,
    cache: &mut EmbeddingCache,
    progress: Progress,
) -> Result<EmbedStats, IngestError> {
    let model = embedder.model_name().to_string();
    let mut stats = EmbedStats::default();
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut queued = HashSet::new();
    for record in records.all_mut() {
        let key = cache_key(&model, InputKind::Passage, &record.text);
        if cache.get(&key).is_some() || !queued.insert(key.clone()) {
            stats.cache_hits += 1;
        } else {
            pending.push((key, record.text.clone()));
        }
    }
    let mut reporter = Reporter::new(progress, pending.len());
    let mut done = 0;
    for batch in pending.chunks(batch_size.max(1)) {
        let texts: Vec<String> = batch.iter().map(|(_, text)| text.clone()).collect();
        let vectors = embedder.embed(&texts, InputKind::Passage).await.map_err(IngestError::Embedding)?;
        stats.calls += 1;
        if vectors.len() != texts.len() {
            return Err(IngestError::BadEmbedding(format!("{} vectors for {} texts", vectors.len(), texts.len())));
        }
        let entries: Vec<(String, Vec<f32>)> = batch.iter().map(|(key, _)| key.clone()).zip(vectors).collect();
        if let Err(error) = cache.insert_all(&model, entries) {
            tracing::warn!(%error, "embedding cache not written");
        }
        done += batch.len();
        stats.embedded_texts += batch.len();
        reporter.update(done);
    }
    let mut dimension = None;
    for record in records.all_mut() {
        let key = cache_key(&model, InputKind::Passage, &record.text);
        let vector =
            cache.get(&key).ok_or_else(|| IngestError::BadEmbedding(format!("no vector for {}", record.id)))?;
        let expected = *dimension.get_or_insert(vector.len());
        if vector.is_empty() || vector.len() != expected || vector.iter().any(|v| !v.is_finite()) {
            return Err(IngestError::BadEmbedding(format!(
                "record {} got a vector of dimension {} (expected {expected}, finite values)",
                record.id,
                vector.len()
            )));
        }
        record.embedding.clone_from(vector);
    }
    Ok(stats)
}
