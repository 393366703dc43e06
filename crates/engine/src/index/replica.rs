//! The replica engine both backends share. Searches never read the store of record: they read a
//! `LoadedIndex` held by a `Replica`, which a `SnapshotSource` (the snapshot file, Chroma or PostgreSQL)
//! brings up to date. One refresh loop (`spawn_refresher`), one swap (`Replica::swap`), one error
//! state (`Replica::fail`, or a probe of the source unanswered past its deadline:
//! `Replica::probe`). Every `SnapshotSource` is a `VectorIndex` (`index/source.rs`): each call
//! reads the current snapshot, and `pin` hands a search one snapshot (`Source::Snapshot`) for all
//! of its reads.

use super::memory::LoadedIndex;
use super::{IndexError, IndexErrorKind, ReplicaStatus, Result};
use async_trait::async_trait;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct State {
    loaded: Option<Arc<LoadedIndex>>,
    /// The version of the data in `loaded` (`VectorIndex::version`).
    version: Option<u64>,
    /// Why the last refresh failed, while it keeps failing.
    error: Option<IndexError>,
    attempted_at: Option<Instant>,
    /// When `loaded` was last confirmed current (loaded, or its source polled unchanged).
    fresh_at: Option<Instant>,
    last_load: Option<Duration>,
    records_loaded: u64,
    /// When the probe in progress (the source's cheap "has anything changed" calls) started.
    probing_since: Option<Instant>,
    /// Which server the source last read from (`primary`, `standby 1`), when it has several.
    source: Option<String>,
    /// Why answers are degraded although the last refresh succeeded (read from a standby).
    note: Option<String>,
}

/// The snapshot searches read, and what is known about its freshness.
#[derive(Debug, Default)]
pub struct Replica {
    state: RwLock<State>,
    /// Whether a source refreshes it (`false`: a fixed snapshot, which reports no status).
    refreshed: bool,
    /// Tenant levels of at least this many records are ranked tenant-wide through their
    /// partition (`index::partition`) once it is built; 0: always exactly.
    approximate_min_records: std::sync::atomic::AtomicUsize,
    /// How long a probe may go unanswered before the replica counts as stale (one call's timeout;
    /// `None`: never, the default).
    probe_deadline: RwLock<Option<Duration>>,
}

/// One loaded snapshot with what was known of it when it was pinned: what a search reads
/// (`Source::Snapshot`).
#[derive(Clone)]
pub struct PinnedSnapshot {
    pub(crate) loaded: Arc<LoadedIndex>,
    pub(crate) version: Option<u64>,
    /// Why its answers may be out of date, fixed when it was pinned.
    pub(crate) staleness: Option<String>,
    /// Levels of at least this many records may be ranked through their partition (0: never).
    pub(crate) approximate_min_records: usize,
}

/// A probe in progress ([`Replica::probe`]); over when dropped, answered or not.
pub(crate) struct Probe<'a>(&'a Replica);

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        self.0.write().probing_since = None;
    }
}

impl Replica {
    /// An empty replica that a source will load.
    pub(crate) fn refreshed() -> Self {
        Self {
            state: RwLock::default(),
            refreshed: true,
            approximate_min_records: Self::exact(),
            probe_deadline: RwLock::default(),
        }
    }

    /// A replica over a fixed snapshot (the demo corpus, tests); never refreshed.
    pub(crate) fn fixed(loaded: Arc<LoadedIndex>, version: Option<u64>) -> Self {
        let state = State { loaded: Some(loaded), version, ..State::default() };
        Self {
            state: RwLock::new(state),
            refreshed: false,
            approximate_min_records: Self::exact(),
            probe_deadline: RwLock::default(),
        }
    }

    fn exact() -> std::sync::atomic::AtomicUsize {
        std::sync::atomic::AtomicUsize::new(0)
    }

