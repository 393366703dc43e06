//! Markdown / MDX (Docusaurus) pages → front matter plus heading-delimited sections of readable
//! text. Hand-written line scanner: code fences are kept verbatim (headings inside them are not
//! headings), MDX `import`/`export` lines, JSX/HTML tags and HTML comments are dropped,
//! admonition fences (`:::info Title`) are reduced to their title, tables become `a | b` rows,
//! images become their alt text and links their text (see `inline.rs`).

use super::frontmatter::split_front_matter;
use super::inline::clean_inline;

pub use super::frontmatter::FrontMatter;

/// Headings of this level or shallower start a new section; deeper ones stay inside as text lines.
pub const DEFAULT_MAX_SECTION_LEVEL: usize = 3;

/// A heading-delimited part of a page: `headings` are the enclosing headings below the page
/// title (empty for the text before the first heading), `text` the cleaned body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSection {
    pub headings: Vec<String>,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedPage {
    pub front: FrontMatter,
    /// The first level-1 heading, a title candidate when the front matter has none.
    pub h1: Option<String>,
    /// Non-empty sections in page order.
    pub sections: Vec<RawSection>,
    /// The first prose paragraph outside admonitions (or inside one, if there is no other).
    pub first_paragraph: String,
    /// Problems worth reporting (broken front matter); the page is still usable.
    pub warnings: Vec<String>,
}

/// Parses a page. Broken front matter is reported in `warnings` and ignored (the page is kept
/// with default title and no tags); the function never fails.
pub fn parse_markdown(source: &str, max_section_level: usize) -> ParsedPage {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source).replace("\r\n", "\n");
    let (front, body, warnings) = split_front_matter(&source);
    let mut page = parse_body(body, max_section_level);
    page.front = front;
    page.warnings = warnings;
    page
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum LineKind {
    Prose,
    Other,
}

struct BodyScanner {
    max_section_level: usize,
    sections: Vec<RawSection>,
    headings: Vec<(usize, String)>,
    lines: Vec<String>,
    h1: Option<String>,
    paragraph: Vec<String>,
    paragraph_in_admonition: bool,
    first_paragraph: Option<String>,
    fallback_paragraph: Option<String>,
    admonition_depth: usize,
}

fn parse_body(body: &str, max_section_level: usize) -> ParsedPage {
    let mut scanner = BodyScanner {
        max_section_level,
        sections: Vec::new(),
        headings: Vec::new(),
        lines: Vec::new(),
        h1: None,
        paragraph: Vec::new(),
        paragraph_in_admonition: false,
        first_paragraph: None,
        fallback_paragraph: None,
        admonition_depth: 0,
    };
    let mut fence: Option<(char, usize)> = None;
    let mut in_comment = false;
    let mut in_tag = false;
    let mut import_depth: Option<i32> = None;
    for raw in body.lines() {
        if let Some((fence_char, fence_len)) = fence {
            let trimmed = raw.trim_start();
            if trimmed.chars().take_while(|&c| c == fence_char).count() >= fence_len
                && trimmed.trim_start_matches(fence_char).trim().is_empty()
            {
                fence = None;
            } else {
                scanner.push(raw.trim_end().to_string(), LineKind::Other);
            }
            continue;
        }
        let line = strip_comments(raw, &mut in_comment);
        let trimmed = line.trim();
        if let Some(depth) = import_depth {
            let depth = depth + brace_balance(trimmed);
            import_depth = (depth > 0).then_some(depth);
            continue;
        }
        if let Some(opened) = fence_open(trimmed) {
            scanner.end_paragraph();
            fence = Some(opened);
            continue;
        }
        if is_module_line(trimmed) {
            let depth = brace_balance(trimmed);
            import_depth = (depth > 0).then_some(depth);
            continue;
        }
        if let Some((level, text)) = heading(trimmed) {
            scanner.heading(level, text);
            continue;
        }
        if let Some(title) = trimmed.trim_start_matches('>').trim_start().strip_prefix(":::") {
            scanner.admonition(title);
            continue;
        }
        if trimmed.is_empty() {
            scanner.end_paragraph();
            scanner.push(String::new(), LineKind::Other);
            continue;
        }
        if is_table_separator(trimmed) || is_reference_definition(trimmed) || is_rule(trimmed) {
            continue;
        }
        let cleaned = strip_tags(line.trim_end(), &mut in_tag);
        let cleaned = cleaned.trim_end();
        if cleaned.trim().is_empty() {
            continue;
        }
        let content = cleaned.trim_start().trim_start_matches('>').trim_start();
        if content.starts_with('|') || content.ends_with('|') {
            let row: Vec<&str> = content.trim_matches('|').split('|').map(str::trim).collect();
            scanner.push(row.join(" | "), LineKind::Other);
        } else {
            let indent = if raw.trim_start().starts_with('>') {
                ""
            } else {
                &cleaned[..cleaned.len() - cleaned.trim_start().len()]
            };
            scanner.push(format!("{indent}{content}"), LineKind::Prose);
        }
    }
    scanner.finish()
}

impl BodyScanner {
    fn push(&mut self, line: String, kind: LineKind) {
        if kind == LineKind::Prose {
            if self.paragraph.is_empty() {
                self.paragraph_in_admonition = self.admonition_depth > 0;
            }
            self.paragraph.push(line.trim().to_string());
        } else if !line.is_empty() {
            self.end_paragraph();
        }
        self.lines.push(line);
    }

