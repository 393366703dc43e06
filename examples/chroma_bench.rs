//! Benchmark of the Chroma backend's index layer (not a test): loads a synthetic corpus into
//! Chroma, then runs the doc → section → chunk kNN cascade at concurrency 1 and 16 with two plans:
//! `replica` (the service's plan: exact search on the in-process replica) and `naive` (three
//! filtered kNN queries answered by Chroma). Prints load time, p50/p99 latency and throughput.
//!
//! cargo run --release --example chroma_bench -- --chroma http://127.0.0.1:18000 [--skip-load]
//!
//! `--load-only` stops after loading (bench/http_bench.sh uses it); `--snapshot-out <file>` writes
//! the same deterministic corpus as an in-memory snapshot file and exits without touching Chroma
//! (bench/compare_backends.sh serves it with the in-memory backend).

use clap::Parser;
use retrieval_engine::{ChromaIndex, Level, Metadata, Record, RecordFilter, ScoredRecord, Snapshot, VectorIndex};
use retrieval_service::config::Settings;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    /// Chroma base URL.
    #[arg(long, default_value = "http://127.0.0.1:18000")]
    chroma: String,
    /// Collection prefix (collections `{prefix}_docs` …).
    #[arg(long, default_value = "bench")]
    prefix: String,
    /// Reuse a corpus loaded by an earlier run.
    #[arg(long)]
    skip_load: bool,
    /// Load the corpus into Chroma, then exit (no measurement).
    #[arg(long, conflicts_with = "skip_load")]
    load_only: bool,
    /// Write the corpus to this in-memory snapshot file and exit (Chroma is not contacted).
    #[arg(long)]
    snapshot_out: Option<std::path::PathBuf>,
    /// Upsert batches in flight while loading (RETR_CHROMA_WRITE_CONCURRENCY; default: its default).
    #[arg(long)]
    write_concurrency: Option<usize>,
    #[arg(long, default_value_t = 2000)]
    docs: usize,
    #[arg(long, default_value_t = 5)]
    sections_per_doc: usize,
    #[arg(long, default_value_t = 4)]
    chunks_per_section: usize,
    #[arg(long, default_value_t = 10)]
    tenants: usize,
    #[arg(long, default_value_t = 384)]
    dimension: usize,
    /// Cascades per measurement of the replica plan.
    #[arg(long, default_value_t = 4000)]
    requests: usize,
    /// Cascades per measurement of the naive plan (it is ~100× slower).
    #[arg(long, default_value_t = 200)]
    naive_requests: usize,
}

/// xorshift64*: deterministic vectors without a dependency.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// A unit vector near `center` (topic structure, as real embeddings have).
    fn vector_near(&mut self, center: &[f32], spread: f32) -> Vec<f32> {
        let mut vector: Vec<f32> = center.iter().map(|c| c + spread * self.next_f32()).collect();
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        vector.iter_mut().for_each(|v| *v /= norm);
        vector
    }
}

fn corpus(args: &Args) -> Snapshot {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let origin = vec![0.0; args.dimension];
    let topics: Vec<Vec<f32>> = (0..50).map(|_| rng.vector_near(&origin, 1.0)).collect();
    let mut snapshot = Snapshot { format_version: 1, embedding_model: "synthetic".into(), ..Snapshot::default() };
    for doc_number in 0..args.docs {
        let tenant = format!("tenant{}", doc_number % args.tenants);
        let doc_id = format!("doc{doc_number}");
        let doc_vector = rng.vector_near(&topics[doc_number % topics.len()], 0.6);
        let meta = Metadata {
            tenant_id: tenant.into(),
            doc_id: doc_id.as_str().into(),
            title: format!("Документ {doc_number}").into(),
            source: format!("docs/{doc_id}.md").into(),
            product: ["chatcenter", "sdk", "api"][doc_number % 3].into(),
            tags: vec![format!("tag{}", doc_number % 7)],
            ..Metadata::default()
        };
        snapshot.docs.push(Record {
            id: doc_id.clone(),
            meta: meta.clone(),
            text: format!("Документ {doc_number} о теме {}", doc_number % 50).into(),
            embedding: doc_vector.clone(),
        });
        for section_number in 0..args.sections_per_doc {
            let section_id = format!("{doc_id}#s{section_number}");
            let section_vector = rng.vector_near(&doc_vector, 0.4);
            let section_meta = Metadata { section_id: Some(section_id.clone()), ..meta.clone() };
            snapshot.sections.push(Record {
                id: section_id.clone(),
                meta: section_meta.clone(),
                text: format!("Раздел {section_number} документа {doc_number}").into(),
                embedding: section_vector.clone(),
            });
            for chunk_number in 0..args.chunks_per_section {
                let chunk_id = format!("{section_id}#c{chunk_number}");
                snapshot.chunks.push(Record {
                    id: chunk_id.clone(),
                    meta: Metadata {
                        chunk_id: Some(chunk_id),
                        chunk_index: (section_number * args.chunks_per_section + chunk_number) as u32,
                        ..section_meta.clone()
                    },
                    text: format!("Фрагмент {chunk_number} раздела {section_number} документа {doc_number}").into(),
                    embedding: rng.vector_near(&section_vector, 0.3),
                });
            }
        }
    }
    snapshot
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Plan {
    Replica,
    Naive,
}

async fn knn(
    index: &ChromaIndex,
    plan: Plan,
    level: Level,
    filter: &RecordFilter,
    query: &[f32],
    k: usize,
) -> Vec<ScoredRecord> {
    let outcome = match plan {
        Plan::Replica => index.knn(level, filter, query, k).await,
        Plan::Naive => index.knn_remote(level, filter, query, k).await,
    };
    outcome.expect("knn failed")
}

/// The cascade's kNN pattern: docs k=5 → their sections k=10 → those sections' chunks k=20.
async fn cascade(index: &ChromaIndex, plan: Plan, tenant: &str, query: &[f32]) -> Vec<String> {
    let filter = RecordFilter::tenant(tenant);
    let docs = knn(index, plan, Level::Doc, &filter, query, 5).await;
    let doc_ids: Vec<String> = docs.iter().map(|hit| hit.record.meta.doc_id.to_string()).collect();
    let filter = RecordFilter { doc_ids: Some(doc_ids.clone()), ..RecordFilter::tenant(tenant) };
    let sections = knn(index, plan, Level::Section, &filter, query, 10).await;
    let section_ids: Vec<String> = sections.iter().filter_map(|hit| hit.record.meta.section_id.clone()).collect();
    let filter =
        RecordFilter { doc_ids: Some(doc_ids), section_ids: Some(section_ids), ..RecordFilter::tenant(tenant) };
    knn(index, plan, Level::Chunk, &filter, query, 20).await.into_iter().map(|hit| hit.record.id.clone()).collect()
}

fn queries(args: &Args, count: usize) -> Arc<Vec<(String, Vec<f32>)>> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let origin = vec![0.0; args.dimension];
    Arc::new((0..count).map(|n| (format!("tenant{}", n % args.tenants), rng.vector_near(&origin, 1.0))).collect())
}

