//! The Chroma backend against a real Chroma server (`RETR_TEST_CHROMA_URL`, started by
//! `scripts/chroma.sh start <dir> <port>`): it must return exactly what the in-memory backend
//! returns for the same snapshot, never leak another tenant's records, and fail fast with
//! `Unavailable` (then recover) when Chroma is unreachable. The unreachable cases need no server.

use retrieval_engine::{
    ChromaIndex, InMemoryIndex, IndexErrorKind, Level, Metadata, PseudoEmbedder, Record, RecordFilter, ScoredRecord,
    Snapshot, VectorIndex,
};
use retrieval_service::config::Settings;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;

const DIMENSION: usize = 48;
const TENANTS: [&str; 2] = ["acme", "beta"];
const PRODUCTS: [&str; 2] = ["chatcenter", "sdk"];
const TOPICS: [&str; 4] = ["оператор чат", "установка android", "api токен", "бот сценарий"];

/// The Chroma server's URL (`RETR_TEST_CHROMA_URL`); a missing server fails the test (see `common::needs`).
fn chroma_url() -> String {
    crate::common::needs::required("chroma")
}

/// A collection prefix no other test (or earlier run on the same server) uses.
fn unique_prefix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000_000;
    format!("t{nanos}_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

fn settings(url: &str, prefix: &str) -> Settings {
    Settings {
        chroma_host: url.to_string(),
        chroma_collection: prefix.to_string(),
        // Generous: a batched upsert on 2 busy cores took over 2 s once. The tests that are about
        // timeouts set their own.
        chroma_timeout_seconds: 10.0,
        index_reload_interval_ms: 50,
        ..Settings::default()
    }
}

fn record(id: String, meta: Metadata, text: String, embedder: &PseudoEmbedder) -> Record {
    let embedding = embedder.embed_one(&text);
    Record { id, meta, text: text.into(), embedding }
}

/// Two tenants with the same ids but different texts, 4 docs × 2 sections × 2 chunks each.
fn snapshot() -> Snapshot {
    let embedder = PseudoEmbedder::new(DIMENSION);
    let mut snapshot = Snapshot {
        format_version: 1,
        indexed_at: "2026-01-02T03:04:05Z".into(),
        embedding_model: "pseudo".into(),
        ..Snapshot::default()
    };
    for (tenant_number, tenant) in TENANTS.iter().enumerate() {
        for doc_number in 0..4 {
            let topic = TOPICS[(doc_number + tenant_number) % TOPICS.len()];
            let doc_id = format!("doc{doc_number}");
            let tags: Vec<String> = match doc_number {
                0 => vec![],
                1 => vec!["faq".into()],
                _ => vec!["faq".into(), format!("t{doc_number}")],
            };
            let base = Metadata {
                tenant_id: (*tenant).into(),
                doc_id: doc_id.as_str().into(),
                title: format!("Страница {doc_number}: {topic}").into(),
                summary: format!("Кратко про {topic}").into(),
                url: format!("https://docs.example/{tenant}/{doc_id}").into(),
                source: format!("docs/{doc_id}.md").into(),
                product: PRODUCTS[doc_number % 2].into(),
                version: "1.0".into(),
                tags,
                domain: "chatcenter_user_docs".into(),
                section: if doc_number % 2 == 0 { "agent".into() } else { "admin".into() },
                platform: if doc_number == 3 { Default::default() } else { "web".into() },
                role: "operator".into(),
                page_type: "howto".into(),
                indexed_at: format!("2026-01-0{}T00:00:00Z", doc_number + 1).into(),
                ..Metadata::default()
            };
            let doc_text = format!("{} {} {tenant}", base.title, base.summary);
            snapshot.docs.push(record(doc_id.clone(), base.clone(), doc_text, &embedder));
            for section_number in 0..2 {
                let section_id = format!("{doc_id}#s{section_number}");
                let heading = format!("Раздел {section_number} {topic}");
                let section_meta = Metadata {
                    section_id: Some(section_id.clone()),
                    heading: heading.clone(),
                    heading_path: if section_number == 0 {
                        vec![]
                    } else {
                        vec![base.title.to_string(), heading.clone()]
                    },
                    ..base.clone()
                };
                let section_text = format!("{heading}\nКак {topic} шаг {section_number} для {tenant}. Пример Quick.");
                snapshot.sections.push(record(section_id.clone(), section_meta.clone(), section_text, &embedder));
                for chunk_number in 0..2 {
                    let chunk_id = format!("{section_id}#c{chunk_number}");
                    let text = format!("Фрагмент {chunk_number}: {topic} настройка {section_number} {tenant} quick");
                    let chunk_meta = Metadata {
                        chunk_id: Some(chunk_id.clone()),
                        page: doc_number as u32 + 1,
                        chunk_index: (section_number * 2 + chunk_number) as u32,
                        content_length: text.chars().count() as u32,
                        ..section_meta.clone()
                    };
                    snapshot.chunks.push(record(chunk_id, chunk_meta, text, &embedder));
                }
            }
        }
    }
    snapshot
}

/// Every filter shape the cascade sends, for one tenant.
fn filters(tenant: &str) -> Vec<RecordFilter> {
    let base = RecordFilter::tenant(tenant);
    vec![
        base.clone(),
        RecordFilter { product: Some("sdk".into()), ..base.clone() },
        RecordFilter { product: Some("missing".into()), ..base.clone() },
        RecordFilter { tags: vec!["faq".into()], ..base.clone() },
        RecordFilter { tags: vec!["faq".into(), "t2".into()], ..base.clone() },
        RecordFilter { doc_ids: Some(vec!["doc1".into(), "doc3".into()]), ..base.clone() },
        RecordFilter { doc_ids: Some(vec![]), ..base.clone() },
        RecordFilter { section_ids: Some(vec!["doc0#s1".into(), "doc2#s0".into()]), ..base.clone() },
        RecordFilter { platform: Some("web".into()), section: Some("agent".into()), ..base.clone() },
        RecordFilter {
            doc_ids: Some(vec!["doc2".into()]),
            version: Some("1.0".into()),
            role: Some("operator".into()),
            ..base
        },
        RecordFilter::tenant("nobody"),
    ]
}

fn queries() -> Vec<Vec<f32>> {
    let embedder = PseudoEmbedder::new(DIMENSION);
    ["оператор чат настройка", "api токен", "установка android шаг", "quick бот"]
        .iter()
        .map(|text| embedder.embed_one(text))
        .collect()
}

fn assert_same_scored(context: &str, chroma: &[ScoredRecord], memory: &[ScoredRecord]) {
    let chroma_ids: Vec<&str> = chroma.iter().map(|hit| hit.record.id.as_str()).collect();
    let memory_ids: Vec<&str> = memory.iter().map(|hit| hit.record.id.as_str()).collect();
    assert_eq!(chroma_ids, memory_ids, "{context}");
    for (left, right) in chroma.iter().zip(memory) {
        assert!((left.score - right.score).abs() < 1e-4, "{context}: {} vs {}", left.score, right.score);
        assert_eq!(left.record.meta.tenant_id, right.record.meta.tenant_id, "{context}");
    }
}

/// Same records in the same order. Chroma re-normalises vectors in cosine space, which may move a
/// component by one ulp, so embeddings compare within a tolerance.
fn assert_same_records(context: &str, chroma: &[Arc<Record>], memory: &[Arc<Record>]) {
    assert_eq!(ids(chroma), ids(memory), "{context}");
    for (left, right) in chroma.iter().zip(memory) {
        assert_eq!((&left.meta, &left.text), (&right.meta, &right.text), "{context}");
        // Vectors live in the scan matrix only (their scores are compared by `assert_same_scored`).
        assert!(left.embedding.is_empty() && right.embedding.is_empty(), "{context}: records carry no vectors");
    }
}

fn ids(records: &[Arc<Record>]) -> Vec<&str> {
    records.iter().map(|record| record.id.as_str()).collect()
}

async fn loaded_chroma(url: &str) -> Arc<ChromaIndex> {
    let index = ChromaIndex::new(&settings(url, &unique_prefix()).chroma()).unwrap();
    index.replace_tenants(&snapshot()).await.unwrap();
    index
}

#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn chroma_returns_what_the_in_memory_backend_returns() {
    let url = chroma_url();
    let chroma = loaded_chroma(&url).await;
    let memory = InMemoryIndex::from_snapshot(snapshot()).unwrap();
    let chroma: &dyn VectorIndex = chroma.as_ref();
    let needles = vec!["Quick".to_string(), "beta".to_string(), "шаг 1".to_string()];
    let terms = vec!["оператор".to_string(), "api".to_string(), "настройк".to_string()];
    for tenant in TENANTS {
        for filter in filters(tenant) {
            for level in Level::ALL {
                let context = format!("{level:?} {filter:?}");
                for (number, query) in queries().iter().enumerate() {
                    for k in [1, 3, 100] {
                        let left = chroma.knn(level, &filter, query, k).await.unwrap();
                        let right = memory.knn(level, &filter, query, k).await.unwrap();
                        assert!(left.len() <= k);
                        assert_same_scored(&format!("knn q{number} k{k} {context}"), &left, &right);
                        assert!(left.iter().all(|hit| hit.record.meta.tenant_id == tenant), "tenant leak: {context}");
                    }
                }
                let left = chroma.lexical(level, &filter, &terms, 5).await.unwrap();
                assert_same_scored(
                    &format!("lexical {context}"),
                    &left,
                    &memory.lexical(level, &filter, &terms, 5).await.unwrap(),
                );
                for limit in [1, 1000] {
                    let left = chroma.get(level, &filter, limit).await.unwrap();
                    let right = memory.get(level, &filter, limit).await.unwrap();
                    assert_same_records(&format!("get {limit} {context}"), &left, &right);
                    let left = chroma.text_search(level, &filter, &needles, limit).await.unwrap();
                    let right = memory.text_search(level, &filter, &needles, limit).await.unwrap();
                    assert_eq!(ids(&left), ids(&right), "text_search {limit} {context}");
                }
            }
        }
        let left = chroma.doc_chunks(tenant, "doc2").await.unwrap();
        assert_eq!(left.len(), 4);
        assert_same_records("doc_chunks", &left, &memory.doc_chunks(tenant, "doc2").await.unwrap());
        assert!(chroma.tenant_exists(tenant).await.unwrap());
    }
    assert!(!chroma.tenant_exists("nobody").await.unwrap());
    assert_eq!(chroma.dimension().await.unwrap(), Some(DIMENSION));
    let (left, right) = (chroma.stats().await.unwrap(), memory.stats().await.unwrap());
    assert_eq!(left.backend, "chroma");
    assert_eq!((left.embedding_model.as_str(), left.indexed_at.as_str()), ("pseudo", "2026-01-02T03:04:05Z"));
    for tenant in TENANTS {
        let (l, r) = (&left.tenants[tenant], &right.tenants[tenant]);
        assert_eq!((l.docs, l.sections, l.chunks, &l.source_files), (r.docs, r.sections, r.chunks, &r.source_files));
        assert_eq!((l.docs, l.sections, l.chunks), (4, 8, 16));
    }
    assert!(chroma.health().await.is_ok());
}

