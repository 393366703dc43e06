//! One tenant's records of one level, as the in-memory index scans them: vectors in contiguous
//! blocks, the BM25 index, and maps from doc and section ids to record numbers.

use super::codec::{damaged, Reader, Writer};
use super::filter::PageHint;
use super::lexical::{Bm25Index, Bm25Params};
use super::partition::{LazyPartition, PROBE_SHARE};
use super::vectors::{norm, BlockRows, Columns, SegmentSource, VectorBlocks, GROUP, LANES, SEGMENT_ROWS};
use super::RecordFilter;
use crate::model::Record;
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::sync::Arc;

/// One tenant's records of one level: their vectors as one contiguous matrix, their lexical
/// index, and the records of each doc. Records are numbered by ascending id within the tenant and
/// level, so comparing numbers breaks score ties by id without touching a string.
#[derive(Debug, Default)]
pub(super) struct TenantLevel {
    /// How many records the level has (numbered 0..len).
    len: usize,
    vectors: Arc<VectorBlocks>,
    /// Number → Euclidean norm of the record's embedding.
    norms: Arc<Vec<f32>>,
    /// The level's vectors grouped for approximate tenant-wide rankings, built when first asked
    /// for (`approximate_top_k`).
    partition: LazyPartition,
    pub(crate) lexical: Bm25Index,
    /// doc_id → numbers of the doc's records (ascending), so a query restricted to a few docs
    /// visits only their records.
    by_doc: HashMap<String, Vec<usize>>,
    /// section_id → numbers of the records carrying it (the section and its chunks), ascending.
    by_section: HashMap<String, Vec<usize>>,
    /// The numbers of each page's records, by page number (`RecordFeatures::page`), when the
    /// index numbered the pages: a filter's `PageHint` is read here instead of hashing doc ids.
    by_page: Option<PageRecords>,
    /// The records grouped by the metadata an equality filter reads (`FilterGroups`).
    groups: FilterGroups,
}

/// Adds `number` to the list under `key`, copying the key only for the first number it gets.
fn push_under(map: &mut HashMap<String, Vec<usize>>, key: &str, number: usize) {
    match map.get_mut(key) {
        Some(numbers) => numbers.push(number),
        None => drop(map.insert(key.to_string(), vec![number])),
    }
}

/// A level's records grouped by the fields `RecordFilter::matches` compares for equality
/// (product, version, tags, domain, section, platform, role; the tenant is the level's own): a
/// filter with no id list and no condition gives every record of a group the same verdict, so a
/// tenant-wide ranking under the router's hard filter checks one record per group, not every
/// record's strings.
#[derive(Debug, Default)]
struct FilterGroups {
    /// Number → its group.
    of: Vec<u32>,
    /// Group → its first record's number.
    first: Vec<u32>,
}

impl FilterGroups {
    fn build(records: &[Arc<Record>]) -> Self {
        type Key<'a> = (&'a str, &'a str, &'a [String], &'a str, &'a str, &'a str, &'a str);
        let mut group_of: HashMap<Key<'_>, u32> = HashMap::default();
        let mut groups = Self { of: Vec::with_capacity(records.len()), first: Vec::new() };
        for (number, record) in records.iter().enumerate() {
            let meta = &record.meta;
            let key = (
                meta.product.as_str(),
                meta.version.as_str(),
                meta.tags.as_slice(),
                meta.domain.as_str(),
                meta.section.as_str(),
                meta.platform.as_str(),
                meta.role.as_str(),
            );
            let next = groups.first.len() as u32;
            let group = *group_of.entry(key).or_insert(next);
            if group == next {
                groups.first.push(number as u32);
            }
            groups.of.push(group);
        }
        groups
    }
}

/// The records of each page of one page numbering (`scope`): those of page `p` are
/// `numbers[starts[p]..starts[p + 1]]`, ascending; with no `numbers` (each page's records follow
/// each other in number order, as when ids start with their doc id) they are
/// `starts[p]..starts[p + 1]` themselves, and a lookup reads only `starts`.
#[derive(Debug)]
struct PageRecords {
    scope: Arc<()>,
    starts: Vec<u32>,
    numbers: Option<Vec<u32>>,
}

