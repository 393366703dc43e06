//! Loading a tree of Markdown/MDX or HTML pages: walking it, reading pages (binary, unreadable
//! and empty pages are skipped with a reason), and turning each page into a `SourceDoc` (title,
//! summary, URL, tags, topic; HTML pages through `site`). Used by `ingest` and by the bundled demo
//! corpus alike.

use super::html::{sniff_html, HtmlPage};
use super::markdown::parse_markdown;
pub use super::page_options::LoadOptions;
pub(crate) use super::page_options::{page_url, SUMMARY_MAX_CHARS};
use super::records::{truncate_words, SourceDoc};
use super::site::{html_doc, read_html_page, site_name, sitemap_locations};
use std::path::Path;

/// A file that was not ingested (or ingested with a problem), with its path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNote {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Loaded {
    pub docs: Vec<SourceDoc>,
    /// Files not ingested.
    pub skipped: Vec<FileNote>,
    /// Files ingested despite a problem (broken front matter).
    pub warnings: Vec<FileNote>,
}

/// The largest page read, in bytes: a longer file is skipped with the reason (documentation pages
/// are kilobytes; a file this big is a mistake, and reading it whole would cost its size in memory).
pub(crate) const MAX_PAGE_BYTES: u64 = 8 * 1024 * 1024;

/// Walks `root` in name order for `.md`/`.mdx` and `.html`/`.htm` pages (a site generator's
/// `404.html` is skipped with the reason). Hidden entries, `_partials`, `node_modules`
/// and directory symlinks are not entered; other file types are ignored silently. A page that is
/// a symlink is read only when it leads to a regular file inside `root` (a link out of the tree,
/// to a device or to a FIFO is skipped with the reason, so ingest never publishes a file the tree
/// does not hold); a page over `MAX_PAGE_BYTES` is skipped with the reason.
pub fn load_tree(root: &Path, options: &LoadOptions<'_>) -> std::io::Result<Loaded> {
    let mut files = Vec::new();
    collect_pages(root, root, &mut files)?;
    let files = files.into_iter().map(|(path, relative)| (path, relative, None)).collect();
    load_files(root, files, Loaded::default(), options)
}

/// Reads the pages a `sitemap.xml` lists from the folder it lies in: each `<loc>` is looked up by
/// its path, leading folders dropped until a page is found (`https://x/kb/ru/a/` →
/// `a/index.html`, `a.html` or `a`, so a site built for a sub-path is found), and its address
/// is the page's URL when the page has no canonical link. A location with no page is skipped with
/// the reason.
pub fn load_sitemap(sitemap: &Path, options: &LoadOptions<'_>) -> std::io::Result<Loaded> {
    let root = sitemap.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let canonical_root = root.canonicalize()?;
    let bytes = read_page(sitemap, &canonical_root).map_err(std::io::Error::other)?;
    let mut loaded = Loaded::default();
    let mut files = Vec::new();
    for location in sitemap_locations(&String::from_utf8_lossy(&bytes)) {
        let Ok(url) = url::Url::parse(&location) else {
            loaded.skipped.push(FileNote { path: location, reason: "not a URL".to_string() });
            continue;
        };
        let path = percent_encoding::percent_decode_str(url.path()).decode_utf8_lossy().to_string();
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        // Leading folders dropped until a page is found; a folder URL (`/kb/ru/`) may stand for
        // the root page.
        let folder_url = url.path().ends_with('/');
        let found = (0..=segments.len()).find_map(|skip| {
            let relative = segments[skip..].join("/");
            let candidates = if relative.is_empty() {
                if folder_url {
                    vec!["index.html".to_string()]
                } else {
                    vec![]
                }
            } else {
                vec![relative.clone(), format!("{relative}/index.html"), format!("{relative}.html")]
            };
            candidates.into_iter().find(|candidate| is_html_name(candidate) && root.join(candidate).is_file())
        });
        match found {
            Some(relative) if files.iter().any(|(_, known, _)| *known == relative) => {}
            Some(relative) => files.push((root.join(&relative), relative, Some(url))),
            None => loaded.skipped.push(FileNote {
                path: location,
                reason: format!("listed in the sitemap, but no page for it under {}", root.display()),
            }),
        }
    }
    load_files(root, files, loaded, options)
}

