//! The doc → section → chunk cascade of SPEC §3 steps 2–6, written once for every backend.

use super::types::{RetrievalHit, Steps};
use super::Result;
use crate::config::RuntimeSettings;
use crate::index::{RecordFilter, ScoredRecord, VectorIndex};
use crate::model::{Level, Record};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A record ranked at one level, with the evidence of how it got its score.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub record: Arc<Record>,
    pub score: f32,
    pub dense: Option<(usize, f32)>,
    pub lexical: Option<(usize, f32)>,
    pub padded: bool,
}

impl Ranked {
    fn from_dense(rank: usize, scored: ScoredRecord) -> Self {
        Self {
            score: scored.score,
            dense: Some((rank + 1, scored.score)),
            lexical: None,
            record: scored.record,
            padded: false,
        }
    }
}

/// Everything one cascade run needs besides the index.
pub struct CascadeInput<'a> {
    pub filter: RecordFilter,
    pub vector: &'a [f32],
    pub settings: &'a RuntimeSettings,
    pub max_results: usize,
    /// Words of the query for the text fallback (original spelling).
    pub query_words: Vec<String>,
}

/// What the cascade found: final hits plus the stages' intermediate lists.
pub struct CascadeOutput {
    pub hits: Vec<Ranked>,
    pub hits_level: Option<Level>,
    pub docs: Vec<Ranked>,
    pub sections: Vec<Ranked>,
    pub chunks: Vec<Ranked>,
    pub fallback_used: bool,
}

/// Ranks one level: the single place where a level's candidates are scored and ordered.
async fn rank_level(
    index: &dyn VectorIndex,
    level: Level,
    filter: &RecordFilter,
    vector: &[f32],
    k: usize,
) -> Result<Vec<Ranked>> {
    let dense = index.knn(level, filter, vector, k.max(1)).await?;
    Ok(dense.into_iter().enumerate().map(|(rank, scored)| Ranked::from_dense(rank, scored)).collect())
}

/// Runs the cascade. Section hits win when there are any; else chunk hits; else the text fallback.
pub async fn run(index: &dyn VectorIndex, input: CascadeInput<'_>) -> Result<CascadeOutput> {
    let settings = input.settings;
    let doc_filter = doc_level_filter(index, &input.filter).await?;

    let mut docs = match &doc_filter {
        Some(filter) => rank_level(index, Level::Doc, filter, input.vector, settings.doc_top_k).await?,
        None => Vec::new(),
    };
    if let Some(filter) = &doc_filter {
        pad_docs(index, filter, &mut docs, settings.min_docs).await?;
    }
    let chosen_docs: Vec<String> = docs.iter().map(|d| d.record.meta.doc_id.clone()).collect();

    let mut sections = Vec::new();
    let mut chunks = Vec::new();
    if !chosen_docs.is_empty() {
        let section_filter = RecordFilter { doc_ids: Some(chosen_docs.clone()), ..input.filter.clone() };
        sections = rank_level(index, Level::Section, &section_filter, input.vector, settings.section_top_k).await?;
        sections.retain(|s| s.score >= settings.min_score);

        let mut chunk_filter = RecordFilter { doc_ids: Some(chosen_docs), ..input.filter.clone() };
        if !sections.is_empty() {
            chunk_filter.section_ids = Some(sections.iter().filter_map(|s| s.record.meta.section_id.clone()).collect());
        }
        chunks = rank_level(index, Level::Chunk, &chunk_filter, input.vector, settings.chunk_top_k).await?;
        chunks.retain(|c| c.score >= settings.min_score);
        chunks = cap_per_doc(chunks, settings.topk_per_doc);
        chunks.truncate(input.max_results);
    }

    let mut fallback_used = false;
    let (hits, hits_level) = if !sections.is_empty() {
        (sections.iter().take(input.max_results).cloned().collect(), Some(Level::Section))
    } else if !chunks.is_empty() {
        (chunks.clone(), Some(Level::Chunk))
    } else {
        fallback_used = true;
        let found = text_fallback(index, &input, settings).await?;
        let level = if found.is_empty() { None } else { Some(Level::Chunk) };
        (found, level)
    };
    Ok(CascadeOutput { hits, hits_level, docs, sections, chunks, fallback_used })
}

