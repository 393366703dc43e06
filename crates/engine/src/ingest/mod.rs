//! Ingestion: Markdown/MDX trees, HTML sites (a tree of built pages or a crawl) and JSONL files → doc, section and chunk records with topic
//! metadata, embedded in batches (with a persistent cache) and written to the snapshot file or
//! another `IndexWriter`. The bundled demo corpus and `themes suggest` use the same code.
//!
//! Flow: `tree`/`jsonl`/`crawl` load pages into `SourceDoc`s (`markdown` + `inline` parse
//! Markdown, `html` + `site` HTML, `mapping` derives topics) → `records` builds records (`split` makes chunks) → `embedding` embeds them
//! (`cache`) → `writer` replaces the tenant's source in the index. The service's `ingest` command
//! (`retrieval-service ingest`) drives a run.

pub(crate) mod cache;
pub(crate) mod chroma_writer;
pub(crate) mod crawl;
pub(crate) mod demo;
pub(crate) mod embedding;
mod frontmatter;
pub(crate) mod html;
mod html_chrome;
mod html_input;
mod html_slice;
mod inline;
pub(crate) mod jsonl;
pub(crate) mod mapping;
pub(crate) mod markdown;
mod page_options;
pub(crate) mod postgres_writer;
pub(crate) mod records;
pub(crate) mod site;
pub(crate) mod split;
pub(crate) mod themes_suggest;
pub(crate) mod tree;
pub(crate) mod writer;

use crate::embed::EmbedError;
use std::path::PathBuf;

// The items of the one-purpose modules above that the service uses, under `ingest::`.
pub use cache::EmbeddingCache;
pub use chroma_writer::ChromaSourceWriter;
pub use crawl::{crawl_site, CrawlLimits};
pub use demo::{demo_snapshot, DEMO_PAGES};
pub use embedding::{embed_records, EmbedPlan, EmbedProgress, EmbedStats};
pub use jsonl::load_jsonl;
pub use mapping::{MappingError, MappingRules};
pub use markdown::{parse_markdown, ParsedPage, RawSection};
pub use postgres_writer::PostgresSourceWriter;
pub(crate) use records::SourceDoc;
pub use records::{rfc3339_now, RecordSet};
pub use split::ChunkingConfig;
pub use themes_suggest::suggest_themes;
pub use tree::{load_sitemap, load_tree, FileNote, LoadOptions, Loaded};
pub use writer::{page_hashes, without_pages, IndexWriter, IngestBatch, SnapshotWriter, SourceScope, WriteOutcome};

/// Why an ingest run failed. Problems with single files are not errors: they are skipped and
/// listed in `IngestReport::skipped`.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("input path {} does not exist", .0.display())]
    PathNotFound(PathBuf),
    #[error("cannot read {path}: {message}")]
    Input { path: String, message: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Mapping(mapping::MappingError),
    #[error("nothing to ingest under {0}: no page could be read (the index was not changed)")]
    NothingToIngest(String),
    #[error("embedding failed: {0}")]
    Embedding(EmbedError),
    #[error("the embedder returned unusable vectors: {0}")]
    BadEmbedding(String),
    #[error(
        "the index holds {existing}-dimensional vectors but this run produced {new}-dimensional ones; \
         re-ingest every source with one model or write to another snapshot (--out)"
    )]
    DimensionMismatch { existing: usize, new: usize },
    #[error(
        "the index was built with embedding model {existing:?} but this run uses {new:?}; \
         re-ingest every source with one model or write to another snapshot (--out)"
    )]
    ModelMismatch { existing: String, new: String },
    #[error("snapshot: {0}")]
    Snapshot(String),
    #[error("no snapshot path: pass --out or set RETR_INDEX_PATH")]
    NoOutput,
    #[error("no index writer for backend {0} in this build")]
    NoWriter(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// Builds the records of every doc for one tenant (all stamped with `indexed_at`).
pub fn build_record_set(tenant_id: &str, docs: &[SourceDoc], chunking: &ChunkingConfig, indexed_at: &str) -> RecordSet {
    let mut set = RecordSet::default();
    for doc in docs {
        set.extend(records::build_records(tenant_id, doc, chunking, indexed_at));
    }
    set
}
