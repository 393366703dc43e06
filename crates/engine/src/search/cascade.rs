//! The stage **cascade**: doc → section → chunk (filter, choose pages, rank their sections, their
//! chunks, the text fallback), written once for every source. Each level reads its candidates
//! from the search's `Source` (`ranking::candidates`, and the plain reads here: the doc filter's
//! section owners, padding, pages only the evidence named, the text fallback) and ranks them with
//! plain functions (`ranking::fuse_and_boost`, `fuse_doc_lists`, `add_second_section_evidence`,
//! `cap_per_doc`, `score_fallback`); a level's reads depend on the level above, so the cascade
//! reads again between its rankings.

use super::error::Result;
use super::fusion::{RankedList, ReciprocalRankFusion};
use super::ranking::{candidates, fuse, fuse_and_boost, rank_level, Candidates, Ranked, RankingContext, FUSION_DEPTH};
use super::rerank::rerank_sections;
use super::settings::RuntimeSettings;
use super::types::{Degradation, RetrievalHit, Steps};
use crate::index::features::IdOrder;
use crate::index::{RecordFilter, Source};
use crate::model::Level;
use crate::rerank::Reranker;
use crate::router::ThemeLabels;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::time::Duration;

/// Everything one cascade run needs besides the source.
pub(crate) struct CascadeInput<'a> {
    pub(crate) filter: RecordFilter,
    pub(crate) ranking: RankingContext<'a>,
    pub(crate) settings: &'a RuntimeSettings,
    pub(crate) rerank: Option<RerankStep<'a>>,
    pub(crate) max_results: usize,
    /// Words of the query for the text fallback (original spelling).
    pub(crate) query_words: Vec<String>,
    /// Whether the chunk step's list is wanted even when sections answer (`include_steps`):
    /// chunk hits are the answer only when no section is; otherwise nobody reads them.
    pub(crate) chunks_wanted: bool,
}

/// The reranker call of the section level, when reranking is on for this request.
pub(crate) struct RerankStep<'a> {
    pub(crate) reranker: &'a dyn Reranker,
    pub(crate) query: &'a str,
    pub(crate) timeout: Duration,
}

/// What the cascade found: final hits plus the stages' intermediate lists.
pub(crate) struct CascadeOutput {
    pub(crate) hits: Vec<Ranked>,
    pub(crate) hits_level: Option<Level>,
    pub(crate) docs: Vec<Ranked>,
    pub(crate) sections: Vec<Ranked>,
    pub(crate) chunks: Vec<Ranked>,
    pub(crate) fallback_used: bool,
    pub(crate) rerank_degradation: Option<Degradation>,
}