    /// Sets the level size from which tenant-wide rankings may be approximate (0: never, the
    /// default of a new replica; the service sets `RETR_APPROXIMATE_MIN_RECORDS`).
    pub fn set_approximate_min_records(&self, min_records: usize) {
        self.approximate_min_records.store(min_records, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn approximate_min_records(&self) -> usize {
        self.approximate_min_records.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets how long a probe of the source may go unanswered before the replica counts as stale:
    /// the timeout of one call to the source, so a stalled source (one that accepts connections
    /// and never answers) shows as soon as one call has timed out, not when the client's retries
    /// have run out and the refresh fails.
    pub(crate) fn set_probe_deadline(&self, deadline: Duration) {
        *self.probe_deadline.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(deadline);
    }

    /// Marks a probe of the source in progress until the returned guard is dropped.
    pub(crate) fn probe(&self) -> Probe<'_> {
        self.write().probing_since = Some(Instant::now());
        Probe(self)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The loaded snapshot, when there is one.
    pub(crate) fn current(&self) -> Option<Arc<LoadedIndex>> {
        self.read().loaded.clone()
    }

    /// The snapshot to answer from; without one, why there is none.
    pub(crate) fn snapshot(&self) -> Result<Arc<LoadedIndex>> {
        let state = self.read();
        match (&state.loaded, &state.error) {
            (Some(loaded), _) => Ok(Arc::clone(loaded)),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => Err(IndexError::new(IndexErrorKind::Unavailable, "the index is not loaded yet")),
        }
    }

    /// Installs a new snapshot read at `version`; `records_read` records were fetched for it.
    pub(crate) fn swap(&self, loaded: Arc<LoadedIndex>, version: Option<u64>, took: Duration, records_read: u64) {
        self.install(loaded, version, Duration::ZERO, took, records_read);
    }

    /// Installs a snapshot kept from an earlier run (a local copy), last confirmed current `age`
    /// ago: its freshness is that age, not the time it was read.
    pub(crate) fn restore(&self, loaded: Arc<LoadedIndex>, version: Option<u64>, age: Duration, took: Duration) {
        self.install(loaded, version, age, took, 0);
    }

    fn install(&self, loaded: Arc<LoadedIndex>, version: Option<u64>, age: Duration, took: Duration, read: u64) {
        let now = Instant::now();
        let mut state = self.write();
        state.loaded = Some(loaded);
        state.version = newest(state.version, version);
        state.error = None;
        state.attempted_at = Some(now);
        state.fresh_at = Some(now.checked_sub(age).unwrap_or(now));
        state.last_load = Some(took);
        state.records_loaded += read;
    }

    /// Replaces the snapshot by an equivalent one (the same data, new index-wide facts).
    pub(crate) fn replace(&self, loaded: Arc<LoadedIndex>) {
        self.write().loaded = Some(loaded);
    }

    /// The source was polled and the snapshot is current (at `version`, when it says).
    pub(crate) fn confirm(&self, version: Option<u64>) {
        let mut state = self.write();
        if let Some(previous) = state.error.take() {
            tracing::info!(previous_error = %previous, "index source available again");
        }
        if version.is_some() {
            state.version = newest(state.version, version);
        }
        state.attempted_at = Some(Instant::now());
        state.fresh_at = state.attempted_at;
    }

    /// A refresh failed: searches keep the snapshot they have (flagged stale) or get `error`.
    pub(crate) fn fail(&self, error: IndexError) {
        let mut state = self.write();
        state.attempted_at = Some(Instant::now());
        if state.error.as_ref().map(|previous| &previous.message) != Some(&error.message) {
            if state.loaded.is_some() {
                tracing::warn!(%error, kind = ?error.kind, "index refresh failed; answering from the last good replica");
            } else {
                tracing::warn!(%error, kind = ?error.kind, "no index loaded");
            }
        }
        state.error = Some(error);
    }

    /// The last refresh failed (and when it was attempted), or no refresh was attempted yet.
    pub(crate) fn attempt(&self) -> (Option<Instant>, bool) {
        let state = self.read();
        (state.attempted_at, state.error.is_some())
    }

    /// The last refresh read from `source`; `note` says why that degrades answers (a standby read
    /// while the primary is down), `None` when it does not.
    pub(crate) fn set_source(&self, source: String, note: Option<String>) {
        let mut state = self.write();
        state.source = Some(source);
        state.note = note;
    }

    /// Which server the source last read from, when it has several.
    pub(crate) fn source(&self) -> Option<String> {
        self.read().source.clone()
    }

    pub(crate) fn last_error(&self) -> Option<IndexError> {
        self.read().error.clone()
    }

    pub(crate) fn version(&self) -> Option<u64> {
        let state = self.read();
        state.loaded.as_ref().and(state.version)
    }

    /// Why answers may be out of date: the source cannot be refreshed (the last refresh failed,
    /// or a probe has gone unanswered past its deadline) and the last good snapshot answers.
    /// `None` when current.
    pub(crate) fn staleness(&self, backend: &str) -> Option<String> {
        let deadline = *self.probe_deadline.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let state = self.read();
        let age = state.fresh_at.map_or(0, |at| at.elapsed().as_secs());
        let unanswered = state
            .probing_since
            .map(|since| since.elapsed())
            .filter(|waited| deadline.is_some_and(|deadline| *waited > deadline));
        match (&state.error, &state.loaded, unanswered) {
            (Some(error), Some(_), _) => {
                let reason = error.public_message();
                Some(format!(
                    "the {backend} index cannot be refreshed ({reason}); answering from the replica confirmed {age} s ago"
                ))
            }
            (None, Some(_), Some(waited)) => Some(format!(
                "the {backend} index cannot be refreshed (no answer for {} s, past the {} s timeout of one call); \
                 answering from the replica confirmed {age} s ago",
                waited.as_secs(),
                deadline.unwrap_or_default().as_secs_f64()
            )),
            (None, Some(_), None) => state.note.clone(),
            _ => None,
        }
    }

    pub(crate) fn status(&self) -> Option<ReplicaStatus> {
        if !self.refreshed {
            return None;
        }
        let state = self.read();
        Some(ReplicaStatus {
            age_seconds: state.fresh_at.map(|at| at.elapsed().as_secs_f64()),
            last_refresh_error: state.error.as_ref().map(IndexError::public_message),
            last_load_seconds: state.last_load.map(|load| load.as_secs_f64()),
            records_loaded_total: state.records_loaded,
            source: state.source.clone(),
        })
    }

    /// The current snapshot with its version and staleness, fixed for one search.
    pub(crate) fn pin(&self, backend: &'static str) -> Option<PinnedSnapshot> {
        let staleness = self.staleness(backend);
        let state = self.read();
        let loaded = Arc::clone(state.loaded.as_ref()?);
        Some(PinnedSnapshot {
            loaded,
            version: state.version,
            staleness,
            approximate_min_records: self.approximate_min_records(),
        })
    }
}

/// Where a replica's snapshots come from. Every `SnapshotSource` is a `VectorIndex` (`index/source.rs`).
#[async_trait]
pub trait SnapshotSource: Send + Sync {
    fn backend_name(&self) -> &'static str;

    fn replica(&self) -> &Replica;

    /// Polls the source once and brings the replica up to date (`Replica::swap`, `confirm` or
    /// `fail`). Returns whether a new snapshot was installed.
    async fn poll(self: Arc<Self>) -> Result<bool>;

    /// Called before every read: a source may refresh first (a first load, a write through this
    /// instance). Never waits on an unreachable source when a snapshot is loaded.
    async fn before_read(&self) {}
}

/// Polls `source` every `interval` (first poll at once) until it is dropped: the one refresh loop.
pub(crate) fn spawn_refresher<S: SnapshotSource + 'static>(source: &Arc<S>, interval: Duration) {
    spawn_poller(source, interval, |source| async move {
        let _ = source.poll().await;
    });
}

/// Runs `poll` on `target` every `interval` (the first at once, a late tick delayed, never
/// two at a time) until `target` is dropped: the loop of every index that polls its source.
pub(crate) fn spawn_poller<T, F, Fut>(target: &Arc<T>, interval: Duration, poll: F)
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let weak = Arc::downgrade(target);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(target) = weak.upgrade() else { break };
            poll(target).await;
        }
    });
}

