//! Ingestion behaviour: parsing, mapping into all three levels, idempotent re-ingest, deletion,
//! tenant/source isolation, bad input, the embedding cache, the demo corpus and `themes suggest`.

use async_trait::async_trait;
use retrieval_engine::{
    ingest::{demo_snapshot, parse_markdown, suggest_themes, IngestError, MappingRules, DEMO_PAGES},
    read_snapshot_file, EmbedError, EmbedErrorKind, Embedder, InputKind, Level, LoadedIndex, PseudoEmbedder, Record,
    RecordFilter, Snapshot,
};
use retrieval_service::config::Settings;
use retrieval_service::ingest::{run_ingest, IngestArgs, IngestBackend};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Pseudo vectors, but counted and not flagged as pseudo (so the persistent cache is used).
struct CountingEmbedder {
    inner: PseudoEmbedder,
    model: String,
    calls: AtomicUsize,
    texts: AtomicUsize,
    fail: bool,
}

impl CountingEmbedder {
    fn new(dimension: usize) -> Arc<Self> {
        Arc::new(Self {
            inner: PseudoEmbedder::new(dimension),
            model: format!("counting-{dimension}"),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            fail: false,
        })
    }
    fn failing() -> Arc<Self> {
        Arc::new(Self {
            inner: PseudoEmbedder::new(16),
            model: "counting-16".into(),
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            fail: true,
        })
    }
}

#[async_trait]
impl Embedder for CountingEmbedder {
    async fn embed(&self, texts: &[String], kind: InputKind) -> Result<Vec<Vec<f32>>, retrieval_engine::EmbedError> {
        assert_eq!(kind, InputKind::Passage);
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        if self.fail {
            return Err(EmbedError::new(EmbedErrorKind::Unavailable, "embedding server down"));
        }
        self.inner.embed(texts, kind).await
    }
    fn model_name(&self) -> &str {
        &self.model
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    settings: Settings,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            embedding_cache_path: Some(dir.path().join("cache/embeddings.jsonl")),
            mapping_path: dir.path().join("no-such-mapping.yaml"),
            embedding_batch_size: 4,
            ingest_embedding_batch_size: 4,
            ..Settings::default()
        };
        Self { dir, settings }
    }
    fn tree(&self) -> PathBuf {
        self.dir.path().join("site")
    }
    fn snapshot_path(&self) -> PathBuf {
        self.dir.path().join("out/snapshot.json")
    }
    fn write(&self, relative: &str, content: &str) {
        let path = self.tree().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    fn args(&self, tenant: &str) -> IngestArgs {
        IngestArgs { out: Some(self.snapshot_path()), quiet: true, ..IngestArgs::new(self.tree(), tenant) }
    }
    fn snapshot(&self) -> Snapshot {
        read_snapshot_file(&self.snapshot_path()).unwrap()
    }
}

const ADMIN_TAGS: &str = "---\ntitle: Настройка обязательных тегов\ndescription: Администратор включает обязательные теги.\ntags: [теги]\n---\n\nВступление про теги.\n\n## Группы тегов\n\nГруппа тегов бывает обязательной.\n\n### Параметры\n\nПараметр «Обязательная» запрещает закрыть чат без тега.\n";
const AGENT_CHATS: &str =
    "---\ntitle: Работа с чатами\n---\n\nОператор ведёт чаты.\n\n## Закрытие\n\nПеред закрытием поставьте тег.\n";
const SDK_INSTALL: &str = "# Установка SDK\n\nДобавьте зависимость в gradle.\n";

fn all_records(snapshot: &Snapshot) -> impl Iterator<Item = &Record> {
    snapshot.docs.iter().chain(&snapshot.sections).chain(&snapshot.chunks)
}

fn ids(snapshot: &Snapshot, tenant: &str) -> Vec<String> {
    let mut ids: Vec<String> =
        all_records(snapshot).filter(|r| r.meta.tenant_id == tenant).map(|r| r.id.clone()).collect();
    ids.sort();
    ids
}

