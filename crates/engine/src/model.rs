//! The data model shared by every layer: the three index levels and their records.

use serde::{Deserialize, Serialize};

pub(crate) use crate::shared_str::{SharedStr, SharedText};

/// One of the three levels of the index: a page (doc), a heading's section, a chunk of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Doc,
    Section,
    Chunk,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Doc, Level::Section, Level::Chunk];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Doc => "doc",
            Level::Section => "section",
            Level::Chunk => "chunk",
        }
    }
}

/// Metadata carried by every record; level-specific fields are empty where they do not apply.
///
/// Doc records leave `section_id`, `chunk_id`, `heading` empty; section records leave `chunk_id`
/// empty. The topic fields (`domain`, `section`, `platform`, `role`, `page_type`) are on every level.
/// The fields a page's records repeat (its ids, title, summary, URL, source, topics, product,
/// version, `indexed_at`) are `SharedStr`s: one allocation for all the records that carry them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub tenant_id: SharedStr,
    pub doc_id: SharedStr,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_id: Option<String>,
    pub title: SharedStr,
    pub summary: SharedStr,
    pub url: SharedStr,
    pub source: SharedStr,
    pub product: SharedStr,
    pub version: SharedStr,
    pub tags: Vec<String>,
    pub domain: SharedStr,
    pub section: SharedStr,
    pub platform: SharedStr,
    pub role: SharedStr,
    pub page_type: SharedStr,
    pub heading: String,
    pub heading_path: Vec<String>,
    /// The page's breadcrumb trail on its site (an HTML page that shows one), outermost first;
    /// empty for other pages, and then not written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breadcrumbs: Vec<String>,
    pub page: u32,
    pub chunk_index: u32,
    pub content_length: u32,
    pub indexed_at: SharedStr,
}

/// Longest accepted tenant id; tenant ids are `[A-Za-z0-9._-]`.
pub(crate) const MAX_TENANT_ID_CHARS: usize = 128;

/// The hard cap of `max_results` (a prompt holds few hits): larger request values are capped,
/// larger settings rejected; a learned re-ranker takes at most this many candidates.
pub const MAX_RESULTS_CAP: usize = 50;

/// The rule of a tenant id: 1–`MAX_TENANT_ID_CHARS` characters of `[A-Za-z0-9._-]`. The error is
/// the message alone; `search::validate_tenant` names the field `tenant_id` in front of it.
pub(crate) fn validate_tenant_id(tenant_id: &str) -> Result<(), String> {
    if tenant_id.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if tenant_id.chars().count() > MAX_TENANT_ID_CHARS
        || !tenant_id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(format!("must be 1–{MAX_TENANT_ID_CHARS} characters of [A-Za-z0-9._-]"));
    }
    Ok(())
}

/// A stored record of any level: its id, metadata, the text it was embedded from and its vector.
///
/// `text` is what dense and lexical search see (doc: title + summary; section: heading path +
/// section text; chunk: chunk text). Only `/chunks/window` and `/context` ever return it. A
/// chunk's text, a passage of its section's, is a share of the section's text once an index holds
/// both (`IndexBuilder::add`).
///
/// It is written with its metadata's fields beside `id`, `text` and `embedding`, and read through
/// `RecordFields`, the same fields in one flat struct: serde's `flatten` would first copy every
/// field of every record into a buffer of its own (a snapshot holds millions of records).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RecordFields")]
pub struct Record {
    pub id: String,
    #[serde(flatten)]
    pub meta: Metadata,
    #[serde(default)]
    pub text: SharedText,
    #[serde(default)]
    pub embedding: Vec<f32>,
}

/// A `Record` as it is read: `id`, `Metadata`'s fields, `text` and `embedding`, each but `id`
/// defaulted when absent, as `Record` with a flattened `Metadata` reads them.
#[derive(Deserialize)]
struct RecordFields {
    id: String,
    #[serde(default)]
    tenant_id: SharedStr,
    #[serde(default)]
    doc_id: SharedStr,
    #[serde(default)]
    section_id: Option<String>,
    #[serde(default)]
    chunk_id: Option<String>,
    #[serde(default)]
    title: SharedStr,
    #[serde(default)]
    summary: SharedStr,
    #[serde(default)]
    url: SharedStr,
    #[serde(default)]
    source: SharedStr,
    #[serde(default)]
    product: SharedStr,
    #[serde(default)]
    version: SharedStr,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    domain: SharedStr,
    #[serde(default)]
    section: SharedStr,
    #[serde(default)]
    platform: SharedStr,
    #[serde(default)]
    role: SharedStr,
    #[serde(default)]
    page_type: SharedStr,
    #[serde(default)]
    heading: String,
    #[serde(default)]
    heading_path: Vec<String>,
    #[serde(default)]
    breadcrumbs: Vec<String>,
    #[serde(default)]
    page: u32,
    #[serde(default)]
    chunk_index: u32,
    #[serde(default)]
    content_length: u32,
    #[serde(default)]
    indexed_at: SharedStr,
    #[serde(default)]
    text: SharedText,
    #[serde(default)]
    embedding: Vec<f32>,
}

