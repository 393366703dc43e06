//! A tenant level's embeddings as blocks for the exact scan, and the selection of the best
//! scores: what the level's exact rankings (`tenant_level`) and its partition (`partition`)
//! both read.

use super::keep_first_sorted_by;
use std::sync::Arc;

/// Rows per block of `VectorBlocks`: four SSE registers of partial sums.
pub(super) const LANES: usize = 16;

/// Blocks per segment of a `VectorBlocks` (4,096 rows: 6 MB at 384 dimensions). A refresh that
/// leaves a segment's rows as they were shares the segment with the level it replaces instead of
/// building it again, so an edit inside a big tenant does not hold its matrix twice.
pub(super) const SEGMENT_BLOCKS: usize = 256;

/// Rows per segment of a `VectorBlocks`.
pub(super) const SEGMENT_ROWS: usize = SEGMENT_BLOCKS * LANES;

/// A tenant level's embeddings as a matrix in blocks of `LANES` rows stored dimension-major
/// (`[dimension][LANES]`, the last block padded with zero rows), held in segments of
/// `SEGMENT_BLOCKS` blocks (the last one shorter). One pass over a block yields `LANES` dot
/// products; each is summed in dimension order, exactly like a sequential loop over one row, so
/// scores are bit-identical to the row-by-row cosine while the lanes run side by side in SIMD
/// registers.
#[derive(Debug, Default)]
pub(super) struct VectorBlocks {
    dimension: usize,
    /// `SEGMENT_BLOCKS × dimension` columns each (the last: what is left).
    segments: Vec<Segment>,
}

/// Columns of a scan matrix, as a loaded level gets them: read into memory in segments, or mapped
/// from the local copy's file.
#[derive(Debug)]
pub(crate) enum Columns {
    /// Segments of `SEGMENT_BLOCKS × dimension` columns (the last: what is left).
    Read(Vec<Vec<Column>>),
    /// `len` columns from byte `start` (a multiple of 64) of a mapped file that nothing writes
    /// to (the local copy replaces a file by renaming a new one over it, never in place).
    Mapped { map: Arc<memmap2::Mmap>, start: usize, len: usize },
}

impl Columns {
    /// `len` columns at byte `start` of `map`, when they lie inside it, aligned, and the machine
    /// stores floats little-endian as the file does; `None` otherwise (then read them).
    pub(crate) fn mapped(map: &Arc<memmap2::Mmap>, start: usize, len: usize) -> Option<Self> {
        let end = len.checked_mul(std::mem::size_of::<Column>())?.checked_add(start)?;
        let aligned = (map.as_ptr() as usize + start).is_multiple_of(std::mem::align_of::<Column>());
        (cfg!(target_endian = "little") && aligned && end <= map.len()).then(|| Columns::Mapped {
            map: Arc::clone(map),
            start,
            len,
        })
    }

    /// `len` columns of a matrix of `dimension` read from `input` (raw little-endian floats).
    pub(crate) fn read(input: &mut impl std::io::Read, len: usize, dimension: usize) -> std::io::Result<Self> {
        let per_segment = (SEGMENT_BLOCKS * dimension).max(1);
        let mut segments = Vec::with_capacity(len.div_ceil(per_segment));
        let mut bytes = [0u8; std::mem::size_of::<Column>()];
        let mut left = len;
        while left > 0 {
            let mut data = vec![Column::default(); left.min(per_segment)];
            for column in &mut data {
                input.read_exact(&mut bytes)?;
                for (value, word) in column.0.iter_mut().zip(bytes.chunks_exact(4)) {
                    *value = f32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                }
            }
            left -= data.len();
            segments.push(data);
        }
        Ok(Columns::Read(segments))
    }

    /// How many columns there are.
    pub(crate) fn len(&self) -> usize {
        match self {
            Columns::Read(segments) => segments.iter().map(|segment| segment.len()).sum(),
            Columns::Mapped { len, .. } => *len,
        }
    }
}

