//! Router tests for every endpoint and every class of bad input, via `app(state).oneshot`.

use crate::common::{error_code, fixture_state, send, send_request};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

const SEARCH: &str = "/internal/retrieval/search";

fn ids(body: &Value) -> Vec<String> {
    body["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn search_returns_hits_without_text_and_echoes_trace_id() {
    let state = fixture_state(|_| {});
    let body = json!({"query": "Подключение Android SDK через Gradle", "tenant_id": "t1", "trace_id": "tr-1", "include_steps": true});
    let (status, body) = send(&state, "POST", SEARCH, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["trace_id"], "tr-1");
    assert_eq!(body["hits"][0]["doc_id"], "sdk/android/install");
    for hit in body["hits"].as_array().unwrap().iter().chain(body["steps"]["chunks"].as_array().unwrap()) {
        assert!(hit.get("text").is_none(), "hit carries text: {hit}");
        assert!(!hit.to_string().contains("Добавьте зависимость"), "hit leaks chunk text: {hit}");
    }
    assert!(!body["steps"]["docs"].as_array().unwrap().is_empty());
    let (_, without_steps) =
        send(&state, "POST", SEARCH, Some(&json!({"query": "Gradle", "tenant_id": "t1"}).to_string())).await;
    assert!(without_steps.get("steps").is_none());
}

#[tokio::test]
async fn max_results_above_cap_is_capped_not_rejected() {
    let state = fixture_state(|_| {});
    let body = json!({"query": "теги", "tenant_id": "t1", "max_results": 10_000});
    let (status, body) = send(&state, "POST", SEARCH, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["hits"].as_array().unwrap().len() <= 50);
}

#[tokio::test]
async fn bad_search_inputs_get_4xx_json_errors() {
    let state = fixture_state(|_| {});
    let long_query = "а".repeat(2001);
    let cases: Vec<(String, StatusCode, &str)> = vec![
        ("{not json".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        (json!({"tenant_id": "t1"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
        (json!({"query": "x"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
        (json!({"query": 5, "tenant_id": "t1"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
        (
            json!({"query": "x", "tenant_id": "t1", "max_results": "ten"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": "x", "tenant_id": "t1", "max_results": -3}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": "x", "tenant_id": "t1", "max_results": 0}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": "  \n\t ", "tenant_id": "t1"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": long_query, "tenant_id": "t1"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": "x", "tenant_id": "t1", "unknown": 1}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": "x", "tenant_id": "t1", "filters": {"platform": "ios"}}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            json!({"query": "x", "tenant_id": "t1", "query_embedding": [1.0, 2.0]}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (json!({"query": "x", "tenant_id": ""}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
        (json!({"query": "x", "tenant_id": "nobody"}).to_string(), StatusCode::NOT_FOUND, "tenant_not_found"),
        (json!([1, 2]).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
    ];
    for (body, status, code) in cases {
        let (got_status, got) = send(&state, "POST", SEARCH, Some(&body)).await;
        assert_eq!(got_status, status, "{body} → {got}");
        assert_eq!(error_code(&got), code, "{body}");
    }
}

#[tokio::test]
async fn missing_content_type_and_huge_bodies_are_4xx() {
    let state = fixture_state(|s| s.max_body_bytes = 4096);
    let request = Request::post(SEARCH).body(Body::from(r#"{"query":"x","tenant_id":"t1"}"#)).unwrap();
    let (status, body) = send_request(&state, request).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(error_code(&body), "unsupported_media_type");
    let huge = json!({"query": "x".repeat(10_000), "tenant_id": "t1"}).to_string();
    let (status, body) = send(&state, "POST", SEARCH, Some(&huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(error_code(&body), "payload_too_large");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json_errors() {
    let state = fixture_state(|_| {});
    let (status, body) = send(&state, "GET", "/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(error_code(&body), "route_not_found");
    let (status, body) = send(&state, "GET", SEARCH, None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(error_code(&body), "method_not_allowed");
}

#[tokio::test]
async fn config_get_update_validate_and_apply_without_restart() {
    let state = fixture_state(|_| {});
    let (status, config) = send(&state, "GET", "/internal/retrieval/config", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(config["max_results"], 10);
    assert!(!config.to_string().contains("api_key"));

    let (status, updated) =
        send(&state, "POST", "/internal/retrieval/config", Some(r#"{"max_results": 1, "min_docs": 0}"#)).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["max_results"], 1);
    assert_eq!(updated["doc_top_k"], config["doc_top_k"]);
    let (_, body) = send(&state, "POST", SEARCH, Some(&json!({"query": "теги", "tenant_id": "t1"}).to_string())).await;
    assert_eq!(ids(&body).len(), 1, "runtime max_results applies to the next request");

    for bad in [
        r#"{"max_results": 51}"#,
        r#"{"doc_top_k": 0}"#,
        r#"{"min_score": 2}"#,
        r#"{"max_results": 5, "bogus": true}"#,
        r#"{"theme_router_mode": "magic"}"#,
        r#"{"rerank_enabled": true}"#,
        r#"{"max_results": "5"}"#,
    ] {
        let (status, body) = send(&state, "POST", "/internal/retrieval/config", Some(bad)).await;
        assert!(status == StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {status} {body}");
        assert_eq!(error_code(&body), "invalid_request");
    }
    let (_, mut after) = send(&state, "GET", "/internal/retrieval/config", None).await;
    // GET also names the tuning files in use; the settings are the rest.
    assert!(after.as_object_mut().unwrap().remove("tuning").is_some(), "{after}");
    assert_eq!(after, updated, "rejected updates change nothing");
}

#[tokio::test]
async fn window_endpoint_returns_text_and_404s_across_tenants() {
    let state = fixture_state(|_| {});
    let uri = "/internal/retrieval/chunks/window";
    let body = json!({"tenant_id": "t1", "doc_id": "sdk/android/install", "anchor_chunk_id": "sdk/android/install#s1-c2", "window_before": 1, "window_after": 1});
    let (status, body) = send(&state, "POST", uri, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let chunks = body["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[1]["chunk_id"], "sdk/android/install#s1-c2");
    assert!(chunks[0]["text"].as_str().unwrap().contains("build.gradle"));
    assert_eq!(chunks[2]["page"], 1);

    let other_tenant =
        json!({"tenant_id": "t1", "doc_id": "acme/secret-install", "anchor_chunk_id": "acme/secret-install#s1-c1"});
    let (status, body) = send(&state, "POST", uri, Some(&other_tenant.to_string())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(error_code(&body), "not_found");
    assert!(!body.to_string().contains("acme-secret"));

    for bad in [
        json!({"tenant_id": "t1", "doc_id": "sdk/android/install", "anchor_chunk_id": "x", "window_before": -1}),
        json!({"tenant_id": "t1", "doc_id": "sdk/android/install", "anchor_chunk_id": "x", "window_after": 1000}),
        json!({"tenant_id": "t1", "doc_id": "", "anchor_chunk_id": "x"}),
        json!({"tenant_id": "t1", "doc_id": "sdk/android/install"}),
    ] {
        let (status, body) = send(&state, "POST", uri, Some(&bad.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {body}");
    }
    let missing_anchor = json!({"tenant_id": "t1", "doc_id": "sdk/android/install", "anchor_chunk_id": "nope"});
    let (status, _) = send(&state, "POST", uri, Some(&missing_anchor.to_string())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn health_stats_and_metrics() {
    let state = fixture_state(|_| {});
    for uri in ["/health", "/internal/retrieval/health"] {
        let (status, body) = send(&state, "GET", uri, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["status"], "ok");
        assert_eq!(body["backend"], "memory");
    }
    let (status, body) = send(&state, "GET", "/internal/retrieval/stats?tenant_id=t1", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["counts"]["docs"], 6);
    assert!(!body.to_string().contains("acme"), "stats leak another tenant: {body}");
    let (status, body) = send(&state, "GET", "/internal/retrieval/stats", None).await;
    assert_eq!((status, error_code(&body).as_str()), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"));
    let (status, _) = send(&state, "GET", "/internal/retrieval/stats?tenant_id=nobody", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    send(&state, "POST", SEARCH, Some(&json!({"query": "теги", "tenant_id": "t1"}).to_string())).await;
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request).await.unwrap();
    assert!(response.headers().contains_key("x-request-id"));
    let (_, text) = send(&state, "GET", "/metrics", None).await;
    let text = text.as_str().unwrap().to_string();
    assert!(text.contains("retrieval_searches_total 1"), "{text}");
    assert!(text.contains("retrieval_search_duration_seconds_count 1"), "{text}");
    // Per route, method and status; the 404 of a tenant-less stats call is counted under its route.
    let search_line =
        "retrieval_http_request_duration_seconds_count{route=\"/internal/retrieval/search\",method=\"POST\",status=\"200\"} 1";
    assert!(text.contains(search_line), "{text}");
    assert!(text.contains("route=\"/internal/retrieval/stats\",method=\"GET\",status=\"404\"}"), "{text}");
    // The /metrics request itself is in flight while it renders.
    assert!(text.contains("retrieval_http_requests_in_flight 1"), "{text}");
}

#[tokio::test]
async fn missing_snapshot_is_a_clear_503_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.json");
    let settings = retrieval_service::config::Settings { index_path: Some(path.clone()), ..Default::default() };
    let index = std::sync::Arc::new(retrieval_engine::InMemoryIndex::from_file(&path));
    let state = retrieval_service::startup::state_with(
        settings,
        index.clone(),
        std::sync::Arc::new(retrieval_engine::PseudoEmbedder::new(8)),
    );
    let (status, body) =
        send(&state, "POST", SEARCH, Some(&json!({"query": "x", "tenant_id": "t1"}).to_string())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(error_code(&body), "index_not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains("run ingest"));
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health["status"], "unavailable");

    std::fs::write(&path, "{\"format_version\": 1, \"docs\": [").unwrap();
    index.reload_if_changed();
    let (status, body) =
        send(&state, "POST", SEARCH, Some(&json!({"query": "x", "tenant_id": "t1"}).to_string())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(error_code(&body), "index_corrupted");
    assert!(body["error"]["message"].as_str().unwrap().contains("index empty or corrupted"));
    std::fs::write(&path, r#"{"format_version": 1, "docs": [], "chunks": []}"#).unwrap();
    index.reload_if_changed();
    let (_, body) = send(&state, "POST", SEARCH, Some(&json!({"query": "x", "tenant_id": "t1"}).to_string())).await;
    assert_eq!(error_code(&body), "index_corrupted");
}

#[test]
fn bundled_config_file_loads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/default.toml");
    let settings = retrieval_service::config::Settings::load(Some(&path), &Default::default()).unwrap();
    assert_eq!(settings.runtime(), retrieval_service::config::Settings::default().runtime());
}

#[tokio::test]
async fn openapi_document_lists_every_route() {
    let state = fixture_state(|_| {});
    let (status, body) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    for path in [
        "/internal/retrieval/search",
        "/internal/retrieval/context",
        "/internal/retrieval/chunks/window",
        "/internal/retrieval/config",
        "/internal/retrieval/stats",
        "/health",
        "/metrics",
    ] {
        assert!(body["paths"].get(path).is_some(), "{path} missing");
    }
}

#[tokio::test]
async fn the_served_openapi_document_says_what_this_deployment_accepts() {
    let state = fixture_state(|s| s.max_query_chars = 321);
    let (_, body) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    let schemas = &body["components"]["schemas"];
    let search = &schemas["SearchRequest"]["properties"];
    assert_eq!(search["query"]["maxLength"], 321);
    let dimension = retrieval_engine::fixtures::DIMENSION;
    assert_eq!(
        (search["query_embedding"]["minItems"].as_u64(), search["query_embedding"]["maxItems"].as_u64()),
        (Some(dimension as u64), Some(dimension as u64))
    );
    let themes: Vec<&str> = search["theme"]["enum"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert!(themes.contains(&"sdk_android") && !themes.is_empty(), "{themes:?}");
    // /context: every /search field plus max_context_chars (the README's own example).
    assert!(schemas["ContextRequest"]["properties"]["max_context_chars"].is_object());
    assert!(schemas["ContextRequest"]["properties"]["query"].is_object());
    // No rerank or chat endpoint here: the update schema offers only what /config accepts.
    assert_eq!(schemas["RuntimeSettings"]["properties"]["rerank_enabled"]["enum"], json!([false]));
    let update = &schemas["RuntimeSettingsUpdate"]["properties"];
    assert_eq!(update["rerank_enabled"]["enum"], json!([false, null]));
    assert_eq!(update["max_results"]["maximum"], 50);
    // Limits come from the validation's constants; error statuses are listed on every operation.
    assert_eq!(search["doc_ids"]["maxItems"], 1000);
    let responses = &body["paths"]["/internal/retrieval/search"]["post"]["responses"];
    for status in ["200", "400", "401", "403", "404", "413", "414", "415", "422", "503", "504"] {
        assert!(responses.get(status).is_some(), "search: {status} missing");
    }
    let (status, _) = send(&state, "POST", "/internal/retrieval/config", Some(r#"{"rerank_enabled": true}"#)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // `explain` is typed: its schema names exactly the fields a real explanation has.
    let (_, found) = send(
        &state,
        "POST",
        "/internal/retrieval/search",
        Some(r#"{"query": "как подключить Android SDK", "tenant_id": "t1", "explain": true}"#),
    )
    .await;
    let explain = found["hits"][0]["explain"].as_object().expect("an explanation");
    let mut real: Vec<&String> = explain.keys().collect();
    let mut documented: Vec<&String> = schemas["Explain"]["properties"].as_object().unwrap().keys().collect();
    real.sort();
    documented.sort();
    assert_eq!(real, documented);
    // A number without a fractional part is an integer, as JSON Schema counts it.
    let (status, updated) = send(&state, "POST", "/internal/retrieval/config", Some(r#"{"max_results": 7.0}"#)).await;
    assert_eq!((status, &updated["max_results"]), (StatusCode::OK, &json!(7)));
    let (status, _) = send(&state, "POST", "/internal/retrieval/config", Some(r#"{"max_results": 7.5}"#)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // The query pattern's blank set is the service's: control characters alone are empty.
    let (status, body) = send(
        &state,
        "POST",
        "/internal/retrieval/search",
        Some(&json!({"query": "\u{1c}\u{1}", "tenant_id": "t1"}).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}
