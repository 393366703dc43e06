//! The MCP endpoint (`POST /internal/retrieval/mcp`) as an agent host uses it, through the router:
//! the tool list and schemas, each tool against the HTTP endpoint it stands for, the tenant-scoped
//! keys, and malformed or hostile JSON-RPC.

use crate::common::send;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use retrieval_service::config::{Secret, Settings};
use retrieval_service::{startup, AppState};
use serde_json::{json, Value};
use tower::ServiceExt;

const MCP: &str = "/internal/retrieval/mcp";
const ACME_KEY: &str = "acme-agent-key-0123456789";
const OPERATOR_KEY: &str = "operator-key-0123456789abcdef";
const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";
/// Characters a token of a budget stands for (`tools::CHARS_PER_TOKEN`).
const CHARS_PER_TOKEN: usize = 3;

async fn demo() -> AppState {
    startup::build_state(Settings::default()).await.unwrap()
}

/// The demo corpus behind keys: acme's agent key, an operator key for every tenant, and an admin token.
async fn demo_with_keys(dir: &tempfile::TempDir) -> AppState {
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("{ACME_KEY}: acme\n{OPERATOR_KEY}: *\n")).unwrap();
    let settings = Settings { api_keys: keys, admin_token: Secret::new(ADMIN_TOKEN), ..Settings::default() };
    startup::build_state(settings).await.unwrap()
}

/// Posts `body` to the endpoint as an MCP client does; returns the status, the
/// `WWW-Authenticate` header and the body (JSON, else its text as a string).
async fn post(state: &AppState, key: Option<&str>, body: &str) -> (StatusCode, Option<String>, Value) {
    let mut request = Request::builder()
        .method("POST")
        .uri(MCP)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let response = retrieval_service::app(state.clone())
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, challenge, json)
}

/// A JSON-RPC request's `result` (the test fails on anything else).
async fn rpc(state: &AppState, key: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let (status, _, response) = post(state, key, &body).await;
    assert_eq!(status, StatusCode::OK, "{method}: {response}");
    assert_eq!(response["id"], 7, "{response}");
    assert!(response.get("result").is_some(), "{method}: {response}");
    response["result"].clone()
}

/// A tool call's result (`structuredContent`, `content`, `isError`).
async fn call(state: &AppState, key: Option<&str>, tool: &str, arguments: Value) -> Value {
    rpc(state, key, "tools/call", json!({"name": tool, "arguments": arguments})).await
}

/// The structured content of a successful call, after checking its text rendering is there.
async fn call_ok(state: &AppState, key: Option<&str>, tool: &str, arguments: Value) -> Value {
    let result = call(state, key, tool, arguments).await;
    assert_ne!(result["isError"], true, "{tool}: {result}");
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    assert!(!text.is_empty(), "{tool}: no text rendering: {result}");
    result["structuredContent"].clone()
}

/// A failed call's message, after checking that it is a tool error carrying no data.
async fn call_error(state: &AppState, key: Option<&str>, tool: &str, arguments: Value) -> String {
    let result = call(state, key, tool, arguments).await;
    assert_eq!(result["isError"], true, "{tool}: {result}");
    assert!(result.get("structuredContent").is_none_or(Value::is_null), "{tool}: {result}");
    result["content"][0]["text"].as_str().unwrap().to_string()
}

