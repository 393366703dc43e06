//! Building a loaded index: records gathered tenant by tenant and level by level (`IndexBuilder`),
//! one tenant rebuilt after a change (`rebuild_tenant`).

use super::{engine::*, snapshot::*};
use crate::index::features::{IdOrder, RecordFeatures, TopicTable};
use crate::index::lexical::{Bm25Index, Bm25Params};
use crate::index::tenant_level::{ScanMatrix, TenantLevel};
use crate::index::vectors::BlockRows;
use crate::index::LevelStore;
use crate::index::Result;
use crate::model::{Level, Record, Snapshot};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Arc;

/// One tenant's records of one level as they are gathered, before indexing: each record as the
/// index keeps it (without its embedding), the embeddings back to back in one buffer (so a
/// loaded page's per-record vectors are freed as soon as it is added), and, for a rebuild, the
/// record's number in the level it is kept from.
#[derive(Debug, Default)]
pub(super) struct LevelRows {
    pub(super) records: Vec<Arc<Record>>,
    /// The vectors of the rows the base does not hold, in the order they were added.
    pub(super) vectors: BlockRows,
    pub(super) base_numbers: Vec<Option<usize>>,
    /// Rows kept from the base whose vectors were not gathered (`push_kept`): the base has them.
    pub(super) unstored: usize,
}

impl LevelRows {
    /// A record the base holds as it is, at `number`: its vector stays there until the tenant is
    /// built (and, when the whole tenant is unchanged, is never copied).
    fn push_kept(&mut self, record: Arc<Record>, number: usize) {
        self.records.push(record);
        self.base_numbers.push(Some(number));
        self.unstored += 1;
    }

    /// A new record (whose embedding is taken out of it and gathered).
    pub(super) fn push_new(&mut self, mut record: Record) {
        let embedding = std::mem::take(&mut record.embedding);
        self.vectors.push(&embedding);
        self.records.push(Arc::new(record));
        self.base_numbers.push(None);
    }

    /// The row numbers by ascending record id; of rows with the same id (a record repeated by
    /// offset paging under a concurrent write) only one is kept.
    pub(super) fn id_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.records.len()).collect();
        order.sort_unstable_by(|&a, &b| self.records[a].id.cmp(&self.records[b].id));
        order.dedup_by(|a, b| self.records[*a].id == self.records[*b].id);
        order
    }
}

/// A tenant's distinct page ids (ascending) and the scope their numbers are valid in.
pub(super) struct PageNumbers {
    pub(super) doc_ids: Vec<String>,
    pub(super) scope: Arc<()>,
}

impl PageNumbers {
    /// The numbering of the pages `doc_ids` name (each page once, in id order; any order in).
    pub(super) fn new<'a>(doc_ids: impl Iterator<Item = &'a str>) -> Self {
        let mut doc_ids: Vec<&str> = doc_ids.collect();
        doc_ids.sort_unstable();
        doc_ids.dedup();
        Self { doc_ids: doc_ids.into_iter().map(str::to_string).collect(), scope: Arc::new(()) }
    }

    /// Each record's page number (from its features), when every record has one: what
    /// `TenantLevel` indexes its pages by, with this numbering's scope.
    pub(super) fn numbers_of(features: &[RecordFeatures]) -> Option<Vec<u32>> {
        features.iter().map(|f| f.page.as_ref().map(|page| page.number)).collect()
    }

    pub(super) fn of(&self, doc_id: &str) -> Option<IdOrder> {
        let number = self.doc_ids.binary_search_by(|id| id.as_str().cmp(doc_id)).ok()?;
        Some(IdOrder { scope: Arc::clone(&self.scope), number: number as u32 })
    }
}

