//! The search engine over a loaded index: each tenant level's exact cosine and BM25 rankings,
//! filtered, with each level's memo of its last scores (`memo`).

use super::memo::{IdLists, Memo};
use crate::index::features::TopicTable;
use crate::index::tenant_level::{Residual, TenantLevel, Verdicts};
use crate::index::vectors::top_k;
use crate::index::{
    IndexError, IndexErrorKind, IndexStats, LevelStore, RecordFilter, RecordRef, Result, ScoredRecord, TenantStats,
};
use crate::model::{Level, Record};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// One tenant's records of one level, numbered by ascending id.
#[derive(Debug, Default)]
pub(super) struct LevelData {
    /// Number → the record and its derived features (boosting reads them instead of the text);
    /// ranked lists hold records by their number in it (`RecordRef`).
    pub(super) store: Arc<LevelStore>,
    pub(super) index: TenantLevel,
    /// What this build of the level keeps between the steps of its searches.
    pub(super) memo: Memo,
}

impl LevelData {
    /// The records that pass `filter` (whose tenant is this one), as numbers in id order.
    pub(super) fn matching(&self, filter: &RecordFilter) -> Vec<usize> {
        let verdicts = Verdicts::new(filter, &self.index, &self.store.records);
        let mut numbers = self.candidates(filter);
        numbers.retain(|&number| verdicts.accepts(number));
        numbers
    }

    /// `TenantLevel::candidates`, remembered by the level for the last id lists it resolved
    /// (`Memo::resolved`): a cascade step ranks one restricted filter twice (dense, then
    /// lexical), and resolving its page and section ids is a hash lookup per id.
    pub(super) fn candidates(&self, filter: &RecordFilter) -> Vec<usize> {
        if filter.doc_ids.is_none() && filter.section_ids.is_none() {
            return self.index.candidates(filter);
        }
        let ids = |(doc_ids, section_ids): &IdLists| *doc_ids == filter.doc_ids && *section_ids == filter.section_ids;
        if let Some(numbers) = self.memo.resolved.recall(ids, Vec::clone) {
            return numbers;
        }
        let numbers = self.index.candidates(filter);
        let key = (filter.doc_ids.clone(), filter.section_ids.clone());
        self.memo.resolved.remember(key, numbers.clone());
        numbers
    }

    pub(super) fn scored_records(&self, scored: &[(f32, usize)]) -> Vec<ScoredRecord> {
        scored
            .iter()
            .map(|&(score, number)| ScoredRecord { record: RecordRef::stored(&self.store, number), score })
            .collect()
    }
}

/// Whether `filter` lets every record of its tenant through (no id list, no metadata condition):
/// then a ranking scores the whole level, and its scores are kept for the restricted rankings.
pub(super) fn every_record(filter: &RecordFilter) -> bool {
    filter.doc_ids.is_none() && filter.section_ids.is_none() && matches!(Residual::of(filter), Residual::Nothing)
}

/// One tenant's part of a loaded index: its docs, sections and chunks, each level with its own
/// vectors, BM25 statistics and id maps. A refresh that touches one tenant rebuilds only its part;
/// the other tenants' parts are shared, not copied.
#[derive(Debug, Default)]
pub struct TenantIndex {
    pub(super) levels: [LevelData; 3],
}

impl TenantIndex {
    pub(super) fn level(&self, level: Level) -> &LevelData {
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

    /// Starts the partition of every level of at least `min_records` records and waits until all
    /// are built, at most `timeout` (benchmarks and tests). Returns whether all are ready.
    pub fn build_partitions(&self, min_records: usize, timeout: std::time::Duration) -> bool {
        self.levels.iter().all(|level| level.index.prepare_partition(min_records, timeout))
    }
}

pub(super) const fn level_slot(level: Level) -> usize {
    match level {
        Level::Doc => 0,
        Level::Section => 1,
        Level::Chunk => 2,
    }
}

/// A validated snapshot, ready to search: one `TenantIndex` per tenant.
#[derive(Debug, Clone)]
pub struct LoadedIndex {
    pub(super) embedding_model: String,
    pub(super) dimension: usize,
    pub(super) indexed_at: String,
    pub(super) tenants: HashMap<String, Arc<TenantIndex>>,
    /// The numbers of the records' topic values: made by a build or a read of the local copy,
    /// shared by the indexes a refresh derives from it (`with_tenants`), whose rebuilt tenants
    /// number new values in it.
    pub(super) topics: Arc<TopicTable>,
}

impl LoadedIndex {
    /// The numbers of this index's topic values, which its records' features hold.
    pub(crate) fn topics(&self) -> &Arc<TopicTable> {
        &self.topics
    }

