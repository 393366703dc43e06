//! Loading a Markdown/MDX tree: walking it, reading pages (binary, unreadable and empty pages are
//! skipped with a reason), and turning each page into a `SourceDoc` (title, summary, URL, tags,
//! topic). Used by `ingest` and by the bundled demo corpus alike.

use super::mapping::MappingRules;
use super::markdown::parse_markdown;
use super::records::{truncate_words, SourceDoc};
use super::split::ChunkingConfig;
use std::path::Path;

/// Summaries taken from the first paragraph are cut to this many characters.
pub(crate) const SUMMARY_MAX_CHARS: usize = 300;

/// Everything a loader needs besides the input itself.
#[derive(Debug, Clone)]
pub struct LoadOptions<'a> {
    /// Prefix of tree doc ids (`{source_name}/{relative path}`) and the owner of their records.
    pub source_name: &'a str,
    /// Prepended to page paths (or slugs) to make `url`; empty gives site-relative `/path` urls.
    pub base_url: &'a str,
    /// Override the mapping's product / set the version of every doc when non-empty.
    pub product: &'a str,
    pub version: &'a str,
    /// Added to every doc's tags.
    pub tags: &'a [String],
    pub mapping: &'a MappingRules,
    pub chunking: ChunkingConfig,
}

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

/// Walks `root` in name order for `.md`/`.mdx` pages. Hidden entries, `_partials`, `node_modules`
/// and directory symlinks are not entered; other file types are ignored silently.
pub fn load_tree(root: &Path, options: &LoadOptions<'_>) -> std::io::Result<Loaded> {
    let mut files = Vec::new();
    collect_pages(root, root, &mut files)?;
    let mut loaded = Loaded::default();
    for (path, relative) in files {
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => {
                loaded
                    .skipped
                    .push(FileNote { path: path.display().to_string(), reason: format!("unreadable: {error}") });
                continue;
            }
        };
        let content = match String::from_utf8(bytes) {
            Ok(content) if !content.contains('\0') => content,
            Ok(_) | Err(_) => {
                loaded
                    .skipped
                    .push(FileNote { path: path.display().to_string(), reason: "binary or not UTF-8".to_string() });
                continue;
            }
        };
        match page_to_doc(&relative, &content, options) {
            Ok((doc, warnings)) => {
                loaded
                    .warnings
                    .extend(warnings.into_iter().map(|reason| FileNote { path: path.display().to_string(), reason }));
                loaded.docs.push(doc);
            }
            Err(reason) => loaded.skipped.push(FileNote { path: path.display().to_string(), reason }),
        }
    }
    Ok(loaded)
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
        } else if (file_type.is_file() || file_type.is_symlink()) && (name.ends_with(".md") || name.ends_with(".mdx")) {
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
    };
    Ok((doc, page.warnings))
}

/// `base_url` + the page's route: an absolute slug as is, a relative slug under the page's
/// folder, else the path without extension, with `index`/`README`/`<folder>/<folder>` pages
/// standing for their folder (Docusaurus conventions).
pub(crate) fn page_url(base_url: &str, relative_path: &str, slug: &str) -> String {
    let (folder, file_name) = relative_path.rsplit_once('/').unwrap_or(("", relative_path));
    let stem = file_name.rsplit_once('.').map(|(stem, _)| stem).unwrap_or(file_name);
    let route = if let Some(absolute) = slug.strip_prefix('/') {
        absolute.to_string()
    } else if !slug.is_empty() {
        join_route(folder, slug)
    } else if stem.eq_ignore_ascii_case("index")
        || stem.eq_ignore_ascii_case("readme")
        || folder.rsplit('/').next() == Some(stem)
    {
        folder.to_string()
    } else {
        join_route(folder, stem)
    };
    format!("{}/{}", base_url.trim_end_matches('/'), route.trim_matches('/'))
}

fn join_route(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
