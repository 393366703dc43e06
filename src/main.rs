use clap::{Parser, Subcommand};
use retrieval_engine::Metrics;
use retrieval_service::config::{LogFormat, Settings};
use retrieval_service::log_writer::{FlushOnDrop, LossyWriter};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// A search allocates and frees many small buffers (candidate lists, ids, JSON); mimalloc's
/// per-thread free lists serve them faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "retrieval-service", version, about = "Hybrid doc→section→chunk retrieval over product docs")]
struct Cli {
    /// TOML settings file (defaults ← file ← RETR_* environment)
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service
    Serve {
        /// Listen port (overrides RETR_PORT)
        #[arg(long)]
        port: Option<u16>,
    },
    /// Ingest a Markdown/MDX tree or a JSONL file into the snapshot (or Chroma)
    Ingest(retrieval_service::ingest::IngestArgs),
    /// Measure retrieval quality (nDCG@10, Recall@10, MRR@10) of dense, lexical and hybrid search
    Eval(retrieval_service::eval::EvalArgs),
    /// Refit a tenant's re-ranker on its feedback (RETR_FEEDBACK_DIR) and labelled questions; keep it
    /// only when it beats the service's order on held-out feedback
    Learn(retrieval_service::learn::LearnArgs),
    /// Theme tooling
    Themes {
        #[command(subcommand)]
        command: ThemesCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ThemesCommand {
    /// Print a draft themes.yaml from the topic metadata of an index snapshot
    Suggest {
        /// Snapshot to read; default RETR_INDEX_PATH
        #[arg(long)]
        index: Option<PathBuf>,
        /// Only this tenant's docs
        #[arg(long)]
        tenant: Option<String>,
        /// Skip combinations with fewer docs
        #[arg(long, default_value_t = 2)]
        min_docs: usize,
    },
}

fn suggest_themes(
    settings: &Settings,
    index: Option<PathBuf>,
    tenant: Option<String>,
    min_docs: usize,
) -> Result<(), String> {
    let path =
        index.or_else(|| settings.index_path.clone()).ok_or("no snapshot: pass --index or set RETR_INDEX_PATH")?;
    let snapshot = retrieval_engine::read_snapshot_file(&path).map_err(|e| e.to_string())?;
    print!("{}", retrieval_engine::ingest::suggest_themes(&snapshot, tenant.as_deref(), min_docs));
    Ok(())
}

/// Logs go to stderr through a lossy queue (`log_writer`): a stuck or full log sink drops lines
/// (counted in `metrics`) instead of stalling requests. Keep the guard until exit.
fn init_telemetry(settings: &Settings, metrics: &Metrics) -> FlushOnDrop {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    // No ANSI colour codes unless a person is watching a terminal.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = LossyWriter::stderr(metrics.log_lines_dropped.clone());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(terminal);
    match settings.log_format.resolve(terminal) {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text | LogFormat::Auto => builder.init(),
    }
    guard
}

async fn serve(mut settings: Settings, port: Option<u16>, metrics: Arc<Metrics>) -> Result<(), String> {
    if let Some(port) = port {
        settings.port = port;
    }
    let address = format!("{}:{}", settings.host, settings.port);
    let grace = settings.shutdown_grace_seconds;
    let state =
        retrieval_service::startup::build_state_with_metrics(settings, metrics).await.map_err(|e| e.to_string())?;
    let listener =
        retrieval_service::server::listen(&address).await.map_err(|e| format!("cannot listen on {address}: {e}"))?;
    tracing::info!(%address, backend = state.search.index().backend_name(), "retrieval service listening");
    reload_on_hangup(state.clone());
    let stop = stop_signal();
    retrieval_service::server::serve(listener, state, async move {
        let signal = stop.await;
        tracing::info!(signal, grace_seconds = grace, "stopping: no new connections; finishing requests in progress");
    })
    .await
    .map_err(|e| e.to_string())?;
    tracing::info!("stopped");
    Ok(())
}

/// Completes with the signal's name on SIGTERM (what `docker stop` and Kubernetes send, then
/// SIGKILL 10 s later) or SIGINT (Ctrl-C). The handlers are installed at once, not when first
/// polled, so a signal that comes early is not lost (nor, as PID 1, ignored).
#[cfg(unix)]
fn stop_signal() -> impl std::future::Future<Output = &'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        match (terminate, interrupt) {
            (Ok(mut terminate), Ok(mut interrupt)) => tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            },
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
}

