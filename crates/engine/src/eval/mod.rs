//! The evaluation behind the `eval` command: ranking quality (nDCG@10, Recall@10, MRR@10) and
//! query latency of dense, lexical and hybrid retrieval on a BEIR-style corpus (formats of
//! ../shared/eval/xquad-ru), and page-level questions through the real search (`pages`). The
//! command itself (its arguments, reading the settings, building the search service as `serve`
//! does) is the service's `eval` module.

pub mod crossval;
pub mod data;
pub mod file_cached_embedder;
pub(crate) mod metrics;
pub mod multi;
pub mod pages;
pub mod runner;

use crate::embed::EmbedError;
use std::path::PathBuf;

pub use runner::{run_eval, EvalOptions, EvalReport};

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, message: String },
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("index: {0}")]
    Index(String),
}

/// What `eval` printed: a passage-level or a page-level report.
#[derive(Debug, Clone)]
pub enum Report {
    Passages(EvalReport),
    Pages(Box<multi::MultiReport>),
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Report::Passages(report) => write!(f, "{report}"),
            Report::Pages(report) => writeln!(f, "{report}"),
        }
    }
}
