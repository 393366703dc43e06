//! Hostile-input hardening (issue 15): bounded work per request, one strict JSON parsing path,
//! load shedding, admin authentication and the smaller defects, through the router.

mod common;

use axum::http::StatusCode;
use common::{error_code, fixture_state, send};
use serde_json::{json, Value};

const SEARCH: &str = "/internal/retrieval/search";
const CONTEXT: &str = "/internal/retrieval/context";

/// `n` distinct short ids, as the repro builds them (3 characters of [A-Za-z0-9]).
fn short_ids(n: usize) -> Vec<String> {
    let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let mut ids = Vec::with_capacity(n);
    'outer: for a in &alphabet {
        for b in &alphabet {
            for c in &alphabet {
                if ids.len() == n {
                    break 'outer;
                }
                ids.push(format!("{a}{b}{c}"));
            }
        }
    }
    assert_eq!(ids.len(), n, "the alphabet has room for {n} ids");
    ids
}

fn message(body: &Value) -> String {
    body["error"]["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_huge_id_list_is_rejected_before_any_work() {
    let state = fixture_state(|s| s.max_body_bytes = 4 << 20);
    let ids = short_ids(174_000);
    let bodies = [
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "doc_ids": ids})),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"section_ids": ids}})),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "enable_filters": false, "section_ids": ids})),
        (CONTEXT, json!({"query": "x", "tenant_id": "t1", "doc_ids": ids})),
    ];
    for (uri, body) in bodies {
        let (status, answer) = send(&state, "POST", uri, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{uri}: {answer}");
        assert_eq!(error_code(&answer), "invalid_request");
        assert!(message(&answer).contains("at most 1000"), "{answer}");
    }
}

#[tokio::test]
async fn id_lists_are_merged_and_bounded_by_their_union() {
    let state = fixture_state(|_| {});
    let ids = short_ids(1000);
    // The same 1000 ids at the top level and under `filters`: 1000 distinct ids, accepted.
    let same = json!({"query": "x", "tenant_id": "t1", "doc_ids": ids, "filters": {"doc_ids": ids}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&same.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // 600 + 401 different ids: 1001 distinct ids, rejected.
    let more = short_ids(1001);
    let split = json!({"query": "x", "tenant_id": "t1", "doc_ids": more[..600], "filters": {"doc_ids": more[600..]}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&split.to_string())).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(message(&answer).contains("doc_ids"), "{answer}");
    // A real doc id repeated is one id: the search is filtered to it.
    let repeated = json!({"query": "Gradle", "tenant_id": "t1",
        "doc_ids": ["sdk/android/install", "sdk/android/install"], "filters": {"doc_ids": ["sdk/android/install"]}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&repeated.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let hits = answer["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.iter().all(|h| h["doc_id"] == "sdk/android/install"), "{answer}");
}

#[tokio::test]
async fn oversized_tags_and_ids_are_422() {
    let state = fixture_state(|_| {});
    let tags: Vec<String> = (0..101).map(|i| format!("tag{i}")).collect();
    let cases = [
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"tags": tags}}), "filters.tags"),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"tags": ["a".repeat(201)]}}), "filters.tags"),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "filters": {"product": "p".repeat(201)}}), "filters.product"),
        (SEARCH, json!({"query": "x", "tenant_id": "t1", "doc_ids": ["d".repeat(1025)]}), "doc_ids"),
        (
            "/internal/retrieval/chunks/window",
            json!({"tenant_id": "t1", "doc_id": "d".repeat(1025), "anchor_chunk_id": "x"}),
            "doc_id",
        ),
    ];
    for (uri, body, field) in cases {
        let (status, answer) = send(&state, "POST", uri, Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {answer}");
        assert!(message(&answer).starts_with(field), "{field}: {answer}");
    }
    // 100 tags of 200 characters are within the limits (they match nothing here).
    let tags: Vec<String> = (0..100).map(|i| format!("{i:0>200}")).collect();
    let body = json!({"query": "x", "tenant_id": "t1", "filters": {"tags": tags}});
    let (status, answer) = send(&state, "POST", SEARCH, Some(&body.to_string())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}