impl PageRecords {
    /// From each record's page number (records in number order).
    fn build(scope: &Arc<()>, page_of: &[u32]) -> Self {
        let pages = page_of.iter().map(|&page| page as usize + 1).max().unwrap_or(0);
        let mut starts = vec![0u32; pages + 1];
        for &page in page_of {
            starts[page as usize + 1] += 1;
        }
        for page in 0..pages {
            starts[page + 1] += starts[page];
        }
        let numbers = (!page_of.is_sorted()).then(|| {
            let mut next = starts.clone();
            let mut numbers = vec![0u32; page_of.len()];
            for (number, &page) in page_of.iter().enumerate() {
                numbers[next[page as usize] as usize] = number as u32;
                next[page as usize] += 1;
            }
            numbers
        });
        Self { scope: Arc::clone(scope), starts, numbers }
    }

    /// The records of the hinted pages (ascending, each once), when the hint is of this
    /// numbering and names one page per doc id (`ids` of them); `None` otherwise.
    fn of(&self, hint: &PageHint, ids: usize) -> Option<Vec<usize>> {
        if !Arc::ptr_eq(&hint.scope, &self.scope) || hint.numbers.len() != ids {
            return None;
        }
        // Each page once: a record is on one page, so no record comes twice.
        let mut pages = hint.numbers.clone();
        pages.sort_unstable();
        pages.dedup();
        let mut numbers = Vec::new();
        for page in pages {
            // A page past the last one with records on this level has none here.
            let (Some(&start), Some(&end)) = (self.starts.get(page as usize), self.starts.get(page as usize + 1))
            else {
                continue;
            };
            match &self.numbers {
                Some(of_pages) => numbers.extend(of_pages[start as usize..end as usize].iter().map(|&n| n as usize)),
                None => numbers.extend(start as usize..end as usize),
            }
        }
        if self.numbers.is_some() {
            // Scattered pages interleave; contiguous ones in page order are in number order.
            numbers.sort_unstable();
        }
        Some(numbers)
    }
}

/// A filtered ranking of fewer records than this scores each exactly; more, and the level has a
/// partition, it scans their 8-bit rows and re-scores the best (`Partition::top_k_among`): a
/// filter's records are spread over the level, and reading each one's exact vector reads its
/// whole block.
const NARROW_SCAN_MIN_RECORDS: usize = 2_048;

/// A level's embeddings as its searches read them: the scan matrix and each row's norm.
pub(crate) struct ScanMatrix {
    vectors: Arc<VectorBlocks>,
    norms: Arc<Vec<f32>>,
}

impl ScanMatrix {
    /// The matrix of `vectors` (rows of `dimension` values, in record number order).
    #[cfg(test)]
    pub(crate) fn build(vectors: &[&[f32]], dimension: usize) -> Self {
        let norms = Arc::new(vectors.iter().map(|vector| norm(vector)).collect());
        Self { vectors: Arc::new(VectorBlocks::build(vectors, dimension)), norms }
    }

    /// The matrix of rows gathered in record number order, as they are (no copy).
    pub(super) fn of_rows(rows: BlockRows) -> Self {
        let (vectors, norms) = rows.into_matrix();
        Self { vectors: Arc::new(vectors), norms: Arc::new(norms) }
    }

    /// The matrix of a level of `len` records of `dimension` that replaces `base`: record
    /// `number` is the base's record `base_of[number]` as it was (same vector), or new, with the
    /// vector `row(number)` and its norm `new_norm(number)`. A segment all of whose records the
    /// base holds in the same places is shared with the base's matrix, not copied; only the
    /// others are built (and only their rows read).
    pub(crate) fn build_on<'a>(
        len: usize,
        dimension: usize,
        base: Option<&TenantLevel>,
        base_of: &[Option<usize>],
        row: &'a dyn Fn(usize) -> Cow<'a, [f32]>,
        new_norm: &dyn Fn(usize) -> f32,
    ) -> Self {
        let base = base.filter(|base| base.vectors.dimension() == dimension);
        let base_len = base.map_or(0, |base| base.len);
        let norms = (0..len)
            .map(|number| match (base_of[number], base) {
                (Some(old), Some(base)) => base.norms[old],
                _ => new_norm(number),
            })
            .collect();
        let vectors = VectorBlocks::build_with(len, dimension, base.map(|base| &*base.vectors), |segment| {
            let first = segment * SEGMENT_ROWS;
            let end = (first + SEGMENT_ROWS).min(len);
            let same_size = end <= base_len && end - first == SEGMENT_ROWS.min(base_len - first);
            if same_size && (first..end).all(|number| base_of[number] == Some(number)) {
                SegmentSource::Shared(segment)
            } else {
                SegmentSource::Rows(row)
            }
        });
        Self { vectors: Arc::new(vectors), norms: Arc::new(norms) }
    }
}

