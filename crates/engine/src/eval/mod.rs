//! The evaluation behind the `eval` command: ranking quality (nDCG@10, Recall@10, MRR@10) and
//! query latency of dense, lexical and hybrid retrieval on a BEIR-style corpus (formats of
//! xquad-ru: `corpus.jsonl`, queries, qrels TSV), and page-level questions through the real search (`pages`). The
//! command itself (its arguments, reading the settings, building the search service as `serve`
//! does) is the service's `eval` module.

pub mod crossval;
pub mod data;
mod error;
pub mod file_cached_embedder;
pub(crate) mod metrics;
pub mod multi;
pub mod pages;
mod report;
pub mod runner;

pub use error::EvalError;
pub use report::Report;
pub use runner::{run_eval, EvalOptions, EvalReport};