/// One segment of a matrix's columns: its own allocation, or a window of a mapped file. Cloning
/// shares it.
#[derive(Debug, Clone)]
enum Segment {
    /// Filled where it was made (`BlockRows`, a build, a read) and never changed after.
    Owned(Arc<Vec<Column>>),
    Mapped {
        map: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
    },
}

impl std::ops::Deref for Segment {
    type Target = [Column];

    #[inline]
    fn deref(&self) -> &[Column] {
        match self {
            Segment::Owned(columns) => columns,
            // SAFETY: `Columns::mapped` checked that the columns from `start` lie inside the map
            // and are aligned for `Column`, which is plain floats (any bit pattern is a valid
            // `f32`); a segment's window lies inside those; the map lives as long as `self`, and
            // the file is never written in place.
            Segment::Mapped { map, start, len } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().add(*start).cast::<Column>(), *len)
            },
        }
    }
}

/// One dimension of a block's `LANES` rows: one cache line, aligned as one, so a vector load
/// never straddles two lines (the scan's speed no longer depends on where the allocator put it).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct Column([f32; LANES]);

/// Rows gathered one at a time (a load's records as they arrive) straight into the layout of a
/// scan matrix: when they turn out to be in record number order, they are the matrix (no second
/// copy of a level's vectors is made, nor its fresh pages zeroed); otherwise rows are read back
/// one by one.
#[derive(Debug, Default)]
pub(super) struct BlockRows {
    dimension: usize,
    rows: usize,
    /// Segments as `VectorBlocks` holds them; the last one's blocks are added as rows arrive. The
    /// first segment grows with its rows (a tenant of a few records holds a few records' worth,
    /// not a whole segment: 6 MB at 384 dimensions, for each level of each of a thousand tenants);
    /// a later one, whose level is known to be big, takes a whole segment's capacity at once.
    segments: Vec<Vec<Column>>,
    /// Row → the Euclidean norm of its vector.
    norms: Vec<f32>,
}

impl BlockRows {
    /// Appends a row (of the dimension of every row).
    pub(super) fn push(&mut self, row: &[f32]) {
        if self.rows == 0 {
            self.dimension = row.len();
        }
        let dimension = self.dimension;
        let (segment, offset) = (self.rows / SEGMENT_ROWS, self.rows % SEGMENT_ROWS);
        if offset == 0 {
            self.segments.push(if segment == 0 { Vec::new() } else { Vec::with_capacity(SEGMENT_BLOCKS * dimension) });
        }
        let columns = &mut self.segments[segment];
        if offset % LANES == 0 {
            columns.resize(columns.len() + dimension, Column::default());
        }
        set_lane(&mut columns[(offset / LANES) * dimension..][..dimension], offset % LANES, row);
        self.norms.push(norm(row));
        self.rows += 1;
    }

    pub(super) fn len(&self) -> usize {
        self.rows
    }

    /// Row `row`'s vector.
    pub(super) fn row(&self, row: usize) -> Vec<f32> {
        let (segment, offset) = (row / SEGMENT_ROWS, row % SEGMENT_ROWS);
        lane(&self.segments[segment][(offset / LANES) * self.dimension..][..self.dimension], offset % LANES)
    }

    /// The norm of row `row`'s vector (as `norm` computes it when the row is gathered).
    pub(super) fn norm(&self, row: usize) -> f32 {
        self.norms[row]
    }

    /// The rows as the matrix of a level numbered in their order, with their norms.
    pub(super) fn into_matrix(mut self) -> (VectorBlocks, Vec<f32>) {
        if let Some(last) = self.segments.last_mut() {
            last.shrink_to_fit();
        }
        let segments = self.segments.into_iter().map(|columns| Segment::Owned(Arc::new(columns))).collect();
        (VectorBlocks { dimension: self.dimension, segments }, self.norms)
    }
}

