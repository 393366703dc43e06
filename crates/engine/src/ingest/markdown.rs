//! Markdown / MDX (Docusaurus) pages → front matter plus heading-delimited sections of readable
//! text. The body is CommonMark (with tables, footnotes, strikethrough, task lists and `{#id}`
//! heading attributes) read by pulldown-cmark, after a small MDX/Docusaurus pre-pass for what
//! CommonMark does not know: `import`/`export` lines, `{/* */}` and `<!-- -->` comments,
//! admonitions (`:::info Title` … `:::`, reduced to a `Title:` line) and lines of JSX/HTML
//! components (tags dropped, their text kept).
//!
//! Text: links keep their text, images their alt text, inline code its content; code blocks keep
//! their lines; list items are one line each (`- `, `1. `), nested ones indented; table rows are
//! cells joined by ` | `; footnote definitions are `[label] text`.

use super::frontmatter::split_front_matter;
use super::inline::{collapse_spaces, html_to_text, is_inline_tag, parse_tag};
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::ops::Range;

pub(crate) use super::frontmatter::FrontMatter;

/// Headings of this level or shallower start a new section; deeper ones stay inside as text lines.
pub(crate) const DEFAULT_MAX_SECTION_LEVEL: usize = 3;

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
    /// The first paragraph outside lists and admonitions (or inside an admonition, if there is
    /// no other).
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

/// CommonMark plus the GitHub extensions Docusaurus pages use, and `{#id}` after headings.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

fn parse_body(body: &str, max_section_level: usize) -> ParsedPage {
    let prepared = mdx_prepass(body);
    let mut renderer = Renderer::new(max_section_level, &prepared.admonitions);
    for (event, range) in Parser::new_ext(&prepared.text, options()).into_offset_iter() {
        renderer.event(event, range.start);
    }
    renderer.finish()
}

// ---------------------------------------------------------------------------------------------
// MDX / Docusaurus pre-pass

/// The body with the MDX-only syntax replaced by CommonMark, and the byte ranges of admonitions
/// in it (their paragraphs are not the page summary unless nothing else is).
struct Prepared {
    text: String,
    admonitions: Vec<Range<usize>>,
}

#[derive(Default)]
struct PrePass {
    out: String,
    admonitions: Vec<Range<usize>>,
    admonition_start: usize,
    admonition_depth: usize,
    fence: Option<(char, usize)>,
    /// Inside a comment: the text that ends it (`-->` or `*/}`).
    comment: Option<&'static str>,
    /// Inside `<script>`/`<style>`: its closing tag.
    raw_element: Option<String>,
    /// Inside a tag whose attributes continue on the next lines.
    in_tag: bool,
    /// Inside a multi-line `import`/`export`: the open bracket count.
    module_depth: Option<i32>,
}

fn mdx_prepass(body: &str) -> Prepared {
    let mut pass = PrePass::default();
    for raw in body.lines() {
        pass.line(raw);
    }
    if pass.admonition_depth > 0 {
        pass.admonitions.push(pass.admonition_start..pass.out.len());
    }
    Prepared { text: pass.out, admonitions: pass.admonitions }
}

impl PrePass {
    fn push(&mut self, line: &str) {
        self.out.push_str(line);
        self.out.push('\n');
    }

