//! Settings: compiled-in defaults ← optional TOML file ← `RETR_*` environment, validated before
//! the service binds its port. `RuntimeSettings` is the subset `/config` can change live.

pub(crate) use retrieval_engine::ChromaSettings;
pub(crate) use retrieval_engine::EmbeddingClientSettings;
pub use retrieval_engine::PostgresSearchMode;
pub(crate) use retrieval_engine::PostgresSettings;
pub use retrieval_engine::RerankBackend;
pub(crate) use retrieval_engine::RerankClientSettings;
pub use retrieval_engine::RouterMode;
pub use retrieval_engine::Secret;
pub(crate) use retrieval_engine::THEMES_SETTING;
pub(crate) use retrieval_engine::{RuntimeSettings, MAX_RESULTS_CAP};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;

/// Where the Dify endpoint is mounted unless `RETR_DIFY_BASE_PATH` says otherwise; Dify appends
/// `/retrieval` to the endpoint URL it is given.
pub(crate) const DEFAULT_DIFY_BASE_PATH: &str = "/internal/retrieval/dify";
/// `RETR_DIFY_TIME_BUDGET_SECONDS` by default: under Dify's 5 s read timeout.
pub(crate) const DEFAULT_DIFY_TIME_BUDGET_SECONDS: f64 = 4.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorBackend {
    Memory,
    Chroma,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// JSON when stderr is not a terminal (a file, a pipe, a log collector), else text.
    Auto,
    Text,
    Json,
}

impl LogFormat {
    /// The concrete format, given whether stderr is a terminal.
    pub fn resolve(self, stderr_is_terminal: bool) -> LogFormat {
        match self {
            LogFormat::Auto if stderr_is_terminal => LogFormat::Text,
            LogFormat::Auto => LogFormat::Json,
            other => other,
        }
    }
}