impl TenantLevel {
    /// Indexes `records` (sorted by id) whose embeddings are `vectors` (same order) and whose
    /// lexical index is `lexical` (`None`: built here from their texts).
    /// `pages`: the numbering of the tenant's pages and each record's page number there, when
    /// the index numbered them.
    #[cfg(test)]
    pub(crate) fn build(
        records: &[Arc<Record>],
        vectors: &[&[f32]],
        dimension: usize,
        lexical: Option<Bm25Index>,
        pages: Option<(&Arc<()>, &[u32])>,
    ) -> Self {
        Self::build_from(records, ScanMatrix::build(vectors, dimension), lexical, pages)
    }

    /// `build` with the scan matrix already made (so that the rows it was made from can be freed
    /// before the lexical index is built).
    pub(crate) fn build_from(
        records: &[Arc<Record>],
        matrix: ScanMatrix,
        lexical: Option<Bm25Index>,
        pages: Option<(&Arc<()>, &[u32])>,
    ) -> Self {
        let lexical = lexical.unwrap_or_else(|| Bm25Index::build_from_records(records, Bm25Params::default()));
        Self::assemble(records, matrix.vectors, matrix.norms, lexical, pages)
    }

    /// The level from its records (id order) and what was computed from them; the id maps are
    /// made here.
    fn assemble(
        records: &[Arc<Record>],
        vectors: Arc<VectorBlocks>,
        norms: Arc<Vec<f32>>,
        lexical: Bm25Index,
        pages: Option<(&Arc<()>, &[u32])>,
    ) -> Self {
        let mut by_doc: HashMap<String, Vec<usize>> = HashMap::default();
        let mut by_section: HashMap<String, Vec<usize>> = HashMap::default();
        for (number, record) in records.iter().enumerate() {
            let meta = &record.meta;
            push_under(&mut by_doc, &meta.doc_id, number);
            if let Some(section_id) = &meta.section_id {
                push_under(&mut by_section, section_id, number);
            }
        }
        let by_page = pages.map(|(scope, page_of)| PageRecords::build(scope, page_of));
        let groups = FilterGroups::build(records);
        Self {
            len: records.len(),
            vectors,
            norms,
            partition: LazyPartition::default(),
            lexical,
            by_doc,
            by_section,
            by_page,
            groups,
        }
    }

    /// Writes the level's norms and lexical index to `out`, and its scan matrix to `vectors` as
    /// raw little-endian columns (the local copy of a replica, which maps them back with
    /// `Columns::mapped`; the records themselves are written by the caller, in number order).
    pub(crate) fn write_to<W: std::io::Write>(
        &self,
        out: &mut Writer<W>,
        vectors: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        out.len(self.len)?;
        out.len(self.vectors.dimension())?;
        let mut columns = Writer(vectors);
        self.vectors.write_columns(&mut columns)?;
        out.words(self.norms.iter().map(|norm| norm.to_le_bytes()))?;
        self.lexical.write_to(out)
    }

    /// How many columns of `LANES` floats the scan matrix of `len` records has.
    pub(crate) fn column_count(len: usize, dimension: usize) -> usize {
        len.div_ceil(LANES) * dimension
    }

