//! `/internal/retrieval/feedback`: validation (422 naming the field), tenant isolation under API
//! keys, durability across a restart and a `kill -9`, and the learned re-ranker a tenant's
//! searches read (swapped in live).

use crate::common::{error_code, fixture_state, send, send_request};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const FEEDBACK: &str = "/internal/retrieval/feedback";
const SEARCH: &str = "/internal/retrieval/search";

fn post_body(tenant: &str, trace: &str) -> String {
    json!({"tenant_id": tenant, "trace_id": trace, "query": "как продлить лицензию",
           "used": ["docs/faq/flat#s0"], "verdict": "helpful"})
    .to_string()
}

async fn send_with_key(
    state: &retrieval_service::AppState,
    method: &str,
    uri: &str,
    body: Option<&str>,
    key: Option<&str>,
) -> (StatusCode, Value) {
    let mut builder = Request::builder().method(method).uri(uri);
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    if let Some(key) = key {
        builder = builder.header("authorization", format!("Bearer {key}"));
    }
    send_request(state, builder.body(body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty)).unwrap())
        .await
}

#[tokio::test]
async fn bad_feedback_is_a_422_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state(|s| s.feedback_dir = Some(dir.path().to_path_buf()));
    let good = json!({"tenant_id": "t1", "trace_id": "tr-1", "query": "лицензия", "used": ["a#s1"]});
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    let without = |field: &str| {
        let mut body = good.clone();
        body.as_object_mut().unwrap().remove(field);
        body
    };
    let cases = [
        (without("used"), "used"),
        (without("trace_id"), "trace_id"),
        (without("query"), "query"),
        (with("trace_id", json!("   ")), "trace_id"),
        (with("trace_id", json!("x".repeat(257))), "trace_id"),
        (with("query", json!("\u{200b} ")), "query"),
        (with("used", json!(["a#s1", ""])), "used[1]"),
        (with("used", json!((0..51).map(|i| format!("d#{i}")).collect::<Vec<_>>())), "used"),
        (with("shown", json!(["ok", " "])), "shown[1]"),
        (with("used", json!("a#s1")), "used"),
        (with("verdict", json!("meh")), "verdict"),
        (with("tenant_id", json!("../etc")), "tenant_id"),
        (with("extra", json!(1)), "extra"),
    ];
    for (body, field) in cases {
        let (status, answer) = send(&state, "POST", FEEDBACK, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(error_code(&answer), "invalid_request");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{field} not named in {message:?}");
    }
    // Nothing of it was stored; a good one is, and an unknown tenant is 404.
    let (status, answer) = send(&state, "POST", FEEDBACK, Some(&good.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["status"], "stored");
    let (_, listed) = send(&state, "GET", &format!("{FEEDBACK}?tenant_id=t1"), None).await;
    assert_eq!(listed["count"], 1, "{listed}");
    let unknown = with("tenant_id", json!("nobody"));
    let (status, answer) = send(&state, "POST", FEEDBACK, Some(&unknown.to_string())).await;
    assert_eq!((status, error_code(&answer)), (StatusCode::NOT_FOUND, "tenant_not_found".to_string()));
}

#[tokio::test]
async fn without_a_feedback_directory_the_endpoint_says_it_is_off() {
    let state = fixture_state(|_| {});
    let (status, answer) = send(&state, "POST", FEEDBACK, Some(&post_body("t1", "tr-1"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("RETR_FEEDBACK_DIR"), "{answer}");
}

#[tokio::test]
async fn a_tenants_feedback_is_invisible_to_every_other_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "t1-key-0123456789abcdef: t1\nt2-key-0123456789abcdef: t2\n").unwrap();
    let feedback_dir = dir.path().join("feedback");
    let state = fixture_state(|s| {
        s.api_keys = keys.clone();
        s.feedback_dir = Some(feedback_dir.clone());
    });
    let (t1, t2) = (Some("t1-key-0123456789abcdef"), Some("t2-key-0123456789abcdef"));
    let (status, answer) = send_with_key(&state, "POST", FEEDBACK, Some(&post_body("t1", "t1-secret-trace")), t1).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // No key: 401; t2's key on t1's feedback, to write, read or delete: 403.
    let (status, _) = send_with_key(&state, "POST", FEEDBACK, Some(&post_body("t1", "x")), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = send_with_key(&state, "GET", &format!("{FEEDBACK}?tenant_id=t1"), None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for (method, uri, body) in [
        ("POST", FEEDBACK.to_string(), Some(post_body("t1", "forged"))),
        ("GET", format!("{FEEDBACK}?tenant_id=t1"), None),
        ("DELETE", format!("{FEEDBACK}?tenant_id=t1"), None),
    ] {
        let (status, answer) = send_with_key(&state, method, &uri, body.as_deref(), t2).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {answer}");
        assert!(!answer.to_string().contains("t1-secret-trace"), "{answer}");
    }
    // t2's own feedback holds nothing of t1's; t1's still holds its one record.
    let (status, listed) = send_with_key(&state, "GET", &format!("{FEEDBACK}?tenant_id=t2"), None, t2).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["count"], 0, "{listed}");
    let (_, listed) = send_with_key(&state, "GET", &format!("{FEEDBACK}?tenant_id=t1"), None, t1).await;
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["records"][0]["trace_id"], "t1-secret-trace");
    // t1 deletes its own.
    let (status, deleted) = send_with_key(&state, "DELETE", &format!("{FEEDBACK}?tenant_id=t1"), None, t1).await;
    assert_eq!((status, deleted["deleted"].clone()), (StatusCode::OK, json!(1)), "{deleted}");
    let (_, listed) = send_with_key(&state, "GET", &format!("{FEEDBACK}?tenant_id=t1"), None, t1).await;
    assert_eq!(listed["count"], 0, "{listed}");
}

#[tokio::test]
async fn feedback_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state(|s| s.feedback_dir = Some(dir.path().to_path_buf()));
    for trace in ["a", "b", "c"] {
        let (status, answer) = send(&state, "POST", FEEDBACK, Some(&post_body("t1", trace))).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    drop(state);
    let state = fixture_state(|s| s.feedback_dir = Some(dir.path().to_path_buf()));
    let (_, listed) = send(&state, "GET", &format!("{FEEDBACK}?tenant_id=t1&limit=2"), None).await;
    assert_eq!(listed["count"], 3, "{listed}");
    let traces: Vec<&str> =
        listed["records"].as_array().unwrap().iter().map(|r| r["trace_id"].as_str().unwrap()).collect();
    assert_eq!(traces, ["b", "c"]);
}

/// A model that reverses the service's order: the score's weight negative.
fn write_reversing_model(dir: &Path, tenant: &str) {
    let features = retrieval_engine::learn::FEATURES;
    let mut weights = vec![0.0; features.len()];
    weights[0] = -1.0;
    let model = retrieval_engine::learn::LearnedReranker {
        features: features.iter().map(|f| f.to_string()).collect(),
        weights,
        candidates: 20,
        regularization: 30.0,
        trained_records: 100,
        held_out: retrieval_engine::learn::HeldOutScore {
            records: 100,
            mrr_default: 0.5,
            mrr_learned: 0.6,
            wins: 20,
            losses: 5,
            p_value: 0.002,
        },
        fitted_at_ms: 0,
    };
    retrieval_engine::learn::save(dir, tenant, &model).unwrap();
}

fn hit_ids(answer: &Value) -> Vec<String> {
    answer["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_tenants_learned_reranker_orders_its_searches_and_is_swapped_live() {
    let dir = tempfile::tempdir().unwrap();
    let state = fixture_state(|s| s.feedback_dir = Some(dir.path().to_path_buf()));
    let body = json!({"query": "лицензия", "tenant_id": "t1", "max_results": 3, "explain": true}).to_string();
    let (status, before) = send(&state, "POST", SEARCH, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{before}");
    assert!(before["hits"].as_array().unwrap().len() >= 2, "{before}");
    write_reversing_model(dir.path(), "t1");
    state.search.learned_rerankers().refresh();
    let (_, after) = send(&state, "POST", SEARCH, Some(&body)).await;
    assert_ne!(hit_ids(&after), hit_ids(&before), "{after}");
    assert_eq!(after["hits"].as_array().unwrap().len(), 3);
    assert!(after["hits"][0]["explain"]["rerank_score"].is_number(), "{after}");
    let (_, listed) = send(&state, "GET", &format!("{FEEDBACK}?tenant_id=t1"), None).await;
    assert_eq!(listed["reranker"]["candidates"], 20, "{listed}");
    // Asking for as many hits as the model re-ranks, or more, still gets its order.
    let many = json!({"query": "лицензия", "tenant_id": "t1", "max_results": 50, "explain": true}).to_string();
    let (_, all) = send(&state, "POST", SEARCH, Some(&many)).await;
    assert!(all["hits"][0]["explain"]["rerank_score"].is_number(), "{all}");
    // Another tenant is not touched; turning the model off restores the service's order.
    assert!(state.search.learned_rerankers().get("t2").is_none());
    std::fs::write(dir.path().join("t-t1").join(retrieval_engine::learn::OFF_FILE), "").unwrap();
    state.search.learned_rerankers().refresh();
    let (_, restored) = send(&state, "POST", SEARCH, Some(&body)).await;
    assert_eq!(hit_ids(&restored), hit_ids(&before));
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_service(feedback_dir: &Path) -> (KillOnDrop, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_retrieval-service"))
        .args(["serve", "--port", &port.to_string()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .env("RETR_FEEDBACK_DIR", feedback_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (KillOnDrop(child), format!("http://127.0.0.1:{port}"))
}

async fn wait_healthy(client: &reqwest::Client, base: &str) {
    let started = std::time::Instant::now();
    while !client.get(format!("{base}/health")).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(started.elapsed() < Duration::from_secs(60), "the service did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every post the service acknowledged is there after `kill -9` while posts were in flight.
#[cfg(unix)]
#[tokio::test]
async fn acknowledged_feedback_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let (service, base) = start_service(dir.path());
    let client = reqwest::Client::new();
    wait_healthy(&client, &base).await;
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let posters: Vec<_> = (0..16)
        .map(|worker| {
            let (client, base, acknowledged) = (client.clone(), base.clone(), acknowledged.clone());
            tokio::spawn(async move {
                for number in 0.. {
                    let trace = format!("w{worker}-{number}");
                    let body = post_body("demo", &trace);
                    let sent = client
                        .post(format!("{base}{FEEDBACK}"))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    match sent {
                        Ok(response) if response.status() == 200 => acknowledged.lock().unwrap().push(trace),
                        Ok(response) => panic!("{trace}: {}", response.status()),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    // Kill while the posts keep coming.
    let started = std::time::Instant::now();
    while acknowledged.lock().unwrap().len() < 300 {
        assert!(started.elapsed() < Duration::from_secs(60), "too few posts acknowledged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut service = service;
    service.0.kill().unwrap(); // SIGKILL
    service.0.wait().unwrap();
    for poster in posters {
        let _ = poster.await;
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let (_restarted, base) = start_service(dir.path());
    wait_healthy(&client, &base).await;
    let listed: Value =
        client.get(format!("{base}{FEEDBACK}?tenant_id=demo&limit=1000")).send().await.unwrap().json().await.unwrap();
    let count = listed["count"].as_u64().unwrap() as usize;
    assert!(count >= acknowledged.len(), "{count} stored, {} acknowledged", acknowledged.len());
    // Every record read back is whole, and every acknowledged one is among them.
    let stored = std::fs::read_to_string(dir.path().join("t-demo").join("feedback.jsonl")).unwrap();
    let traces: std::collections::HashSet<String> = stored
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|record| record["trace_id"].as_str().unwrap().to_string())
        .collect();
    let lost: Vec<_> = acknowledged.iter().filter(|trace| !traces.contains(*trace)).collect();
    assert!(lost.is_empty(), "{} acknowledged records lost, e.g. {:?}", lost.len(), lost.first());
}

#[tokio::test]
async fn the_openapi_document_states_the_feedback_limits() {
    let state = fixture_state(|s| s.max_query_chars = 321);
    let (status, document) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    let operations = &document["paths"][FEEDBACK];
    for method in ["post", "get", "delete"] {
        assert!(operations[method]["responses"]["200"].is_object(), "{method}: {operations}");
        assert!(operations[method]["responses"]["404"].is_object(), "{method}: {operations}");
    }
    let request = &document["components"]["schemas"]["FeedbackRequest"];
    assert_eq!(request["properties"]["query"]["maxLength"], 321, "{request}");
    assert_eq!(request["properties"]["trace_id"]["maxLength"], 256, "{request}");
    assert_eq!(request["properties"]["used"]["maxItems"], 50, "{request}");
    let required: Vec<&str> = request["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for field in ["tenant_id", "trace_id", "query", "used"] {
        assert!(required.contains(&field), "{field} not required: {request}");
    }
    assert!(!required.contains(&"shown") && !required.contains(&"verdict"), "{request}");
}
