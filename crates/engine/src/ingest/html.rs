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

/// Elements that hold a page's main text, most specific first: Docusaurus, MkDocs Material,
/// VitePress, schema.org markup, then the generic HTML5 and ARIA landmarks (MkDocs' and Sphinx'
/// themes mark their body `role="main"`), then common ids.
const CONTENT_SELECTORS: &[&str] = &[
    ".theme-doc-markdown",
    ".md-content",
    ".vp-doc",
    "[itemprop=articleBody]",
    "article",
    "[role=main]",
    "main",
    "#content",
    "#main-content",
    ".content",
];

/// Class and id words that mark site chrome (compared with the words of a class or id split at
/// `-`, `_` and camel-case boundaries: `VPDocFooter` → vp, doc, footer).
const CHROME_WORDS: &[&str] = &[
    "nav",
    "navbar",
    "navigation",
    "sidebar",
    "toc",
    "breadcrumb",
    "breadcrumbs",
    "menu",
    "cookie",
    "cookies",
    "consent",
    "footer",
    "pagination",
    "pager",
    "skip",
    "edit",
    "aside",
    "banner",
    "announcement",
    "share",
    "feedback",
    "headerlink",
    "permalink",
    "clipboard",
    "copy",
    "lang",
    "search",
    "prev",
    "next",
];

const CHROME_TAGS: &[&str] = &[
    "nav", "footer", "aside", "script", "style", "noscript", "svg", "button", "form", "template", "iframe", "select",
    "input", "textarea", "canvas", "object", "embed", "dialog", "head", "link", "meta", "math",
];

const CHROME_ROLES: &[&str] = &[
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "menu",
    "menubar",
    "toolbar",
    "dialog",
    "tablist",
];

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

/// Admonition kinds whose bare name as an admonition's title says nothing (the Markdown reader
/// drops `:::info` without a title the same way).
const ADMONITION_KINDS: &[&str] =
    &["note", "info", "tip", "warning", "danger", "caution", "important", "details", "success", "error", "attention"];

static CONTENT: LazyLock<Vec<Selector>> =
    LazyLock::new(|| CONTENT_SELECTORS.iter().map(|s| Selector::parse(s).expect("valid selector")).collect());
static TITLE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("title").expect("valid selector"));
static META: LazyLock<Selector> = LazyLock::new(|| Selector::parse("meta").expect("valid selector"));
static LINK_REL: LazyLock<Selector> = LazyLock::new(|| Selector::parse("link[rel][href]").expect("valid selector"));
static BASE: LazyLock<Selector> = LazyLock::new(|| Selector::parse("base[href]").expect("valid selector"));
static ANCHOR: LazyLock<Selector> = LazyLock::new(|| Selector::parse("a[href]").expect("valid selector"));
static BODY: LazyLock<Selector> = LazyLock::new(|| Selector::parse("body").expect("valid selector"));

/// Whether `bytes` look like an HTML document (used for files without an `.html` name).
pub(crate) fn sniff_html(bytes: &[u8]) -> bool {
    let start = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let head: Vec<u8> =
        start.iter().skip_while(|b| b.is_ascii_whitespace()).take(15).map(u8::to_ascii_lowercase).collect();
    head.starts_with(b"<!doctype html") || head.starts_with(b"<html")
}

/// Decodes a page: BOM, else `transport_charset` (an HTTP `Content-Type` charset), else a
/// `<meta charset>` / `<meta http-equiv content="…charset=…">` in the first 1024 bytes, else UTF-8.
/// Binary content and undecodable UTF-8 are an `Err` with the reason.
pub(crate) fn decode_html(bytes: &[u8], transport_charset: Option<&str>) -> Result<String, String> {
    if let Some((encoding, bom_length)) = encoding_rs::Encoding::for_bom(bytes) {
        let (text, had_errors) = encoding.decode_without_bom_handling(&bytes[bom_length..]);
        if had_errors && encoding == encoding_rs::UTF_8 {
            return Err("not valid UTF-8 despite its byte order mark: not read".to_string());
        }
        return Ok(text.into_owned());
    }
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return Err("binary content (NUL bytes), not an HTML page: not read".to_string());
    }
    let declared = transport_charset.and_then(|label| encoding_rs::Encoding::for_label(label.trim().as_bytes()));
    let declared = declared.or_else(|| meta_charset(&bytes[..bytes.len().min(1024)]));
    match declared {
        Some(encoding) if encoding != encoding_rs::UTF_8 => {
            // A legacy single- or multi-byte encoding maps every byte sequence (errors become U+FFFD).
            let (text, _) = encoding.decode_without_bom_handling(bytes);
            Ok(text.into_owned())
        }
        Some(_) | None => match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_string()),
            Err(error) => Err(format!(
                "not valid UTF-8 (at byte {}) and no other charset declared: not read",
                error.valid_up_to()
            )),
        },
    }
}