    fn end_paragraph(&mut self) {
        if self.paragraph.is_empty() {
            return;
        }
        let text = self.paragraph.join(" ");
        self.paragraph.clear();
        let slot = if self.paragraph_in_admonition { &mut self.fallback_paragraph } else { &mut self.first_paragraph };
        if slot.is_none() {
            *slot = Some(text);
        }
    }

    fn admonition(&mut self, rest: &str) {
        self.end_paragraph();
        let rest = rest.trim();
        if rest.is_empty() {
            self.admonition_depth = self.admonition_depth.saturating_sub(1);
            return;
        }
        self.admonition_depth += 1;
        let title = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let title = clean_inline(title.trim().trim_start_matches('[').trim_end_matches(']'));
        if !title.trim().is_empty() {
            self.lines.push(format!("{}:", title.trim()));
        }
    }

    fn heading(&mut self, level: usize, text: String) {
        self.end_paragraph();
        if level == 1 && self.h1.is_none() {
            self.h1 = Some(text.clone());
        }
        if level > self.max_section_level {
            self.lines.push(String::new());
            self.lines.push(text);
            return;
        }
        self.flush_section();
        self.headings.retain(|(l, _)| *l < level);
        if level > 1 {
            self.headings.push((level, text));
        }
    }

    fn flush_section(&mut self) {
        let text = tidy(&self.lines);
        self.lines.clear();
        if !text.is_empty() {
            self.sections.push(RawSection { headings: self.headings.iter().map(|(_, t)| t.clone()).collect(), text });
        }
    }

    fn finish(mut self) -> ParsedPage {
        self.end_paragraph();
        self.flush_section();
        ParsedPage {
            h1: self.h1,
            sections: self.sections,
            first_paragraph: self.first_paragraph.or(self.fallback_paragraph).unwrap_or_default(),
            ..ParsedPage::default()
        }
    }
}

/// Joins lines, trimming trailing blanks and collapsing runs of blank lines to one.
fn tidy(lines: &[String]) -> String {
    let mut out = String::new();
    let mut blank = false;
    for line in lines {
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push_str("\n\n");
        } else if !out.is_empty() {
            out.push('\n');
        }
        blank = false;
        out.push_str(line.trim_end());
    }
    out
}

fn fence_open(trimmed: &str) -> Option<(char, usize)> {
    let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|&c| c == fence_char).count();
    (len >= 3 && !(fence_char == '`' && trimmed[len..].contains('`'))).then_some((fence_char, len))
}

fn heading(trimmed: &str) -> Option<(usize, String)> {
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    let mut text = rest.trim().trim_end_matches('#').trim_end().to_string();
    if let Some(start) = text.rfind("{#") {
        if text.ends_with('}') {
            text.truncate(start);
        }
    }
    let text = clean_inline(text.trim());
    let text = text.trim();
    (!text.is_empty()).then(|| (level, text.to_string()))
}

fn is_module_line(trimmed: &str) -> bool {
    let Some(rest) = trimmed.strip_prefix("import ").or_else(|| trimmed.strip_prefix("export ")) else { return false };
    trimmed.starts_with("import ")
        && (rest.contains(" from ") || rest.starts_with('\'') || rest.starts_with('"') || rest.starts_with('{'))
        || ["const ", "default ", "function ", "let ", "{"].iter().any(|p| rest.starts_with(p))
}

fn brace_balance(text: &str) -> i32 {
    text.chars()
        .map(|c| match c {
            '{' | '(' | '[' => 1,
            '}' | ')' | ']' => -1,
            _ => 0,
        })
        .sum()
}

fn is_table_separator(trimmed: &str) -> bool {
    trimmed.contains('-') && trimmed.contains('|') && trimmed.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

fn is_reference_definition(trimmed: &str) -> bool {
    trimmed.starts_with('[')
        && !trimmed.starts_with("[!")
        && trimmed.find("]:").is_some_and(|i| !trimmed[1..i].contains(']'))
}

fn is_rule(trimmed: &str) -> bool {
    let Some(first) = trimmed.chars().next().filter(|c| matches!(c, '-' | '*' | '_')) else { return false };
    trimmed.chars().filter(|&c| c == first).count() >= 3 && trimmed.chars().all(|c| c == first || c == ' ')
}

fn strip_comments(line: &str, in_comment: &mut bool) -> String {
    let mut out = String::new();
    let mut rest = line;
    loop {
        if *in_comment {
            match rest.find("-->") {
                Some(end) => {
                    rest = &rest[end + 3..];
                    *in_comment = false;
                }
                None => return out,
            }
        } else {
            match rest.find("<!--") {
                Some(start) => {
                    out.push_str(&rest[..start]);
                    rest = &rest[start + 4..];
                    *in_comment = true;
                }
                None => {
                    out.push_str(rest);
                    return out;
                }
            }
        }
    }
}

/// Removes JSX/HTML tags (keeping their inner text); a tag left open at the end of a line
/// swallows text until its `>` on a later line.
fn strip_tags(line: &str, in_tag: &mut bool) -> String {
    let mut rest = line;
    if *in_tag {
        match rest.find('>') {
            Some(end) => {
                rest = &rest[end + 1..];
                *in_tag = false;
            }
            None => return String::new(),
        }
    }
    let opens_unclosed = rest.rfind('<').is_some_and(|start| {
        let after = &rest[start + 1..];
        after.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && !after.contains('>')
    });
    if opens_unclosed {
        let start = rest.rfind('<').unwrap_or(rest.len());
        *in_tag = true;
        clean_inline(&rest[..start])
    } else {
        clean_inline(rest)
    }
}
