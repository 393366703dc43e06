//! Contract tests of `HttpEmbedder` (and the query fallback) against a scripted local HTTP server.

use crate::common::fake_http;

use fake_http::{closed_port_url, FakeResponse, FakeServer};
use retrieval_engine::{
    build_embedder, embed_query_with_fallback, EmbedErrorKind, Embedder, HttpEmbedder, HttpEmbedderConfig, InputKind,
    PseudoEmbedder,
};
use retrieval_service::config::{Secret, Settings};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(300);
/// Generous: these guard that a dead provider cannot hold a caller far past its timeout, not speed.
const MARGIN: Duration = Duration::from_secs(2);

fn config(base: &str) -> HttpEmbedderConfig {
    HttpEmbedderConfig {
        api_base: base.to_string(),
        api_key: Secret::new("sk-test"),
        model: "test-e5".into(),
        expected_dimension: Some(3),
        timeout: TIMEOUT,
        max_attempts: 3,
        retry_delay: Duration::from_millis(20),
        batch_size: 2,
        send_input_type: true,
        query_prefix: String::new(),
        passage_prefix: String::new(),
    }
}

fn embedder(base: &str) -> HttpEmbedder {
    HttpEmbedder::new(config(base)).unwrap()
}

fn texts(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| value.to_string()).collect()
}

/// A valid answer: the vector of input i is `[i, len(text), 1]`, listed in reverse index order.
fn vectors_for(request_body: &Value) -> Value {
    let inputs = request_body["input"].as_array().cloned().unwrap_or_default();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(index, text)| {
            let length = text.as_str().unwrap_or_default().chars().count();
            json!({"object": "embedding", "index": index, "embedding": [index as f32, length as f32, 1.0]})
        })
        .collect();
    json!({"object": "list", "data": data, "model": "test-e5"})
}

fn ok_answer(vectors: &[Vec<f32>]) -> FakeResponse {
    let data: Vec<Value> =
        vectors.iter().enumerate().map(|(index, vector)| json!({"index": index, "embedding": vector})).collect();
    FakeResponse::json(200, &json!({"data": data}))
}

#[tokio::test]
async fn ok_batches_orders_by_index_and_sends_model_type_and_key() {
    let server = FakeServer::start_with(|request, _| FakeResponse::json(200, &vectors_for(&request.json()))).await;
    let vectors = embedder(&server.url()).embed(&texts(&["а", "бб", "ввв"]), InputKind::Passage).await.unwrap();
    assert_eq!(vectors, vec![vec![0.0, 1.0, 1.0], vec![1.0, 2.0, 1.0], vec![0.0, 3.0, 1.0]]);

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "batch size 2 splits 3 texts into 2 requests");
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("POST", "/v1/embeddings"));
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(requests[0].json(), json!({"model": "test-e5", "input": ["а", "бб"], "input_type": "passage"}));
    assert_eq!(requests[1].json()["input"], json!(["ввв"]));
}

