//! Approximate tenant-wide dense ranking for big levels: an inverted-file partition (IVF-Flat).
//!
//! A level's vectors are grouped around `lists` centroids (spherical k-means on a sample, every
//! vector then assigned to its nearest centroid), and each record's unit vector is kept in 8 bits
//! in its list. A ranking scores the query against the centroids, scans the 8-bit rows of the
//! best lists, and computes the exact cosine of the best candidates: every score it returns is
//! the exact one, so the approximation is only in which records are found (recall), never in a
//! score. A level of `n` records has about √n lists. A ranking probes the lists whose centroid
//! is within `PROBE_MARGIN` (cosine) of the query's nearest centroid, at least one list in
//! `MIN_PROBE_SHARE` and at most one in `PROBE_SHARE`: on clustered vectors the nearest lists
//! stand out and a sixteenth of the level is read; on diffuse ones (e5 embeddings of one small
//! site: the centroids lie within a few hundredths of each other) half of it is.
//!
//! The partition is built off the request path, on a background thread, the first time a
//! tenant-wide ranking of a big enough level asks for it; rankings stay exact until it is ready.

use super::vectors::{norm, row_dots, top_k, BestK, VectorBlocks};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Levels with fewer records are always scanned exactly (the service's default of
/// `RETR_APPROXIMATE_MIN_RECORDS`): below this, a full scan reads under 30 MB.
pub const DEFAULT_MIN_RECORDS: usize = 20_000;

/// At most one list in `PROBE_SHARE` is scanned, at least one in `MIN_PROBE_SHARE` (and at least
/// `MIN_PROBE`); in between, the lists whose centroid's cosine with the query is within
/// `PROBE_MARGIN` of the best centroid's.
pub(super) const PROBE_SHARE: usize = 2;
const MIN_PROBE_SHARE: usize = 16;
const PROBE_MARGIN: f32 = 0.1;
const MIN_PROBE: usize = 4;
/// k-means on a sample of `SAMPLE_PER_LIST` vectors per list, `ITERATIONS` rounds.
const SAMPLE_PER_LIST: usize = 32;
/// The 8-bit scan keeps this many candidates per result wanted (at least `MIN_RESCORED`) for
/// the exact re-scoring.
const RESCORED_PER_RESULT: usize = 2;
const MIN_RESCORED: usize = 64;
const ITERATIONS: usize = 6;

/// A level's partition: centroids, and the records' directions (unit vectors) quantized to 8 bits
/// and regrouped by list. A ranking scans the probed lists' 8-bit rows (a quarter of the bytes of
/// the exact scan's), keeps the best `RESCORED_PER_RESULT × k` and computes their exact cosine.
#[derive(Debug)]
pub(super) struct Partition {
    centroids: VectorBlocks,
    lists: usize,
    dimension: usize,
    /// List `l` holds the rows `starts[l]..starts[l + 1]`.
    starts: Vec<u32>,
    /// Row → record number.
    numbers: Vec<u32>,
    /// Record number → row.
    row_of: Vec<u32>,
    /// Row `r` is `codes[r * dimension..][..dimension]`: the record's unit vector × 127 / its
    /// largest component, rounded, plus 128 (an unsigned byte: see `scan_dots`).
    codes: Vec<u8>,
    /// Row → the factor that turns its codes back into the unit vector.
    scales: Vec<f32>,
    /// Record `n`'s vector as the level holds it, `vectors[n * dimension..][..dimension]`: the
    /// candidates' exact dot products read these (a few KB) instead of the scan matrix's blocks,
    /// where one row is spread over 16 rows' bytes.
    vectors: Vec<f32>,
}

impl Partition {
    /// Partitions the rows of `vectors`, one per norm of `norms`.
    pub(super) fn build(vectors: &VectorBlocks, norms: &[f32]) -> Self {
        let len = norms.len();
        let dimension = vectors.dimension();
        let lists = ((len as f64).sqrt().round() as usize).clamp(1, len.max(1));
        // A sample spread evenly over the level (records are in id order, so over its pages).
        let sample_size = (lists * SAMPLE_PER_LIST).min(len);
        let sample: Vec<Vec<f32>> = (0..sample_size)
            .map(|i| {
                let number = i * len / sample_size;
                unit_of(vectors.row(number), norms[number])
            })
            .collect();
        let mut centroid_rows: Vec<Vec<f32>> = (0..lists).map(|l| sample[l * sample_size / lists].clone()).collect();
        for _ in 0..ITERATIONS {
            let centroids = blocks_of(&centroid_rows, dimension);
            let nearest: Vec<usize> = sample.iter().map(|row| nearest_list(&centroids, lists, row)).collect();
            let mut sums = vec![vec![0.0f32; dimension]; lists];
            for (row, &list) in sample.iter().zip(&nearest) {
                sums[list].iter_mut().zip(row).for_each(|(sum, v)| *sum += v);
            }
            for (centroid, sum) in centroid_rows.iter_mut().zip(sums) {
                let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt();
                // An empty list keeps its centroid.
                if norm > 0.0 {
                    *centroid = sum.into_iter().map(|v| v / norm).collect();
                }
            }
        }
        let centroids = blocks_of(&centroid_rows, dimension);
        let assigned = assign_all(&centroids, lists, vectors, norms);
        let mut members_of: Vec<Vec<u32>> = vec![Vec::new(); lists];
        for (number, &list) in assigned.lists.iter().enumerate() {
            members_of[list as usize].push(number as u32);
        }
        let mut starts = Vec::with_capacity(lists + 1);
        let mut numbers = Vec::with_capacity(len);
        starts.push(0u32);
        for members in &members_of {
            numbers.extend_from_slice(members);
            starts.push(numbers.len() as u32);
        }
        // The codes in list order (the vectors stay in number order: re-scoring reads them one by one).
        let mut codes = Vec::with_capacity(len * dimension);
        let mut scales = Vec::with_capacity(len);
        let mut row_of = vec![0u32; len];
        for (row, &number) in numbers.iter().enumerate() {
            let number = number as usize;
            codes.extend(assigned.codes[number * dimension..][..dimension].iter().map(|&code| offset(code)));
            scales.push(assigned.scales[number]);
            row_of[number] = row as u32;
        }
        Self { centroids, lists, dimension, starts, numbers, row_of, codes, scales, vectors: assigned.vectors }
    }

    /// The best `k` records by cosine among the lists nearest the query, as (score, number)
    /// pairs ordered like `top_k`, each with its exact score: `cosine(dot, number)` turns the
    /// exact dot product of the query with a candidate the 8-bit scan kept into its score.
    ///
    /// `share` is the part of the level a filter lets through (1.0: all) and `keep` says which
    /// records: the lists probed grow as the share shrinks, so about as many kept records are
    /// scored as an unfiltered ranking scores.
    pub(super) fn top_k(
        &self,
        query: &[f32],
        k: usize,
        share: f64,
        keep: impl Fn(usize) -> bool,
        cosine: impl Fn(f32, usize) -> f32,
    ) -> Vec<(f32, usize)> {
        let lists_for = |one_in: usize| {
            let wanted = (self.lists as f64 / one_in as f64 / share.clamp(1e-6, 1.0)).ceil() as usize;
            wanted.max(MIN_PROBE).min(self.lists)
        };
        let centroid_dots = all_dots(&self.centroids, self.lists, query);
        let mut order: Vec<usize> = (0..self.lists).collect();
        order.sort_unstable_by(|&a, &b| centroid_dots[b].total_cmp(&centroid_dots[a]).then(a.cmp(&b)));
        let norm = norm(query);
        // The centroids are unit vectors: a dot over the query's norm is the cosine.
        let best = order.first().map_or(0.0, |&list| centroid_dots[list]);
        let near = order.iter().take_while(|&&list| centroid_dots[list] >= best - PROBE_MARGIN * norm).count();
        let probe = near.clamp(lists_for(MIN_PROBE_SHARE), lists_for(PROBE_SHARE));
        let query_codes = query_codes(query, norm);
        let mut best = BestK::new(rescored(k));
        let mut dots = Vec::new();
        for &list in &order[..probe] {
            let rows = self.starts[list] as usize..self.starts[list + 1] as usize;
            let codes = &self.codes[rows.start * self.dimension..rows.end * self.dimension];
            scan_dots(codes.chunks_exact(self.dimension), &query_codes, &mut dots);
            for (row, &dot) in rows.zip(&dots) {
                if keep(self.numbers[row] as usize) {
                    best.offer(dot as f32 * self.scales[row], row);
                }
            }
        }
        self.rescore(best, query, k, cosine)
    }

    /// The best `k` of the records `numbers` (a narrow filter's: no list is skipped), as `top_k`
    /// gives them: every one's 8-bit row is scanned, the best `RESCORED_PER_RESULT × k` get their
    /// exact score.
    pub(super) fn top_k_among(
        &self,
        query: &[f32],
        k: usize,
        numbers: &[usize],
        cosine: impl Fn(f32, usize) -> f32,
    ) -> Vec<(f32, usize)> {
        let query_codes = query_codes(query, norm(query));
        let rows: Vec<usize> = numbers.iter().map(|&number| self.row_of[number] as usize).collect();
        let mut dots = Vec::with_capacity(rows.len());
        scan_dots(
            rows.iter().map(|&row| &self.codes[row * self.dimension..][..self.dimension]),
            &query_codes,
            &mut dots,
        );
        let mut best = BestK::new(rescored(k));
        for (&row, &dot) in rows.iter().zip(&dots) {
            best.offer(dot as f32 * self.scales[row], row);
        }
        self.rescore(best, query, k, cosine)
    }

    /// The exact scores of the candidates (rows of the scan), best `k` first.
    fn rescore(&self, best: BestK, query: &[f32], k: usize, cosine: impl Fn(f32, usize) -> f32) -> Vec<(f32, usize)> {
        let numbers: Vec<usize> = best.into_best().into_iter().map(|(_, row)| self.numbers[row] as usize).collect();
        let vectors: Vec<&[f32]> =
            numbers.iter().map(|&number| &self.vectors[number * self.dimension..][..self.dimension]).collect();
        let mut scored: Vec<(f32, usize)> = row_dots(&vectors, query)
            .into_iter()
            .zip(numbers)
            .map(|(dot, number)| (cosine(dot, number), number))
            .collect();
        top_k(&mut scored, k);
        scored
    }

    /// Bytes the partition adds to its level.
    pub(super) fn bytes(&self) -> usize {
        self.codes.len()
            + self.scales.len() * 4
            + self.numbers.len() * 8
            + self.vectors.len() * 4
            + self.lists * self.dimension * 4
    }
}

/// How many candidates of the 8-bit scan get their exact score for the best `k`.
fn rescored(k: usize) -> usize {
    k.saturating_mul(RESCORED_PER_RESULT).max(MIN_RESCORED)
}

/// The query's unit vector (zero when its norm `norm` is not positive) as 8-bit codes.
fn query_codes(query: &[f32], norm: f32) -> Vec<i8> {
    let unit: Vec<f32> = query.iter().map(|v| if norm > 0.0 { v / norm } else { 0.0 }).collect();
    quantize(&unit).0
}

/// `row` over its norm `norm` (unchanged when that is not positive).
fn unit_of(mut row: Vec<f32>, norm: f32) -> Vec<f32> {
    if norm > 0.0 {
        row.iter_mut().for_each(|v| *v /= norm);
    }
    row
}

/// A unit vector as 8-bit codes (its largest component → ±127) and the factor back.
fn quantize(unit: &[f32]) -> (Vec<i8>, f32) {
    let largest = unit.iter().fold(0.0f32, |largest, v| largest.max(v.abs()));
    if largest == 0.0 || !largest.is_finite() {
        return (vec![0; unit.len()], 0.0);
    }
    let factor = 127.0 / largest;
    (unit.iter().map(|v| (v * factor).round().clamp(-127.0, 127.0) as i8).collect(), largest / 127.0)
}

/// A signed code as the unsigned byte the partition stores: `code + 128`.
fn offset(code: i8) -> u8 {
    (code as u8) ^ 0x80
}

/// The dot product of the query's codes with each row of `codes` (stored `offset`, `query.len()`
/// bytes per row), written over `dots`, with the widest integer vector unit the CPU has. The rows
/// are unsigned so that one instruction multiplies and adds 64 byte pairs (AVX-512 VNNI takes an
/// unsigned and a signed operand): Σ (code + 128) · q − 128 · Σ q is the signed dot product.
fn scan_dots<'a>(rows: impl Iterator<Item = &'a [u8]>, query: &[i8], dots: &mut Vec<i32>) {
    dots.clear();
    if query.is_empty() {
        return;
    }
    let bias = 128 * query.iter().map(|&q| i32::from(q)).sum::<i32>();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
        {
            // SAFETY: the CPU has AVX-512F, BW and VNNI (checked just above).
            unsafe { scan_dots_vnni(rows, query, bias, dots) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { scan_dots_avx2(rows, query, bias, dots) };
            return;
        }
    }
    scan_dots_portable(rows, query, bias, dots);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn scan_dots_vnni<'a>(rows: impl Iterator<Item = &'a [u8]>, query: &[i8], bias: i32, dots: &mut Vec<i32>) {
    use std::arch::x86_64::{_mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_reduce_add_epi32, _mm512_setzero_si512};
    let dimension = query.len();
    let wide = dimension / 64 * 64;
    for row in rows {
        let row = &row[..dimension];
        let mut sums = _mm512_setzero_si512();
        for at in (0..wide).step_by(64) {
            // SAFETY: `at + 64 <= wide <= dimension`, the length of both `row` and `query`;
            // unaligned loads.
            let (codes, query) = unsafe {
                (_mm512_loadu_si512(row.as_ptr().add(at).cast()), _mm512_loadu_si512(query.as_ptr().add(at).cast()))
            };
            sums = _mm512_dpbusd_epi32(sums, codes, query);
        }
        let tail: i32 = row[wide..].iter().zip(&query[wide..]).map(|(&c, &q)| i32::from(c) * i32::from(q)).sum();
        dots.push(_mm512_reduce_add_epi32(sums) + tail - bias);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_dots_avx2<'a>(rows: impl Iterator<Item = &'a [u8]>, query: &[i8], bias: i32, dots: &mut Vec<i32>) {
    scan_dots_portable(rows, query, bias, dots);
}

#[inline(always)]
fn scan_dots_portable<'a>(rows: impl Iterator<Item = &'a [u8]>, query: &[i8], bias: i32, dots: &mut Vec<i32>) {
    dots.extend(rows.map(|row| row.iter().zip(query).map(|(&c, &q)| i32::from(c) * i32::from(q)).sum::<i32>() - bias));
}