#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn chroma_filtered_queries_agree_with_the_record_filter() {
    let url = chroma_url();
    let chroma = loaded_chroma(&url).await;
    let memory = InMemoryIndex::from_snapshot(snapshot()).unwrap();
    for tenant in TENANTS {
        for filter in filters(tenant) {
            for level in Level::ALL {
                let query = &queries()[0];
                let remote = chroma.knn_remote(level, &filter, query, 100).await.unwrap();
                let local = memory.knn(level, &filter, query, 100).await.unwrap();
                assert_same_scored(&format!("knn_remote {level:?} {filter:?}"), &remote, &local);
            }
        }
    }
}

#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn writes_reach_this_instance_at_once_and_other_instances_by_polling() {
    let url = chroma_url();
    let prefix = unique_prefix();
    let writer = ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap();
    writer.replace_tenants(&snapshot()).await.unwrap();
    let reader = ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap();
    reader.spawn_refresher();
    let acme = RecordFilter::tenant("acme");
    assert_eq!(reader.get(Level::Doc, &acme, 100).await.unwrap().len(), 4);

    assert_eq!(writer.delete_source("acme", "docs/doc1.md").await.unwrap(), 1 + 2 + 4);
    assert_eq!(ids(&writer.get(Level::Doc, &acme, 100).await.unwrap()), ["doc0", "doc2", "doc3"]);
    assert_eq!(writer.get(Level::Chunk, &acme, 100).await.unwrap().len(), 12);
    let beta = RecordFilter::tenant("beta");
    assert_eq!(writer.get(Level::Doc, &beta, 100).await.unwrap().len(), 4, "other tenants untouched");
    wait_for(|| async { reader.get(Level::Doc, &acme, 100).await.unwrap().len() == 3 }).await;

    let mut changed = snapshot().docs.into_iter().find(|doc| doc.meta.tenant_id == "beta").unwrap();
    changed.meta.title = "Новый заголовок".into();
    writer.upsert(Level::Doc, std::slice::from_ref(&changed)).await.unwrap();
    wait_for(|| async {
        let docs = reader.get(Level::Doc, &beta, 1).await.unwrap();
        docs[0].meta.title == "Новый заголовок"
    })
    .await;

    // Read-your-writes: the version a write leaves in Chroma is the one the reader reaches.
    let written = writer.stored_version().await.unwrap().expect("every write leaves a version");
    wait_for(|| async { reader.version().is_some_and(|version| version >= written) }).await;
    let pinned = reader.pin().await.expect("a loaded replica pins");
    assert!(pinned.version().is_some_and(|version| version >= written));
}

