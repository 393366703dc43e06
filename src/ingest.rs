//! `ingest`: the command around the engine's ingest pipeline (`retrieval_engine::ingest`), in
//! `cli`: its arguments, and one run from the settings to a written index; `progress`: the
//! embedding phase's progress on stderr.

mod cli;
mod progress;

pub use cli::{run_ingest, run_ingest_with_writer, IngestArgs, IngestBackend};
