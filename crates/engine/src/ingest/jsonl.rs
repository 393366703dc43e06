//! Loading a JSONL file of records `{"id","title","text", ...metadata}`: one record = one doc,
//! `id` = `doc_id`. `text` is read as Markdown (headings split sections; plain text is one
//! section). Optional string fields `summary`/`description`, `url`, `source`, `product`,
//! `version`, `domain`, `section`, `platform`, `role`, `page_type` and `tags` (array or comma
//! list) go into the metadata, overriding the mapping; `source` defaults to the JSONL source
//! name (see `writer::SourceScope`). Bad lines are skipped and reported as `file:line`.

use super::markdown::parse_markdown;
use super::records::{truncate_words, SourceDoc};
use super::tree::{FileNote, LoadOptions, Loaded, SUMMARY_MAX_CHARS};
use serde_json::Value;
use std::path::Path;

pub fn load_jsonl(path: &Path, options: &LoadOptions<'_>) -> std::io::Result<Loaded> {
    let content = std::fs::read(path)?;
    let content = String::from_utf8_lossy(&content);
    let mut loaded = Loaded::default();
    let mut seen = std::collections::HashSet::new();
    for (number, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let location = format!("{}:{}", path.display(), number + 1);
        let parsed = serde_json::from_str::<Value>(line).map_err(|error| format!("invalid JSON: {error}"));
        match parsed.and_then(|value| record_to_doc(&value, options)) {
            Ok(doc) if !seen.insert(doc.doc_id.clone()) => {
                loaded.skipped.push(FileNote { path: location, reason: format!("duplicate id {:?}", doc.doc_id) })
            }
            Ok(doc) => loaded.docs.push(doc),
            Err(reason) => loaded.skipped.push(FileNote { path: location, reason }),
        }
    }
    Ok(loaded)
}

/// One JSONL object → a doc; `Err` says why it cannot be ingested.
pub(crate) fn record_to_doc(value: &Value, options: &LoadOptions<'_>) -> Result<SourceDoc, String> {
    let Value::Object(object) = value else { return Err("not a JSON object".to_string()) };
    let id = match object.get("id").or_else(|| object.get("_id")) {
        Some(Value::String(id)) if !id.trim().is_empty() => id.trim().to_string(),
        Some(Value::Number(number)) => number.to_string(),
        Some(_) | None => return Err("missing \"id\"".to_string()),
    };
    let field = |name: &str| match object.get(name) {
        Some(Value::String(text)) => text.trim().to_string(),
        Some(Value::Number(number)) => number.to_string(),
        Some(_) | None => String::new(),
    };
    let text = field("text");
    let page = parse_markdown(&text, options.chunking.max_section_level);
    if page.sections.is_empty() {
        return Err(format!("record {id:?} has no text"));
    }
    let title = [field("title"), page.h1.clone().unwrap_or_default()]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or_else(|| id.clone());
    let summary = [field("summary"), field("description")].into_iter().find(|s| !s.is_empty()).unwrap_or_else(|| {
        let paragraph = if page.first_paragraph.is_empty() { &page.sections[0].text } else { &page.first_paragraph };
        truncate_words(paragraph, SUMMARY_MAX_CHARS)
    });
    let source = Some(field("source")).filter(|s| !s.is_empty()).unwrap_or_else(|| options.source_name.to_string());
    let mut topic = options.mapping.resolve(&source, &title);
    for (slot, name) in [
        (&mut topic.domain, "domain"),
        (&mut topic.section, "section"),
        (&mut topic.platform, "platform"),
        (&mut topic.role, "role"),
        (&mut topic.page_type, "page_type"),
        (&mut topic.product, "product"),
    ] {
        let value = field(name);
        if !value.is_empty() {
            *slot = value;
        }
    }
    if !options.product.is_empty() && field("product").is_empty() {
        topic.product = options.product.to_string();
    }
    let mut tags: Vec<String> = match object.get("tags") {
        Some(Value::Array(items)) => {
            items.iter().filter_map(|t| t.as_str()).map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect()
        }
        Some(Value::String(list)) => list.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect(),
        Some(_) | None => Vec::new(),
    };
    for tag in options.tags {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    let version = Some(field("version")).filter(|v| !v.is_empty()).unwrap_or_else(|| options.version.to_string());
    Ok(SourceDoc {
        doc_id: id,
        source,
        title,
        summary,
        url: field("url"),
        product: topic.product.clone(),
        version,
        tags,
        topic,
        sections: page.sections,
        breadcrumbs: Vec::new(),
    })
}
