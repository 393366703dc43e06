//! HTML pages (built Docusaurus, MkDocs, VitePress and Sphinx sites, help-centre and wiki
//! exports) → the same sections of readable text a Markdown page gives, plus the page's title,
//! canonical URL, breadcrumbs and links.
//!
//! The page is parsed by html5ever (`scraper`). Its main content is the first element a site
//! generator marks as the page body (`CONTENT_SELECTORS`); inside it, site chrome (navigation,
//! headers without a heading, footers, sidebars, tables of contents, breadcrumbs, cookie banners,
//! "edit this page" links, pagination, copy buttons, heading anchors) is dropped by generic rules on
//! tag names, ARIA roles and class/id words. A page with no such element is read from its `body`
//! with link-dense blocks (menus) dropped. The kept elements are turned into the pulldown-cmark
//! events the Markdown reader renders (`markdown::Renderer`): `h1`–`h6` open sections, `pre` is a
//! code block, lists and tables are read as the Markdown reader reads them.
//!
//! Bytes are decoded by their BOM, else the transport's or a `<meta>` charset (any encoding
//! `encoding_rs` knows), else as UTF-8; binary files and invalid UTF-8 are refused with a reason.

use super::html_chrome::{
    contains_ignore_case, is_admonition, is_admonition_title, is_chrome, link_dense_blocks, main_content, names_words,
    one_line,
};
pub(crate) use super::html_input::{decode_html, nesting_depth, sniff_html, MAX_NESTING};
use super::html_slice::reading_document;
use super::markdown::{ParsedPage, Renderer};
use ego_tree::iter::Edge;
use ego_tree::NodeId;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Tag, TagEnd};
use scraper::{ElementRef, Html, Node, Selector};
use std::collections::HashMap;
use std::sync::LazyLock;
use url::Url;

/// A page read from HTML.
#[derive(Debug, Default)]
pub(crate) struct HtmlPage {
    /// Sections and first paragraph of the main content, `h1` its first level-1 heading.
    pub(crate) parsed: ParsedPage,
    /// `<title>` (or `og:title`), the site name still in it.
    pub(crate) head_title: String,
    /// `<link rel="canonical">`, resolved against the page's address.
    pub(crate) canonical: Option<String>,
    /// The labels of the page's breadcrumb trail, outermost first.
    pub(crate) breadcrumbs: Vec<String>,
    /// Every `a href` of the document (navigation included), resolved, fragment removed; empty
    /// unless asked for.
    pub(crate) links: Vec<Url>,
    /// `<meta name="robots" content="noindex">`.
    pub(crate) noindex: bool,
}

/// Lists nested deeper than this are read as plain lines (each level widens every line's indent).
const MAX_LIST_DEPTH: usize = 32;

/// Elements that end the text before them (a line of their own), besides those with events.
const BLOCK_TAGS: &[&str] = &[
    "div",
    "section",
    "article",
    "main",
    "header",
    "figure",
    "figcaption",
    "details",
    "summary",
    "dl",
    "dt",
    "dd",
    "address",
    "center",
    "fieldset",
    "legend",
    "body",
    "html",
    "caption",
    "tbody",
    "thead",
    "tfoot",
];

static TITLE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("title").expect("valid selector"));
static META: LazyLock<Selector> = LazyLock::new(|| Selector::parse("meta").expect("valid selector"));
static LINK_REL: LazyLock<Selector> = LazyLock::new(|| Selector::parse("link[rel][href]").expect("valid selector"));
static BASE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("base[href]").expect("valid selector"));
static ANCHOR: LazyLock<Selector> = LazyLock::new(|| Selector::parse("a[href]").expect("valid selector"));
static BODY: LazyLock<Selector> = LazyLock::new(|| Selector::parse("body").expect("valid selector"));