/// Gathers an index's records one at a time (a page of a Chroma load at a time) and indexes them
/// tenant by tenant. Each record's embedding is copied into its tenant level's buffer when it is
/// added, so the records of a load never hold all their vectors at once next to the built index.
#[derive(Debug, Default)]
pub(crate) struct IndexBuilder {
    /// 0 until the first record sets it.
    pub(super) dimension: usize,
    pub(super) tenants: HashMap<String, [LevelRows; 3]>,
    pub(super) counts: [usize; 3],
    pub(super) latest_doc_indexed_at: String,
    /// For a snapshot, where an id repeated in a tenant's level is a broken file (a Chroma load
    /// keeps one copy of a record offset paging repeated): what tells a repeat.
    pub(super) unique: Option<UniqueIds>,
    /// The index a reload replaces: a record it holds as it is is kept from it, and a tenant all
    /// of whose records are kept is its part, shared, not built again.
    pub(super) base: Option<Arc<LoadedIndex>>,
    /// The sections added so far, by the hash of their tenant and id: a chunk added after its
    /// section whose text is a passage of the section's keeps a share of it, not its own copy.
    pub(super) sections: rustc_hash::FxHashMap<u64, Arc<Record>>,
}

/// The ids added so far, as hashes (a few bytes per record), and the ids whose hash was seen
/// before: repeats, or (rarely) another id with the same hash, told apart by `finish`.
#[derive(Debug, Default)]
pub(super) struct UniqueIds {
    hashes: rustc_hash::FxHashSet<u64>,
    suspects: Vec<(usize, String, String)>,
}

impl IndexBuilder {
    /// A builder for embeddings of `dimension` (0: that of the first record added).
    pub(crate) fn new(dimension: usize) -> Self {
        Self { dimension, ..Self::default() }
    }

    /// A builder for a snapshot's records: an id repeated in a tenant's level is `Corrupt`. With
    /// `base` (the index the snapshot replaces), the tenants the snapshot leaves as they were are
    /// shared with it, and the records it leaves as they were are not tokenized again.
    pub(crate) fn for_snapshot(base: Option<Arc<LoadedIndex>>) -> Self {
        Self { unique: Some(UniqueIds::default()), base, ..Self::default() }
    }

    /// The records' embedding dimension (0 before the first).
    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    /// Adds one record of `level`, validated like a snapshot's.
    pub(crate) fn add(&mut self, level: Level, mut record: Record) -> Result<()> {
        if self.dimension == 0 {
            self.dimension = record.embedding.len();
            if self.dimension == 0 {
                return Err(corrupt("records carry no embeddings"));
            }
        }
        validate_records(level, std::iter::once(&record), self.dimension)?;
        if level == Level::Doc && *record.meta.indexed_at > *self.latest_doc_indexed_at {
            self.latest_doc_indexed_at = record.meta.indexed_at.to_string();
        }
        let slot = level_slot(level);
        if let Some(unique) = &mut self.unique {
            let hash = rustc_hash::FxBuildHasher.hash_one((slot, &record.meta.tenant_id, &record.id));
            if !unique.hashes.insert(hash) {
                unique.suspects.push((slot, record.meta.tenant_id.to_string(), record.id.clone()));
            }
        }
        self.counts[slot] += 1;
        if level == Level::Chunk {
            self.share_section_text(&mut record);
        }
        let kept = self.base.as_deref().and_then(|base| kept_in(base, level, &record));
        let levels = match self.tenants.get_mut(record.meta.tenant_id.as_str()) {
            Some(levels) => levels,
            None => self.tenants.entry(record.meta.tenant_id.to_string()).or_default(),
        };
        match kept {
            Some((kept, number)) => levels[slot].push_kept(kept, number),
            None => levels[slot].push_new(record),
        }
        if level == Level::Section {
            let section = levels[slot].records.last().expect("the section was just added");
            self.sections.insert(section_key(&section.meta.tenant_id, &section.id), Arc::clone(section));
        }
        Ok(())
    }

    /// Makes `chunk`'s text a share of its section's when the section was added before it and
    /// holds the text (as the sections and chunks `ingest` writes do).
    fn share_section_text(&self, chunk: &mut Record) {
        let Some(section_id) = &chunk.meta.section_id else { return };
        let Some(section) = self.sections.get(&section_key(&chunk.meta.tenant_id, section_id)) else { return };
        if section.id != *section_id || section.meta.tenant_id != chunk.meta.tenant_id {
            return;
        }
        if let Some(shared) = chunk.text.within(&section.text) {
            chunk.text = shared;
        }
    }

    /// The latest `indexed_at` of the docs added so far.
    pub(crate) fn latest_doc_indexed_at(&self) -> &str {
        &self.latest_doc_indexed_at
    }