    fn line(&mut self, raw: &str) {
        if let Some((fence_char, fence_len)) = self.fence {
            let trimmed = raw.trim_start();
            if trimmed.chars().take_while(|&c| c == fence_char).count() >= fence_len
                && trimmed.trim_start_matches(fence_char).trim().is_empty()
            {
                self.fence = None;
            }
            self.push(raw);
            return;
        }
        if let Some(close) = &self.raw_element {
            if let Some(end) = raw.to_ascii_lowercase().find(close.as_str()) {
                let after = &raw[end..];
                let rest = after.find('>').map_or("", |i| &after[i + 1..]);
                self.raw_element = None;
                self.line(rest);
            } else {
                self.push("");
            }
            return;
        }
        let line = self.strip_comments(raw);
        let trimmed = line.trim();
        if let Some(depth) = self.module_depth {
            let depth = depth + bracket_balance(trimmed);
            self.module_depth = (depth > 0).then_some(depth);
            self.push("");
            return;
        }
        if trimmed.is_empty() {
            // A line that held only a comment ends the paragraph, like a blank line.
            self.push("");
            return;
        }
        if fence_open(trimmed).is_some() {
            self.fence = fence_open(trimmed);
            self.push(&line);
            return;
        }
        if is_module_line(trimmed) {
            let depth = bracket_balance(trimmed);
            self.module_depth = (depth > 0).then_some(depth);
            self.push("");
            return;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let content = trimmed.trim_start_matches('>').trim_start();
        if content.starts_with(":::") {
            self.admonition(indent, content.trim_start_matches(':').trim());
            return;
        }
        if self.in_tag || starts_with_tag(trimmed) {
            let indent = indent.to_string();
            self.tag_line(&indent, trimmed);
            return;
        }
        self.push(&line);
    }

    /// `:::type Title` / `:::type[Title]` opens an admonition (kept as a `Title:` line), `:::`
    /// closes it; both end the paragraph around them.
    fn admonition(&mut self, indent: &str, rest: &str) {
        self.push("");
        if rest.is_empty() {
            if self.admonition_depth > 0 {
                self.admonition_depth -= 1;
                if self.admonition_depth == 0 {
                    self.admonitions.push(self.admonition_start..self.out.len());
                }
            }
            return;
        }
        if self.admonition_depth == 0 {
            self.admonition_start = self.out.len();
        }
        self.admonition_depth += 1;
        let title = admonition_title(rest);
        if !title.is_empty() {
            self.push(&format!("{indent}{title}:"));
            self.push("");
        }
    }

    /// A line that starts with a JSX/HTML tag: the tags go, the text stays (Markdown in it is
    /// still read). A line that opens or closes with a block-level tag is its own paragraph.
    fn tag_line(&mut self, indent: &str, mut rest: &str) {
        let mut text = String::new();
        let mut block_start = false;
        let mut block_end = false;
        if self.in_tag {
            match rest.find('>') {
                Some(end) => {
                    rest = &rest[end + 1..];
                    self.in_tag = false;
                    block_start = true;
                }
                None => {
                    self.push("");
                    return;
                }
            }
        }
        let mut first = !block_start;
        while let Some(start) = rest.find('<') {
            text.push_str(&rest[..start]);
            let tail = &rest[start..];
            let Some(tag) = parse_tag(tail) else {
                if opens_multiline_tag(tail) {
                    self.in_tag = true;
                    block_end = true;
                    rest = "";
                    break;
                }
                text.push('<');
                rest = &tail[1..];
                first = false;
                continue;
            };
            rest = &tail[tag.len..];
            let inline = tag.autolink || is_inline_tag(&tag.name);
            if first && start == 0 && !inline {
                block_start = true;
            }
            first = false;
            block_end = !inline && rest.trim().is_empty();
            if tag.autolink {
                text.push_str(&tail[1..tag.len - 1]);
            } else if let Some(alt) = &tag.alt {
                text.push_str(&format!(" {alt} "));
            } else if !tag.closing && (tag.name == "script" || tag.name == "style") {
                let close = format!("</{}", tag.name);
                match rest.to_ascii_lowercase().find(&close) {
                    Some(end) => rest = rest[end..].find('>').map_or("", |i| &rest[end + i + 1..]),
                    None => {
                        self.raw_element = Some(close);
                        rest = "";
                    }
                }
            } else if !inline {
                text.push(' ');
            }
        }
        text.push_str(rest);
        let text = text.trim();
        if block_start {
            self.push("");
        }
        if !text.is_empty() {
            self.push(&format!("{indent}{text}"));
        }
        if block_end && !text.is_empty() {
            self.push("");
        }
    }

    /// Removes `<!-- -->` and `{/* */}` comments (which may span lines), except inside code spans.
    fn strip_comments(&mut self, line: &str) -> String {
        let mut out = String::new();
        let mut rest = line;
        loop {
            if let Some(end_marker) = self.comment {
                match rest.find(end_marker) {
                    Some(end) => {
                        rest = &rest[end + end_marker.len()..];
                        self.comment = None;
                    }
                    None => return out,
                }
            }
            let next = [("<!--", "-->"), ("{/*", "*/}")]
                .into_iter()
                .filter_map(|(open, close)| rest.find(open).map(|at| (at, open, close)))
                .filter(|(at, _, _)| !inside_code_span(&out, &rest[..*at]))
                .min_by_key(|(at, _, _)| *at);
            match next {
                Some((at, open, close)) => {
                    out.push_str(&rest[..at]);
                    rest = &rest[at + open.len()..];
                    self.comment = Some(close);
                }
                None => {
                    out.push_str(rest);
                    return out;
                }
            }
        }
    }
}

/// Whether a position after `before` + `prefix` is inside a backtick code span of the line.
fn inside_code_span(before: &str, prefix: &str) -> bool {
    let mut open: Option<usize> = None;
    for run in before.chars().chain(prefix.chars()).collect::<String>().split(|c| c != '`').filter(|r| !r.is_empty()) {
        open = match open {
            Some(len) if len == run.len() => None,
            Some(len) => Some(len),
            None => Some(run.len()),
        };
    }
    open.is_some()
}

/// The title of an admonition from what follows its `:::` (`info Title`, `tip[Title]`), empty
/// when it has none (`info`, `note {#id}`, or a closing `:::`).
fn admonition_title(rest: &str) -> &str {
    let title = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let title = title.trim().trim_start_matches('[').trim_end_matches(']').trim();
    if title.starts_with('{') {
        ""
    } else {
        title
    }
}

/// A prose line that is an admonition's `:::` fence, left as text by a site generator that does
/// not read them: `Some` of what the Markdown reader writes for it (the title, or nothing).
fn directive_line(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix(":::")?;
    (rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_alphabetic())).then(|| admonition_title(rest))
}

