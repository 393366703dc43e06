//! Cascade rules on the fixture corpus through `SearchService`.

use super::settings::RuntimeSettings;
use super::*;
use crate::embed::PseudoEmbedder;
use crate::fixtures;
use crate::index::{InMemoryIndex, VectorIndex};
use crate::model::Level;
use crate::router::RouterMode;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn service(adjust: impl FnOnce(&mut RuntimeSettings)) -> Arc<SearchService> {
    let index = Arc::new(InMemoryIndex::from_snapshot(fixtures::snapshot()).unwrap());
    let service = fixtures::served(index);
    adjust(&mut service.runtime.write().unwrap());
    Arc::new(service)
}

fn request(query: &str, tenant: &str) -> SearchRequest {
    SearchRequest { include_steps: true, ..SearchRequest::new(TenantId::new(tenant).unwrap(), query) }
}

fn all_tenants(response: &SearchResponse, index: &fixtures::Tenants) -> Vec<String> {
    let steps = response.steps.as_ref().unwrap();
    response
        .hits
        .iter()
        .chain(&steps.docs)
        .chain(&steps.sections)
        .chain(&steps.chunks)
        .map(|hit| index.tenant_of(&hit.doc_id))
        .collect()
}

#[tokio::test]
async fn tenant_isolation_holds_with_filters_disabled() {
    let service = service(|r| r.enable_filters = false);
    let tenants = fixtures::Tenants::new();
    for query in ["Установка Android SDK секретного продукта Acme", "acme-secret пароль", "Gradle"]
    {
        let mut req = request(query, "t1");
        req.enable_filters = Some(false);
        req.doc_ids = Some(vec!["acme/secret-install".into()]);
        let response = service.search(&req).await.unwrap();
        assert!(all_tenants(&response, &tenants).iter().all(|t| t == "t1"), "{query}: {:?}", response.hits);
        assert!(!response.hits.is_empty());
    }
}

#[tokio::test]
async fn request_filters_apply_when_enabled() {
    let service = service(|_| {});
    let mut req = request("установка", "t1");
    req.filters.tags = vec!["ios".into()];
    let response = service.search(&req).await.unwrap();
    assert!(!response.hits.is_empty());
    assert!(response.hits.iter().all(|h| h.doc_id == "sdk/ios/install"), "{:?}", response.hits);
    let mut req = request("теги", "t1");
    req.filters.section_ids = Some(vec!["docs/admin/tags#s1".into()]);
    let response = service.search(&req).await.unwrap();
    assert_eq!(response.hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), vec!["docs/admin/tags#s1"]);
}

#[tokio::test]
async fn docs_are_padded_to_min_docs() {
    let service = service(|r| {
        r.doc_top_k = 1;
        r.min_docs = 3;
        // Routing would hard-filter this Android SDK query to the one Android doc.
        r.theme_router_mode = RouterMode::None;
    });
    let response = service.search(&request("Подключение Android SDK через Gradle", "t1")).await.unwrap();
    let steps = response.steps.unwrap();
    assert_eq!(steps.docs.len(), 3);
    assert_eq!(steps.padded_doc_ids.len(), 2);
    assert_eq!(steps.docs[0].doc_id, "sdk/android/install");
    assert!(!steps.padded_doc_ids.contains(&"sdk/android/install".to_string()));
}

#[tokio::test]
async fn section_hits_win_and_are_capped_by_max_results() {
    let service = service(|r| r.min_docs = 0);
    let mut req = request("теги операторов и администратора", "t1");
    req.max_results = Some(1);
    let response = service.search(&req).await.unwrap();
    assert_eq!(response.hits.len(), 1);
    assert_eq!(response.hits[0].level, Level::Section);
    assert_eq!(response.hits_level, "section");
    req.max_results = Some(500);
    let response = service.search(&req).await.unwrap();
    assert!(response.hits.len() <= 50);
}

