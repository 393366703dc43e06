//! A re-ingest into Chroma is atomic for searches: while one source of a tenant is
//! re-ingested over and over — run to completion, interrupted at a random point (the ingest
//! killed: its future dropped mid-write), or with Chroma cut off for a moment mid-write — a serving
//! replica polling every 20 ms answers every search from one complete version: the tenant exists,
//! the docs are exactly version A's or exactly version B's, the section and chunk counts are that
//! version's, and a question that has hits in both versions has hits. A killed run is completed by
//! running it again, and then Chroma holds nothing but the served version (no staged leftovers).
//! Needs the real Chroma server (`RETR_TEST_CHROMA_URL`).

use retrieval_engine::{
    ingest::{ChromaSourceWriter, IndexWriter, IngestBatch, RecordSet, SourceScope},
    ChromaIndex, Level, Metadata, PseudoEmbedder, Record, RecordFilter, VectorIndex,
};
use retrieval_service::config::Settings;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const DIMENSION: usize = 32;
const TENANT: &str = "acme";
const SOURCE: &str = "docs";
/// Pages of version A; `RETR_TEST_ATOMIC_PAGES` sets another number for a measurement at scale.
fn pages() -> usize {
    std::env::var("RETR_TEST_ATOMIC_PAGES").ok().and_then(|pages| pages.parse().ok()).unwrap_or(60).max(12)
}

/// One version of the source: of A's n pages (60), version B changes the first quarter, drops
/// the last sixth and adds as many new ones.
#[derive(Clone)]
struct Version {
    name: &'static str,
    records: RecordSet,
}

impl Version {
    fn build(name: &'static str) -> Self {
        let embedder = PseudoEmbedder::new(DIMENSION);
        let count = pages();
        let pages: Vec<usize> = match name {
            "A" => (0..count).collect(),
            _ => (0..count - count / 6).chain(count..count + count / 6).collect(),
        };
        let mut records = RecordSet::default();
        for page in pages {
            let edition = if name == "B" && page < count / 4 {
                "вторая редакция"
            } else {
                "первая редакция"
            };
            let doc_id = format!("{SOURCE}/page{page}.md");
            let base = Metadata {
                tenant_id: TENANT.into(),
                doc_id: doc_id.as_str().into(),
                title: format!("Настройка оператора {page}").into(),
                source: format!("page{page}.md").into(),
                indexed_at: "2026-01-02T03:04:05Z".into(),
                ..Metadata::default()
            };
            let record = |id: String, meta: Metadata, text: String| Record {
                embedding: embedder.embed_one(&text),
                id,
                meta,
                text: text.into(),
            };
            records.docs.push(record(doc_id.clone(), base.clone(), format!("Настройка оператора {page} {edition}")));
            // Version B gives page 0..15 a third section: the counts tell the versions apart.
            let sections = if name == "B" && page < count / 4 { 3 } else { 2 };
            for section in 0..sections {
                let section_id = format!("{doc_id}#s{section}");
                let meta = Metadata { section_id: Some(section_id.clone()), ..base.clone() };
                let text = format!("Раздел {section}: чат оператора, шаг {page} ({edition})");
                records.sections.push(record(section_id.clone(), meta.clone(), text));
                for chunk in 0..2 {
                    let chunk_id = format!("{section_id}-c{chunk}");
                    let meta = Metadata { chunk_id: Some(chunk_id.clone()), chunk_index: chunk, ..meta.clone() };
                    let text = format!("Фрагмент {chunk}: оператор открывает чат, страница {page} ({edition})");
                    records.chunks.push(record(chunk_id, meta, text));
                }
            }
        }
        Self { name, records }
    }

    fn doc_texts(&self) -> BTreeSet<(String, String)> {
        self.records.docs.iter().map(|doc| (doc.meta.doc_id.to_string(), doc.text.to_string())).collect()
    }

    fn counts(&self) -> [usize; 3] {
        [self.records.docs.len(), self.records.sections.len(), self.records.chunks.len()]
    }

    fn batch(&self) -> IngestBatch {
        IngestBatch {
            records: self.records.clone(),
            embedding_model: "pseudo".into(),
            dimension: DIMENSION,
            indexed_at: "2026-01-02T03:04:05Z".into(),
            kept_pages: Default::default(),
        }
    }
}