/// Writes `row` into lane `lane` of `block` (one block's columns).
fn set_lane(block: &mut [Column], lane: usize, row: &[f32]) {
    for (column, &value) in block.iter_mut().zip(row) {
        column.0[lane] = value;
    }
}

/// Lane `lane` of `block` (one block's columns): one row's vector.
fn lane(block: &[Column], lane: usize) -> Vec<f32> {
    block.iter().map(|column| column.0[lane]).collect()
}

/// The Euclidean norm of `vector`, summed in dimension order (what the cosine of every ranking
/// divides by).
pub(super) fn norm(vector: &[f32]) -> f32 {
    vector.iter().map(|v| v * v).sum::<f32>().sqrt()
}

/// Where the rows of one segment of a matrix being built come from (`VectorBlocks::build_with`).
pub(super) enum SegmentSource<'a> {
    /// The same segment of `base`, whose rows these are, in the same places.
    Shared(usize),
    /// Row by row: `row(number)` is row `number`'s vector.
    Rows(&'a dyn Fn(usize) -> std::borrow::Cow<'a, [f32]>),
}

impl VectorBlocks {
    pub(super) fn build(rows: &[&[f32]], dimension: usize) -> Self {
        let row = |number: usize| std::borrow::Cow::Borrowed(rows[number]);
        Self::build_with(rows.len(), dimension, None, |_| SegmentSource::Rows(&row))
    }

    /// The matrix of `len` rows of `dimension`, segment by segment: each one either shared with
    /// `base` (`SegmentSource::Shared`, which must hold these very rows) or built from rows.
    pub(super) fn build_with<'a>(
        len: usize,
        dimension: usize,
        base: Option<&VectorBlocks>,
        mut source: impl FnMut(usize) -> SegmentSource<'a>,
    ) -> Self {
        let segments = (0..len.div_ceil(SEGMENT_ROWS))
            .map(|segment| {
                let first = segment * SEGMENT_ROWS;
                let rows = SEGMENT_ROWS.min(len - first);
                match (source(segment), base) {
                    (SegmentSource::Shared(of), Some(base)) if base.dimension == dimension => {
                        Segment::clone(&base.segments[of])
                    }
                    (SegmentSource::Shared(of), _) => panic!("segment {of} shared without a base of its dimension"),
                    (SegmentSource::Rows(row), _) => Self::segment_of(first, rows, dimension, row),
                }
            })
            .collect();
        Self { dimension, segments }
    }

    /// One segment built from rows `first..first + rows`.
    fn segment_of<'a>(
        first: usize,
        rows: usize,
        dimension: usize,
        row: &dyn Fn(usize) -> std::borrow::Cow<'a, [f32]>,
    ) -> Segment {
        let mut data = vec![Column::default(); rows.div_ceil(LANES) * dimension];
        for offset in 0..rows {
            set_lane(&mut data[(offset / LANES) * dimension..][..dimension], offset % LANES, &row(first + offset));
        }
        Segment::Owned(Arc::new(data))
    }

    /// A matrix of `data` (`dimension` columns per block of `LANES` rows).
    pub(super) fn from_columns(dimension: usize, data: Columns) -> Self {
        let per_segment = SEGMENT_BLOCKS * dimension;
        let segments = match data {
            Columns::Read(segments) => segments.into_iter().map(|columns| Segment::Owned(Arc::new(columns))).collect(),
            Columns::Mapped { map, start, len } => (0..len.div_ceil(per_segment.max(1)))
                .map(|segment| Segment::Mapped {
                    map: Arc::clone(&map),
                    start: start + segment * per_segment * std::mem::size_of::<Column>(),
                    len: per_segment.min(len - segment * per_segment),
                })
                .collect(),
        };
        Self { dimension, segments }
    }

    pub(super) fn dimension(&self) -> usize {
        self.dimension
    }

    /// Whether segment `segment` of `self` and of `other` are one (shared, not copies).
    #[cfg(test)]
    pub(super) fn shares_segment(&self, other: &VectorBlocks, segment: usize) -> bool {
        match (&self.segments[segment], &other.segments[segment]) {
            (Segment::Owned(a), Segment::Owned(b)) => Arc::ptr_eq(a, b),
            (Segment::Mapped { map: a, start: x, .. }, Segment::Mapped { map: b, start: y, .. }) => {
                Arc::ptr_eq(a, b) && x == y
            }
            _ => false,
        }
    }

    /// The columns as raw little-endian floats (`Columns::read` and `Columns::mapped` read them).
    pub(super) fn write_columns<W: std::io::Write>(&self, out: &mut super::codec::Writer<W>) -> std::io::Result<()> {
        out.words(
            self.segments.iter().flat_map(|segment| segment.iter()).flat_map(|column| column.0.map(f32::to_le_bytes)),
        )
    }

    /// The columns of block `block`.
    #[inline]
    fn block(&self, block: usize) -> &[Column] {
        let size = self.dimension;
        &self.segments[block / SEGMENT_BLOCKS][(block % SEGMENT_BLOCKS) * size..][..size]
    }

    /// The dot products of `query` with the first `len` rows, a block at a time in row order:
    /// `each(first, dots)` gets those of rows `first..first + dots.len()`.
    pub(super) fn for_each_block_dots(&self, len: usize, query: &[f32], mut each: impl FnMut(usize, &[f32])) {
        let blocks: Vec<usize> = (0..len.div_ceil(LANES)).collect();
        for group in blocks.chunks(GROUP) {
            let dots = self.dots(group, query);
            for (&block, dots) in group.iter().zip(&dots) {
                let first = block * LANES;
                each(first, &dots[..LANES.min(len - first)]);
            }
        }
    }

    pub(super) fn row(&self, number: usize) -> Vec<f32> {
        lane(self.block(number / LANES), number % LANES)
    }

    /// The dot products of `query` with the rows of each of `blocks` (at most `GROUP` of them;
    /// `query.len() == dimension`).
    pub(super) fn dots(&self, blocks: &[usize], query: &[f32]) -> [[f32; LANES]; GROUP] {
        // Missing blocks of a short group repeat the first one: their sums are ignored.
        let columns: [&[Column]; GROUP] =
            std::array::from_fn(|slot| self.block(*blocks.get(slot).unwrap_or(&blocks[0])));
        block_dots(columns, query)
    }
}

