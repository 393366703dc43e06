//! Secrets and exposure: what upstreams answer (they may echo our credentials) never reaches a
//! caller and reaches the logs redacted; `/metrics` (every tenant's id and counts) needs an
//! operator's credential when API keys are on; the OpenAPI document declares the credentials.

use crate::common::fake_http::{closed_port_url, FakeResponse, FakeServer};
use crate::common::{send, LogCapture};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use retrieval_engine::{fixtures, InMemoryIndex, PseudoEmbedder};
use retrieval_service::config::{Secret, Settings, VectorBackend};
use retrieval_service::{startup, AppState};
use serde_json::{json, Value};
use std::sync::Arc;

const EMBEDDING_KEY: &str = "sk-embed-0123456789abcdef";
const RERANK_KEY: &str = "sk-rerank-0123456789abcdef";

#[tokio::test]
async fn upstream_answers_echoing_our_keys_reach_neither_callers_nor_logs() {
    let capture = LogCapture::default();
    let _logs = capture.install();
    // The server echoes the request's credentials in its error body, as the did.
    let server = FakeServer::start_with(|request, _| {
        let body = json!({"error": "invalid key", "received": {"Authorization": request.header("authorization")}});
        FakeResponse::json(401, &body)
    })
    .await;
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    settings.embedding_api_base = server.url();
    settings.embedding_api_key = Secret::new(EMBEDDING_KEY);
    settings.rerank_api_base = server.url();
    settings.rerank_api_key = Secret::new(RERANK_KEY);
    settings.rerank_backend = retrieval_service::config::RerankBackend::RerankApi;
    let embedder = startup::build_embedder(&settings, None).unwrap();
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    let state = startup::state_with(settings, index, embedder);

    let search = json!({"query": "обязательные теги оператор", "tenant_id": "t1", "rerank_enabled": true});
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let degradations = body["degradations"].as_array().unwrap();
    let codes: Vec<&str> = degradations.iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["embedding_fallback", "rerank_failed"], "{body}");
    assert!(server.requests().iter().any(|r| r.header("authorization") == Some(&format!("Bearer {RERANK_KEY}"))));
    let answer = body.to_string();
    for leak in [EMBEDDING_KEY, RERANK_KEY, "invalid key", &server.url()] {
        assert!(!answer.contains(leak), "{leak} reached the caller: {body}");
    }
    for degradation in degradations {
        assert!(degradation["message"].as_str().unwrap().contains("HTTP 401"), "{degradation}");
    }
    let logs = capture.text();
    assert!(logs.contains("invalid key"), "the upstream's answer is logged: {logs}");
    assert!(!logs.contains(EMBEDDING_KEY) && !logs.contains(RERANK_KEY), "{logs}");
}

#[tokio::test]
async fn a_password_in_the_chroma_url_is_never_logged_nor_shown() {
    let capture = LogCapture::default();
    let _logs = capture.install();
    let closed = closed_port_url().await;
    let settings = Settings {
        mock_mode: false,
        vector_backend: VectorBackend::Chroma,
        chroma_host: closed.replace("http://", "http://svc:hunter2-secret@"),
        chroma_timeout_seconds: 1.0,
        ..Settings::default()
    };
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let index = startup::build_index(&settings, &embedder, None).await.unwrap();
    let state = startup::state_with(settings, index, Arc::new(embedder));
    let (status, body) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(!body.to_string().contains("hunter2") && !body.to_string().contains("127.0.0.1"), "{body}");
    let logs = capture.text();
    assert!(logs.contains("chroma index not loaded yet"), "{logs}");
    assert!(!logs.contains("hunter2-secret"), "{logs}");
}

#[tokio::test]
async fn a_missing_snapshot_file_is_reported_without_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private-layout").join("index.json");
    let index = Arc::new(InMemoryIndex::from_file(&path));
    let settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    let state = startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let (status, body) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let search = json!({"query": "теги", "tenant_id": "t1"}).to_string();
    let (search_status, search_body) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(search_status, StatusCode::SERVICE_UNAVAILABLE, "{search_body}");
    assert_eq!(search_body["error"]["code"], "index_not_found");
    for answer in [body, search_body] {
        assert!(!answer.to_string().contains("private-layout"), "{answer}");
    }
}

