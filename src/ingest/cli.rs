//! The `ingest` command: arguments, one run from input path to written index, and its report.

use crate::config::{Settings, VectorBackend};
use retrieval_engine::{
    ingest::{
        build_record_set, crawl_site, embed_records, load_jsonl, load_sitemap, load_tree, page_hashes, rfc3339_now,
        without_pages, ChunkingConfig, CrawlLimits, EmbedPlan, EmbeddingCache, FileNote, IndexWriter, IngestBatch,
        IngestError, LoadOptions, Loaded, MappingRules, SnapshotWriter, SourceScope,
    },
    Embedder,
};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the embedding cache lives when `RETR_EMBEDDING_CACHE_PATH` is not set.
pub(crate) const DEFAULT_EMBEDDING_CACHE_PATH: &str = ".cache/embeddings.jsonl";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IngestBackend {
    Memory,
    Chroma,
    Postgres,
}

/// `retrieval-service ingest <PATH> --tenant <ID> ...`
#[derive(Debug, Clone, clap::Args)]
pub struct IngestArgs {
    /// A directory of Markdown/MDX pages (Docusaurus) or of HTML pages (a built site, an HTML export),
    /// a built site's sitemap.xml (the pages it lists), a .jsonl file of {"id","title","text",...}
    /// records, or an http(s) URL whose site is crawled
    pub path: PathBuf,
    /// Tenant that owns the ingested docs
    #[arg(long)]
    pub tenant: String,
    /// Snapshot file to write (memory backend); default RETR_INDEX_PATH
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where to write; default RETR_VECTOR_BACKEND
    #[arg(long, value_enum)]
    pub backend: Option<IngestBackend>,
    /// Topic mapping rules (YAML); default RETR_MAPPING_PATH, else the built-in config/mapping.yaml
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    /// Product of every doc (overrides the mapping's product)
    #[arg(long, default_value = "")]
    pub product: String,
    /// Version of every doc
    #[arg(long, default_value = "")]
    pub version: String,
    /// Tags added to every doc (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Name of this source; re-ingesting it replaces its docs. Default: the directory or file name
    #[arg(long)]
    pub source_name: Option<String>,
    /// Base URL prepended to page routes (e.g. https://docs.example.com)
    #[arg(long, default_value = "")]
    pub base_url: String,
    /// Maximum chunk size in estimated tokens
    #[arg(long, default_value_t = 400)]
    pub chunk_tokens: usize,
    /// Overlap between consecutive chunks in estimated tokens
    #[arg(long, default_value_t = 60)]
    pub chunk_overlap: usize,
    /// Do not read or write the persistent embedding cache
    #[arg(long)]
    pub no_cache: bool,
    /// No progress output
    #[arg(long)]
    pub quiet: bool,
    /// Crawl (PATH is a URL): most pages fetched
    #[arg(long, default_value_t = 500)]
    pub crawl_max_pages: usize,
    /// Crawl: most links followed from the start URL
    #[arg(long, default_value_t = 8)]
    pub crawl_max_depth: usize,
    /// Crawl: most MiB of pages read in all
    #[arg(long, default_value_t = 200)]
    pub crawl_max_mib: u64,
    /// Crawl: milliseconds between two requests (robots.txt's Crawl-delay can make it longer)
    #[arg(long, default_value_t = 250)]
    pub crawl_delay_ms: u64,
    /// Crawl: seconds allowed for one request
    #[arg(long, default_value_t = 15)]
    pub crawl_timeout_secs: u64,
}

impl IngestArgs {
    /// Where this run writes: `--backend`, else `RETR_VECTOR_BACKEND`.
    pub fn backend_for(&self, settings: &Settings) -> IngestBackend {
        self.backend.unwrap_or(match settings.vector_backend {
            VectorBackend::Memory => IngestBackend::Memory,
            VectorBackend::Chroma => IngestBackend::Chroma,
            VectorBackend::Postgres => IngestBackend::Postgres,
        })
    }