/// Reads a decoded page. `address` is where the page lives (its URL, or the URL its path stands
/// for) and resolves relative links; a `<base href>` takes precedence. The page's links are
/// collected `with_links` only (a crawl follows them; a tree does not need them); without them
/// only the page's head, content element and breadcrumb trail are parsed (`html_slice`), the
/// whole page when they cannot be told apart before parsing or give no text.
pub(crate) fn parse_html(source: &str, address: Option<&Url>, max_section_level: usize, with_links: bool) -> HtmlPage {
    if !with_links {
        if let Some(reading) = reading_document(source) {
            let page = parse_document(&reading, address, max_section_level, false);
            if !page.parsed.sections.is_empty() {
                return page;
            }
        }
    }
    parse_document(source, address, max_section_level, with_links)
}

fn parse_document(source: &str, address: Option<&Url>, max_section_level: usize, with_links: bool) -> HtmlPage {
    let document = Html::parse_document(source);
    let base = document
        .select(&BASE)
        .next()
        .and_then(|base| base.attr("href"))
        .and_then(|href| resolve(address, href))
        .or_else(|| address.cloned());
    let links = if with_links { links(&document, base.as_ref()) } else { Vec::new() };
    let mut page = HtmlPage { links, ..HtmlPage::default() };
    read_head(&document, base.as_ref(), &mut page);
    page.breadcrumbs = breadcrumbs(&document);
    let (root, link_dense) = match main_content(&document) {
        Some(root) => (Some(root), None),
        None => {
            let body = document.select(&BODY).next();
            (body, body.map(link_dense_blocks))
        }
    };
    page.parsed = match root {
        Some(root) => render(root, link_dense.as_ref(), max_section_level),
        None => ParsedPage::default(),
    };
    page
}

fn resolve(base: Option<&Url>, href: &str) -> Option<Url> {
    let href = href.trim();
    let mut url = match base {
        Some(base) => base.join(href).ok()?,
        None => Url::parse(href).ok()?,
    };
    url.set_fragment(None);
    Some(url)
}

fn links(document: &Html, base: Option<&Url>) -> Vec<Url> {
    let mut seen = std::collections::HashSet::new();
    document
        .select(&ANCHOR)
        .filter_map(|anchor| anchor.attr("href"))
        .filter(|href| !href.trim_start().starts_with('#'))
        .filter_map(|href| resolve(base, href))
        .filter(|url| seen.insert(url.clone()))
        .collect()
}

fn read_head(document: &Html, base: Option<&Url>, page: &mut HtmlPage) {
    let mut og_title = String::new();
    for meta in document.select(&META) {
        let key = meta.attr("name").or_else(|| meta.attr("property")).unwrap_or_default().to_ascii_lowercase();
        let content = meta.attr("content").unwrap_or_default();
        match key.as_str() {
            "robots" => page.noindex |= content.to_ascii_lowercase().contains("noindex"),
            "og:title" => og_title = one_line(content),
            _ => {}
        }
    }
    let title = document.select(&TITLE).next().map(|title| one_line(&title.text().collect::<String>()));
    page.head_title = title.filter(|t| !t.is_empty()).unwrap_or(og_title);
    page.canonical = document
        .select(&LINK_REL)
        .find(|link| {
            link.attr("rel")
                .is_some_and(|rel| rel.split_ascii_whitespace().any(|r| r.eq_ignore_ascii_case("canonical")))
        })
        .and_then(|link| link.attr("href"))
        .and_then(|href| resolve(base, href))
        .map(String::from);
}

/// The first element whose class, id or `aria-label` names a breadcrumb trail: the texts of its
/// items (or links), separators and empty items left out.
fn breadcrumbs(document: &Html) -> Vec<String> {
    let Some(trail) = document.root_element().descendants().filter_map(ElementRef::wrap).find(|element| {
        let value = element.value();
        [value.attr("class"), value.id(), value.attr("aria-label")]
            .into_iter()
            .flatten()
            .filter(|names| contains_ignore_case(names, "breadcrumb"))
            .any(|names| names_words(names).any(|word| word == "breadcrumb" || word == "breadcrumbs"))
    }) else {
        return Vec::new();
    };
    let items: Vec<ElementRef<'_>> =
        trail.descendants().filter_map(ElementRef::wrap).filter(|e| e.value().name() == "li").collect();
    let items = if items.is_empty() {
        trail.descendants().filter_map(ElementRef::wrap).filter(|e| e.value().name() == "a").collect()
    } else {
        items
    };
    items
        .into_iter()
        .map(|item| one_line(&item.text().collect::<String>()))
        .map(|label| label.trim_matches(|c: char| "/>»›|\u{200b}".contains(c) || c.is_whitespace()).to_string())
        .filter(|label| !label.is_empty())
        .collect()
}

