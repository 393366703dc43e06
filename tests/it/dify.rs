//! The Dify External Knowledge API (`POST /internal/retrieval/dify/retrieval`) against its
//! published contract: the error codes, every comparison operator, empty results, metadata never
//! null, and tenant isolation through `knowledge_id`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use retrieval_engine::{fixtures, InMemoryIndex, PseudoEmbedder};
use retrieval_service::config::Settings;
use retrieval_service::{startup, AppState};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use tower::ServiceExt;

const DIFY: &str = "/internal/retrieval/dify/retrieval";
const T1_KEY: &str = "t1-reader-key-0123456789";
const OPERATOR_KEY: &str = "operator-key-0123456789abcdef";

/// The fixture corpus, with versions and indexing dates that differ per page (the comparisons
/// need them): page → (version, indexed_at).
pub(crate) fn corpus() -> retrieval_engine::Snapshot {
    let dated = |doc: &str| match doc {
        "docs/faq/flat" => ("3", "2026-01-10T00:00:00Z"),
        "sdk/android/install" => ("1.10", "2026-03-01T12:00:00Z"),
        "sdk/ios/install" => ("2.0", "2026-06-15T00:00:00+03:00"),
        "docs/agent/tags" => ("0.9", "2025-12-31T23:59:59Z"),
        "docs/admin/tags" => ("1.2.5", "2026-03-01T12:00:00Z"),
        _ => ("1.2", "2026-11-01T00:00:00Z"),
    };
    let mut snapshot = fixtures::snapshot();
    for record in snapshot.docs.iter_mut().chain(snapshot.sections.iter_mut()).chain(snapshot.chunks.iter_mut()) {
        let (version, indexed_at) = dated(&record.meta.doc_id);
        record.meta.version = version.into();
        record.meta.indexed_at = indexed_at.into();
    }
    snapshot
}

pub(crate) fn state(adjust: impl FnOnce(&mut Settings)) -> AppState {
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    adjust(&mut settings);
    let index = Arc::new(InMemoryIndex::from_snapshot(corpus()).unwrap());
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

/// A key store: t1's reader, and an operator key for every tenant.
fn keys_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("keys.txt");
    std::fs::write(&path, format!("{T1_KEY}: t1\n{OPERATOR_KEY}: *\n")).unwrap();
    path
}

/// Sends one Dify request; returns the status, `WWW-Authenticate` and the body as text.
async fn post(
    state: &AppState,
    path: &str,
    body: &str,
    authorization: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let mut request = Request::builder().method("POST").uri(path).header("content-type", "application/json");
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = retrieval_service::app(state.clone())
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, challenge, String::from_utf8_lossy(&bytes).into_owned())
}

fn ask(knowledge_id: &str, query: &str, top_k: i64, condition: Option<Value>) -> String {
    let mut body = json!({"knowledge_id": knowledge_id, "query": query,
        "retrieval_setting": {"top_k": top_k, "score_threshold": 0.0}});
    if let Some(condition) = condition {
        body["metadata_condition"] = condition;
    }
    body.to_string()
}

/// A query every t1 page with sections answers something to, so that without a condition all
/// five come back (the flat FAQ page is not among them, so the cases leave it out).
const BROAD: &str = "установка SDK теги чат отчёт лицензия Gradle CocoaPods";