/// Writes through `writer`: acme's doc2 deleted on every level, its doc1's doc record rewritten
/// with the title «Новый заголовок». Returns the filters of acme and of its doc2.
async fn delete_doc2_and_retitle_doc1(writer: &ChromaIndex, corpus: &Snapshot) -> (RecordFilter, RecordFilter) {
    let acme = RecordFilter::tenant("acme");
    let doc2 = RecordFilter { doc_ids: Some(vec!["doc2".into()]), ..acme.clone() };
    for level in Level::ALL {
        writer.delete_matching(level, &doc2).await.unwrap();
    }
    let mut doc1 = corpus.docs.iter().find(|doc| doc.meta.tenant_id == "acme" && doc.id == "doc1").unwrap().clone();
    doc1.meta.title = "Новый заголовок".into();
    writer.upsert(Level::Doc, std::slice::from_ref(&doc1)).await.unwrap();
    (acme, doc2)
}

fn records_loaded(index: &ChromaIndex) -> u64 {
    index.replica_status().expect("a replica reports its status").records_loaded_total
}

/// A write through the service is logged, and a replica applies it by re-reading only the changed
/// docs of that tenant: deletes are applied, the other tenant is not read again. A change nothing
/// logged (a write straight to Chroma) still reaches the replica, by a full reload.
#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_logged_write_rereads_only_the_changed_docs_and_applies_deletes() {
    let url = chroma_url();
    let prefix = unique_prefix();
    let writer = ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap();
    let corpus = snapshot();
    writer.replace_tenants(&corpus).await.unwrap();
    let total = (corpus.docs.len() + corpus.sections.len() + corpus.chunks.len()) as u64;
    let reader = ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap();
    assert!(reader.refresh().await.unwrap());
    assert_eq!(records_loaded(&reader), total, "the first load reads everything");
    assert!(!reader.refresh().await.unwrap(), "nothing changed, nothing read");
    assert_eq!(records_loaded(&reader), total);

    // acme: doc2 deleted on every level, doc1's doc record rewritten with a new title.
    let (acme, doc2) = delete_doc2_and_retitle_doc1(&writer, &corpus).await;

    assert!(reader.refresh().await.unwrap());
    let doc1_records = 1 + 2 + 4;
    assert_eq!(records_loaded(&reader) - total, doc1_records, "only doc1 and doc2 of acme were read again");
    assert_eq!(ids(&reader.get(Level::Doc, &acme, 100).await.unwrap()), ["doc0", "doc1", "doc3"]);
    assert!(reader.get(Level::Chunk, &doc2, 100).await.unwrap().is_empty(), "the deleted doc's chunks are gone");
    assert!(reader.get(Level::Section, &doc2, 100).await.unwrap().is_empty());
    let acme_doc1 = RecordFilter { doc_ids: Some(vec!["doc1".into()]), ..acme.clone() };
    assert_eq!(reader.get(Level::Doc, &acme_doc1, 1).await.unwrap()[0].meta.title, "Новый заголовок");
    assert_eq!(reader.get(Level::Chunk, &acme_doc1, 100).await.unwrap().len(), 4, "doc1's chunks kept");
    let beta = RecordFilter::tenant("beta");
    assert_eq!(reader.get(Level::Chunk, &beta, 100).await.unwrap().len(), 16, "the other tenant is intact");
    let stats = reader.stats().await.unwrap();
    assert_eq!((stats.tenants["acme"].docs, stats.tenants["acme"].chunks), (3, 12));

    // A whole-tenant delete removes the tenant from the replica.
    writer.delete_tenant("beta").await.unwrap();
    let before = records_loaded(&reader);
    assert!(reader.refresh().await.unwrap());
    assert_eq!(records_loaded(&reader), before, "a deleted tenant has nothing to read");
    assert!(!reader.tenant_exists("beta").await.unwrap());
    assert!(reader.tenant_exists("acme").await.unwrap());

    // A delete straight to Chroma, outside the service: counts change with no logged write.
    let settings = settings(&url, &prefix);
    let client = reqwest::Client::new();
    let base =
        format!("{url}/api/v2/tenants/{}/databases/{}/collections", settings.chroma_tenant, settings.chroma_database);
    let collection: serde_json::Value =
        client.get(format!("{base}/{prefix}_chunks")).send().await.unwrap().json().await.unwrap();
    let deleted = client
        .post(format!("{base}/{}/delete", collection["id"].as_str().unwrap()))
        .json(&serde_json::json!({"where": {"doc_id": {"$eq": "doc3"}}}))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let before = records_loaded(&reader);
    // The first poll that sees it waits (a writer may be between its write and its log entry).
    assert!(!reader.refresh().await.unwrap());
    assert!(reader.refresh().await.unwrap());
    let remaining = (3 + 6 + 12 - 4) as u64;
    assert_eq!(records_loaded(&reader) - before, remaining, "an unexplained change reloads everything");
    let doc3 = RecordFilter { doc_ids: Some(vec!["doc3".into()]), ..acme };
    assert!(reader.get(Level::Chunk, &doc3, 100).await.unwrap().is_empty());
}

