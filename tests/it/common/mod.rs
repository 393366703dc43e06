//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub(crate) mod fake_http;
pub(crate) mod needs;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use retrieval_engine::{fixtures, InMemoryIndex, PseudoEmbedder};
use retrieval_service::config::Settings;
use retrieval_service::{startup, AppState};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

/// State over the fixture corpus with default settings (adjusted by `adjust`).
pub(crate) fn fixture_state(adjust: impl FnOnce(&mut Settings)) -> AppState {
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    adjust(&mut settings);
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

/// Sends one request through the router (no socket) and returns status and JSON body.
pub(crate) async fn send(state: &AppState, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
    let mut builder = Request::builder().method(method).uri(uri);
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder.body(body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty)).unwrap();
    send_request(state, request).await
}

pub(crate) async fn send_request(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let response = retrieval_service::app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, json)
}

/// Asserts the uniform error body and returns its code.
pub(crate) fn error_code(body: &Value) -> String {
    let code = body["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"));
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    code.to_string()
}

/// A TCP proxy to `target` (a Chroma URL) that can be switched off, starting in the state
/// `enabled`: while off, new connections are closed at once and open ones, pooled keep-alive
/// connections included, are cut, as a dead server would do.
pub(crate) async fn switchable_proxy(target: &str, enabled: bool) -> (String, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let target = target.trim_start_matches("http://").trim_end_matches('/').to_string();
    let enabled = Arc::new(AtomicBool::new(enabled));
    let switch = Arc::clone(&enabled);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if !switch.load(Ordering::Acquire) {
                let _ = inbound.shutdown().await;
                continue;
            }
            let (target, switch) = (target.clone(), Arc::clone(&switch));
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(&target).await else {
                    return;
                };
                let switched_off = async {
                    while switch.load(Ordering::Acquire) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = switched_off => {}
                }
            });
        }
    });
    (url, enabled)
}

/// A TCP proxy to `target` (a Chroma URL) that can be made to stall, as an upstream that accepts
/// connections and never answers: while `stalled`, new connections are accepted and held unread,
/// and open ones stop carrying bytes (held open, not cut). Once it is cleared, held connections
/// are closed and new ones are carried again.
pub(crate) async fn stallable_proxy(target: &str) -> (String, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let target = target.trim_start_matches("http://").trim_end_matches('/').to_string();
    let stalled = Arc::new(AtomicBool::new(false));
    let switch = Arc::clone(&stalled);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let (target, switch) = (target.clone(), Arc::clone(&switch));
            tokio::spawn(async move {
                let wait_while = |stalled: bool| {
                    let switch = Arc::clone(&switch);
                    async move {
                        while switch.load(Ordering::Acquire) == stalled {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                };
                if switch.load(Ordering::Acquire) {
                    wait_while(true).await;
                    return;
                }
                let Ok(mut outbound) = TcpStream::connect(&target).await else {
                    return;
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
                    _ = wait_while(false) => {}
                }
                // Stalled: both ends stay open and silent until the stall is over.
                wait_while(true).await;
            });
        }
    });
    (url, stalled)
}

/// Every log line written while installed (JSON lines, from `DEBUG` up).
#[derive(Clone, Default)]
pub(crate) struct LogCapture(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Captures this thread's log lines until the guard is dropped.
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        let capture = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || capture.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }
}
