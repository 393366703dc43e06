//! The HTML reader against pages built by real site generators (MkDocs 1.6.1 and VitePress
//! 1.6.4 built `fixtures/html/markdown` into `fixtures/html/mkdocs` and `fixtures/html/vitepress`)
//! and against hand-made bad input.

use super::*;
use crate::ingest::mapping::MappingRules;
use crate::ingest::records::SourceDoc;
use crate::ingest::site::read_html_page;
use crate::ingest::split::ChunkingConfig;
use crate::ingest::tree::{load_tree, LoadOptions, Loaded};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/html")
}

fn load(folder: &str, mapping: &MappingRules) -> Loaded {
    let options = options(mapping);
    load_tree(&fixtures().join(folder), &options).unwrap()
}

fn options(mapping: &MappingRules) -> LoadOptions<'_> {
    LoadOptions {
        source_name: "agent",
        base_url: "",
        product: "",
        version: "",
        tags: &[],
        mapping,
        chunking: ChunkingConfig::default(),
    }
}

fn page(source: &str) -> HtmlPage {
    parse_html(source, Url::parse("https://docs.example.org/kb/guide/page.html").ok().as_ref(), 3, true)
}

fn text_of(page: &HtmlPage) -> String {
    page.parsed.sections.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join("\n")
}

fn doc<'a>(loaded: &'a Loaded, source: &str) -> &'a SourceDoc {
    loaded.docs.iter().find(|doc| doc.source == source).unwrap_or_else(|| panic!("no doc {source}"))
}

#[test]
fn built_pages_give_the_sections_of_their_markdown() {
    let mapping = MappingRules::builtin();
    let markdown = load("markdown", &mapping);
    for (generator, index, settings) in
        [("mkdocs", "index.html", "guide/settings/index.html"), ("vitepress", "index.html", "guide/settings.html")]
    {
        let built = load(generator, &mapping);
        assert_eq!(built.docs.len(), 2, "{generator}: {:?}", built.skipped);
        assert!(built.skipped.iter().any(|note| note.path.ends_with("404.html") && note.reason.contains("404")));
        for (md, html) in [("index.md", index), ("guide/settings.md", settings)] {
            let (md, html) = (doc(&markdown, md), doc(&built, html));
            assert_eq!(html.title, md.title, "{generator} {}", html.source);
            assert_eq!(html.summary, md.summary, "{generator} {}", html.source);
            assert_eq!(html.sections, md.sections, "{generator} {}", html.source);
            // Paths feed the areas as they do for Markdown.
            assert_eq!(html.topic.section, md.topic.section, "{generator} {}", html.source);
        }
        let all: String = built.docs.iter().flat_map(|d| d.sections.iter().map(|s| s.text.clone())).collect();
        for chrome in [
            "Documentation built with",
            "Keyboard Shortcuts",
            "Previous",
            "Next",
            "Search",
            "Редактировать страницу",
            "Выпущено под лицензией",
            "Skip to content",
            "On this page",
            "Return to top",
            "Agent Docs",
        ] {
            assert!(!all.contains(chrome), "{generator}: {chrome:?} in {all}");
        }
    }
}

#[test]
fn code_tables_and_lists_stay_readable() {
    let built = load("vitepress", &MappingRules::builtin());
    let text: String = doc(&built, "index.html").sections.iter().map(|s| s.text.clone() + "\n").collect();
    assert!(text.contains("Параметр | Значение\nОС | Debian 12\nПамять | 2 ГБ"), "{text}");
    assert!(text.contains("- Права администратора\n  - на сервере\n  - в хранилище"), "{text}");
    assert!(text.contains("1. Скачайте пакет.\n2. Установите его командой:"), "{text}");
    assert!(text.contains("sudo dpkg -i agent.deb\nsudo systemctl enable --now agent"), "{text}");
    let headings: Vec<Vec<String>> = doc(&built, "index.html").sections.iter().map(|s| s.headings.clone()).collect();
    assert_eq!(headings, [vec![], vec!["Требования".to_string()], vec!["Установка из пакета".to_string()]]);
}