/// Runs the cascade. Section hits win when there are any; else chunk hits; else the text fallback.
pub(crate) async fn run(source: &Source, input: CascadeInput<'_>) -> Result<CascadeOutput> {
    let settings = input.settings;
    let doc_filter = doc_level_filter(source, &input.filter).await?;

    let mut docs = match &doc_filter {
        Some(filter) => choose_docs(source, filter, &input.ranking, settings.doc_top_k).await?,
        None => Vec::new(),
    };
    if let Some(filter) = &doc_filter {
        pad_docs(source, filter, &mut docs, settings.min_docs).await?;
    }
    let chosen_docs: Vec<String> = docs.iter().map(|d| d.record.meta.doc_id.to_string()).collect();
    // The same pages by number, when the index numbered them all in one build.
    let chosen_pages = page_numbers(&docs)
        .zip(docs.first().and_then(page_order))
        .map(|(numbers, first)| crate::index::filter::PageHint { scope: std::sync::Arc::clone(&first.scope), numbers });

    let mut sections = Vec::new();
    let mut rerank_degradation = None;
    let mut chunks = Vec::new();
    if !chosen_docs.is_empty() {
        // The chunk step, when it runs, takes the same pages: the section filter keeps them.
        let section_filter = RecordFilter { doc_ids: Some(chosen_docs), pages: chosen_pages, ..input.filter.clone() };
        sections = rank_level(source, Level::Section, &section_filter, &input.ranking, settings.section_top_k).await?;
        sections.retain(|s| s.fused_normalized >= settings.min_score);
        add_second_section_evidence(&mut sections, input.ranking.boosting.cascade.second_section_weight);
        if let Some(step) = &input.rerank {
            let (reranked, degradation) =
                rerank_sections(step.reranker, step.query, sections, settings.rerank_top_n, step.timeout).await;
            sections = reranked;
            rerank_degradation = degradation;
        }

        if input.chunks_wanted || sections.is_empty() {
            let mut chunk_filter = section_filter;
            if !sections.is_empty() {
                chunk_filter.section_ids =
                    Some(sections.iter().filter_map(|s| s.record.meta.section_id.clone()).collect());
            }
            chunks = rank_level(source, Level::Chunk, &chunk_filter, &input.ranking, settings.chunk_top_k).await?;
            chunks.retain(|c| c.fused_normalized >= settings.min_score);
            chunks = cap_per_doc(chunks, settings.topk_per_doc);
            chunks.truncate(input.max_results);
        }
    }

    let mut fallback_used = false;
    let (hits, hits_level) = if !sections.is_empty() {
        // Section hits get the same per-doc cap as chunks, so one long page cannot fill the answer.
        let keep = kept_per_doc(&sections, settings.topk_per_doc);
        let section_hits: Vec<Ranked> = sections
            .iter()
            .zip(keep)
            .filter(|(_, keep)| *keep)
            .map(|(s, _)| s.clone())
            .take(input.max_results)
            .collect();
        (section_hits, Some(Level::Section))
    } else if !chunks.is_empty() {
        (chunks.clone(), Some(Level::Chunk))
    } else {
        fallback_used = true;
        let found = text_fallback(source, &input, settings).await?;
        let level = if found.is_empty() { None } else { Some(Level::Chunk) };
        (found, level)
    };
    Ok(CascadeOutput { hits, hits_level, docs, sections, chunks, fallback_used, rerank_degradation })
}

/// The doc step: the top `k` pages. With evidence weights in `cascade` (boosting.yaml), a page's
/// score fuses its own record's rank with the ranks of its best section and best chunk in
/// tenant-wide rankings, so a page whose title does not echo the question still gets in when
/// its content answers it (and the gate keeps working whatever the number of pages).
async fn choose_docs(
    source: &Source,
    filter: &RecordFilter,
    ranking: &RankingContext<'_>,
    k: usize,
) -> Result<Vec<Ranked>> {
    let cascade = &ranking.boosting.cascade;
    if cascade.section_weight <= 0.0 && cascade.chunk_weight <= 0.0 {
        return rank_level(source, Level::Doc, filter, ranking, k).await;
    }
    let depth = FUSION_DEPTH.max(k);
    let direct = match cascade.doc_weight > 0.0 {
        true => Some(candidates(source, Level::Doc, filter, ranking, depth).await?),
        false => None,
    };
    let mut evidence = Vec::new();
    for (level, weight) in [(Level::Section, cascade.section_weight), (Level::Chunk, cascade.chunk_weight)] {
        if weight > 0.0 {
            evidence.push((candidates(source, level, filter, ranking, depth).await?, weight));
        }
    }
    let (direct, fused) = fuse_doc_lists(direct.as_ref(), &evidence, ranking, k);
    let missing: Vec<String> = fused.iter().filter_map(|(place, ..)| place.as_ref().err().cloned()).collect();
    let looked_up = match missing.is_empty() {
        true => Vec::new(),
        false => source.get(Level::Doc, &filter.with_doc_ids(missing.clone()), missing.len()).await?,
    };
    Ok(place_docs(direct, fused, looked_up))
}

/// A fused page: its place in the direct list, or its doc id when only the evidence named it,
/// with its raw and normalised fused score.
type FusedPage = (std::result::Result<usize, String>, f32, f32);