/// More chunks than one upsert batch, written with several batches in flight: every record
/// arrives once, and replacing the tenant again leaves exactly the new records (no duplicates, the
/// dropped doc's records gone).
#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn large_writes_are_batched_concurrently_and_replace_without_duplicates() {
    let url = chroma_url();
    let embedder = PseudoEmbedder::new(DIMENSION);
    let corpus = |docs: usize, text: &str| {
        let mut snapshot = Snapshot { format_version: 1, embedding_model: "pseudo".into(), ..Snapshot::default() };
        for doc_number in 0..docs {
            let meta = Metadata {
                tenant_id: "bulk".into(),
                doc_id: format!("doc{doc_number}").into(),
                source: format!("docs/doc{doc_number}.md").into(),
                ..Metadata::default()
            };
            snapshot.docs.push(record(
                meta.doc_id.to_string(),
                meta.clone(),
                format!("{text} {doc_number}"),
                &embedder,
            ));
            for chunk_number in 0..250 {
                let chunk_id = format!("doc{doc_number}#s0-c{chunk_number}");
                let chunk_meta = Metadata {
                    section_id: Some(format!("doc{doc_number}#s0")),
                    chunk_id: Some(chunk_id.clone()),
                    chunk_index: chunk_number,
                    ..meta.clone()
                };
                let chunk_text = format!("{text} {doc_number} {chunk_number}");
                snapshot.chunks.push(record(chunk_id, chunk_meta, chunk_text, &embedder));
            }
        }
        snapshot
    };
    let index =
        ChromaIndex::new(&(Settings { chroma_write_concurrency: 3, ..settings(&url, &unique_prefix()) }).chroma())
            .unwrap();
    let bulk = RecordFilter::tenant("bulk");
    index.replace_tenants(&corpus(10, "первый")).await.unwrap();
    let chunks = index.get(Level::Chunk, &bulk, usize::MAX).await.unwrap();
    assert_eq!(chunks.len(), 2_500);
    let distinct: std::collections::HashSet<&str> = chunks.iter().map(|chunk| chunk.id.as_str()).collect();
    assert_eq!(distinct.len(), 2_500);

    index.replace_tenants(&corpus(9, "второй")).await.unwrap();
    let chunks = index.get(Level::Chunk, &bulk, usize::MAX).await.unwrap();
    assert_eq!(chunks.len(), 2_250);
    assert!(chunks.iter().all(|chunk| chunk.text.starts_with("второй") && chunk.meta.doc_id != "doc9"));
    assert_eq!(index.get(Level::Doc, &bulk, usize::MAX).await.unwrap().len(), 9);
}

