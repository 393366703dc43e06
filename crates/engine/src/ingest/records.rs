//! A loaded page (`SourceDoc`) → its doc, section and chunk records with stable ids and every
//! `Metadata` field filled (embeddings are added later).
//!
//! Ids: `doc_id` is given by the loader (tree: `{source_name}/{path relative to the tree root}`,
//! extension kept so `a.md` and `a.mdx` never collide; JSONL: the record's `id`); sections are
//! `{doc_id}#s{n}` and chunks `{section_id}-c{m}`, n and m counted from 0. `page` is the section
//! number n on sections and chunks and `chunk_index` is m, so sorting a doc's chunks by
//! (page, chunk_index) reassembles the page in order. Texts: doc = title + summary; section =
//! heading path (joined with " > ") + section text; chunk = the window text alone (its heading
//! path is in the metadata and in its section's text).

use super::mapping::Topic;
use super::markdown::RawSection;
use super::split::{split_into_chunks, ChunkingConfig};
use crate::model::{Metadata, Record};

/// One page or JSONL record, parsed and mapped, ready to become records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceDoc {
    pub(crate) doc_id: String,
    /// The `source` metadata: the path relative to the tree root, or the JSONL record's source.
    pub(crate) source: String,
    pub(crate) title: String,
    pub(crate) summary: String,
    pub(crate) url: String,
    pub(crate) product: String,
    pub(crate) version: String,
    pub(crate) tags: Vec<String>,
    pub(crate) topic: Topic,
    pub(crate) sections: Vec<RawSection>,
    /// The page's breadcrumb trail (HTML pages), outermost first.
    pub(crate) breadcrumbs: Vec<String>,
}

/// Records of the three levels, in page order within each level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordSet {
    pub docs: Vec<Record>,
    pub sections: Vec<Record>,
    pub chunks: Vec<Record>,
}

impl RecordSet {
    pub(crate) fn extend(&mut self, other: RecordSet) {
        self.docs.extend(other.docs);
        self.sections.extend(other.sections);
        self.chunks.extend(other.chunks);
    }

    pub(crate) fn all_mut(&mut self) -> impl Iterator<Item = &mut Record> {
        self.docs.iter_mut().chain(self.sections.iter_mut()).chain(self.chunks.iter_mut())
    }
}

/// Builds the records of one doc for `tenant_id`, all stamped with `indexed_at`.
pub(crate) fn build_records(
    tenant_id: &str,
    doc: &SourceDoc,
    chunking: &ChunkingConfig,
    indexed_at: &str,
) -> RecordSet {
    let page_length: usize = doc.sections.iter().map(|s| s.text.chars().count()).sum();
    let base = Metadata {
        tenant_id: tenant_id.into(),
        doc_id: doc.doc_id.as_str().into(),
        section_id: None,
        chunk_id: None,
        title: doc.title.as_str().into(),
        summary: doc.summary.as_str().into(),
        url: doc.url.as_str().into(),
        source: doc.source.as_str().into(),
        product: doc.product.as_str().into(),
        version: doc.version.as_str().into(),
        tags: doc.tags.clone(),
        domain: doc.topic.domain.as_str().into(),
        section: doc.topic.section.as_str().into(),
        platform: doc.topic.platform.as_str().into(),
        role: doc.topic.role.as_str().into(),
        page_type: doc.topic.page_type.as_str().into(),
        heading: String::new(),
        heading_path: Vec::new(),
        breadcrumbs: doc.breadcrumbs.clone(),
        page: 0,
        chunk_index: 0,
        content_length: clamp_u32(page_length),
        indexed_at: indexed_at.into(),
    };
    let doc_text = if doc.summary.is_empty() { doc.title.clone() } else { format!("{}\n{}", doc.title, doc.summary) };
    let mut set = RecordSet {
        docs: vec![Record { id: doc.doc_id.clone(), meta: base.clone(), text: doc_text.into(), embedding: Vec::new() }],
        ..RecordSet::default()
    };
    for (page, section) in doc.sections.iter().enumerate() {
        let section_id = format!("{}#s{page}", doc.doc_id);
        let mut heading_path = vec![doc.title.clone()];
        heading_path.extend(section.headings.iter().cloned());
        let heading = heading_path.last().cloned().unwrap_or_default();
        let section_meta = Metadata {
            section_id: Some(section_id.clone()),
            heading,
            heading_path: heading_path.clone(),
            page: clamp_u32(page),
            content_length: clamp_u32(section.text.chars().count()),
            ..base.clone()
        };
        set.sections.push(Record {
            id: section_id.clone(),
            meta: section_meta.clone(),
            text: format!("{}\n{}", heading_path.join(" > "), section.text).into(),
            embedding: Vec::new(),
        });
        for (chunk_index, text) in split_into_chunks(&section.text, chunking).into_iter().enumerate() {
            let chunk_id = format!("{section_id}-c{chunk_index}");
            set.chunks.push(Record {
                id: chunk_id.clone(),
                meta: Metadata {
                    chunk_id: Some(chunk_id),
                    chunk_index: clamp_u32(chunk_index),
                    content_length: clamp_u32(text.chars().count()),
                    ..section_meta.clone()
                },
                text: text.into(),
                embedding: Vec::new(),
            });
        }
    }
    set
}

