//! Why an evaluation failed.

use crate::embed::EmbedError;
use std::path::PathBuf;

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
