//! The Dify endpoint against what Dify's real client does (langgenius/dify's
//! `external_knowledge_service.py`, `dataset_retrieval.py`, `ssrf_proxy.py`): bodies written as its
//! `json.dumps` writes them (keys in its order, non-ASCII text `\uXXXX`-escaped, `null` where a
//! setting is unset), the records re-sorted by `score`, `metadata.document_id` read, a trailing
//! `/` on the registered endpoint, a 5 s read timeout.

use crate::common::fake_http::{FakeResponse, FakeServer};
use crate::common::send;
use crate::dify::{corpus, state};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use retrieval_engine::{fixtures, InMemoryIndex};
use retrieval_service::config::Settings;
use retrieval_service::{startup, AppState};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const DIFY: &str = "/internal/retrieval/dify/retrieval";

/// Text as Python's `json.dumps` writes it by default: every non-ASCII character `\uXXXX`.
fn ascii(text: &str) -> String {
    let mut escaped = String::new();
    for unit in text.encode_utf16() {
        match char::from_u32(u32::from(unit)) {
            Some(c) if c.is_ascii() && c != '"' && c != '\\' && !c.is_ascii_control() => escaped.push(c),
            _ => escaped.push_str(&format!("\\u{unit:04x}")),
        }
    }
    escaped
}

/// Dify's request body: `json.dumps(request_params)` with its keys in Dify's order.
fn dify_body(knowledge_id: &str, query: &str, top_k: &str, threshold: &str, condition: &str) -> String {
    format!(
        r#"{{"retrieval_setting": {{"top_k": {top_k}, "score_threshold": {threshold}}}, "query": "{}", "knowledge_id": "{knowledge_id}", "metadata_condition": {condition}}}"#,
        ascii(query)
    )
}

async fn post(state: &AppState, path: &str, body: &str) -> (StatusCode, Value) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = retrieval_service::app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("not JSON: {bytes:?}")))
}

async fn records(state: &AppState, body: &str) -> Vec<Value> {
    let (status, answer) = post(state, DIFY, body).await;
    assert_eq!(status, StatusCode::OK, "{body} → {answer}");
    answer["records"].as_array().unwrap_or_else(|| panic!("no records: {answer}")).clone()
}

fn ids(records: &[Value]) -> Vec<String> {
    records.iter().map(|r| r["metadata"]["id"].as_str().unwrap().to_string()).collect()
}

fn docs(records: &[Value]) -> BTreeSet<String> {
    records.iter().map(|r| r["metadata"]["doc_id"].as_str().unwrap().to_string()).collect()
}

fn scores(records: &[Value]) -> Vec<f64> {
    records.iter().map(|r| r["score"].as_f64().unwrap()).collect()
}

/// What Dify does with the records: a stable sort by `score`, highest first.
fn sorted_by_score_as_dify_does(records: &[Value]) -> Vec<String> {
    let mut sorted = records.to_vec();
    sorted.sort_by(|a, b| b["score"].as_f64().unwrap().total_cmp(&a["score"].as_f64().unwrap()));
    ids(&sorted)
}

async fn demo() -> AppState {
    startup::build_state(Settings::default()).await.unwrap()
}

#[test]
fn the_bodies_are_escaped_as_dify_escapes_them() {
    let body = dify_body("demo", "как сбросить пароль", "4", "0.0", "null");
    assert_eq!(
        body,
        r#"{"retrieval_setting": {"top_k": 4, "score_threshold": 0.0}, "query": "\u043a\u0430\u043a \u0441\u0431\u0440\u043e\u0441\u0438\u0442\u044c \u043f\u0430\u0440\u043e\u043b\u044c", "knowledge_id": "demo", "metadata_condition": null}"#
    );
}

