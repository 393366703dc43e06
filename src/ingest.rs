//! `ingest`: the engine's ingest pipeline (`retrieval_engine::ingest`, re-exported here) and the
//! command around it (`cli`: its arguments, and one run from the settings to a written index).

pub use retrieval_engine::ingest::*;

pub mod cli;

pub use cli::{run_ingest, run_ingest_with_writer, IngestArgs, IngestBackend, IngestReport};
