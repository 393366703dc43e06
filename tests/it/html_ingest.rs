//! HTML ingest end to end: a tree of built pages (MkDocs, with bad files beside them) ingested and
//! searched, and a small site crawled over HTTP on loopback (robots.txt, redirects, limits).

use crate::common::fake_http::{FakeResponse, FakeServer};
use crate::common::send;
use retrieval_engine::{read_snapshot_file, InMemoryIndex, PseudoEmbedder};
use retrieval_service::config::Settings;
use retrieval_service::ingest::{run_ingest, IngestArgs};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

const SEARCH: &str = "/internal/retrieval/search";

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn settings(dir: &Path) -> Settings {
    Settings {
        embedding_cache_path: Some(dir.join("cache/embeddings.jsonl")),
        mapping_path: dir.join("no-such-mapping.yaml"),
        ..Settings::default()
    }
}

#[tokio::test]
async fn a_built_site_is_ingested_searched_and_its_bad_files_skipped_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/engine/fixtures/html/mkdocs"), &site);
    std::fs::write(site.join("logo.html"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0").unwrap();
    std::fs::write(site.join("latin.html"), b"<main><p>caf\xe9 cr\xe8me</p></main>").unwrap();
    std::fs::write(
        site.join("menu.html"),
        "<nav><a href=\"/a\">A</a><a href=\"/b\">B</a></nav><footer>© 2026</footer>",
    )
    .unwrap();
    let deep = format!("<main>{}<p>x</p></main>", "<div>".repeat(50_000));
    std::fs::write(site.join("deep.html"), deep).unwrap();
    std::fs::write(
        site.join("reset.html"),
        "<html><body><nav aria-label=\"breadcrumb\"><ol><li><a href=\"/\">Главная</a></li>\
         <li><a href=\"/accounts/\">Учётные записи</a></li><li>Сброс пароля</li></ol></nav>\
         <main><h1>Сброс пароля</h1><p>Откройте настройки безопасности.</p></main></body></html>",
    )
    .unwrap();
    let huge = format!("<main><p>{}</p></main>", "слово ".repeat(5_000_000));
    std::fs::write(site.join("huge.html"), huge).unwrap();

    let settings = settings(dir.path());
    let mut args = IngestArgs::new(&site, "docs");
    args.out = Some(dir.path().join("index.json"));
    args.quiet = true;
    let started = std::time::Instant::now();
    let report = run_ingest(&settings, Arc::new(PseudoEmbedder::new(16)), &args).await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "{:?}", started.elapsed());
    assert_eq!(report.docs, 3, "{:?}", report.skipped);
    let reason = |name: &str| {
        report.skipped.iter().find(|note| note.path.ends_with(name)).map(|note| note.reason.clone()).unwrap_or_default()
    };
    assert!(reason("404.html").contains("error page"), "{}", reason("404.html"));
    assert!(reason("logo.html").contains("binary"), "{}", reason("logo.html"));
    assert!(reason("latin.html").contains("not valid UTF-8"), "{}", reason("latin.html"));
    assert!(reason("menu.html").contains("no main content"), "{}", reason("menu.html"));
    assert!(reason("deep.html").contains("nested deeper"), "{}", reason("deep.html"));
    assert!(reason("huge.html").contains("larger than"), "{}", reason("huge.html"));

    let snapshot = read_snapshot_file(&dir.path().join("index.json")).unwrap();
    let page = snapshot.docs.iter().find(|d| d.meta.source == "guide/settings/index.html").unwrap();
    assert_eq!(page.meta.title, "Настройки агента");
    assert_eq!(page.meta.url, "https://docs.example.org/agent/guide/settings/");
    assert_eq!(page.meta.section, "guide");
    // The breadcrumb trail is every level's metadata, and names the area of a page whose path names none.
    let trail = ["Главная", "Учётные записи", "Сброс пароля"];
    let reset: Vec<_> = [&snapshot.docs, &snapshot.sections, &snapshot.chunks]
        .into_iter()
        .flatten()
        .filter(|record| record.meta.source == "reset.html")
        .collect();
    assert_eq!(reset.len(), 3);
    assert!(reset.iter().all(|record| record.meta.breadcrumbs == trail), "{:?}", reset[0].meta);
    assert_eq!(reset[0].meta.section, "Учётные записи");
    assert!(page.meta.breadcrumbs.is_empty());
    for record in snapshot.chunks.iter().chain(&snapshot.sections) {
        for chrome in ["Documentation built with", "Keyboard Shortcuts", "Agent Docs", "Previous", "Next"] {
            assert!(!record.text.contains(chrome), "{chrome:?} in {}", record.text);
        }
    }

    let index = Arc::new(InMemoryIndex::from_file(dir.path().join("index.json")));
    let state = retrieval_service::startup::state_with(settings, index, Arc::new(PseudoEmbedder::new(16)));
    let query = json!({"query": "rotate_days сколько дней хранить журналы", "tenant_id": "docs"}).to_string();
    let (status, body) = send(&state, "POST", SEARCH, Some(&query)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["hits"][0]["doc_id"], "site/guide/settings/index.html", "{body}");
    assert_eq!(body["hits"][0]["metadata"]["heading"], "Ротация журналов", "{body}");
}