fn clamp_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// Shortens `text` to at most `max_chars` characters at a word boundary, adding "…" when cut.
pub(crate) fn truncate_words(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let cut: String = text.chars().take(max_chars).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(space) if space > 0 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches(|c: char| c.is_whitespace() || c == ',' || c == ':'))
}

/// The current time as RFC 3339 UTC with second precision (`2025-01-31T12:00:00Z`).
pub fn rfc3339_now() -> String {
    let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339_from_unix(seconds)
}

/// Formats Unix seconds as RFC 3339 UTC (Howard Hinnant's days-to-civil algorithm).
pub(crate) fn rfc3339_from_unix(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let second_of_day = seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_from_unix(1_735_689_599), "2024-12-31T23:59:59Z");
        assert_eq!(rfc3339_from_unix(1_709_210_096), "2024-02-29T12:34:56Z");
    }

    #[test]
    fn truncation_stops_at_words() {
        assert_eq!(truncate_words("коротко", 20), "коротко");
        assert_eq!(truncate_words("один два три четыре", 12), "один два…");
    }

    #[test]
    fn ids_order_and_fields() {
        let doc = SourceDoc {
            doc_id: "demo/docs/admin/tags.md".into(),
            source: "docs/admin/tags.md".into(),
            title: "Обязательные теги".into(),
            summary: "Как настроить".into(),
            topic: Topic {
                domain: "d".into(),
                section: "admin".into(),
                role: "administrator".into(),
                ..Topic::default()
            },
            sections: vec![
                RawSection { headings: vec![], text: "Вступление.".into() },
                RawSection {
                    headings: vec!["Настройка".into()], text: "раз два три четыре пять шесть".into()
                },
            ],
            ..SourceDoc::default()
        };
        let chunking = ChunkingConfig { max_tokens: 3, overlap_tokens: 0, ..ChunkingConfig::default() };
        let set = build_records("t", &doc, &chunking, "2024-01-01T00:00:00Z");
        assert_eq!(set.docs[0].text, "Обязательные теги\nКак настроить");
        assert_eq!(set.sections[1].id, "demo/docs/admin/tags.md#s1");
        assert_eq!(set.sections[1].text, "Обязательные теги > Настройка\nраз два три четыре пять шесть");
        assert_eq!(set.sections[1].meta.heading, "Настройка");
        let ids: Vec<(u32, u32, &str)> =
            set.chunks.iter().map(|c| (c.meta.page, c.meta.chunk_index, c.id.as_str())).collect();
        assert_eq!(ids[0], (0, 0, "demo/docs/admin/tags.md#s0-c0"));
        assert_eq!(ids[1], (1, 0, "demo/docs/admin/tags.md#s1-c0"));
        assert_eq!(ids[2], (1, 1, "demo/docs/admin/tags.md#s1-c1"));
        for record in set.docs.iter().chain(&set.sections).chain(&set.chunks) {
            assert_eq!((record.meta.section.as_str(), record.meta.role.as_str()), ("admin", "administrator"));
            assert_eq!(record.meta.indexed_at, "2024-01-01T00:00:00Z");
            assert!(record.meta.content_length > 0);
        }
    }
}