#[test]
fn markdown_noise_is_stripped_and_structure_kept() {
    let page = "---\ntitle: Страница\ntags:\n  - label: Теги\n  - простой\n---\nimport Tabs from '@theme/Tabs';\nimport {\n  A,\n  B,\n} from './x';\nexport const meta = {a: 1};\n\n<!-- скрытый\nкомментарий -->\n:::info Важно\nТекст <b>внутри</b> замечания.\n:::\n\nАбзац со [ссылкой](https://x.ru) и ![картинкой](a.png).\n\n## Код\n\n```bash\n# не заголовок\nnpm install pkg\n```\n\n<Tabs>\n<TabItem value=\"a\" label=\"Android\">\n\nВнутри вкладки.\n\n</TabItem>\n</Tabs>\n\n## Таблица\n\n| Поле | Значение |\n|---|:---:|\n| `id` | номер |\n\n#### Мелкий заголовок\n\nТекст под ним.\n";
    let parsed = parse_markdown(page, 3);
    assert_eq!(parsed.front.title, "Страница");
    assert_eq!(parsed.front.tags, vec!["Теги".to_string(), "простой".to_string()]);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let texts: Vec<&str> = parsed.sections.iter().map(|s| s.text.as_str()).collect();
    let all = texts.join("\n");
    for gone in
        ["import", "export", "скрытый", "комментарий", ":::", "<b>", "Tabs", "TabItem", "https://x.ru", "a.png", "|---"]
    {
        assert!(!all.contains(gone), "{gone:?} left in {all}");
    }
    assert!(texts[0].contains("Важно:") && texts[0].contains("Текст внутри замечания."), "{}", texts[0]);
    assert!(texts[0].contains("Абзац со ссылкой и картинкой."), "{}", texts[0]);
    assert_eq!(parsed.sections[1].headings, vec!["Код".to_string()]);
    assert!(texts[1].contains("# не заголовок\nnpm install pkg"), "{}", texts[1]);
    assert!(texts[1].contains("Внутри вкладки."));
    assert_eq!(parsed.sections[2].headings, vec!["Таблица".to_string()]);
    assert!(texts[2].contains("Поле | Значение\nid | номер"), "{}", texts[2]);
    assert!(texts[2].contains("Мелкий заголовок\n\nТекст под ним."), "h4 stays inside its section: {}", texts[2]);
    assert_eq!(parsed.sections.len(), 3);
    assert_eq!(parsed.first_paragraph, "Абзац со ссылкой и картинкой.", "admonitions are not the summary");
}

#[test]
fn heading_paths_nest_and_empty_sections_vanish() {
    let parsed = parse_markdown("# Заголовок\n\n## A\n\n### A1\n\nтекст a1\n\n## B\n\nтекст b\n", 3);
    assert_eq!(parsed.h1.as_deref(), Some("Заголовок"));
    let paths: Vec<Vec<String>> = parsed.sections.iter().map(|s| s.headings.clone()).collect();
    assert_eq!(paths, vec![vec!["A".to_string(), "A1".to_string()], vec!["B".to_string()]]);
    let unclosed = parse_markdown("---\ntitle: x\nТекст без конца front matter\n", 3);
    assert_eq!(unclosed.warnings.len(), 1);
    assert!(unclosed.sections[0].text.contains("Текст без конца"));
}