/// A block's lines outside and inside `:::` admonition fences (the fence lines left out), with
/// `open` fences open before it; and how many are open after it.
fn split_at_directives(text: &str, mut open: usize) -> (String, String, usize) {
    let (mut outside, mut inside) = (Vec::new(), Vec::new());
    for line in text.lines() {
        match directive_line(line) {
            Some(_) if line.trim() == ":::" => open = open.saturating_sub(1),
            Some(_) => open += 1,
            None if open > 0 => inside.push(line),
            None => outside.push(line),
        }
    }
    (outside.join("\n"), inside.join("\n"), open)
}

/// A heading's text without a trailing attribute list (`{#id}`, `{: .class}`), which the Markdown
/// reader takes as attributes and a site generator without the extension leaves as text.
fn without_attribute_list(text: &str) -> &str {
    let trimmed = text.trim_end();
    match trimmed.strip_suffix('}').and_then(|rest| rest.rfind('{').map(|at| (at, &rest[at + 1..]))) {
        Some((at, inside)) if inside.starts_with(['#', '.', ':']) && !inside.contains(['{', '}']) => {
            trimmed[..at].trim_end()
        }
        _ => text,
    }
}

fn starts_with_tag(trimmed: &str) -> bool {
    parse_tag(trimmed).is_some() || opens_multiline_tag(trimmed)
}

/// `<Tabs` or `<img src="…"` with the rest of the tag (its `>`) on later lines.
fn opens_multiline_tag(text: &str) -> bool {
    let Some(after) = text.strip_prefix('<') else { return false };
    let name_len = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').count();
    after.starts_with(|c: char| c.is_ascii_alphabetic())
        && after[name_len..].chars().next().is_none_or(char::is_whitespace)
        && !text.contains('>')
}

fn fence_open(trimmed: &str) -> Option<(char, usize)> {
    let fence_char = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|&c| c == fence_char).count();
    (len >= 3 && !(fence_char == '`' && trimmed[len..].contains('`'))).then_some((fence_char, len))
}

fn is_module_line(trimmed: &str) -> bool {
    let Some(rest) = trimmed.strip_prefix("import ").or_else(|| trimmed.strip_prefix("export ")) else { return false };
    trimmed.starts_with("import ")
        && (rest.contains(" from ") || rest.starts_with('\'') || rest.starts_with('"') || rest.starts_with('{'))
        || ["const ", "default ", "function ", "let ", "{"].iter().any(|p| rest.starts_with(p))
}

fn bracket_balance(text: &str) -> i32 {
    text.chars()
        .map(|c| match c {
            '{' | '(' | '[' => 1,
            '}' | ')' | ']' => -1,
            _ => 0,
        })
        .sum()
}

// ---------------------------------------------------------------------------------------------
// pulldown-cmark events → sections of text