async fn get(state: &AppState, uri: &str, authorization: Option<&str>) -> (StatusCode, String) {
    let mut request = Request::get(uri);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response =
        tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request.body(Body::empty()).unwrap())
            .await
            .unwrap();
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

const TENANT_KEY: &str = "t1-frontend-2c9f4e1a7b";
const OPERATOR_KEY: &str = "ops-7d0b9a64e2c1f3a8";
const ADMIN_TOKEN: &str = "admin-token-0123456789";

/// A keys file as a Windows editor saves it: with a UTF-8 byte order mark before the first key.
fn state_with_keys(dir: &tempfile::TempDir, adjust: impl FnOnce(&mut Settings)) -> AppState {
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("\u{feff}{TENANT_KEY}: t1\n{OPERATOR_KEY}: *\n")).unwrap();
    crate::common::fixture_state(|settings| {
        settings.api_keys = keys;
        settings.admin_token = Secret::new(ADMIN_TOKEN);
        adjust(settings);
    })
}

#[tokio::test]
async fn metrics_need_an_operator_credential_when_api_keys_are_on() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_with_keys(&dir, |_| {});
    // The first key of the file authenticates although the file starts with a byte order mark.
    let (status, body) =
        get(&state, "/internal/retrieval/stats?tenant_id=t1", Some(&format!("Bearer {TENANT_KEY}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for (authorization, expected) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(format!("Bearer {TENANT_KEY}")), StatusCode::UNAUTHORIZED),
        (Some(format!("Bearer {OPERATOR_KEY}")), StatusCode::OK),
        (Some(format!("Bearer {ADMIN_TOKEN}")), StatusCode::OK),
    ] {
        let (status, body) = get(&state, "/metrics", authorization.as_deref()).await;
        assert_eq!(status, expected, "{authorization:?}: {body}");
        if status == StatusCode::UNAUTHORIZED {
            assert!(!body.contains("tenant_records"), "{body}");
        }
    }
    let open = state_with_keys(&dir, |settings| settings.metrics_open = true);
    let (status, body) = get(&open, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("retrieval_tenant_records"), "{body}");
    // Without a keys file /metrics stays open.
    let (status, _) = get(&crate::common::fixture_state(|_| {}), "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn the_openapi_document_declares_the_credentials_that_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let (_, text) = get(&state_with_keys(&dir, |_| {}), "/internal/retrieval/openapi.json", None).await;
    let document: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(document["components"]["securitySchemes"]["bearer"]["scheme"], "bearer", "{text}");
    let needs = |path: &str, method: &str| document["paths"][path][method]["security"] == json!([{"bearer": []}]);
    assert!(needs("/internal/retrieval/search", "post"));
    assert!(needs("/internal/retrieval/stats", "get"));
    assert!(needs("/internal/retrieval/config", "post"));
    assert!(needs("/metrics", "get"));
    assert!(!needs("/health", "get") && !needs("/internal/retrieval/config", "get"));

    let (_, text) = get(&crate::common::fixture_state(|_| {}), "/internal/retrieval/openapi.json", None).await;
    let document: Value = serde_json::from_str(&text).unwrap();
    assert!(document["components"].get("securitySchemes").is_none(), "{}", document["components"]);
    assert!(document["paths"]["/internal/retrieval/search"]["post"].get("security").is_none());
}

/// The chat endpoint (LLM theme router and chat reranker) echoing the key: the router's and the
/// reranker's degradations say what failed, in the service's words.
#[tokio::test]
async fn a_chat_endpoint_echoing_our_key_reaches_no_degradation() {
    let server = FakeServer::start_with(|request, _| {
        let body = json!({"error": {"message": format!("bad key {}", request.header("authorization").unwrap_or(""))}});
        FakeResponse::json(401, &body)
    })
    .await;
    let state = crate::common::fixture_state(|settings| {
        settings.rerank_api_base = server.url();
        settings.rerank_api_key = Secret::new(RERANK_KEY);
        settings.theme_router_mode = retrieval_service::config::RouterMode::Llm;
    });
    let search = json!({"query": "обязательные теги оператор", "tenant_id": "t1", "rerank_enabled": true});
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let codes: Vec<&str> =
        body["degradations"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"router_fallback") && codes.contains(&"rerank_failed"), "{body}");
    assert!(!body.to_string().contains(RERANK_KEY) && !body.to_string().contains("bad key"), "{body}");
}