/// The level of the one log line written per request (`off` writes none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestLogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// The whole settings tree. Field names are the `RETR_*` variable names without the prefix.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub log_format: LogFormat,
    pub request_log_level: RequestLogLevel,
    pub mock_mode: bool,
    pub vector_backend: VectorBackend,
    pub index_path: Option<PathBuf>,
    pub index_reload_interval_ms: u64,
    /// Keep a binary copy of each snapshot load beside the file (`<RETR_INDEX_PATH>.copy`) and
    /// start from it while the file is unchanged.
    pub index_local_copy: bool,
    /// Tenant levels with at least this many records are ranked tenant-wide through an
    /// approximate partition once it is built (`index::partition`); 0: always exactly.
    pub approximate_min_records: usize,
    pub max_query_chars: usize,
    pub max_body_bytes: usize,
    pub request_timeout_seconds: f64,
    /// How long a search waits for its `min_index_version` before 503 `index_not_ready`.
    pub index_version_wait_seconds: f64,
    pub header_read_timeout_seconds: f64,
    /// How long a request's body may take to arrive, read before it takes a work slot.
    pub body_read_timeout_seconds: f64,
    pub keep_alive_timeout_seconds: f64,
    /// `RETR_SHUTDOWN_GRACE_SECONDS`: on SIGTERM or SIGINT, how long requests in progress may
    /// take to finish before the process exits (below the 10 s a container runtime waits).
    pub shutdown_grace_seconds: f64,
    pub max_connections: usize,
    pub max_in_flight_requests: usize,
    pub admin_token: Secret,
    /// `RETR_METRICS_OPEN`: `/metrics` stays open when API keys are on (a scraper on a trusted
    /// network); by default it then needs the admin token or a `*` key.
    pub metrics_open: bool,
    /// `RETR_API_KEYS`: a file of API keys and the tenants each may read (README
    /// "Authentication"); empty = data endpoints open.
    pub api_keys: PathBuf,
    /// `RETR_DIFY_BASE_PATH`: where the Dify External Knowledge API is mounted (`{base}/retrieval`).
    pub dify_base_path: String,
    /// `RETR_DIFY_KNOWLEDGE_BASES`: a YAML file of the knowledge bases Dify may name; empty =
    /// every tenant is a knowledge base under its own id.
    pub dify_knowledge_bases: PathBuf,
    /// `RETR_DIFY_TIME_BUDGET_SECONDS`: every Dify request is answered within it (Dify's client
    /// waits 5 s); past three quarters of it the answer is ranked lexically only.
    pub dify_time_budget_seconds: f64,
    /// `RETR_TENANTS`: the tenants this instance loads and serves (`a,b` or `shard:i/n`); empty = all.
    pub tenants: String,
    /// `RETR_FEEDBACK_DIR`: where each tenant's feedback (`POST /feedback`) and its learned
    /// re-ranker are kept; unset: no feedback endpoint, no learned re-ranking.
    pub feedback_dir: Option<PathBuf>,
    /// `RETR_FEEDBACK_MAX_BYTES`: one tenant's feedback log beyond this keeps its newest half.
    pub feedback_max_bytes: u64,
    /// `RETR_FEEDBACK_MAX_AGE_DAYS`: feedback older than this is dropped.
    pub feedback_max_age_days: f64,

    pub chroma_host: String,
    pub chroma_path: Option<PathBuf>,
    pub chroma_tenant: String,
    pub chroma_database: String,
    pub chroma_collection: String,
    pub chroma_timeout_seconds: f64,
    /// `RETR_CHROMA_INGEST_TIMEOUT_SECONDS`: each Chroma call of `ingest` (a batch job: a slow
    /// upsert under load is waited for, and retried, rather than failing the run).
    pub chroma_ingest_timeout_seconds: f64,
    pub chroma_write_concurrency: usize,
    /// `RETR_CHROMA_LOCAL_COPY_DIR`: where the Chroma replica's local copy is kept (one directory
    /// per instance); unset: none, a restart reads the whole replica from Chroma.
    pub chroma_local_copy_dir: Option<PathBuf>,

    /// `RETR_POSTGRES_URL`: the primary's connection URL (`postgres://user:password@host:port/db`),
    /// a secret: never logged nor shown.
    pub postgres_url: Secret,
    /// `RETR_POSTGRES_STANDBY_URLS`: read-only standbys (comma-separated URLs, secrets too), read
    /// in order when the primary does not answer.
    pub postgres_standby_urls: Secret,
    /// `RETR_POSTGRES_POOL_SIZE`: connections per server at most.
    pub postgres_pool_size: usize,
    /// `RETR_POSTGRES_STATEMENT_TIMEOUT_SECONDS`: each statement's bound while serving.
    pub postgres_statement_timeout_seconds: f64,
    /// `RETR_POSTGRES_INGEST_STATEMENT_TIMEOUT_SECONDS`: each statement's bound in `ingest`.
    pub postgres_ingest_statement_timeout_seconds: f64,
    /// `RETR_POSTGRES_CONNECT_TIMEOUT_SECONDS`: how long opening a connection may take.
    pub postgres_connect_timeout_seconds: f64,
    /// `RETR_POSTGRES_HNSW_INDEX`: `ingest` builds and keeps the HNSW indexes of the vectors
    /// (always when `RETR_POSTGRES_SEARCH=database`, whose searches use them).
    pub postgres_hnsw_index: bool,
    /// `RETR_POSTGRES_SEARCH`: `replica` (searches on the in-process replica) or `database`
    /// (each call of the cascade a statement on the database).
    pub postgres_search: PostgresSearchMode,
    /// `RETR_POSTGRES_EF_SEARCH`: the HNSW candidate list of a search in the database.
    pub postgres_ef_search: usize,
    /// `RETR_POSTGRES_LEXICAL_DEPTH`: postings read per query term by a search in the database.
    pub postgres_lexical_depth: usize,

    pub max_results: usize,
    pub topk_per_doc: usize,
    pub min_score: f32,
    pub doc_top_k: usize,
    pub section_top_k: usize,
    pub chunk_top_k: usize,
    pub min_docs: usize,
    pub enable_filters: bool,

    pub embedding_api_base: String,
    pub embedding_api_key: Secret,
    pub embedding_model: String,
    pub embedding_dimension: usize,
    pub embedding_max_attempts: u32,
    pub embedding_retry_delay_seconds: f64,
    pub embedding_timeout_seconds: f64,
    pub embedding_batch_size: usize,
    pub embedding_send_input_type: bool,
    pub embedding_query_prefix: String,
    pub embedding_passage_prefix: String,
    pub embedding_cache_size: usize,
    pub embedding_cache_path: Option<PathBuf>,
    pub ingest_embedding_timeout_seconds: f64,
    pub ingest_embedding_batch_size: usize,
    pub ingest_embedding_concurrency: usize,

    pub rerank_enabled: bool,
    pub rerank_backend: RerankBackend,
    pub rerank_model: String,
    pub rerank_api_base: String,
    pub rerank_api_key: Secret,
    pub rerank_top_n: usize,
    pub rerank_timeout_seconds: f64,

    pub theme_router_mode: RouterMode,
    pub theme_router_timeout_seconds: f64,
    pub themes_path: PathBuf,
    pub boosting_path: PathBuf,
    pub synonyms_dir: PathBuf,
    /// `RETR_CONFIG_MAX_FILE_BYTES`: the largest themes file or boosting.yaml read, and the most
    /// bytes the synonyms directory's files hold together; larger is refused (start-up, reload).
    pub config_max_file_bytes: u64,
    /// `RETR_CONFIG_RELOAD_TIMEOUT_SECONDS`: a config reload that has not read and checked the
    /// files by then is answered 504 and changes nothing.
    pub config_reload_timeout_seconds: f64,
    pub mapping_path: PathBuf,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8080,
            log_format: LogFormat::Auto,
            request_log_level: RequestLogLevel::Info,
            mock_mode: true,
            vector_backend: VectorBackend::Memory,
            index_path: None,
            index_reload_interval_ms: 1000,
            index_local_copy: true,
            approximate_min_records: retrieval_engine::DEFAULT_MIN_RECORDS,
            max_query_chars: 2000,
            max_body_bytes: 1 << 20,
            request_timeout_seconds: 30.0,
            index_version_wait_seconds: 5.0,
            header_read_timeout_seconds: 10.0,
            body_read_timeout_seconds: 10.0,
            keep_alive_timeout_seconds: 60.0,
            shutdown_grace_seconds: 8.0,
            max_connections: 1024,
            max_in_flight_requests: 512,
            admin_token: Secret::default(),
            metrics_open: false,
            api_keys: PathBuf::new(),
            dify_base_path: DEFAULT_DIFY_BASE_PATH.into(),
            dify_knowledge_bases: PathBuf::new(),
            dify_time_budget_seconds: DEFAULT_DIFY_TIME_BUDGET_SECONDS,
            tenants: String::new(),
            feedback_dir: None,
            feedback_max_bytes: 64 << 20,
            feedback_max_age_days: 90.0,
            chroma_host: "http://127.0.0.1:8000".into(),
            chroma_path: None,
            chroma_tenant: "default_tenant".into(),
            chroma_database: "default_database".into(),
            chroma_collection: "ingestion".into(),
            chroma_timeout_seconds: 5.0,
            chroma_ingest_timeout_seconds: 120.0,
            chroma_write_concurrency: 4,
            chroma_local_copy_dir: None,
            postgres_url: Secret::default(),
            postgres_standby_urls: Secret::default(),
            postgres_pool_size: 8,
            postgres_statement_timeout_seconds: 5.0,
            postgres_ingest_statement_timeout_seconds: 300.0,
            postgres_connect_timeout_seconds: 3.0,
            postgres_hnsw_index: false,
            postgres_search: PostgresSearchMode::Replica,
            postgres_ef_search: 100,
            postgres_lexical_depth: 20_000,
            max_results: 10,
            topk_per_doc: 1,
            min_score: 0.0,
            doc_top_k: 20,
            section_top_k: 30,
            chunk_top_k: 20,
            min_docs: 3,
            enable_filters: true,
            embedding_api_base: String::new(),
            embedding_api_key: Secret::default(),
            embedding_model: "multilingual-e5-small".into(),
            embedding_dimension: 384,
            embedding_max_attempts: 3,
            embedding_retry_delay_seconds: 0.5,
            embedding_timeout_seconds: 10.0,
            embedding_batch_size: 32,
            embedding_send_input_type: true,
            embedding_query_prefix: String::new(),
            embedding_passage_prefix: String::new(),
            embedding_cache_size: 1024,
            embedding_cache_path: None,
            ingest_embedding_timeout_seconds: 300.0,
            ingest_embedding_batch_size: 4,
            ingest_embedding_concurrency: 2,
            rerank_enabled: false,
            rerank_backend: RerankBackend::Chat,
            rerank_model: "gpt-4o-mini".into(),
            rerank_api_base: String::new(),
            rerank_api_key: Secret::default(),
            rerank_top_n: 5,
            rerank_timeout_seconds: 10.0,
            theme_router_mode: RouterMode::Heuristic,
            theme_router_timeout_seconds: 3.0,
            themes_path: "config/themes.yaml".into(),
            boosting_path: "config/boosting.yaml".into(),
            synonyms_dir: "config/synonyms".into(),
            config_max_file_bytes: retrieval_engine::DEFAULT_MAX_FILE_BYTES,
            config_reload_timeout_seconds: 10.0,
            mapping_path: "config/mapping.yaml".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Load(String),
    #[error("invalid configuration:\n{}", .0.iter().map(|(k, v)| format!("  RETR_{}: {v}", k.to_uppercase())).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<(String, String)>),
}

