//! The snapshot is rewritten while searches run: they see the new data and none fails.

use crate::common::send;
use axum::http::StatusCode;
use retrieval_engine::{fixtures, write_snapshot_file, InMemoryIndex, PseudoEmbedder, Record};
use retrieval_service::config::Settings;
use retrieval_service::startup;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn snapshot_with_extra_doc(generation: usize) -> retrieval_engine::Snapshot {
    let mut snapshot = fixtures::snapshot();
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let template = snapshot.chunks[0].clone();
    let doc_id = format!("docs/new/generation-{generation}");
    let text = format!("Новая страница поколения {generation}: квантовый телепорт");
    let mut doc = snapshot.docs[0].clone();
    doc.id = doc_id.clone();
    doc.meta.doc_id = doc_id.as_str().into();
    doc.text = text.as_str().into();
    doc.embedding = embedder.embed_one(&text);
    let mut chunk: Record = template;
    chunk.id = format!("{doc_id}#s1-c1");
    chunk.meta.doc_id = doc_id.as_str().into();
    chunk.meta.section_id = Some(format!("{doc_id}#s1"));
    chunk.meta.chunk_id = Some(chunk.id.clone());
    chunk.text = text.as_str().into();
    chunk.embedding = embedder.embed_one(&text);
    snapshot.docs.push(doc);
    snapshot.chunks.push(chunk);
    snapshot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rewriting_the_snapshot_under_load_drops_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    let index = Arc::new(InMemoryIndex::from_file(&path));
    index.spawn_reloader(Duration::from_millis(50));
    let settings = Settings { embedding_dimension: fixtures::DIMENSION, min_score: -1.0, ..Settings::default() };
    let state = startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));

    let stop = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (state, stop, completed) = (state.clone(), stop.clone(), completed.clone());
        workers.push(tokio::spawn(async move {
            let body = json!({"query": "квантовый телепорт", "tenant_id": "t1", "include_steps": true}).to_string();
            while !stop.load(Ordering::Relaxed) {
                let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
                assert_eq!(status, StatusCode::OK, "a request failed during reload: {response}");
                completed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    for generation in 1..=3 {
        write_snapshot_file(&path, &snapshot_with_extra_doc(generation)).unwrap();
        let wanted = format!("docs/new/generation-{generation}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = json!({"query": "квантовый телепорт", "tenant_id": "t1", "include_steps": true}).to_string();
            let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
            assert_eq!(status, StatusCode::OK);
            if response["steps"]["docs"].to_string().contains(&wanted) {
                break;
            }
            assert!(Instant::now() < deadline, "generation {generation} never became visible");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // A broken write keeps the last good index serving.
    std::fs::write(&path, "{ broken").unwrap();
    // The reloader polls every 50 ms; under a loaded machine its read may take longer: wait until
    // it has seen the broken file (the checks below then say what it reported).
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (_, health) = send(&state, "GET", "/health", None).await;
        if health["replica"]["last_refresh_error"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    let body = json!({"query": "квантовый телепорт", "tenant_id": "t1", "include_steps": true}).to_string();
    let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(response["steps"]["docs"].to_string().contains("generation-3"));
    assert!(completed.load(Ordering::Relaxed) > 10);
    // Ops see the replica's age and why the last refresh failed, and the records loaded so far.
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert!(health["replica"]["age_seconds"].as_f64().is_some(), "{health}");
    // Why, in the service's words: never the snapshot's path on the server.
    let error = health["replica"]["last_refresh_error"].as_str().unwrap_or_default();
    assert!(error.contains("corrupted") && !error.contains(&*dir.path().to_string_lossy()), "{health}");
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap().to_string();
    let loaded = metrics
        .lines()
        .find_map(|line| line.strip_prefix("retrieval_replica_records_loaded_total "))
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no records counter in {metrics}"));
    let per_load =
        fixtures::snapshot().docs.len() + fixtures::snapshot().sections.len() + fixtures::snapshot().chunks.len();
    assert!(loaded >= 4 * per_load as u64, "four loads at least: {loaded}");
    assert!(metrics.contains("retrieval_tenant_records{tenant=\"t1\",level=\"doc\"}"), "{metrics}");
    assert!(metrics.contains("retrieval_replica_last_load_seconds "), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_can_wait_to_read_its_own_write() {
    use retrieval_engine::file_version;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    let first = file_version(&path).unwrap();
    let index = Arc::new(InMemoryIndex::from_file(&path));
    index.spawn_reloader(Duration::from_millis(50));
    let settings = Settings {
        embedding_dimension: fixtures::DIMENSION,
        min_score: -1.0,
        index_version_wait_seconds: 3.0,
        ..Settings::default()
    };
    let state = startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let search = |min: Option<String>| {
        let state = state.clone();
        async move {
            let mut body = json!({"query": "квантовый телепорт", "tenant_id": "t1", "include_steps": true});
            if let Some(min) = min {
                body["min_index_version"] = json!(min);
            }
            send(&state, "POST", "/internal/retrieval/search", Some(&body.to_string())).await
        }
    };
    let (status, body) = search(None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["index_version"], json!(first.to_string()), "the answer names the version it read");
    let (_, stats) = send(&state, "GET", "/internal/retrieval/stats?tenant_id=t1", None).await;
    assert_eq!(stats["index_version"], json!(first.to_string()));

    // A write (what `ingest` does), then a search asking for exactly that version: it waits for
    // the reload instead of answering from the old snapshot.
    std::thread::sleep(Duration::from_millis(20));
    write_snapshot_file(&path, &snapshot_with_extra_doc(7)).unwrap();
    let written = file_version(&path).unwrap();
    assert!(written > first);
    let (status, body) = search(Some(written.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["index_version"].as_str().unwrap().parse::<u64>().unwrap() >= written);
    assert!(body["steps"]["docs"].to_string().contains("generation-7"), "the write is visible: {body}");

    // A version that never comes: 503 index_not_ready after the wait, not a hang.
    let started = Instant::now();
    let (status, body) = search(Some((written + 1_000_000_000_000).to_string())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "index_not_ready");
    assert!(started.elapsed() >= Duration::from_secs(3), "it waited {:?}", started.elapsed());
    let (status, body) = search(Some("v1".into())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // A fixed snapshot never changes: asking it for a version is answered at once.
    let fixed = crate::common::fixture_state(|_| {});
    let body = json!({"query": "x", "tenant_id": "t1", "min_index_version": "1"}).to_string();
    let started = Instant::now();
    let (status, body) = send(&fixed, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("index_not_ready")));
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// A snapshot file that turns unreadable leaves the last good snapshot answering, flagged as
/// `backend_stale` (the same replica engine as Chroma's), and `/health` names the refresh error;
/// a good file clears both.
#[tokio::test]
async fn a_broken_snapshot_file_is_answered_from_the_last_good_one_flagged_stale() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    let index = Arc::new(InMemoryIndex::from_file(&path));
    let settings = Settings { embedding_dimension: fixtures::DIMENSION, min_score: -1.0, ..Settings::default() };
    let state = startup::state_with(settings, index.clone(), Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let body = json!({"query": "установка SDK", "tenant_id": "t1"}).to_string();
    let stale = |response: &serde_json::Value| {
        response["degradations"].as_array().unwrap().iter().any(|degradation| degradation["code"] == "backend_stale")
    };
    let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!stale(&response), "{response}");

    std::fs::write(&path, "{\"format_version\": 1, \"docs\": [").unwrap();
    assert!(!index.reload_if_changed());
    let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert!(!response["hits"].as_array().unwrap().is_empty(), "the last good snapshot still answers");
    assert!(stale(&response), "{response}");
    let (_, health) = send(&state, "GET", "/health", None).await;
    let error = health["replica"]["last_refresh_error"].as_str().unwrap_or_default();
    assert!(error.contains("corrupted"), "{health}");

    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    assert!(index.reload_if_changed());
    let (_, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert!(!stale(&response), "{response}");
}

/// A search waiting for a far-ahead `min_index_version` waits its bounded time without holding a
/// work slot: with one slot, another search is served meanwhile.
#[tokio::test]
async fn a_version_wait_holds_no_work_slot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    let index = Arc::new(InMemoryIndex::from_file(&path));
    let settings = Settings {
        embedding_dimension: fixtures::DIMENSION,
        max_in_flight_requests: 1,
        index_version_wait_seconds: 1.0,
        ..Settings::default()
    };
    let state = startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let far = json!({"query": "SDK", "tenant_id": "t1", "min_index_version": "18446744073709551615"}).to_string();
    let waiting = {
        let state = state.clone();
        tokio::spawn(async move { send(&state, "POST", "/internal/retrieval/search", Some(&far)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let body = json!({"query": "установка SDK", "tenant_id": "t1"}).to_string();
    let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let started = Instant::now();
    let (status, response) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{response}");
    assert_eq!(response["error"]["code"], "index_not_ready");
    assert!(started.elapsed() < Duration::from_secs(2), "the wait is bounded");
}