enum Container {
    List {
        next_number: Option<u64>,
        indent: String,
    },
    /// `marker` is the `- ` / `3. ` prefix until the item's first line is written; `indent`
    /// prefixes its later lines.
    Item {
        marker: Option<String>,
        indent: String,
    },
    Quote,
    Footnote {
        label: Option<String>,
    },
}

/// Turns pulldown-cmark events into sections of text. The HTML reader (`html.rs`) feeds it the
/// same events for a page's elements, so both formats give the same sections and texts.
pub(crate) struct Renderer<'a> {
    max_section_level: usize,
    admonitions: &'a [Range<usize>],
    /// Set by a reader without source offsets (HTML): the paragraphs read now are inside an
    /// admonition.
    in_admonition: bool,
    /// Set by the HTML reader: prose lines that are `:::` admonition fences (a page built by a
    /// generator that left them as text) are read as the Markdown pre-pass reads them.
    directive_lines: bool,
    /// How many such admonitions are open at the text read so far.
    open_directives: usize,
    sections: Vec<RawSection>,
    headings: Vec<(usize, String)>,
    lines: Vec<String>,
    h1: Option<String>,
    first_paragraph: Option<String>,
    fallback_paragraph: Option<String>,
    stack: Vec<Container>,
    /// Inline text of the block being read (paragraph, heading, tight list item, table cell).
    inline: String,
    code: Option<String>,
    /// Rows done and the cells of the current row.
    table: Option<(Vec<String>, Vec<String>)>,
    paragraph_start: usize,
}

impl Renderer<'static> {
    /// A renderer for a reader that has no Markdown source (HTML): prose lines that are `:::`
    /// admonition fences are read as the Markdown reader reads them.
    pub(crate) fn without_source(max_section_level: usize) -> Self {
        let mut renderer = Renderer::new(max_section_level, &[]);
        renderer.directive_lines = true;
        renderer
    }
}

impl<'a> Renderer<'a> {
    /// An empty renderer; `admonitions` are the source's admonition blocks (byte ranges).
    fn new(max_section_level: usize, admonitions: &'a [Range<usize>]) -> Self {
        Renderer {
            max_section_level,
            admonitions,
            in_admonition: false,
            directive_lines: false,
            open_directives: 0,
            sections: Vec::new(),
            headings: Vec::new(),
            lines: Vec::new(),
            h1: None,
            first_paragraph: None,
            fallback_paragraph: None,
            stack: Vec::new(),
            inline: String::new(),
            code: None,
            table: None,
            paragraph_start: 0,
        }
    }
}

