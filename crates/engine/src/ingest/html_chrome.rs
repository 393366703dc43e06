//! Where a page's text is, and what is site chrome around it: the content element a site
//! generator marks, the generic rules that drop navigation, headers, footers, sidebars, tables of
//! contents, breadcrumbs, cookie banners, "edit this page" links and the like inside it, and the
//! link-density rule for a page that marks no content element.

use ego_tree::iter::Edge;
use ego_tree::NodeId;
use scraper::{ElementRef, Html, Node, Selector};
use std::sync::LazyLock;

/// Elements that hold a page's main text, most specific first: Docusaurus, MkDocs Material,
/// VitePress, schema.org markup, then the generic HTML5 and ARIA landmarks (MkDocs' and Sphinx'
/// themes mark their body `role="main"`), then common ids.
pub(super) const CONTENT_SELECTORS: &[&str] = &[
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

/// Admonition kinds whose bare name as an admonition's title says nothing (the Markdown reader
/// drops `:::info` without a title the same way).
const ADMONITION_KINDS: &[&str] =
    &["note", "info", "tip", "warning", "danger", "caution", "important", "details", "success", "error", "attention"];

static CONTENT: LazyLock<Vec<Selector>> =
    LazyLock::new(|| CONTENT_SELECTORS.iter().map(|s| Selector::parse(s).expect("valid selector")).collect());

/// Whether `text` holds `needle` (ASCII, lowercase), ignoring ASCII case: a cheap test before
/// splitting a class list into words.
pub(super) fn contains_ignore_case(text: &str, needle: &str) -> bool {
    text.len() >= needle.len()
        && text.as_bytes().windows(needle.len()).any(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

/// The words of a class list or id: split at non-alphanumerics and camel-case boundaries, lowercased.
pub(super) fn names_words(names: &str) -> impl Iterator<Item = String> + '_ {
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
pub(super) fn main_content(document: &Html) -> Option<ElementRef<'_>> {
    CONTENT.iter().find_map(|selector| {
        document.select(selector).find(|element| element.text().any(|text| !text.trim().is_empty()))
    })
}

/// Blocks of a page without a marked content element that are mostly link text (menus, link
/// lists of a sidebar): at least 3 links and at least 60 % of the block's text in links.
pub(super) fn link_dense_blocks(body: ElementRef<'_>) -> std::collections::HashSet<NodeId> {
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
pub(super) fn is_chrome(element: ElementRef<'_>, in_admonition: bool) -> bool {
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
    if in_admonition && is_admonition_title(element) {
        let text = one_line(&element.text().collect::<String>()).to_lowercase();
        return ADMONITION_KINDS.contains(&text.trim_end_matches(':'));
    }
    false
}

/// Whether an element inside an admonition is its title (class word `title` or `heading`).
pub(super) fn is_admonition_title(element: ElementRef<'_>) -> bool {
    element
        .value()
        .attr("class")
        .is_some_and(|names| names_words(names).any(|word| word == "title" || word == "heading"))
}

pub(super) fn is_admonition(element: ElementRef<'_>) -> bool {
    let classes = element.value().attr("class").unwrap_or_default();
    classes.split_ascii_whitespace().any(|class| class == "custom-block")
        || names_words(classes).any(|word| word == "admonition" || word == "callout")
}

/// Text on one line, spaces collapsed.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('\u{200b}', "")
}