    /// Reads what `write_to` wrote to `out` for `records` (in number order) of embeddings of
    /// `dimension`, with the scan matrix `data` (`column_count` columns); `pages` as for `build`.
    pub(crate) fn read_from<R: std::io::Read>(
        input: &mut Reader<R>,
        records: &[Arc<Record>],
        dimension: usize,
        pages: Option<(&Arc<()>, &[u32])>,
        data: Columns,
    ) -> std::io::Result<Self> {
        let len = input.len()?;
        if len != records.len() || input.len()? != dimension || data.len() != Self::column_count(len, dimension) {
            return Err(damaged("the level's size or dimension differs from its records'"));
        }
        let vectors = Arc::new(VectorBlocks::from_columns(dimension, data));
        let mut norms = Vec::new();
        input.words_into(len, &mut norms, f32::from_le_bytes)?;
        let lexical = Bm25Index::read_from(input, len)?;
        Ok(Self::assemble(records, vectors, Arc::new(norms), lexical, pages))
    }

    /// The best `k` records of the whole level by cosine, as `top_k` orders them, found in the
    /// level's partition (`index::partition`): when the level has at least `min_records` records
    /// (0: never) and its partition is ready. `None`: scan exactly (the partition, when the level
    /// is big enough, is then being built). Each pair's score is its exact cosine.
    pub(crate) fn approximate_top_k(&self, query: &[f32], k: usize, min_records: usize) -> Option<Vec<(f32, usize)>> {
        self.approximate_top_k_among(query, k, min_records, None)
    }

    /// `approximate_top_k` among `numbers` (ascending) only, when given: `None` also when they
    /// are so few that scoring each of them costs less than probing the partition.
    pub(crate) fn approximate_top_k_among(
        &self,
        query: &[f32],
        k: usize,
        min_records: usize,
        numbers: Option<&[usize]>,
    ) -> Option<Vec<(f32, usize)>> {
        if !self.wants_partition(min_records) {
            return None;
        }
        let share = numbers.map_or(1.0, |numbers| numbers.len() as f64 / self.len.max(1) as f64);
        // Few records: their exact scores cost less than the partition's scan.
        if numbers.is_some_and(|numbers| numbers.len() < NARROW_SCAN_MIN_RECORDS) {
            return None;
        }
        let partition = self.partition.get_or_start(&self.vectors, &self.norms)?;
        let query_norm = norm(query);
        let exact = |dot: f32, number: usize| cosine(dot, query_norm, self.norms[number]);
        Some(match numbers {
            None => partition.top_k(query, k, 1.0, |_| true, exact),
            // A narrow filter: the 8-bit rows of exactly the records it passes.
            Some(numbers) if share * PROBE_SHARE as f64 <= 1.0 => partition.top_k_among(query, k, numbers, exact),
            Some(numbers) => {
                let mut kept = vec![0u64; self.len.div_ceil(64)];
                for &number in numbers {
                    kept[number / 64] |= 1 << (number % 64);
                }
                partition.top_k(query, k, share, |number| kept[number / 64] & (1 << (number % 64)) != 0, exact)
            }
        })
    }

    /// Whether the level is big enough for a partition at the threshold `min_records` (0: none).
    fn wants_partition(&self, min_records: usize) -> bool {
        min_records != 0 && self.len >= min_records
    }

    /// Starts building the level's partition when it is big enough for one at `min_records`, and
    /// waits until it is built, at most `timeout` (`eval`, tests and benchmarks). Returns whether
    /// the level is ready: built, or ranked exactly at this threshold.
    pub(crate) fn prepare_partition(&self, min_records: usize, timeout: std::time::Duration) -> bool {
        if !self.wants_partition(min_records) {
            return true;
        }
        self.partition.get_or_start(&self.vectors, &self.norms);
        self.partition.wait(timeout)
    }

    /// Whether segment `segment` of this level's scan matrix is the one `other` holds (shared).
    #[cfg(test)]
    pub(crate) fn shares_vector_segment(&self, other: &TenantLevel, segment: usize) -> bool {
        self.vectors.shares_segment(&other.vectors, segment)
    }

    /// The embedding of record `number`, read back from the scan matrix.
    pub(crate) fn vector(&self, number: usize) -> Vec<f32> {
        self.vectors.row(number)
    }

