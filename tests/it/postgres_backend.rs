//! The PostgreSQL backend against a real server (`RETR_TEST_POSTGRES_URL` and
//! `RETR_TEST_POSTGRES_STANDBY_URL`, a primary and its streaming standby started by
//! scripts/postgres.sh from scripts/test.sh). Each test works in a database of its own.
//! Ingest is atomic per tenant and content-hashed; SQL text in ids, texts and filters is data;
//! with the primary gone the replica reads from the standby (flagged) or answers stale (flagged);
//! the connection URL's password reaches no log, error, `/health` or `/metrics`.

use crate::common::needs::required;
use crate::common::{send, switchable_proxy, LogCapture};
use axum::http::StatusCode;
use retrieval_engine::{
    fixtures,
    ingest::{IndexWriter, IngestBatch, PostgresSourceWriter, RecordSet, SourceScope},
    Level, Metadata, PostgresIndex, PostgresSearchIndex, PostgresSearchMode, PseudoEmbedder, Record, RecordFilter,
    Snapshot, VectorIndex,
};
use retrieval_service::config::{Secret, Settings, VectorBackend};
use retrieval_service::{startup, AppState};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The primary's URL (`RETR_TEST_POSTGRES_URL`). A test calling it is marked
/// `#[cfg_attr(retr_test_missing = "postgres", ignore = …)]`; a missing server fails it (see
/// `common::needs`).
pub(crate) fn postgres_url() -> String {
    required("postgres")
}

/// The standby's URL (`RETR_TEST_POSTGRES_STANDBY_URL`), as `postgres_url`.
fn standby_url() -> String {
    required("postgres_standby")
}

/// `url` with another database name.
fn with_database(url: &str, database: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a URL ending in /database");
    format!("{base}/{database}")
}

/// A new, empty database on the server of `url`; returns its URL.
pub(crate) async fn fresh_database(url: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000_000;
    let name = format!("retr_test_{nanos}_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    // A database name cannot be a parameter; this one is made of digits and underscores here.
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    with_database(url, &name)
}

async fn sql_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

pub(crate) fn settings(url: &str) -> Settings {
    Settings {
        mock_mode: false,
        vector_backend: VectorBackend::Postgres,
        postgres_url: Secret::new(url),
        embedding_dimension: fixtures::DIMENSION,
        index_reload_interval_ms: 50,
        postgres_connect_timeout_seconds: 2.0,
        ..Settings::default()
    }
}

/// Writes every tenant of `snapshot` through the ingest writer, as source `fixtures`.
pub(crate) async fn write_snapshot(url: &str, snapshot: &Snapshot) {
    write_snapshot_with(&settings(url), snapshot).await
}

/// `write_snapshot` through an ingest configured by `settings`.
pub(crate) async fn write_snapshot_with(settings: &Settings, snapshot: &Snapshot) {
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings.postgres()).unwrap(), "test");
    let mut tenants: BTreeMap<String, RecordSet> = BTreeMap::new();
    for (level, records) in
        [(Level::Doc, &snapshot.docs), (Level::Section, &snapshot.sections), (Level::Chunk, &snapshot.chunks)]
    {
        for record in records {
            let set = tenants.entry(record.meta.tenant_id.to_string()).or_default();
            match level {
                Level::Doc => set.docs.push(record.clone()),
                Level::Section => set.sections.push(record.clone()),
                Level::Chunk => set.chunks.push(record.clone()),
            }
        }
    }
    for (tenant, records) in tenants {
        let scope = SourceScope { tenant_id: tenant, source_name: "fixtures".into() };
        let batch = IngestBatch {
            records,
            embedding_model: snapshot.embedding_model.clone(),
            dimension: snapshot.dimension.max(fixtures::DIMENSION),
            indexed_at: snapshot.indexed_at.clone(),
            kept_pages: BTreeMap::new(),
        };
        writer.replace_source(&scope, batch).await.unwrap();
    }
}