/// The dot products of `query` with each of `rows` (row-major, `query.len()` values each): the
/// rows are laid out in blocks like the matrix's and summed by the same code, so each dot is
/// bit-identical to the one the matrix scan gives for the same row, while reading only the rows
/// themselves (a row of the matrix is spread over a whole block).
pub(super) fn row_dots(rows: &[&[f32]], query: &[f32]) -> Vec<f32> {
    const ROWS: usize = LANES * GROUP;
    // The first groups' rows are asked for at once; each group then asks for the one
    // `PREFETCH_GROUPS` after it while its own are summed.
    prefetch(&rows[..rows.len().min(PREFETCH_GROUPS * ROWS)]);
    let dimension = query.len();
    let mut dots = Vec::with_capacity(rows.len());
    // Lanes and blocks a short group leaves unfilled hold older rows: their sums are ignored.
    let mut blocks: [Vec<Column>; GROUP] = std::array::from_fn(|_| vec![Column::default(); dimension]);
    for (index, group) in rows.chunks(ROWS).enumerate() {
        if let Some(ahead) = rows.chunks(ROWS).nth(index + PREFETCH_GROUPS) {
            prefetch(ahead);
        }
        for (block, block_rows) in blocks.iter_mut().zip(group.chunks(LANES)) {
            for (lane, row) in block_rows.iter().enumerate() {
                for (column, &value) in block.iter_mut().zip(row.iter()) {
                    column.0[lane] = value;
                }
            }
        }
        let sums = block_dots(std::array::from_fn(|slot| blocks[slot].as_slice()), query);
        for (sums, block_rows) in sums.iter().zip(group.chunks(LANES)) {
            dots.extend_from_slice(&sums[..block_rows.len()]);
        }
    }
    dots
}