#[tokio::test]
async fn prefixes_without_input_type_and_no_key() {
    let server = FakeServer::start_with(|request, _| FakeResponse::json(200, &vectors_for(&request.json()))).await;
    let mut config = config(&format!("{}/v1/", server.url()));
    config.send_input_type = false;
    config.api_key = Secret::default();
    config.query_prefix = "query: ".into();
    HttpEmbedder::new(config).unwrap().embed(&texts(&["где отчёт"]), InputKind::Query).await.unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/embeddings");
    assert_eq!(request.json(), json!({"model": "test-e5", "input": ["query: где отчёт"]}));
    assert_eq!(request.header("authorization"), None);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for (status, kind) in
        [(400, EmbedErrorKind::BadRequest), (401, EmbedErrorKind::Unauthorized), (404, EmbedErrorKind::NotFound)]
    {
        let server = FakeServer::start(vec![FakeResponse::new(status, r#"{"error":{"message":"no"}}"#)]).await;
        let error = embedder(&server.url()).embed(&texts(&["q"]), InputKind::Query).await.unwrap_err();
        assert_eq!(error.kind, kind, "status {status}");
        assert!(error.message.contains(&status.to_string()), "{}", error.message);
        assert_eq!(server.request_count(), 1, "status {status} must not be retried");
    }
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let server = FakeServer::start(vec![
        FakeResponse::new(500, "inference failed"),
        FakeResponse::new(503, "loading"),
        ok_answer(&[vec![0.1, 0.2, 0.3]]),
    ])
    .await;
    let vectors = embedder(&server.url()).embed(&texts(&["q"]), InputKind::Query).await.unwrap();
    assert_eq!(vectors, vec![vec![0.1, 0.2, 0.3]]);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn persistent_unavailability_stops_after_max_attempts() {
    let server = FakeServer::start(vec![FakeResponse::new(503, "down")]).await;
    let error = embedder(&server.url()).embed(&texts(&["q"]), InputKind::Query).await.unwrap_err();
    assert_eq!(error.kind, EmbedErrorKind::Unavailable);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let server = FakeServer::start(vec![
        FakeResponse::new(429, "slow down").with_header("retry-after", "1"),
        ok_answer(&[vec![1.0, 0.0, 0.0]]),
    ])
    .await;
    let started = Instant::now();
    embedder(&server.url()).embed(&texts(&["p"]), InputKind::Passage).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn retry_after_beyond_the_query_deadline_fails_fast() {
    let server = FakeServer::start(vec![
        FakeResponse::new(429, "slow down").with_header("retry-after", "5"),
        ok_answer(&[vec![1.0, 0.0, 0.0]]),
    ])
    .await;
    let started = Instant::now();
    let error = embedder(&server.url()).embed(&texts(&["q"]), InputKind::Query).await.unwrap_err();
    assert_eq!(error.kind, EmbedErrorKind::RateLimited);
    assert!(started.elapsed() < TIMEOUT + MARGIN, "took {:?}", started.elapsed());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_hanging_provider_costs_a_query_at_most_its_timeout() {
    let server = FakeServer::start(vec![FakeResponse::hang()]).await;
    let started = Instant::now();
    let error = embedder(&server.url()).embed(&texts(&["q"]), InputKind::Query).await.unwrap_err();
    assert_eq!(error.kind, EmbedErrorKind::Timeout);
    assert!(started.elapsed() < TIMEOUT + MARGIN, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_slow_first_attempt_of_a_passage_batch_is_retried() {
    let server = FakeServer::start(vec![FakeResponse::hang(), ok_answer(&[vec![0.0, 1.0, 0.0]])]).await;
    let vectors = embedder(&server.url()).embed(&texts(&["p"]), InputKind::Passage).await.unwrap();
    assert_eq!(vectors, vec![vec![0.0, 1.0, 0.0]]);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn connection_refused_is_unavailable_and_bounded() {
    let started = Instant::now();
    let error = embedder(&closed_port_url().await).embed(&texts(&["q"]), InputKind::Query).await.unwrap_err();
    assert_eq!(error.kind, EmbedErrorKind::Unavailable);
    assert!(started.elapsed() < TIMEOUT + MARGIN, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn invalid_answers_are_errors_not_vectors() {
    let answers = [
        ("malformed json", FakeResponse::new(200, "{\"data\": [")),
        ("not the openai shape", FakeResponse::json(200, &json!({"embeddings": [[1.0, 0.0, 0.0]]}))),
        ("too few vectors", ok_answer(&[vec![1.0, 0.0, 0.0]])),
        ("too many vectors", ok_answer(&[vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0], vec![0.0, 0.0, 1.0]])),
        ("wrong dimension", ok_answer(&[vec![1.0, 0.0], vec![0.0, 1.0]])),
        ("mixed dimensions", ok_answer(&[vec![1.0, 0.0, 0.0], vec![0.0, 1.0]])),
        (
            "repeated index",
            FakeResponse::json(
                200,
                &json!({"data": [{"index": 0, "embedding": [1, 0, 0]}, {"index": 0, "embedding": [0, 1, 0]}]}),
            ),
        ),
    ];
    for (name, answer) in answers {
        let server = FakeServer::start(vec![answer]).await;
        let error = embedder(&server.url()).embed(&texts(&["a", "b"]), InputKind::Passage).await.unwrap_err();
        assert_eq!(error.kind, EmbedErrorKind::InvalidResponse, "{name}: {error}");
        assert_eq!(server.request_count(), 1, "{name}: an invalid answer is not retried");
    }
}

#[tokio::test]
async fn unordered_indices_are_put_back_in_input_order() {
    let answer = json!({"data": [
        {"index": 2, "embedding": [0, 0, 1]},
        {"index": 0, "embedding": [1, 0, 0]},
        {"index": 1, "embedding": [0, 1, 0]},
    ]});
    let server = FakeServer::start(vec![FakeResponse::json(200, &answer)]).await;
    let mut config = config(&server.url());
    config.batch_size = 8;
    let vectors = HttpEmbedder::new(config).unwrap().embed(&texts(&["a", "b", "c"]), InputKind::Passage).await.unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0], vec![0.0, 0.0, 1.0]]);
}

#[tokio::test]
async fn a_dead_provider_degrades_the_query_to_pseudo_embeddings_within_the_timeout() {
    let server = FakeServer::start(vec![FakeResponse::hang()]).await;
    let pseudo = PseudoEmbedder::new(3);
    let started = Instant::now();
    let (vector, degradation) =
        embed_query_with_fallback(&embedder(&server.url()), &pseudo, "как установить сертификат").await;
    assert!(started.elapsed() < TIMEOUT + MARGIN, "took {:?}", started.elapsed());
    assert_eq!(vector, pseudo.embed_one("как установить сертификат"));
    assert!(degradation.expect("a degradation message").contains("Timeout"));
}

#[tokio::test]
async fn the_built_embedder_caches_repeated_queries() {
    let server = FakeServer::start_with(|request, _| FakeResponse::json(200, &vectors_for(&request.json()))).await;
    let settings = Settings {
        embedding_api_base: server.url(),
        embedding_dimension: 3,
        embedding_timeout_seconds: 0.3,
        ..Settings::default()
    };
    let embedder = build_embedder(&settings.embedding_client(), None).unwrap();
    let first = embedder.embed(&texts(&["вопрос"]), InputKind::Query).await.unwrap();
    let second = embedder.embed(&texts(&["вопрос"]), InputKind::Query).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(server.request_count(), 1);
    embedder.embed(&texts(&["вопрос"]), InputKind::Passage).await.unwrap();
    assert_eq!(server.request_count(), 2, "a passage is not answered from the query cache");
}