#[tokio::test]
async fn ingest_maps_topics_onto_all_three_levels() {
    let fixture = Fixture::new();
    fixture.write("docs/admin/required-tags.md", ADMIN_TAGS);
    fixture.write("android/getting-started/installation.md", SDK_INSTALL);
    let args = IngestArgs {
        product: "ЧатЦентр".into(),
        version: "5.2".into(),
        tags: vec!["demo".into()],
        base_url: "https://docs.example".into(),
        ..fixture.args("t1")
    };
    let embedder = CountingEmbedder::new(24);
    let report = run_ingest(&fixture.settings, embedder.clone(), &args).await.unwrap();
    assert_eq!((report.docs, report.sections), (2, 4));
    assert!(report.snapshot_bytes.unwrap() > 0);
    // The version a search can wait for (`min_index_version`) is printed with the report.
    let version = retrieval_engine::file_version(&fixture.snapshot_path());
    assert!(version.is_some() && report.index_version == version, "{:?} vs {version:?}", report.index_version);
    assert!(report.to_string().contains(&format!("index_version {}", version.unwrap())), "{report}");
    let snapshot = fixture.snapshot();
    assert_eq!((snapshot.embedding_model.as_str(), snapshot.dimension), ("counting-24", 24));
    LoadedIndex::build(snapshot.clone()).expect("the written snapshot loads");
    let admin: Vec<&Record> =
        all_records(&snapshot).filter(|r| r.meta.source == "docs/admin/required-tags.md").collect();
    assert_eq!(admin.iter().map(|r| r.level()).collect::<std::collections::HashSet<_>>().len(), 3);
    for record in &admin {
        let m = &record.meta;
        assert_eq!(
            (m.domain.as_str(), m.section.as_str(), m.role.as_str(), m.platform.as_str()),
            ("chatcenter_user_docs", "admin", "administrator", ""),
            "{}",
            record.id
        );
        assert_eq!((m.tenant_id.as_str(), m.doc_id.as_str()), ("t1", "site/docs/admin/required-tags.md"));
        assert_eq!((m.product.as_str(), m.version.as_str()), ("ЧатЦентр", "5.2"));
        assert_eq!(m.tags, vec!["теги".to_string(), "demo".to_string()]);
        assert_eq!(m.url, "https://docs.example/docs/admin/required-tags");
        assert_eq!(m.title, "Настройка обязательных тегов");
        assert_eq!(m.summary, "Администратор включает обязательные теги.");
        assert!(!m.page_type.is_empty() && m.indexed_at.ends_with('Z') && m.content_length > 0);
        assert_eq!(record.embedding.len(), 24);
    }
    let params = snapshot.sections.iter().find(|r| r.meta.heading == "Параметры").unwrap();
    assert_eq!(params.meta.heading_path, vec!["Настройка обязательных тегов", "Группы тегов", "Параметры"]);
    assert!(params.text.starts_with("Настройка обязательных тегов > Группы тегов > Параметры\n"));
    let chunk = snapshot.chunks.iter().find(|r| r.meta.section_id.as_deref() == Some(params.id.as_str())).unwrap();
    assert_eq!((chunk.meta.page, chunk.meta.chunk_index, chunk.id.clone()), (2, 0, format!("{}-c0", params.id)));
    let sdk = all_records(&snapshot).filter(|r| r.meta.source == "android/getting-started/installation.md");
    for record in sdk {
        let m = &record.meta;
        assert_eq!(
            (m.domain.as_str(), m.section.as_str(), m.platform.as_str(), m.role.as_str()),
            ("sdk_docs", "sdk", "android", "integrator")
        );
        assert_eq!((m.title.as_str(), m.page_type.as_str()), ("Установка SDK", "install"));
    }
}

#[tokio::test]
async fn reingest_is_idempotent_and_deleted_pages_disappear() {
    let fixture = Fixture::new();
    fixture.write("docs/admin/required-tags.md", ADMIN_TAGS);
    fixture.write("docs/agent/chats.md", AGENT_CHATS);
    let embedder = CountingEmbedder::new(16);
    run_ingest(&fixture.settings, embedder.clone(), &fixture.args("t1")).await.unwrap();
    let first = ids(&fixture.snapshot(), "t1");
    run_ingest(&fixture.settings, embedder.clone(), &fixture.args("t1")).await.unwrap();
    assert_eq!(ids(&fixture.snapshot(), "t1"), first, "same ids, no duplicates");
    std::fs::remove_file(fixture.tree().join("docs/agent/chats.md")).unwrap();
    let report = run_ingest(&fixture.settings, embedder, &fixture.args("t1")).await.unwrap();
    assert_eq!(report.removed_docs, 1);
    let after = ids(&fixture.snapshot(), "t1");
    assert!(after.iter().all(|id| !id.contains("chats")), "{after:?}");
    assert!(after.iter().any(|id| id.contains("required-tags.md#s1-c0")));
}