/// How many groups of rows `row_dots` has asked for ahead of the one it sums: 192 rows of 384
/// dimensions, 288 KB, which the second-level cache holds. The 200 rows of a search's default
/// depth are asked for (almost) at once; the 2,000 of a depth of 1,000 (`doc_top_k` at its
/// maximum) a window at a time, so that the first are not pushed out by the last before they are
/// read.
const PREFETCH_GROUPS: usize = 3;

/// Asks the CPU to start loading every cache line of `rows` into its second-level cache. The
/// rows a partition re-scores (2 × k, at least 64: 200 for a search's default depth of 100) are
/// picked anywhere in a big level's memory: read one after another, each waited for main memory
/// in turn (most of the re-scoring's time); asked for side by side, they arrive side by side.
fn prefetch(rows: &[&[f32]]) {
    #[cfg(target_arch = "x86_64")]
    for row in rows {
        // 16 floats: one cache line.
        for line in (0..row.len()).step_by(16) {
            // SAFETY: the address lies inside `row`; a prefetch only hints, it never faults and
            // changes no memory.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(row.as_ptr().add(line).cast())
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = rows;
}

/// Blocks whose dot products are computed side by side: each block's lanes add up in one
/// dependency chain (dimension after dimension), so several blocks at once keep the vector unit
/// busy while each chain waits on its previous addition.
pub(super) const GROUP: usize = 4;

/// The `LANES` dot products of each of `GROUP` blocks, with the widest vector unit the CPU has.
/// Every variant runs the same multiplications and additions in the same order (separately
/// rounded: no fused multiply-add), so all give bit-identical sums; the wide ones only hold more
/// lanes per register.
fn block_dots(columns: [&[Column]; GROUP], query: &[f32]) -> [[f32; LANES]; GROUP] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { block_dots_avx512(columns, query) };
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX (checked just above).
            return unsafe { block_dots_avx(columns, query) };
        }
    }
    block_dots_portable(columns, query)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_dots_avx512(columns: [&[Column]; GROUP], query: &[f32]) -> [[f32; LANES]; GROUP] {
    block_dots_portable(columns, query)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn block_dots_avx(columns: [&[Column]; GROUP], query: &[f32]) -> [[f32; LANES]; GROUP] {
    block_dots_portable(columns, query)
}

/// Plain index loops over slices cut to one length up front (no bounds check is left in the
/// loop): written with iterator adapters (`array::map`, nested `zip`s), the kernel's machine code
/// depends on inlining choices made elsewhere in the crate, so an unrelated change can make it
/// several times slower; index loops compile to the same small kernel whatever the crate holds.
#[inline(always)]
fn block_dots_portable(columns: [&[Column]; GROUP], query: &[f32]) -> [[f32; LANES]; GROUP] {
    // -0.0 is the start of `Iterator::sum` for floats: the sign of an all-zero sum matches too.
    let mut sums = [[-0.0f32; LANES]; GROUP];
    let [a, b, c, d] = columns;
    let len = query.len().min(a.len()).min(b.len()).min(c.len()).min(d.len());
    let (query, a, b, c, d) = (&query[..len], &a[..len], &b[..len], &c[..len], &d[..len]);
    for dimension in 0..len {
        let q = query[dimension];
        let (a, b, c, d) = (&a[dimension].0, &b[dimension].0, &c[dimension].0, &d[dimension].0);
        for lane in 0..LANES {
            sums[0][lane] += q * a[lane];
            sums[1][lane] += q * b[lane];
            sums[2][lane] += q * c[lane];
            sums[3][lane] += q * d[lane];
        }
    }
    sums
}

/// Keeps the best `k` of (score, number) pairs, by descending score (`f32::total_cmp`) then
/// ascending number (= ascending id): a partial selection, then a sort of the `k` kept. Both run
/// on one `u64` per pair whose integer order is that order (`rank_key`): a comparison is one
/// instruction and a pair half the bytes.
pub(super) fn top_k(scored: &mut Vec<(f32, usize)>, k: usize) {
    let keys: Option<Vec<u64>> = scored.iter().map(|&(score, number)| rank_key(score, number)).collect();
    let Some(mut keys) = keys else {
        // A number beyond `u32` (never, for a tenant's level): compare the pairs themselves.
        keep_first_sorted_by(scored, k, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        return;
    };
    keep_first_sorted_by(&mut keys, k, u64::cmp);
    scored.clear();
    scored.extend(keys.into_iter().map(from_rank_key));
}

/// The best `k` of (score, number) pairs offered one at a time, ordered like `top_k`, without
/// keeping them all: their keys (`rank_key`) are gathered in a buffer of `KEPT_PER_RESULT × k`;
/// when it fills, it is cut to the best `k`, and from then on a key after the last of them cannot
/// be among the best (keys are distinct: each holds its number), nor can a lower score than that
/// key's (`floor_score`, which a caller may read to skip work).
pub(super) struct BestK {
    k: usize,
    capacity: usize,
    keys: Vec<u64>,
    floor: u64,
    floor_score: f32,
    /// Pairs whose number does not fit a key (never, for a tenant's level): kept as they are.
    wide: Vec<(f32, usize)>,
}

impl BestK {
    pub(super) fn new(k: usize) -> Self {
        Self::with_floor(k, f32::NEG_INFINITY)
    }

    /// `floor_score`: a score known to be at most the `k`-th best of all that will be offered;
    /// lower scores are not kept.
    pub(super) fn with_floor(k: usize, floor_score: f32) -> Self {
        const KEPT_PER_RESULT: usize = 4;
        let capacity = k.saturating_mul(KEPT_PER_RESULT).max(64);
        Self { k, capacity, keys: Vec::new(), floor: u64::MAX, floor_score, wide: Vec::new() }
    }

    /// A lower score (`<`, so never NaN) than this is not among the best.
    pub(super) fn floor_score(&self) -> f32 {
        self.floor_score
    }

    #[inline]
    pub(super) fn offer(&mut self, score: f32, number: usize) {
        if score < self.floor_score {
            return;
        }
        let Some(key) = rank_key(score, number) else {
            self.wide.push((score, number));
            return;
        };
        if key < self.floor {
            self.keys.push(key);
            if self.keys.len() >= self.capacity && self.keys.len() > self.k {
                keep_first_sorted_by(&mut self.keys, self.k, u64::cmp);
                if let Some(&last) = self.keys.last() {
                    self.floor = last;
                    self.floor_score = self.floor_score.max(from_rank_key(last).0);
                }
            }
        }
    }

    pub(super) fn into_best(mut self) -> Vec<(f32, usize)> {
        if self.wide.is_empty() {
            keep_first_sorted_by(&mut self.keys, self.k, u64::cmp);
            return self.keys.into_iter().map(from_rank_key).collect();
        }
        let mut pairs: Vec<(f32, usize)> = self.keys.into_iter().map(from_rank_key).chain(self.wide).collect();
        top_k(&mut pairs, self.k);
        pairs
    }
}

/// `top_k` of the records whose score (`scores[number]`) `keep` accepts, without making the pairs
/// first, in two passes over the scores:
/// - the best kept score of each block of `BLOCK` records: the `k`-th best of these maxima is
///   distinct records' scores, so at most the `k`-th best score; a record scoring below it, and a
///   block whose best does, cannot be among the best;
/// - the other records are offered to a `BestK` from that floor.
pub(super) fn top_k_of(scores: &[f32], k: usize, keep: impl Fn(f32) -> bool) -> Vec<(f32, usize)> {
    const BLOCK: usize = 64;
    // Each block's best kept score (NEG_INFINITY: none kept), unless a NaN is kept somewhere (it
    // has no place in `<`; then no block is skipped).
    let mut nan = false;
    let best_of_block: Vec<f32> = scores.chunks(BLOCK).map(|block| best_kept(block, &keep, &mut nan)).collect();
    let mut floor_score = f32::NEG_INFINITY;
    if !nan && k > 0 && k <= best_of_block.len() {
        let mut maxima = best_of_block.clone();
        maxima.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
        floor_score = maxima[k - 1];
    }
    let mut best = BestK::with_floor(k, floor_score);
    for (block, (first, block_best)) in scores.chunks(BLOCK).zip((0..).step_by(BLOCK).zip(&best_of_block)) {
        if !nan && *block_best < best.floor_score() {
            continue;
        }
        for (score, number) in block.iter().copied().zip(first..) {
            if keep(score) {
                best.offer(score, number);
            }
        }
    }
    best.into_best()
}

/// The best score of `block` that `keep` accepts (NEG_INFINITY: none), and whether a NaN is
/// kept there (into `nan`). Eight running maxima side by side, merged at the end: a single one
/// is a chain of dependent comparisons the compiler may not reorder (floats), eight fill a vector
/// register. A NaN never wins `>`, so it is only noted.
#[inline]
fn best_kept(block: &[f32], keep: &impl Fn(f32) -> bool, nan: &mut bool) -> f32 {
    const WIDTH: usize = 8;
    let mut best = [f32::NEG_INFINITY; WIDTH];
    let mut nans = [false; WIDTH];
    let mut step = |lane: usize, score: f32| {
        let kept = keep(score);
        nans[lane] |= kept & score.is_nan();
        let candidate = if kept { score } else { f32::NEG_INFINITY };
        best[lane] = if candidate > best[lane] { candidate } else { best[lane] };
    };
    let chunks = block.chunks_exact(WIDTH);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &score) in chunk.iter().enumerate() {
            step(lane, score);
        }
    }
    for (lane, &score) in rest.iter().enumerate() {
        step(lane, score);
    }
    *nan |= nans.contains(&true);
    best.into_iter().fold(f32::NEG_INFINITY, |best, score| if score > best { score } else { best })
}

