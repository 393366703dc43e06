//! Recall of the approximate tenant-wide ranking (`index::partition`) against the exact one, on
//! any snapshot file: every tenant level of at least `--min-records` records is partitioned, and
//! each of `--queries` query vectors (chunks of the tenant taken as questions, evenly spread) is
//! ranked both ways. Prints recall@10 and @100 per tenant level and the time of each ranking.
//!
//! cargo run --release --example partition_recall -- --snapshot .cache/adguard.json --min-records 1000

use clap::Parser;
use retrieval_engine::{read_snapshot_file, Level, LoadedIndex, RecordFilter};
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    snapshot: std::path::PathBuf,
    #[arg(long, default_value_t = 1000)]
    min_records: usize,
    #[arg(long, default_value_t = 300)]
    queries: usize,
}

fn main() {
    let args = Args::parse();
    let snapshot = read_snapshot_file(&args.snapshot).expect("snapshot");
    let queries: Vec<(String, Vec<f32>)> = {
        let step = (snapshot.chunks.len() / args.queries).max(1);
        snapshot.chunks.iter().step_by(step).map(|c| (c.meta.tenant_id.to_string(), c.embedding.clone())).collect()
    };
    let index = LoadedIndex::build(snapshot).expect("index");
    let tenants: HashSet<&String> = queries.iter().map(|(tenant, _)| tenant).collect();
    for tenant in tenants {
        let part = index.tenant(tenant).expect("tenant");
        let started = Instant::now();
        assert!(part.build_partitions(args.min_records, Duration::from_secs(3600)));
        println!("tenant {tenant}: partitions built in {:.1} s", started.elapsed().as_secs_f64());
        for level in Level::ALL {
            let size = part.records(level).len();
            if size < args.min_records {
                continue;
            }
            let filter = RecordFilter::tenant(tenant);
            let (mut found10, mut found100, mut wanted10, mut wanted100) = (0, 0, 0, 0);
            let (mut exact_time, mut approximate_time) = (Duration::ZERO, Duration::ZERO);
            for (_, query) in queries.iter().filter(|(t, _)| t == tenant) {
                let started = Instant::now();
                let exact = index.knn(level, &filter, query, 100).unwrap();
                exact_time += started.elapsed();
                let started = Instant::now();
                let approximate = index.knn_approximate(level, &filter, query, 100, args.min_records).unwrap();
                approximate_time += started.elapsed();
                let ids = |hits: &[retrieval_engine::ScoredRecord], k: usize| -> HashSet<String> {
                    hits.iter().take(k).map(|hit| hit.record.id.clone()).collect()
                };
                for (k, found, wanted) in [(10, &mut found10, &mut wanted10), (100, &mut found100, &mut wanted100)] {
                    let truth = ids(&exact, k);
                    *wanted += truth.len();
                    *found += truth.intersection(&ids(&approximate, k)).count();
                }
            }
            let n = queries.iter().filter(|(t, _)| t == tenant).count().max(1) as f64;
            println!(
                "  {level:?} ({size} records): recall@10 {:.4}, recall@100 {:.4}; exact {:.3} ms, approximate {:.3} ms per ranking",
                found10 as f64 / wanted10.max(1) as f64,
                found100 as f64 / wanted100.max(1) as f64,
                exact_time.as_secs_f64() * 1000.0 / n,
                approximate_time.as_secs_f64() * 1000.0 / n,
            );
        }
    }
}