impl ConfigError {
    /// `Invalid` when there are problems (setting name without `RETR_`, message), else `Ok`.
    pub(crate) fn from_problems(problems: Vec<(String, String)>) -> Result<(), ConfigError> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }
}

/// `RETR_DIFY_BASE_PATH`: `/` and then segments of letters, digits, `.`, `_`, `~` and `-`,
/// without a trailing `/` (Dify appends `/retrieval`), so the path can be mounted as a route.
pub(crate) fn validate_dify_base_path(base: &str) -> Result<(), String> {
    let segments = base.strip_prefix('/').map(|rest| rest.split('/'));
    let valid = segments.is_some_and(|mut segments| {
        segments.all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_~".contains(&b)))
    });
    if !valid || base.len() > 256 {
        return Err(format!(
            "must look like /internal/retrieval/dify (`/`-separated segments of letters, digits, . _ ~ -, \
             no trailing `/`, at most 256 bytes), got {base:?}"
        ));
    }
    Ok(())
}

impl Settings {
    /// How much feedback a tenant keeps (`RETR_FEEDBACK_MAX_BYTES`, `RETR_FEEDBACK_MAX_AGE_DAYS`).
    pub(crate) fn feedback_limits(&self) -> retrieval_engine::FeedbackLimits {
        retrieval_engine::FeedbackLimits {
            max_bytes: self.feedback_max_bytes,
            max_age: std::time::Duration::from_secs_f64(self.feedback_max_age_days * 86_400.0),
        }
    }