async fn wait_for<F, Fut>(condition: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition().await {
        assert!(Instant::now() < deadline, "condition not reached within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A port nothing listens on.
async fn closed_port_url() -> String {
    // Port 1 (tcpmux): privileged, so no test can bind it, and nothing listens on it here. A port
    // picked by binding and closing a listener could be taken by another test's server meanwhile.
    "http://127.0.0.1:1".to_string()
}

#[tokio::test]
async fn unreachable_chroma_fails_fast_with_unavailable() {
    let url = closed_port_url().await;
    let index = ChromaIndex::new(&settings(&url, "ingestion").chroma()).unwrap();
    let started = Instant::now();
    let error = index.health().await.unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::Unavailable, "{error}");
    let error = index.knn(Level::Doc, &RecordFilter::tenant("acme"), &[1.0; DIMENSION], 5).await.unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::Unavailable, "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn silent_chroma_times_out_with_unavailable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let index =
        ChromaIndex::new(&(Settings { chroma_timeout_seconds: 0.3, ..settings(&url, "ingestion") }).chroma()).unwrap();
    let started = Instant::now();
    let error = index.get(Level::Doc, &RecordFilter::tenant("acme"), 5).await.unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::Unavailable, "{error}");
    assert!(error.message.contains("timed out"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    // Health reports what the last attempt found, at once: it never waits on Chroma itself.
    let started = Instant::now();
    let error = index.health().await.unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::Unavailable, "{error}");
    assert!(error.message.contains("timed out"), "{error}");
    assert!(started.elapsed() < Duration::from_millis(50), "took {:?}", started.elapsed());
    accepted.abort();
}

#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn service_recovers_when_chroma_comes_back() {
    let url = chroma_url();
    let prefix = unique_prefix();
    ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap().replace_tenants(&snapshot()).await.unwrap();
    let (proxy_url, enabled) = crate::common::switchable_proxy(&url, false).await;
    let index = ChromaIndex::new(&(Settings { chroma_timeout_seconds: 1.0, ..settings(&proxy_url, &prefix) }).chroma())
        .unwrap();
    index.spawn_refresher();
    let acme = RecordFilter::tenant("acme");
    let error = index.get(Level::Doc, &acme, 10).await.unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::Unavailable, "{error}");

    enabled.store(true, Ordering::Release);
    wait_for(|| async { index.get(Level::Doc, &acme, 10).await.is_ok_and(|docs| docs.len() == 4) }).await;
    assert!(index.health().await.is_ok());

    assert_eq!(index.staleness(), None);

    // Chroma gone with a replica in hand: answers keep coming from the replica, flagged stale.
    enabled.store(false, Ordering::Release);
    wait_for(|| async { index.staleness().is_some() }).await;
    assert!(index.health().await.is_ok(), "with a replica in hand the index serves (health says degraded)");
    let started = Instant::now();
    assert_eq!(index.get(Level::Doc, &acme, 10).await.unwrap().len(), 4, "the replica still answers");
    assert!(started.elapsed() < Duration::from_secs(1), "no search waits on the dead Chroma");
    let index: Arc<dyn VectorIndex> = index;
    let service_settings =
        Settings { embedding_dimension: DIMENSION, mock_mode: false, ..settings(&proxy_url, &prefix) };
    let state = retrieval_service::startup::state_with(
        service_settings,
        Arc::clone(&index),
        Arc::new(PseudoEmbedder::new(DIMENSION)),
    );
    let (status, body) = crate::common::send(
        &state,
        "POST",
        "/internal/retrieval/search",
        Some(r#"{"query": "установка android", "tenant_id": "acme"}"#),
    )
    .await;
    assert_eq!(status, axum::http::StatusCode::OK, "{body}");
    assert!(!body["hits"].as_array().unwrap().is_empty(), "{body}");
    let codes: Vec<&str> = body["degradations"].as_array().unwrap().iter().filter_map(|d| d["code"].as_str()).collect();
    assert!(codes.contains(&"backend_stale"), "{body}");
    wait_for(|| async {
        let (status, health) = crate::common::send(&state, "GET", "/health", None).await;
        status == axum::http::StatusCode::OK && health["status"] == "degraded"
    })
    .await;

    enabled.store(true, Ordering::Release);
    wait_for(|| async { index.health().await.is_ok() && index.staleness().is_none() }).await;
    let (_, body) = crate::common::send(
        &state,
        "POST",
        "/internal/retrieval/search",
        Some(r#"{"query": "установка android", "tenant_id": "acme"}"#),
    )
    .await;
    assert!(body["degradations"].as_array().unwrap().is_empty(), "{body}");
}

/// Chroma accepting connections and never answering, with a replica in hand: `/health` turns
/// degraded, and answers are flagged stale, once a refresh has gone unanswered for one call's
/// timeout, not only when the client's three attempts have run out and the refresh fails.
#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_stalled_chroma_shows_in_health_within_one_call_timeout() {
    let url = chroma_url();
    let prefix = unique_prefix();
    ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap().replace_tenants(&snapshot()).await.unwrap();
    let (proxy_url, stalled) = crate::common::stallable_proxy(&url).await;
    // One call may take 2 s; three attempts (with their pauses) take over 6 s before a refresh fails.
    let settings = Settings { chroma_timeout_seconds: 2.0, ..settings(&proxy_url, &prefix) };
    let index = ChromaIndex::new(&settings.chroma()).unwrap();
    index.spawn_refresher();
    let acme = RecordFilter::tenant("acme");
    wait_for(|| async { index.get(Level::Doc, &acme, 10).await.is_ok_and(|docs| docs.len() == 4) }).await;
    let index: Arc<dyn VectorIndex> = index;
    let service_settings = Settings { embedding_dimension: DIMENSION, mock_mode: false, ..settings };
    let state = retrieval_service::startup::state_with(
        service_settings,
        Arc::clone(&index),
        Arc::new(PseudoEmbedder::new(DIMENSION)),
    );
    let health = || async { crate::common::send(&state, "GET", "/health", None).await };
    let (_, body) = health().await;
    assert_eq!(body["status"], "ok", "{body}");

    stalled.store(true, Ordering::Release);
    let started = Instant::now();
    wait_for(|| async { health().await.1["status"] == "degraded" }).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "degraded after {took:?}: not before the retries ran out");
    let (status, body) = health().await;
    assert_eq!(status, axum::http::StatusCode::OK);
    assert!(body["error"].as_str().unwrap().contains("no answer"), "{body}");
    let search = r#"{"query": "установка android", "tenant_id": "acme"}"#;
    let started = Instant::now();
    let (status, body) = crate::common::send(&state, "POST", "/internal/retrieval/search", Some(search)).await;
    assert_eq!(status, axum::http::StatusCode::OK, "{body}");
    assert!(started.elapsed() < Duration::from_secs(1), "no search waits on the stalled Chroma");
    assert!(body["degradations"].to_string().contains("backend_stale"), "{body}");

    stalled.store(false, Ordering::Release);
    wait_for(|| async { health().await.1["status"] == "ok" }).await;
}

