//! What the collections' metadata says and the clock it says it by: the docs collection's
//! metadata keys, a version marker's number, the change log's milliseconds, and each level's slot.

use crate::model::Level;
use std::time::{SystemTime, UNIX_EPOCH};

/// Docs-collection metadata keys: the version marker bumped after every write, and index info.
pub(super) const VERSION_KEY: &str = "index_version";
pub(super) const MODEL_KEY: &str = "embedding_model";
pub(super) const INDEXED_AT_KEY: &str = "indexed_at";

/// The number a version marker starts with (`<nanoseconds>-<pid>-<counter>`, written by every
/// write through this service; `writer::next_version`).
pub(crate) fn parse_version(marker: &str) -> Option<u64> {
    marker.split('-').next()?.parse().ok()
}

/// Milliseconds since the epoch (the change log's clock).
pub(super) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_millis() as i64).unwrap_or_default()
}

/// The slot of `level` in the per-level arrays (collection ids, counts).
pub(super) fn level_slot(level: Level) -> usize {
    match level {
        Level::Doc => 0,
        Level::Section => 1,
        Level::Chunk => 2,
    }
}
