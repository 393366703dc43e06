//! Request logging: one `request done` line per request at `RETR_REQUEST_LOG_LEVEL`, and the
//! request id on every line of the request (also those written inside the handler's task).

use crate::common::{fixture_state, send};
use retrieval_service::config::RequestLogLevel;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// The JSON lines written since the last call.
    fn take(&self) -> Vec<Value> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        String::from_utf8(bytes).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }
}

fn request_lines(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|line| line["fields"]["message"] == "request done").collect()
}

#[tokio::test]
async fn request_lines_follow_the_configured_level_and_carry_the_request_id() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::TRACE)
        .with_writer({
            let capture = capture.clone();
            move || capture.clone()
        })
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let search = json!({"query": "Gradle", "tenant_id": "t1"}).to_string();

    for (level, expected) in
        [(RequestLogLevel::Info, Some("INFO")), (RequestLogLevel::Warn, Some("WARN")), (RequestLogLevel::Off, None)]
    {
        let state = fixture_state(|s| s.request_log_level = level);
        capture.take();
        send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
        let lines = capture.take();
        let requests = request_lines(&lines);
        match expected {
            None => assert!(requests.is_empty(), "{level:?}: {requests:?}"),
            Some(expected) => {
                assert_eq!(requests.len(), 1, "{level:?}: {lines:?}");
                let line = requests[0];
                assert_eq!(line["level"], expected);
                assert_eq!(line["fields"]["status"], 200);
                assert_eq!(line["fields"]["path"], "/internal/retrieval/search");
                let request_id = line["span"]["request_id"].as_str().unwrap();
                assert!(!request_id.is_empty());
                // The search's own line, written inside the handler's task, has the same id.
                let search_line = lines.iter().find(|l| l["fields"]["message"] == "search done").expect("search done");
                assert_eq!(search_line["level"], "DEBUG");
                assert_eq!(search_line["span"]["request_id"], request_id, "{search_line}");
            }
        }
    }
}

/// A client's `X-Request-Id` is kept only when short and plain; anything else (here a 400 KB
/// header, which would otherwise be written into every log line of the request and echoed back) is
/// replaced by a generated id in the response and the logs.
#[tokio::test]
async fn only_short_plain_request_ids_are_kept_logged_and_echoed() {
    use axum::body::Body;
    use axum::http::Request;
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer({
            let capture = capture.clone();
            move || capture.clone()
        })
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let state = fixture_state(|_| {});
    let huge = "a".repeat(400_000);
    let cases = [
        ("req-42:retry_1.b", true),
        (&"x".repeat(64), true),
        (&"x".repeat(65), false),
        (huge.as_str(), false),
        ("has space", false),
        ("quote\"d", false),
    ];
    for (given, kept) in cases {
        capture.take();
        let request = Request::get("/health").header("x-request-id", given).body(Body::empty()).unwrap();
        let response = tower::ServiceExt::oneshot(retrieval_service::app(state.clone()), request).await.unwrap();
        let echoed = response.headers()["x-request-id"].to_str().unwrap().to_string();
        let lines = capture.take();
        let logged = request_lines(&lines)[0]["span"]["request_id"].as_str().unwrap().to_string();
        assert_eq!(echoed, logged);
        if kept {
            assert_eq!(echoed, given);
        } else {
            assert_ne!(echoed, given);
            assert!(retrieval_service::is_valid_request_id(echoed.as_bytes()), "{echoed}");
        }
        let written: usize = lines.iter().map(|line| line.to_string().len()).sum();
        assert!(written < 2_000, "{written} bytes of log for one request");
    }
}
