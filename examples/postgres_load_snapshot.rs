//! Writes every tenant of a snapshot file (`ingest --out`, or bench/big_tenant_data.py) into the
//! configured PostgreSQL database through the ingest writer, one transaction per tenant, and
//! prints how long each took. The benchmarks of a search in the database fill it this way.
//!
//!   RETR_POSTGRES_URL=postgres://… RETR_POSTGRES_SEARCH=database \
//!     cargo run --release --example postgres_load_snapshot -- .cache/big/docs-10000.json
//!
//! With `RETR_POSTGRES_SEARCH=database` (or `RETR_POSTGRES_HNSW_INDEX=true`) the HNSW indexes are
//! built too, after the first tenant's rows are in.

use retrieval_engine::{
    ingest::{IndexWriter, IngestBatch, PostgresSourceWriter, RecordSet, SourceScope},
    PostgresIndex,
};
use retrieval_service::config::{Settings, VectorBackend};
use std::collections::BTreeMap;
use std::time::Instant;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: postgres_load_snapshot <snapshot.json>")?;
    let mut env: std::collections::HashMap<String, String> = std::env::vars().collect();
    env.insert("RETR_MOCK_MODE".into(), "false".into());
    env.insert("RETR_VECTOR_BACKEND".into(), "postgres".into());
    let settings = Settings::load(None, &env)?;
    assert_eq!(settings.vector_backend, VectorBackend::Postgres);
    let started = Instant::now();
    let snapshot = retrieval_engine::read_snapshot_file(std::path::Path::new(&path))?;
    println!("read {path} in {:.1} s", started.elapsed().as_secs_f64());
    let mut tenants: BTreeMap<String, RecordSet> = BTreeMap::new();
    for record in snapshot.docs {
        tenants.entry(record.meta.tenant_id.to_string()).or_default().docs.push(record);
    }
    for record in snapshot.sections {
        tenants.entry(record.meta.tenant_id.to_string()).or_default().sections.push(record);
    }
    for record in snapshot.chunks {
        tenants.entry(record.meta.tenant_id.to_string()).or_default().chunks.push(record);
    }
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings.postgres())?, "snapshot");
    for (tenant, records) in tenants {
        let count = records.docs.len() + records.sections.len() + records.chunks.len();
        let scope = SourceScope { tenant_id: tenant.clone(), source_name: "snapshot".into() };
        let batch = IngestBatch {
            records,
            embedding_model: snapshot.embedding_model.clone(),
            dimension: snapshot.dimension,
            indexed_at: snapshot.indexed_at.clone(),
            kept_pages: BTreeMap::new(),
        };
        let started = Instant::now();
        let outcome = writer.replace_source(&scope, batch).await?;
        println!(
            "tenant {tenant}: {count} records written in {:.1} s (index_version {})",
            started.elapsed().as_secs_f64(),
            outcome.version.unwrap_or_default()
        );
    }
    Ok(())
}
