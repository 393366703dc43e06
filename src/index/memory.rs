//! The in-memory backend: exact cosine and BM25 over a snapshot file (or the bundled demo
//! corpus), reloaded in the background when the file changes without interrupting searches.

use super::features::{IdOrder, RecordFeatures};
use super::replica::{Replica, SnapshotSource};
use super::tenant_level::{top_k, top_k_of, Residual, TenantLevel, Verdicts};
use super::{
    IndexError, IndexErrorKind, IndexStats, LevelStore, RecordFilter, RecordRef, Result, ScoredRecord, TenantStats,
};
use crate::model::{Level, Record, Snapshot};
use async_trait::async_trait;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// One tenant's records of one level as they are gathered, before indexing: each record as the
/// index keeps it (without its embedding), the embeddings back to back in one buffer (so a
/// loaded page's per-record vectors are freed as soon as it is added), and, for a rebuild, the
/// record's number in the level it is kept from.
#[derive(Debug, Default)]
struct LevelRows {
    records: Vec<Arc<Record>>,
    vectors: Vec<f32>,
    base_numbers: Vec<Option<usize>>,
}

impl LevelRows {
    fn push(&mut self, record: Arc<Record>, embedding: &[f32], base_number: Option<usize>) {
        self.records.push(record);
        self.vectors.extend_from_slice(embedding);
        self.base_numbers.push(base_number);
    }

    /// A new record (whose embedding is taken out of it).
    fn push_new(&mut self, mut record: Record) {
        let embedding = std::mem::take(&mut record.embedding);
        self.push(Arc::new(record), &embedding, None);
    }

    /// The row numbers by ascending record id; of rows with the same id (a record repeated by
    /// offset paging under a concurrent write) only one is kept.
    fn id_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.records.len()).collect();
        order.sort_unstable_by(|&a, &b| self.records[a].id.cmp(&self.records[b].id));
        order.dedup_by(|a, b| self.records[*a].id == self.records[*b].id);
        order
    }
}

/// One tenant's records of one level, numbered by ascending id.
#[derive(Debug, Default)]
struct LevelData {
    /// Number → the record and its derived features (boosting reads them instead of the text);
    /// ranked lists hold records by their number in it (`RecordRef`).
    store: Arc<LevelStore>,
    index: TenantLevel,
    /// This build of the level (pointer identity): what the thread's `Kept` entries are kept for.
    scope: Arc<()>,
}

impl LevelData {
    /// Indexes one tenant's records of one level with their embeddings. The vectors are kept in
    /// the scan matrix only: the records themselves carry none (`Record::embedding` is empty).
    /// Rows kept from `base` reuse what it derived from their texts (features, BM25 terms), so a
    /// refresh tokenizes only the records it re-read.
    fn build(rows: LevelRows, dimension: usize, base: Option<&LevelData>, pages: &PageNumbers) -> Self {
        let order = rows.id_order();
        let scope = Arc::new(());
        let mut kept: Vec<Option<u32>> = vec![None; base.map_or(0, |base| base.store.records.len())];
        let mut added = Vec::new();
        let (mut records, mut vectors, mut features) =
            (Vec::with_capacity(order.len()), Vec::with_capacity(order.len()), Vec::with_capacity(order.len()));
        for (number, &row) in order.iter().enumerate() {
            let record = &rows.records[row];
            let mut derived = match (rows.base_numbers[row], base) {
                (Some(old), Some(base)) => {
                    kept[old] = Some(number as u32);
                    RecordFeatures::clone(&base.store.features[old])
                }
                _ => {
                    added.push(number);
                    RecordFeatures::of(record)
                }
            };
            derived.page = pages.of(&record.meta.doc_id);
            features.push(derived);
            records.push(Arc::clone(record));
            vectors.push(&rows.vectors[row * dimension..][..dimension]);
        }
        let lexical = base.map(|base| {
            let added = added.iter().map(|&number| (number as u32, lexical_terms(&records[number])));
            base.index.lexical.renumbered(&kept, added, records.len())
        });
        let page_of: Option<Vec<u32>> = features.iter().map(|f| f.page.as_ref().map(|page| page.number)).collect();
        let index =
            TenantLevel::build(&records, &vectors, dimension, lexical, page_of.as_deref().map(|of| (&pages.scope, of)));
        Self { store: Arc::new(LevelStore::new(records, features)), index, scope }
    }

    /// The records that pass `filter` (whose tenant is this one), as numbers in id order.
    fn matching(&self, filter: &RecordFilter) -> Vec<usize> {
        let verdicts = Verdicts::new(filter, &self.store.records);
        let mut numbers = self.candidates(filter);
        numbers.retain(|&number| verdicts.accepts(number));
        numbers
    }

    /// `TenantLevel::candidates`, remembered by the thread for the last id lists it resolved on
    /// this build of the level: a cascade step ranks one restricted filter twice (dense, then
    /// lexical), and resolving its page and section ids is a hash lookup per id.
    fn candidates(&self, filter: &RecordFilter) -> Vec<usize> {
        if filter.doc_ids.is_none() && filter.section_ids.is_none() {
            return self.index.candidates(filter);
        }
        let ids = |(doc_ids, section_ids): &IdLists| *doc_ids == filter.doc_ids && *section_ids == filter.section_ids;
        if let Some(numbers) = Kept::recall(&RESOLVED_IDS, &self.scope, ids, Vec::clone) {
            return numbers;
        }
        let numbers = self.index.candidates(filter);
        let key = (filter.doc_ids.clone(), filter.section_ids.clone());
        Kept::remember(&RESOLVED_IDS, &self.scope, key, numbers.clone());
        numbers
    }

    fn scored_records(&self, scored: &[(f32, usize)]) -> Vec<ScoredRecord> {
        scored
            .iter()
            .map(|&(score, number)| ScoredRecord { record: RecordRef::stored(&self.store, number), score })
            .collect()
    }
}

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
struct Kept<K, V> {
    scope: Arc<()>,
    key: K,
    value: V,
}

