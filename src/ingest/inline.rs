//! Inline Markdown/MDX → plain text: code spans keep their content, images become their alt
//! text, links their text, HTML/JSX tags and `{/* */}` comments vanish (autolinks keep the URL),
//! emphasis markers and backslash escapes are removed, common HTML entities are decoded.

const ESCAPE_BASE: u32 = 0xE000;

/// Cleans one line of inline Markdown; leading indentation is kept, inner runs of spaces collapse.
pub fn clean_inline(line: &str) -> String {
    let raw: Vec<char> = line.chars().collect();
    let chars = replace_links(&raw, &code_mask(&raw));
    let mut out = String::new();
    let mut prose_start = 0;
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' || (i > 0 && chars[i - 1] == '\\') {
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        let Some(close) = find_backtick_run(&chars, i + run, run) else {
            i += run;
            continue;
        };
        out.push_str(&clean_prose(&chars[prose_start..i]));
        let code: String = chars[i + run..close].iter().collect();
        out.push_str(code.trim());
        i = close + run;
        prose_start = i;
    }
    out.push_str(&clean_prose(&chars[prose_start..]));
    collapse_spaces(&out)
}

/// `true` for the characters inside (and including the backticks of) code spans.
fn code_mask(chars: &[char]) -> Vec<bool> {
    let mut mask = vec![false; chars.len()];
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' || (i > 0 && chars[i - 1] == '\\') {
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        match find_backtick_run(chars, i + run, run) {
            Some(close) => {
                mask[i..close + run].iter_mut().for_each(|m| *m = true);
                i = close + run;
            }
            None => i += run,
        }
    }
    mask
}

fn find_backtick_run(chars: &[char], from: usize, run: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        if chars[i] == '`' {
            let len = chars[i..].iter().take_while(|&&c| c == '`').count();
            if len == run {
                return Some(i);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    None
}

fn clean_prose(chars: &[char]) -> String {
    let mut escaped: Vec<char> = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' && chars.get(i + 1).is_some_and(|c| c.is_ascii_punctuation()) {
            escaped.push(char::from_u32(ESCAPE_BASE + chars[i + 1] as u32).unwrap_or(chars[i + 1]));
            i += 2;
        } else {
            escaped.push(chars[i]);
            i += 1;
        }
    }
    let without_comments = remove_mdx_comments(&escaped);
    let without_tags = remove_tags(&without_comments);
    let without_emphasis = remove_emphasis(&without_tags);
    let text: String = without_emphasis
        .into_iter()
        .map(|c| {
            let code = c as u32;
            if (ESCAPE_BASE..ESCAPE_BASE + 128).contains(&code) {
                char::from_u32(code - ESCAPE_BASE).unwrap_or(c)
            } else {
                c
            }
        })
        .collect();
    decode_entities(&text)
}

fn remove_mdx_comments(chars: &[char]) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i..].starts_with(&['{', '/', '*']) {
            if let Some(end) =
                (i + 3..chars.len().saturating_sub(2)).find(|&j| chars[j..].starts_with(&['*', '/', '}']))
            {
                i = end + 3;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

fn matching(chars: &[char], in_code: &[bool], open_at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, &c) in chars[open_at..].iter().enumerate() {
        if in_code[open_at + offset] {
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(open_at + offset);
            }
        }
    }
    None
}

