//! The Chroma writer against a fake Chroma (no server needed): upserts are split into batches of
//! at most 1,000 records or the server's `max_batch_size`, embeddings go as base64 when the server
//! announces it, no more than `chroma_write_concurrency` batches are ever in flight, and a failed
//! batch fails the write (and still bumps the version marker). The batch job's calls are retried
//! on a timeout, a dropped connection, 429 (after what `Retry-After` asks) and 5xx, never on 4xx.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::Json;
use retrieval_engine::{ChromaIndex, IndexErrorKind, Level, Metadata, Record, Snapshot};
use retrieval_service::config::Settings;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
struct FakeChroma {
    max_batch_size: usize,
    base64: bool,
    /// Upserts answer 400 from this call number on (0 = never).
    fail_upsert_from: usize,
    upsert_delay: Duration,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    upserts: AtomicUsize,
    /// (collection id, records, embeddings are base64 strings) of every upsert.
    batches: Mutex<Vec<(String, usize, bool)>>,
    metadata_updates: AtomicUsize,
    /// The change-log entries written (upserts to `fake_changes`, not record batches).
    change_entries: Mutex<Vec<Value>>,
}

async fn answer(
    State(fake): State<Arc<FakeChroma>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let path = uri.path();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if path.ends_with("/pre-flight-checks") {
        let checks = json!({"max_batch_size": fake.max_batch_size, "supports_base64_encoding": fake.base64});
        return (StatusCode::OK, Json(checks));
    }
    if path.ends_with("/fake_changes/upsert") {
        let metadatas = body["metadatas"].as_array().cloned().unwrap_or_default();
        fake.change_entries.lock().unwrap().extend(metadatas);
        return (StatusCode::OK, Json(json!({})));
    }
    if path.ends_with("/upsert") {
        let call = fake.upserts.fetch_add(1, Ordering::SeqCst) + 1;
        let now = fake.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        fake.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(fake.upsert_delay).await;
        fake.in_flight.fetch_sub(1, Ordering::SeqCst);
        let collection = path.split('/').rev().nth(1).unwrap_or_default().to_string();
        let records = body["ids"].as_array().map_or(0, Vec::len);
        let base64 = body["embeddings"].as_array().is_some_and(|all| all.iter().all(Value::is_string));
        fake.batches.lock().unwrap().push((collection, records, base64));
        if fake.fail_upsert_from > 0 && call >= fake.fail_upsert_from {
            let error = json!({"error": "InvalidArgumentError", "message": "bad batch"});
            return (StatusCode::BAD_REQUEST, Json(error));
        }
        return (StatusCode::OK, Json(json!({})));
    }
    if path.ends_with("/delete") {
        return (StatusCode::OK, Json(json!({"deleted": 0})));
    }
    if method == Method::PUT {
        fake.metadata_updates.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::OK, Json(json!({})));
    }
    // Tenant, database, create-collection and get-collection calls: a collection's id is its name.
    let name = body["name"].as_str().map(str::to_string).unwrap_or_else(|| path.rsplit('/').next().unwrap().into());
    (StatusCode::OK, Json(json!({"id": name, "name": name, "metadata": {}})))
}

async fn start(fake: FakeChroma) -> (String, Arc<FakeChroma>) {
    let fake = Arc::new(fake);
    let app = axum::Router::new().fallback(answer).with_state(Arc::clone(&fake));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, fake)
}

fn index(url: &str, concurrency: usize) -> Arc<ChromaIndex> {
    let settings = Settings {
        chroma_host: url.to_string(),
        chroma_collection: "fake".into(),
        chroma_write_concurrency: concurrency,
        ..Settings::default()
    };
    ChromaIndex::new(&settings.chroma()).unwrap()
}

fn chunks(count: usize) -> Vec<Record> {
    (0..count)
        .map(|number| Record {
            id: format!("d{}#s0-c{number}", number % 7),
            meta: Metadata {
                tenant_id: "acme".into(),
                doc_id: format!("d{}", number % 7).into(),
                section_id: Some(format!("d{}#s0", number % 7)),
                chunk_id: Some(format!("d{}#s0-c{number}", number % 7)),
                ..Metadata::default()
            },
            text: format!("chunk {number}").into(),
            embedding: vec![1.0, number as f32],
        })
        .collect()
}

fn batch_sizes(fake: &FakeChroma) -> Vec<usize> {
    let mut sizes: Vec<usize> = fake.batches.lock().unwrap().iter().map(|batch| batch.1).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes
}

#[tokio::test]
async fn upserts_are_split_into_batches_of_at_most_1000_or_the_server_limit() {
    let (url, fake) = start(FakeChroma { max_batch_size: 5461, base64: true, ..FakeChroma::default() }).await;
    index(&url, 4).upsert(Level::Chunk, &chunks(2_500)).await.unwrap();
    assert_eq!(batch_sizes(&fake), [1000, 1000, 500]);
    assert!(fake.batches.lock().unwrap().iter().all(|(collection, _, base64)| collection == "fake_chunks" && *base64));
    assert_eq!(fake.metadata_updates.load(Ordering::SeqCst), 1, "one version bump per upsert call");
    let entries = fake.change_entries.lock().unwrap().clone();
    assert_eq!(entries.len(), 1, "one change-log entry per tenant written: {entries:?}");
    assert_eq!(entries[0]["tenant_id"], "acme");

    let (url, fake) = start(FakeChroma { max_batch_size: 300, base64: false, ..FakeChroma::default() }).await;
    index(&url, 2).upsert(Level::Chunk, &chunks(700)).await.unwrap();
    assert_eq!(batch_sizes(&fake), [300, 300, 100]);
    assert!(fake.batches.lock().unwrap().iter().all(|(_, _, base64)| !base64), "floats without base64 support");
}