type Slot<K, V> = std::thread::LocalKey<std::cell::RefCell<Option<Kept<K, V>>>>;

/// A filter's page and section id lists.
type IdLists = (Option<Vec<String>>, Option<Vec<String>>);

thread_local! {
    static RESOLVED_IDS: std::cell::RefCell<Option<Kept<IdLists, Vec<usize>>>> = const { std::cell::RefCell::new(None) };
    static DENSE_SCORES: std::cell::RefCell<Option<Kept<Vec<f32>, Vec<f32>>>> = const { std::cell::RefCell::new(None) };
    static LEXICAL_SCORES: std::cell::RefCell<Option<Kept<Vec<String>, Vec<f32>>>> = const { std::cell::RefCell::new(None) };
}

impl<K: 'static, V: 'static> Kept<K, V> {
    /// Keeps `value` for `key` on the level build `scope`, in place of what the thread kept.
    fn remember(slot: &'static Slot<K, V>, scope: &Arc<()>, key: K, value: V) {
        slot.with(|slot| *slot.borrow_mut() = Some(Kept { scope: Arc::clone(scope), key, value }));
    }

    /// What the thread kept (of any build), taken out of its slot: its key and value, to reuse
    /// their buffers.
    fn take(slot: &'static Slot<K, V>) -> Option<(K, V)> {
        slot.with(|slot| slot.borrow_mut().take().map(|kept| (kept.key, kept.value)))
    }