#[tokio::test]
async fn other_tenants_and_sources_are_untouched() {
    let fixture = Fixture::new();
    fixture.write("docs/agent/chats.md", AGENT_CHATS);
    let embedder = CountingEmbedder::new(16);
    run_ingest(&fixture.settings, embedder.clone(), &fixture.args("other")).await.unwrap();
    let other_tenant = ids(&fixture.snapshot(), "other");
    let second = IngestArgs { source_name: Some("second".into()), ..fixture.args("t1") };
    run_ingest(&fixture.settings, embedder.clone(), &second).await.unwrap();
    fixture.write("docs/admin/required-tags.md", ADMIN_TAGS);
    std::fs::remove_file(fixture.tree().join("docs/agent/chats.md")).unwrap();
    run_ingest(&fixture.settings, embedder, &fixture.args("t1")).await.unwrap();
    let snapshot = fixture.snapshot();
    assert_eq!(ids(&snapshot, "other"), other_tenant);
    let t1 = ids(&snapshot, "t1");
    assert!(t1.iter().any(|id| id.starts_with("second/docs/agent/chats.md")), "source `second` kept: {t1:?}");
    assert!(t1.iter().any(|id| id.starts_with("site/docs/admin/required-tags.md")));
}

#[tokio::test]
async fn cache_avoids_re_embedding_unchanged_text() {
    let fixture = Fixture::new();
    fixture.write("docs/admin/required-tags.md", ADMIN_TAGS);
    fixture.write("docs/agent/chats.md", AGENT_CHATS);
    let first = CountingEmbedder::new(16);
    let report = run_ingest(&fixture.settings, first.clone(), &fixture.args("t1")).await.unwrap();
    let records = report.docs + report.sections + report.chunks;
    assert!(first.calls.load(Ordering::SeqCst) >= 2, "batch size 4 forces several calls");
    // Section vectors are derived from their chunks' vectors, never embedded.
    assert_eq!(report.derived_vectors, report.sections);
    assert_eq!(report.embedded_texts + report.cache_hits + report.derived_vectors, records);
    let second = CountingEmbedder::new(16);
    let report = run_ingest(&fixture.settings, second.clone(), &fixture.args("t1")).await.unwrap();
    let embedded = records - report.derived_vectors;
    assert_eq!((second.calls.load(Ordering::SeqCst), report.embedding_calls, report.cache_hits), (0, 0, embedded));
    fixture.write("docs/agent/chats.md", &AGENT_CHATS.replace("Оператор ведёт чаты.", "Оператор ведёт много чатов."));
    let third = CountingEmbedder::new(16);
    run_ingest(&fixture.settings, third.clone(), &fixture.args("t1")).await.unwrap();
    // only the changed chunk is embedded again; its section's vector is derived from it
    assert_eq!(third.texts.load(Ordering::SeqCst), 1, "only the changed chunk");
    let no_cache = CountingEmbedder::new(16);
    run_ingest(&fixture.settings, no_cache.clone(), &IngestArgs { no_cache: true, ..fixture.args("t1") })
        .await
        .unwrap();
    assert!(no_cache.texts.load(Ordering::SeqCst) > 3);
}

#[tokio::test]
async fn bad_files_are_skipped_with_their_path() {
    let fixture = Fixture::new();
    fixture.write("docs/agent/chats.md", AGENT_CHATS);
    fixture.write("docs/agent/broken.md", "---\ntitle: [не закрыто\n---\nТекст страницы с битым front matter.\n");
    fixture.write("docs/agent/empty.md", "---\ntitle: Пусто\n---\n\n<!-- ничего -->\n");
    fixture.write("docs/agent/notes.txt", "не markdown");
    std::fs::write(fixture.tree().join("docs/agent/binary.md"), [0u8, 159, 146, 150, 0, 1]).unwrap();
    let report = run_ingest(&fixture.settings, CountingEmbedder::new(8), &fixture.args("t1")).await.unwrap();
    assert_eq!(report.docs, 2, "chats.md and broken.md (with defaults)");
    let skipped: Vec<String> = report.skipped.iter().map(|n| format!("{}: {}", n.path, n.reason)).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped.iter().any(|s| s.contains("binary.md") && s.contains("binary")), "{skipped:?}");
    assert!(skipped.iter().any(|s| s.contains("empty.md") && s.contains("empty")), "{skipped:?}");
    assert!(report.warnings.iter().any(|n| n.path.ends_with("broken.md") && n.reason.contains("front matter")));
    let snapshot = fixture.snapshot();
    assert!(snapshot.docs.iter().any(|d| d.meta.title == "broken"), "broken front matter → file name title");
}