/// The encoding named by a `<meta>` tag's `charset=` in `head` (the HTML prescan, simplified).
fn meta_charset(head: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(at) = find(&lower[from..], b"<meta").map(|i| i + from) {
        let end = find(&lower[at..], b">").map_or(lower.len(), |i| i + at);
        let tag = &lower[at..end];
        if let Some(position) = find(tag, b"charset") {
            let rest = &tag[position + b"charset".len()..];
            let label: Vec<u8> = rest
                .iter()
                .skip_while(|b| b.is_ascii_whitespace() || **b == b'=' || **b == b'"' || **b == b'\'')
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(**b, b'-' | b'_' | b':' | b'.'))
                .copied()
                .collect();
            if let Some(encoding) = encoding_rs::Encoding::for_label(&label) {
                // A page that says UTF-16 in ASCII is not UTF-16 (the HTML standard reads it as UTF-8).
                return Some(if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                    encoding_rs::UTF_8
                } else {
                    encoding
                });
            }
        }
        from = end;
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// Markup nested deeper than this is refused unread: real pages nest a few dozen levels, and the
/// HTML tree builder's time grows with the square of the depth (100,000 levels take minutes).
pub(crate) const MAX_NESTING: usize = 1_000;

/// Elements that never hold others, and those whose end tag HTML lets a page leave out (a list
/// of unclosed `<li>` is not nested).
const NOT_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr", "param",
    "keygen", "p", "li", "dt", "dd", "td", "th", "tr", "option", "optgroup", "thead", "tbody", "tfoot", "colgroup",
    "caption", "rt", "rp", "!doctype",
];

/// How deep the page's elements nest, counted by a scan of its tags (comments and the text of
/// `script`/`style` skipped) that stops at `limit`: the depth, or `None` past the limit.
pub(crate) fn nesting_depth(source: &str, limit: usize) -> Option<usize> {
    let bytes = source.as_bytes();
    let (mut depth, mut deepest, mut at) = (0usize, 0usize, 0usize);
    while let Some(offset) = memchr::memchr(b'<', &bytes[at..]) {
        at += offset + 1;
        if bytes[at..].starts_with(b"!--") {
            at = find(&bytes[at..], b"-->").map_or(bytes.len(), |end| at + end + 3);
            continue;
        }
        let closing = bytes.get(at) == Some(&b'/');
        let name_start = if closing { at + 1 } else { at };
        let name_length =
            bytes[name_start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b'!').count();
        if name_length == 0 {
            continue;
        }
        let name = source[name_start..name_start + name_length].to_ascii_lowercase();
        let tag_end = memchr::memchr(b'>', &bytes[name_start..]).map_or(bytes.len(), |end| name_start + end);
        let self_closing = tag_end > 0 && bytes.get(tag_end - 1) == Some(&b'/');
        at = tag_end.min(bytes.len());
        if NOT_NESTING.contains(&name.as_str()) || self_closing {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
            continue;
        }
        if name == "script" || name == "style" {
            let lower_end = format!("</{name}");
            at = find_ignore_case(&bytes[at..], lower_end.as_bytes()).map_or(bytes.len(), |end| at + end);
            continue;
        }
        depth += 1;
        deepest = deepest.max(depth);
        if deepest > limit {
            return None;
        }
    }
    Some(deepest)
}

fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window.eq_ignore_ascii_case(needle))
}