    /// The numbers of the records that the filter's id lists allow, ascending (that is, in id
    /// order): those of its docs and of its sections when it names them, else all. Records without
    /// a section id never pass a `section_ids` condition, as in `RecordFilter::matches`.
    pub(crate) fn candidates(&self, filter: &RecordFilter) -> Vec<usize> {
        let sorted = |mut numbers: Vec<usize>| {
            numbers.sort_unstable();
            numbers.dedup();
            numbers
        };
        let numbers_of = |index: &HashMap<String, Vec<usize>>, ids: &[String]| {
            sorted(ids.iter().filter_map(|id| index.get(id)).flatten().copied().collect())
        };
        let of_docs = |doc_ids: &[String]| {
            let by_page = self.by_page.as_ref().zip(filter.pages.as_ref());
            match by_page.and_then(|(pages, hint)| pages.of(hint, doc_ids.len())) {
                Some(numbers) => numbers,
                None => numbers_of(&self.by_doc, doc_ids),
            }
        };
        match (&filter.doc_ids, &filter.section_ids) {
            (None, None) => (0..self.len).collect(),
            (Some(doc_ids), None) => of_docs(doc_ids),
            (None, Some(section_ids)) => numbers_of(&self.by_section, section_ids),
            (Some(doc_ids), Some(section_ids)) => {
                let of_docs = of_docs(doc_ids);
                let mut numbers = numbers_of(&self.by_section, section_ids);
                numbers.retain(|number| of_docs.binary_search(number).is_ok());
                numbers
            }
        }
    }

    /// The cosine similarity of `query` with each record of `numbers` (ascending), as
    /// (score, number) pairs: the division and rounding of the row-by-row cosine, over dot products
    /// computed a block at a time.
    pub(crate) fn cosine_scores(&self, numbers: &[usize], query: &[f32]) -> Vec<(f32, usize)> {
        let query_norm = norm(query);
        let mut scored: Vec<(f32, usize)> = Vec::with_capacity(numbers.len());
        // The distinct blocks holding the numbers (ascending), scanned `GROUP` at a time.
        let mut blocks: Vec<usize> = numbers.iter().map(|&number| number / LANES).collect();
        blocks.dedup();
        let mut next = 0;
        for group in blocks.chunks(GROUP) {
            let dots = self.vectors.dots(group, query);
            for (&block, dots) in group.iter().zip(&dots) {
                while let Some(&number) = numbers.get(next).filter(|&&number| number / LANES == block) {
                    scored.push((cosine(dots[number % LANES], query_norm, self.norms[number]), number));
                    next += 1;
                }
            }
        }
        scored
    }

    /// `cosine_scores` of every record, by number, written over `scores` (a buffer to reuse):
    /// the whole matrix in order, with no list of numbers to make or follow.
    pub(crate) fn all_cosine_scores(&self, query: &[f32], scores: &mut Vec<f32>) {
        let query_norm = norm(query);
        scores.clear();
        scores.reserve(self.len);
        self.vectors.for_each_block_dots(self.len, query, |first, dots| {
            let norms = &self.norms[first..][..dots.len()];
            scores.extend(dots.iter().zip(norms).map(|(&dot, &norm)| cosine(dot, query_norm, norm)));
        });
    }
}

/// The cosine of a row from its dot product with the query and the two norms, clamped to
/// [-1, 1] and rounded to 1e-6 so that float noise (Chroma re-normalises stored vectors) cannot
/// reorder equal scores: ties are then broken by id on every backend alike. 0 for a zero vector.
#[inline]
fn cosine(dot: f32, query_norm: f32, norm: f32) -> f32 {
    if query_norm == 0.0 || norm == 0.0 {
        return 0.0;
    }
    let score = (dot / (query_norm * norm)).clamp(-1.0, 1.0);
    if score.is_finite() {
        round_small(score * 1e6) / 1e6
    } else {
        0.0
    }
}

/// `x.round()` (half away from zero) without the call to libm's `roundf` that `f32::round` is on
/// a CPU baseline without SSE4.1: the scan rounds every score. Exact: below 2^23 the integer
/// part is `x as i32` and the fraction `|x| - whole` has no rounding error; from 2^23 on every
/// `f32` is an integer already.
#[inline]
fn round_small(x: f32) -> f32 {
    let magnitude = x.abs();
    if magnitude.is_nan() || magnitude >= 8_388_608.0 {
        return x.round();
    }
    let whole = magnitude as i32 as f32;
    let rounded = if magnitude - whole >= 0.5 { whole + 1.0 } else { whole };
    rounded.copysign(x)
}