async fn measure(index: &Arc<ChromaIndex>, plan: Plan, concurrency: usize, queries: &Arc<Vec<(String, Vec<f32>)>>) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (index, queries, next) = (Arc::clone(index), Arc::clone(queries), Arc::clone(&next));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let number = next.fetch_add(1, Ordering::Relaxed);
                    let Some((tenant, query)) = queries.get(number) else { break };
                    let request_started = Instant::now();
                    cascade(&index, plan, tenant, query).await;
                    latencies.push(request_started.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<Duration> = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("worker panicked"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let percentile = |p: f64| latencies[((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1];
    println!(
        "{plan:?} concurrency {concurrency:>2}: {} cascades in {:.2} s → {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(0.50).as_secs_f64() * 1000.0,
        percentile(0.99).as_secs_f64() * 1000.0,
    );
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(path) = &args.snapshot_out {
        let snapshot = Snapshot { dimension: args.dimension, ..corpus(&args) };
        retrieval_engine::write_snapshot_file(path, &snapshot).expect("write snapshot");
        println!(
            "wrote {} docs / {} sections / {} chunks to {}",
            snapshot.docs.len(),
            snapshot.sections.len(),
            snapshot.chunks.len(),
            path.display()
        );
        return;
    }
    let settings = Settings {
        chroma_host: args.chroma.clone(),
        chroma_collection: args.prefix.clone(),
        chroma_timeout_seconds: 60.0,
        chroma_write_concurrency: args.write_concurrency.unwrap_or(Settings::default().chroma_write_concurrency),
        ..Settings::default()
    };
    if !args.skip_load {
        let snapshot = corpus(&args);
        let writer = ChromaIndex::new(&settings.chroma()).expect("client");
        let started = Instant::now();
        writer.replace_tenants(&snapshot).await.expect("load into chroma");
        let records = snapshot.docs.len() + snapshot.sections.len() + snapshot.chunks.len();
        let seconds = started.elapsed().as_secs_f64();
        println!("loaded {records} records into chroma in {seconds:.1} s ({:.0} records/s)", records as f64 / seconds);
        if args.load_only {
            return;
        }
    }
    let index = ChromaIndex::new(&settings.chroma()).expect("client");
    let started = Instant::now();
    index.refresh().await.expect("replica load");
    let stats = index.stats().await.expect("stats");
    let counts =
        stats.tenants.values().fold((0, 0, 0), |acc, t| (acc.0 + t.docs, acc.1 + t.sections, acc.2 + t.chunks));
    println!("replica of {counts:?} docs/sections/chunks loaded in {:.2} s", started.elapsed().as_secs_f64());

    let agreement_queries = queries(&args, 50);
    let mut same = 0;
    for (tenant, query) in agreement_queries.iter() {
        let naive = cascade(&index, Plan::Naive, tenant, query).await;
        if naive == cascade(&index, Plan::Replica, tenant, query).await {
            same += 1;
        }
    }
    println!("naive (HNSW) cascade equal to the exact replica cascade on {same}/50 queries");

    for concurrency in [1, 16] {
        measure(&index, Plan::Replica, concurrency, &queries(&args, args.requests)).await;
        measure(&index, Plan::Naive, concurrency, &queries(&args, args.naive_requests)).await;
    }
}