fn blocks_of(rows: &[Vec<f32>], dimension: usize) -> VectorBlocks {
    let slices: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
    VectorBlocks::build(&slices, dimension)
}

/// The dot product of `query` with each of the `len` rows of `blocks`.
fn all_dots(blocks: &VectorBlocks, len: usize, query: &[f32]) -> Vec<f32> {
    let mut dots = Vec::with_capacity(len);
    blocks.for_each_block_dots(len, query, |_, block| dots.extend_from_slice(block));
    dots
}

fn nearest_list(centroids: &VectorBlocks, lists: usize, row: &[f32]) -> usize {
    let dots = all_dots(centroids, lists, row);
    (0..lists).max_by(|&a, &b| dots[a].total_cmp(&dots[b]).then(b.cmp(&a))).unwrap_or(0)
}

/// Each record's nearest centroid, 8-bit codes and vector, by record number.
struct Assigned {
    lists: Vec<u32>,
    /// Record `n`'s codes are `codes[n * dimension..][..dimension]`.
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Record `n`'s vector as the level holds it is `vectors[n * dimension..][..dimension]`.
    vectors: Vec<f32>,
}

/// `Assigned` for the records of `vectors` (one per norm of `norms`), each row read once (a row
/// is gathered from across its block), computed on the machine's cores.
fn assign_all(centroids: &VectorBlocks, lists: usize, vectors: &VectorBlocks, norms: &[f32]) -> Assigned {
    let (len, dimension) = (norms.len(), vectors.dimension());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let share = len.div_ceil(workers).max(1);
    let mut assigned = Assigned {
        lists: vec![0; len],
        codes: vec![0; len * dimension],
        scales: vec![0.0; len],
        vectors: vec![0.0; len * dimension],
    };
    std::thread::scope(|scope| {
        let rows = share * dimension.max(1);
        let parts = assigned
            .lists
            .chunks_mut(share)
            .zip(assigned.codes.chunks_mut(rows))
            .zip(assigned.scales.chunks_mut(share))
            .zip(assigned.vectors.chunks_mut(rows));
        for (part, (((lists_out, codes_out), scales_out), vectors_out)) in parts.enumerate() {
            scope.spawn(move || {
                for (offset, (list, scale)) in lists_out.iter_mut().zip(scales_out.iter_mut()).enumerate() {
                    let number = part * share + offset;
                    let row = vectors.row(number);
                    vectors_out[offset * dimension..][..dimension].copy_from_slice(&row);
                    let unit = unit_of(row, norms[number]);
                    *list = nearest_list(centroids, lists, &unit) as u32;
                    let (codes, row_scale) = quantize(&unit);
                    codes_out[offset * dimension..][..dimension].copy_from_slice(&codes);
                    *scale = row_scale;
                }
            });
        }
    });
    assigned
}