    /// `read` of the value kept on exactly this level build for a key `is_key` accepts, if any.
    fn recall<T>(
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
    fn rank_every_record(
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

/// Whether `filter` lets every record of its tenant through (no id list, no metadata condition):
/// then a ranking scores the whole level, and its scores are kept for the restricted rankings.
fn every_record(filter: &RecordFilter) -> bool {
    filter.doc_ids.is_none() && filter.section_ids.is_none() && matches!(Residual::of(filter), Residual::Nothing)
}

/// The terms BM25 indexes: those of the record's text plus its title, so a page title always
/// counts.
pub fn lexical_terms(record: &Record) -> Vec<String> {
    if record.text.contains(&record.meta.title) {
        crate::text::terms(&record.text)
    } else {
        crate::text::terms(&format!("{}\n{}", record.meta.title, record.text))
    }
}

/// A tenant's distinct page ids (ascending) and the scope their numbers are valid in.
struct PageNumbers {
    doc_ids: Vec<String>,
    scope: Arc<()>,
}

impl PageNumbers {
    fn of(&self, doc_id: &str) -> Option<IdOrder> {
        let number = self.doc_ids.binary_search_by(|id| id.as_str().cmp(doc_id)).ok()?;
        Some(IdOrder { scope: Arc::clone(&self.scope), number: number as u32 })
    }
}

/// One tenant's part of a loaded index: its docs, sections and chunks, each level with its own
/// vectors, BM25 statistics and id maps. A refresh that touches one tenant rebuilds only its part;
/// the other tenants' parts are shared, not copied.
#[derive(Debug, Default)]
pub struct TenantIndex {
    levels: [LevelData; 3],
}

impl TenantIndex {
    /// Indexes one tenant's records with their embeddings (already validated, all of that tenant);
    /// rows with a `base_number` are kept from `base`.
    fn build(levels: [LevelRows; 3], dimension: usize, base: Option<&TenantIndex>) -> Self {
        // The tenant's pages in doc id order, numbered once for the three levels.
        let mut doc_ids: Vec<&str> =
            levels.iter().flat_map(|rows| rows.records.iter().map(|record| record.meta.doc_id.as_str())).collect();
        doc_ids.sort_unstable();
        doc_ids.dedup();
        let pages = PageNumbers { doc_ids: doc_ids.into_iter().map(str::to_string).collect(), scope: Arc::new(()) };
        let mut slots = levels.into_iter().enumerate();
        Self {
            levels: std::array::from_fn(|_| {
                let (slot, rows) = slots.next().expect("three levels");
                LevelData::build(rows, dimension, base.map(|base| &base.levels[slot]), &pages)
            }),
        }
    }

    fn level(&self, level: Level) -> &LevelData {
        &self.levels[level_slot(level)]
    }

    /// The tenant's records of `level`, by ascending id.
    pub fn records(&self, level: Level) -> &[Arc<Record>] {
        &self.level(level).store.records
    }

    /// Records on all three levels.
    pub fn record_count(&self) -> usize {
        self.levels.iter().map(|level| level.store.records.len()).sum()
    }
}

fn level_slot(level: Level) -> usize {
    match level {
        Level::Doc => 0,
        Level::Section => 1,
        Level::Chunk => 2,
    }
}

/// Gathers an index's records one at a time (a page of a Chroma load at a time) and indexes them
/// tenant by tenant. Each record's embedding is copied into its tenant level's buffer when it is
/// added, so the records of a load never hold all their vectors at once next to the built index.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    /// 0 until the first record sets it.
    dimension: usize,
    tenants: HashMap<String, [LevelRows; 3]>,
    counts: [usize; 3],
    latest_doc_indexed_at: String,
}

impl IndexBuilder {
    /// A builder for embeddings of `dimension` (0: that of the first record added).
    pub fn new(dimension: usize) -> Self {
        Self { dimension, ..Self::default() }
    }

    /// Adds one record of `level`, validated like a snapshot's.
    pub fn add(&mut self, level: Level, record: Record) -> Result<()> {
        if self.dimension == 0 {
            self.dimension = record.embedding.len();
            if self.dimension == 0 {
                return Err(corrupt("records carry no embeddings"));
            }
        }
        validate_records(level, std::iter::once(&record), self.dimension)?;
        if level == Level::Doc && record.meta.indexed_at > self.latest_doc_indexed_at {
            self.latest_doc_indexed_at.clone_from(&record.meta.indexed_at);
        }
        let slot = level_slot(level);
        self.counts[slot] += 1;
        let levels = match self.tenants.get_mut(&record.meta.tenant_id) {
            Some(levels) => levels,
            None => self.tenants.entry(record.meta.tenant_id.clone()).or_default(),
        };
        levels[slot].push_new(record);
        Ok(())
    }

    /// The latest `indexed_at` of the docs added so far.
    pub fn latest_doc_indexed_at(&self) -> &str {
        &self.latest_doc_indexed_at
    }

    /// Indexes every tenant (freeing each one's gathered rows as it goes). No docs or no chunks
    /// is `Corrupt`, as for a snapshot.
    pub fn finish(self, embedding_model: String, indexed_at: String) -> Result<LoadedIndex> {
        let [docs, _, chunks] = self.counts;
        if docs == 0 || chunks == 0 {
            return Err(corrupt("the snapshot has no docs or no chunks"));
        }
        let dimension = self.dimension;
        let tenants = self
            .tenants
            .into_iter()
            .map(|(tenant, levels)| {
                let part = Arc::new(TenantIndex::build(levels, dimension, None));
                // The tenant's gathered rows are freed: give their pages back before the next one.
                super::replica::release_freed_memory();
                (tenant, part)
            })
            .collect();
        Ok(LoadedIndex { embedding_model, dimension, indexed_at, tenants })
    }
}

/// A validated snapshot, ready to search: one `TenantIndex` per tenant.
#[derive(Debug, Clone)]
pub struct LoadedIndex {
    embedding_model: String,
    dimension: usize,
    indexed_at: String,
    tenants: HashMap<String, Arc<TenantIndex>>,
}

impl LoadedIndex {
    /// Validates and indexes a snapshot; an empty or inconsistent one is `Corrupt`.
    pub fn build(snapshot: Snapshot) -> Result<Self> {
        validate_snapshot(&snapshot)?;
        let dimension = snapshot.docs.first().map(|r| r.embedding.len()).unwrap_or(snapshot.dimension);
        let mut builder = IndexBuilder::new(dimension);
        for (level, records) in Level::ALL.into_iter().zip([snapshot.docs, snapshot.sections, snapshot.chunks]) {
            for record in records {
                builder.add(level, record)?;
            }
        }
        builder.finish(snapshot.embedding_model, snapshot.indexed_at)
    }

    /// A copy of this index with some tenants' parts replaced (`Some`) or removed (`None`); the
    /// other tenants' parts are shared with `self`.
    pub fn with_tenants(&self, changes: Vec<(String, Option<Arc<TenantIndex>>)>) -> Self {
        let mut next = self.clone();
        for (tenant, part) in changes {
            match part {
                Some(part) => next.tenants.insert(tenant, part),
                None => next.tenants.remove(&tenant),
            };
        }
        next
    }

    /// The embedding model and indexing date `stats` reports.
    pub fn stats_info(&self) -> (&str, &str) {
        (&self.embedding_model, &self.indexed_at)
    }

    /// Sets the index-wide facts `stats` reports (after an incremental refresh).
    pub fn set_info(&mut self, embedding_model: &str, indexed_at: &str) {
        embedding_model.clone_into(&mut self.embedding_model);
        indexed_at.clone_into(&mut self.indexed_at);
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// One tenant's part, when the tenant has records.
    pub fn tenant(&self, tenant_id: &str) -> Option<&Arc<TenantIndex>> {
        self.tenants.get(tenant_id)
    }

    /// Records on all levels of all tenants.
    pub fn record_count(&self) -> usize {
        self.tenants.values().map(|tenant| tenant.record_count()).sum()
    }

    /// Records per level of all tenants: docs, sections, chunks.
    pub fn level_counts(&self) -> [usize; 3] {
        let mut counts = [0; 3];
        for tenant in self.tenants.values() {
            for (count, level) in counts.iter_mut().zip(&tenant.levels) {
                *count += level.store.records.len();
            }
        }
        counts
    }

    fn level_of(&self, level: Level, tenant_id: &str) -> Option<&LevelData> {
        self.tenants.get(tenant_id).map(|tenant| tenant.level(level))
    }

    pub fn knn(&self, level: Level, filter: &RecordFilter, query: &[f32], k: usize) -> Result<Vec<ScoredRecord>> {
        if query.len() != self.dimension {
            return Err(IndexError::new(
                IndexErrorKind::BadRequest,
                format!("query vector has dimension {}, the index has {}", query.len(), self.dimension),
            ));
        }
        let Some(data) = self.level_of(level, &filter.tenant_id) else { return Ok(Vec::new()) };
        // The records the filter lets through, unless it lets every one through.
        let numbers = (!every_record(filter)).then(|| data.matching(filter));
        let Some(numbers) = numbers.filter(|numbers| numbers.len() < data.store.records.len()) else {
            let best = Kept::rank_every_record(
                &DENSE_SCORES,
                &data.scope,
                query,
                k,
                |_| true,
                |scores| data.index.all_cosine_scores(query, scores),
            );
            return Ok(data.scored_records(&best));
        };
        let mut scored = match Kept::recall(
            &DENSE_SCORES,
            &data.scope,
            |kept| kept.as_slice() == query,
            |all| numbers.iter().map(|&number| (all[number], number)).collect(),
        ) {
            Some(scored) => scored,
            None => data.index.cosine_scores(&numbers, query),
        };
        top_k(&mut scored, k);
        Ok(data.scored_records(&scored))
    }

    pub fn lexical(&self, level: Level, filter: &RecordFilter, terms: &[String], k: usize) -> Vec<ScoredRecord> {
        let Some(data) = self.level_of(level, &filter.tenant_id) else { return Vec::new() };
        let restricted = filter.doc_ids.is_some() || filter.section_ids.is_some();
        if every_record(filter) {
            // Only records that hold a query term are ranked.
            let best = Kept::rank_every_record(
                &LEXICAL_SCORES,
                &data.scope,
                terms,
                k,
                |score| score > 0.0,
                |scores| data.index.lexical.score_all_into(terms, scores),
            );
            return data.scored_records(&best);
        }
        // The records the id lists allow (ascending), when the filter has id lists.
        let candidates: Option<Vec<usize>> = restricted.then(|| data.candidates(filter));
        let verdicts = Verdicts::new(filter, &data.store.records);
        let accept = |number: usize| verdicts.accepts(number);
        let remembered = Kept::recall(
            &LEXICAL_SCORES,
            &data.scope,
            |kept| kept.as_slice() == terms,
            |all| {
                let keep = |&number: &usize| all[number] > 0.0 && accept(number);
                let scored = |number: usize| (all[number], number);
                match &candidates {
                    Some(numbers) => numbers.iter().copied().filter(|n| keep(n)).map(scored).collect(),
                    None => (0..all.len()).filter(keep).map(scored).collect(),
                }
            },
        );
        let mut scored: Vec<(f32, usize)> = match remembered {
            Some(scored) => scored,
            None => {
                let lexical = &data.index.lexical;
                let scored = match &candidates {
                    Some(numbers) => lexical.score_among(terms, numbers, accept),
                    None => lexical.score(terms, accept),
                };
                scored.into_iter().map(|(number, score)| (score, number)).collect()
            }
        };
        top_k(&mut scored, k);
        data.scored_records(&scored)
    }

    pub fn get(&self, level: Level, filter: &RecordFilter, limit: usize) -> Vec<Arc<Record>> {
        let Some(data) = self.level_of(level, &filter.tenant_id) else { return Vec::new() };
        data.matching(filter).into_iter().take(limit).map(|number| Arc::clone(&data.store.records[number])).collect()
    }

    pub fn text_search(
        &self,
        level: Level,
        filter: &RecordFilter,
        needles: &[String],
        limit: usize,
    ) -> Vec<Arc<Record>> {
        let Some(data) = self.level_of(level, &filter.tenant_id) else { return Vec::new() };
        data.matching(filter)
            .into_iter()
            .map(|number| &data.store.records[number])
            .filter(|record| needles.iter().any(|needle| record.text.contains(needle.as_str())))
            .take(limit)
            .map(Arc::clone)
            .collect()
    }

    /// Whether the tenant has any doc.
    pub fn has_tenant(&self, tenant_id: &str) -> bool {
        self.tenants.get(tenant_id).is_some_and(|tenant| !tenant.records(Level::Doc).is_empty())
    }

    pub fn stats(&self) -> IndexStats {
        let tenants = self
            .tenants
            .iter()
            .map(|(tenant_id, tenant)| {
                let docs = tenant.records(Level::Doc);
                let source_files: BTreeSet<&str> =
                    docs.iter().map(|record| record.meta.source.as_str()).filter(|source| !source.is_empty()).collect();
                let stats = TenantStats {
                    docs: docs.len(),
                    sections: tenant.records(Level::Section).len(),
                    chunks: tenant.records(Level::Chunk).len(),
                    source_files: source_files.into_iter().map(str::to_string).collect(),
                    indexed_at: docs
                        .iter()
                        .map(|record| record.meta.indexed_at.as_str())
                        .max()
                        .unwrap_or("")
                        .to_string(),
                };
                (tenant_id.clone(), stats)
            })
            .collect();
        IndexStats {
            backend: "memory".to_string(),
            embedding_model: self.embedding_model.clone(),
            dimension: self.dimension,
            indexed_at: self.indexed_at.clone(),
            tenants,
        }
    }
}

/// Tenant `tenant`'s part after a change: its records in `base` outside `scope`, plus `fetched`
/// (what Chroma holds now for `scope`). Validated like a snapshot; `None` when nothing is left.
pub fn rebuild_tenant(
    base: &LoadedIndex,
    tenant: &str,
    scope: &super::chroma::ChangeScope,
    fetched: [Vec<Record>; 3],
    dimension: usize,
) -> Result<Option<Arc<TenantIndex>>> {
    let base_part = base.tenant(tenant).map(Arc::as_ref);
    let mut levels: [LevelRows; 3] = Default::default();
    for (slot, (level, fetched)) in Level::ALL.into_iter().zip(fetched).enumerate() {
        let mut fresh: Vec<Record> = fetched;
        // Offset paging under a concurrent write may repeat a record; keep its first copy.
        let mut seen = HashSet::new();
        fresh.retain(|record| seen.insert(record.id.clone()));
        validate_records(level, fresh.iter(), dimension)?;
        if let Some(record) = fresh.iter().find(|record| record.meta.tenant_id != tenant) {
            return Err(corrupt(format!("record {} of another tenant in a delta of {tenant}", record.id)));
        }
        let mut rows = LevelRows::default();
        if let Some(old) = base_part.map(|part| part.level(level)) {
            for (number, record) in old.store.records.iter().enumerate() {
                let kept = match scope {
                    super::chroma::ChangeScope::Tenant => false,
                    super::chroma::ChangeScope::Docs(docs) => !docs.contains(&record.meta.doc_id),
                };
                if kept {
                    rows.push(Arc::clone(record), &old.index.vector(number), Some(number));
                }
            }
        }
        let mut ids: HashSet<&str> = rows.records.iter().map(|record| record.id.as_str()).collect();
        if let Some(record) = fresh.iter().find(|record| !ids.insert(record.id.as_str())) {
            return Err(corrupt(format!("duplicate {} id {}", level.as_str(), record.id)));
        }
        fresh.into_iter().for_each(|record| rows.push_new(record));
        levels[slot] = rows;
    }
    if levels.iter().all(|rows| rows.records.is_empty()) {
        return Ok(None);
    }
    Ok(Some(Arc::new(TenantIndex::build(levels, dimension, base_part))))
}

fn corrupt(message: impl Into<String>) -> IndexError {
    IndexError::new(IndexErrorKind::Corrupt, format!("index empty or corrupted: {}", message.into()))
}

/// What a snapshot must satisfy besides what `IndexBuilder::add` checks of each of its records:
/// its format version, its declared dimension, and ids unique per tenant and level (a snapshot is
/// written whole, so a repeated id is a broken file, not offset paging).
fn validate_snapshot(snapshot: &Snapshot) -> Result<()> {
    if snapshot.format_version != Snapshot::FORMAT_VERSION {
        return Err(corrupt(format!(
            "unsupported format_version {} (expected {})",
            snapshot.format_version,
            Snapshot::FORMAT_VERSION
        )));
    }
    if snapshot.docs.is_empty() || snapshot.chunks.is_empty() {
        return Err(corrupt("the snapshot has no docs or no chunks"));
    }
    let dimension = snapshot.docs[0].embedding.len();
    if dimension == 0 {
        return Err(corrupt("records carry no embeddings"));
    }
    if snapshot.dimension != 0 && snapshot.dimension != dimension {
        return Err(corrupt(format!("dimension is {} but records have {}", snapshot.dimension, dimension)));
    }
    for level in Level::ALL {
        let mut seen = HashSet::new();
        for record in snapshot.records(level) {
            if !seen.insert((record.meta.tenant_id.as_str(), record.id.as_str())) {
                return Err(corrupt(format!("duplicate {} id {}", level.as_str(), record.id)));
            }
        }
    }
    Ok(())
}

/// Each record has its ids, belongs to `level` and has a finite embedding of `dimension`.
fn validate_records<'a>(level: Level, records: impl Iterator<Item = &'a Record>, dimension: usize) -> Result<()> {
    for record in records {
        if record.meta.tenant_id.is_empty() || record.id.is_empty() || record.meta.doc_id.is_empty() {
            return Err(corrupt(format!("a {} record lacks id, tenant_id or doc_id", level.as_str())));
        }
        if record.level() != level {
            return Err(corrupt(format!(
                "record {} is listed as a {} but its ids say otherwise",
                record.id,
                level.as_str()
            )));
        }
        if record.embedding.len() != dimension || record.embedding.iter().any(|v| !v.is_finite()) {
            return Err(corrupt(format!("record {} has a bad embedding", record.id)));
        }
    }
    Ok(())
}

/// Reads and validates a snapshot file. Blocking: call it off the async threads.
pub fn read_snapshot_file(path: &Path) -> Result<Snapshot> {
    let bytes = std::fs::read(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            IndexError::new(IndexErrorKind::NotFound, format!("index not found at {} — run ingest", path.display()))
        } else {
            IndexError::new(IndexErrorKind::Corrupt, format!("index at {} unreadable: {error}", path.display()))
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|error| corrupt(format!("{}: {error}", path.display())))
}

/// Writes a snapshot atomically: a temporary file in the same directory, then a rename, so a
/// reader sees either the old file or the new one, never half of one. The temporary file is
/// removed when any step fails (a full disk, a failed rename); one left by a writer that was
/// killed is removed by the next write to the same path.
pub fn write_snapshot_file(path: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(directory)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("snapshot.json");
    remove_abandoned_temporaries(directory, file_name);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = directory.join(format!(".{file_name}.tmp-{}-{write}", std::process::id()));
    let written = write_then_rename(&temporary, path, snapshot);
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

fn write_then_rename(temporary: &Path, path: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    let file = std::fs::File::create(temporary)?;
    let mut writer = std::io::BufWriter::new(file);
    serde_json::to_writer(&mut writer, snapshot).map_err(std::io::Error::other)?;
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(temporary, path)
}

/// Removes the temporary files of `file_name` whose writer process is gone (killed mid-write: a
/// process that no longer runs cannot remove its own).
fn remove_abandoned_temporaries(directory: &Path, file_name: &str) {
    let prefix = format!(".{file_name}.tmp-");
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(writer) = name.to_str().and_then(|name| name.strip_prefix(&prefix)) else {
            continue;
        };
        let pid = writer.split('-').next().and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !process_runs(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` runs; where this cannot be told, it is assumed to run.
fn process_runs(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

type FileStamp = (SystemTime, u64);

/// The version of a snapshot file: its modification time in nanoseconds since the epoch (what
/// `ingest` prints, and what `/search` reports once the file is loaded).
pub fn file_version(path: &Path) -> Option<u64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(modified.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn file_stamp(path: &Path) -> Option<FileStamp> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// The in-memory backend: a replica of a snapshot file (polled for changes) or of a fixed snapshot.
/// Searches read the current `LoadedIndex` through an `Arc`, so a reload swaps it without
/// blocking or failing requests that are running.
///
/// The snapshot file is one JSON document, so a change is read whole: unlike Chroma's change log
/// it names no tenant, and only re-reading the file tells what changed.
#[derive(Debug)]
pub struct InMemoryIndex {
    path: Option<PathBuf>,
    replica: Replica,
    /// The file's modification time and size when it was last read.
    stamp: Mutex<Option<FileStamp>>,
    /// The tenants loaded from the file (`RETR_TENANTS`).
    scope: super::scope::TenantScope,
}

impl InMemoryIndex {
    /// An index over a fixed snapshot (the bundled demo corpus, tests); never reloads.
    pub fn from_snapshot(snapshot: Snapshot) -> Result<Self> {
        let loaded = LoadedIndex::build(snapshot)?;
        Ok(Self {
            path: None,
            replica: Replica::fixed(Arc::new(loaded), None, None),
            stamp: Mutex::new(None),
            scope: Default::default(),
        })
    }

    /// An index backed by a snapshot file. A missing or corrupt file is not fatal: the error is
    /// kept and reported by searches and `/health` until a valid file appears.
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        Self::from_file_scoped(path, super::scope::TenantScope::All)
    }

    /// `from_file`, keeping only the tenants of `scope` from every load.
    pub fn from_file_scoped(path: impl Into<PathBuf>, scope: super::scope::TenantScope) -> Self {
        let index = Self { path: Some(path.into()), replica: Replica::refreshed(), stamp: Mutex::new(None), scope };
        index.reload_if_changed();
        index
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Reloads the file when its modification time or size changed. A failed load keeps the
    /// previously loaded index serving and records the error. Blocking; returns true on a reload.
    pub fn reload_if_changed(&self) -> bool {
        let Some(path) = &self.path else { return false };
        let stamp = file_stamp(path);
        let mut known = self.stamp.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if stamp.is_some() && *known == stamp {
            // Unchanged: current if it loaded, still broken (and its error kept) if it did not.
            if self.replica.last_error().is_none() {
                self.replica.confirm(None);
            }
            return false;
        }
        let started = std::time::Instant::now();
        let version = file_version(path);
        let result = read_snapshot_file(path)
            .map(|mut snapshot| {
                self.scope.retain(&mut snapshot);
                snapshot
            })
            .and_then(LoadedIndex::build);
        *known = stamp;
        match result {
            Ok(loaded) => {
                tracing::info!(path = %path.display(), "index snapshot loaded");
                let records = loaded.record_count() as u64;
                self.replica.swap(Arc::new(loaded), version, started.elapsed(), records);
                super::replica::release_freed_memory();
                true
            }
            Err(error) => {
                self.replica.fail(error);
                false
            }
        }
    }

    /// Polls the snapshot file every `interval` on a blocking thread until the index is dropped.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration) {
        if self.path.is_some() {
            super::replica::spawn_refresher(self, interval);
        }
    }

    /// The error of the last load attempt, when it failed (also while an older index still serves).
    pub fn last_error(&self) -> Option<IndexError> {
        self.replica.last_error()
    }
}

#[async_trait]
impl SnapshotSource for InMemoryIndex {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Re-reads the file when it changed, on a blocking thread (the file is read and parsed whole).
    async fn poll(self: Arc<Self>) -> Result<bool> {
        tokio::task::spawn_blocking(move || self.reload_if_changed()).await.map_err(|error| {
            IndexError::new(IndexErrorKind::Internal, format!("snapshot reload task panicked: {error}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::PseudoEmbedder;
    use crate::fixtures;
    use crate::index::VectorIndex;

    /// The definition the index must reproduce: every record of the level that passes the
    /// filter, scored by the rounded cosine, best first with ties by id, cut at `k`.
    fn reference_knn(
        snapshot: &Snapshot,
        level: Level,
        filter: &RecordFilter,
        query: &[f32],
        k: usize,
    ) -> Vec<(String, f32)> {
        let mut scored: Vec<ScoredRecord> = snapshot
            .records(level)
            .iter()
            .filter(|record| filter.matches(&record.meta))
            .map(|record| {
                let score = super::super::cosine(query, &record.embedding);
                ScoredRecord { record: Arc::new(record.clone()).into(), score: (score * 1e6).round() / 1e6 }
            })
            .collect();
        super::super::sort_scored(&mut scored);
        scored.into_iter().take(k).map(|s| (s.record.id.clone(), s.score)).collect()
    }

    fn ids_and_scores(results: &[ScoredRecord]) -> Vec<(String, f32)> {
        results.iter().map(|s| (s.record.id.clone(), s.score)).collect()
    }

    fn filters() -> Vec<RecordFilter> {
        let t1 = RecordFilter::tenant("t1");
        vec![
            t1.clone(),
            RecordFilter::tenant("t2"),
            RecordFilter::tenant("nobody"),
            RecordFilter { doc_ids: Some(vec!["sdk/ios/install".into(), "docs/admin/tags".into()]), ..t1.clone() },
            RecordFilter {
                section_ids: Some(vec!["docs/admin/tags#s1".into(), "sdk/ios/install#s2".into()]),
                ..t1.clone()
            },
            RecordFilter {
                doc_ids: Some(vec!["docs/admin/tags".into()]),
                section_ids: Some(vec!["docs/admin/tags#s1".into(), "sdk/ios/install#s1".into()]),
                ..t1.clone()
            },
            RecordFilter { doc_ids: Some(vec!["acme/secret-install".into()]), ..t1.clone() },
            RecordFilter { product: Some("sdk".into()), ..t1.clone() },
            RecordFilter { tags: vec!["ios".into()], doc_ids: Some(vec!["sdk/ios/install".into()]), ..t1 },
        ]
    }

    #[test]
    fn restricted_rankings_read_after_a_tenant_wide_one_agree_with_their_definitions() {
        // A tenant-wide ranking leaves its scores to the thread; a restricted ranking of the same
        // query reads them, and of another query must not.
        let snapshot = fixtures::snapshot();
        let index = LoadedIndex::build(snapshot.clone()).unwrap();
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let (first, second) = (embedder.embed_one("установка SDK на iOS"), embedder.embed_one("теги"));
        let (first_terms, second_terms) = (crate::text::terms("установка тегов"), crate::text::terms("android"));
        let everything = RecordFilter::tenant("t1");
        for level in Level::ALL {
            for filter in filters().into_iter().filter(|filter| filter.tenant_id == "t1") {
                for (query, other) in [(&first, &second), (&second, &first)] {
                    index.knn(level, &everything, query, 100).unwrap();
                    let got = ids_and_scores(&index.knn(level, &filter, query, 100).unwrap());
                    assert_eq!(got, reference_knn(&snapshot, level, &filter, query, 100), "{level:?} {filter:?}");
                    let got = ids_and_scores(&index.knn(level, &filter, other, 100).unwrap());
                    assert_eq!(got, reference_knn(&snapshot, level, &filter, other, 100), "{level:?} {filter:?}");
                }
                for (terms, other) in [(&first_terms, &second_terms), (&second_terms, &first_terms)] {
                    let all = ids_and_scores(&index.lexical(level, &everything, terms, usize::MAX));
                    let allowed: Vec<String> =
                        index.get(level, &filter, usize::MAX).iter().map(|record| record.id.clone()).collect();
                    let mut expected = all.clone();
                    expected.retain(|(id, _)| allowed.contains(id));
                    assert_eq!(ids_and_scores(&index.lexical(level, &filter, terms, usize::MAX)), expected);
                    let fresh = ids_and_scores(&index.lexical(level, &filter, other, usize::MAX));
                    index.lexical(level, &RecordFilter::tenant("t2"), other, usize::MAX);
                    assert_eq!(ids_and_scores(&index.lexical(level, &filter, other, usize::MAX)), fresh);
                }
            }
        }
    }

    #[test]
    fn pages_are_numbered_in_doc_id_order_across_the_levels_of_a_tenant() {
        let index = LoadedIndex::build(fixtures::snapshot()).unwrap();
        for tenant in ["t1", "t2"] {
            let tenant = index.tenant(tenant).unwrap();
            let mut pages: Vec<(String, u32, Arc<()>)> = Vec::new();
            for level in Level::ALL {
                let data = tenant.level(level);
                for (record, features) in data.store.records.iter().zip(&data.store.features) {
                    let page = features.page.as_ref().expect("every record has a page number");
                    pages.push((record.meta.doc_id.clone(), page.number, Arc::clone(&page.scope)));
                }
            }
            assert!(pages.iter().all(|(.., scope)| Arc::ptr_eq(scope, &pages[0].2)), "one scope per tenant build");
            let mut doc_ids: Vec<&str> = pages.iter().map(|(doc_id, ..)| doc_id.as_str()).collect();
            doc_ids.sort_unstable();
            doc_ids.dedup();
            for (doc_id, number, _) in &pages {
                assert_eq!(doc_ids[*number as usize], doc_id, "the number is the page's place in doc id order");
            }
        }
        let scope_of = |tenant: &str| {
            Arc::clone(&index.tenant(tenant).unwrap().level(Level::Doc).store.features[0].page.as_ref().unwrap().scope)
        };
        assert!(!Arc::ptr_eq(&scope_of("t1"), &scope_of("t2")), "numbers of two tenants never compare");
    }

    #[test]
    fn id_lists_resolved_for_one_tenant_are_not_reused_for_another() {
        // The thread remembers the last id lists it resolved; the same lists asked of another
        // tenant (or another level) must resolve there, never to the first tenant's records.
        let snapshot = fixtures::snapshot();
        let index = LoadedIndex::build(snapshot.clone()).unwrap();
        let query = PseudoEmbedder::new(fixtures::DIMENSION).embed_one("установка SDK");
        let terms = crate::text::terms("установка sdk gradle");
        let ids = Some(vec!["acme/secret-install".to_string(), "sdk/ios/install".to_string()]);
        for level in Level::ALL {
            for tenant in ["t1", "t2", "t1", "nobody", "t2"] {
                let filter = RecordFilter { doc_ids: ids.clone(), ..RecordFilter::tenant(tenant) };
                let dense = ids_and_scores(&index.knn(level, &filter, &query, 100).unwrap());
                assert_eq!(dense, reference_knn(&snapshot, level, &filter, &query, 100), "{level:?} {tenant}");
                let lexical = index.lexical(level, &filter, &terms, 100);
                assert!(lexical.iter().all(|s| s.record.meta.tenant_id == tenant), "{level:?} {tenant}");
                let expected: Vec<&str> = if tenant == "nobody" {
                    Vec::new()
                } else if tenant == "t1" {
                    vec!["sdk/ios/install"]
                } else {
                    vec!["acme/secret-install"]
                };
                let got = index.get(level, &filter, 100);
                let mut got_docs: Vec<&str> = got.iter().map(|r| r.meta.doc_id.as_str()).collect();
                got_docs.dedup();
                assert_eq!(got_docs, expected, "{level:?} {tenant}");
                assert!(!dense.is_empty() || tenant == "nobody", "{level:?} {tenant}");
            }
        }
    }

    #[test]
    fn knn_get_and_lexical_agree_with_their_definitions() {
        let snapshot = fixtures::snapshot();
        let index = LoadedIndex::build(snapshot.clone()).unwrap();
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let queries =
            [embedder.embed_one("установка SDK на iOS"), embedder.embed_one("теги"), vec![0.0; fixtures::DIMENSION]];
        let terms = crate::text::terms("установка тегов Android");
        for level in Level::ALL {
            for filter in filters() {
                let mut expected_ids: Vec<&Record> =
                    snapshot.records(level).iter().filter(|record| filter.matches(&record.meta)).collect();
                expected_ids.sort_by(|a, b| a.id.cmp(&b.id));
                let got: Vec<String> = index.get(level, &filter, usize::MAX).iter().map(|r| r.id.clone()).collect();
                assert_eq!(got, expected_ids.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), "{level:?} {filter:?}");
                for query in &queries {
                    for k in [1, 3, 100] {
                        let got = ids_and_scores(&index.knn(level, &filter, query, k).unwrap());
                        assert_eq!(
                            got,
                            reference_knn(&snapshot, level, &filter, query, k),
                            "{level:?} {filter:?} k={k}"
                        );
                    }
                }
                // BM25 statistics are the tenant's: a filter only removes records from the list.
                let everything = RecordFilter::tenant(filter.tenant_id.clone());
                let mut expected = ids_and_scores(&index.lexical(level, &everything, &terms, usize::MAX));
                let allowed: Vec<String> = expected_ids.iter().map(|r| r.id.clone()).collect();
                expected.retain(|(id, _)| allowed.contains(id));
                expected.truncate(2);
                assert_eq!(ids_and_scores(&index.lexical(level, &filter, &terms, 2)), expected, "{level:?} {filter:?}");
            }
        }
    }

    #[test]
    fn a_streamed_load_searches_like_a_snapshot_and_keeps_one_copy_of_a_repeated_record() {
        let snapshot = fixtures::snapshot();
        let whole = LoadedIndex::build(snapshot.clone()).unwrap();
        // Pages arrive in any order, across levels, and offset paging may repeat a record.
        let mut builder = IndexBuilder::new(0);
        for (level, records) in Level::ALL.into_iter().zip([&snapshot.docs, &snapshot.sections, &snapshot.chunks]).rev()
        {
            for record in records.iter().rev().chain(records.first()) {
                builder.add(level, record.clone()).unwrap();
            }
        }
        let streamed = builder.finish(snapshot.embedding_model.clone(), snapshot.indexed_at.clone()).unwrap();
        assert_eq!(streamed.level_counts(), whole.level_counts());
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let query = embedder.embed_one("установка SDK");
        let terms = crate::text::terms("установка SDK");
        for level in Level::ALL {
            let filter = RecordFilter::tenant("t1");
            let got = ids_and_scores(&streamed.knn(level, &filter, &query, 100).unwrap());
            assert_eq!(got, ids_and_scores(&whole.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
            let got = ids_and_scores(&streamed.lexical(level, &filter, &terms, 100));
            assert_eq!(got, ids_and_scores(&whole.lexical(level, &filter, &terms, 100)), "{level:?}");
        }
        let mut bad = fixtures::snapshot().chunks[0].clone();
        bad.embedding.pop();
        let error = IndexBuilder::new(fixtures::DIMENSION).add(Level::Chunk, bad).unwrap_err();
        assert_eq!(error.kind, IndexErrorKind::Corrupt);
        let empty = IndexBuilder::new(0).finish(String::new(), String::new()).unwrap_err();
        assert_eq!(empty.kind, IndexErrorKind::Corrupt);
    }

    /// A tenant rebuilt from a delta scores exactly like one built from the whole snapshot: kept
    /// records' vectors come back from the scan matrix unchanged, the changed doc's are the new ones.
    #[test]
    fn a_rebuilt_tenant_searches_like_a_fresh_build() {
        let snapshot = fixtures::snapshot();
        let base = LoadedIndex::build(snapshot.clone()).unwrap();
        let changed_doc = snapshot.docs.iter().find(|doc| doc.meta.tenant_id == "t1").unwrap().meta.doc_id.clone();
        let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
        let mut next = snapshot.clone();
        let mut fetched: [Vec<Record>; 3] = Default::default();
        for (slot, level) in Level::ALL.into_iter().enumerate() {
            let records = match level {
                Level::Doc => &mut next.docs,
                Level::Section => &mut next.sections,
                Level::Chunk => &mut next.chunks,
            };
            for record in records.iter_mut().filter(|r| r.meta.tenant_id == "t1" && r.meta.doc_id == changed_doc) {
                record.text = format!("{} обновлено", record.text);
                record.embedding = embedder.embed_one(&record.text);
                fetched[slot].push(record.clone());
            }
        }
        let scope = super::super::chroma::ChangeScope::Docs([changed_doc].into());
        let part = rebuild_tenant(&base, "t1", &scope, fetched, base.dimension()).unwrap();
        let rebuilt = base.with_tenants(vec![("t1".to_string(), part)]);
        let fresh = LoadedIndex::build(next).unwrap();
        let query = embedder.embed_one("обновлено установка");
        let terms = crate::text::terms("обновлено установка");
        for level in Level::ALL {
            for tenant in ["t1", "t2"] {
                let filter = RecordFilter::tenant(tenant);
                let got = ids_and_scores(&rebuilt.knn(level, &filter, &query, 100).unwrap());
                assert_eq!(got, ids_and_scores(&fresh.knn(level, &filter, &query, 100).unwrap()), "{level:?}");
                let got = ids_and_scores(&rebuilt.lexical(level, &filter, &terms, 100));
                assert_eq!(got, ids_and_scores(&fresh.lexical(level, &filter, &terms, 100)), "{level:?}");
            }
        }
        assert!(Arc::ptr_eq(rebuilt.tenant("t2").unwrap(), base.tenant("t2").unwrap()), "t2 is shared, not copied");
    }

    #[tokio::test]
    async fn a_pinned_snapshot_stays_the_same_across_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        let index = InMemoryIndex::from_file(&path);
        let pinned = index.pin().await.expect("a loaded snapshot pins");
        let mut smaller = fixtures::snapshot();
        smaller.docs.retain(|record| record.meta.tenant_id == "t1");
        smaller.sections.retain(|record| record.meta.tenant_id == "t1");
        smaller.chunks.retain(|record| record.meta.tenant_id == "t1");
        // A different size, so the reload sees a change even within the file time's resolution.
        write_snapshot_file(&path, &smaller).unwrap();
        assert!(index.reload_if_changed());
        assert!(!index.tenant_exists("t2").await.unwrap(), "the index moved on");
        assert!(pinned.tenant_exists("t2").await.unwrap(), "the pinned snapshot did not");
        let filter = RecordFilter::tenant("t2");
        assert_eq!(pinned.get(Level::Doc, &filter, 10).await.unwrap().len(), 1);
    }

    fn directory_listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().file_name().to_string_lossy().into()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_failed_snapshot_write_leaves_no_temporary_file_and_the_old_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should go: everything works up to the rename, which fails.
        let path = dir.path().join("index.json");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), "x").unwrap();
        assert!(write_snapshot_file(&path, &fixtures::snapshot()).is_err());
        assert_eq!(directory_listing(dir.path()), ["index.json"], "no temporary file left behind");

        let path = dir.path().join("ok.json");
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        // A writer killed mid-write (its process is gone) left its temporary file: the next write
        // removes it; a live writer's (this process's) is left alone.
        let abandoned = dir.path().join(".ok.json.tmp-4294967-0");
        let live = dir.path().join(format!(".ok.json.tmp-{}-999", std::process::id()));
        std::fs::write(&abandoned, "{").unwrap();
        std::fs::write(&live, "{").unwrap();
        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        assert!(!abandoned.exists(), "the killed writer's temporary file is removed");
        assert!(live.exists());
        assert_eq!(read_snapshot_file(&path).unwrap().docs.len(), fixtures::snapshot().docs.len());
    }
}