/// For the same question and knowledge base, the records come in `/search`'s order, their scores
/// strictly decrease, so Dify's sort by score keeps that order, and `document_id` is the page.
#[tokio::test]
async fn a_dify_user_gets_the_search_ranking_and_sorting_by_score_keeps_it() {
    let state = demo().await;
    for question in [
        "как сбросить пароль",
        "как установить сдк на айфон",
        "как подключить телеграм",
        "почему не получается закрыть чат без тега",
        "как оператору перевести чат на коллегу",
    ] {
        let search = json!({"tenant_id": "demo", "query": question, "max_results": 10}).to_string();
        let (status, ranking) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
        assert_eq!(status, StatusCode::OK, "{ranking}");
        let ranked: Vec<String> =
            ranking["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect();
        assert!(ranked.len() >= 5, "{question}: {ranking}");
        let found = records(&state, &dify_body("demo", question, "10", "0.0", "null")).await;
        assert_eq!(ids(&found), ranked, "{question}: the records are /search's hits in its order");
        let scores = scores(&found);
        assert!(scores.windows(2).all(|pair| pair[0] > pair[1]), "{question}: {scores:?}");
        assert!(scores.iter().all(|score| (0.0..=1.0).contains(score)), "{question}: {scores:?}");
        assert_eq!(sorted_by_score_as_dify_does(&found), ranked, "{question}");
        for (record, hit) in found.iter().zip(ranking["hits"].as_array().unwrap()) {
            assert_eq!(record["metadata"]["document_id"], hit["doc_id"], "{record}");
            assert_eq!(record["metadata"]["rank_score"], hit["score"]);
        }
    }
}

#[tokio::test]
async fn score_threshold_applies_to_the_ordered_score_and_keeps_a_prefix() {
    let state = demo().await;
    let question = "как сбросить пароль";
    let all = records(&state, &dify_body("demo", question, "10", "0.0", "null")).await;
    assert!(all.len() >= 4);
    let third = scores(&all)[2];
    let kept = records(&state, &dify_body("demo", question, "10", &third.to_string(), "null")).await;
    assert_eq!(ids(&kept), ids(&all)[..3].to_vec());
}

#[tokio::test]
async fn null_settings_are_defaults_and_top_k_above_the_cap_is_capped() {
    let state = state(|s| s.max_results = 2);
    let question = "установка SDK теги чат отчёт лицензия Gradle CocoaPods";
    let at_default = records(&state, &dify_body("t1", question, "null", "null", "null")).await;
    let two = records(&state, &dify_body("t1", question, "2", "0.0", "null")).await;
    assert_eq!(ids(&at_default), ids(&two), "top_k null is the service's max_results");
    let capped = records(&state, &dify_body("t1", question, "100", "0.0", "null")).await;
    let fifty = records(&state, &dify_body("t1", question, "50", "0.0", "null")).await;
    assert_eq!(ids(&capped), ids(&fifty));
    assert!(capped.len() > two.len(), "{capped:?}");
    let ten = records(&state, &dify_body("t1", question, "10", "0.0", "null")).await;
    // `conditions: null`, and a blank row (Dify's filter row left without a value) filter nothing.
    for condition in [
        r#"{"logical_operator": "and", "conditions": null}"#,
        r#"{"logical_operator": "or", "conditions": []}"#,
        r#"{"logical_operator": "and", "conditions": [{"name": "product", "comparison_operator": "is", "value": null}]}"#,
        r#"{"logical_operator": "or", "conditions": [{"name": "upload_date", "comparison_operator": "before", "value": null}]}"#,
    ] {
        let found = records(&state, &dify_body("t1", question, "10", "0.0", condition)).await;
        assert_eq!(ids(&found), ids(&ten), "{condition}");
    }
    // A blank row beside a real one: the real one alone decides, whatever the logic.
    let sdk = r#"{"name": "product", "comparison_operator": "is", "value": "sdk"}"#;
    let blank = r#"{"name": "role", "comparison_operator": "is", "value": null}"#;
    let alone =
        records(&state, &dify_body("t1", question, "10", "0.0", &format!(r#"{{"conditions": [{sdk}]}}"#))).await;
    assert_eq!(docs(&alone), ["sdk/android/install", "sdk/ios/install"].map(String::from).into());
    for logic in ["and", "or"] {
        let condition = format!(r#"{{"logical_operator": "{logic}", "conditions": [{blank}, {sdk}]}}"#);
        let found = records(&state, &dify_body("t1", question, "10", "0.0", &condition)).await;
        assert_eq!(ids(&found), ids(&alone), "{logic}");
    }
}

#[tokio::test]
async fn unknown_fields_are_accepted_and_malformed_bodies_still_refused() {
    let state = state(|_| {});
    let plain = dify_body("t1", "Gradle", "3", "0.0", "null");
    let expected = ids(&records(&state, &plain).await);
    let extended = plain.replacen('{', r#"{"attachment_ids": ["a1"], "user": {"id": 7}, "#, 1).replacen(
        r#""score_threshold": 0.0"#,
        r#""score_threshold": 0.0, "score_threshold_enabled": false"#,
        1,
    );
    assert_eq!(ids(&records(&state, &extended).await), expected, "{extended}");
    let refused = [
        (plain.replacen(r#""knowledge_id": "t1""#, r#""knowledge_id": "t1", "knowledge_id": "t2""#, 1), 422),
        (plain.replacen(r#""top_k": 3"#, r#""top_k": 3, "top_k": 50"#, 1), 422),
        (plain.replacen('{', r#"{"extra": 1, "extra": 2, "#, 1), 422),
        (plain.replacen(r#""top_k": 3"#, r#""top_k": "3""#, 1), 422),
        (plain.replacen(r#""metadata_condition": null"#, r#""metadata_condition": []"#, 1), 422),
        (plain[..plain.len() - 1].to_string(), 400),
    ];
    for (body, status) in refused {
        let (got, answer) = post(&state, DIFY, &body).await;
        assert_eq!(got.as_u16(), status, "{body} → {answer}");
        assert_eq!(answer["error_code"], status, "Dify's error body: {answer}");
        assert!(answer["error_msg"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }
}

#[tokio::test]
async fn difys_built_in_fields_mean_ours_or_match_nothing() {
    let state = state(|_| {});
    let question = "установка SDK теги чат отчёт лицензия Gradle CocoaPods";
    let one = |name: &str, operator: &str, value: &str| {
        format!(
            r#"{{"logical_operator": "and", "conditions": [{{"name": "{name}", "comparison_operator": "{operator}", "value": {value}}}]}}"#
        )
    };
    let snapshot = corpus();
    let title = &snapshot.docs.iter().find(|d| d.meta.doc_id == "sdk/ios/install").unwrap().meta.title;
    let cases: Vec<(String, Vec<&str>)> = vec![
        (one("document_name", "is", &format!("\"{}\"", ascii(title))), vec!["sdk/ios/install"]),
        (one("upload_date", "before", "\"2026-01-01\""), vec!["docs/agent/tags"]),
        (one("last_update_date", "after", "1772366400"), vec!["sdk/ios/install", "docs/supervisor/reports"]),
        (one("uploader", "is", "\"admin\""), vec![]),
        (one("uploader", "not empty", "null"), vec![]),
        // Dify's `source` is the upload channel; ours is the source file, so channels match nothing.
        (one("source", "is", "\"upload_file\""), vec![]),
    ];
    for (condition, expected) in cases {
        let found = records(&state, &dify_body("t1", question, "50", "0.0", &condition)).await;
        assert_eq!(docs(&found), expected.iter().map(|d| d.to_string()).collect(), "{condition}");
    }
    let everything = docs(&records(&state, &dify_body("t1", question, "50", "0.0", "null")).await);
    let absent = records(&state, &dify_body("t1", question, "50", "0.0", &one("uploader", "empty", "null"))).await;
    assert_eq!(docs(&absent), everything, "no record has an uploader");
}

/// Dify's date picker sends Unix seconds; `is` is the same second, whatever the form.
#[tokio::test]
async fn dates_compare_as_instants() {
    let state = state(|_| {});
    let question = "установка SDK теги чат отчёт лицензия Gradle CocoaPods";
    let condition = |operator: &str, value: &str| {
        format!(
            r#"{{"logical_operator": "and", "conditions": [{{"name": "upload_date", "comparison_operator": "{operator}", "value": {value}}}]}}"#
        )
    };
    // sdk/android/install and docs/admin/tags were indexed at 2026-03-01T12:00:00Z = 1772366400.
    let same: BTreeSet<String> = ["sdk/android/install", "docs/admin/tags"].map(String::from).into();
    for value in ["1772366400", "1772366400.9", "\"2026-03-01T15:00:00+03:00\"", "\"1772366400\""] {
        let found = records(&state, &dify_body("t1", question, "50", "0.0", &condition("is", value))).await;
        assert_eq!(docs(&found), same, "is {value}");
    }
    for value in ["1772366399", "1772366401", "\"2026-03-01\""] {
        let found = records(&state, &dify_body("t1", question, "50", "0.0", &condition("is", value))).await;
        assert!(found.is_empty(), "is {value}: {:?}", docs(&found));
    }
    let others =
        docs(&records(&state, &dify_body("t1", question, "50", "0.0", &condition("is not", "1772366400"))).await);
    assert_eq!(others, ["sdk/ios/install", "docs/agent/tags", "docs/supervisor/reports"].map(String::from).into());
}

#[tokio::test]
async fn an_endpoint_registered_with_a_trailing_slash_is_reached() {
    let state = state(|_| {});
    let body = dify_body("t1", "Gradle", "3", "0.0", "null");
    let expected = ids(&records(&state, &body).await);
    // Dify calls f"{endpoint}/retrieval".
    for endpoint in ["/internal/retrieval/dify/", "/internal/retrieval/dify//", "//internal/retrieval/dify"] {
        let (status, answer) = post(&state, &format!("{endpoint}/retrieval"), &body).await;
        assert_eq!(status, StatusCode::OK, "{endpoint}: {answer}");
        assert_eq!(ids(answer["records"].as_array().unwrap()), expected);
    }
    let (status, answer) = post(&state, "/internal/retrieval/dify/retrieval/", &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, _) = send(&state, "GET", "/internal/retrieval/dify//retrieval", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = post(&state, "/internal/retrieval/dify//retrieval/x", &body).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The same through a socket, as Dify's HTTP client sends it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(retrieval_service::server::serve(listener, state.clone(), async {
        let _ = stopped.await;
    }));
    let endpoint = format!("http://{address}/internal/retrieval/dify/");
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/retrieval"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.url().path(), "/internal/retrieval/dify//retrieval");
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(ids(answer["records"].as_array().unwrap()), expected);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// An embedding server that sleeps: the Dify answer still comes within the time budget, ranked
/// lexically and flagged, and `/metrics` counts it.
#[tokio::test]
async fn a_slow_embedding_server_is_answered_within_the_budget_lexically_and_flagged() {
    let sleeping = FakeServer::start(vec![FakeResponse::hang()]).await;
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    settings.embedding_api_base = sleeping.url();
    settings.embedding_timeout_seconds = 10.0;
    settings.dify_time_budget_seconds = 2.0;
    let embedder = startup::build_embedder(&settings, None).unwrap();
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    let state = startup::state_with(settings, index, embedder);
    let started = Instant::now();
    let (status, answer) =
        post(&state, DIFY, &dify_body("t1", "Подключение Android SDK через Gradle", "5", "0.0", "null")).await;
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(elapsed < Duration::from_secs(2), "answered after {elapsed:?}, the budget is 2 s");
    assert!(elapsed >= Duration::from_millis(1400), "the full pipeline had 1.5 s: {elapsed:?}");
    assert!(sleeping.request_count() >= 1, "the query went to the embedding server");
    let codes: Vec<&str> =
        answer["degradations"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["time_budget"], "{answer}");
    let found = answer["records"].as_array().unwrap();
    assert_eq!(found[0]["metadata"]["doc_id"], "sdk/android/install", "lexical ranking still finds the page");
    assert!(scores(found).windows(2).all(|pair| pair[0] > pair[1]));
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("retrieval_dify_requests_total{outcome=\"lexical_fallback\"} 1\n"), "{metrics}");
}

#[tokio::test]
async fn failed_dify_requests_are_counted_by_a_closed_set_of_reasons() {
    let state = state(|_| {});
    let body = |knowledge_id: &str| dify_body(knowledge_id, "Gradle", "3", "0.0", "null");
    let hostile = "no-such-base-with-a-name-only-a-client-would-choose";
    for request in [
        body("t1"),
        body(hostile),
        "{\"knowledge_id\": ".to_string(),
        body("t1").replacen(r#""top_k": 3"#, r#""top_k": 0"#, 1),
        body("t1").replacen(r#""query": "Gradle""#, r#""query": "Gradle", "query": "x""#, 1),
    ] {
        post(&state, DIFY, &request).await;
    }
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap();
    for line in [
        "retrieval_dify_requests_total{outcome=\"ok\"} 1\n",
        "retrieval_dify_requests_total{outcome=\"no_knowledge_base\"} 1\n",
        "retrieval_dify_requests_total{outcome=\"invalid_json\"} 1\n",
        "retrieval_dify_requests_total{outcome=\"invalid_request\"} 2\n",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    assert!(!metrics.contains(hostile), "client input never becomes a label");
}

/// A metadata field Dify knows and the service does not (one a Dify user defined, `author`, or
/// a date field `publish_date`): answered as Dify's own filter answers for a document without it,
/// whatever the operator — `empty` passes, every other test fails; under `or` the other
/// conditions decide.
#[tokio::test]
async fn a_metadata_field_the_service_does_not_have_is_one_no_record_has() {
    let state = state(|_| {});
    let question = "установка SDK теги чат отчёт лицензия Gradle CocoaPods";
    let condition = |logic: &str, rows: &[(&str, &str, &str)]| {
        let rows: Vec<String> = rows
            .iter()
            .map(|(name, operator, value)| {
                format!(r#"{{"name": "{name}", "comparison_operator": "{operator}", "value": {value}}}"#)
            })
            .collect();
        format!(r#"{{"logical_operator": "{logic}", "conditions": [{}]}}"#, rows.join(", "))
    };
    let everything = docs(&records(&state, &dify_body("t1", question, "50", "0.0", "null")).await);
    assert_eq!(everything.len(), 5, "{everything:?}");
    let sdk: BTreeSet<String> = ["sdk/android/install", "sdk/ios/install"].map(String::from).into();
    let nothing = BTreeSet::new();
    let product = ("product", "is", "\"sdk\"");
    let cases: Vec<(String, &BTreeSet<String>)> = vec![
        (condition("and", &[("author", "is", "\"Иванов\"")]), &nothing),
        (condition("and", &[("author", "is not", "\"Иванов\"")]), &nothing),
        (condition("and", &[("author", "contains", "\"ван\"")]), &nothing),
        (condition("and", &[("author", "not contains", "\"ван\"")]), &nothing),
        (condition("and", &[("author", "start with", "\"И\"")]), &nothing),
        (condition("and", &[("author", "end with", "\"ов\"")]), &nothing),
        (condition("and", &[("author", "in", r#"["a", "b"]"#)]), &nothing),
        (condition("and", &[("author", "not in", r#"["a", "b"]"#)]), &nothing),
        (condition("and", &[("author", "not empty", "null")]), &nothing),
        (condition("and", &[("author", "empty", "null")]), &everything),
        (condition("and", &[("pages", ">", "5")]), &nothing),
        (condition("and", &[("pages", "≠", "5")]), &nothing),
        (condition("and", &[("pages", "≤", "\"5\"")]), &nothing),
        (condition("and", &[("publish_date", "before", "1772366400")]), &nothing),
        (condition("and", &[("publish_date", "after", "\"2026-01-01\"")]), &nothing),
        (condition("and", &[("Автор книги", "is", "\"x\"")]), &nothing),
        (condition("and", &[("author", "is", "\"x\""), product]), &nothing),
        (condition("and", &[("author", "empty", "null"), product]), &sdk),
        (condition("or", &[("author", "is", "\"x\""), product]), &sdk),
        (condition("or", &[("author", "not contains", "\"x\""), product]), &sdk),
        (condition("or", &[("author", "not empty", "null"), product]), &sdk),
        (condition("or", &[("author", "empty", "null"), product]), &everything),
        // A blank row on such a field is ignored, as on any other.
        (condition("and", &[("author", "is", "null"), product]), &sdk),
    ];
    for (condition, expected) in cases {
        let found = records(&state, &dify_body("t1", question, "50", "0.0", &condition)).await;
        assert_eq!(&docs(&found), expected, "{condition}");
    }
    // What is no field name, an unknown operator or a value of the wrong kind is still refused.
    let long = "a".repeat(256);
    for (name, operator, value) in [
        ("", "is", "\"x\""),
        (long.as_str(), "is", "\"x\""),
        ("author\\u0000", "is", "\"x\""),
        ("author", "like", "\"x\""),
        ("author", "is", "true"),
        ("author", "is", r#"{"a": 1}"#),
        ("author", "in", "[1, 2]"),
        ("pages", ">", "\"many\""),
        ("publish_date", "before", "\"yesterday\""),
    ] {
        let body = dify_body("t1", question, "50", "0.0", &condition("or", &[(name, operator, value), product]));
        let (status, answer) = post(&state, DIFY, &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name:?} {operator} {value} → {answer}");
        assert_eq!(answer["error_code"], 422, "{answer}");
    }
}

/// Dify's workflow node and chat apps send a question of any length: past `RETR_MAX_QUERY_CHARS`
/// it is searched by its beginning (cut back to a word's end), flagged and counted; `/search`
/// keeps its 422.
#[tokio::test]
async fn a_query_over_the_limit_is_searched_by_its_beginning_and_flagged() {
    let state = state(|s| s.max_query_chars = 40);
    // The 40th character falls inside "CocoaPods": the search keeps the words before it.
    let long = "Подключение Android SDK через Gradle и CocoaPods на iOS и на других платформах";
    let kept = "Подключение Android SDK через Gradle и";
    assert!(long.chars().count() > 40 && kept.chars().count() <= 40);
    let (status, answer) = post(&state, DIFY, &dify_body("t1", long, "10", "0.0", "null")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let codes: Vec<&str> =
        answer["degradations"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["query_truncated"], "{answer}");
    let message = answer["degradations"][0]["message"].as_str().unwrap();
    assert!(message.contains("RETR_MAX_QUERY_CHARS") && message.contains("40"), "{message}");
    let expected = records(&state, &dify_body("t1", kept, "10", "0.0", "null")).await;
    assert!(!expected.is_empty());
    assert_eq!(ids(answer["records"].as_array().unwrap()), ids(&expected), "searched with {kept:?}");
    // Blank characters around the question do not count, nor cost a degradation.
    let padded = format!("\u{feff}  {kept} \u{200b}\n");
    let (status, answer) = post(&state, DIFY, &dify_body("t1", &padded, "10", "0.0", "null")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["degradations"], json!([]), "{answer}");
    assert_eq!(ids(answer["records"].as_array().unwrap()), ids(&expected));
    // No word boundary near the limit: cut at the limit.
    let word = "Gradle".repeat(20);
    let (status, answer) = post(&state, DIFY, &dify_body("t1", &word, "10", "0.0", "null")).await;
    assert_eq!((status, answer["degradations"][0]["code"].as_str()), (StatusCode::OK, Some("query_truncated")));
    let search = json!({"tenant_id": "t1", "query": long}).to_string();
    let (status, refused) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "/search keeps its limit: {refused}");
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("retrieval_dify_queries_truncated_total 2\n"), "{metrics}");
    assert!(metrics.contains("retrieval_dify_requests_total{outcome=\"degraded\"} 2\n"), "{metrics}");
}

/// At the default limit (2,000 characters), a pasted log of 6,000 characters is answered.
#[tokio::test]
async fn a_pasted_six_thousand_character_question_is_answered() {
    let state = state(|_| {});
    let mut question = String::from("Подключение Android SDK через Gradle: ошибка сборки. ");
    while question.chars().count() < 6000 {
        question.push_str("at com.example.build.Task.run(Task.java:42) ");
    }
    let (status, answer) = post(&state, DIFY, &dify_body("t1", &question, "5", "0.0", "null")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["degradations"][0]["code"], "query_truncated", "{answer}");
    assert_eq!(answer["records"][0]["metadata"]["doc_id"], "sdk/android/install", "{answer}");
}

/// A question of nothing but spaces and invisible characters (a workflow variable left empty, a
/// zero-width space pasted alone) has no answer: no records, not an error.
#[tokio::test]
async fn a_blank_query_gets_no_records_not_an_error() {
    let state = state(|_| {});
    for query in ["", "   ", "\u{200b}", "\u{feff}", "\u{a0}\u{2009}\u{200b}\u{2060} \t\n", "\u{3000}\u{200d}"] {
        let (status, answer) = post(&state, DIFY, &dify_body("t1", query, "5", "0.0", "null")).await;
        assert_eq!(status, StatusCode::OK, "{query:?}: {answer}");
        assert_eq!(answer, json!({"records": [], "degradations": []}), "{query:?}");
    }
    // The request is still checked first: the knowledge base, the settings, the conditions.
    let (status, answer) = post(&state, DIFY, &dify_body("no-such-kb", " ", "5", "0.0", "null")).await;
    assert_eq!((status, answer["error_code"].as_u64()), (StatusCode::NOT_FOUND, Some(2001)), "{answer}");
    let (status, _) = post(&state, DIFY, &dify_body("t1", " ", "0", "0.0", "null")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (_, metrics) = send(&state, "GET", "/metrics", None).await;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("retrieval_dify_requests_total{outcome=\"blank_query\"} 6\n"), "{metrics}");
}
