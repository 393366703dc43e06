//! Contract tests of the chat-completions and `/rerank` clients against a scripted local server
//! playing a hostile LLM: every malformed answer must leave each original section exactly once.

use crate::common::fake_http;

use fake_http::{closed_port_url, FakeResponse, FakeServer};
use retrieval_engine::{
    build_reranker, merge_rerank, ChatReranker, RerankApiReranker, RerankCandidate, RerankClientConfig,
    RerankErrorKind, Reranker,
};
use retrieval_service::config::{RerankBackend, Secret, Settings};
use serde_json::json;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(300);
/// Generous: these guard that a dead provider cannot hold a caller far past its timeout, not speed.
const MARGIN: Duration = Duration::from_secs(2);

fn config(base: &str) -> RerankClientConfig {
    RerankClientConfig {
        api_base: base.to_string(),
        api_key: Secret::new("sk-rerank"),
        model: "judge-mini".into(),
        timeout: TIMEOUT,
        metrics: None,
    }
}

fn candidates() -> Vec<RerankCandidate> {
    ["sec-a", "sec-b", "sec-c"]
        .iter()
        .map(|id| RerankCandidate {
            section_id: id.to_string(),
            title: format!("Документ {id}"),
            heading: "Установка".into(),
            excerpt: "Откройте настройки и нажмите «Установить».".into(),
        })
        .collect()
}

fn original_ids() -> Vec<String> {
    candidates().into_iter().map(|candidate| candidate.section_id).collect()
}