#[cfg(not(unix))]
fn stop_signal() -> impl std::future::Future<Output = &'static str> {
    async {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// `SIGHUP` reloads the themes, boosting and synonyms files, as `POST /config/reload` does.
#[cfg(unix)]
fn reload_on_hangup(state: retrieval_service::AppState) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; reload the config with POST /internal/retrieval/config/reload");
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            // The outcome is logged, counted and shown by /health; a hangup while a reload runs
            // is refused like a second POST (logged), not queued: send it again when it is done.
            let _ = retrieval_service::reload_tuning(&state).await;
        }
    });
}

#[cfg(not(unix))]
fn reload_on_hangup(_state: retrieval_service::AppState) {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let settings = match retrieval_service::startup::load_settings(cli.config.as_deref(), &env) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let metrics = Arc::new(Metrics::new());
    let _flush_logs = init_telemetry(&settings, &metrics);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve { port } => serve(settings, port, metrics).await,
            Command::Themes { command: ThemesCommand::Suggest { index, tenant, min_docs } } => {
                suggest_themes(&settings, index, tenant, min_docs)
            }
            Command::Eval(args) => {
                let embedder =
                    retrieval_service::startup::build_ingest_embedder(&settings).map_err(|e| e.to_string())?;
                retrieval_service::eval::run(&settings, embedder, &args)
                    .await
                    .map(|report| print!("{report}"))
                    .map_err(|error| error.to_string())
            }
            Command::Learn(args) => {
                let embedder =
                    retrieval_service::startup::build_ingest_embedder(&settings).map_err(|e| e.to_string())?;
                retrieval_service::learn::run(&settings, embedder, &args).await.map(|report| print!("{report}"))
            }
            Command::Ingest(args) => {
                let embedder =
                    retrieval_service::startup::build_ingest_embedder(&settings).map_err(|e| e.to_string())?;
                let writer = remote_writer(&settings, &args)?;
                retrieval_service::ingest::run_ingest_with_writer(&settings, embedder, &args, writer)
                    .await
                    .map(|report| println!("{report}"))
                    .map_err(|error| error.to_string())
            }
        }
    });
    // Work still running once the server has stopped (a request past the shutdown grace) does not
    // hold the exit up.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The writer of `ingest` for a remote backend (Chroma or PostgreSQL); `None` for the snapshot
/// file, or when the Chroma client cannot be built (the run then says which writer is missing).
/// A PostgreSQL URL that cannot be used stops the run with why (never the URL).
fn remote_writer(
    settings: &retrieval_service::config::Settings,
    args: &retrieval_service::ingest::IngestArgs,
) -> Result<Option<std::sync::Arc<dyn retrieval_engine::ingest::IndexWriter>>, String> {
    use retrieval_service::ingest::IngestBackend;
    Ok(match args.backend_for(settings) {
        IngestBackend::Memory => None,
        IngestBackend::Chroma => match retrieval_engine::ChromaIndex::for_ingest(&settings.chroma()) {
            // The report prints where it wrote: without a password in the URL.
            Ok(index) => Some(std::sync::Arc::new(retrieval_engine::ingest::ChromaSourceWriter::new(
                index,
                retrieval_engine::upstream::redact(&settings.chroma_host),
            ))),
            Err(error) => {
                tracing::warn!(%error, "chroma writer unavailable");
                None
            }
        },
        IngestBackend::Postgres => {
            let index = retrieval_engine::PostgresIndex::for_ingest(&settings.postgres())
                .map_err(|error| format!("RETR_POSTGRES_URL: {}", error.message))?;
            Some(std::sync::Arc::new(retrieval_engine::ingest::PostgresSourceWriter::new(
                index,
                retrieval_engine::describe_postgres_url(&settings.postgres_url),
            )))
        }
    })
}