#[test]
fn canonical_url_title_breadcrumbs_and_links() {
    let mkdocs = load("mkdocs", &MappingRules::builtin());
    assert_eq!(doc(&mkdocs, "index.html").url, "https://docs.example.org/agent/");
    assert_eq!(doc(&mkdocs, "guide/settings/index.html").url, "https://docs.example.org/agent/guide/settings/");
    // No canonical link: the page's route, as for Markdown.
    let vitepress = load("vitepress", &MappingRules::builtin());
    assert_eq!(doc(&vitepress, "guide/settings.html").url, "/guide/settings");

    let read = page(
        r#"<html><head><title>Сброс пароля | Справочный центр</title>
        <link rel="canonical" href="/kb/reset-password"></head><body>
        <nav class="breadcrumbs"><ol><li><a href="/">Главная</a></li><li>›</li><li><a href="/kb/accounts/">Учётные записи</a></li>
        <li>Сброс пароля</li></ol></nav>
        <main><p>Откройте <a href="../settings/security.html#reset">настройки безопасности</a>.</p></main></body></html>"#,
    );
    assert_eq!(read.head_title, "Сброс пароля | Справочный центр");
    assert_eq!(read.canonical.as_deref(), Some("https://docs.example.org/kb/reset-password"));
    assert_eq!(read.breadcrumbs, ["Главная", "Учётные записи", "Сброс пароля"]);
    assert!(
        read.links.iter().any(|l| l.as_str() == "https://docs.example.org/kb/settings/security.html"),
        "{:?}",
        read.links
    );
    assert_eq!(text_of(&read), "Откройте настройки безопасности.");

    // The site's name is cut from titles it ends; the breadcrumb trail names the area of a page
    // whose path names none.
    let mapping = MappingRules::builtin();
    let options = options(&mapping);
    let first = read_html_page(
        "<title>Сброс пароля | Справочный центр</title><nav aria-label=\"breadcrumb\"><a href=\"/\">Главная</a>\
         <a href=\"/a/\">Учётные записи</a></nav><main><p>Текст.</p></main>"
            .as_bytes(),
        None,
        None,
        false,
        &options,
    )
    .unwrap();
    let second = read_html_page(
        "<title>Вход | Справочный центр</title><main><p>Ещё текст.</p></main>".as_bytes(),
        None,
        None,
        false,
        &options,
    )
    .unwrap();
    // A line the generator read as a heading does not displace the name the `<title>` gives.
    let third = read_html_page(
        "<title>Свои фильтры | Справочный центр</title><main><h1>%#//scriptlet('x')</h1><p>Правила.</p></main>"
            .as_bytes(),
        None,
        None,
        false,
        &options,
    )
    .unwrap();
    let site = crate::ingest::site::site_name([&first, &second, &third].into_iter());
    assert_eq!(site.as_deref(), Some("Справочный центр"));
    let filters = crate::ingest::site::html_doc("filters.html", third, site.as_deref(), &options);
    assert_eq!(filters.title, "Свои фильтры");
    let doc = crate::ingest::site::html_doc("reset.html", first, site.as_deref(), &options);
    assert_eq!((doc.title.as_str(), doc.topic.section.as_str()), ("Сброс пароля", "Учётные записи"));
    assert_eq!(doc.breadcrumbs, ["Главная", "Учётные записи"]);
}