/// `![alt](src)` → alt, `[text](url)` and `[text][ref]` → text (recursively, for linked images);
/// a stray `](target)` left by a link broken across lines is dropped. Code spans are opaque.
fn replace_links(chars: &[char], in_code: &[bool]) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if in_code[i] {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let image = chars[i] == '!' && chars.get(i + 1) == Some(&'[');
        let bracket = if image { i + 1 } else { i };
        if chars[bracket] == '[' {
            if let Some(close) = matching(chars, in_code, bracket, '[', ']') {
                let target_end = match chars.get(close + 1) {
                    Some('(') => matching(chars, in_code, close + 1, '(', ')'),
                    Some('[') => matching(chars, in_code, close + 1, '[', ']'),
                    _ => None,
                };
                if let Some(end) = target_end {
                    out.extend(replace_links(&chars[bracket + 1..close], &in_code[bracket + 1..close]));
                    i = end + 1;
                    continue;
                }
            }
        }
        if chars[i] == ']' && chars.get(i + 1) == Some(&'(') {
            if let Some(end) = matching(chars, in_code, i + 1, '(', ')') {
                if !chars[i + 2..end].iter().any(|c| c.is_whitespace()) {
                    i = end + 1;
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

const INLINE_TAGS: &[&str] =
    &["a", "b", "i", "u", "em", "strong", "code", "span", "kbd", "sup", "sub", "mark", "abbr", "s"];

fn remove_tags(chars: &[char]) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '<' {
            let next = chars.get(i + 1).copied().unwrap_or(' ');
            let after = chars.get(i + 2).copied().unwrap_or(' ');
            let tag_like = next.is_ascii_alphabetic() || (next == '/' && after.is_ascii_alphabetic()) || next == '!';
            if let Some(end) = tag_like.then(|| chars[i..].iter().position(|&c| c == '>').map(|p| i + p)).flatten() {
                let inner: String = chars[i + 1..end].iter().collect();
                if inner.contains("://") || (inner.contains('@') && !inner.contains(' ')) {
                    out.extend(inner.chars());
                } else {
                    let name: String = inner
                        .trim_start_matches('/')
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .collect::<String>()
                        .to_ascii_lowercase();
                    if !INLINE_TAGS.contains(&name.as_str()) {
                        out.push(' ');
                    }
                }
                i = end + 1;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

fn remove_emphasis(chars: &[char]) -> Vec<char> {
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !matches!(c, '*' | '_' | '~') {
            out.push(c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        let before = if i == 0 { None } else { Some(chars[i - 1]) };
        let after = chars.get(i + run).copied();
        // CommonMark flanking rules: `*` may open/close inside words, `_` may not.
        let space = |x: Option<char>| x.is_none_or(char::is_whitespace);
        let punct = |x: Option<char>| x.is_some_and(|x| x.is_ascii_punctuation() || "«»—–→…“”„".contains(x));
        let left = !space(after) && (!punct(after) || space(before) || punct(before));
        let right = !space(before) && (!punct(before) || space(after) || punct(after));
        let strip = match c {
            '*' if run == 4 => true,
            '_' => (left && (!right || punct(before))) || (right && (!left || punct(after))),
            '~' => run >= 2 && (left || right),
            _ => left || right,
        };
        if !strip {
            out.extend(std::iter::repeat_n(c, run));
        }
        i += run;
    }
    out
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    const ENTITIES: &[(&str, &str)] = &[
        ("&nbsp;", " "),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&apos;", "'"),
        ("&mdash;", "—"),
        ("&ndash;", "–"),
        ("&laquo;", "«"),
        ("&raquo;", "»"),
        ("&hellip;", "…"),
        ("&amp;", "&"),
    ];
    ENTITIES.iter().fold(text.to_string(), |acc, (entity, value)| acc.replace(entity, value))
}

fn collapse_spaces(text: &str) -> String {
    let indent_len = text.len() - text.trim_start().len();
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
    use super::clean_inline;

    #[test]
    fn links_images_and_code() {
        let cases = [
            ("См. [настройки](/docs/admin/settings) и ![Схема чата](img/chat.png)", "См. настройки и Схема чата"),
            ("[![логотип](logo.png)](https://x.ru)", "логотип"),
            ("[по ссылке][ref] далее", "по ссылке далее"),
            ("команда `npm install <pkg>` и `a_b_c`", "команда npm install <pkg> и a_b_c"),
            ("``код с ` внутри``", "код с ` внутри"),
            ("[x] без ссылки", "[x] без ссылки"),
            ("[опция `$stealth` модификатора](/general/x#stealth) тут", "опция $stealth модификатора тут"),
            ("`[a](b)` в коде", "[a](b) в коде"),
            ("битая ссылка](/general/ad-filtering/x). Дальше", "битая ссылка. Дальше"),
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
            ("кабеля USB **![](usb.png)** к компьютеру", "кабеля USB к компьютеру"),
            (
                "**Запускать на сайтах**выберите и Общие →**Дополнительные**",
                "Запускать на сайтахвыберите и Общие →Дополнительные",
            ),
            ("a &lt; b &amp;&nbsp;c", "a < b & c"),
            ("экранированный \\_символ\\_ и \\*", "экранированный _символ_ и *"),
            ("текст {/* комментарий MDX */} дальше", "текст дальше"),
            ("меньше <5 минут", "меньше <5 минут"),
        ];
        for (input, expected) in cases {
            assert_eq!(clean_inline(input), expected, "{input}");
        }
    }

    #[test]
    fn keeps_indentation_of_list_items() {
        assert_eq!(clean_inline("  - пункт  списка"), "  - пункт списка");
    }
}
