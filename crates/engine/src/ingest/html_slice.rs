//! The parts of a built page the reader uses, found by a scan of its tags before parsing: the
//! head, the main content element and the breadcrumb trail. A generator repeats the whole site's
//! navigation on every page (on a MkDocs site most of a page's bytes), so parsing only these parts
//! makes reading a site cost about what its text costs, not its page count times its menu.
//!
//! The scan reads start and end tags with their attributes (comments, `<!doctype>` and the text of
//! `script`, `style`, `textarea` and `title` skipped) and matches the same content selectors as
//! the parser (`html_chrome::CONTENT_SELECTORS`, in the same order). It gives up, and the whole
//! page is parsed, whenever it is unsure: no `<body>`, no content element, an element never closed.

use super::html_chrome::{contains_ignore_case, names_words, CONTENT_SELECTORS};
use super::html_input::find_end_tag;

/// A start or end tag: its name, its attributes' text and where it lies.
#[derive(Clone)]
struct Tag<'a> {
    name: &'a str,
    closing: bool,
    attributes: &'a str,
    start: usize,
    end: usize,
}

/// The attributes of a start tag the scan matches on.
#[derive(Default)]
struct Names<'a> {
    class: &'a str,
    id: &'a str,
    role: &'a str,
    itemprop: &'a str,
    aria_label: &'a str,
}

/// Elements whose text is not markup (the scan skips to their end tag).
const RAW_TEXT: &[&str] = &["script", "style", "textarea", "title", "xmp"];

/// The tags of `source` in order from byte `from` (0, or where a tag the scan gave starts: its
/// state is only its position, so a scan resumed there gives the same tags as the whole scan).
fn tags(source: &str, from: usize) -> impl Iterator<Item = Tag<'_>> + '_ {
    let bytes = source.as_bytes();
    let mut at = from;
    std::iter::from_fn(move || loop {
        let offset = memchr::memchr(b'<', &bytes[at..])?;
        let start = at + offset;
        at = start + 1;
        if bytes[at..].starts_with(b"!--") {
            at = find(&bytes[at..], b"-->").map_or(bytes.len(), |end| at + end + 3);
            continue;
        }
        if bytes.get(at).is_some_and(|b| *b == b'!' || *b == b'?') {
            at = memchr::memchr(b'>', &bytes[at..]).map_or(bytes.len(), |end| at + end + 1);
            continue;
        }
        let closing = bytes.get(at) == Some(&b'/');
        let name_start = if closing { at + 1 } else { at };
        let name_length = bytes[name_start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-').count();
        if name_length == 0 || !bytes[name_start].is_ascii_alphabetic() {
            continue;
        }
        let name = &source[name_start..name_start + name_length];
        let attributes_start = name_start + name_length;
        let end = tag_end(bytes, attributes_start);
        at = end;
        if !closing && RAW_TEXT.iter().any(|raw| raw.eq_ignore_ascii_case(name)) {
            at = find_end_tag(&bytes[at..], name.as_bytes()).map_or(bytes.len(), |offset| at + offset);
        }
        let attributes = &source[attributes_start..end.saturating_sub(1).max(attributes_start)];
        return Some(Tag { name, closing, attributes, start, end });
    })
}

/// The position after the `>` that ends a tag whose attributes start at `from` (quoted values may
/// hold `>`).
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(offset) = memchr::memchr3(b'>', b'"', b'\'', &bytes[at..]) {
        let found = at + offset;
        if bytes[found] == b'>' {
            return found + 1;
        }
        match memchr::memchr(bytes[found], &bytes[found + 1..]) {
            Some(close) => at = found + 1 + close + 1,
            None => return bytes.len(),
        }
    }
    bytes.len()
}

/// The attributes the scan matches on, read in one pass over a tag's attribute text.
fn names(attributes: &str) -> Names<'_> {
    let mut names = Names::default();
    let bytes = attributes.as_bytes();
    let mut at = 0usize;
    while at < bytes.len() {
        while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'/') {
            at += 1;
        }
        let name_start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() && !matches!(bytes[at], b'=' | b'/') {
            at += 1;
        }
        let name = &attributes[name_start..at];
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let mut value = "";
        if bytes.get(at) == Some(&b'=') {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_whitespace() {
                at += 1;
            }
            match bytes.get(at) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let value_start = at + 1;
                    let value_end =
                        memchr::memchr(quote, &bytes[value_start..]).map_or(bytes.len(), |end| value_start + end);
                    value = &attributes[value_start..value_end];
                    at = value_end + 1;
                }
                _ => {
                    let value_start = at;
                    while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
                        at += 1;
                    }
                    value = &attributes[value_start..at];
                }
            }
        } else if name.is_empty() {
            at += 1;
        }
        let slot = match name.len() {
            2 if name.eq_ignore_ascii_case("id") => &mut names.id,
            4 if name.eq_ignore_ascii_case("role") => &mut names.role,
            5 if name.eq_ignore_ascii_case("class") => &mut names.class,
            8 if name.eq_ignore_ascii_case("itemprop") => &mut names.itemprop,
            10 if name.eq_ignore_ascii_case("aria-label") => &mut names.aria_label,
            _ => continue,
        };
        if slot.is_empty() {
            *slot = value;
        }
    }
    names
}