/// The doc-level filter: the request filter without section ids; when section ids are requested,
/// docs are restricted to those that own one of them. `None` when no doc can match.
async fn doc_level_filter(index: &dyn VectorIndex, filter: &RecordFilter) -> Result<Option<RecordFilter>> {
    let mut doc_filter = RecordFilter { section_ids: None, ..filter.clone() };
    if filter.section_ids.is_some() {
        let owners: Vec<String> = index
            .get(Level::Section, filter, usize::MAX)
            .await?
            .iter()
            .map(|s| s.meta.doc_id.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if owners.is_empty() {
            return Ok(None);
        }
        doc_filter.doc_ids = Some(owners);
    }
    Ok(Some(doc_filter))
}

/// Pads the doc list up to `min_docs` with metadata matches (seed 004 `_pad_docs_with_metadata`).
async fn pad_docs(
    index: &dyn VectorIndex,
    filter: &RecordFilter,
    docs: &mut Vec<Ranked>,
    min_docs: usize,
) -> Result<()> {
    if docs.len() >= min_docs {
        return Ok(());
    }
    let chosen: HashSet<String> = docs.iter().map(|d| d.record.id.clone()).collect();
    let candidates = index.get(Level::Doc, filter, min_docs + chosen.len()).await?;
    for record in candidates {
        if docs.len() >= min_docs {
            break;
        }
        if !chosen.contains(&record.id) {
            docs.push(Ranked { record, score: 0.0, dense: None, lexical: None, padded: true });
        }
    }
    Ok(())
}

/// Keeps at most `per_doc` items of each doc, preserving order.
pub fn cap_per_doc(items: Vec<Ranked>, per_doc: usize) -> Vec<Ranked> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    items
        .into_iter()
        .filter(|item| {
            let count = counts.entry(item.record.meta.doc_id.clone()).or_default();
            *count += 1;
            *count <= per_doc
        })
        .collect()
}

/// Spellings of each query word that a case-sensitive substring search should try.
pub fn fallback_needles(words: &[String]) -> Vec<String> {
    let mut needles = Vec::new();
    for word in words.iter().filter(|w| w.chars().count() >= 3) {
        let lower = word.to_lowercase();
        let mut capitalized: String = lower.chars().take(1).flat_map(char::to_uppercase).collect();
        capitalized.extend(lower.chars().skip(1));
        for needle in [word.clone(), lower, capitalized] {
            if !needles.contains(&needle) {
                needles.push(needle);
            }
        }
    }
    needles
}

/// Last resort when similarity left nothing: chunks whose text contains query words, scored by
/// the share of distinct query words they contain (case-insensitive).
async fn text_fallback(
    index: &dyn VectorIndex,
    input: &CascadeInput<'_>,
    settings: &RuntimeSettings,
) -> Result<Vec<Ranked>> {
    let needles = fallback_needles(&input.query_words);
    if needles.is_empty() {
        return Ok(Vec::new());
    }
    let words: Vec<String> =
        input.query_words.iter().filter(|w| w.chars().count() >= 3).map(|w| w.to_lowercase()).collect();
    let candidates = index.text_search(Level::Chunk, &input.filter, &needles, settings.chunk_top_k.max(1) * 4).await?;
    let mut ranked: Vec<Ranked> = candidates
        .into_iter()
        .map(|record| {
            let text = record.text.to_lowercase();
            let found = words.iter().filter(|w| text.contains(w.as_str())).count();
            let score = found as f32 / words.len().max(1) as f32;
            Ranked { record, score, dense: None, lexical: None, padded: false }
        })
        .collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.record.id.cmp(&b.record.id)));
    let mut ranked = cap_per_doc(ranked, settings.topk_per_doc);
    ranked.truncate(input.max_results);
    Ok(ranked)
}

/// Converts ranked records into API hits (without text) and the optional steps.
pub fn to_hit(ranked: &Ranked) -> RetrievalHit {
    let level = ranked.record.level();
    RetrievalHit::from_metadata(&ranked.record.id, level, &ranked.record.meta, ranked.score)
}

pub fn steps(output: &CascadeOutput) -> Steps {
    Steps {
        docs: output.docs.iter().map(to_hit).collect(),
        sections: output.sections.iter().map(to_hit).collect(),
        chunks: output.chunks.iter().map(to_hit).collect(),
        padded_doc_ids: output.docs.iter().filter(|d| d.padded).map(|d| d.record.id.clone()).collect(),
        fallback_used: output.fallback_used,
    }
}