/// Reads a decoded page. `address` is where the page lives (its URL, or the URL its path stands
/// for) and resolves relative links; a `<base href>` takes precedence. The page's links are
/// collected `with_links` only (a crawl follows them; a tree does not need them).
pub(crate) fn parse_html(source: &str, address: Option<&Url>, max_section_level: usize, with_links: bool) -> HtmlPage {
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

/// Whether `text` holds `needle` (ASCII, lowercase), ignoring ASCII case: a cheap test before
/// splitting a class list into words.
fn contains_ignore_case(text: &str, needle: &str) -> bool {
    text.len() >= needle.len()
        && text.as_bytes().windows(needle.len()).any(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

/// The words of a class list or id: split at non-alphanumerics and camel-case boundaries, lowercased.
fn names_words(names: &str) -> impl Iterator<Item = String> + '_ {
    names.split(|c: char| !c.is_alphanumeric()).filter(|part| !part.is_empty()).flat_map(camel_words)
}

fn camel_words(part: &str) -> Vec<String> {
    let chars: Vec<char> = part.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let boundary = c.is_uppercase()
            && i > 0
            && (chars[i - 1].is_lowercase()
                || (chars[i - 1].is_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The main content element: the first match of `CONTENT_SELECTORS` that holds text.
fn main_content(document: &Html) -> Option<ElementRef<'_>> {
    CONTENT.iter().find_map(|selector| {
        document.select(selector).find(|element| element.text().any(|text| !text.trim().is_empty()))
    })
}

/// Blocks of a page without a marked content element that are mostly link text (menus, link
/// lists of a sidebar): at least 3 links and at least 60 % of the block's text in links.
fn link_dense_blocks(body: ElementRef<'_>) -> std::collections::HashSet<NodeId> {
    // (text chars, link text chars, links) per open element, summed bottom-up without recursion.
    let mut stack: Vec<(NodeId, usize, usize, usize)> = Vec::new();
    let mut dense = std::collections::HashSet::new();
    let mut link_depth = 0usize;
    for edge in body.traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(element) => {
                    if element.name() == "a" {
                        link_depth += 1;
                        if let Some(top) = stack.last_mut() {
                            top.3 += 1;
                        }
                    }
                    stack.push((node.id(), 0, 0, 0));
                }
                Node::Text(text) => {
                    let length = text.chars().filter(|c| !c.is_whitespace()).count();
                    if let Some(top) = stack.last_mut() {
                        top.1 += length;
                        if link_depth > 0 {
                            top.2 += length;
                        }
                    }
                }
                _ => {}
            },
            Edge::Close(node) => {
                let Node::Element(element) = node.value() else { continue };
                let Some((id, text, link_text, links)) = stack.pop() else { continue };
                if element.name() == "a" {
                    link_depth = link_depth.saturating_sub(1);
                }
                let is_block = matches!(element.name(), "div" | "ul" | "ol" | "section" | "table" | "p" | "td");
                if is_block && links >= 3 && text > 0 && link_text * 10 >= text * 6 {
                    dense.insert(id);
                }
                if let Some(parent) = stack.last_mut() {
                    parent.1 += text;
                    parent.2 += link_text;
                    parent.3 += links;
                }
            }
        }
    }
    dense
}

/// Whether an element inside the content is site chrome, not text of the page.
fn is_chrome(element: ElementRef<'_>, in_admonition: bool) -> bool {
    let value = element.value();
    let name = value.name();
    if CHROME_TAGS.contains(&name) {
        return true;
    }
    // A `header` holding the page's heading (Docusaurus puts the h1 there) is content.
    if name == "header" {
        let has_heading = element
            .descendants()
            .filter_map(ElementRef::wrap)
            .any(|e| matches!(e.value().name(), "h1" | "h2" | "h3" | "h4" | "h5" | "h6"));
        if !has_heading {
            return true;
        }
    }
    if value.attr("hidden").is_some() || value.attr("aria-hidden").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return true;
    }
    if value.attr("role").is_some_and(|role| CHROME_ROLES.contains(&role.trim().to_ascii_lowercase().as_str())) {
        return true;
    }
    if let Some(style) = value.attr("style") {
        let style = style.to_ascii_lowercase().replace(' ', "");
        if style.contains("display:none") || style.contains("visibility:hidden") {
            return true;
        }
    }
    if [value.attr("class"), value.id()]
        .into_iter()
        .flatten()
        .filter(|names| CHROME_WORDS.iter().any(|word| contains_ignore_case(names, word)))
        .any(|names| names_words(names).any(|word| CHROME_WORDS.contains(&word.as_str())))
    {
        return true;
    }
    if name == "a" && value.attr("href").is_some_and(|href| href.starts_with('#')) {
        // A heading's permalink: `#`, `¶`, `§` or an invisible character as its whole text.
        let text: String = element.text().collect();
        if text.trim().chars().all(|c| "#¶§🔗\u{200b}".contains(c)) {
            return true;
        }
    }
    if in_admonition
        && [value.attr("class")]
            .into_iter()
            .flatten()
            .any(|names| names_words(names).any(|word| word == "title" || word == "heading"))
    {
        let text = one_line(&element.text().collect::<String>()).to_lowercase();
        return ADMONITION_KINDS.contains(&text.trim_end_matches(':'));
    }
    false
}

fn is_admonition(element: ElementRef<'_>) -> bool {
    let classes = element.value().attr("class").unwrap_or_default();
    classes.split_ascii_whitespace().any(|class| class == "custom-block")
        || names_words(classes).any(|word| word == "admonition" || word == "callout")
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

/// What an element opened, so its close emits the matching end.
#[derive(Clone, Copy)]
enum Opened {
    Nothing,
    Block,
    Heading(HeadingLevel),
    Paragraph,
    Code,
    List,
    Item,
    Quote,
    Table,
    Row,
    Cell,
    Admonition,
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

/// Text on one line, spaces collapsed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('\u{200b}', "")
}

#[cfg(test)]
#[path = "html_tests.rs"]
mod tests;
