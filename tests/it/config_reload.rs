//! Ops reload the themes, boosting and synonyms files without a restart: a good reload changes
//! what searches use, a broken file keeps the files in use and says so in the answer, `/health`
//! and `/metrics`, and a later good reload clears it.

use crate::common::{error_code, fixture_state, send, send_request};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use retrieval_service::AppState;
use serde_json::{json, Value};
use std::path::Path;

const RELOAD: &str = "/internal/retrieval/config/reload";

/// The project's config files copied to `dir`, and a state reading them there.
fn state_over_copies(dir: &Path, admin_token: &str) -> AppState {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("config/themes.yaml"), dir.join("themes.yaml")).unwrap();
    std::fs::copy(root.join("config/boosting.yaml"), dir.join("boosting.yaml")).unwrap();
    std::fs::create_dir_all(dir.join("synonyms")).unwrap();
    std::fs::copy(root.join("config/synonyms/_all.txt"), dir.join("synonyms/_all.txt")).unwrap();
    let token = admin_token.to_string();
    fixture_state(|settings| {
        settings.themes_path = dir.join("themes.yaml");
        settings.boosting_path = dir.join("boosting.yaml");
        settings.synonyms_dir = dir.join("synonyms");
        settings.admin_token = retrieval_service::config::Secret::new(token.as_str());
    })
}

/// Whether any hit of the query got a lexical rank (the query's words, with synonyms, met a record).
async fn lexical_hits(state: &AppState, query: &str) -> usize {
    let body = json!({"query": query, "tenant_id": "t1", "explain": true}).to_string();
    let (status, answer) = send(state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["hits"].as_array().unwrap().iter().filter(|hit| !hit["explain"]["lexical_rank"].is_null()).count()
}

async fn health(state: &AppState) -> Value {
    let (status, health) = send(state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    health
}

async fn metrics(state: &AppState) -> String {
    let (_, body) = send(state, "GET", "/metrics", None).await;
    body.as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_good_reload_changes_what_searches_use_and_a_broken_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "");
    let themes_before = state.search.theme_list().len();
    // A made-up word meets no record until a synonym maps it to the docs' word.
    assert_eq!(lexical_hits(&state, "зюзябра").await, 0);

    let synonyms = dir.path().join("synonyms/_all.txt");
    let mut text = std::fs::read_to_string(&synonyms).unwrap();
    text.push_str("зюзябра => супервизор\n");
    std::fs::write(&synonyms, text).unwrap();
    let themes = dir.path().join("themes.yaml");
    let extra = "\n  - id: reload_probe\n    display_name: Проба\n    section: probe\n    keywords: [проба]\n";
    std::fs::write(&themes, std::fs::read_to_string(&themes).unwrap() + extra).unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["generation"], 1, "{answer}");
    assert!(lexical_hits(&state, "зюзябра").await > 0, "the new synonym is in use");
    assert_eq!(state.search.theme_list().len(), themes_before + 1);
    let (_, openapi) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    assert!(openapi.to_string().contains("reload_probe"), "the OpenAPI document lists the new theme");
    assert!(metrics(&state).await.contains("retrieval_config_reloads_total{outcome=\"ok\"} 1"));

    // A malformed synonym line and a broken boosting file: rejected, the files in use stay.
    std::fs::write(&synonyms, "зюзябра\n").unwrap();
    std::fs::write(dir.path().join("boosting.yaml"), "fusion: [\n").unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(error_code(&answer), "invalid_request");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("RETR_SYNONYMS_DIR: _all.txt: line 1"), "{message}");
    assert!(message.contains("RETR_BOOSTING_PATH"), "{message}");
    assert!(lexical_hits(&state, "зюзябра").await > 0, "the synonyms in use stay");
    assert_eq!(state.search.theme_list().len(), themes_before + 1);
    let status = health(&state).await;
    assert_eq!(status["status"], "degraded", "{status}");
    let reason = status["error"].as_str().unwrap();
    assert!(reason.contains("reload was rejected (RETR_BOOSTING_PATH, RETR_SYNONYMS_DIR)"), "{reason}");
    assert!(!status.to_string().contains(&*dir.path().to_string_lossy()), "no server path in /health: {status}");
    let scraped = metrics(&state).await;
    assert!(scraped.contains("retrieval_config_reloads_total{outcome=\"rejected\"} 1"), "{scraped}");
    assert!(scraped.contains("retrieval_config_reload_rejected 1"), "{scraped}");

    // Fixed: the next reload goes through and clears the warning.
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/boosting.yaml"), dir.path().join("boosting.yaml"))
        .unwrap();
    std::fs::write(&synonyms, "# no rules\n").unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["generation"], 2, "{answer}");
    assert_eq!(lexical_hits(&state, "зюзябра").await, 0, "the synonym is gone");
    assert_eq!(health(&state).await["status"], "ok");
    assert!(metrics(&state).await.contains("retrieval_config_reload_rejected 0"));
}

#[tokio::test]
async fn a_reload_that_loses_a_theme_a_dify_knowledge_base_names_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("config/themes.yaml"), dir.path().join("themes.yaml")).unwrap();
    let bases = dir.path().join("knowledge.yaml");
    std::fs::write(&bases, "knowledge_bases:\n  operators:\n    tenant_id: t1\n    theme: user_agent\n").unwrap();
    let state = fixture_state(|settings| {
        settings.themes_path = dir.path().join("themes.yaml");
        settings.dify_knowledge_bases = bases.clone();
    });
    let without =
        std::fs::read_to_string(dir.path().join("themes.yaml")).unwrap().replace("id: user_agent", "id: renamed");
    std::fs::write(dir.path().join("themes.yaml"), without).unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("\"user_agent\""), "{answer}");
    assert!(state.search.theme_list().iter().any(|theme| theme.id == "user_agent"), "the themes in use stay");
}

#[tokio::test]
async fn with_an_admin_token_a_reload_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "s3cret-admin-token");
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    let request = Request::builder()
        .method("POST")
        .uri(RELOAD)
        .header("authorization", "Bearer s3cret-admin-token")
        .body(Body::empty())
        .unwrap();
    let (status, answer) = send_request(&state, request).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}