#[test]
fn encodings_are_honoured_and_bad_bytes_refused() {
    // windows-1251 declared in <meta>.
    let (cp1251, _, _) =
        encoding_rs::WINDOWS_1251.encode("<meta charset=\"windows-1251\"><main><p>Привет, мир</p></main>");
    assert!(decode_html(cp1251.to_vec(), None).unwrap().contains("Привет, мир"));
    // KOI8-R named by the transport (HTTP Content-Type) wins over nothing declared.
    let (koi8, _, _) = encoding_rs::KOI8_R.encode("<p>Журнал</p>");
    assert!(decode_html(koi8.to_vec(), Some("koi8-r")).unwrap().contains("Журнал"));
    // UTF-16 with its byte order mark.
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend("<p>Ключ</p>".encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(decode_html(utf16.to_vec(), None).unwrap(), "<p>Ключ</p>");
    // The http-equiv form.
    let (latin, _, _) = encoding_rs::WINDOWS_1252
        .encode("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=ISO-8859-1\"><p>café</p>");
    assert!(decode_html(latin.to_vec(), None).unwrap().contains("café"));
    let invalid = decode_html(b"<p>\xff\xfe broken \xc3</p>", None).unwrap_err();
    assert!(invalid.contains("not valid UTF-8"), "{invalid}");
    let binary = decode_html(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", None).unwrap_err();
    assert!(binary.contains("binary"), "{binary}");
}

#[test]
fn a_page_of_navigation_only_is_refused_with_the_reason() {
    let mapping = MappingRules::builtin();
    let nav_only = r#"<html><body><header><a href="/">Home</a></header>
        <nav><ul><li><a href="/a">A</a></li><li><a href="/b">B</a></li></ul></nav>
        <div class="sidebar"><a href="/c">C</a></div><footer>© 2026 Example</footer>
        <div id="cookie-banner">We use cookies <button>OK</button></div></body></html>"#;
    let reason = read_html_page(nav_only.as_bytes(), None, None, false, &options(&mapping)).unwrap_err();
    assert!(reason.contains("no main content"), "{reason}");
    let noindex = r#"<meta name="robots" content="noindex"><main><p>Черновик</p></main>"#;
    assert!(read_html_page(noindex.as_bytes(), None, None, false, &options(&mapping)).unwrap_err().contains("noindex"));
}

#[test]
fn without_a_content_landmark_link_dense_blocks_are_dropped() {
    let read = page(
        r#"<html><body><div class="top"><a href="/1">Раздел 1</a> <a href="/2">Раздел 2</a> <a href="/3">Раздел 3</a></div>
        <div><h1>Настройка VPN</h1><p>Откройте <a href="/s">настройки</a> и включите VPN на странице подключения.</p></div>
        <div class="links"><a href="/x">X</a> | <a href="/y">Y</a> | <a href="/z">Z</a></div></body></html>"#,
    );
    assert_eq!(read.parsed.h1.as_deref(), Some("Настройка VPN"));
    assert_eq!(text_of(&read), "Откройте настройки и включите VPN на странице подключения.");
}

#[test]
fn chrome_inside_the_content_is_dropped() {
    let read = page(
        r##"<article><h2 id="a">Раздел <a class="headerlink" href="#a">¶</a></h2>
        <div class="language-sh"><button class="copy"></button><span class="lang">sh</span><pre><code>ls -la
pwd</code></pre></div>
        <div class="admonition note"><p class="admonition-title">Note</p><p>Важное замечание.</p></div>
        <a class="edit-this-page" href="https://example.org/edit">Edit this page</a>
        <div class="theme-doc-toc-mobile">Содержание</div><p hidden>скрыто</p></article>"##,
    );
    assert_eq!(read.parsed.sections[0].headings, ["Раздел"]);
    assert_eq!(text_of(&read), "ls -la\npwd\n\nВажное замечание.");
}

#[test]
fn deeply_nested_markup_is_read_or_refused_never_hangs() {
    let mapping = MappingRules::builtin();
    let nested =
        |depth: usize| format!("<main>{}<p>глубоко</p>{}</main>", "<div>".repeat(depth), "</div>".repeat(depth));
    let started = std::time::Instant::now();
    // Deep, but as deep as real pages get: read.
    let read = read_html_page(nested(400).as_bytes(), None, None, false, &options(&mapping)).unwrap();
    assert_eq!(text_of(&read), "глубоко");
    // Lists nested deeper than the reader indents are read as lines.
    let lists = format!("<main>{}</main>", "<ul><li>пункт".repeat(300));
    assert!(text_of(&page(&lists)).contains("пункт"));
    // Deeper: refused before parsing (the HTML tree builder's time grows with the square of the depth).
    let reason = read_html_page(nested(200_000).as_bytes(), None, None, false, &options(&mapping)).unwrap_err();
    assert!(reason.contains("nested deeper than"), "{reason}");
    // Elements whose end tag HTML leaves optional are not nesting.
    let flat = format!("<main><ul>{}</ul></main>", "<li>пункт".repeat(5_000));
    assert!(read_html_page(flat.as_bytes(), None, None, false, &options(&mapping)).is_ok());
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
}

#[test]
fn a_page_built_into_a_folder_is_mapped_as_its_route() {
    // MkDocs builds `a/b.md` into `a/b/index.html`: the mapping sees `a/b`, not an index page.
    let mapping = MappingRules::builtin();
    let mkdocs = load("mkdocs", &mapping);
    let markdown = load("markdown", &mapping);
    let page_type = |loaded: &Loaded, source: &str| doc(loaded, source).topic.page_type.clone();
    assert_eq!(page_type(&mkdocs, "guide/settings/index.html"), page_type(&markdown, "guide/settings.md"));
    assert_eq!(page_type(&mkdocs, "index.html"), page_type(&markdown, "index.md"));
}

#[test]
fn class_words_split_at_dashes_and_camel_case() {
    assert_eq!(
        names_words("VPDocFooter md-sidebar__inner").collect::<Vec<_>>(),
        ["vp", "doc", "footer", "md", "sidebar", "inner"]
    );
    assert!(sniff_html(b"\xef\xbb\xbf  <!DOCTYPE html><html>"));
    assert!(!sniff_html(b"# Markdown"));
}

#[test]
fn a_sitemap_lists_the_pages_read_and_gives_their_urls() {
    let mapping = MappingRules::builtin();
    let dir = tempfile::tempdir().unwrap();
    for name in ["index.html", "guide/settings.html"] {
        let target = dir.path().join(name);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(fixtures().join("vitepress").join(name), target).unwrap();
    }
    let sitemap = std::fs::read_to_string(fixtures().join("vitepress/sitemap.xml")).unwrap();
    let sitemap = sitemap.replace("</urlset>", "<url><loc>https://docs.example.org/agent/gone</loc></url></urlset>");
    std::fs::write(dir.path().join("sitemap.xml"), sitemap).unwrap();
    let loaded = crate::ingest::tree::load_sitemap(&dir.path().join("sitemap.xml"), &options(&mapping)).unwrap();
    let mut urls: Vec<(&str, &str)> = loaded.docs.iter().map(|d| (d.source.as_str(), d.url.as_str())).collect();
    urls.sort_unstable();
    assert_eq!(
        urls,
        [
            ("guide/settings.html", "https://docs.example.org/agent/guide/settings.html"),
            ("index.html", "https://docs.example.org/agent/")
        ]
    );
    assert_eq!(loaded.skipped.len(), 1, "{:?}", loaded.skipped);
    assert!(loaded.skipped[0].reason.contains("no page for it"), "{:?}", loaded.skipped);
}

/// The page as read from its head, content element and breadcrumb trail alone, against the page
/// parsed whole.
fn assert_reads_as_whole(source: &str, what: &str) {
    let address = Url::parse("https://docs.example.org/kb/guide/page.html").ok();
    let (part, whole) =
        (parse_html(source, address.as_ref(), 3, false), parse_document(source, address.as_ref(), 3, false));
    assert_eq!(part.parsed, whole.parsed, "{what}");
    assert_eq!(
        (part.head_title, part.canonical, part.breadcrumbs, part.noindex),
        (whole.head_title, whole.canonical, whole.breadcrumbs, whole.noindex),
        "{what}"
    );
}

#[test]
fn reading_the_content_alone_gives_what_the_whole_page_gives() {
    for generator in ["mkdocs", "vitepress"] {
        for page in ["index.html", "guide/settings/index.html", "guide/settings.html"] {
            let path = fixtures().join(generator).join(page);
            let Ok(source) = std::fs::read_to_string(&path) else { continue };
            let reading = crate::ingest::html_slice::reading_document(&source).expect("a content element");
            assert!(reading.len() < source.len() / 2, "{generator} {page}: the navigation is not parsed");
            assert_reads_as_whole(&source, &format!("{generator} {page}"));
        }
    }
    let page = r#"<!doctype html><html><head><title>Сброс | Центр</title><link rel="canonical" href="/kb/reset">
        <script>var s = "<body><main>";</script></head>
        <body data-x="a > b"><div class="menu"><a href="/">Главная</a><a href="/a">Раздел А</a></div>
        <nav aria-label="Breadcrumbs"><ol><li><a href="/">Главная</a></li><li>Учётные записи</li></ol></nav>
        <div role="main" class="col"><!-- <div> --><h1>Сброс пароля</h1><div class="x"><p>Текст <b>раз</b>.</p></div>
        <script>document.write("</div>")</script><div><p>Ещё текст.</p></div></div>
        <footer>Подвал сайта</footer></body></html>"#;
    let reading = crate::ingest::html_slice::reading_document(page).unwrap();
    assert!(!reading.contains("Раздел А") && !reading.contains("Подвал"), "{reading}");
    assert!(reading.contains("Ещё текст") && reading.contains("Учётные записи"), "{reading}");
    assert_reads_as_whole(page, "hand-made page");
    // A content element never closed, or none at all: the whole page is parsed.
    let unclosed = "<html><body><nav><a href=\"/\">Меню</a></nav><main><p>Текст без конца.</p></body></html>";
    assert!(crate::ingest::html_slice::reading_document(unclosed).is_none());
    assert_eq!(text_of(&parse_html(unclosed, None, 3, false)), "Текст без конца.");
    assert!(crate::ingest::html_slice::reading_document("<p>Просто текст</p>").is_none());
}

#[test]
fn admonition_fences_and_heading_attributes_left_as_text_read_as_in_markdown() {
    // A generator that knows neither Docusaurus admonitions nor attribute lists prints them.
    let markdown =
        "# Страница\n\nВступление.\n\n## Настройка {#setup}\n\n:::info Совместимость\nРаботает в Windows.\n:::\n\n\
                    :::note\nПросто примечание.\n:::\n\nОбычный абзац.\n";
    let html = "<html><body><main><h1>Страница</h1><p>Вступление.</p><h2 id=\"setup\">Настройка {#setup}</h2>\
                <p>:::info Совместимость\nРаботает в Windows.\n:::</p><p>:::note\nПросто примечание.\n:::</p>\
                <p>Обычный абзац.</p></main></body></html>";
    let from_markdown = crate::ingest::markdown::parse_markdown(markdown, 3);
    let from_html = page(html);
    assert_eq!(from_html.parsed.sections, from_markdown.sections);
    assert_eq!(from_html.parsed.sections[1].headings, ["Настройка"]);
    // The same admonitions as a generator that knows them builds them: a title is a `Title:`
    // line, a title that only names the kind is dropped.
    let built = "<html><body><main><h1>Страница</h1><p>Вступление.</p><h2 id=\"setup\">Настройка</h2>\
                 <div class=\"admonition info\"><p class=\"admonition-title\">Совместимость</p><p>Работает в Windows.</p></div>\
                 <div class=\"admonition note\"><p class=\"admonition-title\">Note</p><p>Просто примечание.</p></div>\
                 <p>Обычный абзац.</p></main></body></html>";
    assert_eq!(page(built).parsed.sections, from_markdown.sections);
    // The note that opens a page is not its summary, fences left as text or not.
    let note_first = crate::ingest::markdown::parse_markdown(":::note\nПримечание.\n\nЕщё.\n:::\n\nПервый абзац.\n", 3);
    let left_as_text = page("<main><p>:::note\nПримечание.</p><p>Ещё.\n:::</p><p>Первый абзац.</p></main>");
    assert_eq!(note_first.first_paragraph, "Первый абзац.");
    assert_eq!(left_as_text.parsed.first_paragraph, note_first.first_paragraph);
    // A `:::` inside code stays.
    let code = page("<main><h1>Код</h1><pre><code>:::note\nx\n:::</code></pre></main>");
    assert!(text_of(&code).contains(":::note\nx\n:::"), "{}", text_of(&code));
}

#[test]
fn raw_text_ends_at_its_end_tag_in_any_case_and_quoted_brackets_stay_in_the_tag() {
    use crate::ingest::html_input::find_end_tag;
    assert_eq!(find_end_tag(b"if (a </b) x = '</scrip'; </SCRIPT>", b"script"), Some(26));
    assert_eq!(find_end_tag(b"no end </scrip", b"script"), None);
    // Markup in a script or in a quoted attribute value neither nests nor ends an element.
    let nested = format!("<body><script>{}</Script><div title='>>'><p>x</p></div></body>", "<div>".repeat(50));
    assert!(nesting_depth(&nested, 10).is_some_and(|depth| depth <= 2));
    let page = "<html><head></head><body><main data-x='a > \"b\"'><h1>Заголовок</h1><SCRIPT>x = \"</main>\"</script>\
        <p>Текст после скрипта.</p></main><footer>Подвал</footer></body></html>";
    let reading = crate::ingest::html_slice::reading_document(page).unwrap();
    assert!(reading.contains("Текст после скрипта") && !reading.contains("Подвал"), "{reading}");
    assert_reads_as_whole(page, "script and quoted brackets");
}
