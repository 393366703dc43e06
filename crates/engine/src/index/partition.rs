//! Approximate tenant-wide dense ranking for big levels: an inverted-file partition (IVF-Flat).
//!
//! A level's vectors are grouped around `lists` centroids (spherical k-means on a sample, every
//! vector then assigned to its nearest centroid), and each record's unit vector is kept in 8 bits
//! in its list. A ranking scores the query against the centroids, scans the 8-bit rows of the
//! best lists, and computes the exact cosine of the best candidates: every score it returns is
//! the exact one, so the approximation is only in which records are found (recall), never in a
//! score. A level of `n` records has about √n lists; probing one in `PROBE_SHARE` scans
//! ~1/`PROBE_SHARE` of it.
//!
//! The partition is built off the request path, on a background thread, the first time a
//! tenant-wide ranking of a big enough level asks for it; rankings stay exact until it is ready.

use super::vectors::{top_k, VectorBlocks};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Levels with fewer records are always scanned exactly (the service's default of
/// `RETR_APPROXIMATE_MIN_RECORDS`): below this, a full scan reads under 30 MB.
pub const DEFAULT_MIN_RECORDS: usize = 20_000;

/// One list in `PROBE_SHARE` is scanned (at least `MIN_PROBE`).
pub(super) const PROBE_SHARE: usize = 2;
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
    /// Row `r` is `codes[r * dimension..][..dimension]`: the record's unit vector × 127 / its
    /// largest component, rounded.
    codes: Vec<i8>,
    /// Row → the factor that turns its codes back into the unit vector.
    scales: Vec<f32>,
}

impl Partition {
    /// Partitions the rows of `vectors`, one per norm of `norms`.
    pub(super) fn build(vectors: &VectorBlocks, norms: &[f32]) -> Self {
        let len = norms.len();
        let dimension = vectors.dimension();
        let lists = ((len as f64).sqrt().round() as usize).clamp(1, len.max(1));
        let unit = |number: usize| {
            let mut row = vectors.row(number);
            let norm = norms[number];
            if norm > 0.0 {
                row.iter_mut().for_each(|v| *v /= norm);
            }
            row
        };
        // A sample spread evenly over the level (records are in id order, so over its pages).
        let sample_size = (lists * SAMPLE_PER_LIST).min(len);
        let sample: Vec<Vec<f32>> = (0..sample_size).map(|i| unit(i * len / sample_size)).collect();
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
        let assigned = assign_all(&centroids, lists, len, dimension, &unit);
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
        // The codes in list order.
        let mut codes = Vec::with_capacity(len * dimension);
        let mut scales = Vec::with_capacity(len);
        for &number in &numbers {
            let number = number as usize;
            codes.extend_from_slice(&assigned.codes[number * dimension..][..dimension]);
            scales.push(assigned.scales[number]);
        }
        Self { centroids, lists, dimension, starts, numbers, codes, scales }
    }

    /// The best `k` records by cosine among the lists nearest the query, as (score, number)
    /// pairs ordered like `top_k`, each with its exact score: `exact(numbers)` (ascending numbers)
    /// gives the exact (score, number) pairs of the candidates the 8-bit scan kept.
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
        exact: impl Fn(&[usize]) -> Vec<(f32, usize)>,
    ) -> Vec<(f32, usize)> {
        let wanted = (self.lists as f64 / PROBE_SHARE as f64 / share.clamp(1e-6, 1.0)).ceil() as usize;
        let probe = wanted.max(MIN_PROBE).min(self.lists);
        let centroid_dots = all_dots(&self.centroids, self.lists, query);
        let mut order: Vec<usize> = (0..self.lists).collect();
        order.sort_unstable_by(|&a, &b| centroid_dots[b].total_cmp(&centroid_dots[a]).then(a.cmp(&b)));
        let norm = query.iter().map(|v| v * v).sum::<f32>().sqrt();
        let unit: Vec<f32> = query.iter().map(|v| if norm > 0.0 { v / norm } else { 0.0 }).collect();
        let (query_codes, _) = quantize(&unit);
        let mut approximate: Vec<(f32, usize)> = Vec::new();
        for &list in &order[..probe] {
            for row in self.starts[list] as usize..self.starts[list + 1] as usize {
                let number = self.numbers[row] as usize;
                if keep(number) {
                    let codes = &self.codes[row * self.dimension..][..self.dimension];
                    approximate.push((dot_i8(codes, &query_codes) as f32 * self.scales[row], number));
                }
            }
        }
        top_k(&mut approximate, k.saturating_mul(RESCORED_PER_RESULT).max(MIN_RESCORED));
        let mut candidates: Vec<usize> = approximate.into_iter().map(|(_, number)| number).collect();
        candidates.sort_unstable();
        let mut scored = exact(&candidates);
        top_k(&mut scored, k);
        scored
    }

    /// Bytes the partition adds to its level.
    pub(super) fn bytes(&self) -> usize {
        self.codes.len() + self.scales.len() * 4 + self.numbers.len() * 4 + self.lists * self.dimension * 4
    }
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