/// A (score, number) pair as a `u64` whose ascending order is descending `score.total_cmp`, then
/// ascending number; `None` when the number does not fit in 32 bits.
fn rank_key(score: f32, number: usize) -> Option<u64> {
    let number = u32::try_from(number).ok()?;
    // `total_cmp` order as unsigned order: negative floats reversed, positive ones above them.
    let bits = score.to_bits();
    let ascending = if bits & 0x8000_0000 != 0 { !bits } else { bits | 0x8000_0000 };
    Some((u64::from(!ascending) << 32) | u64::from(number))
}

/// The pair `rank_key` made its key from (the score's bits exactly).
fn from_rank_key(key: u64) -> (f32, usize) {
    let ascending = !((key >> 32) as u32);
    let bits = if ascending & 0x8000_0000 != 0 { ascending & 0x7FFF_FFFF } else { !ascending };
    (f32::from_bits(bits), (key & 0xFFFF_FFFF) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_gathered_for_a_small_level_hold_about_their_size_not_a_segment() {
        let dimension = 384;
        let mut rows = BlockRows::default();
        for row in 0..5 {
            rows.push(&vec![row as f32; dimension]);
        }
        // Five rows take one block of `LANES` rows; a segment would be `SEGMENT_BLOCKS` blocks.
        assert!(rows.segments[0].capacity() <= 2 * dimension, "{}", rows.segments[0].capacity());
        for row in 5..SEGMENT_ROWS + 3 {
            rows.push(&vec![row as f32; dimension]);
        }
        assert_eq!(rows.segments[1].capacity(), SEGMENT_BLOCKS * dimension, "a big level's later segments");
        assert_eq!(rows.row(SEGMENT_ROWS + 1), vec![(SEGMENT_ROWS + 1) as f32; dimension]);
        assert_eq!(rows.row(4), vec![4.0; dimension]);
    }

    #[test]
    fn top_k_keeps_the_pairs_the_comparison_keeps_in_its_order() {
        let order = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let specials = [0.0, -0.0, 1.0, -1.0, 0.5, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, f32::MAX, f32::MIN];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..200 {
            let len = (next() % 300) as usize;
            let pairs: Vec<(f32, usize)> = (0..len)
                .map(|number| {
                    let score = match next() % 4 {
                        0 => specials[(next() % specials.len() as u64) as usize],
                        // Few distinct values, so that ties are common.
                        1 => (next() % 5) as f32 / 4.0,
                        _ => f32::from_bits(next() as u32),
                    };
                    (score, number * 3 + round % 3)
                })
                .collect();
            for k in [0, 1, 7, 100, 400] {
                let mut expected = pairs.clone();
                expected.sort_unstable_by(order);
                expected.truncate(k);
                let mut got = pairs.clone();
                top_k(&mut got, k);
                let bits = |list: &[(f32, usize)]| list.iter().map(|(s, n)| (s.to_bits(), *n)).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&expected), "round {round}, k {k}");
            }
        }
    }

    #[test]
    fn top_k_of_a_long_list_equals_a_full_sort() {
        // Long enough for the kept buffer to be cut many times; few distinct scores, so ties at
        // its floor are common; some scores refused by `keep`.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let scores: Vec<f32> = (0..20_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 1000) as f32 / 100.0 - 1.0
            })
            .collect();
        let bits = |list: &[(f32, usize)]| list.iter().map(|(s, n)| (s.to_bits(), *n)).collect::<Vec<_>>();
        // The same with specials kept: NaN (no block is skipped then), infinities, signed zeros.
        let mut specials = scores.clone();
        for (at, value) in [(17, f32::NAN), (4_000, f32::INFINITY), (9_999, -0.0), (15_000, f32::NEG_INFINITY)] {
            specials[at] = value;
        }
        for k in [0, 1, 10, 100, 5_000, 30_000] {
            for (scores, keep_all) in [(&scores, false), (&scores, true), (&specials, true), (&specials, false)] {
                let keep = |score: f32| keep_all || score > 0.0;
                let mut expected: Vec<(f32, usize)> =
                    scores.iter().copied().zip(0..).filter(|&(score, _)| keep(score)).collect();
                expected.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                expected.truncate(k);
                assert_eq!(bits(&top_k_of(scores, k, keep)), bits(&expected), "k {k}, all {keep_all}");
            }
        }
    }

    #[test]
    fn row_dots_equal_the_matrix_scan_bit_for_bit() {
        let dimension = 37;
        let rows: Vec<Vec<f32>> =
            (0..150).map(|r| (0..dimension).map(|d| ((r * 31 + d * 17) % 101) as f32 / 7.0 - 6.5).collect()).collect();
        let query: Vec<f32> = (0..dimension).map(|d| (d as f32).sin()).collect();
        let slices: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
        let matrix = VectorBlocks::build(&slices, dimension);
        let mut scanned = Vec::new();
        matrix.for_each_block_dots(rows.len(), &query, |_, dots| scanned.extend_from_slice(dots));
        // Any rows, in any order and number (short groups and blocks included; more than the
        // groups asked for ahead at once).
        let many: Vec<usize> = (0..500).map(|i| i * 7 % 150).collect();
        for picked in [vec![5], (0..150).rev().collect::<Vec<usize>>(), vec![149, 0, 77, 77, 3], many] {
            let chosen: Vec<&[f32]> = picked.iter().map(|&r| slices[r]).collect();
            let dots = row_dots(&chosen, &query);
            let expected: Vec<u32> = picked.iter().map(|&r| scanned[r].to_bits()).collect();
            assert_eq!(dots.iter().map(|d| d.to_bits()).collect::<Vec<_>>(), expected);
        }
    }
}