/// A small deterministic generator (the seed is printed, so a failure can be replayed).
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

/// What one check of the replica saw, or why it is not a complete version.
async fn check(reader: &ChromaIndex, versions: &[Version; 2], query: &[f32]) -> Result<&'static str, String> {
    let Ok(pinned) = reader.pin().await else {
        return Err("no replica to pin".into());
    };
    let tenant = RecordFilter::tenant(TENANT);
    if !pinned.tenant_exists(TENANT).await.map_err(|error| error.to_string())? {
        return Err("the tenant does not exist".into());
    }
    let mut counts = [0; 3];
    let mut docs = BTreeSet::new();
    for (slot, level) in Level::ALL.into_iter().enumerate() {
        let records = pinned.get(level, &tenant, usize::MAX).await.map_err(|error| error.to_string())?;
        counts[slot] = records.len();
        if level == Level::Doc {
            docs = records.iter().map(|doc| (doc.meta.doc_id.to_string(), doc.text.to_string())).collect();
        }
    }
    let Some(version) = versions.iter().find(|version| version.doc_texts() == docs) else {
        return Err(format!("docs of neither version ({} docs, counts {counts:?})", docs.len()));
    };
    if counts != version.counts() {
        return Err(format!("version {} with counts {counts:?} instead of {:?}", version.name, version.counts()));
    }
    let hits = pinned.knn(Level::Chunk, &tenant, query, 10).await.map_err(|error| error.to_string())?;
    if hits.len() != 10 {
        return Err(format!("version {}: {} chunk hits instead of 10", version.name, hits.len()));
    }
    Ok(version.name)
}

/// One `/search` for a question with hits in both versions: 200 with hits, never a 404.
async fn search(service: &retrieval_service::AppState) -> Result<&'static str, String> {
    let body = format!(r#"{{"query": "оператор открывает чат", "tenant_id": "{TENANT}"}}"#);
    let (status, body) = crate::common::send(service, "POST", "/internal/retrieval/search", Some(&body)).await;
    let hits = body["hits"].as_array().map_or(0, Vec::len);
    if status != axum::http::StatusCode::OK || hits == 0 {
        return Err(format!("/search answered {status} with {hits} hits: {}", body["error"]));
    }
    Ok("search")
}

/// Records in the three collections, whatever their version (the collections are this test's).
async fn stored_counts(url: &str, prefix: &str) -> [usize; 3] {
    let http = reqwest::Client::new();
    let base = format!("{url}/api/v2/tenants/default_tenant/databases/default_database/collections");
    let mut counts = [0; 3];
    for (slot, level) in ["docs", "sections", "chunks"].into_iter().enumerate() {
        let info: serde_json::Value =
            http.get(format!("{base}/{prefix}_{level}")).send().await.unwrap().json().await.unwrap();
        let id = info["id"].as_str().unwrap();
        counts[slot] = http.get(format!("{base}/{id}/count")).send().await.unwrap().json().await.unwrap();
    }
    counts
}

