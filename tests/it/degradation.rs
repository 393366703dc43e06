//! Searches with a dead or hanging embedding provider and a hanging or hostile reranker still
//! answer, within their timeouts, and say what degraded.

use crate::common::fake_http;

use crate::common::send;
use axum::http::StatusCode;
use fake_http::{closed_port_url, FakeResponse, FakeServer};
use retrieval_engine::{fixtures, InMemoryIndex};
use retrieval_service::config::Settings;
use retrieval_service::{startup, AppState};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEARCH: &str = "/internal/retrieval/search";
const MARGIN: Duration = Duration::from_millis(1500);

fn state(adjust: impl FnOnce(&mut Settings)) -> AppState {
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    adjust(&mut settings);
    let embedder = startup::build_embedder(&settings, None).unwrap();
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    startup::state_with(settings, index, embedder)
}

fn codes(body: &Value) -> Vec<String> {
    body["degradations"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap().to_string()).collect()
}

async fn timed_search(state: &AppState, body: Value) -> (StatusCode, Value, Duration) {
    let started = Instant::now();
    let (status, body) = send(state, "POST", SEARCH, Some(&body.to_string())).await;
    (status, body, started.elapsed())
}

#[tokio::test]
async fn embedding_server_down_degrades_to_pseudo_embeddings() {
    let url = closed_port_url().await;
    let state = state(|s| {
        s.embedding_api_base = url.clone();
        s.embedding_timeout_seconds = 1.0;
        s.embedding_retry_delay_seconds = 0.05;
    });
    let (status, body, elapsed) =
        timed_search(&state, json!({"query": "Подключение Android SDK через Gradle", "tenant_id": "t1"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(codes(&body), vec!["embedding_fallback"]);
    assert_eq!(body["hits"][0]["doc_id"], "sdk/android/install", "pseudo-embedding + BM25 still rank sensibly");
    assert!(elapsed < Duration::from_secs(1) + MARGIN, "{elapsed:?}");
}

#[tokio::test]
async fn hanging_embedding_server_costs_at_most_its_timeout() {
    let server = FakeServer::start(vec![FakeResponse::hang()]).await;
    let state = state(|s| {
        s.embedding_api_base = server.url();
        s.embedding_timeout_seconds = 0.5;
    });
    let (status, body, elapsed) = timed_search(&state, json!({"query": "теги", "tenant_id": "t1"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(codes(&body), vec!["embedding_fallback"]);
    assert!(elapsed < Duration::from_millis(500) + MARGIN, "{elapsed:?}");
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    assert!(metrics.as_str().unwrap().contains("retrieval_embedding_fallbacks_total 1\n"), "{metrics}");
}

#[tokio::test]
async fn hanging_reranker_keeps_the_original_order_within_its_timeout() {
    let server = FakeServer::start(vec![FakeResponse::hang()]).await;
    let state = state(|s| {
        s.rerank_api_base = server.url();
        s.rerank_timeout_seconds = 0.5;
        s.rerank_enabled = true;
    });
    let query =
        json!({"query": "обязательные теги оператор администратор", "tenant_id": "t1", "rerank_enabled": false});
    let (_, baseline, _) = timed_search(&state, query.clone()).await;
    let mut with_rerank = query;
    with_rerank["rerank_enabled"] = json!(true);
    let (status, body, elapsed) = timed_search(&state, with_rerank).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(codes(&body), vec!["rerank_failed"]);
    assert_eq!(body["hits"], baseline["hits"], "failed rerank keeps the original order");
    assert!(elapsed < Duration::from_millis(500) + MARGIN, "{elapsed:?}");
}

#[tokio::test]
async fn reranker_answer_reorders_sections_and_garbage_is_reported() {
    let reversed = FakeServer::start_with(|request, _| {
        let prompt = request.json().to_string();
        // Score the admin section highest whatever the retrieval order was.
        let content = if prompt.contains("docs/admin/tags#s1") {
            "Here you go:\n```json\n[{\"section_id\": \"docs/admin/tags#s1\", \"score\": 0.99}, {\"section_id\": \"bogus\", \"score\": 5}]\n```"
        } else {
            "[]"
        };
        FakeResponse::json(200, &json!({"choices": [{"message": {"role": "assistant", "content": content}}]}))
    })
    .await;
    let state = state(|s| {
        s.rerank_api_base = reversed.url();
        s.rerank_timeout_seconds = 2.0;
    });
    let query = json!({"query": "обязательные теги при закрытии чата", "tenant_id": "t1", "explain": true});
    let (_, baseline, _) = timed_search(&state, query.clone()).await;
    let mut with_rerank = query.clone();
    with_rerank["rerank_enabled"] = json!(true);
    let (status, body, _) = timed_search(&state, with_rerank).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(codes(&body).is_empty(), "{body}");
    assert_eq!(body["hits"][0]["id"], "docs/admin/tags#s1");
    assert!((body["hits"][0]["explain"]["rerank_score"].as_f64().unwrap() - 0.99).abs() < 1e-6);
    let mut before: Vec<String> = baseline["hits"].as_array().unwrap().iter().map(|h| h["id"].to_string()).collect();
    let mut after: Vec<String> = body["hits"].as_array().unwrap().iter().map(|h| h["id"].to_string()).collect();
    before.sort();
    after.sort();
    assert_eq!(before, after, "rerank keeps every section exactly once");

    let garbage = FakeServer::start(vec![FakeResponse::json(
        200,
        &json!({"choices": [{"message": {"content": "I think the second one"}}]}),
    )])
    .await;
    let garbage_state = state_for(garbage.url());
    let mut with_rerank = query;
    with_rerank["rerank_enabled"] = json!(true);
    let (status, body, _) = timed_search(&garbage_state, with_rerank).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(codes(&body), vec!["rerank_failed"]);
}

fn state_for(rerank_url: String) -> AppState {
    state(|s| s.rerank_api_base = rerank_url)
}

#[tokio::test]
async fn rerank_requested_without_an_endpoint_is_reported() {
    let state = state(|_| {});
    let (status, body, _) =
        timed_search(&state, json!({"query": "теги", "tenant_id": "t1", "rerank_enabled": true})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(codes(&body), vec!["rerank_unavailable"]);
}

#[tokio::test]
async fn a_sure_theme_the_hits_do_not_support_does_not_filter() {
    let dir = tempfile::tempdir().unwrap();
    let themes = dir.path().join("themes.yaml");
    std::fs::write(
        &themes,
        "themes:\n  - id: ghost\n    display_name: Ghost\n    domain: nowhere\n    keywords: [gradle]\n",
    )
    .unwrap();
    let state = state(|s| s.themes_path = themes.clone());
    let (status, body, _) = timed_search(&state, json!({"query": "Подключение через Gradle", "tenant_id": "t1"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["routing"]["primary_theme"], "ghost");
    assert!(body["routing"]["hard_filter"].is_object(), "{}", body["routing"]);
    // A theme named by a keyword filters only when the best unfiltered hits are of that theme;
    // here none is, so the search is answered unfiltered (never emptied by a bare mention).
    assert_eq!(body["routing"]["filter_applied"], false);
    assert!(codes(&body).is_empty(), "{body}");
    assert!(!body["hits"].as_array().unwrap().is_empty());
}
