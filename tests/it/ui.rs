//! The playground page and the tenants list that feeds its picker.

use crate::common::fixture_state;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

async fn get(
    state: &retrieval_service::AppState,
    uri: &str,
    key: Option<&str>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut request = Request::get(uri);
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let response = retrieval_service::app(state.clone()).oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_from_the_binary_with_a_strict_policy() {
    let state = fixture_state(|_| {});
    for (uri, content_type, marker) in [
        ("/internal/retrieval/ui", "text/html", "Retrieval playground"),
        ("/internal/retrieval/ui/app.js", "text/javascript", "textContent"),
        ("/internal/retrieval/ui/app.css", "text/css", "--accent"),
    ] {
        let (status, headers, body) = get(&state, uri, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert!(headers["content-type"].to_str().unwrap().starts_with(content_type), "{uri}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'self'"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert!(body.contains(marker), "{uri}");
    }
    // The page loads nothing from another origin (the machines have no internet).
    let (_, _, html) = get(&state, "/internal/retrieval/ui", None).await;
    assert!(!html.contains("http://") && !html.contains("https://"), "{html}");
}

#[tokio::test]
async fn tenants_lists_only_what_the_key_may_read() {
    let state = fixture_state(|_| {});
    let (status, _, body) = get(&state, "/internal/retrieval/tenants", None).await;
    assert_eq!(status, StatusCode::OK);
    let body: Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = body["tenants"].as_array().unwrap().iter().map(|t| t["tenant_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["t1", "t2"], "no key store: every tenant");
    assert!(body["tenants"][0]["chunks"].as_u64().unwrap() > 0);

    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "t1-reader-key-0123456789: t1\noperator-key-0123456789abcdef: *\n").unwrap();
    let state = fixture_state(|s| s.api_keys = keys.clone());
    let (status, _, _) = get(&state, "/internal/retrieval/tenants", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a key store needs a key");
    let (status, _, body) = get(&state, "/internal/retrieval/tenants", Some("t1-reader-key-0123456789")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"t1\"") && !body.contains("\"t2\""), "t1's key sees t1 only: {body}");
    let (_, _, body) = get(&state, "/internal/retrieval/tenants", Some("operator-key-0123456789abcdef")).await;
    assert!(body.contains("\"t1\"") && body.contains("\"t2\""), "{body}");
}