#[tokio::test]
async fn missing_path_empty_tree_and_chroma_without_writer_are_errors() {
    let fixture = Fixture::new();
    let embedder = CountingEmbedder::new(8);
    let missing =
        IngestArgs { quiet: true, out: Some(fixture.snapshot_path()), ..IngestArgs::new("/no/such/dir", "t1") };
    let error = run_ingest(&fixture.settings, embedder.clone(), &missing).await.unwrap_err();
    assert!(matches!(error, IngestError::PathNotFound(_)) && error.to_string().contains("/no/such/dir"), "{error}");
    std::fs::create_dir_all(fixture.tree()).unwrap();
    let error = run_ingest(&fixture.settings, embedder.clone(), &fixture.args("t1")).await.unwrap_err();
    assert!(matches!(error, IngestError::NothingToIngest(_)), "{error}");
    fixture.write("docs/a.md", AGENT_CHATS);
    let chroma = IngestArgs { backend: Some(IngestBackend::Chroma), ..fixture.args("t1") };
    let error = run_ingest(&fixture.settings, embedder.clone(), &chroma).await.unwrap_err();
    assert!(error.to_string().contains("chroma"), "{error}");
    let no_out = IngestArgs { out: None, ..fixture.args("t1") };
    assert!(matches!(run_ingest(&fixture.settings, embedder, &no_out).await.unwrap_err(), IngestError::NoOutput));
    assert!(!fixture.snapshot_path().exists());
}

#[tokio::test]
async fn failed_runs_leave_the_snapshot_intact_and_dimensions_never_mix() {
    let fixture = Fixture::new();
    fixture.write("docs/agent/chats.md", AGENT_CHATS);
    run_ingest(&fixture.settings, CountingEmbedder::new(16), &fixture.args("t1")).await.unwrap();
    let before = std::fs::read(fixture.snapshot_path()).unwrap();
    fixture.write("docs/admin/required-tags.md", ADMIN_TAGS);
    let error = run_ingest(
        &fixture.settings,
        CountingEmbedder::failing(),
        &IngestArgs { no_cache: true, ..fixture.args("t1") },
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("embedding server down"), "{error}");
    assert_eq!(std::fs::read(fixture.snapshot_path()).unwrap(), before);
    let error = run_ingest(&fixture.settings, CountingEmbedder::new(32), &fixture.args("t2")).await.unwrap_err();
    assert!(matches!(error, IngestError::DimensionMismatch { existing: 16, new: 32 }), "{error}");
    assert_eq!(std::fs::read(fixture.snapshot_path()).unwrap(), before);
    let error =
        run_ingest(&fixture.settings, Arc::new(PseudoEmbedder::new(16)), &fixture.args("t2")).await.unwrap_err();
    assert!(matches!(error, IngestError::ModelMismatch { .. }), "{error}");
    run_ingest(&fixture.settings, CountingEmbedder::new(32), &fixture.args("t1"))
        .await
        .expect("replacing everything may change the model");
    assert_eq!(fixture.snapshot().dimension, 32);
}