/// Whether a start tag matches one of the simple selectors of `CONTENT_SELECTORS`: `.class`,
/// `#id`, `[attribute=value]` or a tag name.
fn matches(tag: &Tag<'_>, names: &Names<'_>, selector: &str) -> bool {
    if let Some(class) = selector.strip_prefix('.') {
        names.class.split_ascii_whitespace().any(|c| c == class)
    } else if let Some(id) = selector.strip_prefix('#') {
        names.id == id
    } else if let Some(test) = selector.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        match test.split_once('=') {
            Some(("role", value)) => names.role == value,
            Some(("itemprop", value)) => names.itemprop == value,
            _ => false,
        }
    } else {
        tag.name.eq_ignore_ascii_case(selector)
    }
}

/// Whether a start tag names a breadcrumb trail by its class, id or `aria-label` (as
/// `html::breadcrumbs` finds it in the parsed page).
fn is_breadcrumb(names: &Names<'_>) -> bool {
    [names.class, names.id, names.aria_label].into_iter().any(|names| {
        contains_ignore_case(names, "breadcrumb")
            && names_words(names).any(|word| word == "breadcrumb" || word == "breadcrumbs")
    })
}

/// The byte range of the element whose start tag is `open`: to the end of the end tag that closes
/// it (same-name elements counted in between), or `None` when it is never closed. The tags are
/// scanned again from `open` rather than kept: a page's navigation holds thousands of tags.
fn element_range(source: &str, open: &Tag<'_>) -> Option<std::ops::Range<usize>> {
    let mut depth = 0usize;
    for tag in tags(source, open.start) {
        if !tag.name.eq_ignore_ascii_case(open.name) {
            continue;
        }
        if tag.closing {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(open.start..tag.end);
            }
        } else if !tag.attributes.trim_end().ends_with('/') {
            depth += 1;
        }
    }
    None
}

/// Whether markup holds text outside its tags (the parser's "holds text" test, roughly: an
/// element whose text is all in `script` or `style` passes here and fails there, and the
/// caller then parses the whole page).
fn has_text(markup: &str) -> bool {
    let mut in_tag = false;
    markup.bytes().any(|byte| match byte {
        b'<' => {
            in_tag = true;
            false
        }
        b'>' => {
            in_tag = false;
            false
        }
        _ => !in_tag && !byte.is_ascii_whitespace(),
    })
}

/// A smaller document with the page's head, its breadcrumb trail (when outside the content) and
/// its main content element, or `None` when the page must be parsed whole.
pub(super) fn reading_document(source: &str) -> Option<String> {
    let mut scan = tags(source, 0);
    let body = scan.find(|tag| !tag.closing && tag.name.eq_ignore_ascii_case("body"))?;
    // The start tags each content selector matches, in page order, and the first breadcrumb trail.
    let mut candidates: Vec<Vec<Tag<'_>>> = (0..CONTENT_SELECTORS.len()).map(|_| Vec::new()).collect();
    let mut trail: Option<Tag<'_>> = None;
    for tag in scan {
        if tag.closing {
            continue;
        }
        let names = names(tag.attributes);
        for (selector, found) in CONTENT_SELECTORS.iter().zip(candidates.iter_mut()) {
            if matches(&tag, &names, selector) {
                found.push(tag.clone());
            }
        }
        if trail.is_none() && is_breadcrumb(&names) {
            trail = Some(tag);
        }
    }
    let content = candidates.iter().find_map(|found| {
        found.iter().find_map(|open| element_range(source, open).filter(|range| has_text(&source[range.clone()])))
    })?;
    let trail = trail
        .and_then(|open| element_range(source, &open))
        .filter(|trail| trail.end <= content.start || trail.start >= content.end);
    let head = &source[..body.start];
    let mut document = String::with_capacity(head.len() + content.len() + 64);
    document.push_str(head);
    document.push_str("<body>");
    if let Some(trail) = trail {
        document.push_str(&source[trail]);
    }
    document.push_str(&source[content]);
    document.push_str("</body></html>");
    Some(document)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}