/// The version a replica serves after installing `new` over `served`: never an older one than
/// it served (a file restored with an older modification time, a clock set back), so that a
/// read-your-writes client that saw a version is never told afterwards the index is behind it.
fn newest(served: Option<u64>, new: Option<u64>) -> Option<u64> {
    match (served, new) {
        (Some(served), Some(new)) => Some(served.max(new)),
        (served, new) => new.or(served),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded() -> Arc<LoadedIndex> {
        Arc::new(LoadedIndex::build(crate::fixtures::snapshot()).unwrap())
    }

    /// A source that accepts connections and never answers: the replica is stale as soon as a
    /// probe has waited past one call's timeout, and current again once a probe is over.
    #[test]
    fn a_probe_unanswered_past_its_deadline_makes_the_replica_stale() {
        let replica = Replica::refreshed();
        replica.set_probe_deadline(Duration::from_millis(30));
        replica.swap(loaded(), Some(1), Duration::ZERO, 0);
        let probe = replica.probe();
        assert_eq!(replica.staleness("chroma"), None, "a probe within its deadline is no staleness");
        std::thread::sleep(Duration::from_millis(60));
        let note = replica.staleness("chroma").expect("stale once the probe is overdue");
        assert!(note.contains("cannot be refreshed") && note.contains("no answer"), "{note}");
        // A search pins the replica with the same note.
        assert_eq!(replica.pin("chroma").unwrap().staleness, Some(note));
        drop(probe);
        assert_eq!(replica.staleness("chroma"), None, "the probe is over");
        replica.confirm(Some(1));
        assert_eq!(replica.staleness("chroma"), None);
    }

    /// Without a deadline (the snapshot file), a long probe is no staleness; without a replica
    /// there is nothing stale (the index is unavailable instead).
    #[test]
    fn no_deadline_or_no_replica_is_no_staleness() {
        let replica = Replica::refreshed();
        replica.swap(loaded(), Some(1), Duration::ZERO, 0);
        let _probe = replica.probe();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(replica.staleness("file"), None);
        let empty = Replica::refreshed();
        empty.set_probe_deadline(Duration::ZERO);
        let _probe = empty.probe();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(empty.staleness("chroma"), None);
    }
}