/// The doc step's ranking over its candidates: the pages' own records fused and boosted (the
/// direct list), each evidence level fused, then all of them fused by RRF into the top `k` pages.
fn fuse_doc_lists(
    direct: Option<&Candidates>,
    evidence: &[(Candidates, f32)],
    ranking: &RankingContext<'_>,
    k: usize,
) -> (Vec<Ranked>, Vec<FusedPage>) {
    let cascade = &ranking.boosting.cascade;
    let depth = FUSION_DEPTH.max(k);
    let direct = direct.map(|found| fuse_and_boost(found, ranking, depth)).unwrap_or_default();
    // The evidence lists only need the fused order of relevance, and boosting (which reads every
    // candidate's metadata and text) is not free.
    let evidence: Vec<(Vec<Ranked>, f32)> =
        evidence.iter().map(|(found, weight)| (fuse(found, ranking, depth, false), *weight)).collect();
    let fusion = ReciprocalRankFusion::new(cascade.k);
    // Pages are keyed by their number in the tenant's page order when every ranked record has one
    // from one index build (no id hashed); else by their doc id. Both order pages alike.
    let fused = match page_numbers(direct.iter().chain(evidence.iter().flat_map(|(ranked, _)| ranked))) {
        Some(_) => fuse_pages(&direct, &evidence, cascade.doc_weight, fusion, k, |r| {
            page_order(r).map_or(u32::MAX, |page| page.number)
        }),
        None => fuse_pages(&direct, &evidence, cascade.doc_weight, fusion, k, |r| r.record.meta.doc_id.as_str()),
    };
    (direct, fused)
}

/// The fused pages in their fused order: a direct page's own ranked record, or the doc record
/// read for a page only the evidence named, each scored with its fused score.
fn place_docs(
    direct: Vec<Ranked>,
    fused: Vec<FusedPage>,
    looked_up: Vec<std::sync::Arc<crate::model::Record>>,
) -> Vec<Ranked> {
    let mut looked_up: HashMap<String, Ranked> = looked_up
        .into_iter()
        .map(|record| (record.meta.doc_id.to_string(), Ranked::unscored(record, 0.0, false)))
        .collect();
    let mut direct: Vec<Option<Ranked>> = direct.into_iter().map(Some).collect();
    fused
        .into_iter()
        .filter_map(|(place, score, normalized)| {
            let mut doc = match place {
                Ok(number) => direct[number].take()?,
                Err(id) => looked_up.remove(&id)?,
            };
            doc.fused = score;
            doc.fused_normalized = normalized;
            doc.score = normalized;
            Some(doc)
        })
        .collect()
}

/// The record's page number, when the index numbered its pages.
fn page_order(ranked: &Ranked) -> Option<&IdOrder> {
    ranked.record.page()
}

/// The doc step's fusion: the pages of `direct` (in order) and of each evidence list (each page
/// at its best record), fused by RRF into the top `k`, pages keyed by `key`. Each fused page is
/// its place in `direct`, or its id when only the evidence named it, with its raw and normalised
/// score.
fn fuse_pages<'a, K: Copy + Eq + std::hash::Hash + Ord>(
    direct: &'a [Ranked],
    evidence: &'a [(Vec<Ranked>, f32)],
    doc_weight: f32,
    fusion: ReciprocalRankFusion,
    k: usize,
    key: impl Fn(&'a Ranked) -> K,
) -> Vec<FusedPage> {
    let mut lists: Vec<(Vec<K>, f32)> = vec![(direct.iter().map(&key).collect(), doc_weight)];
    for (ranked, weight) in evidence {
        let mut seen = HashSet::with_capacity_and_hasher(ranked.len(), Default::default());
        let pages: Vec<K> = ranked.iter().map(&key).filter(|page| seen.insert(*page)).collect();
        lists.push((pages, *weight));
    }
    let inputs: Vec<RankedList<'_, K>> = lists.iter().map(|(ids, w)| RankedList::new(ids, *w)).collect();
    let position: HashMap<K, usize> = lists[0].0.iter().enumerate().map(|(number, &page)| (page, number)).collect();
    // A page only the evidence named: its first record there, found in a map made when the
    // first such page comes (not a walk of the evidence per page: with a `doc_top_k` of 1,000,
    // a million comparisons a search).
    let first_records: std::cell::OnceCell<HashMap<K, &'a Ranked>> = std::cell::OnceCell::new();
    let doc_id_of = |page: K| {
        let first = first_records.get_or_init(|| {
            let mut first = HashMap::default();
            for ranked in evidence.iter().flat_map(|(ranked, _)| ranked) {
                first.entry(key(ranked)).or_insert(ranked);
            }
            first
        });
        first.get(&page).map(|r| r.record.meta.doc_id.to_string())
    };
    fusion
        .fuse(&inputs, k)
        .into_iter()
        .filter_map(|item| {
            let place = match position.get(&item.id) {
                Some(&number) => Ok(number),
                None => Err(doc_id_of(item.id)?),
            };
            Some((place, item.score, item.normalized))
        })
        .collect()
}