async fn records(state: &AppState, body: &str) -> Vec<Value> {
    let (status, _, text) = post(state, DIFY, body, None).await;
    assert_eq!(status, StatusCode::OK, "{body} → {text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    answer["records"].as_array().unwrap_or_else(|| panic!("no records array: {answer}")).clone()
}

fn docs_of(records: &[Value]) -> BTreeSet<String> {
    records.iter().map(|r| r["metadata"]["doc_id"].as_str().unwrap().to_string()).collect()
}

fn set(docs: &[&str]) -> BTreeSet<String> {
    docs.iter().map(|d| d.to_string()).collect()
}

fn error(text: &str) -> (u64, String) {
    let body: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    let code = body["error_code"].as_u64().unwrap_or_else(|| panic!("no error_code: {body}"));
    let message = body["error_msg"].as_str().filter(|m| !m.is_empty()).unwrap_or_else(|| panic!("{body}"));
    (code, message.to_string())
}

const A: &str = "sdk/android/install";
const I: &str = "sdk/ios/install";
const AG: &str = "docs/agent/tags";
const AD: &str = "docs/admin/tags";
const S: &str = "docs/supervisor/reports";

#[tokio::test]
async fn every_operator_keeps_exactly_the_pages_that_pass_it() {
    let state = state(|_| {});
    let everything = docs_of(&records(&state, &ask("t1", BROAD, 50, None)).await);
    assert_eq!(everything, set(&[A, I, AG, AD, S]), "the broad query reaches every t1 page with sections");
    let one = |name: Value, operator: &str, value: Value| {
        let mut condition = json!({"name": name, "comparison_operator": operator});
        if !value.is_null() {
            condition["value"] = value;
        }
        json!({"conditions": [condition]})
    };
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (one(json!("doc_id"), "contains", json!("TAGS")), vec![AG, AD]),
        (one(json!("doc_id"), "not contains", json!("sdk/")), vec![AG, AD, S]),
        (one(json!("url"), "start with", json!("https://docs.example.com/sdk")), vec![A, I]),
        (one(json!("doc_id"), "end with", json!("/install")), vec![A, I]),
        (one(json!("product"), "is", json!("sdk")), vec![A, I]),
        (one(json!(["product"]), "is not", json!("sdk")), vec![AG, AD, S]),
        (one(json!("role"), "in", json!(["operator", "supervisor"])), vec![AG, S]),
        (one(json!("role"), "in", json!("operator, supervisor")), vec![AG, S]),
        (one(json!("section"), "not in", json!(["sdk", "faq", "admin"])), vec![AG, S]),
        (one(json!("platform"), "empty", Value::Null), vec![AG, AD, S]),
        (one(json!("platform"), "not empty", Value::Null), vec![A, I]),
        (one(json!("version"), "=", json!(1.2)), vec![S]),
        (one(json!("version"), "≠", json!(1.2)), vec![A, I, AG, AD]),
        (one(json!("version"), ">", json!(1.2)), vec![A, I, AD]),
        (one(json!("version"), "<", json!(1.2)), vec![AG]),
        (one(json!("version"), "≥", json!("1.10")), vec![A, I]),
        (one(json!("version"), "≤", json!(1)), vec![AG]),
        (one(json!("indexed_at"), "before", json!("2026-01-01")), vec![AG]),
        (one(json!("indexed_at"), "after", json!(1_772_366_400)), vec![I, S]),
        (one(json!("tags"), "contains", json!("instal")), vec![A, I]),
        (one(json!("tags"), "not in", json!(["install"])), vec![AG, AD, S]),
        (
            json!({"logical_operator": "or", "conditions": [
                {"name": "product", "comparison_operator": "is", "value": "sdk"},
                {"name": "role", "comparison_operator": "is", "value": "operator"}]}),
            vec![A, I, AG],
        ),
        (
            json!({"logical_operator": "and", "conditions": [
                {"name": "product", "comparison_operator": "is", "value": "sdk"},
                {"name": "platform", "comparison_operator": "is", "value": "ios"}]}),
            vec![I],
        ),
    ];
    for (condition, expected) in cases {
        let got = docs_of(&records(&state, &ask("t1", BROAD, 50, Some(condition.clone()))).await);
        assert_eq!(got, set(&expected), "{condition}");
    }
}

