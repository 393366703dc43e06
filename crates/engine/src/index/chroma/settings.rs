//! `ChromaSettings`: what the Chroma backend takes from the configuration.

/// What the Chroma backend takes from the configuration (the service maps its `RETR_CHROMA_*`,
/// `RETR_INDEX_RELOAD_INTERVAL_MS` and `RETR_TENANTS` settings onto it).
#[derive(Debug, Clone, PartialEq)]
pub struct ChromaSettings {
    /// The server's base URL.
    pub host: String,
    /// Chroma's own tenant and database (not the service's tenants).
    pub tenant: String,
    pub database: String,
    /// The prefix of the collection names (`<prefix>_docs`, `_sections`, `_chunks`, `_changes`,
    /// `_manifests`).
    pub collection: String,
    /// The timeout of one call while serving.
    pub timeout_seconds: f64,
    /// The timeout of one call of `ingest`.
    pub ingest_timeout_seconds: f64,
    /// How often the refresher polls the collections.
    pub refresh_interval_ms: u64,
    /// Upsert batches in flight at once.
    pub write_concurrency: usize,
    /// The tenants the replica holds.
    pub scope: crate::scope::TenantScope,
    /// Where the replica's local copy is kept (`None`: not kept), which a restart reads before
    /// its first poll and catches up from.
    pub local_copy_dir: Option<std::path::PathBuf>,
}