/// What of a filter is left to check per record once the tenant and the id lists chose the
/// candidates (`TenantLevel::candidates`): nothing, or — for any metadata condition — the
/// filter's own check. Together they give the verdict of `RecordFilter::matches`.
pub(super) enum Residual<'a> {
    Nothing,
    Everything(&'a RecordFilter),
}

impl<'a> Residual<'a> {
    pub(crate) fn of(filter: &'a RecordFilter) -> Self {
        let ids_only = filter.product.is_none()
            && filter.version.is_none()
            && filter.tags.is_empty()
            && filter.domain.is_none()
            && filter.section.is_none()
            && filter.platform.is_none()
            && filter.role.is_none()
            && filter.condition.is_none();
        if ids_only {
            Residual::Nothing
        } else {
            Residual::Everything(filter)
        }
    }
}

/// The residual check (`Residual`) by record number, for records met mostly in id order: a record whose
/// checked fields equal the last checked record's takes its verdict (`RecordFilter::same_verdict`;
/// a page's sections and chunks sit side by side and share the page's metadata), so a costly
/// metadata condition — Dify's 64 `not in` lists of 1,000 values — is checked about once per page.
///
/// A filter with no id list and no condition is decided once per `FilterGroups` group instead.
pub(super) struct Verdicts<'a> {
    residual: Residual<'a>,
    records: &'a [Arc<Record>],
    last: std::cell::Cell<Option<(usize, bool)>>,
    /// Each group's verdict, and each record's group, when the filter reads grouped fields only.
    grouped: Option<(Vec<bool>, &'a [u32])>,
}

impl<'a> Verdicts<'a> {
    /// The verdicts of `filter` on the records of `level` (`records`, by number).
    pub(crate) fn new(filter: &'a RecordFilter, level: &'a TenantLevel, records: &'a [Arc<Record>]) -> Self {
        let residual = Residual::of(filter);
        let grouped_only = filter.condition.is_none() && filter.doc_ids.is_none() && filter.section_ids.is_none();
        let grouped = (matches!(residual, Residual::Everything(_))
            && grouped_only
            && level.groups.of.len() == records.len())
        .then(|| {
            let verdicts = level.groups.first.iter().map(|&number| filter.matches(&records[number as usize].meta));
            (verdicts.collect(), level.groups.of.as_slice())
        });
        Self { residual, records, last: std::cell::Cell::new(None), grouped }
    }