#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_search_during_killed_and_repeated_reingests_sees_one_whole_version() {
    let url = crate::common::needs::required("chroma");
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let prefix = format!("atomic{}", nanos % 1_000_000_000_000);
    let seed = (nanos as u64) | 1;
    println!("seed {seed}");
    let mut random = Random(seed);
    let settings = Settings {
        chroma_host: url.clone(),
        chroma_collection: prefix.clone(),
        chroma_timeout_seconds: 10.0,
        chroma_write_concurrency: 2,
        index_reload_interval_ms: 20,
        ..Settings::default()
    };
    let versions = [Version::build("A"), Version::build("B")];
    let scope = SourceScope { tenant_id: TENANT.into(), source_name: SOURCE.into() };
    let (proxy_url, chroma_up) = crate::common::switchable_proxy(&url, true).await;
    let writer_index =
        ChromaIndex::for_ingest(&(Settings { chroma_host: proxy_url, ..settings.clone() }).chroma()).unwrap();
    let writer = ChromaSourceWriter::new(writer_index, "chroma");
    writer.replace_source(&scope, versions[0].batch()).await.unwrap();

    let reader = ChromaIndex::new(&settings.chroma()).unwrap();
    reader.spawn_refresher();
    let query = PseudoEmbedder::new(DIMENSION).embed_one("оператор открывает чат");
    let deadline = Instant::now() + Duration::from_secs(20 + pages() as u64 / 20);
    while check(&reader, &versions, &query).await != Ok("A") {
        assert!(Instant::now() < deadline, "the replica never loaded version A");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new((0usize, BTreeSet::new(), Vec::<String>::new())));
    let checker = {
        let (reader, versions, stop, seen) =
            (Arc::clone(&reader), versions.clone(), Arc::clone(&stop), Arc::clone(&seen));
        let query = query.clone();
        // The service over the same replica: what a caller of /search gets meanwhile.
        let service = retrieval_service::startup::state_with(
            Settings { embedding_dimension: DIMENSION, mock_mode: false, ..settings.clone() },
            Arc::clone(&reader) as Arc<dyn VectorIndex>,
            Arc::new(PseudoEmbedder::new(DIMENSION)),
        );
        tokio::spawn(async move {
            let mut round = 0usize;
            while !stop.load(Ordering::Acquire) {
                round += 1;
                let outcome = match round % 4 {
                    0 => search(&service).await,
                    _ => check(&reader, &versions, &query).await,
                };
                {
                    let mut seen = seen.lock().unwrap();
                    seen.0 += 1;
                    match outcome {
                        Ok(version) => {
                            seen.1.insert(version);
                        }
                        Err(problem) => seen.2.push(problem),
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };

    // A full run, timed: the interruptions fall anywhere inside one.
    let started = Instant::now();
    writer.replace_source(&scope, versions[1].batch()).await.unwrap();
    let full_run = started.elapsed();
    let mut current = 1;
    for round in 0..9 {
        let target = 1 - current;
        let at = Duration::from_micros(random.below(full_run.as_micros() as u64 + 1));
        match round % 3 {
            // The ingest killed at a random point, then run again to completion.
            0 => {
                let killed = tokio::time::timeout(at, writer.replace_source(&scope, versions[target].batch())).await;
                println!("round {round}: killed after {at:?} (finished anyway: {})", killed.is_ok());
                // Requests the killed run had sent still land: a moment for them.
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            // Chroma unreachable for 300 ms at a random point: the run retries through it.
            1 => {
                let cut = async {
                    tokio::time::sleep(at).await;
                    chroma_up.store(false, Ordering::Release);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    chroma_up.store(true, Ordering::Release);
                };
                let (outcome, ()) = tokio::join!(writer.replace_source(&scope, versions[target].batch()), cut);
                println!("round {round}: chroma cut after {at:?}: {:?}", outcome.as_ref().map(|_| ()));
            }
            _ => {}
        }
        writer.replace_source(&scope, versions[target].batch()).await.unwrap();
        current = target;
        let deadline = Instant::now() + Duration::from_secs(20 + pages() as u64 / 20);
        while check(&reader, &versions, &query).await != Ok(versions[target].name) {
            if Instant::now() >= deadline {
                let (checks, _, problems) = seen.lock().unwrap().clone();
                panic!(
                    "round {round}: the replica never reached version {} ({:?}); {} of {checks} checks so far saw no \
                     whole version: {:?}",
                    versions[target].name,
                    check(&reader, &versions, &query).await,
                    problems.len(),
                    &problems[..problems.len().min(5)]
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            stored_counts(&url, &prefix).await,
            versions[target].counts(),
            "round {round}: after a completed run Chroma holds the served version only"
        );
    }
    stop.store(true, Ordering::Release);
    checker.await.unwrap();
    let (checks, versions_seen, problems) = seen.lock().unwrap().clone();
    println!("{checks} checks, versions seen {versions_seen:?}, {} problems", problems.len());
    assert!(
        problems.is_empty(),
        "{} of {checks} checks saw no whole version: {:?}",
        problems.len(),
        &problems[..problems.len().min(10)]
    );
    assert!(checks >= 100, "only {checks} checks ran");
    assert_eq!(versions_seen, BTreeSet::from(["A", "B", "search"]), "the checks saw both versions served");
}