    /// Indexes every tenant (freeing each one's gathered rows as it goes). No docs or no chunks
    /// is `Corrupt`, as for a snapshot.
    pub(crate) fn finish(mut self, embedding_model: String, indexed_at: String) -> Result<LoadedIndex> {
        self.sections = Default::default();
        let [docs, _, chunks] = self.counts;
        if docs == 0 || chunks == 0 {
            return Err(corrupt("the snapshot has no docs or no chunks"));
        }
        for (slot, tenant, id) in self.unique.iter().flat_map(|unique| &unique.suspects) {
            let rows = self.tenants.get(tenant).map(|levels| &levels[*slot]);
            if rows.is_some_and(|rows| rows.records.iter().filter(|record| &record.id == id).count() > 1) {
                return Err(corrupt(format!("duplicate {} id {id}", Level::ALL[*slot].as_str())));
            }
        }
        let dimension = self.dimension;
        // Kept records' features hold numbers of the base's topic table: new values go there too.
        let topics =
            self.base.as_ref().map_or_else(|| Arc::new(TopicTable::default()), |base| Arc::clone(&base.topics));
        let tenants = self
            .tenants
            .into_iter()
            .map(|(tenant, levels)| {
                let base = self.base.as_ref().and_then(|base| base.tenant(&tenant));
                let part = match base {
                    Some(base) if unchanged(&levels, base) => Arc::clone(base),
                    Some(base) => Arc::new(TenantIndex::build(levels, dimension, Some(base), &topics)),
                    None => Arc::new(TenantIndex::build(levels, dimension, None, &topics)),
                };
                // The tenant's gathered rows are freed: give their pages back before the next one.
                super::release_freed_memory();
                (tenant, part)
            })
            .collect();
        Ok(LoadedIndex { embedding_model, dimension, indexed_at, tenants, topics })
    }
}

/// Where a section is found by its tenant and id (`IndexBuilder::sections`).
fn section_key(tenant: &str, id: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one((tenant, id))
}

/// The record of `base` that `record` repeats exactly (same id, metadata, text and embedding),
/// with its number in its level.
fn kept_in(base: &LoadedIndex, level: Level, record: &Record) -> Option<(Arc<Record>, usize)> {
    let data = base.tenant(&record.meta.tenant_id)?.level(level);
    let number = crate::index::number_by_id(&data.store.records, &record.id)?;
    let old = &data.store.records[number];
    (old.meta == record.meta && old.text == record.text && data.index.vector(number) == record.embedding)
        .then(|| (Arc::clone(old), number))
}

/// Whether the gathered rows are `base`'s records, all of them and nothing else (ids are unique:
/// `finish` checked).
fn unchanged(levels: &[LevelRows; 3], base: &TenantIndex) -> bool {
    levels
        .iter()
        .zip(&base.levels)
        .all(|(rows, base)| rows.unstored == rows.records.len() && rows.records.len() == base.store.records.len())
}

/// Tenant `tenant`'s part after a change: its records in `base` outside `scope`, plus `fetched`
/// (what Chroma holds now for `scope`). Validated like a snapshot; `None` when nothing is left.
pub fn rebuild_tenant(
    base: &LoadedIndex,
    tenant: &str,
    scope: &crate::index::change::ChangeScope,
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
                    crate::index::change::ChangeScope::Tenant => false,
                    crate::index::change::ChangeScope::Docs(docs) => !docs.contains(record.meta.doc_id.as_str()),
                };
                if kept {
                    rows.push_kept(Arc::clone(record), number);
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
    Ok(Some(Arc::new(TenantIndex::build(levels, dimension, base_part, &base.topics))))
}

/// A level's gathered rows with their records in number order (ascending id).
struct Ordered {
    rows: LevelRows,
    /// Number → the row it was gathered as.
    order: Vec<usize>,
    records: Vec<Arc<Record>>,
}

impl Ordered {
    fn new(rows: LevelRows) -> Self {
        let order = rows.id_order();
        let records = order.iter().map(|&row| Arc::clone(&rows.records[row])).collect();
        Self { rows, order, records }
    }
}