    /// Arguments with every option at its default.
    pub fn new(path: impl Into<PathBuf>, tenant: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            tenant: tenant.into(),
            out: None,
            backend: None,
            mapping: None,
            product: String::new(),
            version: String::new(),
            tags: Vec::new(),
            source_name: None,
            base_url: String::new(),
            chunk_tokens: 400,
            chunk_overlap: 60,
            no_cache: false,
            quiet: false,
            crawl_max_pages: 500,
            crawl_max_depth: 8,
            crawl_max_mib: 200,
            crawl_delay_ms: 250,
            crawl_timeout_secs: 15,
        }
    }

    /// The URL to crawl when PATH is an http(s) URL.
    pub(crate) fn crawl_url(&self) -> Option<&str> {
        let text = self.path.to_str()?;
        (text.starts_with("http://") || text.starts_with("https://")).then_some(text)
    }

    fn crawl_limits(&self) -> CrawlLimits {
        CrawlLimits {
            max_pages: self.crawl_max_pages,
            max_depth: self.crawl_max_depth,
            max_bytes: self.crawl_max_mib.saturating_mul(1024 * 1024),
            delay: Duration::from_millis(self.crawl_delay_ms),
            timeout: Duration::from_secs(self.crawl_timeout_secs.max(1)),
        }
    }
}

/// Wall-clock seconds of each phase of a run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PhaseSeconds {
    pub(crate) load: f64,
    pub(crate) embed: f64,
    pub(crate) write: f64,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct IngestReport {
    pub(crate) tenant_id: String,
    pub(crate) source_name: String,
    pub docs: usize,
    pub sections: usize,
    pub chunks: usize,
    /// Files (or JSONL lines) not ingested, with the reason.
    pub skipped: Vec<FileNote>,
    /// Files ingested despite a problem (e.g. broken front matter ignored).
    pub warnings: Vec<FileNote>,
    pub(crate) embedding_model: String,
    pub(crate) dimension: usize,
    pub embedding_calls: usize,
    pub embedded_texts: usize,
    pub cache_hits: usize,
    /// Section vectors derived from their chunks (no embedding call).
    pub derived_vectors: usize,
    /// Embedding batches that failed, were split in two and retried.
    pub(crate) split_batches: usize,
    pub removed_docs: usize,
    /// Pages the index already held unchanged: neither embedded nor written again.
    pub unchanged_pages: usize,
    /// Seconds spent reading and parsing pages, embedding, and writing the index.
    pub(crate) phase_seconds: PhaseSeconds,
    pub(crate) elapsed: Duration,
    /// Snapshot path (memory) or the writer's location.
    pub(crate) location: String,
    pub snapshot_bytes: Option<u64>,
    /// The index version the write produced: pass it as `min_index_version` to read it back.
    pub index_version: Option<u64>,
}

impl fmt::Display for IngestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "ingested tenant {:?} source {:?} into {}", self.tenant_id, self.source_name, self.location)?;
        writeln!(
            f,
            "  docs {}, sections {}, chunks {}; removed docs {}; unchanged pages {} (not written again)",
            self.docs, self.sections, self.chunks, self.removed_docs, self.unchanged_pages
        )?;
        writeln!(
            f,
            "  embeddings: model {} (dim {}), {} calls, {} texts embedded, {} cache hits, {} section vectors \
             derived from chunks, {} failed batches split and retried",
            self.embedding_model,
            self.dimension,
            self.embedding_calls,
            self.embedded_texts,
            self.cache_hits,
            self.derived_vectors,
            self.split_batches
        )?;
        writeln!(
            f,
            "  seconds: load {:.1}, embed {:.1}, write {:.1}",
            self.phase_seconds.load, self.phase_seconds.embed, self.phase_seconds.write
        )?;
        if let Some(version) = self.index_version {
            writeln!(
                f,
                "  index_version {version} (a search with \"min_index_version\": \"{version}\" reads this write)"
            )?;
        }
        if let Some(bytes) = self.snapshot_bytes {
            writeln!(f, "  snapshot size {:.1} MiB", bytes as f64 / (1024.0 * 1024.0))?;
        }
        for note in &self.warnings {
            writeln!(f, "  warning: {}: {}", note.path, note.reason)?;
        }
        for note in &self.skipped {
            writeln!(f, "  skipped: {}: {}", note.path, note.reason)?;
        }
        write!(f, "  elapsed {:.2}s", self.elapsed.as_secs_f64())
    }
}