/// What an element opened, so its close emits the matching end.
#[derive(Clone, Copy)]
enum Opened {
    Nothing,
    Block,
    Heading(HeadingLevel),
    Paragraph,
    /// An admonition's title, written `Title:` as the Markdown reader writes `:::kind Title`.
    AdmonitionTitle,
    Code,
    List,
    Item,
    Quote,
    Table,
    Row,
    Cell,
    Admonition,
}

fn heading_level(name: &str) -> Option<HeadingLevel> {
    Some(match name {
        "h1" => HeadingLevel::H1,
        "h2" => HeadingLevel::H2,
        "h3" => HeadingLevel::H3,
        "h4" => HeadingLevel::H4,
        "h5" => HeadingLevel::H5,
        "h6" => HeadingLevel::H6,
        _ => return None,
    })
}

/// Walks the content element without recursion (deeply nested markup cannot overflow the stack)
/// and feeds the renderer.
fn render(
    root: ElementRef<'_>,
    link_dense: Option<&std::collections::HashSet<NodeId>>,
    max_section_level: usize,
) -> ParsedPage {
    let mut renderer = Renderer::without_source(max_section_level);
    let mut skip_until: Option<NodeId> = None;
    let mut opened: HashMap<NodeId, Opened> = HashMap::new();
    let (mut pre_depth, mut list_depth, mut table_depth, mut admonition_depth) = (0usize, 0usize, 0usize, 0usize);
    let start = |tag: Tag<'static>| Event::Start(tag);
    for edge in root.traverse() {
        match edge {
            Edge::Open(node) => {
                if skip_until.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Text(text) => {
                        let text: &str = text;
                        if text.contains(['\u{200b}', '\u{feff}']) {
                            let visible: String =
                                text.chars().filter(|c| *c != '\u{200b}' && *c != '\u{feff}').collect();
                            renderer.event(Event::Text(visible.into()), 0);
                        } else if !text.is_empty() {
                            renderer.event(Event::Text(text.into()), 0);
                        }
                    }
                    Node::Element(element) => {
                        let Some(element_ref) = ElementRef::wrap(node) else { continue };
                        if node.id() != root.id()
                            && (is_chrome(element_ref, admonition_depth > 0)
                                || link_dense.is_some_and(|dense| dense.contains(&node.id())))
                        {
                            skip_until = Some(node.id());
                            continue;
                        }
                        let name = element.name();
                        let what = if pre_depth > 0 {
                            if name == "br" {
                                renderer.event(Event::Text("\n".into()), 0);
                            }
                            Opened::Nothing
                        } else if let Some(level) = heading_level(name) {
                            renderer.event(start(Tag::Heading { level, id: None, classes: vec![], attrs: vec![] }), 0);
                            Opened::Heading(level)
                        } else {
                            match name {
                                _ if admonition_depth > 0 && table_depth == 0 && is_admonition_title(element_ref) => {
                                    renderer.event(start(Tag::Paragraph), 0);
                                    Opened::AdmonitionTitle
                                }
                                "p" if table_depth == 0 => {
                                    renderer.event(start(Tag::Paragraph), 0);
                                    Opened::Paragraph
                                }
                                "pre" => {
                                    pre_depth += 1;
                                    renderer.event(start(Tag::CodeBlock(CodeBlockKind::Fenced("".into()))), 0);
                                    Opened::Code
                                }
                                "ul" | "ol" if list_depth < MAX_LIST_DEPTH && table_depth == 0 => {
                                    list_depth += 1;
                                    let first = (name == "ol").then(|| {
                                        element.attr("start").and_then(|s| s.trim().parse().ok()).unwrap_or(1)
                                    });
                                    renderer.event(start(Tag::List(first)), 0);
                                    Opened::List
                                }
                                "li" if list_depth > 0 && list_depth <= MAX_LIST_DEPTH && table_depth == 0 => {
                                    renderer.event(start(Tag::Item), 0);
                                    Opened::Item
                                }
                                "blockquote" if table_depth == 0 => {
                                    renderer.event(start(Tag::BlockQuote(None)), 0);
                                    Opened::Quote
                                }
                                "table" => {
                                    table_depth += 1;
                                    if table_depth == 1 {
                                        renderer.event(start(Tag::Table(vec![])), 0);
                                        Opened::Table
                                    } else {
                                        Opened::Nothing
                                    }
                                }
                                "tr" if table_depth == 1 => {
                                    renderer.event(start(Tag::TableRow), 0);
                                    Opened::Row
                                }
                                "td" | "th" if table_depth == 1 => {
                                    renderer.event(start(Tag::TableCell), 0);
                                    Opened::Cell
                                }
                                "td" | "th" | "li" | "p" => {
                                    renderer.event(Event::Text(" ".into()), 0);
                                    Opened::Nothing
                                }
                                "br" => {
                                    renderer.event(Event::SoftBreak, 0);
                                    Opened::Nothing
                                }
                                "hr" => {
                                    renderer.event(Event::Rule, 0);
                                    Opened::Nothing
                                }
                                "img" => {
                                    if let Some(alt) = element.attr("alt").filter(|alt| !alt.trim().is_empty()) {
                                        renderer.event(Event::Text(alt.to_string().into()), 0);
                                    }
                                    Opened::Nothing
                                }
                                _ if is_admonition(element_ref) => {
                                    admonition_depth += 1;
                                    renderer.set_in_admonition(true);
                                    renderer.event(start(Tag::HtmlBlock), 0);
                                    Opened::Admonition
                                }
                                _ if BLOCK_TAGS.contains(&name) => {
                                    renderer.event(start(Tag::HtmlBlock), 0);
                                    Opened::Block
                                }
                                _ => Opened::Nothing,
                            }
                        };
                        if !matches!(what, Opened::Nothing) {
                            opened.insert(node.id(), what);
                        }
                    }
                    _ => {}
                }
            }
            Edge::Close(node) => {
                if let Some(skipped) = skip_until {
                    if skipped == node.id() {
                        skip_until = None;
                    }
                    continue;
                }
                if let Node::Element(element) = node.value() {
                    if element.name() == "table" {
                        table_depth = table_depth.saturating_sub(1);
                    }
                }
                let Some(what) = opened.remove(&node.id()) else { continue };
                let end = match what {
                    Opened::Nothing => continue,
                    Opened::Block => TagEnd::HtmlBlock,
                    Opened::Admonition => {
                        admonition_depth -= 1;
                        renderer.set_in_admonition(admonition_depth > 0);
                        TagEnd::HtmlBlock
                    }
                    Opened::Heading(level) => TagEnd::Heading(level),
                    Opened::Paragraph => TagEnd::Paragraph,
                    Opened::AdmonitionTitle => {
                        renderer.event(Event::Text(":".into()), 0);
                        TagEnd::Paragraph
                    }
                    Opened::Code => {
                        pre_depth -= 1;
                        TagEnd::CodeBlock
                    }
                    Opened::List => {
                        list_depth -= 1;
                        TagEnd::List(false)
                    }
                    Opened::Item => TagEnd::Item,
                    Opened::Quote => TagEnd::BlockQuote(None),
                    Opened::Table => TagEnd::Table,
                    Opened::Row => TagEnd::TableRow,
                    Opened::Cell => TagEnd::TableCell,
                };
                renderer.event(Event::End(end), 0);
            }
        }
    }
    renderer.finish()
}

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