/// What a level's build derives from its records, besides the lexical index of the records it
/// did not keep from its base.
struct Derived {
    features: Vec<RecordFeatures>,
    matrix: ScanMatrix,
    /// The base's lexical index renumbered, with the records it does not hold added.
    lexical: Option<Bm25Index>,
    page_of: Option<Vec<u32>>,
}

impl LevelData {
    /// Indexes one tenant's records of one level with their embeddings. The vectors are kept in
    /// the scan matrix only: the records themselves carry none (`Record::embedding` is empty).
    /// Rows kept from `base` reuse what it derived from their texts (features, BM25 terms), so a
    /// refresh tokenizes only the records it re-read.
    pub(super) fn build(
        rows: LevelRows,
        dimension: usize,
        base: Option<&LevelData>,
        pages: &PageNumbers,
        topics: &TopicTable,
    ) -> Self {
        let Ordered { rows, order, records } = Ordered::new(rows);
        let derived = Self::derive(rows, &order, &records, dimension, base, pages, topics);
        Self::assemble(records, derived, None, pages)
    }

    /// The features, scan matrix and (with a base) lexical index of a level's records, numbered
    /// as `order` and `records` say.
    fn derive(
        rows: LevelRows,
        order: &[usize],
        records: &[Arc<Record>],
        dimension: usize,
        base: Option<&LevelData>,
        pages: &PageNumbers,
        topics: &TopicTable,
    ) -> Derived {
        let mut kept: Vec<Option<u32>> = vec![None; base.map_or(0, |base| base.store.records.len())];
        let mut added = Vec::new();
        let mut features = Vec::with_capacity(order.len());
        // Each row's place among the gathered vectors (those of the rows the base does not hold).
        let gathered_at: Vec<usize> = rows
            .base_numbers
            .iter()
            .scan(0, |gathered, number| {
                let at = *gathered;
                *gathered += usize::from(number.is_none());
                Some(at)
            })
            .collect();
        let base_of: Vec<Option<usize>> = order.iter().map(|&row| rows.base_numbers[row]).collect();
        let mut previous = None;
        for (number, (&row, record)) in order.iter().zip(records).enumerate() {
            let mut derived = match (rows.base_numbers[row], base) {
                (Some(old), Some(base)) => {
                    kept[old] = Some(number as u32);
                    RecordFeatures::clone(&base.store.features[old])
                }
                _ => {
                    added.push(number);
                    RecordFeatures::of_after(record, topics, &mut previous)
                }
            };
            derived.page = pages.of(&record.meta.doc_id);
            features.push(derived);
        }
        // Rows gathered in number order (a snapshot's records are written in id order) are the
        // matrix as they are. Otherwise a kept record's vector is the base's (shared with it where
        // a whole segment of the matrix is kept), and a new one's was gathered.
        let in_order = rows.unstored == 0
            && order.len() == rows.vectors.len()
            && order.iter().enumerate().all(|(n, &row)| n == row);
        let matrix = if in_order {
            ScanMatrix::of_rows(rows.vectors)
        } else {
            let row = |number: usize| -> Cow<'_, [f32]> {
                match (base_of[number], base) {
                    (Some(old), Some(base)) => Cow::Owned(base.index.vector(old)),
                    _ => Cow::Owned(rows.vectors.row(gathered_at[order[number]])),
                }
            };
            let gathered_norm = |number: usize| rows.vectors.norm(gathered_at[order[number]]);
            let base_index = base.map(|base| &base.index);
            let matrix = ScanMatrix::build_on(order.len(), dimension, base_index, &base_of, &row, &gathered_norm);
            // The gathered rows are freed before the lexical index is built: a level's build
            // never holds its vectors twice and its postings too.
            drop(rows);
            matrix
        };
        let lexical = base.map(|base| {
            let added_records: Vec<Arc<Record>> = added.iter().map(|&number| Arc::clone(&records[number])).collect();
            let terms = crate::index::lexical::LexicalTermsOf::new(&added_records);
            base.index.lexical.renumbered(&kept, added.iter().map(|&number| number as u32).zip(terms), records.len())
        });
        let page_of = PageNumbers::numbers_of(&features);
        Derived { features, matrix, lexical, page_of }
    }

    /// The level of `records` from what was derived from them; `lexical`, when the derivation
    /// made none (otherwise the level's own is built here).
    fn assemble(records: Vec<Arc<Record>>, derived: Derived, lexical: Option<Bm25Index>, pages: &PageNumbers) -> Self {
        let Derived { features, matrix, lexical: renumbered, page_of } = derived;
        let pages = page_of.as_deref().map(|of| (&pages.scope, of));
        let index = TenantLevel::build_from(&records, matrix, renumbered.or(lexical), pages);
        Self { store: Arc::new(LevelStore::new(records, features)), index, memo: Default::default() }
    }
}