/// A level's partition as it is built on demand: absent, being built, or ready.
#[derive(Debug, Default)]
pub(super) struct LazyPartition {
    ready: Arc<OnceLock<Partition>>,
    started: AtomicBool,
}

/// One partition is built at a time, so several big levels loaded at once do not all compete
/// with the searches for the cores.
static BUILDS: Mutex<()> = Mutex::new(());

impl LazyPartition {
    /// The partition when it is ready; otherwise starts building it (once) from `vectors` and
    /// `norms` on a background thread and returns `None`.
    pub(super) fn get_or_start(&self, vectors: &Arc<VectorBlocks>, norms: &Arc<Vec<f32>>) -> Option<&Partition> {
        if let Some(partition) = self.ready.get() {
            return Some(partition);
        }
        if !self.started.swap(true, Ordering::AcqRel) {
            let ready = Arc::downgrade(&self.ready);
            let (vectors, norms) = (Arc::clone(vectors), Arc::clone(norms));
            let spawned = std::thread::Builder::new().name("partition-build".into()).spawn(move || {
                let _one_at_a_time = BUILDS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                // The level was dropped (a refresh replaced it) while this build waited: skip it.
                if ready.strong_count() == 0 {
                    return;
                }
                let started = std::time::Instant::now();
                let partition = Partition::build(&vectors, &norms);
                tracing::info!(
                    records = norms.len(),
                    lists = partition.lists,
                    bytes = partition.bytes(),
                    seconds = started.elapsed().as_secs_f64(),
                    "approximate index built"
                );
                if let Some(ready) = ready.upgrade() {
                    let _ = ready.set(partition);
                }
            });
            if spawned.is_err() {
                // No thread to build it: rankings stay exact, and a later one tries again.
                self.started.store(false, Ordering::Release);
            }
        }
        None
    }