/// Runs `ingest` with the snapshot writer; `--backend chroma` or `postgres` fails with
/// `NoWriter` (use `run_ingest_with_writer` and pass that backend's writer).
pub async fn run_ingest(
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    args: &IngestArgs,
) -> Result<IngestReport, IngestError> {
    run_ingest_with_writer(settings, embedder, args, None).await
}

/// Runs `ingest`: load → records → embed (cached) → write. `remote_writer` (the Chroma or the
/// PostgreSQL writer) is used when the backend is Chroma or PostgreSQL. Nothing is written unless every step before succeeded. Pages the writer
/// already holds unchanged (`IndexWriter::stored_pages`) are neither embedded nor written.
pub async fn run_ingest_with_writer(
    settings: &Settings,
    embedder: Arc<dyn Embedder>,
    args: &IngestArgs,
    remote_writer: Option<Arc<dyn IndexWriter>>,
) -> Result<IngestReport, IngestError> {
    let started = Instant::now();
    if args.tenant.trim().is_empty() {
        return Err(IngestError::InvalidArgument("--tenant must not be empty".to_string()));
    }
    if args.crawl_url().is_none() && !args.path.exists() {
        return Err(IngestError::PathNotFound(args.path.clone()));
    }
    let writer: Arc<dyn IndexWriter> = match args.backend_for(settings) {
        IngestBackend::Memory => {
            let path = args.out.clone().or_else(|| settings.index_path.clone()).ok_or(IngestError::NoOutput)?;
            Arc::new(SnapshotWriter { path })
        }
        IngestBackend::Chroma => remote_writer.ok_or_else(|| IngestError::NoWriter("chroma".to_string()))?,
        IngestBackend::Postgres => remote_writer.ok_or_else(|| IngestError::NoWriter("postgres".to_string()))?,
    };
    let mapping = load_mapping(settings, args)?;
    let source_name = source_name(args)?;
    let chunking = ChunkingConfig {
        max_tokens: args.chunk_tokens.max(1),
        overlap_tokens: args.chunk_overlap,
        ..ChunkingConfig::default()
    };
    let loaded = load_input(&args.path, &source_name, args, mapping, chunking).await?;
    for note in &loaded.skipped {
        tracing::warn!(path = %note.path, reason = %note.reason, "file skipped");
    }
    for note in &loaded.warnings {
        tracing::warn!(path = %note.path, reason = %note.reason, "file ingested with a problem");
    }
    if loaded.docs.is_empty() {
        return Err(IngestError::NothingToIngest(args.path.display().to_string()));
    }
    let indexed_at = rfc3339_now();
    let records = build_record_set(&args.tenant, &loaded.docs, &chunking, &indexed_at);
    let (docs, sections, chunks) = (records.docs.len(), records.sections.len(), records.chunks.len());
    let scope = SourceScope { tenant_id: args.tenant.clone(), source_name: source_name.clone() };
    let stored = writer.stored_pages(&scope).await?;
    let kept_pages: std::collections::BTreeMap<String, String> = page_hashes(&records, embedder.model_name())
        .into_iter()
        .filter(|(doc, hash)| stored.get(doc) == Some(hash))
        .collect();
    let mut records = without_pages(records, &kept_pages);
    let load_seconds = started.elapsed().as_secs_f64();
    let embed_started = Instant::now();
    let mut cache = open_cache(settings, args, embedder.as_ref());
    let mut progress = super::progress::ProgressReporter::new(args.quiet);
    let plan = EmbedPlan {
        batch_size: settings.ingest_embedding_batch_size,
        concurrency: settings.ingest_embedding_concurrency,
    };
    let stats = embed_records(embedder.as_ref(), &mut records, plan, &mut cache, &mut |done, total| {
        progress.update(done, total)
    })
    .await?;
    let embed_seconds = embed_started.elapsed().as_secs_f64();
    let write_started = Instant::now();
    let dimension = records.docs.first().map(|r| r.embedding.len()).unwrap_or(0);
    let unchanged_pages = kept_pages.len();
    let batch =
        IngestBatch { records, embedding_model: embedder.model_name().to_string(), dimension, indexed_at, kept_pages };
    let outcome = writer.replace_source(&scope, batch).await?;
    let report = IngestReport {
        tenant_id: args.tenant.clone(),
        source_name,
        docs,
        sections,
        chunks,
        skipped: loaded.skipped,
        warnings: loaded.warnings,
        embedding_model: embedder.model_name().to_string(),
        dimension,
        embedding_calls: stats.calls,
        embedded_texts: stats.embedded_texts,
        cache_hits: stats.cache_hits,
        derived_vectors: stats.derived,
        split_batches: stats.split_batches,
        removed_docs: outcome.removed_docs,
        unchanged_pages,
        phase_seconds: PhaseSeconds {
            load: load_seconds,
            embed: embed_seconds,
            write: write_started.elapsed().as_secs_f64(),
        },
        elapsed: started.elapsed(),
        location: outcome.location,
        snapshot_bytes: outcome.bytes,
        index_version: outcome.version,
    };
    tracing::info!(
        tenant_id = %report.tenant_id,
        docs = report.docs,
        sections = report.sections,
        chunks = report.chunks,
        skipped = report.skipped.len(),
        embedding_calls = report.embedding_calls,
        cache_hits = report.cache_hits,
        latency_ms = report.elapsed.as_millis() as u64,
        "ingest finished"
    );
    Ok(report)
}

