//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub mod fake_http;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use retrieval_service::config::Settings;
use retrieval_service::embed::PseudoEmbedder;
use retrieval_service::index::InMemoryIndex;
use retrieval_service::{fixtures, startup, AppState};
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt;

/// State over the fixture corpus with default settings (adjusted by `adjust`).
pub fn fixture_state(adjust: impl FnOnce(&mut Settings)) -> AppState {
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    adjust(&mut settings);
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

/// Sends one request through the router (no socket) and returns status and JSON body.
pub async fn send(state: &AppState, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
    let mut builder = Request::builder().method(method).uri(uri);
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder.body(body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty)).unwrap();
    send_request(state, request).await
}

pub async fn send_request(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let response = retrieval_service::app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, json)
}

/// Asserts the uniform error body and returns its code.
pub fn error_code(body: &Value) -> String {
    let code = body["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"));
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    code.to_string()
}