#[tokio::test]
async fn chunk_hits_when_no_section_and_topk_per_doc_caps_them() {
    for per_doc in [1, 2, 3] {
        let service = service(|r| r.topk_per_doc = per_doc);
        let mut req = request("лицензия продлевается перенести", "t1");
        req.doc_ids = Some(vec!["docs/faq/flat".into()]);
        let response = service.search(&req).await.unwrap();
        assert_eq!(response.hits_level, "chunk");
        assert_eq!(response.hits.len(), per_doc);
        assert!(response.hits.iter().all(|h| h.doc_id == "docs/faq/flat" && h.chunk_id.is_some()));
    }
    let service = service(|r| r.topk_per_doc = 3);
    let mut req = request("лицензия", "t1");
    req.doc_ids = Some(vec!["docs/faq/flat".into()]);
    req.max_results = Some(2);
    assert_eq!(service.search(&req).await.unwrap().hits.len(), 2, "max_results caps chunk hits");
}

#[tokio::test]
async fn hits_are_the_same_whether_or_not_steps_are_asked_for() {
    // Without `include_steps` the chunk step runs only when no section answers; the hits, chunk
    // hits included, must not depend on it.
    let service = service(|_| {});
    let cases: [(&str, Option<Vec<String>>); 3] = [
        ("теги операторов и администратора", None),
        ("Подключение Android SDK через Gradle", None),
        ("лицензия продлевается перенести", Some(vec!["docs/faq/flat".into()])),
    ];
    for (query, doc_ids) in cases {
        let mut with_steps = SearchRequest { explain: true, ..request(query, "t1") };
        with_steps.doc_ids = doc_ids;
        let without_steps = SearchRequest { include_steps: false, ..with_steps.clone() };
        let full = service.search(&with_steps).await.unwrap();
        let bare = service.search(&without_steps).await.unwrap();
        assert!(!full.hits.is_empty(), "{query}");
        assert!(!full.steps.as_ref().unwrap().chunks.is_empty(), "{query}: the chunk step ran for the steps");
        assert!(bare.steps.is_none());
        assert_eq!(bare.hits_level, full.hits_level, "{query}");
        let hits = |response: &SearchResponse| serde_json::to_value(&response.hits).unwrap();
        assert_eq!(hits(&bare), hits(&full), "{query}");
    }
}

#[tokio::test]
async fn min_score_drops_hits_on_the_normalised_fused_score() {
    let service = service(|_| {});
    let response = service.search(&request("Отчёт выгружается в CSV", "t1")).await.unwrap();
    let steps = response.steps.unwrap();
    assert!(steps.sections.iter().any(|s| s.score > 0.0));
    service.runtime.write().unwrap().min_score = 0.99;
    let response = service.search(&request("Отчёт выгружается в CSV", "t1")).await.unwrap();
    let steps = response.steps.unwrap();
    let explained =
        service.search(&SearchRequest { explain: true, ..request("Отчёт выгружается в CSV", "t1") }).await.unwrap();
    for hit in explained.steps.unwrap().sections.iter().chain(&steps.sections) {
        if let Some(explain) = &hit.explain {
            assert!(explain["fused_normalized"].as_f64().unwrap() >= 0.99, "{explain}");
        }
    }
}

#[tokio::test]
async fn text_fallback_finds_substrings_when_ranking_finds_nothing() {
    let service = service(|_| {});
    // "arget" is no word of the corpus, so no ranker matches it; it is a substring of "targetSdk".
    let response = service.search_with_mode(&request("arget", "t1"), ranking::RankingMode::Lexical).await.unwrap();
    assert!(response.steps.as_ref().unwrap().fallback_used);
    assert_eq!(response.hits_level, "chunk");
    assert_eq!(response.hits[0].chunk_id.as_deref(), Some("sdk/android/install#s1-c2"));
    let response =
        service.search_with_mode(&request("несуществующееслово", "t1"), ranking::RankingMode::Lexical).await.unwrap();
    assert!(response.hits.is_empty());
    assert_eq!(response.hits_level, "none");
}

