//! `/health` tells the truth: `degraded` whenever every answer carries a degradation, computed
//! from state the service holds (never waiting on Chroma), and config files checked at start-up.

use crate::common::fake_http::{closed_port_url, FakeResponse, FakeServer};
use crate::common::send;
use axum::http::StatusCode;
use retrieval_engine::{fixtures, write_snapshot_file, InMemoryIndex, PseudoEmbedder};
use retrieval_service::config::{Settings, VectorBackend};
use retrieval_service::startup;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_broken_or_deleted_snapshot_makes_health_degraded_while_searches_are_flagged_stale() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    let index = Arc::new(InMemoryIndex::from_file(&path));
    let settings = Settings { embedding_dimension: fixtures::DIMENSION, min_score: -1.0, ..Settings::default() };
    let state = startup::state_with(settings, index.clone(), Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let search = json!({"query": "установка SDK", "tenant_id": "t1"}).to_string();
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("ok")), "{health}");

    for break_it in ["truncate", "garbage", "delete"] {
        match break_it {
            "truncate" => std::fs::write(&path, "{\"format_version\": 1, \"docs\": [").unwrap(),
            "garbage" => std::fs::write(&path, [0xff, 0x00, 0x13, 0x37]).unwrap(),
            _ => std::fs::remove_file(&path).unwrap(),
        }
        index.reload_if_changed();
        let (status, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert!(answer["degradations"].to_string().contains("backend_stale"), "{break_it}: {answer}");
        let (status, health) = send(&state, "GET", "/health", None).await;
        assert_eq!(status, StatusCode::OK, "{break_it}: {health}");
        assert_eq!(health["status"], "degraded", "{break_it}: {health}");
        assert!(health["error"].as_str().unwrap().contains("cannot be refreshed"), "{break_it}: {health}");

        write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
        index.reload_if_changed();
        let (_, health) = send(&state, "GET", "/health", None).await;
        assert_eq!(health["status"], "ok", "{break_it}, repaired: {health}");
    }
}

#[tokio::test]
async fn health_never_waits_on_a_stalled_chroma() {
    let stalled = FakeServer::start(vec![FakeResponse::hang()]).await;
    let settings = Settings {
        mock_mode: false,
        vector_backend: VectorBackend::Chroma,
        chroma_host: stalled.url(),
        chroma_timeout_seconds: 2.0,
        ..Settings::default()
    };
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let index = startup::build_index(&settings, &embedder, None).await.unwrap();
    let state = startup::state_with(settings, index, Arc::new(embedder));
    for _ in 0..3 {
        let started = Instant::now();
        let (status, health) = send(&state, "GET", "/health", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
        assert!(started.elapsed() < Duration::from_millis(500), "/health took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn broken_config_files_stop_start_up_and_missing_ones_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let broken_themes = dir.path().join("themes.yaml");
    std::fs::write(&broken_themes, "themes: [ {id: x").unwrap();
    let broken_boosting = dir.path().join("boosting.yaml");
    std::fs::write(&broken_boosting, "fusion: [\n").unwrap();
    let error = startup::build_state(Settings { themes_path: broken_themes, ..Settings::default() })
        .await
        .err()
        .expect("a broken themes file stops start-up")
        .to_string();
    assert!(error.contains("RETR_THEMES_PATH"), "{error}");
    let error = startup::build_state(Settings { boosting_path: broken_boosting, ..Settings::default() })
        .await
        .err()
        .expect("a broken boosting file stops start-up")
        .to_string();
    assert!(error.contains("RETR_BOOSTING_PATH"), "{error}");

    // Missing: the service starts and /health names the settings.
    let state = startup::build_state(Settings { boosting_path: dir.path().join("absent.yaml"), ..Settings::default() })
        .await
        .unwrap();
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("ok")), "{health}");
    assert_eq!(health["missing_config"], json!(["RETR_BOOSTING_PATH"]), "{health}");
    // Without themes every answer carries router_fallback: degraded.
    let state = startup::build_state(Settings { themes_path: dir.path().join("absent.yaml"), ..Settings::default() })
        .await
        .unwrap();
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("degraded")), "{health}");
    assert_eq!(health["missing_config"], json!(["RETR_THEMES_PATH"]), "{health}");
    assert!(!health.to_string().contains(&*dir.path().to_string_lossy()), "{health}");
}