#[tokio::test]
async fn a_condition_the_service_cannot_check_is_refused_never_widened() {
    let state = state(|_| {});
    let bad = [
        (json!({"name": "", "comparison_operator": "is", "value": "x"}), "metadata field name"),
        (json!({"name": "a\nb", "comparison_operator": "is", "value": null}), "metadata field name"),
        (json!({"name": "author", "comparison_operator": "like", "value": "x"}), "unsupported comparison_operator"),
        (json!({"name": "product", "comparison_operator": "like", "value": "x"}), "unsupported comparison_operator"),
        (json!({"name": "tags", "comparison_operator": ">", "value": 1}), "compares numbers"),
        (json!({"name": "version", "comparison_operator": "before", "value": "2026-01-01"}), "compares dates"),
        (json!({"name": "indexed_at", "comparison_operator": "after", "value": "yesterday"}), "takes a date"),
        (json!({"name": "version", "comparison_operator": ">", "value": "new"}), "takes a number"),
        (json!({"name": "product", "comparison_operator": "is", "value": true}), "takes a string"),
        (json!({"name": "product", "comparison_operator": "before", "value": null}), "compares dates"),
        (json!({"name": "indexed_at", "comparison_operator": "is", "value": "last week"}), "takes a date"),
        (json!({"name": "role", "comparison_operator": "in", "value": [1, 2]}), "list of strings"),
        (json!({"name": ["product", "role"], "comparison_operator": "is", "value": "x"}), "one field name"),
    ];
    for (condition, expected) in bad {
        let body = ask("t1", BROAD, 5, Some(json!({"conditions": [condition.clone()]})));
        let (status, _, text) = post(&state, DIFY, &body, None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{condition} → {text}");
        let (code, message) = error(&text);
        assert_eq!(code, 422);
        assert!(message.contains(expected) && message.contains("conditions[0]"), "{condition} → {message}");
    }
    let too_many: Vec<Value> =
        (0..65).map(|_| json!({"name": "product", "comparison_operator": "is", "value": "sdk"})).collect();
    let (status, _, _) = post(&state, DIFY, &ask("t1", BROAD, 5, Some(json!({"conditions": too_many}))), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let unknown_logic = json!({"logical_operator": "xor", "conditions": []});
    let (status, _, _) = post(&state, DIFY, &ask("t1", BROAD, 5, Some(unknown_logic)), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn records_carry_the_chosen_passages_with_scores_and_metadata_never_null() {
    let state = state(|_| {});
    let found = records(&state, &ask("t1", "Gradle ошибка сборки", 3, None)).await;
    assert!(!found.is_empty() && found.len() <= 3, "{found:?}");
    let snapshot = corpus();
    for record in &found {
        let metadata = record["metadata"].as_object().unwrap_or_else(|| panic!("metadata must be an object: {record}"));
        for field in ["knowledge_id", "id", "level", "doc_id", "url", "source", "product", "tags", "platform"] {
            assert!(metadata.get(field).is_some_and(|v| !v.is_null()), "{field} missing: {record}");
        }
        assert_eq!(metadata["knowledge_id"], "t1");
        let score = record["score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score), "{record}");
        // `content` is the stored text of the section or chunk the hit names.
        let id = metadata["id"].as_str().unwrap();
        let stored =
            snapshot.sections.iter().chain(&snapshot.chunks).chain(&snapshot.docs).find(|r| r.id == id).unwrap();
        assert_eq!(record["content"], stored.text.as_str());
        assert_eq!(record["title"], stored.meta.title.as_str());
    }
    assert!(found[0]["content"].as_str().unwrap().contains("Gradle"), "{}", found[0]);
    // A threshold drops what scores below it, and keeps the order of the rest.
    let threshold = found[0]["score"].as_f64().unwrap();
    let body = json!({"knowledge_id": "t1", "query": "Gradle ошибка сборки",
        "retrieval_setting": {"top_k": 3, "score_threshold": threshold}});
    let above = records(&state, &body.to_string()).await;
    assert!(!above.is_empty());
    assert!(above.iter().all(|r| r["score"].as_f64().unwrap() >= threshold - 1e-6), "{above:?}");
}

#[tokio::test]
async fn no_match_is_an_empty_records_list() {
    let state = state(|_| {});
    let nothing = json!({"conditions": [{"name": "product", "comparison_operator": "is", "value": "no-such-product"}]});
    let (status, _, text) = post(&state, DIFY, &ask("t1", BROAD, 5, Some(nothing)), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"records": [], "degradations": []}));
    let strict =
        json!({"knowledge_id": "t1", "query": BROAD, "retrieval_setting": {"top_k": 5, "score_threshold": 1.0}});
    let (status, _, text) = post(&state, DIFY, &strict.to_string(), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert!(body["records"].as_array().unwrap().iter().all(|r| r["score"].as_f64() == Some(1.0)), "{body}");
}

#[tokio::test]
async fn each_error_code_of_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(&dir);
    let state = state(|s| s.api_keys = keys.clone());
    let body = ask("t1", "Gradle", 3, None);
    // 1001: no Authorization header, another scheme, or an empty key.
    for authorization in [None, Some("Basic dXNlcjpwYXNz"), Some("Bearer "), Some(T1_KEY)] {
        let (status, challenge, text) = post(&state, DIFY, &body, authorization).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{authorization:?}: {text}");
        assert_eq!(challenge.as_deref(), Some("Bearer"));
        assert_eq!(error(&text).0, 1001, "{text}");
    }
    // 1002: a key the store does not know.
    let (status, _, text) = post(&state, DIFY, &body, Some("Bearer not-a-known-key-0123456789")).await;
    assert_eq!((status, error(&text).0), (StatusCode::FORBIDDEN, 1002), "{text}");
    // 2001: no such knowledge base (a key that may read every tenant).
    let operator = format!("Bearer {OPERATOR_KEY}");
    let (status, _, text) = post(&state, DIFY, &ask("no-such-kb", "Gradle", 3, None), Some(&operator)).await;
    assert_eq!((status, error(&text).0), (StatusCode::NOT_FOUND, 2001), "{text}");
    // With a valid key, the request itself is checked: malformed JSON, out-of-range settings.
    let t1 = format!("Bearer {T1_KEY}");
    let (status, _, text) = post(&state, DIFY, "{\"knowledge_id\": ", Some(&t1)).await;
    assert_eq!((status, error(&text).0), (StatusCode::BAD_REQUEST, 400), "{text}");
    for setting in [
        json!({"top_k": 0, "score_threshold": 0.0}),
        json!({"top_k": -5, "score_threshold": null}),
        json!({"top_k": 3, "score_threshold": 1.5}),
        json!({"top_k": "3", "score_threshold": 0}),
    ] {
        let body = json!({"knowledge_id": "t1", "query": "Gradle", "retrieval_setting": setting}).to_string();
        let (status, _, text) = post(&state, DIFY, &body, Some(&t1)).await;
        assert_eq!((status, error(&text).0), (StatusCode::UNPROCESSABLE_ENTITY, 422), "{setting} → {text}");
    }
    // A blank query is no error: it has no records.
    for query in ["", "   \u{200b}"] {
        let (status, _, text) = post(&state, DIFY, &ask("t1", query, 3, None), Some(&t1)).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["records"], json!([]), "{text}");
    }
    let (status, _, text) = post(&state, DIFY, &ask("t1", "Gradle", 3, None), Some(&t1)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

#[tokio::test]
async fn a_key_never_reads_another_tenants_knowledge_base() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(&dir);
    let state = state(|s| s.api_keys = keys.clone());
    let t1 = format!("Bearer {T1_KEY}");
    let secret_query = "Gradle SDK пароль acme-secret";
    // t1's key asking for t2 is refused, and learns as much as for a knowledge base that does
    // not exist (the same code and message shape).
    let (status, _, refused) = post(&state, DIFY, &ask("t2", secret_query, 10, None), Some(&t1)).await;
    assert_eq!((status, error(&refused).0), (StatusCode::FORBIDDEN, 1002), "{refused}");
    assert!(!refused.contains("acme"), "{refused}");
    let (status, _, missing) = post(&state, DIFY, &ask("t3", secret_query, 10, None), Some(&t1)).await;
    assert_eq!((status, error(&missing).0), (StatusCode::FORBIDDEN, 1002), "{missing}");
    assert_eq!(error(&refused).1.replace("\"t2\"", "\"t3\""), error(&missing).1);
    // No filter combination reaches across: a condition naming t2's page returns nothing in t1.
    let across = json!({"logical_operator": "or", "conditions": [
        {"name": "doc_id", "comparison_operator": "is", "value": "acme/secret-install"},
        {"name": "doc_id", "comparison_operator": "contains", "value": "acme"}]});
    let (status, _, text) = post(&state, DIFY, &ask("t1", secret_query, 50, Some(across)), Some(&t1)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["records"], json!([]));
    // t1's own knowledge base answers t1's pages only.
    let (status, _, text) = post(&state, DIFY, &ask("t1", secret_query, 50, None), Some(&t1)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!text.contains("acme"), "{text}");
    // The operator key reads t2, and only t2.
    let operator = format!("Bearer {OPERATOR_KEY}");
    let (status, _, text) = post(&state, DIFY, &ask("t2", secret_query, 50, None), Some(&operator)).await;
    assert_eq!(status, StatusCode::OK);
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(docs_of(body["records"].as_array().unwrap()), set(&["acme/secret-install"]));
    assert!(text.contains("acme-secret"));
}

#[tokio::test]
async fn knowledge_bases_map_ids_to_a_tenant_a_fixed_filter_and_a_theme() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(&dir);
    let bases = dir.path().join("knowledge.yaml");
    std::fs::write(
        &bases,
        "knowledge_bases:\n\
         \x20 t1-sdk:\n    tenant_id: t1\n    filter: {product: sdk}\n    description: the SDK docs\n\
         \x20 t1-mobile:\n    tenant_id: t1\n    filter: {platform: [ios, android]}\n\
         \x20 t2-all:\n    tenant_id: t2\n",
    )
    .unwrap();
    let state = state(|s| {
        s.api_keys = keys.clone();
        s.dify_knowledge_bases = bases.clone();
    });
    let t1 = format!("Bearer {T1_KEY}");
    let post_records = |id: &'static str, condition: Option<Value>, key: String| {
        let state = state.clone();
        async move {
            let (status, _, text) = post(&state, DIFY, &ask(id, BROAD, 50, condition), Some(&key)).await;
            (status, text)
        }
    };
    let (status, text) = post_records("t1-sdk", None, t1.clone()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(docs_of(body["records"].as_array().unwrap()), set(&[A, I]));
    // The request's condition narrows the knowledge base further; an `or` cannot widen it.
    let widen = json!({"logical_operator": "or", "conditions": [
        {"name": "product", "comparison_operator": "is", "value": "chatcenter"},
        {"name": "platform", "comparison_operator": "is", "value": "ios"}]});
    let (status, text) = post_records("t1-sdk", Some(widen), t1.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(docs_of(body["records"].as_array().unwrap()), set(&[I]));
    let (_, text) = post_records("t1-mobile", None, t1.clone()).await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(docs_of(body["records"].as_array().unwrap()), set(&[A, I]));
    // t2's knowledge base is not t1's key's, and with a file a bare tenant id names nothing.
    let (status, text) = post_records("t2-all", None, t1.clone()).await;
    assert_eq!((status, error(&text).0), (StatusCode::FORBIDDEN, 1002));
    let (status, text) = post_records("t1", None, format!("Bearer {OPERATOR_KEY}")).await;
    assert_eq!((status, error(&text).0), (StatusCode::NOT_FOUND, 2001), "{text}");
}

#[tokio::test]
async fn the_base_path_is_configurable() {
    let state = state(|s| s.dify_base_path = "/kb/dify".into());
    let (status, _, text) = post(&state, "/kb/dify/retrieval", &ask("t1", "Gradle", 3, None), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, _, _) = post(&state, DIFY, &ask("t1", "Gradle", 3, None), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, document) = crate::common::send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    assert!(document["paths"]["/kb/dify/retrieval"]["post"].is_object(), "the document follows the base path");
    assert!(document["paths"][DIFY].is_null());
}

#[test]
fn malformed_dify_settings_stop_start_up_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    for base in ["kb", "/kb/", "/kb//x", "/kb/{id}", "/kb/*rest", ""] {
        let settings = Settings { dify_base_path: base.into(), ..Settings::default() };
        let error = startup::validate_settings(&settings).unwrap_err().to_string();
        assert!(error.contains("RETR_DIFY_BASE_PATH"), "{base:?}: {error}");
    }
    for (content, expected) in [
        ("knowledge_bases: {}\n", "no knowledge base"),
        ("knowledge_bases:\n  a:\n    tenant: t1\n", "unknown field"),
        ("knowledge_bases:\n  a:\n    tenant_id: t1\n    filter: {author: x}\n", "unsupported metadata field"),
        ("knowledge_bases:\n  a:\n    tenant_id: t1\n    filter: {tags: []}\n", "matches nothing"),
        ("knowledge_bases:\n  'bad id!':\n    tenant_id: t1\n", "knowledge base id"),
        ("knowledge_bases: [", "knowledge.yaml"),
    ] {
        let path = dir.path().join("knowledge.yaml");
        std::fs::write(&path, content).unwrap();
        let settings = Settings { dify_knowledge_bases: path, ..Settings::default() };
        let error = startup::validate_settings(&settings).unwrap_err().to_string();
        assert!(error.contains("RETR_DIFY_KNOWLEDGE_BASES") && error.contains(expected), "{content:?}: {error}");
    }
}

#[tokio::test]
async fn a_knowledge_base_naming_an_unknown_theme_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("knowledge.yaml");
    std::fs::write(&path, "knowledge_bases:\n  demo-x:\n    tenant_id: demo\n    theme: no-such-theme\n").unwrap();
    let settings = Settings { dify_knowledge_bases: path, ..Settings::default() };
    let error = startup::build_state(settings).await.err().expect("start-up refuses").to_string();
    assert!(error.contains("no-such-theme"), "{error}");
}