#[tokio::test]
async fn bad_requests_are_rejected_with_the_field() {
    let service = service(|_| {});
    let cases: Vec<(SearchRequest, &str)> = vec![
        (request("   ", "t1"), "query"),
        (request(&"я".repeat(2001), "t1"), "query"),
        (SearchRequest { max_results: Some(0), ..request("x", "t1") }, "max_results"),
        (SearchRequest { query_embedding: Some(vec![0.1; 3]), ..request("x", "t1") }, "query_embedding"),
    ];
    for (req, field) in cases {
        match service.search(&req).await {
            Err(SearchError::InvalidRequest { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: expected InvalidRequest, got {other:?}"),
        }
    }
    assert!(matches!(service.search(&request("x", "nobody")).await, Err(SearchError::UnknownTenant(_))));
    // A tenant id is checked where it is parsed: no search can be asked for a malformed one.
    for bad in ["", "t1/../t2"] {
        assert!(matches!(TenantId::new(bad), Err(SearchError::InvalidRequest { field, .. }) if field == "tenant_id"));
    }
}

#[tokio::test]
async fn precomputed_query_embedding_skips_the_embedder() {
    let service = service(|_| {});
    let vector = PseudoEmbedder::new(fixtures::DIMENSION).embed_one("CocoaPods Podfile Xcode");
    let mut req = request("совсем другой текст", "t1");
    req.query_embedding = Some(vector);
    let response = service.search(&req).await.unwrap();
    assert_eq!(response.hits[0].doc_id, "sdk/ios/install");
}

#[tokio::test]
async fn window_returns_ordered_neighbours_for_the_tenant_only() {
    let service = service(|_| {});
    let query = |tenant: &str, doc: &str, anchor: &str, before, after| WindowQuery {
        tenant_id: TenantId::new(tenant).unwrap(),
        doc_id: doc.into(),
        anchor_chunk_id: anchor.into(),
        before,
        after,
    };
    let chunks = service.window(&query("t1", "sdk/android/install", "sdk/android/install#s1-c2", 1, 1)).await.unwrap();
    let ids: Vec<&str> = chunks.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec!["sdk/android/install#s1-c1", "sdk/android/install#s1-c2", "sdk/android/install#s2-c1"]);
    let chunks = service.window(&query("t1", "sdk/android/install", "sdk/android/install#s1-c1", 5, 0)).await.unwrap();
    assert_eq!(chunks.len(), 1);
    assert!(matches!(
        service.window(&query("t1", "acme/secret-install", "acme/secret-install#s1-c1", 1, 1)).await,
        Err(SearchError::NotFound(_))
    ));
    assert!(matches!(
        service.window(&query("t1", "sdk/android/install", "nope", 1, 1)).await,
        Err(SearchError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_request_may_override_the_router_mode_and_the_top_k_knobs_for_itself_only() {
    let service = service(|_| {});
    let wide = service.search(&request("Gradle SDK теги отчёт", "t1")).await.unwrap();
    let narrow = SearchRequest { doc_top_k: Some(1), ..request("Gradle SDK теги отчёт", "t1") };
    let narrow = service.search(&narrow).await.unwrap();
    // The gate keeps one doc, padded to `min_docs` (3): fewer than the default gate lets through.
    let gated = |response: &SearchResponse| response.steps.as_ref().unwrap().docs.len();
    assert_eq!(gated(&narrow), 3, "{:?}", narrow.steps);
    assert!(gated(&wide) > 3, "{:?}", wide.steps);
    let unrouted = SearchRequest { router_mode: Some(RouterMode::None), ..request("Gradle SDK", "t1") };
    assert_eq!(service.search(&unrouted).await.unwrap().routing.result.mode_used, RouterMode::None);
    assert_eq!(service.runtime_settings(), fixtures::default_runtime(), "the shared settings never change");
    let bad = [
        (SearchRequest { doc_top_k: Some(0), ..request("x", "t1") }, "doc_top_k"),
        (SearchRequest { section_top_k: Some(1001), ..request("x", "t1") }, "section_top_k"),
        (SearchRequest { topk_per_doc: Some(-3), ..request("x", "t1") }, "topk_per_doc"),
        (SearchRequest { router_mode: Some(RouterMode::Llm), ..request("x", "t1") }, "router_mode"),
    ];
    for (req, field) in bad {
        match service.search(&req).await {
            Err(SearchError::InvalidRequest { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: expected InvalidRequest, got {other:?}"),
        }
    }
}

/// Two tenants whose pages sit in two folders each and that no theme of the themes file
/// describes: the router learns each tenant's areas from that tenant's pages only.
fn two_area_snapshot() -> crate::model::Snapshot {
    snapshot_of_pages(&TWO_AREA_PAGES)
}

/// (tenant, area, title, text) of `two_area_snapshot`'s pages.
const TWO_AREA_PAGES: [(&str, &str, &str, &str); 12] = [
    ("vdi", "broker", "Установка брокера", "Брокер ставится на Astra Linux, пулы виртуальных машин брокера."),
    ("vdi", "broker", "Пулы брокера", "Пулы виртуальных машин брокера и шаблоны Astra."),
    ("vdi", "broker", "Обновление брокера", "Обновление брокера на Astra Linux из репозитория."),
    ("vdi", "connect", "Установка клиента", "Клиент Connect ставится на Windows и тонкий клиент."),
    ("vdi", "connect", "Настройки клиента", "Клиент Connect: настройки подключения к рабочему столу, freerdp."),
    ("vdi", "connect", "Обновление клиента", "Обновление клиента Connect на Windows через freerdp."),
    ("other", "alpha", "Альфа один", "Секретслово альфа процессор альфа."),
    ("other", "alpha", "Альфа два", "Секретслово альфа процессор."),
    ("other", "alpha", "Альфа три", "Секретслово альфа процессор альфа."),
    ("other", "beta", "Бета один", "Бета модуль."),
    ("other", "beta", "Бета два", "Бета модуль бета."),
    ("other", "beta", "Бета три", "Бета модуль."),
];

/// A doc, a section and a chunk per page, each page in its area's folder.
fn snapshot_of_pages(pages: &[(&str, &str, &str, &str)]) -> crate::model::Snapshot {
    use crate::model::{Metadata, Record, Snapshot};
    let embedder = PseudoEmbedder::new(fixtures::DIMENSION);
    let mut snapshot = Snapshot {
        format_version: Snapshot::FORMAT_VERSION,
        embedding_model: PseudoEmbedder::MODEL_NAME.into(),
        dimension: fixtures::DIMENSION,
        ..Snapshot::default()
    };
    for (number, &(tenant, area, title, text)) in pages.iter().enumerate() {
        let doc_id = format!("{area}/page{number}.md");
        let meta = Metadata {
            tenant_id: tenant.into(),
            doc_id: doc_id.as_str().into(),
            title: title.into(),
            source: doc_id.as_str().into(),
            domain: "external_site".into(),
            section: area.into(),
            ..Metadata::default()
        };
        snapshot.docs.push(Record {
            id: doc_id.clone(),
            embedding: embedder.embed_one(title),
            text: title.into(),
            meta: meta.clone(),
        });
        let section_id = format!("{doc_id}#s1");
        let section_meta = Metadata {
            section_id: Some(section_id.clone()),
            heading: title.into(),
            heading_path: vec![title.into()],
            ..meta
        };
        snapshot.sections.push(Record {
            id: section_id.clone(),
            embedding: embedder.embed_one(text),
            text: text.into(),
            meta: section_meta.clone(),
        });
        let chunk_id = format!("{section_id}-c1");
        snapshot.chunks.push(Record {
            id: chunk_id.clone(),
            embedding: embedder.embed_one(text),
            text: text.into(),
            meta: Metadata { chunk_id: Some(chunk_id), ..section_meta },
        });
    }
    snapshot
}

#[tokio::test]
async fn searches_arriving_together_after_a_load_learn_a_tenants_themes_and_spellings_once() {
    let index = Arc::new(InMemoryIndex::from_snapshot(two_area_snapshot()).unwrap());
    let service = &fixtures::served(index.clone());
    let (vdi, other) = (TenantId::new("vdi").unwrap(), TenantId::new("other").unwrap());
    let tuning = service.tuning();
    let source = index.pin().await.unwrap();
    let learn = |tenant| service.learned.get(&tuning, &source, tenant);
    let (first, second, third) = tokio::join!(learn(&vdi), learn(&vdi), learn(&vdi));
    assert!(Arc::ptr_eq(&first, &second) && Arc::ptr_eq(&first, &third), "learned more than once");
    assert!(first.spellings.spellings() > 0, "nothing learned from the tenant's Latin words");
    assert!(first.themes.iter().any(|theme| theme.id == "area_broker"), "no theme learned from the tenant's areas");
    let theirs = learn(&other).await;
    assert!(!Arc::ptr_eq(&first, &theirs), "another tenant's learning shared");
    assert!(!Arc::ptr_eq(&first.themes, &theirs.themes) && !Arc::ptr_eq(&first.spellings, &theirs.spellings));
    assert!(Arc::ptr_eq(&first, &learn(&vdi).await), "learned again at the same version");
}

#[tokio::test]
async fn after_a_write_the_last_learning_answers_while_the_new_one_is_learned() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("index.json");
    crate::index::memory::write_snapshot_file(&path, &two_area_snapshot()).unwrap();
    let index = Arc::new(InMemoryIndex::from_file(&path));
    let service = fixtures::served(index.clone());
    let (tuning, vdi) = (service.tuning(), TenantId::new("vdi").unwrap());
    let before_write = index.pin().await.unwrap();
    let learned = service.learned.get(&tuning, &before_write, &vdi).await;

    let mut pages = TWO_AREA_PAGES.to_vec();
    pages.push(("vdi", "broker", "Кластер брокера", "Брокер в кластере kubernetes и keycloak."));
    crate::index::memory::write_snapshot_file(&path, &snapshot_of_pages(&pages)).unwrap();
    assert!(index.reload_if_changed());
    let after_write = index.pin().await.unwrap();
    assert_ne!(after_write.version(), before_write.version());
    let meanwhile = service.learned.get(&tuning, &after_write, &vdi).await;
    assert!(Arc::ptr_eq(&learned, &meanwhile), "the search waited for the new version's learning");

    let deadline = Instant::now() + Duration::from_secs(30);
    let relearned = loop {
        let now = service.learned.get(&tuning, &after_write, &vdi).await;
        if !Arc::ptr_eq(&now, &learned) {
            break now;
        }
        assert!(Instant::now() < deadline, "the new version was never learned");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(
        relearned.spellings.spellings() > learned.spellings.spellings(),
        "the written page's Latin words were not learned: {} then {}",
        learned.spellings.spellings(),
        relearned.spellings.spellings()
    );
    assert!(Arc::ptr_eq(&relearned, &service.learned.get(&tuning, &after_write, &vdi).await));
}

#[tokio::test]
async fn a_tenant_without_written_themes_is_routed_over_themes_learned_from_its_own_pages() {
    let index = Arc::new(InMemoryIndex::from_snapshot(two_area_snapshot()).unwrap());
    let service = &fixtures::served(index.clone());
    let vdi = TenantId::new("vdi").unwrap();
    let source = index.pin().await.unwrap();
    let themes = service.themes_for(&source, &vdi).await;
    let mut ids: Vec<&str> = themes.iter().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["area_broker", "area_connect"]);
    let every_keyword: Vec<&String> = themes.iter().flat_map(|t| &t.keywords).collect();
    assert!(
        !every_keyword.iter().any(|k| k.contains("секретслово") || k.contains("альфа")),
        "another tenant's words: {every_keyword:?}"
    );
    let other = service.themes_for(&source, &TenantId::new("other").unwrap()).await;
    assert!(other.iter().all(|t| t.id == "area_alpha" || t.id == "area_beta"));

    let mut request = request("как обновить брокер на астре", "vdi");
    request.router_mode = Some(RouterMode::Heuristic);
    let response = service.search(&request).await.unwrap();
    assert_eq!(response.routing.result.primary_theme.as_deref(), Some("area_broker"));
    assert_eq!(response.hits[0].metadata.theme_label.as_deref(), Some("area_broker"));
    assert!(response.hits.iter().all(|hit| index_tenant_is(hit, "vdi")));
    assert!((0.0..=1.0).contains(&response.confidence) && response.confidence > 0.0);
}

fn index_tenant_is(hit: &RetrievalHit, tenant: &str) -> bool {
    let vdi_areas = ["broker/", "connect/"];
    (tenant == "vdi") == vdi_areas.iter().any(|area| hit.doc_id.starts_with(area))
}

/// With nothing loaded there is no source to pin: a bad request is still refused for what it is
/// (422) before the index is asked, and a good one gets the index's own reason (no snapshot).
#[tokio::test]
async fn without_a_loaded_index_a_bad_request_is_refused_first_and_a_good_one_gets_the_reason() {
    let directory = tempfile::tempdir().unwrap();
    let index = Arc::new(InMemoryIndex::from_file(directory.path().join("missing.json")));
    let service = fixtures::served(index);
    let blank = service.search(&request("   ", "t1")).await.unwrap_err();
    assert!(matches!(blank, SearchError::InvalidRequest { .. }), "{blank:?}");
    let unloaded = service.search(&request("установка SDK", "t1")).await.unwrap_err();
    match unloaded {
        SearchError::Index(error) => assert_eq!(error.kind, crate::index::IndexErrorKind::NotFound, "{error:?}"),
        other => panic!("expected the index's reason, got {other:?}"),
    }
}