    pub(crate) fn accepts(&self, number: usize) -> bool {
        let Residual::Everything(filter) = self.residual else { return true };
        if let Some((verdicts, group_of)) = &self.grouped {
            return verdicts[group_of[number] as usize];
        }
        let meta = &self.records[number].meta;
        if let Some((last, verdict)) = self.last.get() {
            if last == number || filter.same_verdict(&self.records[last].meta, meta) {
                return verdict;
            }
        }
        let verdict = filter.matches(meta);
        self.last.set(Some((number, verdict)));
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::vectors::{top_k, top_k_of};

    #[test]
    fn round_small_is_f32_round() {
        let mut values = vec![0.0f32, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 1e6, -1e6, 8_388_607.5, 8_388_608.0];
        values.extend([f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE, 1e-40, 4e9]);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Scores times 1e6, halves, and raw bit patterns of every magnitude.
            values.push(((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * 1e6);
            values.push((state % 4_000_001) as f32 / 2.0 - 1e6);
            values.push(f32::from_bits(state as u32));
        }
        for x in values {
            let (got, want) = (round_small(x), x.round());
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{x:e}: {got:e} vs {want:e}");
        }
    }

    #[test]
    fn grouped_verdicts_are_the_verdicts_of_matches() {
        // Records whose equality fields vary independently; every filter without id lists or a
        // condition must give each record the verdict `matches` gives it.
        let records: Vec<Arc<Record>> = (0..60)
            .map(|n: usize| {
                let meta = crate::model::Metadata {
                    tenant_id: "t".into(),
                    doc_id: format!("d{}", n / 3).into(),
                    platform: ["android", "ios", ""][n % 3].into(),
                    role: ["user", "admin"][n / 3 % 2].into(),
                    domain: ["apps", "sdk_docs", "apps", "kb"][n / 7 % 4].into(),
                    tags: if n.is_multiple_of(5) { vec!["a".into(), "b".into()] } else { vec!["a".into()] },
                    version: if n.is_multiple_of(11) { "2".into() } else { Default::default() },
                    ..Default::default()
                };
                Arc::new(Record { id: format!("r{n:02}"), meta, text: Default::default(), embedding: Vec::new() })
            })
            .collect();
        let vectors: Vec<Vec<f32>> = records.iter().map(|_| vec![1.0, 0.0]).collect();
        let views: Vec<&[f32]> = vectors.iter().map(Vec::as_slice).collect();
        let level = TenantLevel::build(&records, &views, 2, None, None);
        assert!(level.groups.first.len() < records.len(), "records share groups");
        let filters = [
            RecordFilter { platform: Some("android".into()), ..RecordFilter::tenant("t") },
            RecordFilter { domain: Some("apps".into()), role: Some("admin".into()), ..RecordFilter::tenant("t") },
            RecordFilter { tags: vec!["b".into()], version: Some("2".into()), ..RecordFilter::tenant("t") },
            RecordFilter { platform: Some("".into()), ..RecordFilter::tenant("t") },
            RecordFilter { product: Some("none".into()), ..RecordFilter::tenant("t") },
            RecordFilter { platform: Some("ios".into()), ..RecordFilter::tenant("other") },
        ];
        for filter in &filters {
            let verdicts = Verdicts::new(filter, &level, &records);
            assert!(verdicts.grouped.is_some(), "{filter:?}");
            for (number, record) in records.iter().enumerate() {
                assert_eq!(verdicts.accepts(number), filter.matches(&record.meta), "{filter:?}, record {number}");
            }
        }
        // Id lists are not grouped fields: those filters keep the per-record check.
        let with_ids = RecordFilter { doc_ids: Some(vec!["d1".into()]), ..filters[0].clone() };
        assert!(Verdicts::new(&with_ids, &level, &records).grouped.is_none());
    }

    #[test]
    fn page_numbers_find_the_records_doc_ids_find() {
        // Records in id order; pages numbered in doc id order as the index numbers them. Ids that
        // start with their doc id keep each page's records together; the others scatter them.
        let docs = ["a", "b", "c", "d"];
        let together = [("a#0", "a"), ("a#1", "a"), ("b#0", "b"), ("c#0", "c"), ("c#1", "c"), ("c#2", "c")];
        let scattered = [("r0", "c"), ("r1", "a"), ("r2", "c"), ("r3", "b"), ("r4", "a"), ("r5", "c")];
        for (layout, expected_ca, expected_c) in
            [(together, [0, 1, 3, 4, 5], [3, 4, 5]), (scattered, [0, 1, 2, 4, 5], [0, 2, 5])]
        {
            let records: Vec<Arc<Record>> = layout
                .iter()
                .map(|(id, doc)| {
                    let meta = crate::model::Metadata { doc_id: (*doc).into(), ..Default::default() };
                    Arc::new(Record { id: id.to_string(), meta, text: Default::default(), embedding: Vec::new() })
                })
                .collect();
            let page_of: Vec<u32> =
                records.iter().map(|r| docs.iter().position(|d| *d == r.meta.doc_id).unwrap() as u32).collect();
            let scope = Arc::new(());
            let vectors: Vec<Vec<f32>> = records.iter().map(|_| vec![1.0, 0.0]).collect();
            let views: Vec<&[f32]> = vectors.iter().map(Vec::as_slice).collect();
            let level = TenantLevel::build(&records, &views, 2, None, Some((&scope, &page_of)));
            assert_eq!(level.by_page.as_ref().unwrap().numbers.is_none(), layout == together);
            let hinted = |ids: &[&str], hint: Option<PageHint>| {
                let filter = RecordFilter {
                    doc_ids: Some(ids.iter().map(|id| id.to_string()).collect()),
                    pages: hint,
                    ..RecordFilter::tenant("t")
                };
                level.candidates(&filter)
            };
            let numbers =
                |ids: &[&str]| ids.iter().map(|id| docs.iter().position(|d| d == id).unwrap() as u32).collect();
            // "d" has no record on this level: it is past the level's last page.
            for ids in [vec!["c", "a"], vec!["b"], vec!["d", "a", "a"], vec![], vec!["c", "b", "a", "d"]] {
                let plain = hinted(&ids, None);
                let hint = PageHint { scope: Arc::clone(&scope), numbers: numbers(&ids) };
                assert_eq!(hinted(&ids, Some(hint)), plain, "{ids:?}");
                // A hint of another numbering is not read.
                let foreign = PageHint { scope: Arc::new(()), numbers: vec![0; ids.len()] };
                assert_eq!(hinted(&ids, Some(foreign)), plain, "{ids:?}");
            }
            assert_eq!(hinted(&["c", "a"], None), expected_ca);
            // The hint is what is read when it is of this numbering (here one that names page "c").
            let lying = PageHint { scope: Arc::clone(&scope), numbers: vec![2] };
            assert_eq!(hinted(&["b"], Some(lying)), expected_c);
        }
    }

    /// The row-by-row cosine the blocked scan must reproduce bit for bit.
    fn reference(row: &[f32], query: &[f32]) -> f32 {
        let dot: f32 = row.iter().zip(query).map(|(a, b)| a * b).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let (qn, rn) = (norm(query), norm(row));
        if qn == 0.0 || rn == 0.0 {
            return 0.0;
        }
        let score = (dot / (qn * rn)).clamp(-1.0, 1.0);
        (score * 1e6).round() / 1e6
    }

    #[test]
    fn blocked_scan_equals_row_by_row_cosine_for_any_subset() {
        let dimension = 37;
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut unit = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        // 150 rows: nine full blocks and a partial one; one zero row.
        let rows: Vec<Vec<f32>> = (0..150)
            .map(|number| if number == 77 { vec![0.0; dimension] } else { (0..dimension).map(|_| unit()).collect() })
            .collect();
        let views: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let level = TenantLevel::build(&[], &views, dimension, Some(Bm25Index::default()), None);
        let level = TenantLevel { len: rows.len(), ..level };
        let query: Vec<f32> = (0..dimension).map(|_| unit()).collect();
        let subsets: Vec<Vec<usize>> = vec![
            (0..150).collect(),
            (0..150).step_by(7).collect(),
            vec![3, 4, 77, 149],
            vec![140],
            (16..80).collect(),
            Vec::new(),
        ];
        for numbers in subsets {
            let got = level.cosine_scores(&numbers, &query);
            let expected: Vec<(f32, usize)> =
                numbers.iter().map(|&number| (reference(&rows[number], &query), number)).collect();
            let bits = |list: &[(f32, usize)]| list.iter().map(|(s, n)| (s.to_bits(), *n)).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&expected), "{numbers:?}");
        }
        // The whole-level scan gives every record's score by number, into a used buffer.
        let mut scores = vec![7.0; 3];
        level.all_cosine_scores(&query, &mut scores);
        let expected: Vec<u32> = rows.iter().map(|row| reference(row, &query).to_bits()).collect();
        assert_eq!(scores.iter().map(|s| s.to_bits()).collect::<Vec<_>>(), expected);
        for k in [0, 1, 10, 150, 200] {
            let mut pairs: Vec<(f32, usize)> = scores.iter().copied().zip(0..).collect();
            top_k(&mut pairs, k);
            assert_eq!(top_k_of(&scores, k, |_| true), pairs, "k {k}");
            let mut positive: Vec<(f32, usize)> = scores.iter().copied().zip(0..).filter(|p| p.0 > 0.0).collect();
            top_k(&mut positive, k);
            assert_eq!(top_k_of(&scores, k, |score| score > 0.0), positive, "k {k}");
        }
        assert_eq!(level.vector(149), rows[149]);
    }
}