/// A restart with a local copy (`RETR_CHROMA_LOCAL_COPY_DIR`) reads the copy, not Chroma, and
/// catches up through the change log: only the docs written while it was down are read, and it
/// answers exactly what a full load answers. The catch-up rewrites only the changed tenant's files.
/// With Chroma unreachable the copy answers, flagged stale; a copy older than the change log can
/// be trusted for is reloaded in full.
#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_restart_from_the_local_copy_reads_only_what_changed_since() {
    let url = chroma_url();
    let prefix = unique_prefix();
    let directory = tempfile::tempdir().unwrap();
    let copy_dir = directory.path().join("replica");
    let with_copy =
        |url: &str| Settings { chroma_local_copy_dir: Some(copy_dir.clone()), ..settings(url, &prefix) }.chroma();
    let writer = ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap();
    let corpus = snapshot();
    writer.replace_tenants(&corpus).await.unwrap();
    let total = (corpus.docs.len() + corpus.sections.len() + corpus.chunks.len()) as u64;

    let first = ChromaIndex::new(&with_copy(&url)).unwrap();
    assert!(first.refresh().await.unwrap());
    assert_eq!(records_loaded(&first), total);
    let manifest = copy_dir.join("manifest.json");
    wait_for(|| async { manifest.exists() }).await;
    drop(first);
    let tenant_file = |tenant: &str| {
        let hex: String = tenant.bytes().map(|byte| format!("{byte:02x}")).collect();
        copy_dir.join(format!("tenant-{hex}.bin"))
    };
    let modified = |tenant: &str| std::fs::metadata(tenant_file(tenant)).unwrap().modified().unwrap();
    let (acme_written, beta_written) = (modified("acme"), modified("beta"));

    // While no instance runs: acme's doc2 deleted on every level, doc1 retitled.
    let (acme, _) = delete_doc2_and_retitle_doc1(&writer, &corpus).await;

    let restarted = ChromaIndex::new(&with_copy(&url)).unwrap();
    assert!(restarted.refresh().await.unwrap());
    assert_eq!(records_loaded(&restarted), 1 + 2 + 4, "only doc1 and doc2 of acme were read from chroma");
    let full = ChromaIndex::new(&settings(&url, &prefix).chroma()).unwrap();
    assert!(full.refresh().await.unwrap());
    for tenant in TENANTS {
        for filter in filters(tenant) {
            for level in Level::ALL {
                let context = format!("{level:?} {filter:?}");
                let (left, right) =
                    (restarted.get(level, &filter, 1000).await.unwrap(), full.get(level, &filter, 1000).await.unwrap());
                assert_same_records(&format!("get {context}"), &left, &right);
                for query in queries() {
                    let left = restarted.knn(level, &filter, &query, 5).await.unwrap();
                    assert_same_scored(
                        &format!("knn {context}"),
                        &left,
                        &full.knn(level, &filter, &query, 5).await.unwrap(),
                    );
                }
            }
        }
    }
    assert_eq!(restarted.staleness(), None);
    // The caught-up replica is written back: acme's files, not beta's.
    wait_for(|| async { modified("acme") != acme_written && manifest.exists() }).await;
    assert_eq!(modified("beta"), beta_written, "the unchanged tenant's files are not written again");
    drop(restarted);

    // Chroma unreachable at start: the copy answers, flagged stale.
    let mut unreachable = with_copy(&closed_port_url().await);
    unreachable.timeout_seconds = 1.0;
    let down = ChromaIndex::new(&unreachable).unwrap();
    assert_eq!(ids(&down.get(Level::Doc, &acme, 10).await.unwrap()), ["doc0", "doc1", "doc3"]);
    assert!(down.staleness().is_some(), "answers from the copy are flagged stale while chroma is down");
    drop(down);

    // A copy confirmed longer ago than the change log's window: a full reload.
    let mut stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let confirmed = stored["note"]["confirmed_at_ms"].as_i64().expect("the copy notes when it was confirmed");
    stored["note"]["confirmed_at_ms"] = (confirmed - 2 * 3_600_000).into();
    std::fs::write(&manifest, serde_json::to_vec(&stored).unwrap()).unwrap();
    let old = ChromaIndex::new(&with_copy(&url)).unwrap();
    assert!(old.refresh().await.unwrap());
    assert_eq!(records_loaded(&old), (3 + 6 + 12) + (4 + 8 + 16), "everything is read again");
    assert_eq!(ids(&old.get(Level::Doc, &acme, 10).await.unwrap()), ["doc0", "doc1", "doc3"]);
}