/// Adds `weight` × the score of the page's second-best section to each of its sections and
/// re-sorts (ties by id, as everywhere): a page that answers with two sections goes above a page
/// whose one section matches as well (a hub page, an overview). Pages with one ranked section
/// gain nothing.
fn add_second_section_evidence(sections: &mut Vec<Ranked>, weight: f32) {
    if !(weight > 0.0 && weight.is_finite()) {
        return;
    }
    let added = second_best_of_pages(sections, weight, &page_keys(sections));
    for (section, added) in sections.iter_mut().zip(added) {
        section.score += added;
        section.page_evidence = Some(added);
    }
    super::boosting::sort_best_first(sections);
}

/// What `add_second_section_evidence` adds to each section: `weight` × the score of the second
/// best section of its page (`pages`: each section's `page_keys`).
fn second_best_of_pages(sections: &[Ranked], weight: f32, pages: &[u32]) -> Vec<f32> {
    // Sections come sorted best first: the second one seen of a page is its second best.
    let mut seen: HashMap<u32, (usize, f32)> = HashMap::with_capacity_and_hasher(pages.len(), Default::default());
    for (section, &page) in sections.iter().zip(pages) {
        let entry = seen.entry(page).or_insert((0, 0.0));
        entry.0 += 1;
        if entry.0 == 2 {
            entry.1 = section.score;
        }
    }
    pages.iter().map(|page| weight * seen.get(page).map_or(0.0, |e| e.1)).collect()
}

/// The doc-level filter: the request filter without section ids; when section ids are requested,
/// docs are restricted to those that own one of them. `None` when no doc can match.
async fn doc_level_filter(source: &Source, filter: &RecordFilter) -> Result<Option<RecordFilter>> {
    let doc_filter = RecordFilter { section_ids: None, ..filter.clone() };
    if filter.section_ids.is_some() {
        let owners: Vec<String> = source
            .get(Level::Section, filter, usize::MAX)
            .await?
            .iter()
            .map(|s| s.meta.doc_id.to_string())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if owners.is_empty() {
            return Ok(None);
        }
        return Ok(Some(doc_filter.with_doc_ids(owners)));
    }
    Ok(Some(doc_filter))
}

/// Pads the doc list up to `min_docs` with metadata matches, so a narrow filter still has pages to rank.
async fn pad_docs(source: &Source, filter: &RecordFilter, docs: &mut Vec<Ranked>, min_docs: usize) -> Result<()> {
    if docs.len() >= min_docs {
        return Ok(());
    }
    let chosen: HashSet<String> = docs.iter().map(|d| d.record.id.clone()).collect();
    let padding = source.get(Level::Doc, filter, min_docs + chosen.len()).await?;
    for record in padding {
        if docs.len() >= min_docs {
            break;
        }
        if !chosen.contains(&record.id) {
            docs.push(Ranked::unscored(record, 0.0, true));
        }
    }
    Ok(())
}

/// Keeps at most `per_doc` items of each doc, preserving order.
pub(crate) fn cap_per_doc(items: Vec<Ranked>, per_doc: usize) -> Vec<Ranked> {
    let keep = kept_per_doc(&items, per_doc);
    items.into_iter().zip(keep).filter_map(|(item, keep)| keep.then_some(item)).collect()
}

/// Whether each of `items` is among the first `per_doc` of its doc.
fn kept_per_doc(items: &[Ranked], per_doc: usize) -> Vec<bool> {
    let mut counts: HashMap<u32, usize> = HashMap::with_capacity_and_hasher(items.len(), Default::default());
    page_keys(items)
        .into_iter()
        .map(|page| {
            let count = counts.entry(page).or_default();
            *count += 1;
            *count <= per_doc
        })
        .collect()
}