/// Reads `files` (path, path relative to `root`, the page's URL when known) into `loaded`, the
/// pages parsed on every core (an HTML page costs milliseconds) and kept in file order.
fn load_files(
    root: &Path,
    files: Vec<(std::path::PathBuf, String, Option<url::Url>)>,
    mut loaded: Loaded,
    options: &LoadOptions<'_>,
) -> std::io::Result<Loaded> {
    let canonical_root = root.canonicalize()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let chunk_length = files.len().div_ceil(threads).max(1);
    let outcomes: Vec<Result<(Pending, Vec<String>), String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(chunk_length)
            .map(|chunk| {
                let canonical_root = &canonical_root;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(path, relative, url)| read_file(path, relative, url, canonical_root, options))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    // Docs in file order; HTML pages wait for the site's name, known once every page is read.
    let mut pending: Vec<Pending> = Vec::new();
    for ((path, _, _), outcome) in files.iter().zip(outcomes) {
        let note = |reason: String| FileNote { path: path.display().to_string(), reason };
        match outcome {
            Ok((item, warnings)) => {
                loaded.warnings.extend(warnings.into_iter().map(note));
                pending.push(item);
            }
            Err(reason) => loaded.skipped.push(note(reason)),
        }
    }
    let site = site_name(pending.iter().filter_map(|p| match p {
        Pending::Html(_, page) => Some(page.as_ref()),
        Pending::Doc(_) => None,
    }));
    for item in pending {
        loaded.docs.push(match item {
            Pending::Doc(doc) => *doc,
            Pending::Html(relative, page) => html_doc(&relative, *page, site.as_deref(), options),
        });
    }
    Ok(loaded)
}

/// Reads one page: a Markdown doc with its warnings, or an HTML page; else why it is skipped.
fn read_file(
    path: &Path,
    relative: &str,
    known_url: &Option<url::Url>,
    canonical_root: &Path,
    options: &LoadOptions<'_>,
) -> Result<(Pending, Vec<String>), String> {
    let bytes = read_page(path, canonical_root)?;
    if is_html_name(relative) || sniff_html(&bytes) {
        if is_error_page(relative) {
            return Err("an error page of the site (404): not ingested".to_string());
        }
        let address = known_url.clone().or_else(|| page_address(options.base_url, relative, path));
        let mut page = read_html_page(bytes, None, address.as_ref(), false, options)?;
        if let Some(url) = known_url {
            page.canonical.get_or_insert_with(|| url.to_string());
        }
        return Ok((Pending::Html(relative.to_string(), Box::new(page)), Vec::new()));
    }
    let content = match String::from_utf8(bytes) {
        Ok(content) if !content.contains('\0') => content,
        Ok(_) | Err(_) => return Err("binary or not UTF-8".to_string()),
    };
    let (doc, warnings) = page_to_doc(relative, &content, options)?;
    Ok((Pending::Doc(Box::new(doc)), warnings))
}

enum Pending {
    Doc(Box<SourceDoc>),
    Html(String, Box<HtmlPage>),
}

/// `.html`, `.htm` and `.xhtml` pages are read as HTML (and any page whose content is).
pub(crate) fn is_html_name(relative: &str) -> bool {
    let lower = relative.to_ascii_lowercase();
    lower.ends_with(".html") || lower.ends_with(".htm") || lower.ends_with(".xhtml")
}

/// A site generator's "page not found" page.
fn is_error_page(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative).to_ascii_lowercase();
    name == "404.html" || name == "404.htm"
}

/// Where a built page lives: its route under `base_url`, else its file (relative links resolve
/// either way).
fn page_address(base_url: &str, relative: &str, path: &Path) -> Option<url::Url> {
    if !base_url.is_empty() {
        if let Ok(url) = url::Url::parse(&page_url(base_url, relative, "")) {
            return Some(url);
        }
    }
    path.canonicalize().ok().and_then(|absolute| url::Url::from_file_path(absolute).ok())
}

