//! The shared outbound HTTP core (`upstream`) against a scriptable fake server, once for every
//! client: retries and `Retry-After`, the deadline, garbage answers, the bearer key, the metrics.

use crate::common::fake_http::{closed_port_url, FakeResponse, FakeServer};
use retrieval_engine::{
    upstream::{chat_completion, http_client, post_json, Call, RetryPolicy, UpstreamErrorKind},
    Metrics,
};
use serde_json::json;
use std::time::{Duration, Instant};

const RETRY: RetryPolicy =
    RetryPolicy { max_attempts: 3, first_delay: Duration::from_millis(20), max_retry_after: Duration::from_secs(5) };

fn call<'a>(url: &'a str, metrics: Option<&'a Metrics>) -> Call<'a> {
    Call {
        upstream: "embedding",
        url,
        bearer: Some("sk-test"),
        attempt_timeout: Duration::from_secs(5),
        deadline: None,
        retry: RETRY,
        metrics,
    }
}

#[tokio::test]
async fn transient_failures_are_retried_with_the_key_and_recorded() {
    let server = FakeServer::start(vec![
        FakeResponse::new(503, "loading"),
        FakeResponse::new(429, "slow down").with_header("retry-after", "0.2"),
        FakeResponse::new(200, "{\"ok\": true}"),
    ])
    .await;
    let metrics = Metrics::new();
    let client = http_client(Duration::from_secs(5)).unwrap();
    let url = server.url();
    let started = Instant::now();
    let body = post_json(&client, &call(&url, Some(&metrics)), &json!({"x": 1})).await.unwrap();
    assert_eq!(body, "{\"ok\": true}");
    assert_eq!(server.request_count(), 3);
    assert!(started.elapsed() >= Duration::from_millis(200), "Retry-After was not waited: {:?}", started.elapsed());
    assert!(server.requests().iter().all(|r| r.header("authorization") == Some("Bearer sk-test")));
    let text = metrics.render();
    for outcome in ["unavailable", "rate_limited", "ok"] {
        let line = format!(
            "retrieval_upstream_request_duration_seconds_count{{upstream=\"embedding\",outcome=\"{outcome}\"}} 1"
        );
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
}

#[tokio::test]
async fn permanent_failures_are_not_retried() {
    for (status, kind) in [
        (400, UpstreamErrorKind::BadRequest),
        (401, UpstreamErrorKind::Unauthorized),
        (404, UpstreamErrorKind::NotFound),
    ] {
        let server = FakeServer::start(vec![FakeResponse::new(status, "no"), FakeResponse::new(200, "{}")]).await;
        let client = http_client(Duration::from_secs(5)).unwrap();
        let url = server.url();
        let error = post_json(&client, &call(&url, None), &json!({})).await.unwrap_err();
        assert_eq!(error.kind, kind, "{status}");
        assert_eq!(server.request_count(), 1, "{status} was retried");
    }
}

#[tokio::test]
async fn the_deadline_bounds_the_whole_call_retries_included() {
    let server = FakeServer::start(vec![FakeResponse::hang(), FakeResponse::hang(), FakeResponse::hang()]).await;
    let client = http_client(Duration::from_secs(30)).unwrap();
    let url = server.url();
    let started = Instant::now();
    let call = Call { deadline: Some(started + Duration::from_millis(300)), ..call(&url, None) };
    let error = post_json(&client, &call, &json!({})).await.unwrap_err();
    assert_eq!(error.kind, UpstreamErrorKind::Timeout);
    // A generous margin: the guard is that a hung server does not hold the caller for 30 s.
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    // A Retry-After beyond the deadline is not waited for.
    let server = FakeServer::start(vec![FakeResponse::new(429, "later").with_header("retry-after", "4")]).await;
    let url = server.url();
    let call = Call { deadline: Some(Instant::now() + Duration::from_secs(1)), ..self::call(&url, None) };
    let error = post_json(&client, &call, &json!({})).await.unwrap_err();
    assert_eq!(error.kind, UpstreamErrorKind::RateLimited);
    assert!(error.message.contains("no time left"), "{}", error.message);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_dead_server_is_unavailable() {
    let url = closed_port_url().await;
    let client = http_client(Duration::from_secs(2)).unwrap();
    let call = Call { retry: RetryPolicy::ONCE, ..call(&url, None) };
    assert_eq!(post_json(&client, &call, &json!({})).await.unwrap_err().kind, UpstreamErrorKind::Unavailable);
}

#[tokio::test]
async fn chat_completion_returns_the_first_choice_or_a_clear_error() {
    let good = json!({"choices": [{"message": {"role": "assistant", "content": "[1, 2]"}}]});
    let server = FakeServer::start(vec![
        FakeResponse::json(200, &good),
        FakeResponse::new(200, "<html>proxy error</html>"),
        FakeResponse::json(200, &json!({"choices": []})),
    ])
    .await;
    let client = http_client(Duration::from_secs(5)).unwrap();
    let url = server.url();
    let call = Call { retry: RetryPolicy::ONCE, ..call(&url, None) };
    assert_eq!(chat_completion(&client, &call, "m", "system", "user").await.unwrap(), "[1, 2]");
    let sent = server.requests()[0].json();
    assert_eq!(sent["model"], "m");
    assert_eq!(sent["messages"][0], json!({"role": "system", "content": "system"}));
    assert_eq!(sent["messages"][1], json!({"role": "user", "content": "user"}));
    for _ in 0..2 {
        let error = chat_completion(&client, &call, "m", "s", "u").await.unwrap_err();
        assert_eq!(error.kind, UpstreamErrorKind::InvalidResponse, "{}", error.message);
    }
}