/// A key per item, equal exactly for items of the same page: the page numbers when every item
/// has one from one index build (the records' doc ids are not read), else each doc id's place
/// among the doc ids in the order they first appear.
fn page_keys(items: &[Ranked]) -> Vec<u32> {
    if let Some(numbers) = page_numbers(items) {
        return numbers;
    }
    let mut seen: HashMap<&str, u32> = HashMap::default();
    items
        .iter()
        .map(|item| {
            let next = seen.len() as u32;
            *seen.entry(item.record.meta.doc_id.as_str()).or_insert(next)
        })
        .collect()
}

/// The page number of each of `items`, when all have one from one index build.
fn page_numbers<'a>(items: impl IntoIterator<Item = &'a Ranked>) -> Option<Vec<u32>> {
    let pages: Vec<&IdOrder> = items.into_iter().map(page_order).collect::<Option<_>>()?;
    pages.iter().all(|page| page.same_scope(pages[0])).then(|| pages.iter().map(|page| page.number).collect())
}

/// Spellings of each query word that a case-sensitive substring search should try.
pub(crate) fn fallback_needles(words: &[String]) -> Vec<String> {
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
async fn text_fallback(source: &Source, input: &CascadeInput<'_>, settings: &RuntimeSettings) -> Result<Vec<Ranked>> {
    let needles = fallback_needles(&input.query_words);
    if needles.is_empty() {
        return Ok(Vec::new());
    }
    let found = source.text_search(Level::Chunk, &input.filter, &needles, settings.chunk_top_k.max(1) * 4).await?;
    Ok(score_fallback(found, &input.query_words, settings.topk_per_doc, input.max_results))
}

/// The text fallback's ranking: by the share of the query's words (3 characters or more) each
/// chunk holds, ties by id, at most `per_doc` a page and `max_results` in all.
fn score_fallback(
    found: Vec<std::sync::Arc<crate::model::Record>>,
    query_words: &[String],
    per_doc: usize,
    max_results: usize,
) -> Vec<Ranked> {
    let words: Vec<String> = query_words.iter().filter(|w| w.chars().count() >= 3).map(|w| w.to_lowercase()).collect();
    let mut ranked: Vec<Ranked> = found
        .into_iter()
        .map(|record| {
            let text = record.text.to_lowercase();
            let found = words.iter().filter(|w| text.contains(w.as_str())).count();
            let score = found as f32 / words.len().max(1) as f32;
            Ranked::unscored(record, score, false)
        })
        .collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.record.id.cmp(&b.record.id)));
    let mut ranked = cap_per_doc(ranked, per_doc);
    ranked.truncate(max_results);
    ranked
}

/// Converts a ranked record into an API hit (never with text), labelled with its theme.
pub(crate) fn to_hit(ranked: &Ranked, explain: bool, themes: &ThemeLabels<'_>) -> RetrievalHit {
    let level = ranked.record.level();
    let mut hit = RetrievalHit::from_metadata(&ranked.record.id, level, &ranked.record.meta, ranked.score);
    hit.relevance = ranked.fused_normalized;
    hit.metadata.theme_label = super::ranking::theme_label(ranked, themes);
    if explain {
        hit.explain = Some(ranked.explain());
    }
    hit
}