/// Reads the page at `path` when it is (or links to) a regular file inside `canonical_root` of at
/// most `MAX_PAGE_BYTES`; else the reason it is skipped.
fn read_page(path: &Path, canonical_root: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let target = path.canonicalize().map_err(|error| format!("unreadable: {error}"))?;
    if !target.starts_with(canonical_root) {
        return Err("a symlink to a file outside the tree: not read".to_string());
    }
    // Opened by its resolved path and checked on the open file: what is read is what was checked.
    let file = std::fs::File::open(&target).map_err(|error| format!("unreadable: {error}"))?;
    let metadata = file.metadata().map_err(|error| format!("unreadable: {error}"))?;
    if !metadata.is_file() {
        return Err("not a regular file: not read".to_string());
    }
    if metadata.len() > MAX_PAGE_BYTES {
        return Err(format!("larger than {MAX_PAGE_BYTES} bytes: not read"));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(MAX_PAGE_BYTES + 1).read_to_end(&mut bytes).map_err(|error| format!("unreadable: {error}"))?;
    if bytes.len() as u64 > MAX_PAGE_BYTES {
        return Err(format!("larger than {MAX_PAGE_BYTES} bytes: not read"));
    }
    Ok(bytes)
}

fn collect_pages(root: &Path, directory: &Path, files: &mut Vec<(std::path::PathBuf, String)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(directory)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || name.starts_with('_') || name == "node_modules" {
            continue;
        }
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else { continue };
        if file_type.is_dir() {
            collect_pages(root, &path, files)?;
        } else if (file_type.is_file() || file_type.is_symlink())
            && (name.ends_with(".md") || name.ends_with(".mdx") || is_html_name(&name))
        {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let relative = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            files.push((path, relative));
        }
    }
    Ok(())
}