#[tokio::test]
async fn jsonl_records_become_docs_with_their_metadata() {
    let fixture = Fixture::new();
    let path = fixture.dir.path().join("kb.jsonl");
    let lines = [
        r#"{"id": "p1", "title": "Гражданское неповиновение", "text": "Первый абзац.\n\n## Раздел\n\nВторой абзац.", "product": "wiki", "tags": ["история"], "platform": "web", "url": "https://w/p1"}"#,
        r#"{"id": "p2", "text": "Без заголовка."}"#,
        r#"{"title": "без id", "text": "x"}"#,
        "не json",
        r#"{"id": "p3", "text": ""}"#,
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let args = IngestArgs { out: Some(fixture.snapshot_path()), quiet: true, ..IngestArgs::new(&path, "t1") };
    let report = run_ingest(&fixture.settings, CountingEmbedder::new(8), &args).await.unwrap();
    assert_eq!((report.docs, report.skipped.len()), (2, 3));
    assert!(report.skipped.iter().any(|n| n.path.ends_with("kb.jsonl:4")), "{:?}", report.skipped);
    let snapshot = fixture.snapshot();
    let p1 = snapshot.docs.iter().find(|d| d.id == "p1").unwrap();
    assert_eq!(
        (p1.meta.product.as_str(), p1.meta.platform.as_str(), p1.meta.url.as_str()),
        ("wiki", "web", "https://w/p1")
    );
    assert_eq!((p1.meta.source.as_str(), p1.meta.tags.clone()), ("kb.jsonl", vec!["история".to_string()]));
    assert_eq!(snapshot.sections.iter().filter(|s| s.meta.doc_id == "p1").count(), 2);
    assert_eq!(snapshot.docs.iter().find(|d| d.id == "p2").unwrap().meta.title, "p2");
    std::fs::write(&path, lines[0]).unwrap();
    run_ingest(&fixture.settings, CountingEmbedder::new(8), &args).await.unwrap();
    assert!(fixture.snapshot().docs.iter().all(|d| d.id != "p2"), "a record removed from the file disappears");
}

#[tokio::test]
async fn demo_snapshot_matches_ingest_and_covers_ambiguous_tags() {
    let embedder = PseudoEmbedder::new(64);
    let snapshot = demo_snapshot(&embedder, &MappingRules::builtin()).await.unwrap();
    let demo_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("demo");
    let mut on_disk = Vec::new();
    for tenant in std::fs::read_dir(&demo_root).unwrap() {
        let tenant = tenant.unwrap().path();
        let mut stack = vec![tenant.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    on_disk.push(path.strip_prefix(&demo_root).unwrap().to_string_lossy().to_string());
                }
            }
        }
    }
    let mut listed: Vec<String> = DEMO_PAGES.iter().map(|(t, p, _)| format!("{t}/{p}")).collect();
    on_disk.sort();
    listed.sort();
    assert_eq!(listed, on_disk, "every demo page is compiled in");
    assert_eq!(snapshot.docs.len(), DEMO_PAGES.len());

    let fixture = Fixture::new();
    let args = IngestArgs {
        out: Some(fixture.snapshot_path()),
        quiet: true,
        ..IngestArgs::new(demo_root.join("demo"), "demo")
    };
    run_ingest(&fixture.settings, Arc::new(PseudoEmbedder::new(64)), &args).await.unwrap();
    assert_eq!(ids(&fixture.snapshot(), "demo"), ids(&snapshot, "demo"), "same ids through `ingest`");

    let index = LoadedIndex::build(snapshot.clone()).unwrap();
    let terms = retrieval_engine::terms("обязательные теги");
    let hits = index.lexical(Level::Doc, &RecordFilter::tenant("demo"), &terms, 10);
    let sections: std::collections::HashSet<&str> = hits.iter().map(|h| h.record.meta.section.as_str()).collect();
    for expected in ["agent", "admin", "faq"] {
        assert!(sections.contains(expected), "\"обязательные теги\" should hit {expected}: {sections:?}");
    }
    assert!(index.lexical(Level::Doc, &RecordFilter::tenant("acme"), &terms, 10).iter().all(|h| h
        .record
        .meta
        .tenant_id
        == "acme"));
    for doc in &snapshot.docs {
        assert!(!doc.meta.tags.is_empty() && !doc.meta.summary.is_empty(), "{} lacks front matter", doc.id);
        let sections = snapshot.sections.iter().filter(|s| s.meta.doc_id == doc.id).count();
        assert!(sections >= 2, "{} has {sections} sections", doc.id);
    }
}

#[tokio::test]
async fn themes_suggest_drafts_the_router_format() {
    let snapshot = demo_snapshot(&PseudoEmbedder::new(16), &MappingRules::builtin()).await.unwrap();
    let yaml = suggest_themes(&snapshot, Some("demo"), 2);
    let parsed: serde_json::Value = retrieval_engine::yaml::from_str(&yaml).unwrap();
    let themes = parsed["themes"].as_array().unwrap();
    let find =
        |id: &str| themes.iter().find(|t| t["id"].as_str() == Some(id)).unwrap_or_else(|| panic!("no {id} in\n{yaml}"));
    let sdk = find("sdk_android");
    assert_eq!(
        (sdk["domain"].as_str(), sdk["platform"].as_str(), sdk["role"].as_str()),
        (Some("sdk_docs"), Some("android"), Some("integrator"))
    );
    let admin = find("user_admin");
    assert_eq!((admin["section"].as_str(), admin["role"].as_str()), (Some("admin"), Some("administrator")));
    for theme in themes {
        for key in ["display_name", "domain", "section", "platform", "role", "description", "keywords", "priority"] {
            assert!(!theme[key].is_null(), "{key} missing in {theme:?}");
        }
    }
    assert!(yaml.contains("# doc_count: 5") && yaml.contains("# sample: Работа оператора с чатами"), "{yaml}");
    assert!(themes.iter().all(|t| t["section"].as_str() != Some("chat-bot")), "one chat-bot page is below min_docs");
    assert!(!yaml.contains("acme") && !yaml.contains("Acme"));
    // Loadable as-is by the router's themes provider.
    let loaded = retrieval_engine::parse_themes_yaml(&yaml).unwrap();
    assert_eq!(loaded.themes.len(), themes.len());
    assert!(loaded.themes.iter().any(|t| t.id == "sdk_android"));
}