/// A YAML config file broken on its third line stops start-up with an error that names the setting
/// and the line, whichever file it is.
#[tokio::test]
async fn a_malformed_yaml_config_file_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let themes = write("themes.yaml", "themes:\n  - id: a\n    domain: [x\n");
    let boosting = write("boosting.yaml", "fusion:\n  method: rrf\n  k: [60\n");
    let knowledge = write("knowledge.yaml", "knowledge_bases:\n  a:\n    tenant_id: [t1\n");
    let mapping = write("mapping.yaml", "rules:\n  - prefix: /a\n    domain: [x\n");
    let start = |settings: Settings| async move { startup::build_state(settings).await.err().map(|e| e.to_string()) };
    let error = start(Settings { themes_path: themes, ..Settings::default() }).await.unwrap();
    assert!(error.contains("RETR_THEMES_PATH") && error.contains("line 3"), "{error}");
    let error = start(Settings { boosting_path: boosting, ..Settings::default() }).await.unwrap();
    assert!(error.contains("RETR_BOOSTING_PATH") && error.contains("line 3"), "{error}");
    let settings = Settings { dify_knowledge_bases: knowledge, ..Settings::default() };
    let error = startup::validate_settings(&settings).unwrap_err().to_string();
    assert!(error.contains("RETR_DIFY_KNOWLEDGE_BASES") && error.contains("line 3"), "{error}");
    let settings = Settings { mapping_path: mapping, ..Settings::default() };
    let error = startup::load_mapping(&settings).err().unwrap().to_string();
    assert!(error.contains("RETR_MAPPING_PATH") && error.contains("line 3"), "{error}");
}

/// While the embedding provider fails, every answer carries `embedding_fallback` and `/health`
/// says so; the first successful call clears it.
#[tokio::test]
async fn a_failing_embedding_provider_makes_health_degraded_until_it_answers() {
    let vector: Vec<f32> = (0..fixtures::DIMENSION).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect();
    let server = FakeServer::start(vec![
        FakeResponse::new(401, "invalid key"),
        FakeResponse::json(200, &json!({"data": [{"index": 0, "embedding": vector}]})),
    ])
    .await;
    let mut settings = Settings { embedding_dimension: fixtures::DIMENSION, ..Settings::default() };
    settings.embedding_api_base = server.url();
    settings.embedding_max_attempts = 1;
    let metrics = Arc::new(retrieval_engine::Metrics::new());
    let embedder = startup::build_embedder(&settings, Some(Arc::clone(&metrics))).unwrap();
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    let state = startup::state_with_metrics(settings, index, embedder, metrics);
    let search = json!({"query": "установка SDK", "tenant_id": "t1"}).to_string();

    let (_, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert!(answer["degradations"].to_string().contains("embedding_fallback"), "{answer}");
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("degraded")), "{health}");
    let error = health["error"].as_str().unwrap();
    assert!(error.contains("embedding") && error.contains("unauthorized"), "{health}");
    assert!(!error.contains(&server.url()) && !error.contains("invalid key"), "{health}");

    let (_, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert!(!answer["degradations"].to_string().contains("embedding_fallback"), "{answer}");
    let (_, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(health["status"], "ok", "{health}");
}

/// Mock mode with an embedding server configured and down at start: the service starts on the demo
/// corpus embedded with pseudo-embeddings (its queries too, the only vectors that compare with the
/// corpus's), `/health` says degraded naming the embedder, and every answer carries the
/// degradation.
#[tokio::test]
async fn mock_mode_starts_degraded_when_the_embedding_server_is_down() {
    let url = closed_port_url().await;
    let settings = Settings {
        embedding_api_base: url.clone(),
        embedding_max_attempts: 1,
        embedding_timeout_seconds: 2.0,
        ..Settings::default()
    };
    assert!(settings.mock_mode);
    let state = startup::build_state(settings).await.expect("mock mode starts without its embedding server");
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("degraded")), "{health}");
    let error = health["error"].as_str().unwrap();
    assert!(error.contains("RETR_EMBEDDING_API_BASE") && error.contains("pseudo-embeddings"), "{health}");
    assert!(!error.contains(&url), "{health}");

    let search = json!({"query": "как сбросить пароль", "tenant_id": "demo"}).to_string();
    let (status, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(!answer["hits"].as_array().unwrap().is_empty(), "{answer}");
    let degradation = answer["degradations"].as_array().unwrap().iter().find(|d| d["code"] == "embedding_fallback");
    let message = degradation.unwrap_or_else(|| panic!("no embedding_fallback: {answer}"))["message"].as_str().unwrap();
    assert!(message.contains("RETR_EMBEDDING_API_BASE"), "{message}");
    let dify = json!({"knowledge_id": "demo", "query": "как сбросить пароль"}).to_string();
    let (status, answer) = send(&state, "POST", "/internal/retrieval/dify/retrieval", Some(&dify)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(!answer["records"].as_array().unwrap().is_empty(), "{answer}");
    assert!(answer["degradations"].to_string().contains("embedding_fallback"), "{answer}");
    let (_, stats) = send(&state, "GET", "/internal/retrieval/stats?tenant_id=demo", None).await;
    assert_eq!(stats["embedding_model"], "pseudo-sha256", "{stats}");
}