fn chat_answer(content: &str) -> FakeResponse {
    FakeResponse::json(
        200,
        &json!({"id": "x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ]}),
    )
}

fn assert_every_original_once(order: &[String]) {
    let mut sorted = order.to_vec();
    sorted.sort();
    assert_eq!(sorted, original_ids(), "merged order {order:?}");
}

#[tokio::test]
async fn chat_request_shape_and_scores() {
    let server = FakeServer::start(vec![chat_answer(
        r#"[{"section_id":"sec-c","score":0.9},{"section_id":"sec-a","score":0.2}]"#,
    )])
    .await;
    let reranker = ChatReranker::new(config(&server.url())).unwrap();
    let scores = reranker.rerank("как установить?", &candidates()).await.unwrap();
    let merged: Vec<String> = merge_rerank(&original_ids(), &scores).into_iter().map(|(id, _)| id).collect();
    assert_eq!(merged, ["sec-c", "sec-a", "sec-b"]);

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer sk-rerank"));
    let body = request.json();
    assert_eq!(body["model"], "judge-mini");
    let user_message = body["messages"][1]["content"].as_str().unwrap();
    assert!(user_message.contains("как установить?") && user_message.contains("section_id: sec-b"), "{user_message}");
}

#[tokio::test]
async fn chat_base_with_v1_suffix_is_accepted() {
    let server = FakeServer::start(vec![chat_answer("[]")]).await;
    let reranker = ChatReranker::new(config(&format!("{}/v1", server.url()))).unwrap();
    assert!(reranker.rerank("q", &candidates()).await.unwrap().is_empty());
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
}

#[tokio::test]
async fn every_malformed_answer_keeps_each_section_exactly_once() {
    type Expected = Result<Vec<&'static str>, RerankErrorKind>;
    let cases: Vec<(&str, String, Expected)> = vec![
        (
            "fenced",
            "```json\n[{\"section_id\": \"sec-b\", \"score\": 0.8}]\n```".into(),
            Ok(vec!["sec-b", "sec-a", "sec-c"]),
        ),
        (
            "prose around",
            "Конечно! Вот оценки:\n[{\"section_id\": \"sec-c\", \"score\": 1}]\nНадеюсь, это поможет.".into(),
            Ok(vec!["sec-c", "sec-a", "sec-b"]),
        ),
        (
            "object wrapper",
            r#"{"results": [{"section_id": "sec-b", "score": 0.5}, {"section_id": "sec-a", "score": 0.7}]}"#.into(),
            Ok(vec!["sec-a", "sec-b", "sec-c"]),
        ),
        (
            "unknown ids",
            r#"[{"section_id": "sec-zzz", "score": 1.0}, {"section_id": "sec-c", "score": 0.1}]"#.into(),
            Ok(vec!["sec-c", "sec-a", "sec-b"]),
        ),
        ("missing ids", r#"[{"section_id": "sec-b", "score": 0.3}]"#.into(), Ok(vec!["sec-b", "sec-a", "sec-c"])),
        (
            "duplicate ids",
            r#"[{"section_id": "sec-c", "score": 0.1}, {"section_id": "sec-c", "score": 0.99}, {"section_id": "sec-b", "score": 0.5}]"#
                .into(),
            Ok(vec!["sec-b", "sec-c", "sec-a"]),
        ),
        (
            "non-numeric scores",
            r#"[{"section_id": "sec-a", "score": "high"}, {"section_id": "sec-b", "score": NaN}, {"section_id": "sec-c", "score": 0.4}]"#
                .into(),
            Ok(vec!["sec-c", "sec-a", "sec-b"]),
        ),
        ("empty array", "[]".into(), Ok(vec!["sec-a", "sec-b", "sec-c"])),
        ("garbage", "I am unable to rank these sections.".into(), Err(RerankErrorKind::InvalidResponse)),
        ("only unknown ids", r#"[{"section_id": "x", "score": 1}]"#.into(), Err(RerankErrorKind::InvalidResponse)),
    ];
    for (name, content, expected) in cases {
        let server = FakeServer::start(vec![chat_answer(&content)]).await;
        let outcome = ChatReranker::new(config(&server.url())).unwrap().rerank("q", &candidates()).await;
        let scores = match (outcome, expected.clone()) {
            (Ok(scores), Ok(_)) => scores,
            (Err(error), Err(kind)) => {
                assert_eq!(error.kind, kind, "{name}");
                Vec::new()
            }
            (outcome, expected) => panic!("{name}: got {outcome:?}, expected {expected:?}"),
        };
        let merged: Vec<String> = merge_rerank(&original_ids(), &scores).into_iter().map(|(id, _)| id).collect();
        assert_every_original_once(&merged);
        if let Ok(order) = expected {
            assert_eq!(merged, order, "{name}");
        }
    }
}

#[tokio::test]
async fn chat_http_failures_have_kinds() {
    let cases = [
        (FakeResponse::new(400, "bad"), RerankErrorKind::BadRequest),
        (FakeResponse::new(401, "who are you"), RerankErrorKind::Unauthorized),
        (FakeResponse::new(429, "slow down").with_header("retry-after", "1"), RerankErrorKind::RateLimited),
        (FakeResponse::new(500, "oops"), RerankErrorKind::Unavailable),
        (FakeResponse::new(503, "busy"), RerankErrorKind::Unavailable),
        (FakeResponse::new(200, "<html>not json</html>"), RerankErrorKind::InvalidResponse),
        (FakeResponse::json(200, &json!({"choices": []})), RerankErrorKind::InvalidResponse),
        (
            FakeResponse::json(200, &json!({"choices": [{"message": {"content": null}}]})),
            RerankErrorKind::InvalidResponse,
        ),
    ];
    for (response, kind) in cases {
        let status = response.status;
        let server = FakeServer::start(vec![response]).await;
        let error = ChatReranker::new(config(&server.url())).unwrap().rerank("q", &candidates()).await.unwrap_err();
        assert_eq!(error.kind, kind, "status {status}: {error}");
        assert_eq!(server.request_count(), 1, "a rerank is never retried");
    }
}

#[tokio::test]
async fn a_hanging_reranker_is_cut_at_its_timeout() {
    let server = FakeServer::start(vec![FakeResponse::hang()]).await;
    for reranker in [
        Box::new(ChatReranker::new(config(&server.url())).unwrap()) as Box<dyn Reranker>,
        Box::new(RerankApiReranker::new(config(&server.url())).unwrap()),
    ] {
        let started = Instant::now();
        let error = reranker.rerank("q", &candidates()).await.unwrap_err();
        assert_eq!(error.kind, RerankErrorKind::Timeout);
        assert!(started.elapsed() < TIMEOUT + MARGIN, "took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn connection_refused_is_unavailable() {
    let url = closed_port_url().await;
    let error = ChatReranker::new(config(&url)).unwrap().rerank("q", &candidates()).await.unwrap_err();
    assert_eq!(error.kind, RerankErrorKind::Unavailable);
    let error = RerankApiReranker::new(config(&url)).unwrap().rerank("q", &candidates()).await.unwrap_err();
    assert_eq!(error.kind, RerankErrorKind::Unavailable);
}

#[tokio::test]
async fn rerank_api_request_shape_and_scores() {
    let answer = json!({"results": [
        {"index": 1, "relevance_score": 0.92},
        {"index": 9, "relevance_score": 0.99},
        {"index": 0, "relevance_score": 0.15}
    ]});
    let server = FakeServer::start(vec![FakeResponse::json(200, &answer)]).await;
    let reranker = RerankApiReranker::new(config(&format!("{}/v1/", server.url()))).unwrap();
    let scores = reranker.rerank("как установить?", &candidates()).await.unwrap();
    let merged: Vec<String> = merge_rerank(&original_ids(), &scores).into_iter().map(|(id, _)| id).collect();
    assert_eq!(merged, ["sec-b", "sec-a", "sec-c"]);

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/rerank");
    assert_eq!(request.header("authorization"), Some("Bearer sk-rerank"));
    let body = request.json();
    assert_eq!((body["model"].as_str(), body["query"].as_str()), (Some("judge-mini"), Some("как установить?")));
    assert_eq!(body["top_n"], 3);
    assert_eq!(body["documents"].as_array().unwrap().len(), 3);
    assert!(body["documents"][0].as_str().unwrap().contains("Документ sec-a"));
}

#[tokio::test]
async fn rerank_api_failures_have_kinds() {
    let cases = [
        (FakeResponse::new(500, "oops"), RerankErrorKind::Unavailable),
        (FakeResponse::new(401, ""), RerankErrorKind::Unauthorized),
        (FakeResponse::new(200, "{\"results\": ["), RerankErrorKind::InvalidResponse),
        (FakeResponse::json(200, &json!({"data": []})), RerankErrorKind::InvalidResponse),
    ];
    for (response, kind) in cases {
        let server = FakeServer::start(vec![response]).await;
        let error =
            RerankApiReranker::new(config(&server.url())).unwrap().rerank("q", &candidates()).await.unwrap_err();
        assert_eq!(error.kind, kind, "{error}");
    }
}

#[tokio::test]
async fn build_reranker_follows_the_settings() {
    let error = build_reranker(&Settings::default().rerank_client(), None)
        .unwrap()
        .rerank("q", &candidates())
        .await
        .unwrap_err();
    assert_eq!(error.kind, RerankErrorKind::NotConfigured);

    let server = FakeServer::start(vec![FakeResponse::json(200, &json!({"results": []}))]).await;
    let settings = Settings {
        rerank_api_base: server.url(),
        rerank_backend: RerankBackend::RerankApi,
        rerank_timeout_seconds: 0.3,
        ..Settings::default()
    };
    build_reranker(&settings.rerank_client(), None).unwrap().rerank("q", &candidates()).await.unwrap();
    assert_eq!(server.requests()[0].path, "/rerank");

    let server = FakeServer::start(vec![chat_answer("[]")]).await;
    let settings = Settings { rerank_api_base: server.url(), ..Settings::default() };
    build_reranker(&settings.rerank_client(), None).unwrap().rerank("q", &candidates()).await.unwrap();
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
}
