//! Inline text helpers shared by the Markdown reader and the front matter: one line of Markdown
//! to plain text (through pulldown-cmark), HTML/JSX tags to text, entity decoding and space
//! collapsing.

use pulldown_cmark::{Event, Options, Parser};

/// Tags that sit inside a line of text: removing them must not glue or split words.
const INLINE_TAGS: &[&str] =
    &["a", "b", "i", "u", "em", "strong", "code", "span", "kbd", "sup", "sub", "mark", "abbr", "s", "small", "del"];

/// One line of inline Markdown (a title, a description) → plain text: code spans keep their
/// content, images become their alt text, links their text, tags vanish, emphasis markers and
/// escapes are removed. A leading `#`, `-`, `1.`… is text here, never a block marker.
pub(crate) fn clean_inline(line: &str) -> String {
    let line = line.replace(['\n', '\r'], " ");
    let line = line.trim();
    let mut source = String::with_capacity(line.len() + 2);
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if starts_block(line) {
        source.push('\\');
        source.push_str(line);
    } else if digits > 0 && line[digits..].starts_with(['.', ')']) {
        source.push_str(&line[..digits]);
        source.push('\\');
        source.push_str(&line[digits..]);
    } else {
        source.push_str(line);
    }
    let mut out = String::new();
    for event in Parser::new_ext(&source, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Text(text) | Event::Code(text) => out.push_str(&text),
            Event::Html(html) | Event::InlineHtml(html) => out.push_str(&html_to_text(&html, true)),
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            _ => {}
        }
    }
    collapse_spaces(&out).trim().to_string()
}

/// Whether a single line would be read as a heading, quote, list item or rule.
fn starts_block(line: &str) -> bool {
    let Some(first) = line.chars().next() else { return false };
    let after = line.trim_start_matches(first);
    match first {
        '>' => true,
        '#' => after.is_empty() || after.starts_with([' ', '\t']),
        '-' | '+' | '*' | '_' => {
            line[1..].starts_with([' ', '\t']) || line.chars().all(|c| c == first || c == ' ' || c == '\t')
        }
        _ => false,
    }
}

/// Raw HTML (or JSX) → its text: comments and `<script>`/`<style>` bodies vanish, `<img>`
/// becomes its `alt`, autolinks keep their address, other tags vanish (inline ones) or become
/// a line break (`inline` = false) or a space (`inline` = true); entities are decoded.
pub(crate) fn html_to_text(html: &str, inline: bool) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(body) = tail.strip_prefix("<!--") {
            rest = body.find("-->").map_or("", |end| &body[end + 3..]);
            continue;
        }
        let Some(tag) = parse_tag(tail) else {
            out.push('<');
            rest = &tail[1..];
            continue;
        };
        rest = &tail[tag.len..];
        if tag.autolink {
            out.push_str(&tail[1..tag.len - 1]);
        } else if !tag.closing && (tag.name == "script" || tag.name == "style") {
            let close = format!("</{}", tag.name);
            rest = find_ignore_case(rest, &close).map_or("", |end| &rest[end..]);
        } else if let Some(alt) = tag.alt {
            out.push_str(&format!(" {alt} "));
        } else if !INLINE_TAGS.contains(&tag.name.as_str()) {
            out.push(if inline { ' ' } else { '\n' });
        }
    }
    out.push_str(rest);
    decode_entities(&out)
}

/// A tag at the start of `text`: `<name …>`, `</name>`, `<name/>`, or an autolink `<https://…>`.
pub(crate) struct Tag {
    pub(crate) name: String,
    pub(crate) closing: bool,
    pub(crate) autolink: bool,
    pub(crate) alt: Option<String>,
    /// Bytes up to and including `>`.
    pub(crate) len: usize,
}

pub(crate) fn parse_tag(text: &str) -> Option<Tag> {
    let after = text.strip_prefix('<')?;
    let (closing, name_start) = match after.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, after),
    };
    let name: String = name_start.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let end = text.find('>')?;
    let inner = &text[1..end];
    if !closing && (inner.contains("://") || (inner.contains('@') && !inner.contains(' '))) && !inner.contains(' ') {
        return Some(Tag { name, closing, autolink: true, alt: None, len: end + 1 });
    }
    let next = name_start[name.len()..].chars().next();
    if !next.is_some_and(|c| c.is_whitespace() || c == '>' || c == '/') {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let alt = (lower == "img").then(|| attribute(inner, "alt")).flatten().filter(|alt| !alt.trim().is_empty());
    Some(Tag { name: lower, closing, autolink: false, alt, len: end + 1 })
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!("{name}="))? + name.len() + 1;
    let value = &tag[at..];
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &value[1..];
    Some(value[..value.find(quote)?].to_string())
}

fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack.to_ascii_lowercase().find(&needle.to_ascii_lowercase())
}

/// Whether the tag name is one that sits inside a line of text (`<b>`, `<kbd>`…).
pub(crate) fn is_inline_tag(name: &str) -> bool {
    INLINE_TAGS.contains(&name)
}

/// Decodes the common named entities and numeric ones (`&#39;`, `&#x2014;`).
pub(crate) fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    const NAMED: &[(&str, char)] = &[
        ("nbsp", ' '),
        ("lt", '<'),
        ("gt", '>'),
        ("quot", '"'),
        ("apos", '\''),
        ("mdash", '—'),
        ("ndash", '–'),
        ("laquo", '«'),
        ("raquo", '»'),
        ("hellip", '…'),
        ("amp", '&'),
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        let tail = &rest[start + 1..];
        let decoded = tail.find(';').filter(|&end| end <= 10).and_then(|end| {
            let name = &tail[..end];
            let c = if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
            } else if let Some(decimal) = name.strip_prefix('#') {
                decimal.parse().ok().and_then(char::from_u32)
            } else {
                NAMED.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &tail[end + 1..];
            }
            None => {
                out.push('&');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Collapses inner runs of spaces, tabs and no-break spaces to one space; leading indentation
/// is kept, trailing spaces are removed.
pub(crate) fn collapse_spaces(text: &str) -> String {
    let indent_len = text.len() - text.trim_start_matches([' ', '\t']).len();
    let (indent, body) = text.split_at(indent_len);
    let mut out = String::from(indent);
    let mut previous_space = false;
    for c in body.chars() {
        let space = c == ' ' || c == '\t' || c == '\u{a0}';
        if space && previous_space {
            continue;
        }
        out.push(if space { ' ' } else { c });
        previous_space = space;
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::{clean_inline, html_to_text};

    #[test]
    fn links_images_and_code() {
        let cases = [
            ("См. [настройки](/docs/admin/settings) и ![Схема чата](img/chat.png)", "См. настройки и Схема чата"),
            ("[![логотип](logo.png)](https://x.ru)", "логотип"),
            ("команда `npm install <pkg>` и `a_b_c`", "команда npm install <pkg> и a_b_c"),
            ("``код с ` внутри``", "код с ` внутри"),
            ("[x] без ссылки", "[x] без ссылки"),
            ("[опция `$stealth` модификатора](/general/x#stealth) тут", "опция $stealth модификатора тут"),
            ("`[a](b)` в коде", "[a](b) в коде"),
        ];
        for (input, expected) in cases {
            assert_eq!(clean_inline(input), expected, "{input}");
        }
    }

    #[test]
    fn tags_emphasis_entities() {
        let cases = [
            ("<b>Важно</b>: нажмите <kbd>Ctrl</kbd>", "Важно: нажмите Ctrl"),
            ("строка<br/>вторая", "строка вторая"),
            ("адрес <https://example.com/a> тут", "адрес https://example.com/a тут"),
            ("_Блокировка рекламы_ и **жирный** и ~~старое~~", "Блокировка рекламы и жирный и старое"),
            ("snake_case_name и 2 * 3 и ~5 минут", "snake_case_name и 2 * 3 и ~5 минут"),
            ("a &lt; b &amp;&nbsp;c", "a < b & c"),
            ("экранированный \\_символ\\_ и \\*", "экранированный _символ_ и *"),
            ("меньше <5 минут", "меньше <5 минут"),
            ("кабеля USB **![](usb.png)** к компьютеру", "кабеля USB к компьютеру"),
            (
                "**Запускать на сайтах**выберите и Общие →**Дополнительные**",
                "Запускать на сайтахвыберите и Общие →Дополнительные",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(clean_inline(input), expected, "{input}");
        }
    }

    #[test]
    fn block_markers_are_text_in_a_title() {
        for title in ["# Не заголовок", "- не список", "2024. Итоги года", "> не цитата", "1) пункт", "***"]
        {
            assert_eq!(clean_inline(title), title, "{title}");
        }
    }

    #[test]
    fn html_becomes_its_text() {
        let html = "<div align=\"center\">\n<!-- скрыто -->\n<img src=\"a.png\" alt=\"Схема\"/><script>var x = 1;</script>\n<p>Текст &mdash; <b>жирный</b>&#33;</p>\n</div>";
        let text = html_to_text(html, false);
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        assert_eq!(lines, vec!["Схема", "Текст — жирный!"]);
    }
}
