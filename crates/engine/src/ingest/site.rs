//! HTML pages → `SourceDoc`s, as `tree` makes them from Markdown: the title is the page's first
//! `h1`, else its `<title>` without the site's name; the URL its canonical link, else the route of
//! its path; the topic comes from the path (the mapping) and, when the path names no area, from
//! the breadcrumb trail. Used for a tree of built pages, a sitemap and a crawled site alike.

use super::html::{decode_html, nesting_depth, parse_html, HtmlPage, MAX_NESTING};
use super::page_options::{page_url, LoadOptions, SUMMARY_MAX_CHARS};
use super::records::{truncate_words, SourceDoc};
use url::Url;

/// What separates a page's title from the site's name in `<title>` (`Page | Site`, `Page - Site`).
const TITLE_SEPARATORS: &[&str] = &[" | ", " - ", " — ", " – ", " · ", " :: "];

/// Decodes and reads one page (its links collected `with_links`); the reason when it is not ingested (binary, undecodable, marked
/// `noindex`, or nothing left once the site's chrome is dropped).
pub(crate) fn read_html_page(
    bytes: impl Into<Vec<u8>>,
    transport_charset: Option<&str>,
    address: Option<&Url>,
    with_links: bool,
    options: &LoadOptions<'_>,
) -> Result<HtmlPage, String> {
    let text = decode_html(bytes, transport_charset)?;
    if nesting_depth(&text, MAX_NESTING).is_none() {
        return Err(format!("markup nested deeper than {MAX_NESTING} levels: not read"));
    }
    let page = parse_html(&text, address, options.chunking.max_section_level, with_links);
    if page.noindex {
        return Err("marked noindex (<meta name=\"robots\">): not ingested".to_string());
    }
    if page.parsed.sections.is_empty() {
        return Err("no main content: only navigation, site chrome or markup".to_string());
    }
    Ok(page)
}

/// The site's name as it ends the `<title>` of its pages (`Page | Site`): the most common last
/// part after a separator, when at least two pages share it.
pub(crate) fn site_name<'a>(pages: impl Iterator<Item = &'a HtmlPage>) -> Option<String> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for page in pages {
        if let Some(suffix) = TITLE_SEPARATORS
            .iter()
            .filter_map(|separator| page.head_title.rfind(separator).map(|at| &page.head_title[at + separator.len()..]))
            .min_by_key(|suffix| suffix.len())
        {
            *counts.entry(suffix).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, count)| *count >= 2)
        .max_by_key(|(suffix, count)| (*count, suffix.len()))
        .map(|(s, _)| s.to_string())
}

/// Builds the doc of a page read by `read_html_page` at `relative_path`.
pub(crate) fn html_doc(
    relative_path: &str,
    page: HtmlPage,
    site_name: Option<&str>,
    options: &LoadOptions<'_>,
) -> SourceDoc {
    let file_name = relative_path.rsplit('/').next().unwrap_or(relative_path);
    let stem = file_name.rsplit_once('.').map(|(stem, _)| stem).unwrap_or(file_name);
    // The `<title>` without the site's name is the page's name as its generator gave it (the
    // source's title, else its first heading): it comes first, the first `h1` (which may be a
    // line the generator read as a heading) only when the site's name cannot be told apart.
    let page_name = site_name.and_then(|site| {
        TITLE_SEPARATORS.iter().find_map(|separator| page.head_title.strip_suffix(&format!("{separator}{site}")))
    });
    let title = [
        page_name.unwrap_or_default().to_string(),
        page.parsed.h1.clone().unwrap_or_default(),
        page.head_title.clone(),
        page.breadcrumbs.last().cloned().unwrap_or_default(),
    ]
    .into_iter()
    .find(|t| !t.trim().is_empty())
    .unwrap_or_else(|| stem.to_string());
    let paragraph = if page.parsed.first_paragraph.is_empty() {
        page.parsed.sections[0].text.clone()
    } else {
        page.parsed.first_paragraph.clone()
    };
    let mut topic = options.mapping.resolve(&mapping_path(relative_path), &title);
    if topic.section.is_empty() {
        topic.section = breadcrumb_area(&page.breadcrumbs, &title).unwrap_or_default();
    }
    if !options.product.is_empty() {
        topic.product = options.product.to_string();
    }
    SourceDoc {
        doc_id: format!("{}/{relative_path}", options.source_name),
        source: relative_path.to_string(),
        summary: truncate_words(&paragraph, SUMMARY_MAX_CHARS),
        url: page.canonical.clone().unwrap_or_else(|| page_url(options.base_url, relative_path, "")),
        product: topic.product.clone(),
        version: options.version.to_string(),
        tags: options.tags.to_vec(),
        title,
        topic,
        sections: page.parsed.sections,
        breadcrumbs: page.breadcrumbs,
    }
}

/// The path the mapping sees: the page's route with its extension, `a/b/index.html` standing for
/// `a/b` (a generator that builds `a/b.md` into `a/b/index.html` does not make it an index page).
fn mapping_path(relative_path: &str) -> String {
    let lower = relative_path.to_ascii_lowercase();
    let stem_length = [".html", ".htm", ".xhtml"]
        .iter()
        .find(|extension| lower.ends_with(*extension))
        .map_or(relative_path.len(), |extension| relative_path.len() - extension.len());
    let stem = &relative_path[..stem_length];
    match stem.rsplit_once('/') {
        Some((folder, "index")) if !folder.is_empty() => format!("{folder}.html"),
        _ => format!("{stem}.html"),
    }
}

/// The area a breadcrumb trail puts a page in: its first item below the home item, the page's
/// own item left out (`Home › Guides › Page` → `Guides`).
fn breadcrumb_area(trail: &[String], title: &str) -> Option<String> {
    let mut trail: Vec<&String> = trail.iter().collect();
    if trail.last().is_some_and(|last| last.as_str() == title) {
        trail.pop();
    }
    if trail.len() >= 2 {
        trail.remove(0);
    }
    trail.first().map(|area| area.to_string())
}

/// The `<loc>` addresses of a sitemap (or sitemap index) document.
pub(crate) fn sitemap_locations(xml: &str) -> Vec<String> {
    let document = scraper::Html::parse_document(xml);
    let loc = scraper::Selector::parse("loc").expect("valid selector");
    document
        .select(&loc)
        .map(|element| element.text().collect::<String>().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}
