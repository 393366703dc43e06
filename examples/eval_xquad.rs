//! Runs the eval against an OpenAI-compatible embedding server until `main.rs` wires the
//! `eval` subcommand: `cargo run --release --example eval_xquad -- --embedding-url URL --corpus …`.

use clap::Parser;
use retrieval_service::config::Settings;
use retrieval_service::eval::http_embed::EvalHttpEmbedder;
use retrieval_service::eval::EvalArgs;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
struct Cli {
    #[arg(long)]
    embedding_url: String,
    #[arg(long, default_value = "multilingual-e5-small")]
    embedding_model: String,
    #[command(flatten)]
    eval: EvalArgs,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").with_writer(std::io::stderr).init();
    let cli = Cli::parse();
    let embedder = EvalHttpEmbedder::new(&cli.embedding_url, &cli.embedding_model, Duration::from_secs(120))?;
    let settings = Settings::default();
    let report = retrieval_service::eval::run(&settings, Arc::new(embedder), &cli.eval).await?;
    print!("{report}");
    Ok(())
}