impl TenantIndex {
    /// Indexes one tenant's records with their embeddings (already validated, all of that tenant);
    /// rows with a `base_number` are kept from `base`.
    pub(super) fn build(
        levels: [LevelRows; 3],
        dimension: usize,
        base: Option<&TenantIndex>,
        topics: &TopicTable,
    ) -> Self {
        // The tenant's pages in doc id order, numbered once for the three levels.
        let pages = PageNumbers::new(
            levels.iter().flat_map(|rows| rows.records.iter().map(|record| record.meta.doc_id.as_str())),
        );
        let [docs, sections, chunks] = levels;
        let Some(base) = base else { return Self::build_new([docs, sections, chunks], dimension, &pages, topics) };
        // The levels are built side by side: much of a level's build is one thread's work.
        let build = |slot: usize, rows| LevelData::build(rows, dimension, Some(&base.levels[slot]), &pages, topics);
        let levels = std::thread::scope(|scope| {
            let sections = scope.spawn(|| build(1, sections));
            let docs = build(0, docs);
            let chunks = build(2, chunks);
            [docs, sections.join().expect("a level's build does not panic"), chunks]
        });
        Self { levels }
    }

    /// `build` with no base: the sections' and chunks' lexical indexes are built together (a
    /// chunk's text is most often a passage of its section's, tokenized once for both), beside the
    /// levels' features and matrices.
    fn build_new(levels: [LevelRows; 3], dimension: usize, pages: &PageNumbers, topics: &TopicTable) -> Self {
        let [docs, sections, chunks] = levels;
        let Ordered { rows: section_rows, order: section_order, records: section_records } = Ordered::new(sections);
        let Ordered { rows: chunk_rows, order: chunk_order, records: chunk_records } = Ordered::new(chunks);
        let derive = |rows, order: &[usize], records: &[Arc<Record>]| {
            LevelData::derive(rows, order, records, dimension, None, pages, topics)
        };
        let joined = "a level's build does not panic";
        let (docs, section_parts, chunk_parts, (section_lexical, chunk_lexical)) = std::thread::scope(|scope| {
            let lexical = scope.spawn(|| {
                Bm25Index::build_sections_and_chunks(&section_records, &chunk_records, Bm25Params::default())
            });
            let section_parts = scope.spawn(|| derive(section_rows, &section_order, &section_records));
            let docs = LevelData::build(docs, dimension, None, pages, topics);
            let chunk_parts = derive(chunk_rows, &chunk_order, &chunk_records);
            (docs, section_parts.join().expect(joined), chunk_parts, lexical.join().expect(joined))
        });
        let levels = std::thread::scope(|scope| {
            let sections =
                scope.spawn(|| LevelData::assemble(section_records, section_parts, Some(section_lexical), pages));
            let chunks = LevelData::assemble(chunk_records, chunk_parts, Some(chunk_lexical), pages);
            [docs, sections.join().expect(joined), chunks]
        });
        Self { levels }
    }
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
}

#[cfg(test)]
mod tests {
    use crate::index::vectors::{BlockRows, SEGMENT_ROWS};

    #[test]
    fn gathered_vectors_read_back_row_by_row_across_segments() {
        let mut vectors = BlockRows::default();
        let row = |n: usize| [n as f32, -(n as f32), 0.5];
        let rows = SEGMENT_ROWS * 2 + 7;
        (0..rows).for_each(|n| vectors.push(&row(n)));
        assert_eq!(vectors.len(), rows);
        for n in 0..rows {
            assert_eq!(vectors.row(n), row(n), "row {n}");
            assert_eq!(vectors.norm(n).to_bits(), (2.0 * (n * n) as f32 + 0.25).sqrt().to_bits(), "row {n}");
        }
    }
}
