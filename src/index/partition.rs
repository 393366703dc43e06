//! Approximate tenant-wide dense ranking for big levels: an inverted-file partition (IVF-Flat).
//!
//! A level's vectors are grouped around `lists` centroids (spherical k-means on a sample, every
//! vector then assigned to its nearest centroid) and copied in list order. A ranking scores the
//! query against the centroids, then only the records of the `probe` best lists, with the same
//! block scan as the exact path: each record it scores gets exactly its exact cosine, so the
//! approximation is only in which records are scored (recall), never in a score. A level of `n`
//! records has about √n lists; probing one in `PROBE_SHARE` scans ~1/`PROBE_SHARE` of it.
//!
//! The partition is built off the request path, on a background thread, the first time a
//! tenant-wide ranking of a big enough level asks for it; rankings stay exact until it is ready.

use super::tenant_level::{top_k, VectorBlocks, LANES};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Levels with fewer records are always scanned exactly (the service's default of
/// `RETR_APPROXIMATE_MIN_RECORDS`): below this, a full scan costs about a millisecond.
pub const DEFAULT_MIN_RECORDS: usize = 50_000;

/// One list in `PROBE_SHARE` is scanned (at least `MIN_PROBE`).
const PROBE_SHARE: usize = 8;
const MIN_PROBE: usize = 4;
/// k-means on a sample of `SAMPLE_PER_LIST` vectors per list, `ITERATIONS` rounds.
const SAMPLE_PER_LIST: usize = 32;
const ITERATIONS: usize = 6;

/// A level's partition: centroids, and the records' vectors regrouped by list, each list padded
/// to whole blocks of `LANES` rows so that a list is scanned block by block.
#[derive(Debug)]
pub(super) struct Partition {
    centroids: VectorBlocks,
    lists: usize,
    /// List `l` holds the blocks `starts[l]..starts[l + 1]` of `members`.
    starts: Vec<u32>,
    /// Row of `members` → record number; `u32::MAX` for padding rows.
    numbers: Vec<u32>,
    members: VectorBlocks,
}

impl Partition {
    /// Partitions the `len` rows of `vectors` (whose norms are `norms`).
    pub(super) fn build(vectors: &VectorBlocks, norms: &[f32], len: usize) -> Self {
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
        let assignment = assign_all(&centroids, lists, len, &unit);
        let mut members_of: Vec<Vec<u32>> = vec![Vec::new(); lists];
        for (number, &list) in assignment.iter().enumerate() {
            members_of[list as usize].push(number as u32);
        }
        let mut starts = Vec::with_capacity(lists + 1);
        let mut numbers = Vec::new();
        starts.push(0u32);
        for members in &members_of {
            numbers.extend_from_slice(members);
            numbers.resize(numbers.len().div_ceil(LANES) * LANES, u32::MAX);
            starts.push((numbers.len() / LANES) as u32);
        }
        let zero = vec![0.0f32; dimension];
        let rows: Vec<Vec<f32>> = numbers
            .iter()
            .map(|&number| if number == u32::MAX { zero.clone() } else { vectors.row(number as usize) })
            .collect();
        let members = blocks_of(&rows, dimension);
        Self { centroids, lists, starts, numbers, members }
    }

    /// The best `k` records by cosine among the lists nearest the query, as (score, number)
    /// pairs ordered like `top_k`. `cosine(dot, number)` turns a row's dot product into its score.
    pub(super) fn top_k(&self, query: &[f32], k: usize, cosine: impl Fn(f32, usize) -> f32) -> Vec<(f32, usize)> {
        let probe = self.lists.div_ceil(PROBE_SHARE).max(MIN_PROBE).min(self.lists);
        let centroid_dots = all_dots(&self.centroids, self.lists, query);
        let mut order: Vec<usize> = (0..self.lists).collect();
        order.sort_unstable_by(|&a, &b| centroid_dots[b].total_cmp(&centroid_dots[a]).then(a.cmp(&b)));
        let blocks: Vec<usize> = order[..probe]
            .iter()
            .flat_map(|&list| self.starts[list] as usize..self.starts[list + 1] as usize)
            .collect();
        let mut scored = Vec::with_capacity(blocks.len() * LANES);
        for group in blocks.chunks(super::tenant_level::GROUP) {
            let dots = self.members.dots(group, query);
            for (&block, dots) in group.iter().zip(&dots) {
                for (lane, &dot) in dots.iter().enumerate() {
                    let number = self.numbers[block * LANES + lane];
                    if number != u32::MAX {
                        scored.push((cosine(dot, number as usize), number as usize));
                    }
                }
            }
        }
        top_k(&mut scored, k);
        scored
    }

    /// Rows regrouped, padding included (what the partition adds to its level's memory).
    #[cfg(test)]
    fn member_rows(&self) -> usize {
        self.numbers.len()
    }
}

fn blocks_of(rows: &[Vec<f32>], dimension: usize) -> VectorBlocks {
    let slices: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
    VectorBlocks::build(&slices, dimension)
}

/// The dot product of `query` with each of the `len` rows of `blocks`.
fn all_dots(blocks: &VectorBlocks, len: usize, query: &[f32]) -> Vec<f32> {
    let numbers: Vec<usize> = (0..len.div_ceil(LANES)).collect();
    let mut dots = Vec::with_capacity(numbers.len() * LANES);
    for group in numbers.chunks(super::tenant_level::GROUP) {
        for block in blocks.dots(group, query).iter().take(group.len()) {
            dots.extend_from_slice(block);
        }
    }
    dots.truncate(len);
    dots
}

fn nearest_list(centroids: &VectorBlocks, lists: usize, row: &[f32]) -> usize {
    let dots = all_dots(centroids, lists, row);
    (0..lists).max_by(|&a, &b| dots[a].total_cmp(&dots[b]).then(b.cmp(&a))).unwrap_or(0)
}

/// Each record's nearest centroid, computed on the machine's cores.
fn assign_all(
    centroids: &VectorBlocks,
    lists: usize,
    len: usize,
    unit: &(impl Fn(usize) -> Vec<f32> + Sync),
) -> Vec<u32> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let share = len.div_ceil(workers).max(1);
    let mut assignment = vec![0u32; len];
    std::thread::scope(|scope| {
        for (part, out) in assignment.chunks_mut(share).enumerate() {
            scope.spawn(move || {
                for (offset, slot) in out.iter_mut().enumerate() {
                    *slot = nearest_list(centroids, lists, &unit(part * share + offset)) as u32;
                }
            });
        }
    });
    assignment
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
                let partition = Partition::build(&vectors, &norms, norms.len());
                tracing::info!(
                    records = norms.len(),
                    lists = partition.lists,
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
    #[cfg(any(test, feature = "test-support"))]
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
        let partition = Partition::build(&blocks, &norms, rows.len());
        assert_eq!(partition.lists, 77);
        // Every record is in exactly one list.
        let mut seen: Vec<u32> = partition.numbers.iter().copied().filter(|&n| n != u32::MAX).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..rows.len() as u32).collect::<Vec<_>>());
        assert!(partition.member_rows() < rows.len() + partition.lists * LANES);

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
            let approximate = partition.top_k(query, 10, |dot, number| cosine(dot, query_norm, norms[number]));
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