    /// Where the themes file, boosting.yaml and the synonyms directory are.
    pub(crate) fn tuning_files(&self) -> retrieval_engine::TuningFiles {
        retrieval_engine::TuningFiles {
            themes: self.themes_path.clone(),
            boosting: self.boosting_path.clone(),
            synonyms: self.synonyms_dir.clone(),
            max_file_bytes: self.config_max_file_bytes,
        }
    }
}

impl Settings {
    /// Loads defaults ← `file` (if given; TOML) ← the `RETR_*` entries of `env`, then validates
    /// them (`validate`). The files the HTTP layer reads (`RETR_API_KEYS`,
    /// `RETR_DIFY_KNOWLEDGE_BASES`) are checked by `startup::load_settings`, which the binary uses.
    ///
    /// `env` is passed in (not read from the process) so tests can inject variables.
    pub fn load(file: Option<&std::path::Path>, env: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let settings = Self::read(file, env)?;
        settings.validate()?;
        Ok(settings)
    }

    /// `load` without `validate`: the settings as the sources give them, for a caller that adds
    /// its own checks to `problems` and reports them all at once.
    pub(crate) fn read(file: Option<&std::path::Path>, env: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let defaults = config::Config::try_from(&Settings::default()).map_err(|e| ConfigError::Load(e.to_string()))?;
        let mut builder = config::Config::builder().add_source(defaults);
        if let Some(path) = file {
            if !path.exists() {
                return Err(ConfigError::Load(format!("config file {} does not exist", path.display())));
            }
            builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml));
        }
        // A setting whose type is a string (a secret, a path, a host, a model name) is read as the
        // string given: parsing it as a number or boolean first would turn the admin token
        // `00001234567890123456` into 1234567890123456, or refuse it.
        let string_keys: Vec<String> = match serde_json::to_value(Settings::default()) {
            Ok(serde_json::Value::Object(fields)) => fields
                .into_iter()
                .filter(|(_, value)| value.is_string() || value.is_null())
                .map(|(key, _)| format!("RETR_{}", key.to_uppercase()))
                .collect(),
            _ => Vec::new(),
        };
        let (strings, typed): (HashMap<String, String>, HashMap<String, String>) = env
            .iter()
            .filter(|(key, _)| key.starts_with("RETR_"))
            .map(|(key, value)| (key.clone(), value.clone()))
            .partition(|(key, _)| string_keys.contains(key));
        let environment = |parse: bool, values: HashMap<String, String>| {
            config::Environment::with_prefix("RETR").prefix_separator("_").try_parsing(parse).source(Some(values))
        };
        builder = builder.add_source(environment(true, typed)).add_source(environment(false, strings));
        let settings: Settings = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| ConfigError::Load(e.to_string().replace("`", "")))?;
        Ok(settings)
    }

    /// Collects every problem so one start-up attempt reports them all.
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::from_problems(self.problems())
    }

    /// Every problem of these settings, as (setting name without `RETR_`, message).
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
        let mut problems = self.runtime().problems();
        let mut positive = |name: &str, value: f64| {
            if !(value > 0.0 && value.is_finite()) {
                problems.push((name.to_string(), format!("must be a positive number of seconds, got {value}")));
            }
        };
        positive("request_timeout_seconds", self.request_timeout_seconds);
        positive("index_version_wait_seconds", self.index_version_wait_seconds);
        positive("config_reload_timeout_seconds", self.config_reload_timeout_seconds);
        positive("header_read_timeout_seconds", self.header_read_timeout_seconds);
        positive("body_read_timeout_seconds", self.body_read_timeout_seconds);
        positive("keep_alive_timeout_seconds", self.keep_alive_timeout_seconds);
        positive("shutdown_grace_seconds", self.shutdown_grace_seconds);
        positive("chroma_timeout_seconds", self.chroma_timeout_seconds);
        positive("chroma_ingest_timeout_seconds", self.chroma_ingest_timeout_seconds);
        positive("postgres_statement_timeout_seconds", self.postgres_statement_timeout_seconds);
        positive("postgres_ingest_statement_timeout_seconds", self.postgres_ingest_statement_timeout_seconds);
        positive("postgres_connect_timeout_seconds", self.postgres_connect_timeout_seconds);
        positive("embedding_timeout_seconds", self.embedding_timeout_seconds);
        positive("ingest_embedding_timeout_seconds", self.ingest_embedding_timeout_seconds);
        positive("rerank_timeout_seconds", self.rerank_timeout_seconds);
        positive("theme_router_timeout_seconds", self.theme_router_timeout_seconds);
        positive("dify_time_budget_seconds", self.dify_time_budget_seconds);
        if self.feedback_max_bytes < 4096 {
            problems
                .push(("feedback_max_bytes".into(), format!("must be at least 4096, got {}", self.feedback_max_bytes)));
        }
        if !(self.feedback_max_age_days > 0.0 && self.feedback_max_age_days <= 36_500.0) {
            problems.push((
                "feedback_max_age_days".into(),
                format!("must be within (0, 36500] days, got {}", self.feedback_max_age_days),
            ));
        }
        if self.dify_time_budget_seconds >= self.request_timeout_seconds {
            problems.push((
                "dify_time_budget_seconds".into(),
                format!(
                    "must be below RETR_REQUEST_TIMEOUT_SECONDS ({}), got {}",
                    self.request_timeout_seconds, self.dify_time_budget_seconds
                ),
            ));
        }
        if !(self.embedding_retry_delay_seconds >= 0.0 && self.embedding_retry_delay_seconds.is_finite()) {
            problems.push((
                "embedding_retry_delay_seconds".into(),
                format!("must be ≥ 0, got {}", self.embedding_retry_delay_seconds),
            ));
        }
        if self.embedding_max_attempts < 1 || self.embedding_max_attempts > 10 {
            problems.push((
                "embedding_max_attempts".into(),
                format!("must be within 1..=10, got {}", self.embedding_max_attempts),
            ));
        }
        if self.embedding_batch_size < 1 || self.embedding_batch_size > 2048 {
            problems.push((
                "embedding_batch_size".into(),
                format!("must be within 1..=2048, got {}", self.embedding_batch_size),
            ));
        }
        if self.ingest_embedding_batch_size < 1 || self.ingest_embedding_batch_size > 2048 {
            problems.push((
                "ingest_embedding_batch_size".into(),
                format!("must be within 1..=2048, got {}", self.ingest_embedding_batch_size),
            ));
        }
        if self.ingest_embedding_concurrency < 1 || self.ingest_embedding_concurrency > 64 {
            problems.push((
                "ingest_embedding_concurrency".into(),
                format!("must be within 1..=64, got {}", self.ingest_embedding_concurrency),
            ));
        }
        if self.chroma_write_concurrency < 1 || self.chroma_write_concurrency > 64 {
            problems.push((
                "chroma_write_concurrency".into(),
                format!("must be within 1..=64, got {}", self.chroma_write_concurrency),
            ));
        }
        if self.embedding_dimension < 1 || self.embedding_dimension > 8192 {
            problems.push((
                "embedding_dimension".into(),
                format!("must be within 1..=8192, got {}", self.embedding_dimension),
            ));
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            problems
                .push(("max_connections".into(), format!("must be within 1..=1000000, got {}", self.max_connections)));
        }
        if !(1..=100_000).contains(&self.max_in_flight_requests) {
            problems.push((
                "max_in_flight_requests".into(),
                format!("must be within 1..=100000, got {}", self.max_in_flight_requests),
            ));
        }
        if !self.admin_token.is_empty() && self.admin_token.expose().chars().count() < 16 {
            problems.push(("admin_token".into(), "must be at least 16 characters when set".into()));
        }
        if self.admin_token.expose().chars().any(|c| c.is_whitespace() || c.is_control()) {
            problems.push(("admin_token".into(), "must not contain whitespace or control characters".into()));
        }
        if let Err(error) = retrieval_engine::TenantScope::parse(&self.tenants) {
            problems.push(("tenants".into(), error));
        }
        if let Err(error) = validate_dify_base_path(&self.dify_base_path) {
            problems.push(("dify_base_path".into(), error));
        }
        if self.index_version_wait_seconds >= self.request_timeout_seconds {
            problems.push((
                "index_version_wait_seconds".into(),
                format!(
                    "must be below RETR_REQUEST_TIMEOUT_SECONDS ({}) so a waiting search answers 503 index_not_ready, \
                     not 504, got {}",
                    self.request_timeout_seconds, self.index_version_wait_seconds
                ),
            ));
        }
        if self.body_read_timeout_seconds >= self.request_timeout_seconds {
            problems.push((
                "body_read_timeout_seconds".into(),
                format!(
                    "must be below RETR_REQUEST_TIMEOUT_SECONDS ({}) so a slow body answers 408, not 504, got {}",
                    self.request_timeout_seconds, self.body_read_timeout_seconds
                ),
            ));
        }
        if self.config_reload_timeout_seconds >= self.request_timeout_seconds {
            problems.push((
                "config_reload_timeout_seconds".into(),
                format!(
                    "must be below RETR_REQUEST_TIMEOUT_SECONDS ({}) so a stuck reload answers its own error, got {}",
                    self.request_timeout_seconds, self.config_reload_timeout_seconds
                ),
            ));
        }
        if self.config_max_file_bytes < 1024 {
            problems.push((
                "config_max_file_bytes".into(),
                format!("must be at least 1024, got {}", self.config_max_file_bytes),
            ));
        }
        if self.max_query_chars < 1 {
            problems.push(("max_query_chars".into(), "must be at least 1".into()));
        }
        if self.max_body_bytes < 1024 {
            problems.push(("max_body_bytes".into(), format!("must be at least 1024, got {}", self.max_body_bytes)));
        }
        if self.index_reload_interval_ms < 50 {
            problems.push((
                "index_reload_interval_ms".into(),
                format!("must be at least 50, got {}", self.index_reload_interval_ms),
            ));
        }
        for (name, url) in [
            ("embedding_api_base", &self.embedding_api_base),
            ("rerank_api_base", &self.rerank_api_base),
            ("chroma_host", &self.chroma_host),
        ] {
            if !url.is_empty()
                && reqwest::Url::parse(url).map(|u| !matches!(u.scheme(), "http" | "https")).unwrap_or(true)
            {
                problems.push((name.to_string(), format!("must be an http(s) URL, got {url:?}")));
            }
        }
        problems.extend(self.postgres_problems());
        if self.rerank_enabled && self.rerank_api_base.is_empty() {
            problems.push(("rerank_enabled".into(), "is true but RETR_RERANK_API_BASE is empty".into()));
        }
        if self.theme_router_mode == RouterMode::Llm
            && (self.rerank_api_base.is_empty() || self.rerank_backend != RerankBackend::Chat)
        {
            problems.push((
                "theme_router_mode".into(),
                "is llm but no chat endpoint is configured (RETR_RERANK_API_BASE with RETR_RERANK_BACKEND=chat)".into(),
            ));
        }
        if !self.mock_mode && self.vector_backend == VectorBackend::Memory && self.index_path.is_none() {
            problems
                .push(("index_path".into(), "is required when mock_mode is false and vector_backend is memory".into()));
        }
        problems
    }

    /// The backend this configuration selects: mock mode always runs in memory.
    /// The tenants this instance serves (`RETR_TENANTS`; a spec `validate` refused serves all).
    pub fn tenant_scope(&self) -> retrieval_engine::TenantScope {
        retrieval_engine::TenantScope::parse(&self.tenants).unwrap_or_default()
    }

    pub(crate) fn backend(&self) -> VectorBackend {
        if self.mock_mode {
            VectorBackend::Memory
        } else {
            self.vector_backend
        }
    }

    /// What the embedding clients take (`RETR_EMBEDDING_*`, `RETR_INGEST_EMBEDDING_*`).
    pub fn embedding_client(&self) -> EmbeddingClientSettings {
        EmbeddingClientSettings {
            api_base: self.embedding_api_base.clone(),
            api_key: self.embedding_api_key.clone(),
            model: self.embedding_model.clone(),
            dimension: self.embedding_dimension,
            max_attempts: self.embedding_max_attempts,
            retry_delay_seconds: self.embedding_retry_delay_seconds,
            timeout_seconds: self.embedding_timeout_seconds,
            batch_size: self.embedding_batch_size,
            send_input_type: self.embedding_send_input_type,
            query_prefix: self.embedding_query_prefix.clone(),
            passage_prefix: self.embedding_passage_prefix.clone(),
            cache_size: self.embedding_cache_size,
            ingest_timeout_seconds: self.ingest_embedding_timeout_seconds,
            ingest_batch_size: self.ingest_embedding_batch_size,
        }
    }

    /// What the rerank clients take (`RETR_RERANK_*`).
    pub fn rerank_client(&self) -> RerankClientSettings {
        RerankClientSettings {
            backend: self.rerank_backend,
            api_base: self.rerank_api_base.clone(),
            api_key: self.rerank_api_key.clone(),
            model: self.rerank_model.clone(),
            timeout_seconds: self.rerank_timeout_seconds,
        }
    }

    /// The problems of the `RETR_POSTGRES_*` settings. The URLs hold passwords: a message never
    /// repeats one.
    fn postgres_problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if self.postgres_ef_search < 1 || self.postgres_ef_search > 1000 {
            problems.push((
                "postgres_ef_search".into(),
                format!("must be within 1..=1000, got {}", self.postgres_ef_search),
            ));
        }
        if self.postgres_lexical_depth < 10 || self.postgres_lexical_depth > 1_000_000 {
            problems.push((
                "postgres_lexical_depth".into(),
                format!("must be within 10..=1000000, got {}", self.postgres_lexical_depth),
            ));
        }
        if self.postgres_pool_size < 1 || self.postgres_pool_size > 256 {
            problems.push((
                "postgres_pool_size".into(),
                format!("must be within 1..=256, got {}", self.postgres_pool_size),
            ));
        }
        let valid = retrieval_engine::is_valid_postgres_url;
        let url = self.postgres_url.expose();
        if self.vector_backend == VectorBackend::Postgres && url.is_empty() {
            problems.push(("postgres_url".into(), "is required when vector_backend is postgres".into()));
        } else if !url.is_empty() && !valid(url) {
            problems.push((
                "postgres_url".into(),
                "must be a postgres://user:password@host:port/database URL (value not shown: it may hold a password)"
                    .into(),
            ));
        }
        for (number, standby) in self.postgres_standby_list().iter().enumerate() {
            if !valid(standby.expose()) {
                problems.push((
                    "postgres_standby_urls".into(),
                    format!(
                        "URL {} must be a postgres://user:password@host:port/database URL (value not shown)",
                        number + 1
                    ),
                ));
            }
        }
        problems
    }

    fn postgres_standby_list(&self) -> Vec<Secret> {
        self.postgres_standby_urls
            .expose()
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(Secret::new)
            .collect()
    }

    /// What the PostgreSQL backend takes (`RETR_POSTGRES_*`, `RETR_INDEX_RELOAD_INTERVAL_MS`,
    /// `RETR_TENANTS`).
    pub fn postgres(&self) -> PostgresSettings {
        PostgresSettings {
            url: self.postgres_url.clone(),
            standby_urls: self.postgres_standby_list(),
            pool_size: self.postgres_pool_size,
            statement_timeout_seconds: self.postgres_statement_timeout_seconds,
            ingest_statement_timeout_seconds: self.postgres_ingest_statement_timeout_seconds,
            connect_timeout_seconds: self.postgres_connect_timeout_seconds,
            refresh_interval_ms: self.index_reload_interval_ms,
            scope: self.tenant_scope(),
            hnsw_index: self.postgres_hnsw_index,
            search: self.postgres_search,
            ef_search: self.postgres_ef_search,
            lexical_depth: self.postgres_lexical_depth,
        }
    }

    /// What the Chroma backend takes (`RETR_CHROMA_*`, `RETR_INDEX_RELOAD_INTERVAL_MS`, `RETR_TENANTS`).
    pub fn chroma(&self) -> ChromaSettings {
        ChromaSettings {
            host: self.chroma_host.clone(),
            tenant: self.chroma_tenant.clone(),
            database: self.chroma_database.clone(),
            collection: self.chroma_collection.clone(),
            timeout_seconds: self.chroma_timeout_seconds,
            ingest_timeout_seconds: self.chroma_ingest_timeout_seconds,
            refresh_interval_ms: self.index_reload_interval_ms,
            write_concurrency: self.chroma_write_concurrency,
            scope: self.tenant_scope(),
            local_copy_dir: self.chroma_local_copy_dir.clone().filter(|path| !path.as_os_str().is_empty()),
        }
    }

    pub fn runtime(&self) -> RuntimeSettings {
        RuntimeSettings {
            max_results: self.max_results,
            doc_top_k: self.doc_top_k,
            section_top_k: self.section_top_k,
            chunk_top_k: self.chunk_top_k,
            topk_per_doc: self.topk_per_doc,
            min_docs: self.min_docs,
            min_score: self.min_score,
            enable_filters: self.enable_filters,
            rerank_enabled: self.rerank_enabled,
            rerank_top_n: self.rerank_top_n,
            theme_router_mode: self.theme_router_mode,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_are_valid() {
        let settings = Settings::load(None, &env(&[])).unwrap();
        assert_eq!(settings.port, 8080);
        assert_eq!(settings.backend(), VectorBackend::Memory);
    }

    #[test]
    fn env_overrides_and_is_typed() {
        let settings =
            Settings::load(None, &env(&[("RETR_MAX_RESULTS", "7"), ("RETR_ENABLE_FILTERS", "false"), ("PATH", "x")]))
                .unwrap();
        assert_eq!(settings.max_results, 7);
        assert!(!settings.enable_filters);
    }

    #[test]
    fn out_of_range_names_the_setting_and_value() {
        let error = Settings::load(None, &env(&[("RETR_MAX_RESULTS", "51"), ("RETR_MIN_SCORE", "1.5")]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("RETR_MAX_RESULTS") && error.contains("51"), "{error}");
        assert!(error.contains("RETR_MIN_SCORE") && error.contains("1.5"), "{error}");
    }

    #[test]
    fn chroma_write_concurrency_is_bounded() {
        let settings = Settings::load(None, &env(&[("RETR_CHROMA_WRITE_CONCURRENCY", "8")])).unwrap();
        assert_eq!(settings.chroma_write_concurrency, 8);
        for bad in ["0", "65"] {
            let error = Settings::load(None, &env(&[("RETR_CHROMA_WRITE_CONCURRENCY", bad)])).unwrap_err().to_string();
            assert!(error.contains("RETR_CHROMA_WRITE_CONCURRENCY") && error.contains(bad), "{error}");
        }
    }

    #[test]
    fn wrong_type_and_unknown_setting_are_rejected() {
        let error = Settings::load(None, &env(&[("RETR_DOC_TOP_K", "many")])).unwrap_err().to_string();
        assert!(error.contains("doc_top_k"), "{error}");
        let error = Settings::load(None, &env(&[("RETR_NO_SUCH_THING", "1")])).unwrap_err().to_string();
        assert!(error.contains("no_such_thing"), "{error}");
    }

    #[test]
    fn file_then_env() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "max_results = 12\nsection_top_k = 4\n").unwrap();
        let settings = Settings::load(Some(&path), &env(&[("RETR_SECTION_TOP_K", "6")])).unwrap();
        assert_eq!((settings.max_results, settings.section_top_k), (12, 6));
        std::fs::write(&path, "max_results = [").unwrap();
        assert!(Settings::load(Some(&path), &env(&[])).is_err());
    }

    #[test]
    fn secrets_are_hidden() {
        let settings = Settings::load(None, &env(&[("RETR_EMBEDDING_API_KEY", "sk-123")])).unwrap();
        assert!(!format!("{settings:?}").contains("sk-123"));
        assert!(!serde_json::to_string(&settings).unwrap().contains("sk-123"));
        assert_eq!(settings.embedding_api_key.expose(), "sk-123");
    }

    #[test]
    fn topk_per_doc_and_llm_routing_are_checked_at_start_up() {
        let error = Settings::load(None, &env(&[("RETR_TOPK_PER_DOC", "51")])).unwrap_err().to_string();
        assert!(error.contains("RETR_TOPK_PER_DOC") && error.contains("51"), "{error}");
        let error = Settings::load(None, &env(&[("RETR_THEME_ROUTER_MODE", "llm")])).unwrap_err().to_string();
        assert!(error.contains("RETR_THEME_ROUTER_MODE"), "{error}");
        let with_endpoint = env(&[("RETR_THEME_ROUTER_MODE", "llm"), ("RETR_RERANK_API_BASE", "http://127.0.0.1:9")]);
        assert_eq!(Settings::load(None, &with_endpoint).unwrap().theme_router_mode, RouterMode::Llm);
    }

    #[test]
    fn logs_are_json_by_default_when_not_on_a_terminal() {
        let settings = Settings::load(None, &env(&[])).unwrap();
        assert_eq!(settings.log_format.resolve(false), LogFormat::Json);
        assert_eq!(settings.log_format.resolve(true), LogFormat::Text);
        let settings = Settings::load(None, &env(&[("RETR_LOG_FORMAT", "text")])).unwrap();
        assert_eq!(settings.log_format.resolve(false), LogFormat::Text);
        let settings = Settings::load(None, &env(&[("RETR_REQUEST_LOG_LEVEL", "debug")])).unwrap();
        assert_eq!(settings.request_log_level, RequestLogLevel::Debug);
        assert!(Settings::load(None, &env(&[("RETR_REQUEST_LOG_LEVEL", "loud")])).is_err());
    }

    #[test]
    fn string_settings_are_read_as_given_not_as_numbers() {
        let token = "00001234567890123456";
        let settings = Settings::load(
            None,
            &env(&[
                ("RETR_ADMIN_TOKEN", token),
                ("RETR_EMBEDDING_API_KEY", "0042"),
                ("RETR_EMBEDDING_MODEL", "true"),
                ("RETR_INDEX_PATH", "2026"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.admin_token.expose(), token);
        assert_eq!(settings.embedding_api_key.expose(), "0042");
        assert_eq!(settings.embedding_model, "true");
        assert_eq!(settings.index_path, Some(PathBuf::from("2026")));
        // Typed settings are still parsed.
        let settings = Settings::load(None, &env(&[("RETR_PORT", "9090"), ("RETR_METRICS_OPEN", "true")])).unwrap();
        assert_eq!((settings.port, settings.metrics_open), (9090, true));
    }

    /// The engine's test service and ingest plan start from the same values as these settings.
    #[test]
    fn the_engine_defaults_are_the_settings_defaults() {
        let settings = Settings::default();
        assert_eq!(settings.runtime(), retrieval_engine::fixtures::default_runtime());
        let plan = retrieval_engine::ingest::EmbedPlan {
            batch_size: settings.ingest_embedding_batch_size,
            concurrency: settings.ingest_embedding_concurrency,
        };
        assert_eq!(retrieval_engine::ingest::EmbedPlan::default(), plan);
    }

    #[test]
    fn admin_token_is_a_hidden_secret_of_sane_length() {
        let token = "0123456789abcdef-admin";
        let settings = Settings::load(None, &env(&[("RETR_ADMIN_TOKEN", token)])).unwrap();
        assert_eq!(settings.admin_token.expose(), token);
        assert!(!format!("{settings:?}").contains(token));
        assert!(!serde_json::to_string(&settings).unwrap().contains(token));
        let error = Settings::load(None, &env(&[("RETR_ADMIN_TOKEN", "short")])).unwrap_err().to_string();
        assert!(error.contains("RETR_ADMIN_TOKEN"), "{error}");
        assert!(Settings::load(None, &env(&[])).unwrap().admin_token.is_empty(), "open by default");
    }
}

#[cfg(test)]
mod documentation_tests {
    use super::*;

    /// `.env.example` and the README's table must list every setting (keeps the docs true).
    #[test]
    fn every_setting_is_documented() {
        let keys: Vec<String> = match serde_json::to_value(Settings::default()).unwrap() {
            serde_json::Value::Object(map) => map.keys().map(|k| format!("RETR_{}", k.to_uppercase())).collect(),
            other => panic!("settings serialize as {other}"),
        };
        let env_example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.env.example")).unwrap();
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        for key in keys {
            assert!(env_example.contains(&format!("{key}=")), ".env.example lacks {key}");
            assert!(readme.contains(&format!("`{key}`")), "README's configuration table lacks {key}");
        }
    }
}