fn ids(hits: &Value, field: &str) -> Vec<String> {
    hits.as_array().unwrap().iter().map(|hit| hit[field].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn the_five_tools_are_listed_with_input_and_output_schemas_and_read_only() {
    let state = demo().await;
    let initialized = rpc(
        &state,
        None,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    )
    .await;
    assert!(initialized["capabilities"]["tools"].is_object(), "{initialized}");
    let listed = rpc(&state, None, "tools/list", json!({})).await;
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    for name in ["search_docs", "read_passage", "get_context", "list_topics", "outline"] {
        let tool = tools.iter().find(|tool| tool["name"] == name).unwrap_or_else(|| panic!("{name} not in {names:?}"));
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
        assert!(tool["outputSchema"]["properties"]["tenant"].is_object(), "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        assert_eq!(tool["annotations"]["destructiveHint"], false, "{tool}");
        assert!(tool["description"].as_str().is_some_and(|d| d.len() > 40), "{tool}");
        // Only JSON Schema's own formats: clients' validators warn about the generator's `uint`.
        assert!(!tool.to_string().contains(r#""format":"uint"#), "{tool}");
    }
    let search = tools.iter().find(|tool| tool["name"] == "search_docs").unwrap();
    assert_eq!(search["inputSchema"]["required"], json!(["query"]), "{search}");
}

#[tokio::test]
async fn search_docs_answers_the_search_first_page_with_its_confidence_and_snippets_within_budget() {
    let state = demo().await;
    for question in [
        "как сбросить пароль",
        "как подключить Android SDK через gradle",
        "как выгрузить отчёт в excel",
        "какие лимиты у REST API",
    ] {
        let (status, search) = send(
            &state,
            "POST",
            "/internal/retrieval/search",
            Some(&json!({"query": question, "tenant_id": "demo"}).to_string()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{search}");
        let found =
            call_ok(&state, None, "search_docs", json!({"query": question, "tenant": "demo", "max_tokens": 100})).await;
        assert_eq!(ids(&found["hits"], "id"), ids(&search["hits"], "id"), "{question}");
        assert_eq!(found["confidence"], search["confidence"], "{question}");
        assert_eq!(found["hits"][0]["url"], search["hits"][0]["metadata"]["url"], "{question}");
        assert_eq!(found["hits"][0]["section_path"], search["hits"][0]["metadata"]["heading_path"], "{question}");
        let snippets: Vec<&str> =
            found["hits"].as_array().unwrap().iter().map(|hit| hit["snippet"].as_str().unwrap()).collect();
        let total: usize = snippets.iter().map(|snippet| snippet.chars().count()).sum();
        assert!(total <= 100 * CHARS_PER_TOKEN, "{question}: {total} characters: {snippets:?}");
        assert!(snippets[0].chars().count() > 10, "{question}: {snippets:?}");
        assert_eq!(found["truncated"], true, "{question}");
    }
    // top_k is /search's max_results.
    let three =
        call_ok(&state, None, "search_docs", json!({"query": "как сбросить пароль", "tenant": "demo", "top_k": 3}))
            .await;
    assert_eq!(three["hits"].as_array().unwrap().len(), 3, "{three}");
}

#[tokio::test]
async fn an_ambiguous_question_returns_the_clarification_and_the_chosen_theme_filters() {
    let state = demo().await;
    let found = call_ok(&state, None, "search_docs", json!({"query": "обязательные теги", "tenant": "demo"})).await;
    let options = found["clarification"]["options"].as_array().unwrap_or_else(|| panic!("no clarification: {found}"));
    let themes: Vec<&str> = options.iter().map(|option| option["theme_id"].as_str().unwrap()).collect();
    assert!(themes.contains(&"user_admin") && themes.contains(&"user_agent"), "{themes:?}");
    let chosen = call_ok(
        &state,
        None,
        "search_docs",
        json!({"query": "обязательные теги", "tenant": "demo", "theme": "user_admin"}),
    )
    .await;
    let labels: Vec<&str> =
        chosen["hits"].as_array().unwrap().iter().map(|hit| hit["theme"].as_str().unwrap_or("")).collect();
    assert!(!labels.is_empty() && labels.iter().all(|label| *label == "user_admin"), "{labels:?}");
}

#[tokio::test]
async fn read_passage_reads_the_window_around_a_chunk_or_a_whole_section() {
    let state = demo().await;
    let doc = "demo/docs/api/webhooks.md";
    let (status, window) = send(
        &state,
        "POST",
        "/internal/retrieval/chunks/window",
        Some(&json!({"tenant_id": "demo", "doc_id": doc, "anchor_chunk_id": format!("{doc}#s1-c0")}).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{window}");
    let around_chunk = call_ok(
        &state,
        None,
        "read_passage",
        json!({"tenant": "demo", "doc_id": doc, "hit_id": format!("{doc}#s1-c0")}),
    )
    .await;
    assert_eq!(ids(&around_chunk["chunks"], "chunk_id"), ids(&window["chunks"], "chunk_id"));
    assert_eq!(around_chunk["chunks"][1]["text"], window["chunks"][1]["text"]);
    // A section hit: its chunks, and none around with before = after = 0.
    let section = call_ok(
        &state,
        None,
        "read_passage",
        json!({"tenant": "demo", "doc_id": doc, "hit_id": format!("{doc}#s2"), "before": 0, "after": 0}),
    )
    .await;
    let chunks = section["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty() && chunks.iter().all(|chunk| chunk["section_id"] == format!("{doc}#s2")), "{section}");
    // The budget cuts the text.
    let short = call_ok(
        &state,
        None,
        "read_passage",
        json!({"tenant": "demo", "doc_id": doc, "hit_id": doc, "after": 3, "max_tokens": 20}),
    )
    .await;
    let length: usize =
        short["chunks"].as_array().unwrap().iter().map(|chunk| chunk["text"].as_str().unwrap().chars().count()).sum();
    assert!(length <= 20 * CHARS_PER_TOKEN && short["truncated"] == true, "{short}");
    let message =
        call_error(&state, None, "read_passage", json!({"tenant": "demo", "doc_id": doc, "hit_id": "no-such-hit"}))
            .await;
    assert!(message.starts_with("not_found:") && message.contains("search_docs"), "{message}");
}

#[tokio::test]
async fn get_context_is_the_context_endpoints_text_within_the_token_budget() {
    let state = demo().await;
    let query = "как оператору и администратору настроить быстрые ответы";
    let (status, context) = send(
        &state,
        "POST",
        "/internal/retrieval/context",
        Some(&json!({"query": query, "tenant_id": "demo", "max_context_chars": 900 * CHARS_PER_TOKEN}).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    let answer =
        call_ok(&state, None, "get_context", json!({"query": query, "tenant": "demo", "max_tokens": 900})).await;
    assert_eq!(answer["context"], context["context"]);
    assert_eq!(answer["system_prompt_rule"], context["system_prompt_rule"]);
    assert_eq!(ids(&answer["sources"], "id"), ids(&context["sources"], "id"));
    assert!(answer["context"].as_str().unwrap().chars().count() <= 900 * CHARS_PER_TOKEN);
}

#[tokio::test]
async fn list_topics_counts_every_page_of_the_tenant_under_its_themes() {
    let state = demo().await;
    let (_, tenants) = send(&state, "GET", "/internal/retrieval/tenants", None).await;
    let docs =
        tenants["tenants"].as_array().unwrap().iter().find(|t| t["tenant_id"] == "demo").unwrap()["docs"].clone();
    let topics = call_ok(&state, None, "list_topics", json!({"tenant": "demo"})).await;
    assert_eq!(topics["pages"], docs, "{topics}");
    let listed: u64 = topics["topics"].as_array().unwrap().iter().map(|topic| topic["pages"].as_u64().unwrap()).sum();
    assert_eq!(listed + topics["other_pages"].as_u64().unwrap(), docs.as_u64().unwrap(), "{topics}");
    let ids = ids(&topics["topics"], "id");
    assert!(ids.contains(&"sdk_android".to_string()) && ids.contains(&"user_admin".to_string()), "{ids:?}");
}

#[tokio::test]
async fn outline_lists_a_pages_headings_in_reading_order() {
    let state = demo().await;
    let doc = "demo/docs/api/webhooks.md";
    let outline = call_ok(&state, None, "outline", json!({"tenant": "demo", "doc_id": doc})).await;
    let sections = ids(&outline["headings"], "section_id");
    assert_eq!(sections, (0..4).map(|n| format!("{doc}#s{n}")).collect::<Vec<_>>(), "{outline}");
    assert_eq!(outline["headings"][1]["path"], json!(["Вебхуки", "События"]));
    assert_eq!(outline["headings"][1]["depth"], 2);
    let message =
        call_error(&state, None, "outline", json!({"tenant": "demo", "doc_id": "demo/no-such-page.md"})).await;
    assert!(message.starts_with("not_found:"), "{message}");
}

#[tokio::test]
async fn keys_scope_the_tools_to_their_tenants_and_the_admin_token_is_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let state = demo_with_keys(&dir).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "search_docs", "arguments": {"query": "пароль", "tenant": "demo"}}})
    .to_string();
    // No key, an unknown key, the admin token: 401 with a Bearer challenge, before anything else.
    for key in [None, Some("not-a-known-key-0123456789"), Some(ADMIN_TOKEN)] {
        for body in [&list, &search] {
            let (status, challenge, response) = post(&state, key, body).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{key:?}: {response}");
            assert_eq!(challenge.as_deref(), Some("Bearer"));
            assert!(!response.to_string().contains("demo/"), "{response}");
        }
    }
    // acme's key: acme's data only; another tenant's is a tool error with no data.
    for (tool, arguments) in [
        ("search_docs", json!({"query": "пароль", "tenant": "demo"})),
        ("get_context", json!({"query": "пароль", "tenant": "demo"})),
        (
            "read_passage",
            json!({"tenant": "demo", "doc_id": "demo/docs/api/webhooks.md", "hit_id": "demo/docs/api/webhooks.md#s1"}),
        ),
        ("list_topics", json!({"tenant": "demo"})),
        ("outline", json!({"tenant": "demo", "doc_id": "demo/docs/api/webhooks.md"})),
        ("list_topics", json!({"tenant": "no-such-tenant"})),
    ] {
        let message = call_error(&state, Some(ACME_KEY), tool, arguments).await;
        assert!(message.starts_with("forbidden:") && !message.contains("demo/"), "{tool}: {message}");
    }
    // Leaving the tenant out means the key's only tenant.
    let own = call_ok(&state, Some(ACME_KEY), "search_docs", json!({"query": "API"})).await;
    assert_eq!(own["tenant"], "acme");
    assert!(ids(&own["hits"], "id").iter().all(|id| id.starts_with("acme/")), "{own}");
    // The operator key reads both, and must say which.
    let both = call_ok(&state, Some(OPERATOR_KEY), "list_topics", json!({"tenant": "demo"})).await;
    assert_eq!(both["tenant"], "demo");
    let message = call_error(&state, Some(OPERATOR_KEY), "list_topics", json!({})).await;
    assert!(message.contains("acme, demo"), "{message}");
}

#[tokio::test]
async fn malformed_json_rpc_gets_json_rpc_errors_and_the_service_keeps_answering() {
    let state = demo().await;
    let huge_id = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}}", "9".repeat(400));
    let batch = format!("[{}]", vec![r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#; 10_000].join(","));
    let cases: Vec<(String, i64)> = vec![
        (r#"{"jsonrpc":"2.0","id":1,"method":"#.into(), -32700),
        ("not json".into(), -32700),
        (batch, -32600),
        ("[]".into(), -32600),
        ("null".into(), -32600),
        ("42".into(), -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.into(), -32600),
        (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#.into(), -32600),
        // More digits than a JSON parser keeps: unreadable as a number, so a parse error.
        (huge_id, -32700),
        (r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":5}"#.into(), -32600),
        (r#"{"jsonrpc":"2.0","id":3,"method":7}"#.into(), -32600),
        (r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#.into(), -32600),
    ];
    for (body, code) in &cases {
        let (status, _, response) = post(&state, None, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{}: {response}", &body[..body.len().min(80)]);
        assert_eq!(response["jsonrpc"], "2.0", "{response}");
        assert_eq!(response["error"]["code"], *code, "{}: {response}", &body[..body.len().min(80)]);
        assert!(response.get("result").is_none(), "{response}");
    }
    // A malformed request keeps its id when it has a usable one.
    let (_, _, response) = post(&state, None, r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":5}"#).await;
    assert_eq!(response["id"], 3, "{response}");
    // An unknown method or tool: the protocol's errors.
    let (status, _, unknown) = post(&state, None, r#"{"jsonrpc":"2.0","id":4,"method":"no/such"}"#).await;
    assert_eq!((status, unknown["error"]["code"].clone()), (StatusCode::OK, json!(-32601)), "{unknown}");
    let (_, _, tool) =
        post(&state, None, r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"drop_tables"}}"#).await;
    assert_eq!(tool["error"]["code"], -32602, "{tool}");
    // Wrong arguments: a tool error saying which.
    let message =
        call_error(&state, None, "search_docs", json!({"query": "пароль", "tenant": "demo", "top_k": "ten"})).await;
    assert!(message.starts_with("invalid_request:") && message.contains("top_k"), "{message}");
    let message =
        call_error(&state, None, "search_docs", json!({"query": "пароль", "tenant": "demo", "top_k": 0})).await;
    assert!(message.contains("top_k: must be within 1..=50"), "{message}");
    let message = call_error(&state, None, "search_docs", json!({"query": "пароль"})).await;
    assert!(message.contains("tenant: required") && message.contains("acme, demo"), "{message}");
    // A body over RETR_MAX_BODY_BYTES: 413, not read into memory.
    let big =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#, "x".repeat(2 << 20));
    let (status, _, _) = post(&state, None, &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // No session to hold: GET (a stream) and DELETE (a session's end) are refused.
    for method in ["GET", "DELETE"] {
        let (status, _) = send(&state, method, MCP, None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
    let found = call_ok(&state, None, "search_docs", json!({"query": "как сбросить пароль", "tenant": "demo"})).await;
    assert!(!found["hits"].as_array().unwrap().is_empty());
}