fn load_mapping(settings: &Settings, args: &IngestArgs) -> Result<MappingRules, IngestError> {
    match &args.mapping {
        Some(path) => MappingRules::from_file(path).map_err(IngestError::Mapping),
        None if settings.mapping_path.exists() => {
            MappingRules::from_file(&settings.mapping_path).map_err(IngestError::Mapping)
        }
        None => Ok(MappingRules::builtin()),
    }
}

fn source_name(args: &IngestArgs) -> Result<String, IngestError> {
    let name = match &args.source_name {
        Some(name) => name.trim().trim_matches('/').to_string(),
        None if args.crawl_url().is_some() => args
            .crawl_url()
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| url.host_str().map(str::to_string))
            .unwrap_or_default(),
        None => args
            .path
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
            .unwrap_or_default(),
    };
    if name.is_empty() {
        return Err(IngestError::InvalidArgument(format!(
            "cannot derive a source name from {}; pass --source-name",
            args.path.display()
        )));
    }
    Ok(name)
}

async fn load_input(
    path: &Path,
    source_name: &str,
    args: &IngestArgs,
    mapping: MappingRules,
    chunking: ChunkingConfig,
) -> Result<Loaded, IngestError> {
    let path = path.to_path_buf();
    let (source_name, base_url, product, version) =
        (source_name.to_string(), args.base_url.clone(), args.product.clone(), args.version.clone());
    let tags: Vec<String> = args.tags.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
    if let Some(url) = args.crawl_url() {
        let options = LoadOptions {
            source_name: &source_name,
            base_url: &base_url,
            product: &product,
            version: &version,
            tags: &tags,
            mapping: &mapping,
            chunking,
        };
        return crawl_site(url, &args.crawl_limits(), &options).await;
    }
    tokio::task::spawn_blocking(move || {
        let options = LoadOptions {
            source_name: &source_name,
            base_url: &base_url,
            product: &product,
            version: &version,
            tags: &tags,
            mapping: &mapping,
            chunking,
        };
        let result = if path.is_dir() {
            load_tree(&path, &options)
        } else if path.file_name().is_some_and(|name| name == "sitemap.xml") {
            load_sitemap(&path, &options)
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            load_jsonl(&path, &options)
        } else {
            return Err(IngestError::InvalidArgument(format!(
                "{} is neither a directory, a sitemap.xml nor a .jsonl file",
                path.display()
            )));
        };
        result.map_err(|error| IngestError::Input { path: path.display().to_string(), message: error.to_string() })
    })
    .await
    .map_err(|error| IngestError::Internal(format!("loader task failed: {error}")))?
}

fn open_cache(settings: &Settings, args: &IngestArgs, embedder: &dyn Embedder) -> EmbeddingCache {
    if args.no_cache || embedder.is_pseudo() {
        return EmbeddingCache::in_memory();
    }
    let path = settings.embedding_cache_path.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_EMBEDDING_CACHE_PATH));
    match EmbeddingCache::open(&path, embedder.model_name()) {
        Ok((cache, bad_lines)) => {
            if bad_lines > 0 {
                tracing::warn!(path = %path.display(), bad_lines, "embedding cache has unreadable lines; they are ignored");
            }
            cache
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "embedding cache unavailable; embedding everything");
            EmbeddingCache::in_memory()
        }
    }
}