/// Parses one page at `relative_path` (relative to the tree root, `/`-separated).
///
/// Title: front matter `title`, else the first H1, else `sidebar_label`, else the file name.
/// Summary: front matter `description`, else the first paragraph (cut to `SUMMARY_MAX_CHARS`).
/// Broken front matter → the page is kept with defaults and a warning is returned. A page
/// without any text is an `Err` with the reason (the caller skips it).
pub(crate) fn page_to_doc(
    relative_path: &str,
    content: &str,
    options: &LoadOptions<'_>,
) -> Result<(SourceDoc, Vec<String>), String> {
    let page = parse_markdown(content, options.chunking.max_section_level);
    if page.sections.is_empty() {
        return Err("empty page (no text after removing markup)".to_string());
    }
    let file_name = relative_path.rsplit('/').next().unwrap_or(relative_path);
    let stem = file_name.rsplit_once('.').map(|(stem, _)| stem).unwrap_or(file_name);
    let title = [page.front.title.clone(), page.h1.clone().unwrap_or_default(), page.front.sidebar_label.clone()]
        .into_iter()
        .find(|t| !t.trim().is_empty())
        .unwrap_or_else(|| stem.to_string());
    let summary = if page.front.description.is_empty() {
        let paragraph =
            if page.first_paragraph.is_empty() { page.sections[0].text.clone() } else { page.first_paragraph.clone() };
        truncate_words(&paragraph, SUMMARY_MAX_CHARS)
    } else {
        page.front.description.clone()
    };
    let mut topic = options.mapping.resolve(relative_path, &title);
    if !options.product.is_empty() {
        topic.product = options.product.to_string();
    }
    let mut tags = page.front.tags.clone();
    for tag in options.tags {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    let doc = SourceDoc {
        doc_id: format!("{}/{relative_path}", options.source_name),
        source: relative_path.to_string(),
        title,
        summary,
        url: page_url(options.base_url, relative_path, &page.front.slug),
        product: topic.product.clone(),
        version: options.version.to_string(),
        tags,
        topic,
        sections: page.sections,
        breadcrumbs: Vec::new(),
    };
    Ok((doc, page.warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::mapping::MappingRules;
    use crate::ingest::split::ChunkingConfig;

    #[test]
    fn urls_follow_docusaurus_routes() {
        assert_eq!(page_url("https://docs.x.ru/", "docs/agent/chats.md", ""), "https://docs.x.ru/docs/agent/chats");
        assert_eq!(page_url("", "docs/agent/index.mdx", ""), "/docs/agent");
        assert_eq!(page_url("", "a/features/features.md", ""), "/a/features");
        assert_eq!(page_url("https://k", "intro.md", "/"), "https://k/");
        assert_eq!(page_url("https://k", "a/b.md", "custom"), "https://k/a/custom");
        assert_eq!(page_url("https://k", "a/b.md", "/top/x"), "https://k/top/x");
    }

    #[test]
    fn title_and_summary_fallbacks() {
        let mapping = MappingRules::builtin();
        let options = LoadOptions {
            source_name: "src",
            base_url: "",
            product: "",
            version: "7",
            tags: &["extra".to_string()],
            mapping: &mapping,
            chunking: ChunkingConfig::default(),
        };
        let (doc, warnings) =
            page_to_doc("docs/agent/x.md", "# Заголовок H1\n\nПервый абзац текста.\n", &options).unwrap();
        assert_eq!((doc.title.as_str(), doc.summary.as_str()), ("Заголовок H1", "Первый абзац текста."));
        assert_eq!(
            (doc.doc_id.as_str(), doc.source.as_str(), doc.version.as_str()),
            ("src/docs/agent/x.md", "docs/agent/x.md", "7")
        );
        assert_eq!(doc.tags, vec!["extra".to_string()]);
        assert!(warnings.is_empty());
        let (doc, _) = page_to_doc("docs/agent/file-name.md", "Просто текст.", &options).unwrap();
        assert_eq!(doc.title, "file-name");
        let (doc, warnings) =
            page_to_doc("docs/agent/y.md", "---\ntitle: [broken\n---\nТекст страницы.", &options).unwrap();
        assert_eq!((doc.title.as_str(), warnings.len()), ("y", 1));
        assert!(
            page_to_doc("docs/agent/z.md", "---\ntitle: Пусто\n---\n<!-- только комментарий -->\n", &options).is_err()
        );
    }

    #[test]
    fn a_page_link_out_of_the_tree_or_to_a_device_is_skipped_never_read() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.md");
        std::fs::write(&secret, "# Секрет\n\nпароль базы hunter2\n").unwrap();
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path();
        std::fs::write(root.join("page.md"), "# Страница\n\nОбычный текст страницы.\n").unwrap();
        std::fs::create_dir(root.join("docs")).unwrap();
        std::fs::write(root.join("docs/inside.md"), "# Внутри\n\nТекст внутри дерева.\n").unwrap();
        std::os::unix::fs::symlink(&secret, root.join("leak.md")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("zero.md")).unwrap();
        std::os::unix::fs::symlink(root.join("docs/inside.md"), root.join("alias.md")).unwrap();
        std::fs::write(root.join("huge.md"), vec![b'a'; MAX_PAGE_BYTES as usize + 1]).unwrap();
        let mapping = MappingRules::builtin();
        let options = LoadOptions {
            source_name: "src",
            base_url: "",
            product: "",
            version: "",
            tags: &[],
            mapping: &mapping,
            chunking: ChunkingConfig::default(),
        };
        let loaded = load_tree(root, &options).unwrap();
        let mut ids: Vec<&str> = loaded.docs.iter().map(|doc| doc.doc_id.as_str()).collect();
        ids.sort_unstable();
        // A link to a page inside the tree is read like the page.
        assert_eq!(ids, ["src/alias.md", "src/docs/inside.md", "src/page.md"]);
        assert!(loaded.docs.iter().all(|doc| !doc.sections.iter().any(|s| s.text.contains("hunter2"))));
        let reason = |name: &str| {
            loaded.skipped.iter().find(|note| note.path.ends_with(name)).map(|note| note.reason.clone()).unwrap()
        };
        assert!(reason("leak.md").contains("outside the tree"), "{}", reason("leak.md"));
        assert!(reason("zero.md").contains("outside the tree"), "{}", reason("zero.md"));
        assert!(reason("huge.md").contains("larger than"), "{}", reason("huge.md"));
    }
}
