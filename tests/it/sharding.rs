//! `RETR_TENANTS`: an instance loads and serves only its tenants, and says so for the others.

use crate::common::send;
use axum::http::StatusCode;
use retrieval_engine::{fixtures, write_snapshot_file, InMemoryIndex, PseudoEmbedder, TenantScope};
use retrieval_service::config::Settings;
use retrieval_service::startup;
use serde_json::json;
use std::sync::Arc;

fn state(tenants: &str, dir: &tempfile::TempDir) -> retrieval_service::AppState {
    let path = dir.path().join(format!("index-{}.json", tenants.replace([':', '/', ','], "_")));
    write_snapshot_file(&path, &fixtures::snapshot()).unwrap();
    let settings =
        Settings { embedding_dimension: fixtures::DIMENSION, tenants: tenants.into(), ..Settings::default() };
    assert!(settings.validate().is_ok());
    let index = Arc::new(InMemoryIndex::from_file_scoped(&path, settings.tenant_scope()));
    startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)))
}

#[tokio::test]
async fn an_instance_serves_only_its_tenants_and_names_the_others_misdirected() {
    let dir = tempfile::tempdir().unwrap();
    let state = state("t1", &dir);
    let stats = state.search.index().stats().await.unwrap();
    assert_eq!(stats.tenants.keys().collect::<Vec<_>>(), ["t1"], "t2 is not even loaded");
    let search = |tenant: &str| json!({"query": "Gradle SDK", "tenant_id": tenant}).to_string();
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search("t1"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for (method, uri, body) in [
        ("POST", "/internal/retrieval/search", Some(search("t2"))),
        ("POST", "/internal/retrieval/context", Some(search("t2"))),
        ("GET", "/internal/retrieval/stats?tenant_id=t2", None),
        (
            "POST",
            "/internal/retrieval/chunks/window",
            Some(json!({"tenant_id": "t2", "doc_id": "acme/secret-install", "anchor_chunk_id": "acme/secret-install#s1-c1"}).to_string()),
        ),
    ] {
        let (status, answer) = send(&state, method, uri, body.as_deref()).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{uri}: {answer}");
        assert_eq!(answer["error"]["code"], "tenant_not_served");
        assert!(answer["error"]["message"].as_str().unwrap().contains("RETR_TENANTS"));
    }
    let (_, tenants) = send(&state, "GET", "/internal/retrieval/tenants", None).await;
    assert_eq!(tenants["tenants"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn hash_shards_split_the_tenants_between_instances() {
    let dir = tempfile::tempdir().unwrap();
    let shards = [state("shard:0/2", &dir), state("shard:1/2", &dir)];
    for tenant in ["t1", "t2"] {
        let owners: Vec<usize> =
            (0..2).filter(|&i| TenantScope::parse(&format!("shard:{i}/2")).unwrap().serves(tenant)).collect();
        assert_eq!(owners.len(), 1, "{tenant} has one owner");
        for (i, shard) in shards.iter().enumerate() {
            let body = json!({"query": "Gradle SDK", "tenant_id": tenant}).to_string();
            let (status, _) = send(shard, "POST", "/internal/retrieval/search", Some(&body)).await;
            let expected = if owners[0] == i { StatusCode::OK } else { StatusCode::MISDIRECTED_REQUEST };
            // A shard without data for this tenant still answers 421, not an empty 200.
            assert_eq!(status, expected, "{tenant} on shard {i}");
        }
    }
}

#[test]
fn a_malformed_tenants_spec_stops_start_up() {
    for spec in ["shard:2/2", "bad tenant!", "shard:x"] {
        let settings = Settings { tenants: spec.into(), ..Settings::default() };
        let error = settings.validate().unwrap_err().to_string();
        assert!(error.contains("RETR_TENANTS"), "{spec}: {error}");
    }
}
