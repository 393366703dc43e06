//! One behaviour suite, three backends: the same searches and windows through the HTTP router on
//! the in-memory backend, on a real Chroma server (`RETR_TEST_CHROMA_URL`) and on a real
//! PostgreSQL server (`RETR_TEST_POSTGRES_URL`), both started by scripts/test.sh, must give the
//! same hits in the same order, and never another tenant's data.

use crate::common::send;
use axum::http::StatusCode;
use retrieval_engine::{fixtures, ChromaIndex, InMemoryIndex, PseudoEmbedder};
use retrieval_service::config::{Settings, VectorBackend};
use retrieval_service::{startup, AppState};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The Chroma server's URL (`RETR_TEST_CHROMA_URL`); a missing server fails the test (see `common::needs`).
fn chroma_url() -> String {
    crate::common::needs::required("chroma")
}

fn base_settings() -> Settings {
    Settings { embedding_dimension: fixtures::DIMENSION, index_reload_interval_ms: 50, ..Settings::default() }
}

fn memory_state() -> AppState {
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    startup::state_with(base_settings(), index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

async fn chroma_state(url: &str) -> AppState {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000_000;
    let settings = Settings {
        mock_mode: false,
        vector_backend: VectorBackend::Chroma,
        chroma_host: url.to_string(),
        chroma_collection: format!("suite{nanos}"),
        ..base_settings()
    };
    let index = ChromaIndex::new(&settings.chroma()).unwrap();
    index.replace_tenants(&fixtures::snapshot()).await.unwrap();
    index.refresh().await.unwrap();
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

fn requests() -> Vec<(&'static str, &'static str, Value)> {
    let search = "/internal/retrieval/search";
    vec![
        (
            search,
            "plain",
            json!({"query": "Подключение Android SDK через Gradle", "tenant_id": "t1", "include_steps": true}),
        ),
        (
            search,
            "filters off, other tenant's doc id",
            json!({"query": "секретного продукта Acme пароль", "tenant_id": "t1", "enable_filters": false, "doc_ids": ["acme/secret-install"], "include_steps": true, "explain": true}),
        ),
        (
            search,
            "other tenant's doc id",
            json!({"query": "секретного продукта Acme", "tenant_id": "t1", "doc_ids": ["acme/secret-install"], "include_steps": true}),
        ),
        (
            search,
            "tags",
            json!({"query": "установка", "tenant_id": "t1", "filters": {"tags": ["ios"]}, "include_steps": true}),
        ),
        (
            search,
            "product",
            json!({"query": "теги", "tenant_id": "t1", "filters": {"product": "chatcenter"}, "include_steps": true}),
        ),
        (
            search,
            "section ids",
            json!({"query": "теги", "tenant_id": "t1", "section_ids": ["docs/admin/tags#s1"], "include_steps": true}),
        ),
        (
            search,
            "flat doc, chunk hits",
            json!({"query": "лицензия продлевается", "tenant_id": "t1", "doc_ids": ["docs/faq/flat"], "include_steps": true}),
        ),
        (
            search,
            "padding",
            json!({"query": "Gradle", "tenant_id": "t1", "max_results": 1, "include_steps": true, "explain": true}),
        ),
        (search, "tenant t2", json!({"query": "Gradle пароль", "tenant_id": "t2", "include_steps": true})),
        (search, "unknown tenant", json!({"query": "Gradle", "tenant_id": "t3"})),
        (
            "/internal/retrieval/chunks/window",
            "window",
            json!({"tenant_id": "t1", "doc_id": "sdk/android/install", "anchor_chunk_id": "sdk/android/install#s1-c2", "window_before": 2, "window_after": 2}),
        ),
        (
            "/internal/retrieval/chunks/window",
            "window across tenants",
            json!({"tenant_id": "t1", "doc_id": "acme/secret-install", "anchor_chunk_id": "acme/secret-install#s1-c1"}),
        ),
        (
            "/internal/retrieval/context",
            "context",
            json!({"query": "обязательные теги", "tenant_id": "t1", "max_context_chars": 3000}),
        ),
    ]
}

/// The comparable part of a response: every hit list with ids, and scores rounded.
fn comparable(body: &Value) -> Vec<(String, String, i64)> {
    let mut rows = Vec::new();
    let lists = [
        ("hits", &body["hits"]),
        ("docs", &body["steps"]["docs"]),
        ("sections", &body["steps"]["sections"]),
        ("chunks", &body["steps"]["chunks"]),
        ("window", &body["chunks"]),
        ("sources", &body["sources"]),
    ];
    for (name, list) in lists {
        for item in list.as_array().into_iter().flatten() {
            let id = item["id"].as_str().or(item["chunk_id"].as_str()).unwrap_or_default().to_string();
            let score = (item["score"].as_f64().or(item["relevance"].as_f64()).unwrap_or(0.0) * 1e4).round() as i64;
            rows.push((name.to_string(), id, score));
        }
    }
    rows
}

fn assert_isolated(case: &str, tenant: &str, body: &Value) {
    let text = body.to_string();
    // Markers only found in the other tenant's records (titles, texts, ids), never in a request.
    let foreign = if tenant == "t1" { ["Acme", "acme-secret"] } else { ["sdk/ios", "docs/agent"] };
    for marker in foreign {
        assert!(!text.contains(marker), "{case}: response of tenant {tenant} leaks {marker}: {text}");
    }
}

async fn run_suite(state: &AppState) -> Vec<(StatusCode, Vec<(String, String, i64)>)> {
    let mut results = Vec::new();
    for (uri, case, body) in requests() {
        let (status, response) = send(state, "POST", uri, Some(&body.to_string())).await;
        let tenant = body["tenant_id"].as_str().unwrap();
        assert_isolated(case, tenant, &response);
        results.push((status, comparable(&response)));
    }
    results
}

#[tokio::test]
async fn in_memory_backend_passes_the_suite() {
    let results = run_suite(&memory_state()).await;
    let statuses: Vec<u16> = results.iter().map(|(status, _)| status.as_u16()).collect();
    assert_eq!(statuses, vec![200, 200, 200, 200, 200, 200, 200, 200, 200, 404, 200, 404, 200]);
    assert!(results[0].1.iter().any(|(list, id, _)| list == "hits" && id.starts_with("sdk/android/install")));
    assert!(results[2].1.is_empty(), "a t1 filter on a t2 doc id finds nothing: {:?}", results[2].1);
}

#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn chroma_backend_gives_the_same_answers() {
    let url = chroma_url();
    let memory = run_suite(&memory_state()).await;
    let chroma = run_suite(&chroma_state(&url).await).await;
    assert_same_answers(&memory, &chroma);
}

/// The PostgreSQL backend's replica: the fixture written through the ingest writer, then served.
async fn postgres_state(url: &str) -> AppState {
    let url = crate::postgres_backend::fresh_database(url).await;
    crate::postgres_backend::write_snapshot(&url, &fixtures::snapshot()).await;
    let settings = crate::postgres_backend::settings(&url);
    let index = retrieval_engine::PostgresIndex::new(&settings.postgres()).unwrap();
    index.refresh().await.unwrap();
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn postgres_backend_gives_the_same_answers() {
    let url = crate::postgres_backend::postgres_url();
    let memory = run_suite(&memory_state()).await;
    let postgres = run_suite(&postgres_state(&url).await).await;
    assert_same_answers(&memory, &postgres);
}

/// The PostgreSQL backend searched in the database (`RETR_POSTGRES_SEARCH=database`): the fixture
/// written through the ingest writer (which then builds the HNSW indexes and the BM25 terms),
/// nothing loaded.
async fn postgres_in_database_state(url: &str) -> AppState {
    let url = crate::postgres_backend::fresh_database(url).await;
    let settings = Settings {
        postgres_search: retrieval_engine::PostgresSearchMode::Database,
        ..crate::postgres_backend::settings(&url)
    };
    crate::postgres_backend::write_snapshot_with(&settings, &fixtures::snapshot()).await;
    let index = retrieval_engine::PostgresSearchIndex::new(&settings.postgres()).unwrap();
    index.poll().await.unwrap();
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn postgres_searched_in_the_database_gives_the_same_answers() {
    let url = crate::postgres_backend::postgres_url();
    let memory = run_suite(&memory_state()).await;
    let postgres = run_suite(&postgres_in_database_state(&url).await).await;
    assert_same_answers(&memory, &postgres);
}

/// Each request's status and comparable hits (`comparable`).
type SuiteResults = [(StatusCode, Vec<(String, String, i64)>)];

fn assert_same_answers(memory: &SuiteResults, other: &SuiteResults) {
    assert_eq!(memory.len(), other.len());
    for ((case_uri, case, _), (expected, got)) in requests().iter().zip(memory.iter().zip(other)) {
        assert_eq!(expected.0, got.0, "{case_uri} {case}: status differs");
        assert_eq!(expected.1.len(), got.1.len(), "{case}: {:?} vs {:?}", expected.1, got.1);
        for (left, right) in expected.1.iter().zip(&got.1) {
            assert_eq!((&left.0, &left.1), (&right.0, &right.1), "{case}: order differs");
            assert!((left.2 - right.2).abs() <= 1, "{case}: score of {} differs: {} vs {}", left.1, left.2, right.2);
        }
    }
}

#[tokio::test]
async fn chroma_down_is_a_quick_503_not_a_hang() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let settings = Settings {
        mock_mode: false,
        vector_backend: VectorBackend::Chroma,
        chroma_host: format!("http://127.0.0.1:{port}"),
        chroma_timeout_seconds: 1.0,
        ..base_settings()
    };
    let index = ChromaIndex::new(&settings.chroma()).unwrap();
    assert!(index.refresh().await.is_err());
    let state = startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let started = std::time::Instant::now();
    let (status, body) =
        send(&state, "POST", "/internal/retrieval/search", Some(&json!({"query": "x", "tenant_id": "t1"}).to_string()))
            .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "backend_unavailable");
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health["backend"], "chroma");
    assert!(health["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
}
