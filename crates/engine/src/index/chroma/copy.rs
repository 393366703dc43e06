//! The Chroma replica's local copy (`ChromaSettings::local_copy_dir`): the replica as the
//! in-memory backend keeps its own (`memory::local_copy`), plus a sync note saying which state
//! of Chroma it reflects (the collections' signature, the change-log entries applied and the
//! log cursor, the ingest manifests served) and when that state was last confirmed.
//!
//! A restarting instance reads the copy before its first poll of Chroma and installs it, aged by
//! the time since it was confirmed; the first poll then catches up through the change log exactly
//! as a running replica does (only the docs changed since are read again). A copy older than the
//! change log's trust window, of other collections (recreated under the same names) or of another
//! tenant scope is caught by the same checks as a stale running replica: a full reload. While
//! Chroma cannot be reached, the restored copy answers, flagged stale.
//!
//! The copy is written in the background after a refresh installs a new replica (only the tenants
//! whose part changed; at most one write at a time and one per `MIN_WRITE_GAP`), and its note is
//! rewritten alone every `NOTE_INTERVAL` while nothing changes, so that a copy of an idle
//! instance stays young enough to be caught up.

use super::manifest::Manifest;
use super::sync_state::{Signature, SyncState};
use crate::index::memory::local_copy::{self, Written};
use crate::index::memory::LoadedIndex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the note alone is rewritten while the replica does not change.
const NOTE_INTERVAL: Duration = Duration::from_secs(60);

/// The least time between the starts of two writes of changed data.
const MIN_WRITE_GAP: Duration = Duration::from_secs(10);

/// What the copy says of Chroma: `SyncState` as it was when the copy's replica was current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SyncNote {
    pub(super) signature: Signature,
    /// Change-log entry id → (version, at_ms).
    pub(super) applied: HashMap<String, (String, i64)>,
    pub(super) cursor_ms: i64,
    pub(super) manifests: Vec<Manifest>,
    /// Milliseconds since the epoch when the replica was last confirmed current.
    pub(super) confirmed_at_ms: i64,
}

impl SyncNote {
    /// The note of `state`, confirmed at `now_ms`; `None` when the state is not one to keep (an
    /// incomplete first load, which the next poll reads again in full).
    pub(super) fn of(state: &SyncState, now_ms: i64) -> Option<Self> {
        Some(Self {
            signature: state.signature.clone()?,
            applied: state.applied.clone(),
            cursor_ms: state.cursor_ms,
            manifests: state.manifests.values().map(|manifest| Manifest::clone(manifest)).collect(),
            confirmed_at_ms: now_ms,
        })
    }

    /// The sync state it records.
    pub(super) fn into_state(self) -> SyncState {
        SyncState {
            signature: Some(self.signature),
            applied: self.applied,
            cursor_ms: self.cursor_ms,
            unexplained: None,
            manifests: self.manifests.into_iter().map(|manifest| (manifest.id(), Arc::new(manifest))).collect(),
        }
    }
}

#[derive(Debug, Default)]
struct CopyState {
    /// What the directory holds (as last written or read).
    written: Written,
    /// A write is under way.
    busy: bool,
    /// When the last data write started and the note was last written (milliseconds since the epoch).
    data_started_ms: Option<i64>,
    note_written_ms: i64,
    /// The copy was read (or found missing) once: it is only read for the first load.
    tried: bool,
}

/// One replica's copy directory.
#[derive(Debug)]
pub(super) struct LocalCopy {
    directory: PathBuf,
    /// What the copy must say it copies: the collections and the tenants served.
    source: String,
    state: Mutex<CopyState>,
}

impl LocalCopy {
    pub(super) fn new(directory: PathBuf, source: String) -> Arc<Self> {
        Arc::new(Self { directory, source, state: Mutex::default() })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CopyState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The copy and its note, the first time it is asked for and when there is a whole, readable
    /// one of this source. Blocking.
    pub(super) fn restore(&self) -> Option<(LoadedIndex, SyncNote)> {
        if std::mem::replace(&mut self.state().tried, true) {
            return None;
        }
        let (loaded, note) = match local_copy::read_with_note(&self.directory, &self.source) {
            Ok(Some((loaded, Some(note)))) => (loaded, note),
            Ok(_) => return None,
            Err(error) => {
                tracing::warn!(directory = %self.directory.display(), %error, "local copy of the replica unreadable; reading chroma");
                return None;
            }
        };
        let note: SyncNote = match serde_json::from_value(note) {
            Ok(note) => note,
            Err(error) => {
                tracing::warn!(directory = %self.directory.display(), %error, "local copy of the replica has no usable sync note; reading chroma");
                return None;
            }
        };
        let mut state = self.state();
        state.written = Written::of(&loaded);
        state.note_written_ms = note.confirmed_at_ms;
        Some((loaded, note))
    }

    /// Whether the first load was tried from the copy already.
    pub(super) fn tried(&self) -> bool {
        self.state().tried
    }

    /// Keeps `loaded` (current as `note` says) in the directory: its changed tenants, or the note
    /// alone when nothing changed and the note is due, on a thread of its own. Does nothing while
    /// a write is under way or a data write started less than `MIN_WRITE_GAP` ago (a later
    /// refresh writes it).
    pub(super) fn keep(self: &Arc<Self>, loaded: Arc<LoadedIndex>, note: SyncNote) {
        let now_ms = note.confirmed_at_ms;
        let data = {
            let mut state = self.state();
            let data = !state.written.is_all_of(&loaded);
            let due = if data {
                state.data_started_ms.is_none_or(|at| now_ms - at >= MIN_WRITE_GAP.as_millis() as i64)
            } else {
                now_ms - state.note_written_ms >= NOTE_INTERVAL.as_millis() as i64
            };
            if state.busy || !due {
                return;
            }
            state.busy = true;
            if data {
                state.data_started_ms = Some(now_ms);
            }
            data
        };
        let copy = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("replica-copy".into()).spawn(move || {
            local_copy::give_way_to_searches();
            copy.write(&loaded, &note, data)
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "local copy of the replica not written: no thread");
            self.state().busy = false;
        }
    }

    fn write(&self, loaded: &LoadedIndex, note: &SyncNote, data: bool) {
        let started = std::time::Instant::now();
        let note_value = match serde_json::to_value(note) {
            Ok(value) => value,
            Err(error) => {
                tracing::warn!(%error, "local copy of the replica not written: its note does not serialize");
                self.state().busy = false;
                return;
            }
        };
        let written = self.state().written.clone();
        let outcome = if data {
            local_copy::write_with(&self.directory, &self.source, loaded, Some(&note_value), &written).map(Some)
        } else {
            local_copy::write_note(&self.directory, &self.source, &note_value).map(|_| None)
        };
        let mut state = self.state();
        state.busy = false;
        match outcome {
            Ok(written) => {
                if let Some(written) = written {
                    state.written = written;
                    tracing::info!(directory = %self.directory.display(), seconds = started.elapsed().as_secs_f64(), "local copy of the replica written");
                }
                state.note_written_ms = note.confirmed_at_ms;
            }
            Err(error) => {
                // What the directory holds is unknown now: the next write writes every tenant.
                state.written = Written::default();
                tracing::warn!(directory = %self.directory.display(), %error, "local copy of the replica not written");
            }
        }
    }
}
