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