impl Renderer<'_> {
    pub(crate) fn set_in_admonition(&mut self, in_admonition: bool) {
        self.in_admonition = in_admonition;
    }

    pub(crate) fn event(&mut self, event: Event<'_>, offset: usize) {
        match event {
            Event::Start(tag) => self.start(tag, offset),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match &mut self.code {
                Some(code) => code.push_str(&text),
                None => self.inline.push_str(&text),
            },
            Event::Code(text) | Event::InlineMath(text) | Event::DisplayMath(text) => self.inline.push_str(&text),
            Event::Html(html) => self.inline.push_str(&html_to_text(&html, false)),
            Event::InlineHtml(html) => self.inline.push_str(&html_to_text(&html, true)),
            Event::FootnoteReference(label) => self.inline.push_str(&format!("[{label}]")),
            Event::SoftBreak | Event::HardBreak => self.inline.push('\n'),
            Event::Rule => self.flush_inline(),
            Event::TaskListMarker(done) => self.inline.push_str(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>, offset: usize) {
        match tag {
            Tag::Paragraph => {
                self.flush_inline();
                self.paragraph_start = offset;
            }
            Tag::Heading { .. }
            | Tag::HtmlBlock
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition => self.flush_inline(),
            Tag::BlockQuote(_) => {
                self.flush_inline();
                self.stack.push(Container::Quote);
            }
            Tag::CodeBlock(_) => {
                self.flush_inline();
                self.code = Some(String::new());
            }
            Tag::List(first_number) => {
                self.flush_inline();
                let indent = self.indent();
                self.stack.push(Container::List { next_number: first_number, indent });
            }
            Tag::Item => {
                self.flush_inline();
                let (marker, indent) = match self.stack.iter_mut().rev().find_map(|c| match c {
                    Container::List { next_number, indent } => Some((next_number, indent.clone())),
                    _ => None,
                }) {
                    Some((Some(number), indent)) => {
                        let marker = format!("{indent}{number}. ");
                        *number += 1;
                        (marker, indent)
                    }
                    Some((None, indent)) => (format!("{indent}- "), indent),
                    None => ("- ".to_string(), String::new()),
                };
                let indent = format!("{indent}{}", " ".repeat(marker.chars().count() - indent.chars().count()));
                self.stack.push(Container::Item { marker: Some(marker), indent });
            }
            Tag::FootnoteDefinition(label) => {
                self.flush_inline();
                self.stack.push(Container::Footnote { label: Some(format!("[{label}] ")) });
            }
            Tag::Table(_) => {
                self.flush_inline();
                self.table = Some((Vec::new(), Vec::new()));
            }
            Tag::TableCell => self.inline.clear(),
            Tag::TableHead
            | Tag::TableRow
            | Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. }
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                let in_item =
                    self.stack.iter().any(|c| matches!(c, Container::Item { .. } | Container::Footnote { .. }));
                if !in_item {
                    let in_admonition =
                        self.in_admonition || self.admonitions.iter().any(|r| r.contains(&self.paragraph_start));
                    // Lines inside `:::` fences left as text are an admonition's, as in Markdown.
                    let (outside, inside) = if self.directive_lines {
                        let (outside, inside, _) = split_at_directives(&self.inline, self.open_directives);
                        (one_line(&outside), one_line(&inside))
                    } else {
                        (one_line(&self.inline), String::new())
                    };
                    let (first, fallback) = if in_admonition {
                        (String::new(), format!("{outside} {inside}").trim().to_string())
                    } else {
                        (outside, inside)
                    };
                    if self.first_paragraph.is_none() && !first.is_empty() {
                        self.first_paragraph = Some(first);
                    }
                    if self.fallback_paragraph.is_none() && !fallback.is_empty() {
                        self.fallback_paragraph = Some(fallback);
                    }
                }
                self.flush_inline();
            }
            TagEnd::Heading(level) => {
                let text = one_line(&std::mem::take(&mut self.inline));
                self.heading(level as usize, without_attribute_list(&text).to_string());
            }
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                self.write_block(code.trim_end_matches('\n'), true);
            }
            TagEnd::BlockQuote(_) | TagEnd::Item | TagEnd::FootnoteDefinition => {
                self.flush_inline();
                self.stack.pop();
            }
            TagEnd::List(_) => {
                self.flush_inline();
                self.stack.pop();
                if !self.stack.iter().any(|c| matches!(c, Container::List { .. })) {
                    self.lines.push(String::new());
                }
            }
            TagEnd::TableCell => {
                let cell = one_line(&std::mem::take(&mut self.inline));
                if let Some((_, cells)) = &mut self.table {
                    cells.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some((rows, cells)) = &mut self.table {
                    if cells.iter().any(|c| !c.is_empty()) {
                        rows.push(cells.join(" | "));
                    }
                    cells.clear();
                }
            }
            TagEnd::Table => {
                let (rows, _) = self.table.take().unwrap_or_default();
                self.write_block(&rows.join("\n"), false);
            }
            TagEnd::HtmlBlock
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition => self.flush_inline(),
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    /// The indentation of the innermost list item's continuation lines.
    fn indent(&self) -> String {
        self.stack
            .iter()
            .rev()
            .find_map(|c| match c {
                Container::Item { indent, .. } => Some(indent.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Writes the pending inline text (a paragraph, or the text of a tight list item) as a block.
    fn flush_inline(&mut self) {
        if self.table.is_some() {
            return;
        }
        let text = std::mem::take(&mut self.inline);
        self.write_block(&text, false);
    }

    /// Writes a block: prose lines are space-collapsed and blank ones dropped, code lines are
    /// kept as they are. Outside lists, blocks are separated by a blank line; inside, the first
    /// line carries the item's marker and later ones its indentation.
    fn write_block(&mut self, text: &str, verbatim: bool) {
        if !verbatim && self.directive_lines && text.lines().any(|line| directive_line(line).is_some()) {
            self.open_directives = split_at_directives(text, self.open_directives).2;
            // Each fence ends the block before it; a titled one is a `Title:` block of its own.
            let mut block = Vec::new();
            for line in text.lines() {
                match directive_line(line) {
                    Some(title) => {
                        self.write_lines(&block.join("\n"));
                        block.clear();
                        if !title.is_empty() {
                            self.write_lines(&format!("{title}:"));
                        }
                    }
                    None => block.push(line),
                }
            }
            self.write_lines(&block.join("\n"));
            return;
        }
        self.write_lines_as(text, verbatim);
    }

    fn write_lines(&mut self, text: &str) {
        self.write_lines_as(text, false);
    }

    fn write_lines_as(&mut self, text: &str, verbatim: bool) {
        let lines: Vec<String> = if verbatim {
            text.lines().map(|l| l.trim_end().to_string()).collect()
        } else {
            text.lines().map(|l| collapse_spaces(l.trim())).filter(|l| !l.is_empty()).collect()
        };
        if lines.iter().all(|l| l.is_empty()) {
            return;
        }
        let in_list = self.stack.iter().any(|c| matches!(c, Container::Item { .. }));
        let indent = self.indent();
        let mut first = indent.clone();
        for container in self.stack.iter_mut().rev() {
            match container {
                Container::Item { marker, .. } => {
                    if let Some(marker) = marker.take() {
                        first = marker;
                    }
                    break;
                }
                Container::Footnote { label } => {
                    if let Some(label) = label.take() {
                        first = format!("{indent}{label}");
                    }
                    break;
                }
                Container::List { .. } | Container::Quote => {}
            }
        }
        if !in_list {
            self.lines.push(String::new());
        }
        for (i, line) in lines.into_iter().enumerate() {
            let prefix = if i == 0 { first.as_str() } else { indent.as_str() };
            self.lines.push(if line.is_empty() { line } else { format!("{prefix}{line}") });
        }
        if !in_list {
            self.lines.push(String::new());
        }
    }

    fn heading(&mut self, level: usize, text: String) {
        if text.is_empty() {
            return;
        }
        if level == 1 && self.h1.is_none() {
            self.h1 = Some(text.clone());
        }
        if level > self.max_section_level {
            self.write_block(&text, false);
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

    pub(crate) fn finish(mut self) -> ParsedPage {
        self.flush_inline();
        self.flush_section();
        ParsedPage {
            h1: self.h1,
            sections: self.sections,
            first_paragraph: self.first_paragraph.or(self.fallback_paragraph).unwrap_or_default(),
            ..ParsedPage::default()
        }
    }
}

/// Inline text on one line: line breaks become spaces, runs of spaces collapse.
fn one_line(text: &str) -> String {
    collapse_spaces(text.replace('\n', " ").trim())
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

#[cfg(test)]
mod tests {
    use super::{parse_markdown, RawSection};

    fn sections(source: &str) -> Vec<RawSection> {
        parse_markdown(source, 3).sections
    }

    fn text(source: &str) -> String {
        let all = sections(source);
        assert_eq!(all.len(), 1, "{all:?}");
        all[0].text.clone()
    }

    #[test]
    fn setext_headings_start_sections() {
        let page = parse_markdown("Заголовок страницы\n==================\n\nВступление.\n\nРаздел\n------\n\nТекст раздела\nна двух строках.\n", 3);
        assert_eq!(page.h1.as_deref(), Some("Заголовок страницы"));
        assert_eq!(page.sections.len(), 2, "{:?}", page.sections);
        assert_eq!(page.sections[0], RawSection { headings: vec![], text: "Вступление.".into() });
        assert_eq!(
            page.sections[1],
            RawSection {
                headings: vec!["Раздел".into()], text: "Текст раздела\nна двух строках.".into()
            }
        );
    }

    #[test]
    fn atx_heading_ids_and_closing_hashes_are_dropped() {
        let all = sections("## Настройки {#settings}\n\nа\n\n### Фильтры ###\n\nб\n");
        let paths: Vec<Vec<String>> = all.iter().map(|s| s.headings.clone()).collect();
        assert_eq!(paths, vec![vec!["Настройки".to_string()], vec!["Настройки".into(), "Фильтры".into()]]);
    }

    #[test]
    fn nested_lists_are_one_item_a_line_indented() {
        let source = "Шаги:\n\n1. Откройте **Настройки**.\n2. Выберите раздел:\n   - [Фильтры](/filters)\n   - Пользовательские правила\n\n     Их можно *экспортировать*.\n3. Сохраните.\n\n* [x] сделано\n* [ ] нет\n\nПосле списка.\n";
        assert_eq!(
            text(source),
            "Шаги:\n\n1. Откройте Настройки.\n2. Выберите раздел:\n   - Фильтры\n   - Пользовательские правила\n     Их можно экспортировать.\n3. Сохраните.\n\n- [x] сделано\n- [ ] нет\n\nПосле списка."
        );
    }

    #[test]
    fn loose_list_items_with_paragraphs_stay_together() {
        let source =
            "- [Функции](/features)\n\n  Основные функции\n\n- [Установка](/install)\n\n  Установка и удаление\n";
        assert_eq!(text(source), "- Функции\n  Основные функции\n- Установка\n  Установка и удаление");
    }

    #[test]
    fn html_blocks_keep_their_text() {
        let source = "До.\n\n<details>\n<summary>Как включить?</summary>\n\nОткройте **Настройки**.\n\n</details>\n\n<div align=\"center\">\n  <img src=\"a.png\" alt=\"Схема фильтрации\" />\n</div>\n\n<p>Абзац в <b>HTML</b> &mdash; тоже текст.</p>\n\n<script>\nvar hidden = 1;\n</script>\n\nПосле.\n";
        assert_eq!(
            text(source),
            "До.\n\nКак включить?\n\nОткройте Настройки.\n\nСхема фильтрации\n\nАбзац в HTML — тоже текст.\n\nПосле."
        );
    }

    #[test]
    fn tables_are_rows_of_cells() {
        let source = "| Параметр | Описание |\n|:--|--:|\n| `$domain` | ограничивает [домены](/x) |\n| a \\| b | <br/>строка |\n\nПосле таблицы.\n";
        assert_eq!(
            text(source),
            "Параметр | Описание\n$domain | ограничивает домены\na | b | строка\n\nПосле таблицы."
        );
    }

    #[test]
    fn footnotes_keep_reference_and_definition() {
        let source = "Правило работает в Safari[^1].\n\n[^1]: Начиная с версии 15.\n";
        assert_eq!(text(source), "Правило работает в Safari[1].\n\n[1] Начиная с версии 15.");
    }

    #[test]
    fn code_fences_are_verbatim() {
        let source = "Пример:\n\n```bash\n# не заголовок\nnpm install  <pkg>\n\n  отступ\n```\n\n~~~\n:::note не замечание\nimport x from 'y'\n<div>не тег</div>\n~~~\n\n- в списке:\n\n  ```\n  код\n  ```\n";
        assert_eq!(
            text(source),
            "Пример:\n\n# не заголовок\nnpm install  <pkg>\n\n  отступ\n\n:::note не замечание\nimport x from 'y'\n<div>не тег</div>\n\n- в списке:\n  код"
        );
    }

    #[test]
    fn mdx_syntax_is_removed_and_admonitions_keep_titles() {
        let source = "import Tabs from '@theme/Tabs';\nexport const meta = {\n  a: 1,\n};\n\n{/* комментарий MDX */}\n\n:::note[Обратите внимание]\n\nТекст <!-- скрыто --> замечания.\n\n:::\n\nПервый абзац.\n\n<Tabs\n  groupId=\"os\">\n<TabItem value=\"win\" label=\"Windows\">\n\nВнутри вкладки.\n\n</TabItem>\n</Tabs>\n";
        let page = parse_markdown(source, 3);
        assert_eq!(page.sections.len(), 1);
        assert_eq!(page.sections[0].text, "Обратите внимание:\n\nТекст замечания.\n\nПервый абзац.\n\nВнутри вкладки.");
        assert_eq!(page.first_paragraph, "Первый абзац.", "admonitions are not the summary");
        let only_admonition = parse_markdown(":::info\nТолько замечание.\n:::\n", 3);
        assert_eq!(only_admonition.first_paragraph, "Только замечание.");
    }

    #[test]
    fn comment_markers_inside_code_spans_are_text() {
        assert_eq!(text("Комментарии (`<!-- hidden -->`) не видны.\n"), "Комментарии (<!-- hidden -->) не видны.");
    }

    #[test]
    fn deep_headings_stay_in_their_section() {
        let all = sections("## Раздел\n\nа\n\n#### Подробно\n\nб\n");
        assert_eq!(all, vec![RawSection { headings: vec!["Раздел".into()], text: "а\n\nПодробно\n\nб".into() }]);
    }
}
