//! A scriptable fake HTTP server on 127.0.0.1:0 for client contract tests: it answers each request
//! with a given status, body, headers and delay, and records every request it received.
//!
//! Use it as `crate::common::fake_http`.
#![allow(dead_code)]

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) struct FakeResponse {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) headers: Vec<(String, String)>,
    /// Waited before answering; longer than the client's timeout makes a hang.
    pub(crate) delay: Duration,
}

impl FakeResponse {
    pub(crate) fn new(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            delay: Duration::ZERO,
        }
    }

    pub(crate) fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::new(status, value.to_string())
    }

    /// Never answers within any test timeout.
    pub(crate) fn hang() -> Self {
        Self::new(200, "{}").with_delay(Duration::from_secs(30))
    }

    pub(crate) fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub(crate) fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server saw it; header names are lowercase.
#[derive(Debug, Clone)]
pub(crate) struct RecordedRequest {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl RecordedRequest {
    /// The body as JSON (`Null` when it is not JSON).
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

type Responder = dyn Fn(&RecordedRequest, usize) -> FakeResponse + Send + Sync;

#[derive(Clone)]
struct FakeState {
    responder: Arc<Responder>,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

/// The running server; it stops when dropped.
pub(crate) struct FakeServer {
    address: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// Answers the n-th request with `script[n]`, repeating the last entry once the script runs out
    /// (an empty script answers 404).
    pub(crate) async fn start(script: Vec<FakeResponse>) -> Self {
        Self::start_with(move |_request, call| match script.get(call).or(script.last()) {
            Some(response) => response.clone(),
            None => FakeResponse::new(404, "no scripted response"),
        })
        .await
    }

    /// Answers with `responder(request, call_number)`; call numbers start at 0.
    pub(crate) async fn start_with<F>(responder: F) -> Self
    where
        F: Fn(&RecordedRequest, usize) -> FakeResponse + Send + Sync + 'static,
    {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = FakeState { responder: Arc::new(responder), requests: requests.clone() };
        let app = axum::Router::new().fallback(answer).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a local port");
        let address = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake server");
        });
        Self { address, requests, task }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub(crate) fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A URL on which nothing listens, so connecting is refused at once.
pub(crate) async fn closed_port_url() -> String {
    // Port 1 (tcpmux): privileged, so no test can bind it, and nothing listens on it here. A port
    // picked by binding and closing a listener could be taken by another test's server meanwhile.
    "http://127.0.0.1:1".to_string()
}

async fn answer(State(state): State<FakeState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.map(|bytes| bytes.to_vec()).unwrap_or_default();
    let recorded = RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_string(), value.to_str().unwrap_or_default().to_string()))
            .collect(),
        body,
    };
    let call = {
        let mut requests = state.requests.lock().unwrap();
        requests.push(recorded.clone());
        requests.len() - 1
    };
    let scripted = (state.responder)(&recorded, call);
    if !scripted.delay.is_zero() {
        tokio::time::sleep(scripted.delay).await;
    }
    let mut response = Response::new(Body::from(scripted.body));
    *response.status_mut() = StatusCode::from_u16(scripted.status).expect("a valid status code");
    for (name, value) in scripted.headers {
        response.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).expect("a valid header name"),
            HeaderValue::from_str(&value).expect("a valid header value"),
        );
    }
    response
}