    /// Waits until the partition is ready (tests and benchmarks), at most `timeout`.
    pub(super) fn wait(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while self.ready.get().is_none() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unit vectors around a few dozen topics, as embeddings of a documentation site cluster.
    fn clustered(count: usize, dimension: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let topics: Vec<Vec<f32>> = (0..40).map(|_| (0..dimension).map(|_| next()).collect()).collect();
        (0..count)
            .map(|n| {
                let row: Vec<f32> = topics[n % topics.len()].iter().map(|c| c + 0.5 * next()).collect();
                let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
                row.into_iter().map(|v| v / norm).collect()
            })
            .collect()
    }

    /// The rows as scan blocks, their norms, and the partition built over them.
    fn partition_of(rows: &[Vec<f32>], dimension: usize) -> (VectorBlocks, Vec<f32>, Partition) {
        let blocks = blocks_of(rows, dimension);
        let norms: Vec<f32> = rows.iter().map(|row| row.iter().map(|v| v * v).sum::<f32>().sqrt()).collect();
        let partition = Partition::build(&blocks, &norms);
        (blocks, norms, partition)
    }

    fn cosine(dot: f32, query_norm: f32, norm: f32) -> f32 {
        dot / (query_norm * norm)
    }

    #[test]
    fn probed_lists_find_the_exact_neighbours_with_their_exact_scores() {
        let dimension = 48;
        let rows = clustered(6_000, dimension, 0x9E37_79B9_7F4A_7C15);
        let (blocks, norms, partition) = partition_of(&rows, dimension);
        assert_eq!(partition.lists, 77);
        // Every record is in exactly one list.
        let mut seen: Vec<u32> = partition.numbers.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..rows.len() as u32).collect::<Vec<_>>());
        // A byte per dimension per record for the scan, plus each record's vector for re-scoring.
        assert!(partition.bytes() <= rows.len() * (5 * dimension + 12) + partition.lists * dimension * 4);

