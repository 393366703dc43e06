//! Hostile-input hardening: bounded work per request, one strict JSON parsing path,
//! load shedding, admin authentication and the smaller defects, through the router.

use crate::common::{error_code, fixture_state, send};
use axum::http::StatusCode;
use serde_json::{json, Value};

const SEARCH: &str = "/internal/retrieval/search";
const CONTEXT: &str = "/internal/retrieval/context";

/// `n` distinct short ids, as the issue's repro builds them (3 characters of [A-Za-z0-9]).
fn short_ids(n: usize) -> Vec<String> {
    let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let mut ids = Vec::with_capacity(n);
    'outer: for a in &alphabet {
        for b in &alphabet {
            for c in &alphabet {
                if ids.len() == n {
                    break 'outer;
                }
                ids.push(format!("{a}{b}{c}"));
            }
        }
    }
    assert_eq!(ids.len(), n, "the alphabet has room for {n} ids");
    ids
}

fn message(body: &Value) -> String {
    body["error"]["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_huge_id_list_is_rejected_before_any_work() {
    let state = fixture_state(|s| s.max_body_bytes = 4 << 20);
    let ids = short_ids(174_000);
    let bodies = [
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "doc_ids": ids})),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"section_ids": ids}})),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "enable_filters": false, "section_ids": ids})),
        (CONTEXT, json!({"query": "x", "tenant_id": "t1", "doc_ids": ids})),
    ];
    // 174k ids: cut off while the body is parsed (no field takes over 16,384 items).
    for (uri, body) in bodies {
        let (status, answer) = send(&state, "POST", uri, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{uri}: {answer}");
        assert_eq!(error_code(&answer), "invalid_request");
        assert!(message(&answer).contains("more than 16384 items"), "{answer}");
    }
    // 5,000 ids parse, and the id-list limit names the field.
    let ids = short_ids(5_000);
    for body in [
        json!({"query": "x", "tenant_id": "t1", "doc_ids": ids}),
        json!({"query": "x", "tenant_id": "t1", "filters": {"section_ids": ids}}),
    ] {
        let (status, answer) = send(&state, "POST", SEARCH, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert!(message(&answer).contains("at most 1000"), "{answer}");
    }
}

#[tokio::test]
async fn id_lists_are_merged_and_bounded_by_their_union() {
    let state = fixture_state(|_| {});
    let ids = short_ids(1000);
    // The same 1000 ids at the top level and under `filters`: 1000 distinct ids, accepted.
    let same = json!({"query": "x", "tenant_id": "t1", "doc_ids": ids, "filters": {"doc_ids": ids}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&same.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // 600 + 401 different ids: 1001 distinct ids, rejected.
    let more = short_ids(1001);
    let split = json!({"query": "x", "tenant_id": "t1", "doc_ids": more[..600], "filters": {"doc_ids": more[600..]}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&split.to_string())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(message(&answer).contains("doc_ids"), "{answer}");
    // A real doc id repeated is one id: the search is filtered to it.
    let repeated = json!({"query": "Gradle", "tenant_id": "t1",
        "doc_ids": ["sdk/android/install", "sdk/android/install"], "filters": {"doc_ids": ["sdk/android/install"]}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&repeated.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let hits = answer["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.iter().all(|h| h["doc_id"] == "sdk/android/install"), "{answer}");
}

#[tokio::test]
async fn oversized_tags_and_ids_are_422() {
    let state = fixture_state(|_| {});
    let tags: Vec<String> = (0..101).map(|i| format!("tag{i}")).collect();
    let cases = [
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"tags": tags}}), "filters.tags"),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"tags": ["a".repeat(201)]}}), "filters.tags"),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"product": "p".repeat(201)}}), "filters.product"),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "doc_ids": ["d".repeat(1025)]}), "doc_ids"),
        (
            "/internal/retrieval/chunks/window",
            json!({"tenant_id": "t1", "doc_id": "d".repeat(1025), "anchor_chunk_id": "x"}),
            "doc_id",
        ),
    ];
    for (uri, body, field) in cases {
        let (status, answer) = send(&state, "POST", uri, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {answer}");
        assert!(message(&answer).starts_with(field), "{field}: {answer}");
    }
    // 100 tags of 200 characters are within the limits (they match nothing here).
    let tags: Vec<String> = (0..100).map(|i| format!("{i:0>200}")).collect();
    let body = json!({"query": "x", "tenant_id": "t1", "filters": {"tags": tags}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

const WINDOW: &str = "/internal/retrieval/chunks/window";
const CONFIG: &str = "/internal/retrieval/config";

#[tokio::test]
async fn a_repeated_key_is_rejected_on_every_endpoint() {
    let state = fixture_state(|_| {});
    let cases = [
        (SEARCH, r#"{"query": "Gradle", "tenant_id": "t1", "tenant_id": "t2"}"#),
        (CONTEXT, r#"{"query": "Gradle", "tenant_id": "t1", "tenant_id": "t2"}"#),
        (CONTEXT, r#"{"query": "Gradle", "tenant_id": "t1", "max_context_chars": 10, "max_context_chars": 20}"#),
        (SEARCH, r#"{"query": "Gradle", "tenant_id": "t1", "filters": {"tags": ["a"], "tags": []}}"#),
        (CONTEXT, r#"{"query": "Gradle", "tenant_id": "t1", "user_metadata": {"role": "a", "role": "b"}}"#),
        (
            WINDOW,
            r#"{"tenant_id": "t1", "tenant_id": "t2", "doc_id": "acme/secret-install", "anchor_chunk_id": "acme/secret-install#s1-c1"}"#,
        ),
        (CONFIG, r#"{"max_results": 5, "max_results": 50}"#),
    ];
    for (uri, body) in cases {
        let (status, answer) = send(&state, "POST", uri, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{uri} {body} → {answer}");
        assert_eq!(error_code(&answer), "invalid_request");
        assert!(message(&answer).contains("duplicate"), "{answer}");
        assert!(!answer.to_string().contains("acme-secret"), "{answer}");
    }
    let (_, config) = send(&state, "GET", CONFIG, None).await;
    assert_eq!(config["max_results"], 10, "a rejected update changes nothing");
    // The same parameter twice in the query string is not "the last one wins" either.
    let (status, answer) = send(&state, "GET", "/internal/retrieval/stats?tenant_id=t1&tenant_id=t2", None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
}

#[tokio::test]
async fn unknown_fields_are_rejected_also_in_nested_objects() {
    let state = fixture_state(|_| {});
    let cases = [
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "user_metadata": {"tenant_id": "t2"}}), "user_metadata"),
        (CONTEXT, json!({"query": "x", "tenant_id": "t1", "user_metadata": {"tenant_id": "t2"}}), "tenant_id"),
        (CONTEXT, json!({"query": "x", "tenant_id": "t1", "filters": {"platform": "ios"}}), "platform"),
        (CONTEXT, json!({"query": "x", "tenant_id": "t1", "max_context_char": 100}), "max_context_char"),
        (WINDOW, json!({"tenant_id": "t1", "doc_id": "d", "anchor_chunk_id": "c", "window": 3}), "window"),
        (CONFIG, json!({"max_results": 5, "bogus": true}), "bogus"),
    ];
    for (uri, body, needle) in cases {
        let (status, answer) = send(&state, "POST", uri, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{uri} {body} → {answer}");
        assert_eq!(error_code(&answer), "invalid_request");
        assert!(message(&answer).contains(needle), "{needle}: {answer}");
    }
    // Known nested fields still work.
    let body = json!({"query": "установка", "tenant_id": "t1", "user_metadata": {"platform": "ios", "role": null}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

#[tokio::test]
async fn wrong_types_are_422_and_bad_json_400() {
    let state = fixture_state(|_| {});
    let cases = [
        (CONFIG, r#"{"theme_router_mode": 5}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (CONFIG, r#"{"theme_router_mode": ["llm"]}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (CONFIG, r#"{"theme_router_mode": true}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (
            CONTEXT,
            r#"{"query": "x", "tenant_id": "t1", "max_context_chars": "many"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (CONTEXT, r#"{"query": "x", "tenant_id": "t1", "max_context_chars": 0}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (CONTEXT, r#"{"query": 5, "tenant_id": "t1"}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (WINDOW, r#"{"tenant_id": "t1", "doc_id": 1, "anchor_chunk_id": "c"}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (CONTEXT, r#"{"query": "x", "tenant_id": "t1""#, StatusCode::BAD_REQUEST),
        (CONFIG, r#"{"max_results": 5,}"#, StatusCode::BAD_REQUEST),
    ];
    for (uri, body, expected) in cases {
        let (status, answer) = send(&state, "POST", uri, Some(body)).await;
        assert_eq!(status, expected, "{uri} {body} → {answer}");
        let code = if expected == StatusCode::BAD_REQUEST { "invalid_json" } else { "invalid_request" };
        assert_eq!(error_code(&answer), code, "{body}");
    }
    // The README's /context example shape (with max_context_chars) is accepted.
    let body = json!({"query": "Gradle", "tenant_id": "t1", "max_results": 5, "max_context_chars": 2500});
    let (status, answer) = send(&state, "POST", CONTEXT, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer["context"].as_str().unwrap().chars().count() <= 2500);
}

/// An embedder that holds every call until released: a request in progress on demand.
struct GateEmbedder {
    entered: std::sync::Arc<tokio::sync::Notify>,
    release: std::sync::Arc<tokio::sync::Notify>,
    inner: retrieval_engine::PseudoEmbedder,
}

#[async_trait::async_trait]
impl retrieval_engine::Embedder for GateEmbedder {
    async fn embed(
        &self,
        texts: &[String],
        kind: retrieval_engine::InputKind,
    ) -> Result<Vec<Vec<f32>>, retrieval_engine::EmbedError> {
        self.entered.notify_one();
        self.release.notified().await;
        self.inner.embed(texts, kind).await
    }

    fn model_name(&self) -> &str {
        "gate"
    }
}

#[tokio::test]
async fn requests_beyond_the_in_flight_limit_are_shed_with_503_and_retry_after() {
    use std::sync::Arc;
    let dimension = retrieval_engine::fixtures::DIMENSION;
    let settings = retrieval_service::config::Settings {
        embedding_dimension: dimension,
        max_in_flight_requests: 1,
        ..Default::default()
    };
    let index =
        Arc::new(retrieval_engine::InMemoryIndex::from_snapshot(retrieval_engine::fixtures::snapshot()).unwrap());
    let (entered, release) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    let embedder = GateEmbedder {
        entered: entered.clone(),
        release: release.clone(),
        inner: retrieval_engine::PseudoEmbedder::new(dimension),
    };
    let state = retrieval_service::startup::state_with(settings, index, Arc::new(embedder));
    let search = json!({"query": "Gradle", "tenant_id": "t1"}).to_string();

    let first = tokio::spawn({
        let (state, search) = (state.clone(), search.clone());
        async move { send(&state, "POST", SEARCH, Some(&search)).await }
    });
    entered.notified().await; // the first search is in progress and holds the only permit

    let request = axum::http::Request::post(SEARCH)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(search.clone()))
        .unwrap();
    let response = tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers().get("retry-after").unwrap(), "1");
    assert!(response.headers().contains_key("x-request-id"));
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(error_code(&body), "overloaded");
    // Health and metrics are exempt, so ops still see the service.
    let (status, _) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    assert!(metrics.as_str().unwrap().contains("retrieval_requests_shed_total 1"), "{metrics}");

    release.notify_one();
    let (status, answer) = first.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    release.notify_one(); // lets the next search's embedding through at once
    let (status, answer) = send(&state, "POST", SEARCH, Some(&search)).await;
    assert_eq!(status, StatusCode::OK, "the permit is back after the first search: {answer}");
}

#[tokio::test]
async fn config_updates_need_the_admin_token_when_one_is_set() {
    let token = "test-admin-token-0123456789";
    let state = fixture_state(|s| s.admin_token = retrieval_service::config::Secret::new(token));
    let update = |authorization: Option<String>, body: &'static str| {
        let state = state.clone();
        async move {
            let mut request = axum::http::Request::post(CONFIG).header("content-type", "application/json");
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let response = tower::ServiceExt::oneshot(
                retrieval_service::app(state),
                request.body(axum::body::Body::from(body)).unwrap(),
            )
            .await
            .unwrap();
            let (status, headers) = (response.status(), response.headers().clone());
            let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
            (status, headers, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    for authorization in [None, Some("Bearer wrong-token-0123456789".to_string()), Some(format!("Basic {token}"))] {
        let (status, headers, body) = update(authorization.clone(), r#"{"min_score": 1}"#).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{authorization:?}: {body}");
        assert_eq!(error_code(&body), "unauthorized");
        assert_eq!(headers.get("www-authenticate").unwrap(), "Bearer");
    }
    // Authentication comes before validation: an invalid body without the token is still 401.
    let (status, _, _) = update(None, r#"{"bogus": 1}"#).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, config) = send(&state, "GET", CONFIG, None).await;
    assert_eq!(config["min_score"], 0.0, "rejected callers changed nothing; GET stays open");

    let (status, _, body) = update(Some(format!("Bearer {token}")), r#"{"max_results": 4}"#).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["max_results"], 4);
    let (status, _, _) = update(Some(format!("bearer {token}")), r#"{"max_results": 5}"#).await;
    assert_eq!(status, StatusCode::OK, "the scheme is case-insensitive");
}

#[tokio::test]
async fn without_an_admin_token_config_updates_stay_open() {
    let state = fixture_state(|_| {});
    let (status, body) = send(&state, "POST", CONFIG, Some(r#"{"max_results": 4}"#)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["max_results"], 4);
}

#[tokio::test]
async fn a_query_of_only_invisible_characters_is_empty() {
    let state = fixture_state(|_| {});
    for query in ["\u{200b}\u{200b}", "\u{200d}\u{feff} \u{2060}\n", "\u{00ad}\u{200e}\u{fe0f}", "\u{3000}\u{200c}"] {
        let body = json!({"query": query, "tenant_id": "t1"}).to_string();
        for uri in [SEARCH, CONTEXT] {
            let (status, answer) = send(&state, "POST", uri, Some(&body)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{query:?} on {uri}: {answer}");
            assert!(message(&answer).starts_with("query"), "{answer}");
        }
    }
    let body = json!({"query": "\u{200b}Gradle\u{200b}", "tenant_id": "t1"}).to_string();
    let (status, answer) = send(&state, "POST", SEARCH, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

#[tokio::test]
async fn trace_id_is_limited_in_characters_not_bytes() {
    let state = fixture_state(|_| {});
    let longest = "я".repeat(256); // 512 bytes, 256 characters
    let body = json!({"query": "Gradle", "tenant_id": "t1", "trace_id": longest}).to_string();
    let (status, answer) = send(&state, "POST", SEARCH, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["trace_id"], longest.as_str());
    let body = json!({"query": "Gradle", "tenant_id": "t1", "trace_id": "я".repeat(257)}).to_string();
    let (status, answer) = send(&state, "POST", SEARCH, Some(&body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(message(&answer).starts_with("trace_id"), "{answer}");
}

#[tokio::test]
async fn topk_per_doc_has_an_upper_bound() {
    let state = fixture_state(|_| {});
    let (status, answer) = send(&state, "POST", CONFIG, Some(r#"{"topk_per_doc": 51}"#)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(message(&answer).contains("topk_per_doc: must be at most 50"), "{answer}");
    let (status, answer) = send(&state, "POST", CONFIG, Some(r#"{"topk_per_doc": 50}"#)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["topk_per_doc"], 50);
}

#[tokio::test]
async fn llm_routing_needs_a_chat_endpoint() {
    let state = fixture_state(|_| {});
    let (status, answer) = send(&state, "POST", CONFIG, Some(r#"{"theme_router_mode": "llm"}"#)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(message(&answer).contains("theme_router_mode"), "{answer}");
    let (_, config) = send(&state, "GET", CONFIG, None).await;
    assert_eq!(config["theme_router_mode"], "heuristic");
    // With a chat endpoint configured the same update is accepted (nothing is called yet).
    let state = fixture_state(|s| s.rerank_api_base = "http://127.0.0.1:9".into());
    let (status, answer) = send(&state, "POST", CONFIG, Some(r#"{"theme_router_mode": "llm"}"#)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["theme_router_mode"], "llm");
}

#[tokio::test]
async fn compressed_bodies_are_415_not_ignored() {
    let state = fixture_state(|_| {});
    let request = axum::http::Request::post(SEARCH)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(axum::body::Body::from(&b"\x1f\x8b\x08\x00\x00\x00\x00\x00"[..]))
        .unwrap();
    let (status, answer) = crate::common::send_request(&state, request).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{answer}");
    assert_eq!(error_code(&answer), "unsupported_media_type");
}

#[tokio::test]
async fn a_long_uri_is_a_json_414() {
    let state = fixture_state(|_| {});
    let uri = format!("/internal/retrieval/stats?tenant_id=t1&pad={}", "x".repeat(20_000));
    let (status, answer) = send(&state, "GET", &uri, None).await;
    assert_eq!(status, StatusCode::URI_TOO_LONG, "{answer}");
    assert_eq!(error_code(&answer), "uri_too_long");
    let (status, _) = send(&state, "GET", "/internal/retrieval/stats?tenant_id=t1", None).await;
    assert_eq!(status, StatusCode::OK);
}

/// Sends one request with an optional `Authorization` header; returns status, `WWW-Authenticate`
/// and the body as text (so a test can check that no byte of another tenant's data came back).
async fn send_with_key(
    state: &retrieval_service::AppState,
    method: &str,
    uri: &str,
    body: Option<&str>,
    authorization: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let mut request = axum::http::Request::builder().method(method).uri(uri);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let request = request.body(body.map(|b| axum::body::Body::from(b.to_string())).unwrap_or_default()).unwrap();
    let response = tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request).await.unwrap();
    let status = response.status();
    let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (status, challenge, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn api_keys_scope_every_data_endpoint_to_their_tenants() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    let operator_key = "operator-key-0123456789abcdef";
    let operator_digest: String =
        sha2::Sha256::digest(operator_key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(
        &keys,
        format!("# t1's frontend\nt1-reader-key-0123456789: t1\nsha256:{operator_digest}: *   # operators\n"),
    )
    .unwrap();
    let state = fixture_state(|s| s.api_keys = keys.clone());
    let t1_key = "Bearer t1-reader-key-0123456789";
    let operator = format!("Bearer {operator_key}");
    let requests = |tenant: &str| -> Vec<(&'static str, String, Option<String>)> {
        vec![
            ("POST", SEARCH.to_string(), Some(json!({"query": "Gradle SDK пароль", "tenant_id": tenant}).to_string())),
            ("POST", CONTEXT.to_string(), Some(json!({"query": "Gradle SDK пароль", "tenant_id": tenant}).to_string())),
            (
                "POST",
                WINDOW.to_string(),
                Some(
                    json!({"tenant_id": tenant, "doc_id": "acme/secret-install", "anchor_chunk_id": "acme/secret-install#s1-c1"})
                        .to_string(),
                ),
            ),
            ("GET", format!("/internal/retrieval/stats?tenant_id={tenant}"), None),
        ]
    };
    for tenant in ["t1", "t2", "no-such-tenant"] {
        for (method, uri, body) in requests(tenant) {
            // No key, an unknown key, a key under another scheme: 401 with a Bearer challenge.
            for authorization in
                [None, Some("Bearer not-a-known-key-0123456789"), Some("Basic t1-reader-key-0123456789")]
            {
                let (status, challenge, text) =
                    send_with_key(&state, method, &uri, body.as_deref(), authorization).await;
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} {authorization:?}: {text}");
                assert_eq!(challenge.as_deref(), Some("Bearer"));
                assert!(text.contains("\"unauthorized\"") && !text.contains("acme"), "{text}");
            }
            // t1's key reads t1 only; for any other tenant (existing or not) it gets 403, never data.
            let (status, _, text) = send_with_key(&state, method, &uri, body.as_deref(), Some(t1_key)).await;
            match tenant {
                // (The window names t2's doc, which t1 does not have: 404, like any missing doc.)
                "t1" => assert!(
                    status == StatusCode::OK || (uri == WINDOW && status == StatusCode::NOT_FOUND),
                    "{method} {uri}: {status} {text}"
                ),
                _ => {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {text}");
                    assert!(text.contains("\"forbidden\"") && !text.contains("acme"), "{text}");
                }
            }
        }
    }
    // t1's key on t1: real answers (the window's doc is t2's, so it is not found for t1).
    let (status, _, text) = send_with_key(
        &state,
        "POST",
        SEARCH,
        Some(&json!({"query": "Gradle", "tenant_id": "t1"}).to_string()),
        Some(t1_key),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(!text.contains("acme"), "{text}");
    // The operator key (stored as a digest) reads every tenant, t2's secret page included.
    for (method, uri, body) in requests("t2") {
        let (status, _, text) = send_with_key(&state, method, &uri, body.as_deref(), Some(&operator)).await;
        assert_eq!(status, StatusCode::OK, "{method} {uri}: {text}");
    }
    let (_, _, window) = send_with_key(&state, "POST", WINDOW, requests("t2")[2].2.as_deref(), Some(&operator)).await;
    assert!(window.contains("acme-secret"), "{window}");
    // Health and metrics stay open for probes.
    let (status, _, _) = send_with_key(&state, "GET", "/health", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[test]
fn a_malformed_api_keys_file_stops_start_up_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for (content, expected) in [
        ("short: t1\n", "line 1"),
        ("# ok\nvalid-key-0123456789abcdef: t1\nvalid-key-0123456789abcdef: t2\n", "line 3"),
        ("valid-key-0123456789abcdef: bad tenant!\n", "line 1"),
        ("valid-key-0123456789abcdef:\n", "line 1"),
        ("sha256:abc: t1\n", "line 1"),
        ("# nothing but comments\n", "no key"),
    ] {
        let path = dir.path().join("keys.txt");
        std::fs::write(&path, content).unwrap();
        let env: std::collections::HashMap<String, String> =
            [("RETR_API_KEYS".to_string(), path.display().to_string())].into();
        let error = retrieval_service::startup::load_settings(None, &env).unwrap_err().to_string();
        assert!(error.contains("RETR_API_KEYS") && error.contains(expected), "{content:?}: {error}");
    }
    let env: std::collections::HashMap<String, String> =
        [("RETR_API_KEYS".to_string(), "/no/such/keys.txt".to_string())].into();
    assert!(retrieval_service::startup::load_settings(None, &env).is_err(), "a missing file is an error");
}

/// `null` in an optional object field means "absent", as in every other optional field, and the
/// OpenAPI document says so.
#[tokio::test]
async fn filters_null_is_absent() {
    let state = fixture_state(|_| {});
    let (status, body) =
        send(&state, "POST", SEARCH, Some(r#"{"query": "Gradle", "tenant_id": "t1", "filters": null}"#)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, absent) = send(&state, "POST", SEARCH, Some(r#"{"query": "Gradle", "tenant_id": "t1"}"#)).await;
    assert_eq!(body["hits"], absent["hits"]);
    let (status, body) =
        send(&state, "POST", SEARCH, Some(r#"{"query": "Gradle", "tenant_id": "t1", "filters": "none"}"#)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) =
        send(&state, "POST", CONTEXT, Some(r#"{"query": "Gradle", "tenant_id": "t1", "filters": null}"#)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A whole body of `null` is still not a request.
    let (status, body) = send(&state, "POST", "/internal/retrieval/config", Some("null")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (_, document) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    let filters = &document["components"]["schemas"]["SearchRequest"]["properties"]["filters"]["oneOf"];
    assert_eq!(filters[0], json!({"type": "null"}), "{filters}");
}

/// An id of only U+0085 (NEL, whitespace to Rust, not to a JSON Schema `\S`) is refused by the
/// validation and by the schema's pattern alike.
#[tokio::test]
async fn a_blank_anchor_is_refused_by_the_schema_and_the_validation_alike() {
    let state = fixture_state(|_| {});
    let window = |anchor: &str| {
        json!({"tenant_id": "t1", "doc_id": "sdk/android/install", "anchor_chunk_id": anchor}).to_string()
    };
    let (status, body) = send(&state, "POST", "/internal/retrieval/chunks/window", Some(&window("\u{85}"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = send(&state, "POST", "/internal/retrieval/chunks/window", Some(&window("x\u{85}"))).await;
    assert_ne!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (_, document) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    let pattern = document["components"]["schemas"]["WindowRequest"]["properties"]["anchor_chunk_id"]["pattern"]
        .as_str()
        .unwrap()
        .to_string();
    // A negated class of every character `char::is_whitespace` accepts.
    assert!(pattern.starts_with("[^") && pattern.contains("\\u0085") && pattern.contains("\\u3000"), "{pattern}");
}

/// The OpenAPI document is built once and served as the same bytes.
#[tokio::test]
async fn the_openapi_document_is_served_from_one_build() {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    let state = fixture_state(|_| {});
    let request = || Request::get("/internal/retrieval/openapi.json").body(Body::empty()).unwrap();
    let first = tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request()).await.unwrap();
    assert_eq!(first.headers()["content-type"], "application/json");
    let first = first.into_body().collect().await.unwrap().to_bytes();
    let second = tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request()).await.unwrap();
    let second = second.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(first, second);
    assert!(serde_json::from_slice::<Value>(&first).unwrap()["paths"].is_object());
}

/// Every route that needs credentials (as the OpenAPI document declares them) refuses a caller
/// without them from the head alone: its body, which here never ends, is not waited for, and the
/// answer closes the connection.
#[tokio::test]
async fn credentials_are_checked_before_the_body_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "t1-reader-key-0123456789: t1\n").unwrap();
    let state = fixture_state(|s| {
        s.api_keys = keys.clone();
        s.admin_token = retrieval_service::config::Secret::new("test-admin-token-0123456789");
        s.body_read_timeout_seconds = 25.0;
    });
    let (_, document) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    let mut checked = Vec::new();
    // The MCP endpoint describes itself over MCP, not in the OpenAPI document: it is secured too.
    let mut paths = document["paths"].as_object().unwrap().clone();
    paths.insert("/internal/retrieval/mcp".into(), serde_json::json!({"post": {"security": []}}));
    for (path, operations) in &paths {
        for (method, operation) in operations.as_object().unwrap() {
            if operation.get("security").is_none() || path == "/metrics" {
                continue;
            }
            let uri = if path.ends_with("/stats") { format!("{path}?tenant_id=t1") } else { path.clone() };
            // No credential, and one nobody was given (Dify's contract answers that 403).
            for authorization in [None, Some("Bearer not-a-known-key-0123456789")] {
                let endless = futures_util::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
                let mut request = axum::http::Request::builder()
                    .method(method.to_uppercase().as_str())
                    .uri(&uri)
                    .header("content-type", "application/json")
                    .header("content-length", "100");
                if let Some(value) = authorization {
                    request = request.header("authorization", value);
                }
                let request = request.body(axum::body::Body::from_stream(endless)).unwrap();
                let answered = tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request),
                )
                .await;
                let response = answered.unwrap_or_else(|_| panic!("{method} {uri}: the body was waited for")).unwrap();
                let dify_unknown_key = path.ends_with("/dify/retrieval") && authorization.is_some();
                let expected = if dify_unknown_key { StatusCode::FORBIDDEN } else { StatusCode::UNAUTHORIZED };
                assert_eq!(response.status(), expected, "{method} {uri} {authorization:?}");
                assert_eq!(response.headers()["connection"], "close", "{method} {uri}");
            }
            checked.push(format!("{method} {path}"));
        }
    }
    for expected in [
        "post /internal/retrieval/search",
        "post /internal/retrieval/config",
        "post /internal/retrieval/dify/retrieval",
        "post /internal/retrieval/mcp",
    ] {
        assert!(checked.contains(&expected.to_string()), "{expected} not among {checked:?}");
    }
}