    /// A copy of this index with some tenants' parts replaced (`Some`) or removed (`None`); the
    /// other tenants' parts are shared with `self`.
    pub(crate) fn with_tenants(&self, changes: Vec<(String, Option<Arc<TenantIndex>>)>) -> Self {
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
    pub(crate) fn stats_info(&self) -> (&str, &str) {
        (&self.embedding_model, &self.indexed_at)
    }

    /// Sets the index-wide facts `stats` reports (after an incremental refresh).
    pub(crate) fn set_info(&mut self, embedding_model: &str, indexed_at: &str) {
        embedding_model.clone_into(&mut self.embedding_model);
        indexed_at.clone_into(&mut self.indexed_at);
    }

    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    /// One tenant's part, when the tenant has records.
    pub fn tenant(&self, tenant_id: &str) -> Option<&Arc<TenantIndex>> {
        self.tenants.get(tenant_id)
    }

    /// `TenantIndex::build_partitions` for every tenant: a run that must be approximate from its
    /// first search on (`eval`) builds them first.
    pub(crate) fn build_partitions(&self, min_records: usize, timeout: std::time::Duration) -> bool {
        self.tenants.values().all(|tenant| tenant.build_partitions(min_records, timeout))
    }

    /// Records on all levels of all tenants.
    pub(crate) fn record_count(&self) -> usize {
        self.tenants.values().map(|tenant| tenant.record_count()).sum()
    }

    /// Records per level of all tenants: docs, sections, chunks.
    #[cfg(test)]
    pub(crate) fn level_counts(&self) -> [usize; 3] {
        let mut counts = [0; 3];
        for tenant in self.tenants.values() {
            for (count, level) in counts.iter_mut().zip(&tenant.levels) {
                *count += level.store.records.len();
            }
        }
        counts
    }

    pub(super) fn level_of(&self, level: Level, tenant_id: &str) -> Option<&LevelData> {
        self.tenants.get(tenant_id).map(|tenant| tenant.level(level))
    }

    /// The `k` records of `level` that `filter` lets through nearest `query` (cosine), exactly.
    pub fn knn(&self, level: Level, filter: &RecordFilter, query: &[f32], k: usize) -> Result<Vec<ScoredRecord>> {
        self.knn_approximate(level, filter, query, k, 0)
    }

    /// `knn`, where a tenant-wide ranking of a level of at least `min_records` records (0: none)
    /// may come from the level's partition (`TenantLevel::approximate_top_k`) once it is built.
    pub fn knn_approximate(
        &self,
        level: Level,
        filter: &RecordFilter,
        query: &[f32],
        k: usize,
        min_records: usize,
    ) -> Result<Vec<ScoredRecord>> {
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
            if let Some(best) = data.index.approximate_top_k(query, k, min_records) {
                return Ok(data.scored_records(&best));
            }
            let best = data.memo.dense.rank_every_record(
                query,
                k,
                |_| true,
                |scores| data.index.all_cosine_scores(query, scores),
            );
            return Ok(data.scored_records(&best));
        };
        if let Some(best) = data.index.approximate_top_k_among(query, k, min_records, Some(&numbers)) {
            return Ok(data.scored_records(&best));
        }
        let mut scored = match data.memo.dense.recall(
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
            let best = data.memo.lexical.rank_every_record(
                terms,
                k,
                |score| score > 0.0,
                |scores| data.index.lexical.score_all_into(terms, scores),
            );
            return data.scored_records(&best);
        }
        // The records the id lists allow (ascending), when the filter has id lists.
        let candidates: Option<Vec<usize>> = restricted.then(|| data.candidates(filter));
        let verdicts = Verdicts::new(filter, &data.index, &data.store.records);
        let accept = |number: usize| verdicts.accepts(number);
        let remembered = data.memo.lexical.recall(
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

    pub(crate) fn get(&self, level: Level, filter: &RecordFilter, limit: usize) -> Vec<Arc<Record>> {
        let Some(data) = self.level_of(level, &filter.tenant_id) else { return Vec::new() };
        data.matching(filter).into_iter().take(limit).map(|number| Arc::clone(&data.store.records[number])).collect()
    }

    pub(crate) fn text_search(
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
    pub(crate) fn has_tenant(&self, tenant_id: &str) -> bool {
        self.tenants.get(tenant_id).is_some_and(|tenant| !tenant.records(Level::Doc).is_empty())
    }

    pub(crate) fn stats(&self) -> IndexStats {
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
