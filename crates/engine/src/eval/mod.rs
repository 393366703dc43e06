//! The evaluation behind the `eval` command: ranking quality (nDCG@10, Recall@10, MRR@10) and
//! query latency of dense, lexical and hybrid retrieval on a BEIR-style corpus (formats of
//! xquad-ru: `corpus.jsonl`, queries, qrels TSV), and page-level questions through the real search (`pages`). The
//! command itself (its arguments, reading the settings, building the search service as `serve`
//! does) is the service's `eval` module.

pub(crate) mod crossval;
pub(crate) mod data;
pub(crate) mod error;
pub(crate) mod file_cached_embedder;
pub(crate) mod metrics;
pub(crate) mod multi;
pub(crate) mod pages;
pub(crate) mod report;
pub(crate) mod runner;

pub use error::EvalError;
pub use report::Report;
pub use runner::{run_eval, EvalOptions, EvalReport, SystemScores};

pub use crossval::{cross_validate, CrossValidation, Labelled};
pub use data::{read_corpus, read_qrels, read_queries, EvalQuery, Passage, Qrels};
pub use file_cached_embedder::FileCachedEmbedder;
pub use multi::{per_file_scores, MultiReport};
pub use pages::{
    read_questions, run_pages, ModeScores, PageQuestion, PagesReport, PagesRun, PagesSettings, QuestionOutcome,
};