pub(crate) fn steps(output: &CascadeOutput, explain: bool, themes: &ThemeLabels<'_>) -> Steps {
    let convert = |list: &[Ranked]| list.iter().map(|r| to_hit(r, explain, themes)).collect();
    Steps {
        docs: convert(&output.docs),
        sections: convert(&output.sections),
        chunks: convert(&output.chunks),
        padded_doc_ids: output.docs.iter().filter(|d| d.padded).map(|d| d.record.id.clone()).collect(),
        fallback_used: output.fallback_used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::RecordRef;
    use crate::model::{Metadata, Record};
    use std::sync::Arc;

    fn section(id: &str, doc: &str, score: f32) -> Ranked {
        let meta = Metadata { doc_id: doc.into(), section_id: Some(id.into()), ..Metadata::default() };
        let record = Arc::new(Record { id: id.into(), meta, text: Default::default(), embedding: Vec::new() });
        Ranked::unscored(record, score, false)
    }

    fn order(sections: &[Ranked]) -> Vec<&str> {
        sections.iter().map(|s| s.record.id.as_str()).collect()
    }

    #[test]
    fn a_page_only_the_evidence_names_is_fused_once_by_its_doc_id() {
        // Pages keyed by their doc id's first byte (as page numbers key them in the index): the
        // direct list has "a" and "b"; "c" and "d" come from the evidence only, "c" three times.
        let direct = vec![section("a#s0", "a", 1.0), section("b#s0", "b", 0.9)];
        let evidence = vec![
            (vec![section("c#s0", "c", 0.9), section("a#s1", "a", 0.8), section("c#s1", "c", 0.7)], 1.0),
            (vec![section("d#s0", "d", 0.9), section("c#s2", "c", 0.8)], 1.0),
        ];
        let key = |r: &Ranked| r.record.meta.doc_id.as_bytes()[0];
        let fused = fuse_pages(&direct, &evidence, 1.0, ReciprocalRankFusion::new(60.0), 10, key);
        let mut places: Vec<std::result::Result<usize, String>> = fused.into_iter().map(|(place, ..)| place).collect();
        places.sort();
        assert_eq!(places, [Ok(0), Ok(1), Err("c".to_string()), Err("d".to_string())]);
    }

    #[test]
    fn a_page_answering_with_two_sections_passes_a_page_with_one() {
        // The hub page's one section is best; the other page has two close behind it.
        let mut sections =
            vec![section("hub#s0", "hub", 1.0), section("page#s0", "page", 0.95), section("page#s1", "page", 0.9)];
        add_second_section_evidence(&mut sections, 0.1);
        assert_eq!(order(&sections), ["page#s0", "hub#s0", "page#s1"]);
        assert!((sections[0].score - 1.04).abs() < 1e-5, "0.95 + 0.1 × 0.9, got {}", sections[0].score);
        assert_eq!(sections[1].score, 1.0, "a page with one ranked section gains nothing");
        assert_eq!(sections[1].page_evidence, Some(0.0));
    }

    #[test]
    fn second_sections_count_alike_by_page_number_and_by_doc_id() {
        // Numbered pages (the in-memory index) and pages known only by doc id add the same.
        let scope = Arc::new(());
        let docs = ["a", "b", "c"];
        let numbered = |r: Ranked| {
            let mut features = crate::index::RecordFeatures::of(&r.record, &Default::default());
            let number = docs.iter().position(|d| *d == r.record.meta.doc_id).unwrap() as u32;
            features.page = Some(IdOrder { scope: Arc::clone(&scope), number });
            Ranked { record: RecordRef::own(r.record.to_arc(), Some(Arc::new(features))), ..r }
        };
        let list = || {
            vec![
                section("b#s0", "b", 0.9),
                section("a#s0", "a", 0.85),
                section("b#s1", "b", 0.8),
                section("c#s0", "c", 0.8),
                section("a#s1", "a", 0.7),
                section("a#s2", "a", 0.6),
            ]
        };
        let mut by_id = list();
        let mut by_number: Vec<Ranked> = list().into_iter().map(numbered).collect();
        add_second_section_evidence(&mut by_id, 0.1);
        add_second_section_evidence(&mut by_number, 0.1);
        let outcome = |sections: &[Ranked]| -> Vec<(String, u32, Option<f32>)> {
            sections.iter().map(|s| (s.record.id.clone(), s.score.to_bits(), s.page_evidence)).collect()
        };
        assert_eq!(outcome(&by_number), outcome(&by_id));
        assert_eq!(by_id[0].record.id, "b#s0");
        assert_eq!(by_id[0].page_evidence, Some(0.1 * 0.8));
        assert_eq!(by_id.iter().find(|s| s.record.id == "c#s0").unwrap().page_evidence, Some(0.0));

        // The cap per page keeps the same sections both ways: the first two of each page.
        let ids = |ranked: Vec<Ranked>| ranked.into_iter().map(|r| r.record.id.clone()).collect::<Vec<_>>();
        let by_number: Vec<Ranked> = list().into_iter().map(numbered).collect();
        assert!(page_numbers(&by_number).is_some());
        assert_eq!(ids(cap_per_doc(by_number, 2)), ids(cap_per_doc(list(), 2)));
        assert_eq!(ids(cap_per_doc(list(), 2)), ["b#s0", "a#s0", "b#s1", "c#s0", "a#s1"]);
    }

    #[test]
    fn pages_fuse_alike_by_number_and_by_id() {
        // Page numbers follow doc id order, so fusing by number (ties by number) and by id (ties
        // by id) choose the same pages in the same order, with the same scores.
        let scope = Arc::new(());
        let pages = ["a", "b", "c", "d", "e", "f"];
        let ranked = |id: &str, doc: &str| {
            let mut r = section(id, doc, 0.5);
            let mut features = crate::index::RecordFeatures::of(&r.record, &Default::default());
            let number = pages.iter().position(|p| *p == doc).unwrap() as u32;
            features.page = Some(IdOrder { scope: Arc::clone(&scope), number });
            r.record = RecordRef::own(r.record.to_arc(), Some(Arc::new(features)));
            r
        };
        let direct = vec![ranked("e", "e"), ranked("b", "b"), ranked("d", "d"), ranked("a", "a")];
        let evidence = vec![(
            vec![
                ranked("c#s0", "c"),
                ranked("b#s1", "b"),
                ranked("c#s1", "c"),
                ranked("f#s0", "f"),
                ranked("e#s0", "e"),
            ],
            1.0,
        )];
        let fusion = ReciprocalRankFusion::new(5.0);
        for k in [1, 3, 6, 10] {
            let by_number = fuse_pages(&direct, &evidence, 1.0, fusion, k, |r| page_order(r).unwrap().number);
            let by_id = fuse_pages(&direct, &evidence, 1.0, fusion, k, |r| r.record.meta.doc_id.as_str());
            assert_eq!(by_number, by_id, "k = {k}");
            assert_eq!(by_id.len(), k.min(6));
        }
        let all = fuse_pages(&direct, &evidence, 1.0, fusion, 10, |r| r.record.meta.doc_id.as_str());
        assert!(all.iter().any(|page| page.0 == Err("f".to_string())), "f is named by the evidence only");
        assert!(all.iter().any(|page| page.0 == Ok(1)), "b is direct's second page");
    }

    #[test]
    fn the_text_fallback_ranks_by_the_share_of_query_words_then_id_and_caps_each_page() {
        let chunk = |id: &str, doc: &str, text: &str| {
            let meta = Metadata { doc_id: doc.into(), ..Metadata::default() };
            Arc::new(Record { id: id.into(), meta, text: text.into(), embedding: Vec::new() })
        };
        let found = vec![
            chunk("b#1", "b", "Настройка DNS"),
            chunk("a#2", "a", "dns фильтрация и настройка"),
            chunk("a#1", "a", "про DNS и настройка фильтрации"),
            chunk("a#3", "a", "фильтрация DNS, настройка"),
            chunk("c#1", "c", "ничего общего"),
        ];
        let words: Vec<String> = ["DNS", "настройка", "фильтрация", "и"].iter().map(|w| w.to_string()).collect();
        let ranked = score_fallback(found, &words, 2, 10);
        let scored: Vec<(&str, f32)> = ranked.iter().map(|r| (r.record.id.as_str(), r.score)).collect();
        // Words of 3 characters or more, case-insensitive («и» does not count, «фильтрации» is
        // not «фильтрация»); equal shares by id; a#1 is page a's third and left out.
        assert_eq!(scored, [("a#2", 1.0), ("a#3", 1.0), ("b#1", 2.0 / 3.0), ("c#1", 0.0)]);
    }

    #[test]
    fn weight_zero_leaves_the_order_and_scores_alone() {
        let mut sections = vec![section("a#s0", "a", 1.0), section("b#s0", "b", 0.9), section("b#s1", "b", 0.8)];
        add_second_section_evidence(&mut sections, 0.0);
        assert_eq!(order(&sections), ["a#s0", "b#s0", "b#s1"]);
        assert!(sections.iter().all(|s| s.page_evidence.is_none()));
    }
}