        let queries = clustered(200, dimension, 0xD1B5_4A32_D192_ED03);
        let (mut found, mut wanted) = (0, 0);
        for query in &queries {
            let query_norm = query.iter().map(|v| v * v).sum::<f32>().sqrt();
            let exact_dots = all_dots(&blocks, rows.len(), query);
            let mut exact: Vec<(f32, usize)> = exact_dots
                .iter()
                .enumerate()
                .map(|(number, &dot)| (cosine(dot, query_norm, norms[number]), number))
                .collect();
            top_k(&mut exact, 10);
            let exact_of = |dot: f32, n: usize| cosine(dot, query_norm, norms[n]);
            let approximate = partition.top_k(query, 10, 1.0, |_| true, exact_of);
            for &(score, number) in &approximate {
                // A scored record has its exact score, bit for bit: the dot product from the
                // partition's own copy of the row equals the matrix scan's.
                assert_eq!(score.to_bits(), cosine(exact_dots[number], query_norm, norms[number]).to_bits());
            }
            wanted += exact.len();
            found += exact.iter().filter(|pair| approximate.contains(pair)).count();
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.95, "recall@10 {recall}");
    }

    #[test]
    fn codes_keep_directions_and_filtered_rankings_keep_only_what_passes() {
        let (codes, scale) = quantize(&[0.6, -0.8, 0.0]);
        assert_eq!(codes, vec![95, -127, 0]);
        assert!((codes[1] as f32 * scale + 0.8).abs() < 1e-6);
        assert_eq!(quantize(&[0.0, 0.0]), (vec![0, 0], 0.0));
        // The scan's dot products are the signed ones, on every path, for any dimension.
        let signed = |a: &[i8], b: &[i8]| a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum::<i32>();
        for dimension in [3, 64, 100, 384] {
            let rows: Vec<i8> = (0..dimension * 5).map(|i| ((i * 37) % 255) as i8).collect();
            let query: Vec<i8> = (0..dimension).map(|i| (i as i32 % 255 - 127) as i8).collect();
            let stored: Vec<u8> = rows.iter().map(|&code| offset(code)).collect();
            let expected: Vec<i32> = rows.chunks(dimension).map(|row| signed(row, &query)).collect();
            let mut dots = vec![7];
            scan_dots(stored.chunks_exact(dimension), &query, &mut dots);
            assert_eq!(dots, expected, "dimension {dimension}");
            let mut portable = Vec::new();
            let bias = 128 * query.iter().map(|&q| i32::from(q)).sum::<i32>();
            scan_dots_portable(stored.chunks_exact(dimension), &query, bias, &mut portable);
            assert_eq!(portable, expected, "dimension {dimension}");
        }

        let dimension = 24;
        let rows = clustered(2_000, dimension, 11);
        let blocks = blocks_of(&rows, dimension);
        let norms = vec![1.0; rows.len()];
        let partition = Partition::build(&blocks, &norms);
        let query = &rows[5];
        let exact_of = |dot: f32, _: usize| dot;
        let even = partition.top_k(query, 20, 0.5, |number| number % 2 == 0, exact_of);
        assert_eq!(even.len(), 20);
        assert!(even.iter().all(|&(_, number)| number % 2 == 0));
        let all = partition.top_k(query, 20, 1.0, |_| true, exact_of);
        assert_eq!(all[0].1, 5, "a record is its own nearest neighbour");
    }

    #[test]
    fn a_narrow_filter_ranks_exactly_its_records_with_their_exact_scores() {
        let dimension = 32;
        let rows = clustered(3_000, dimension, 5);
        let (blocks, norms, partition) = partition_of(&rows, dimension);
        let numbers: Vec<usize> = (0..rows.len()).filter(|number| number % 7 == 3).collect();
        let (mut found, mut wanted) = (0, 0);
        for query in clustered(50, dimension, 99).iter() {
            let query_norm = query.iter().map(|v| v * v).sum::<f32>().sqrt();
            let dots = all_dots(&blocks, rows.len(), query);
            let exact_of = |dot: f32, n: usize| cosine(dot, query_norm, norms[n]);
            let mut exact: Vec<(f32, usize)> = numbers.iter().map(|&n| (exact_of(dots[n], n), n)).collect();
            top_k(&mut exact, 10);
            let got = partition.top_k_among(query, 10, &numbers, exact_of);
            assert_eq!(got.len(), 10);
            for &(score, number) in &got {
                assert_eq!(number % 7, 3, "only the filter's records");
                assert_eq!(score.to_bits(), exact_of(dots[number], number).to_bits());
            }
            wanted += exact.len();
            found += exact.iter().filter(|pair| got.contains(pair)).count();
        }
        assert!(found as f64 / wanted as f64 >= 0.99, "recall@10 {found}/{wanted}");
    }

    #[test]
    fn a_lazy_partition_is_built_once_in_the_background() {
        let dimension = 16;
        let rows = clustered(500, dimension, 7);
        let vectors = Arc::new(blocks_of(&rows, dimension));
        let norms = Arc::new(vec![1.0; rows.len()]);
        let lazy = LazyPartition::default();
        // Not ready at first ask: the caller scans exactly.
        assert!(lazy.get_or_start(&vectors, &norms).is_none() || lazy.ready.get().is_some());
        assert!(lazy.wait(std::time::Duration::from_secs(30)));
        let partition = lazy.get_or_start(&vectors, &norms).expect("built");
        assert_eq!(partition.lists, 22);
    }
}