/// The dot product of two rows of codes, with the widest integer vector unit the CPU has.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW (checked just above).
            return unsafe { dot_i8_avx512(a, b) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { dot_i8_avx2(a, b) };
        }
    }
    dot_i8_portable(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
unsafe fn dot_i8_avx512(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_portable(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    dot_i8_portable(a, b)
}

#[inline(always)]
fn dot_i8_portable(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
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

/// Each record's nearest centroid and 8-bit codes, by record number.
struct Assigned {
    lists: Vec<u32>,
    /// Record `n`'s codes are `codes[n * dimension..][..dimension]`.
    codes: Vec<i8>,
    scales: Vec<f32>,
}

/// `Assigned` for the `len` records whose unit vectors `unit` gives (each read once: a row is
/// gathered from across its block), computed on the machine's cores.
fn assign_all(
    centroids: &VectorBlocks,
    lists: usize,
    len: usize,
    dimension: usize,
    unit: &(impl Fn(usize) -> Vec<f32> + Sync),
) -> Assigned {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let share = len.div_ceil(workers).max(1);
    let mut assigned = Assigned { lists: vec![0; len], codes: vec![0; len * dimension], scales: vec![0.0; len] };
    std::thread::scope(|scope| {
        let parts = assigned
            .lists
            .chunks_mut(share)
            .zip(assigned.codes.chunks_mut(share * dimension.max(1)))
            .zip(assigned.scales.chunks_mut(share));
        for (part, ((lists_out, codes_out), scales_out)) in parts.enumerate() {
            scope.spawn(move || {
                for (offset, (list, scale)) in lists_out.iter_mut().zip(scales_out.iter_mut()).enumerate() {
                    let row = unit(part * share + offset);
                    *list = nearest_list(centroids, lists, &row) as u32;
                    let (codes, row_scale) = quantize(&row);
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

    fn cosine(dot: f32, query_norm: f32, norm: f32) -> f32 {
        dot / (query_norm * norm)
    }

    #[test]
    fn probed_lists_find_the_exact_neighbours_with_their_exact_scores() {
        let dimension = 48;
        let rows = clustered(6_000, dimension, 0x9E37_79B9_7F4A_7C15);
        let blocks = blocks_of(&rows, dimension);
        let norms: Vec<f32> = rows.iter().map(|row| row.iter().map(|v| v * v).sum::<f32>().sqrt()).collect();
        let partition = Partition::build(&blocks, &norms);
        assert_eq!(partition.lists, 77);
        // Every record is in exactly one list.
        let mut seen: Vec<u32> = partition.numbers.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..rows.len() as u32).collect::<Vec<_>>());
        // A byte per dimension per record, about: a quarter of the exact matrix.
        assert!(partition.bytes() <= rows.len() * (dimension + 8) + partition.lists * dimension * 4);

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
            let exact_of = |numbers: &[usize]| -> Vec<(f32, usize)> {
                assert!(numbers.is_sorted());
                numbers.iter().map(|&n| (cosine(exact_dots[n], query_norm, norms[n]), n)).collect()
            };
            let approximate = partition.top_k(query, 10, 1.0, |_| true, exact_of);
            for &(score, number) in &approximate {
                // A scored record has its exact score, bit for bit.
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
        assert_eq!(dot_i8(&[1, -2, 3], &[4, 5, -6]), 4 - 10 - 18);
        let long: Vec<i8> = (0..384).map(|i| (i % 255 - 127) as i8).collect();
        assert_eq!(dot_i8(&long, &long), dot_i8_portable(&long, &long));

        let dimension = 24;
        let rows = clustered(2_000, dimension, 11);
        let blocks = blocks_of(&rows, dimension);
        let norms = vec![1.0; rows.len()];
        let partition = Partition::build(&blocks, &norms);
        let query = &rows[5];
        let exact_of = |numbers: &[usize]| -> Vec<(f32, usize)> {
            numbers.iter().map(|&n| (rows[n].iter().zip(query).map(|(a, b)| a * b).sum(), n)).collect()
        };
        let even = partition.top_k(query, 20, 0.5, |number| number % 2 == 0, exact_of);
        assert_eq!(even.len(), 20);
        assert!(even.iter().all(|&(_, number)| number % 2 == 0));
        let all = partition.top_k(query, 20, 1.0, |_| true, exact_of);
        assert_eq!(all[0].1, 5, "a record is its own nearest neighbour");
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