/// `ingest --backend chroma` against a real Chroma: a re-ingest that drops a page removes it, the
/// other source of the tenant is untouched, and a serving replica catches up by re-reading only the
/// re-ingested source's docs (the change log), not the index.
#[cfg_attr(
    retr_test_missing = "chroma",
    ignore = "needs a Chroma server: set RETR_TEST_CHROMA_URL (scripts/test.sh starts one)"
)]
#[tokio::test]
async fn chroma_reingest_is_read_back_incrementally() {
    use retrieval_engine::ingest::ChromaSourceWriter;
    use retrieval_engine::{ChromaIndex, VectorIndex};
    use retrieval_service::ingest::run_ingest_with_writer;
    let url = crate::common::needs::required("chroma");
    let fixture = Fixture::new();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let settings = Settings {
        chroma_host: url,
        chroma_collection: format!("ingest{}", nanos % 1_000_000_000_000),
        ..fixture.settings.clone()
    };
    let index = ChromaIndex::new(&settings.chroma()).unwrap();
    let writer: Arc<dyn retrieval_engine::ingest::IndexWriter> =
        Arc::new(ChromaSourceWriter::new(Arc::clone(&index), "chroma"));
    let ingest = |args: IngestArgs| {
        let (settings, writer) = (settings.clone(), Arc::clone(&writer));
        async move {
            let args = IngestArgs { backend: Some(IngestBackend::Chroma), ..args };
            run_ingest_with_writer(&settings, CountingEmbedder::new(16), &args, Some(writer)).await.unwrap()
        }
    };
    fixture.write("docs/admin/required-tags.md", ADMIN_TAGS);
    fixture.write("docs/agent/chats.md", AGENT_CHATS);
    let first = ingest(fixture.args("t1")).await;
    assert!(first.index_version.is_some(), "ingest reports the version it wrote");
    // A second source of the same tenant.
    let other_tree = fixture.dir.path().join("other");
    std::fs::create_dir_all(&other_tree).unwrap();
    std::fs::write(other_tree.join("install.md"), SDK_INSTALL).unwrap();
    ingest(IngestArgs { source_name: Some("sdk".into()), ..IngestArgs::new(&other_tree, "t1") }).await;

    let reader = ChromaIndex::new(&settings.chroma()).unwrap();
    assert!(reader.refresh().await.unwrap());
    let loaded = |index: &ChromaIndex| index.replica_status().unwrap().records_loaded_total;
    let total = loaded(&reader);
    let t1 = RecordFilter::tenant("t1");
    assert_eq!(reader.get(Level::Doc, &t1, 100).await.unwrap().len(), 3);

    std::fs::remove_file(fixture.tree().join("docs/agent/chats.md")).unwrap();
    let report = ingest(fixture.args("t1")).await;
    assert_eq!(report.removed_docs, 1);
    assert!(reader.refresh().await.unwrap());
    let docs: Vec<String> =
        reader.get(Level::Doc, &t1, 100).await.unwrap().iter().map(|doc| doc.meta.doc_id.to_string()).collect();
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert!(docs.iter().all(|doc| !doc.contains("chats")), "the dropped page is gone: {docs:?}");
    assert!(docs.iter().any(|doc| doc.contains("install")), "the other source is untouched: {docs:?}");
    let reread = loaded(&reader) - total;
    assert_eq!(report.unchanged_pages, 1, "the unchanged page is neither embedded nor written again");
    assert_eq!(reread, 0, "only the changed page (gone) was read again, not the unchanged one");
    assert!(reader.version() >= report.index_version, "the replica reached the ingest's version");
}