fn page(title: &str, body: &str) -> FakeResponse {
    FakeResponse::new(
        200,
        format!(
            "<!doctype html><html><head><title>{title} | Help</title></head><body>\
             <nav><a href=\"/docs/\">Home</a> <a href=\"/docs/a.html\">A</a> <a href=\"/private/x.html\">X</a></nav>\
             <main><h1>{title}</h1>{body}</main><footer>© Help centre</footer></body></html>"
        ),
    )
    .with_header("content-type", "text/html; charset=utf-8")
}

#[tokio::test]
async fn a_site_is_crawled_within_its_host_robots_and_limits() {
    let server = FakeServer::start_with(|request, _| match request.path.as_str() {
        "/robots.txt" => FakeResponse::new(200, "User-agent: *\nDisallow: /private/\n"),
        "/sitemap.xml" => FakeResponse::new(
            200,
            "<?xml version=\"1.0\"?><urlset><url><loc>http://HOST/docs/from-sitemap.html</loc></url></urlset>",
        ),
        "/docs/" => page(
            "Главная",
            "<p>Начните с <a href=\"a.html\">раздела A</a> и <a href=\"loop-1\">старой ссылки</a>, \
             <a href=\"logo.html\">логотипа</a>, <a href=\"moved\">переезда</a> и \
             <a href=\"https://elsewhere.example/\">чужого сайта</a>.</p>",
        ),
        "/docs/a.html" => page("Раздел A", "<p>Раздел A объясняет ротацию журналов агента.</p>"),
        "/docs/loop-1" => FakeResponse::new(302, "").with_header("location", "/docs/loop-2"),
        "/docs/loop-2" => FakeResponse::new(301, "").with_header("location", "/docs/loop-1"),
        "/docs/moved" => FakeResponse::new(301, "").with_header("location", "/docs/a.html"),
        "/docs/logo.html" => FakeResponse::new(200, "\u{0}\u{0}PNG").with_header("content-type", "image/png"),
        "/private/x.html" => page("Секрет", "<p>Не для робота.</p>"),
        _ => FakeResponse::new(404, "not found"),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(dir.path());
    let mut args = IngestArgs::new(format!("{}/docs/", server.url()), "help");
    args.out = Some(dir.path().join("index.json"));
    args.quiet = true;
    args.crawl_delay_ms = 0;
    let report = run_ingest(&settings, Arc::new(PseudoEmbedder::new(16)), &args).await.unwrap();

    let snapshot = read_snapshot_file(&dir.path().join("index.json")).unwrap();
    let mut sources: Vec<&str> = snapshot.docs.iter().map(|d| d.meta.source.as_str()).collect();
    sources.sort_unstable();
    assert_eq!(sources, ["a.html", "index.html"], "{:?}", report.skipped);
    let a = snapshot.docs.iter().find(|d| d.meta.source == "a.html").unwrap();
    assert_eq!(a.meta.title, "Раздел A");
    assert_eq!(a.meta.url, format!("{}/docs/a.html", server.url()));
    assert!(snapshot.chunks.iter().all(|c| !c.text.contains("Help centre") && !c.text.contains("Home")));
    let reason = |part: &str| {
        report.skipped.iter().find(|note| note.path.contains(part)).map(|note| note.reason.clone()).unwrap_or_default()
    };
    assert!(reason("/private/x.html").contains("robots.txt"), "{:?}", report.skipped);
    assert!(reason("/docs/loop-1").contains("redirect loop"), "{:?}", report.skipped);
    assert!(reason("/docs/logo.html").contains("not an HTML page"), "{:?}", report.skipped);
    // The sitemap's page names another host (HOST): not fetched.
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert!(!paths.iter().any(|p| p.starts_with("/private/")), "{paths:?}");
    assert_eq!(paths.iter().filter(|p| p.as_str() == "/docs/a.html").count(), 1, "{paths:?}");

    // Bounded by depth: the start page alone.
    let mut start_only = args.clone();
    start_only.crawl_max_depth = 0;
    start_only.out = Some(dir.path().join("start.json"));
    let report = run_ingest(&settings, Arc::new(PseudoEmbedder::new(16)), &start_only).await.unwrap();
    assert_eq!(report.docs, 1, "{:?}", report.skipped);

    // Bounded: one page at most.
    let mut one = args.clone();
    one.crawl_max_pages = 1;
    one.out = Some(dir.path().join("one.json"));
    let report = run_ingest(&settings, Arc::new(PseudoEmbedder::new(16)), &one).await.unwrap();
    assert_eq!(report.docs, 1);
    assert!(report.warnings.iter().any(|note| note.reason.contains("page limit of 1")), "{:?}", report.warnings);
}

#[tokio::test]
async fn a_crawl_of_a_site_whose_robots_txt_fails_crawls_nothing() {
    let server = FakeServer::start_with(|_, _| FakeResponse::new(503, "down")).await;
    let dir = tempfile::tempdir().unwrap();
    let mut args = IngestArgs::new(format!("{}/", server.url()), "help");
    args.out = Some(dir.path().join("index.json"));
    args.quiet = true;
    let error = run_ingest(&settings(dir.path()), Arc::new(PseudoEmbedder::new(16)), &args).await.unwrap_err();
    assert!(error.to_string().contains("robots.txt unavailable"), "{error}");
    assert_eq!(server.request_count(), 1);
}
