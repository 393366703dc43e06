//! What the refresher knows of Chroma beyond the replica: the collections' state it reflects
//! (`Signature`), the change-log entries applied, and the manifests it serves by.

use super::Manifest;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What identifies one state of the three collections: a change in any part means a reload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Signature {
    pub(super) collection_ids: [String; 3],
    pub(super) counts: [usize; 3],
    pub(super) version: String,
    pub(super) embedding_model: String,
    pub(super) indexed_at: String,
}

/// What the refresher knows of Chroma beyond the replica itself.
#[derive(Debug, Default)]
pub(super) struct SyncState {
    /// The collections' state the replica reflects.
    pub(super) signature: Option<Signature>,
    /// Change-log entries already reflected in the replica: id → (version, at_ms).
    pub(super) applied: HashMap<String, (String, i64)>,
    /// The newest `at_ms` of an entry seen; the next poll reads from `cursor_ms − LOOKBACK_MS`.
    pub(super) cursor_ms: i64,
    /// Collections whose counts moved without a logged change at the last poll: reloaded in full
    /// when the next poll finds them the same.
    pub(super) unexplained: Option<Signature>,
    /// The manifests the replica serves by (`manifest`), by manifest id.
    pub(super) manifests: BTreeMap<String, Arc<Manifest>>,
}