#[tokio::test]
async fn no_more_batches_in_flight_than_the_write_concurrency() {
    for concurrency in [1, 3] {
        let fake = FakeChroma {
            max_batch_size: 100,
            base64: true,
            upsert_delay: Duration::from_millis(40),
            ..FakeChroma::default()
        };
        let (url, fake) = start(fake).await;
        let records = chunks(1_000);
        let snapshot = Snapshot {
            docs: vec![Record {
                id: "d0".into(),
                meta: Metadata { section_id: None, chunk_id: None, ..records[0].meta.clone() },
                ..records[0].clone()
            }],
            chunks: records,
            ..Snapshot::default()
        };
        // The three levels are written at once; the limit holds across them.
        index(&url, concurrency).replace_tenants(&snapshot).await.unwrap();
        assert_eq!(batch_sizes(&fake).iter().sum::<usize>(), 1_001);
        assert_eq!(fake.max_in_flight.load(Ordering::SeqCst), concurrency, "concurrency {concurrency}");
    }
}

#[tokio::test]
async fn a_failed_batch_fails_the_write_and_still_bumps_the_version() {
    let fake = FakeChroma { max_batch_size: 100, base64: true, fail_upsert_from: 3, ..FakeChroma::default() };
    let (url, fake) = start(fake).await;
    let error = index(&url, 2).upsert(Level::Chunk, &chunks(1_000)).await.unwrap_err();
    assert_eq!(error.kind, IndexErrorKind::BadRequest, "{error}");
    assert!(error.message.contains("bad batch"), "{error}");
    assert!(fake.upserts.load(Ordering::SeqCst) < 10, "batches after the failure are not sent");
    assert_eq!(fake.metadata_updates.load(Ordering::SeqCst), 1, "earlier batches may be written: readers must reload");
}

mod retries {
    use crate::common::fake_http::{FakeResponse, FakeServer};
    use retrieval_engine::{ChromaIndex, IndexErrorKind};
    use retrieval_service::config::Settings;
    use serde_json::json;
    use std::time::{Duration, Instant};

    fn ingest_index(url: &str) -> std::sync::Arc<ChromaIndex> {
        let settings = Settings {
            chroma_host: url.to_string(),
            chroma_collection: "fake".into(),
            chroma_ingest_timeout_seconds: 0.3,
            ..Settings::default()
        };
        ChromaIndex::for_ingest(&settings.chroma()).unwrap()
    }

    fn collection() -> FakeResponse {
        FakeResponse::json(200, &json!({"id": "c1", "metadata": {"index_version": "123-1-0"}}))
    }

    /// The batch job's calls survive a Chroma that does not answer in time or answers 5xx: each
    /// is tried again after the policy's backoff (0.5 s, then 1 s).
    #[tokio::test]
    async fn ingest_calls_retry_timeouts_and_server_errors() {
        let fake = FakeServer::start(vec![FakeResponse::hang(), FakeResponse::new(503, "{}"), collection()]).await;
        assert_eq!(ingest_index(&fake.url()).stored_version().await.unwrap(), Some(123));
        assert_eq!(fake.request_count(), 3);
    }

    /// A 429 waits what `Retry-After` asks (0 s here) instead of the policy's 0.5 s.
    #[tokio::test]
    async fn a_429_is_retried_after_what_retry_after_asks() {
        let busy = FakeResponse::new(429, r#"{"error":"TooManyRequests","message":"slow down"}"#)
            .with_header("retry-after", "0");
        let fake = FakeServer::start(vec![busy, collection()]).await;
        let started = Instant::now();
        assert_eq!(ingest_index(&fake.url()).stored_version().await.unwrap(), Some(123));
        assert_eq!(fake.request_count(), 2);
        assert!(started.elapsed() < Duration::from_millis(400), "took {:?}", started.elapsed());
    }

    /// A connection dropped without an answer (Chroma restarting) is retried; a 4xx answer is not.
    #[tokio::test]
    async fn a_dropped_connection_is_retried_and_a_bad_request_is_not() {
        let bad = FakeResponse::new(400, r#"{"error":"InvalidArgumentError","message":"no"}"#);
        let fake = FakeServer::start(vec![bad, collection()]).await;
        let error = ingest_index(&fake.url()).stored_version().await.unwrap_err();
        assert_eq!((error.kind, fake.request_count()), (IndexErrorKind::BadRequest, 1));

        // The first connection is closed without an answer, the next ones are answered.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&accepted);
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                if counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    continue;
                }
                let body = r#"{"id":"c1","metadata":{"index_version":"123-1-0"}}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        assert_eq!(ingest_index(&url).stored_version().await.unwrap(), Some(123));
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