impl From<RecordFields> for Record {
    fn from(fields: RecordFields) -> Self {
        let meta = Metadata {
            tenant_id: fields.tenant_id,
            doc_id: fields.doc_id,
            section_id: fields.section_id,
            chunk_id: fields.chunk_id,
            title: fields.title,
            summary: fields.summary,
            url: fields.url,
            source: fields.source,
            product: fields.product,
            version: fields.version,
            tags: fields.tags,
            domain: fields.domain,
            section: fields.section,
            platform: fields.platform,
            role: fields.role,
            page_type: fields.page_type,
            heading: fields.heading,
            heading_path: fields.heading_path,
            breadcrumbs: fields.breadcrumbs,
            page: fields.page,
            chunk_index: fields.chunk_index,
            content_length: fields.content_length,
            indexed_at: fields.indexed_at,
        };
        Record { id: fields.id, meta, text: fields.text, embedding: fields.embedding }
    }
}

impl Record {
    pub fn level(&self) -> Level {
        if self.meta.chunk_id.is_some() {
            Level::Chunk
        } else if self.meta.section_id.is_some() {
            Level::Section
        } else {
            Level::Doc
        }
    }
}

/// The in-memory snapshot file written by `ingest` and loaded by the in-memory backend.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub format_version: u32,
    #[serde(default)]
    pub indexed_at: String,
    #[serde(default)]
    pub embedding_model: String,
    #[serde(default)]
    pub dimension: usize,
    #[serde(default)]
    pub docs: Vec<Record>,
    #[serde(default)]
    pub sections: Vec<Record>,
    #[serde(default)]
    pub chunks: Vec<Record>,
}

impl Snapshot {
    pub const FORMAT_VERSION: u32 = 1;

    pub(crate) fn records(&self, level: Level) -> &[Record] {
        match level {
            Level::Doc => &self.docs,
            Level::Section => &self.sections,
            Level::Chunk => &self.chunks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Record` read with its metadata flattened reads: `id`, `text` and `embedding` beside
    /// `Metadata` read from the same object.
    fn as_flattened(text: &str) -> serde_json::Result<Record> {
        #[derive(Deserialize)]
        struct Own {
            id: String,
            #[serde(default)]
            text: String,
            #[serde(default)]
            embedding: Vec<f32>,
        }
        let own: Own = serde_json::from_str(text)?;
        let meta: Metadata = serde_json::from_str(text)?;
        Ok(Record { id: own.id, meta, text: own.text.into(), embedding: own.embedding })
    }

    #[test]
    fn a_record_reads_its_metadata_beside_its_own_fields() {
        let full = Record {
            id: "c1".into(),
            meta: Metadata {
                tenant_id: "t".into(),
                doc_id: "d".into(),
                section_id: Some("s".into()),
                chunk_id: Some("c1".into()),
                title: "Заголовок".into(),
                summary: "summary".into(),
                url: "/d".into(),
                source: "d.md".into(),
                product: "p".into(),
                version: "2".into(),
                tags: vec!["a".into(), "b".into()],
                domain: "dom".into(),
                section: "sec".into(),
                platform: "ios".into(),
                role: "user".into(),
                page_type: "faq".into(),
                heading: "H".into(),
                heading_path: vec!["H0".into(), "H".into()],
                breadcrumbs: vec!["Главная".into(), "Раздел".into()],
                page: 3,
                chunk_index: 4,
                content_length: 5,
                indexed_at: "2026-11-28T00:00:00Z".into(),
            },
            text: "text".into(),
            embedding: vec![0.5, -1.0],
        };
        let written = serde_json::to_string(&full).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&written).unwrap(), full);
        for text in [
            written.as_str(),
            r#"{"id":"c"}"#,
            r#"{"id":"c","section_id":null,"tags":[],"unknown":{"nested":[1,2]},"page":7}"#,
            r#"{"tenant_id":"t","doc_id":"d","chunk_id":"x","id":"c","text":"x","embedding":[1]}"#,
        ] {
            assert_eq!(serde_json::from_str::<Record>(text).unwrap(), as_flattened(text).unwrap(), "{text}");
        }
        for bad in [
            r#"{"tenant_id":"t"}"#,
            r#"{"id":"c","page":-1}"#,
            r#"{"id":"c","title":null}"#,
            r#"{"id":"c","tags":"a"}"#,
            r#"{"id":"c","text":5}"#,
            r#"{"id":"c","title":"a","title":"b"}"#,
        ] {
            assert!(serde_json::from_str::<Record>(bad).is_err(), "{bad}");
            assert!(as_flattened(bad).is_err(), "{bad}");
        }
    }
}
