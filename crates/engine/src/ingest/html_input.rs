//! An HTML page's bytes before parsing: whether a file is HTML, its encoding (byte order mark,
//! transport charset, `<meta>` charset, else UTF-8; binary and undecodable pages refused with the
//! reason), and how deep its markup nests (a page nested too deep is refused before the parser
//! spends minutes on it).

/// Whether `bytes` look like an HTML document (used for files without an `.html` name).
pub(crate) fn sniff_html(bytes: &[u8]) -> bool {
    let start = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let head: Vec<u8> =
        start.iter().skip_while(|b| b.is_ascii_whitespace()).take(15).map(u8::to_ascii_lowercase).collect();
    head.starts_with(b"<!doctype html") || head.starts_with(b"<html")
}

/// Decodes a page: BOM, else `transport_charset` (an HTTP `Content-Type` charset), else a
/// `<meta charset>` / `<meta http-equiv content="…charset=…">` in the first 1024 bytes, else UTF-8.
/// Binary content and undecodable UTF-8 are an `Err` with the reason. UTF-8 bytes given as a
/// `Vec` become the page's text without a copy (a built page may weigh megabytes).
pub(crate) fn decode_html(bytes: impl Into<Vec<u8>>, transport_charset: Option<&str>) -> Result<String, String> {
    let bytes: Vec<u8> = bytes.into();
    if let Some((encoding, bom_length)) = encoding_rs::Encoding::for_bom(&bytes) {
        let (text, had_errors) = encoding.decode_without_bom_handling(&bytes[bom_length..]);
        if had_errors && encoding == encoding_rs::UTF_8 {
            return Err("not valid UTF-8 despite its byte order mark: not read".to_string());
        }
        return Ok(text.into_owned());
    }
    if memchr::memchr(0, &bytes[..bytes.len().min(8192)]).is_some() {
        return Err("binary content (NUL bytes), not an HTML page: not read".to_string());
    }
    let declared = transport_charset.and_then(|label| encoding_rs::Encoding::for_label(label.trim().as_bytes()));
    let declared = declared.or_else(|| meta_charset(&bytes[..bytes.len().min(1024)]));
    match declared {
        Some(encoding) if encoding != encoding_rs::UTF_8 => {
            // A legacy single- or multi-byte encoding maps every byte sequence (errors become U+FFFD).
            let (text, _) = encoding.decode_without_bom_handling(&bytes);
            Ok(text.into_owned())
        }
        Some(_) | None => String::from_utf8(bytes).map_err(|error| {
            format!(
                "not valid UTF-8 (at byte {}) and no other charset declared: not read",
                error.utf8_error().valid_up_to()
            )
        }),
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
    memchr::memmem::find(haystack, needle)
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
        let name = &source[name_start..name_start + name_length];
        let tag_end = memchr::memchr(b'>', &bytes[name_start..]).map_or(bytes.len(), |end| name_start + end);
        let self_closing = tag_end > 0 && bytes.get(tag_end - 1) == Some(&b'/');
        at = tag_end.min(bytes.len());
        if self_closing || NOT_NESTING.iter().any(|other| other.eq_ignore_ascii_case(name)) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
            continue;
        }
        if name.eq_ignore_ascii_case("script") || name.eq_ignore_ascii_case("style") {
            at = find_end_tag(&bytes[at..], name.as_bytes()).map_or(bytes.len(), |end| at + end);
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

/// Where the first `</name` (any ASCII case) starts in `haystack`: the end of a raw-text
/// element such as `script`, found by a vectorised search for `</`.
pub(crate) fn find_end_tag(haystack: &[u8], name: &[u8]) -> Option<usize> {
    memchr::memmem::find_iter(haystack, b"</").find(|&at| {
        haystack.get(at + 2..at + 2 + name.len()).is_some_and(|candidate| candidate.eq_ignore_ascii_case(name))
    })
}
