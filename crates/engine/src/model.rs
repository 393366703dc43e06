//! The data model shared by every layer: the three index levels and their records.

use serde::{Deserialize, Serialize};

/// One of the three levels of the index (SPEC §1).
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub tenant_id: String,
    pub doc_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_id: Option<String>,
    pub title: String,
    pub summary: String,
    pub url: String,
    pub source: String,
    pub product: String,
    pub version: String,
    pub tags: Vec<String>,
    pub domain: String,
    pub section: String,
    pub platform: String,
    pub role: String,
    pub page_type: String,
    pub heading: String,
    pub heading_path: Vec<String>,
    pub page: u32,
    pub chunk_index: u32,
    pub content_length: u32,
    pub indexed_at: String,
}

/// Longest accepted tenant id; tenant ids are `[A-Za-z0-9._-]`.
pub(crate) const MAX_TENANT_ID_CHARS: usize = 128;

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
/// section text; chunk: chunk text). Only `/chunks/window` and `/context` ever return it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    #[serde(flatten)]
    pub meta: Metadata,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub embedding: Vec<f32>,
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