/// The serving state over `settings` (the replica loaded once).
async fn serving_state(settings: Settings) -> (AppState, Arc<PostgresIndex>) {
    let index = PostgresIndex::new(&settings.postgres()).unwrap();
    index.refresh().await.unwrap();
    let state = startup::state_with(settings, index.clone(), Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    (state, index)
}

/// A page of tenant `tenant`: one doc with one section and one chunk, all saying `text`.
fn page(tenant: &str, doc_id: &str, text: &str) -> RecordSet {
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let meta = Metadata {
        tenant_id: tenant.into(),
        doc_id: doc_id.into(),
        title: format!("Страница {doc_id}").into(),
        source: "docs".into(),
        product: "chatcenter".into(),
        ..Metadata::default()
    };
    let section = Metadata { section_id: Some(format!("{doc_id}#s0")), ..meta.clone() };
    let chunk = Metadata { chunk_id: Some(format!("{doc_id}#s0-c0")), ..section.clone() };
    let record =
        |id: String, meta: Metadata| Record { id, meta, text: text.into(), embedding: embedder.embed_one(text) };
    RecordSet {
        docs: vec![record(doc_id.to_string(), meta)],
        sections: vec![record(format!("{doc_id}#s0"), section)],
        chunks: vec![record(format!("{doc_id}#s0-c0"), chunk)],
    }
}

fn merged(sets: Vec<RecordSet>) -> RecordSet {
    let mut all = RecordSet::default();
    for set in sets {
        all.docs.extend(set.docs);
        all.sections.extend(set.sections);
        all.chunks.extend(set.chunks);
    }
    all
}

fn batch(records: RecordSet, kept_pages: BTreeMap<String, String>) -> IngestBatch {
    IngestBatch {
        records,
        embedding_model: fixtures::snapshot().embedding_model,
        dimension: fixtures::DIMENSION,
        indexed_at: "2026-01-01T00:00:00Z".into(),
        kept_pages,
    }
}

async fn texts(index: &PostgresIndex, tenant: &str) -> Vec<String> {
    let docs = index.get(Level::Doc, &RecordFilter::tenant(tenant), 100).await.unwrap();
    let mut texts: Vec<String> = docs.iter().map(|doc| format!("{}={}", doc.meta.doc_id, doc.text)).collect();
    texts.sort();
    texts
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_reingest_writes_only_changed_pages_and_flips_the_tenant_at_once() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    let first = merged(vec![page("acme", "docs/a", "альфа"), page("acme", "docs/b", "бета")]);
    let outcome = writer.replace_source(&scope, batch(first, BTreeMap::new())).await.unwrap();
    let first_version = outcome.version.expect("a write reports its index_version");
    let (_, index) = serving_state(settings(&url)).await;
    assert_eq!(texts(&index, "acme").await, ["docs/a=альфа", "docs/b=бета"]);
    assert_eq!(index.version(), Some(first_version));

    // The second run: docs/a unchanged (kept), docs/b changed, docs/c new.
    let stored = writer.stored_pages(&scope).await.unwrap();
    assert_eq!(stored.len(), 2);
    let kept: BTreeMap<String, String> =
        stored.iter().filter(|(doc, _)| *doc == "docs/a").map(|(d, h)| (d.clone(), h.clone())).collect();
    let client = sql_client(&url).await;
    let rows_of = |doc: &'static str| {
        let client = &client;
        async move {
            client
                .query_one("SELECT count(*) FROM retr_records WHERE doc_id = $1", &[&doc])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    let second = merged(vec![page("acme", "docs/b", "бета два"), page("acme", "docs/c", "гамма")]);
    let outcome = writer.replace_source(&scope, batch(second, kept)).await.unwrap();
    assert!(outcome.version.unwrap() > first_version, "index_version moves forward");
    assert_eq!(rows_of("docs/a").await, 3, "an unchanged page is neither written again nor deleted");
    assert_eq!(rows_of("docs/b").await, 3, "the changed page's old rows are deleted after the switch");
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, ["docs/a=альфа", "docs/b=бета два", "docs/c=гамма"]);
    assert!(index.version() >= outcome.version);

    // A run that changes nothing switches nothing: the same version.
    let stored = writer.stored_pages(&scope).await.unwrap();
    let again = writer.replace_source(&scope, batch(RecordSet::default(), stored)).await.unwrap();
    assert_eq!(again.version, outcome.version, "an unchanged source keeps its version");

    // A third run without docs/c removes it.
    let stored = writer.stored_pages(&scope).await.unwrap();
    let kept: BTreeMap<String, String> = stored.into_iter().filter(|(doc, _)| doc != "docs/c").collect();
    let outcome = writer.replace_source(&scope, batch(RecordSet::default(), kept)).await.unwrap();
    assert_eq!(outcome.removed_docs, 1);
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, ["docs/a=альфа", "docs/b=бета два"]);
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_failed_ingest_leaves_the_old_tenant_served() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    let old = merged(vec![page("acme", "docs/a", "старая"), page("acme", "docs/b", "старая б")]);
    writer.replace_source(&scope, batch(old, BTreeMap::new())).await.unwrap();
    let (_, index) = serving_state(settings(&url)).await;
    let before = texts(&index, "acme").await;
    let version = index.version();

    // A run that fails (a kept page that is not stored).
    let new = merged(vec![page("acme", "docs/a", "новая"), page("acme", "docs/c", "новая в")]);
    let bogus: BTreeMap<String, String> = [("docs/b".to_string(), "0".repeat(32))].into();
    let error = writer.replace_source(&scope, batch(new.clone(), bogus)).await.unwrap_err();
    assert!(error.to_string().contains("changed in postgres during this run"), "{error}");
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, before, "the old tenant is served whole");
    assert_eq!(index.version(), version);

    // A run killed while it writes (its task aborted while it inserts records) changes nothing
    // served either.
    let client = sql_client(&url).await;
    let writer = Arc::new(writer);
    let many = merged((0..1000).map(|n| page("acme", &format!("docs/n{n}"), &format!("новая {n}"))).collect());
    let run = {
        let (writer, scope) = (Arc::clone(&writer), scope.clone());
        tokio::spawn(async move { writer.replace_source(&scope, batch(many, BTreeMap::new())).await })
    };
    wait_for_writing(&client, &url).await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled(), "the run was killed while it wrote");
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, before, "a killed run leaves the old tenant");

    // The primary gone in the middle of a run (a proxy in front of it switched off while it
    // inserts records): the run fails, the old tenant is served.
    let (proxy, switch) = proxied(&url).await;
    let cut = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&proxy).postgres()).unwrap(), "test");
    let many = merged((0..1000).map(|n| page("acme", &format!("docs/m{n}"), &format!("новая {n}"))).collect());
    let run = tokio::spawn(async move {
        cut.replace_source(
            &SourceScope { tenant_id: "acme".into(), source_name: "docs".into() },
            batch(many, BTreeMap::new()),
        )
        .await
    });
    wait_for_writing(&client, &url).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    switch.store(false, Ordering::Release);
    assert!(run.await.unwrap().is_err(), "a run that lost the primary fails");
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, before, "a run cut off from the primary leaves the old tenant");

    // Running it again completes it.
    writer.replace_source(&scope, batch(new, BTreeMap::new())).await.unwrap();
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, ["docs/a=новая", "docs/c=новая в"]);

    // The dead runs left nothing behind: their transactions rolled back.
    let leftovers = "SELECT count(*) FROM retr_records WHERE doc_id LIKE 'docs/n%' OR doc_id LIKE 'docs/m%'";
    let left: i64 = client.query_one(leftovers, &[]).await.unwrap().get(0);
    assert_eq!(left, 0);
    let served: i64 = client.query_one("SELECT count(*) FROM retr_records", &[]).await.unwrap().get(0);
    assert_eq!(served, 6, "the served pages' rows only");
}

/// Waits until a run is writing records into the database of `url` (its transaction open).
async fn wait_for_writing(client: &tokio_postgres::Client, url: &str) {
    let database = url.rsplit_once('/').unwrap().1.to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'INSERT INTO retr_records%'",
                &[&database],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "no run wrote records within 30 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn an_instance_reads_only_its_tenants_and_waits_for_a_written_version() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    write_snapshot(&url, &fixtures::snapshot()).await;
    let settings = Settings { tenants: "t1".into(), ..settings(&url) };
    let (state, index) = serving_state(settings).await;
    let client = sql_client(&url).await;
    let t1: i64 = client.query_one("SELECT count(*) FROM retr_records WHERE tenant = 't1'", &[]).await.unwrap().get(0);
    let all: i64 = client.query_one("SELECT count(*) FROM retr_records", &[]).await.unwrap().get(0);
    assert!(all > t1);
    let status = index.replica_status().unwrap();
    assert_eq!(status.records_loaded_total, t1 as u64, "only t1's rows were read");
    let body = json!({"query": "Gradle", "tenant_id": "t2"}).to_string();
    let (status, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{answer}");

    // Read-your-writes: a search that names the version an ingest printed waits for the replica.
    index.spawn_refresher();
    let writer =
        PostgresSourceWriter::new(PostgresIndex::for_ingest(&self::settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "t1".into(), source_name: "new".into() };
    let outcome = writer
        .replace_source(&scope, batch(page("t1", "new/page", "свежая страница Gradle"), BTreeMap::new()))
        .await
        .unwrap();
    let version = outcome.version.unwrap().to_string();
    let body = json!({"query": "свежая страница", "tenant_id": "t1", "min_index_version": version}).to_string();
    let (status, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer["hits"].to_string().contains("new/page"), "{answer}");
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn sql_text_in_ids_texts_filters_and_queries_is_data() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let hostile = "x'); DROP TABLE retr_records; --";
    // `ingest --tenant` accepts any non-empty id: it reaches SQL only as a parameter.
    let scope = SourceScope { tenant_id: hostile.into(), source_name: "docs".into() };
    writer
        .replace_source(&scope, batch(page(hostile, "d'; DELETE FROM retr_pages; --", hostile), BTreeMap::new()))
        .await
        .unwrap();
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    writer
        .replace_source(&scope, batch(page("acme", "docs/a", "SELECT * FROM retr_tenants; настройка"), BTreeMap::new()))
        .await
        .unwrap();
    let client = sql_client(&url).await;
    let tenants: Vec<String> = client
        .query("SELECT tenant FROM retr_tenants ORDER BY tenant", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tenants, ["acme", hostile]);
    let records: i64 = client.query_one("SELECT count(*) FROM retr_records", &[]).await.unwrap().get(0);
    assert_eq!(records, 6, "both pages' rows, nothing dropped");

    let (state, index) = serving_state(settings(&url)).await;
    assert_eq!(texts(&index, hostile).await, [format!("d'; DELETE FROM retr_pages; --={hostile}")]);
    for body in [
        json!({"query": "'; DROP TABLE retr_records; --", "tenant_id": "acme"}),
        json!({"query": "настройка", "tenant_id": "acme", "filters": {"product": "' OR 1=1 --"}}),
        json!({"query": "настройка", "tenant_id": "acme", "doc_ids": ["docs/a' OR '1'='1"]}),
    ] {
        let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::OK, "{body}: {response}");
    }
    let (status, response) = send(
        &state,
        "POST",
        "/internal/retrieval/search",
        Some(&json!({"query": "настройка", "tenant_id": "acme", "filters": {"product": "' OR 1=1 --"}}).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response["hits"].as_array().map(Vec::len), Some(0), "a filter value is compared, not run: {response}");
    // An id that is not a tenant id is refused before any lookup.
    let (status, _) = send(
        &state,
        "POST",
        "/internal/retrieval/search",
        Some(&json!({"query": "x", "tenant_id": hostile}).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let count: i64 = client.query_one("SELECT count(*) FROM retr_records", &[]).await.unwrap().get(0);
    assert_eq!(count, 6);
}

/// The postgres URL of a proxy (`switchable_proxy`) in front of the server of `url`.
async fn proxied(url: &str) -> (String, Arc<std::sync::atomic::AtomicBool>) {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let port = config.get_ports()[0];
    let (proxy, switch) = switchable_proxy(&format!("127.0.0.1:{port}"), true).await;
    let (credentials, rest) = url.split_once('@').unwrap();
    let (_, database) = rest.split_once('/').unwrap();
    let address = proxy.trim_start_matches("http://");
    (format!("{credentials}@{address}/{database}"), switch)
}

/// Waits until the standby has replayed the database of `url` as far as a check on it says.
async fn wait_for_standby(standby: &str, tenant: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((client, connection)) = tokio_postgres::connect(standby, tokio_postgres::NoTls).await {
            tokio::spawn(connection);
            let row = client.query_opt("SELECT generation FROM retr_tenants WHERE tenant = $1", &[&tenant]).await;
            if matches!(row, Ok(Some(_))) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "the standby did not replay the test database within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The fixture written to a fresh database, replayed on the standby, and the settings of an
/// instance reading both through proxies, with the switches that take each away.
async fn fixture_behind_switchable_servers() -> (Settings, Arc<AtomicBool>, Arc<AtomicBool>) {
    let url = postgres_url();
    let standby = standby_url();
    let url = fresh_database(&url).await;
    let database = url.rsplit_once('/').unwrap().1.to_string();
    let standby = with_database(&standby, &database);
    write_snapshot(&url, &fixtures::snapshot()).await;
    wait_for_standby(&standby, "t1").await;
    let (primary, primary_switch) = proxied(&url).await;
    let (standby_proxy, standby_switch) = proxied(&standby).await;
    let settings = Settings { postgres_standby_urls: Secret::new(standby_proxy), ..settings(&primary) };
    (settings, primary_switch, standby_switch)
}

#[cfg_attr(
    any(retr_test_missing = "postgres", retr_test_missing = "postgres_standby"),
    ignore = "needs a PostgreSQL primary and standby: set RETR_TEST_POSTGRES_URL and RETR_TEST_POSTGRES_STANDBY_URL (scripts/test.sh starts them)"
)]
#[tokio::test]
async fn with_the_primary_gone_searches_answer_from_the_standby_then_the_replica_flagged() {
    let (settings, primary_switch, standby_switch) = fixture_behind_switchable_servers().await;
    let (state, index) = serving_state(settings).await;
    let search = json!({"query": "Подключение Android SDK через Gradle", "tenant_id": "t1"}).to_string();
    let (status, fresh) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::OK);
    let (_, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["replica"]["source"], "primary");

    // The primary goes away: the replica is read from the standby, and every answer says so.
    primary_switch.store(false, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    index.refresh().await.unwrap();
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["hits"], fresh["hits"]);
    let degradations = body["degradations"].to_string();
    assert!(degradations.contains("backend_stale") && degradations.contains("standby 1"), "{body}");
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["replica"]["source"], "standby 1");
    assert!(health["error"].as_str().unwrap().contains("standby 1"), "{health}");

    // The standby goes too: the replica answers, flagged stale, never a bare 5xx.
    standby_switch.store(false, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(index.refresh().await.is_err());
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["hits"], fresh["hits"]);
    assert!(body["degradations"].to_string().contains("backend_stale"), "{body}");
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("degraded")), "{health}");

    // The primary is back: the flag goes.
    primary_switch.store(true, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    index.refresh().await.unwrap();
    let (_, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["replica"]["source"], "primary");
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn the_password_reaches_no_log_error_health_or_metrics() {
    let url = postgres_url();
    let password =
        url.split_once("://").unwrap().1.split_once('@').unwrap().0.split_once(':').map(|(_, p)| p.to_string());
    let Some(password) = password.filter(|p| !p.is_empty()) else {
        panic!("the test server's URL carries a password (scripts/postgres.sh sets one)");
    };
    let url = fresh_database(&url).await;
    write_snapshot(&url, &fixtures::snapshot()).await;
    let (primary, switch) = proxied(&url).await;
    let wrong = url.replace(&format!(":{password}@"), ":not-the-password@");
    let capture = LogCapture::default();
    let _logs = capture.install();
    let settings = Settings { postgres_standby_urls: Secret::new(wrong.clone()), ..settings(&primary) };
    let (state, index) = serving_state(settings.clone()).await;
    switch.store(false, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let error = index.refresh().await.unwrap_err();
    assert!(!error.to_string().contains(&password) && !error.to_string().contains("not-the-password"), "{error}");
    let mut seen = vec![error.to_string(), format!("{settings:?}")];
    for (method, uri, body) in [
        ("POST", "/internal/retrieval/search", Some(json!({"query": "Gradle", "tenant_id": "t1"}).to_string())),
        ("GET", "/health", None),
        ("GET", "/metrics", None),
        ("GET", "/internal/retrieval/stats?tenant_id=t1", None),
    ] {
        let (status, response) = send(&state, method, uri, body.as_deref()).await;
        assert!(status.as_u16() < 500, "{uri}: {status} {response}");
        seen.push(response.to_string());
    }
    // A server that never answered: the first load's error.
    let closed = crate::common::fake_http::closed_port_url().await.replace("http://", "");
    let down = url.replacen(url.split_once('@').unwrap().1.split_once('/').unwrap().0, &closed, 1);
    let index = PostgresIndex::new(&self::settings(&down).postgres()).unwrap();
    let error = index.refresh().await.unwrap_err();
    seen.push(error.to_string());
    let state = startup::state_with(self::settings(&down), index, Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    let (status, response) =
        send(&state, "POST", "/internal/retrieval/search", Some(&json!({"query": "x", "tenant_id": "t1"}).to_string()))
            .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    seen.push(response.to_string());
    let (_, health) = send(&state, "GET", "/health", None).await;
    seen.push(health.to_string());
    seen.push(capture.text());
    for text in seen {
        assert!(!text.contains(&password), "the password leaks: {text}");
        assert!(!text.contains("not-the-password"), "a standby's password leaks: {text}");
    }
    // An invalid URL is refused at start-up without being repeated.
    let env: std::collections::HashMap<String, String> = [
        ("RETR_MOCK_MODE".to_string(), "false".to_string()),
        ("RETR_VECTOR_BACKEND".to_string(), "postgres".to_string()),
        ("RETR_POSTGRES_URL".to_string(), format!("mysql://u:{password}@h/db")),
    ]
    .into();
    let error = Settings::load(None, &env).unwrap_err().to_string();
    assert!(error.contains("RETR_POSTGRES_URL") && !error.contains(&password), "{error}");
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn the_pool_stays_bounded_under_concurrent_ingests() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let settings = Settings { postgres_pool_size: 2, ..settings(&url) };
    let writer = Arc::new(PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings.postgres()).unwrap(), "test"));
    let runs: Vec<_> = (0..16)
        .map(|n| {
            let writer = Arc::clone(&writer);
            tokio::spawn(async move {
                let tenant = format!("t{n}");
                let scope = SourceScope { tenant_id: tenant.clone(), source_name: "docs".into() };
                let records =
                    merged((0..20).map(|p| page(&tenant, &format!("docs/p{p}"), &format!("текст {p}"))).collect());
                writer.replace_source(&scope, batch(records, BTreeMap::new())).await
            })
        })
        .collect();
    let client = sql_client(&url).await;
    let database = url.rsplit_once('/').unwrap().1.to_string();
    let mut most = 0i64;
    let started = Instant::now();
    while runs.iter().any(|run| !run.is_finished()) && started.elapsed() < Duration::from_secs(60) {
        let row = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'retrieval-service'",
                &[&database],
            )
            .await
            .unwrap();
        most = most.max(row.get(0));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for run in runs {
        run.await.unwrap().unwrap();
    }
    assert!((1..=2).contains(&most), "at most RETR_POSTGRES_POOL_SIZE connections, saw {most}");
    let tenants: i64 =
        client.query_one("SELECT count(*) FROM retr_tenants WHERE generation > 0", &[]).await.unwrap().get(0);
    assert_eq!(tenants, 16);
}

/// Version A or B of one source: A is 30 pages; B changes the first 15, drops 10 and adds 10.
fn version(name: &str) -> (RecordSet, Vec<String>) {
    let pages: Vec<(String, String)> = if name == "A" {
        (0..30).map(|n| (format!("docs/p{n}"), format!("A{n}"))).collect()
    } else {
        (0..15)
            .map(|n| (format!("docs/p{n}"), format!("B{n}")))
            .chain((15..20).map(|n| (format!("docs/p{n}"), format!("A{n}"))))
            .chain((0..10).map(|n| (format!("docs/q{n}"), format!("B{n}"))))
            .collect()
    };
    let mut expected: Vec<String> = pages.iter().map(|(doc, text)| format!("{doc}={text}")).collect();
    expected.sort();
    (merged(pages.iter().map(|(doc, text)| page("acme", doc, text)).collect()), expected)
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn a_polling_replica_sees_one_whole_version_while_ingests_run_and_die() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    let (a, expected_a) = version("A");
    let (b, expected_b) = version("B");
    writer.replace_source(&scope, batch(a.clone(), BTreeMap::new())).await.unwrap();
    let (_, index) = serving_state(settings(&url)).await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (index, done) = (Arc::clone(&index), Arc::clone(&done));
        let (expected_a, expected_b) = (expected_a.clone(), expected_b.clone());
        tokio::spawn(async move {
            let mut seen = [0usize; 2];
            while !done.load(Ordering::Acquire) {
                let _ = index.refresh().await;
                let texts = texts(&index, "acme").await;
                if texts == expected_a {
                    seen[0] += 1;
                } else if texts == expected_b {
                    seen[1] += 1;
                } else {
                    panic!("a search saw neither version A nor B whole: {texts:?}");
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            seen
        })
    };
    // Full runs, and runs killed after 1–40 ms (their futures dropped), alternating A and B.
    for round in 0..12u64 {
        let (records, _) = if round % 2 == 0 { (b.clone(), ()) } else { (a.clone(), ()) };
        let run = writer.replace_source(&scope, batch(records, BTreeMap::new()));
        if round % 3 == 2 {
            let _ = tokio::time::timeout(Duration::from_millis(1 + round * 3), run).await;
        } else {
            run.await.unwrap();
        }
    }
    writer.replace_source(&scope, batch(b, BTreeMap::new())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    done.store(true, Ordering::Release);
    let seen = watcher.await.unwrap();
    assert!(seen[0] > 0 && seen[1] > 0, "the replica followed both versions: {seen:?}");
    index.refresh().await.unwrap();
    assert_eq!(texts(&index, "acme").await, expected_b);
    // Nothing but the served version is left once a run completed.
    let client = sql_client(&url).await;
    let records: i64 = client.query_one("SELECT count(*) FROM retr_records", &[]).await.unwrap().get(0);
    let pages: i64 = client.query_one("SELECT count(*) FROM retr_pages", &[]).await.unwrap().get(0);
    assert_eq!((pages, records), (30, 90), "only version B's 30 pages and their 3 records each");
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn the_hnsw_index_is_built_only_when_asked_for() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let client = sql_client(&url).await;
    let has_index = || async {
        let row = client
            .query_one("SELECT count(*) FROM pg_indexes WHERE indexname = 'retr_records_embedding_2'", &[])
            .await
            .unwrap();
        row.get::<_, i64>(0) == 1
    };
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    let plain = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    plain.replace_source(&scope, batch(page("acme", "docs/a", "альфа"), BTreeMap::new())).await.unwrap();
    assert!(!has_index().await, "no HNSW index by default");
    let settings = Settings { postgres_hnsw_index: true, ..settings(&url) };
    let indexed = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings.postgres()).unwrap(), "test");
    indexed.replace_source(&scope, batch(page("acme", "docs/a", "бета"), BTreeMap::new())).await.unwrap();
    assert!(has_index().await, "RETR_POSTGRES_HNSW_INDEX=true builds it over the stored rows");
    let vector_type: String = client
        .query_one("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'retr_records'::regclass AND attname = 'embedding'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(vector_type, format!("vector({})", fixtures::DIMENSION));
}

/// A tenant of `docs` pages (1 doc, 5 sections, 5 chunks each) at `dimension`, page `changed`
/// saying something else.
fn synthetic(docs: usize, dimension: usize, changed: Option<usize>) -> RecordSet {
    let embedder = PseudoEmbedder::new(dimension);
    let mut set = RecordSet::default();
    for number in 0..docs {
        let doc_id = format!("docs/page{number}");
        let edit = if changed == Some(number) { " изменено" } else { "" };
        let meta = Metadata {
            tenant_id: "big".into(),
            doc_id: doc_id.as_str().into(),
            source: "docs".into(),
            ..Metadata::default()
        };
        let record = |id: String, meta: Metadata, text: String| Record {
            id,
            meta,
            embedding: embedder.embed_one(&text),
            text: text.into(),
        };
        set.docs.push(record(doc_id.clone(), meta.clone(), format!("страница {number}{edit}")));
        for section in 0..5 {
            let section_id = format!("{doc_id}#s{section}");
            let section_meta = Metadata { section_id: Some(section_id.clone()), ..meta.clone() };
            set.sections.push(record(
                section_id.clone(),
                section_meta.clone(),
                format!("раздел {section} страницы {number}{edit}"),
            ));
            let chunk_meta = Metadata { chunk_id: Some(format!("{section_id}-c0")), ..section_meta };
            set.chunks.push(record(
                format!("{section_id}-c0"),
                chunk_meta,
                format!("фрагмент {section} страницы {number}{edit}"),
            ));
        }
    }
    set
}

/// Figures for docs/operations.md: `RETR_BENCH_PG_DOCS` pages (default 2,000 = 22,000 records at
/// 384 dimensions) ingested, loaded by a replica, one page changed and re-ingested, refreshed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: cargo test --test it postgres_backend::measure -- --ignored --nocapture"]
async fn measure_ingest_and_replica_load() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let docs: usize = std::env::var("RETR_BENCH_PG_DOCS").ok().and_then(|d| d.parse().ok()).unwrap_or(2000);
    let dimension = 384;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "big".into(), source_name: "docs".into() };
    let records = synthetic(docs, dimension, None);
    let count = records.docs.len() + records.sections.len() + records.chunks.len();
    let batch_of =
        |records: RecordSet, kept: BTreeMap<String, String>| IngestBatch { dimension, ..batch(records, kept) };
    let started = Instant::now();
    writer.replace_source(&scope, batch_of(records, BTreeMap::new())).await.unwrap();
    let ingest = started.elapsed();
    let started = Instant::now();
    let (_, index) = serving_state(settings(&url)).await;
    let load = started.elapsed();
    // One page changed: only its records are written and read again.
    let changed = synthetic(docs, dimension, Some(7));
    let hashes = retrieval_engine::ingest::page_hashes(&changed, "pseudo-sha256");
    let stored = writer.stored_pages(&scope).await.unwrap();
    let kept: BTreeMap<String, String> =
        hashes.into_iter().filter(|(doc, hash)| stored.get(doc) == Some(hash)).collect();
    let changed = retrieval_engine::ingest::without_pages(changed, &kept);
    let written = changed.docs.len() + changed.sections.len() + changed.chunks.len();
    let started = Instant::now();
    writer.replace_source(&scope, batch_of(changed, kept)).await.unwrap();
    let reingest = started.elapsed();
    let before = index.replica_status().unwrap().records_loaded_total;
    let started = Instant::now();
    assert!(index.refresh().await.unwrap());
    let refresh = started.elapsed();
    let read = index.replica_status().unwrap().records_loaded_total - before;
    println!(
        "{count} records: ingest {:.1} s, replica load {:.1} s; one page changed: {written} records written in {:.2} s, \
         {read} records read by the refresh in {:.2} s",
        ingest.as_secs_f64(),
        load.as_secs_f64(),
        reingest.as_secs_f64(),
        refresh.as_secs_f64()
    );
    assert_eq!(read, written as u64);
}

/// The serving state searched in the database (`RETR_POSTGRES_SEARCH=database`) over `settings`.
async fn in_database_state(settings: Settings) -> (AppState, Arc<PostgresSearchIndex>) {
    let settings = Settings { postgres_search: PostgresSearchMode::Database, ..settings };
    let index = PostgresSearchIndex::new(&settings.postgres()).unwrap();
    index.poll().await.unwrap();
    let state = startup::state_with(settings, index.clone(), Arc::new(PseudoEmbedder::new(fixtures::DIMENSION)));
    (state, index)
}

/// What the statistics tables hold for `tenant`, and the same counted again from the terms and
/// records themselves.
async fn statistics_and_recount(client: &tokio_postgres::Client, tenant: &str) -> [Vec<String>; 4] {
    let lines = |rows: Vec<tokio_postgres::Row>| -> Vec<String> {
        rows.iter()
            .map(|row| format!("{}:{}:{}", row.get::<_, i16>(0), row.get::<_, String>(1), row.get::<_, i64>(2)))
            .collect()
    };
    let kept = client
        .query("SELECT level, term, df FROM retr_term_df WHERE tenant = $1 AND df > 0 ORDER BY 1, 2", &[&tenant])
        .await
        .unwrap();
    let counted = client
        .query(
            "SELECT t.level, t.term, count(*) FROM retr_terms t JOIN retr_records r ON r.tenant = t.tenant AND r.rid = t.rid \
             WHERE t.tenant = $1 GROUP BY 1, 2 ORDER BY 1, 2",
            &[&tenant],
        )
        .await
        .unwrap();
    let levels = client
        .query(
            "SELECT level, documents::text, total_length FROM retr_level_stats WHERE tenant = $1 AND documents > 0 ORDER BY 1",
            &[&tenant],
        )
        .await
        .unwrap();
    let recount = client
        .query(
            "SELECT level, count(*)::text, sum(terms_length)::int8 FROM retr_records WHERE tenant = $1 GROUP BY 1 ORDER BY 1",
            &[&tenant],
        )
        .await
        .unwrap();
    [lines(kept), lines(counted), lines(levels), lines(recount)]
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn term_statistics_stay_equal_to_a_recount_across_reingests() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    let first = merged(vec![
        page("acme", "docs/a", "настройка фильтрации рекламы в браузере"),
        page("acme", "docs/b", "удаление сертификата из системы"),
    ]);
    writer.replace_source(&scope, batch(first, BTreeMap::new())).await.unwrap();
    let other = SourceScope { tenant_id: "beta".into(), source_name: "docs".into() };
    writer
        .replace_source(&other, batch(page("beta", "docs/x", "сертификат сертификат"), BTreeMap::new()))
        .await
        .unwrap();
    let client = sql_client(&url).await;
    let [kept, counted, levels, recount] = statistics_and_recount(&client, "acme").await;
    assert!(!kept.is_empty() && levels.len() == 3, "{kept:?} {levels:?}");
    assert_eq!((&kept, &levels), (&counted, &recount));

    // docs/a changes, docs/b goes, docs/c comes: the statistics follow, by the change only.
    let second = merged(vec![
        page("acme", "docs/a", "настройка фильтрации рекламы в приложении"),
        page("acme", "docs/c", "обновление программы до новой версии"),
    ]);
    writer.replace_source(&scope, batch(second, BTreeMap::new())).await.unwrap();
    let [kept, counted, levels, recount] = statistics_and_recount(&client, "acme").await;
    assert_eq!((&kept, &levels), (&counted, &recount));
    assert!(!kept.iter().any(|line| line.contains("сертификат")), "docs/b's terms are gone: {kept:?}");
    let orphans: i64 = client
        .query_one(
            "SELECT count(*) FROM retr_terms t WHERE NOT EXISTS \
             (SELECT 1 FROM retr_records r WHERE r.tenant = t.tenant AND r.rid = t.rid)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(orphans, 0);
    // The other tenant's statistics are its own.
    let [kept, counted, _, _] = statistics_and_recount(&client, "beta").await;
    assert_eq!(kept, counted);
    assert!(kept.iter().any(|line| line.ends_with(":сертификат:1")), "{kept:?}");

    // Searched in the database: the new page is found, the removed one is not, beta stays apart.
    let (state, _) = in_database_state(settings(&url)).await;
    for (query, found, absent) in [("обновление программы", "docs/c", "docs/b"), ("сертификат", "", "docs/b")]
    {
        let body = json!({"query": query, "tenant_id": "acme"}).to_string();
        let (status, answer) = send(&state, "POST", "/internal/retrieval/search", Some(&body)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let hits = answer["hits"].to_string();
        assert!(hits.contains(found) && !hits.contains(absent) && !hits.contains("docs/x"), "{query}: {answer}");
    }
}

#[cfg_attr(
    retr_test_missing = "postgres",
    ignore = "needs a PostgreSQL server: set RETR_TEST_POSTGRES_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn searched_in_the_database_sql_text_is_data() {
    let url = postgres_url();
    let url = fresh_database(&url).await;
    let writer = PostgresSourceWriter::new(PostgresIndex::for_ingest(&settings(&url).postgres()).unwrap(), "test");
    let scope = SourceScope { tenant_id: "acme".into(), source_name: "docs".into() };
    writer
        .replace_source(&scope, batch(page("acme", "docs/a", "SELECT * FROM retr_tenants; настройка"), BTreeMap::new()))
        .await
        .unwrap();
    let (state, _) = in_database_state(settings(&url)).await;
    for (body, hits) in [
        (json!({"query": "'; DROP TABLE retr_records; --", "tenant_id": "acme"}), None),
        (json!({"query": "настройка", "tenant_id": "acme", "filters": {"product": "' OR 1=1 --"}}), Some(0)),
        (json!({"query": "настройка", "tenant_id": "acme", "doc_ids": ["docs/a' OR '1'='1"]}), Some(0)),
        (json!({"query": "настройка", "tenant_id": "acme", "filters": {"tags": ["x' OR '1'='1"]}}), Some(0)),
        (json!({"query": "настройка", "tenant_id": "acme"}), Some(1)),
    ] {
        let (status, response) = send(&state, "POST", "/internal/retrieval/search", Some(&body.to_string())).await;
        assert_eq!(status, StatusCode::OK, "{body}: {response}");
        if let Some(hits) = hits {
            assert_eq!(response["hits"].as_array().map(Vec::len), Some(hits), "{body}: {response}");
        }
    }
    let client = sql_client(&url).await;
    let count: i64 = client.query_one("SELECT count(*) FROM retr_records", &[]).await.unwrap().get(0);
    assert_eq!(count, 3, "nothing ran");
}

#[cfg_attr(
    any(retr_test_missing = "postgres", retr_test_missing = "postgres_standby"),
    ignore = "needs a PostgreSQL primary and standby: set RETR_TEST_POSTGRES_URL and RETR_TEST_POSTGRES_STANDBY_URL (scripts/test.sh starts them)"
)]
#[tokio::test]
async fn searched_in_the_database_with_the_primary_gone_searches_read_the_standby_flagged() {
    let (settings, primary_switch, standby_switch) = fixture_behind_switchable_servers().await;
    let (state, index) = in_database_state(settings).await;
    let search = json!({"query": "Подключение Android SDK через Gradle", "tenant_id": "t1"}).to_string();
    let (status, fresh) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::OK, "{fresh}");
    assert!(!fresh["hits"].as_array().unwrap().is_empty());
    assert!(!fresh["degradations"].to_string().contains("backend_stale"), "{fresh}");

    // The primary goes away: searches read the standby, and every answer says so.
    primary_switch.store(false, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["hits"], fresh["hits"]);
    let degradations = body["degradations"].to_string();
    assert!(degradations.contains("backend_stale") && degradations.contains("standby 1"), "{body}");
    index.poll().await.unwrap();
    let (status, health) = send(&state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["replica"]["source"], "standby 1");

    // Both gone: a clear 503 with a JSON error, quickly.
    standby_switch.store(false, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "backend_unavailable");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

    // The primary is back: answers are current again.
    primary_switch.store(true, Ordering::Release);
    standby_switch.store(true, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = send(&state, "POST", "/internal/retrieval/search", Some(&search)).await;
        if status == StatusCode::OK && !body["degradations"].to_string().contains("backend_stale") {
            assert_eq!(body["hits"], fresh["hits"]);
            break;
        }
        assert!(Instant::now() < deadline, "still flagged: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
