//! The durable feedback log: one append-only JSON-lines file per tenant,
//! `<dir>/t-<tenant>/feedback.jsonl` (the `t-` prefix keeps the tenant ids `.` and `..` inside
//! the directory), written by one writer thread.
//!
//! A post is acknowledged only after its line is written and the file synced (`fdatasync`), so
//! an acknowledged record survives a crash or `kill -9`. The writer takes every post waiting at
//! once (group commit): one write and one sync per tenant per batch, so many thousands of posts a
//! second cost a few hundred syncs. A line torn by a crash (never acknowledged) is cut off when
//! the file is next opened; a reader skips any line that does not parse.
//!
//! Bounds: a tenant's file over `max_bytes` is rewritten (atomically: a temporary file renamed
//! over it) with only its newest records, half the bound, and records older than `max_age` are
//! dropped at that rewrite, at the first write after they expired, and by every read.

use super::record::{now_ms, FeedbackRecord};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use tokio::sync::oneshot;

const LOG_FILE: &str = "feedback.jsonl";
/// Posts taken into one commit at most.
const MAX_BATCH: usize = 16_384;
/// Open tenant files kept at most; beyond, all are closed and reopened when written again.
const MAX_OPEN_FILES: usize = 64;

/// How much feedback a tenant keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeedbackLimits {
    /// The most bytes one tenant's log may hold before its oldest records are dropped.
    pub max_bytes: u64,
    /// Records older than this are dropped.
    pub max_age: Duration,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("feedback store: {0}")]
    Io(String),
    #[error("the feedback writer has stopped")]
    Stopped,
}

fn io_error(path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Io(format!("{}: {error}", path.display()))
}

enum Command {
    Append { tenant: String, line: Vec<u8>, done: oneshot::Sender<Result<(), StoreError>> },
    Delete { tenant: String, done: oneshot::Sender<Result<usize, StoreError>> },
}

/// The per-tenant feedback logs under one directory, and the thread that writes them.
#[derive(Debug)]
pub struct FeedbackStore {
    dir: PathBuf,
    limits: FeedbackLimits,
    commands: mpsc::Sender<Command>,
}

impl FeedbackStore {
    /// Opens (creating it when missing) the directory and starts the writer thread, which ends
    /// when the store is dropped.
    pub fn open(dir: impl Into<PathBuf>, limits: FeedbackLimits) -> Result<Self, StoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|error| io_error(&dir, error))?;
        let (commands, receiver) = mpsc::channel();
        let writer = Writer { dir: dir.clone(), limits, open: HashMap::new() };
        std::thread::Builder::new()
            .name("feedback-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|error| StoreError::Io(format!("cannot start the feedback writer: {error}")))?;
        Ok(Self { dir, limits, commands })
    }

    /// The directory of a tenant's feedback (and of what is learned from it).
    pub fn tenant_dir(&self, tenant: &str) -> PathBuf {
        tenant_dir(&self.dir, tenant)
    }

    pub fn limits(&self) -> FeedbackLimits {
        self.limits
    }

    /// Appends `record` to the tenant's log; returns once it is on disk (synced).
    pub async fn append(&self, tenant: &str, record: &FeedbackRecord) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record).map_err(|error| StoreError::Io(error.to_string()))?;
        line.push(b'\n');
        let (done, answer) = oneshot::channel();
        self.commands
            .send(Command::Append { tenant: tenant.to_string(), line, done })
            .map_err(|_| StoreError::Stopped)?;
        answer.await.map_err(|_| StoreError::Stopped)?
    }

    /// Deletes every feedback record of the tenant (after the posts sent before it are written);
    /// returns how many there were.
    pub async fn delete(&self, tenant: &str) -> Result<usize, StoreError> {
        let (done, answer) = oneshot::channel();
        self.commands.send(Command::Delete { tenant: tenant.to_string(), done }).map_err(|_| StoreError::Stopped)?;
        answer.await.map_err(|_| StoreError::Stopped)?
    }

    /// The tenant's records within the age bound, oldest first (blocking file read).
    pub fn read(&self, tenant: &str) -> Result<Vec<FeedbackRecord>, StoreError> {
        read_log(&self.dir, tenant, self.limits.max_age)
    }
}

/// The directory of a tenant's feedback under `dir`.
pub(crate) fn tenant_dir(dir: &Path, tenant: &str) -> PathBuf {
    dir.join(format!("t-{tenant}"))
}

/// The records of a tenant's log under `dir` no older than `max_age`, oldest first; lines that
/// do not parse (a tail torn by a crash) are skipped.
pub(crate) fn read_log(dir: &Path, tenant: &str, max_age: Duration) -> Result<Vec<FeedbackRecord>, StoreError> {
    let path = tenant_dir(dir, tenant).join(LOG_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error(&path, error)),
    };
    let oldest = now_ms().saturating_sub(max_age.as_millis() as u64);
    Ok(parse_lines(&bytes).filter(|record| record.at_ms >= oldest).collect())
}

fn parse_lines(bytes: &[u8]) -> impl Iterator<Item = FeedbackRecord> + '_ {
    bytes.split(|byte| *byte == b'\n').filter_map(|line| serde_json::from_slice(line).ok())
}

/// An open tenant log and what the bounds need to know of it.
struct TenantLog {
    file: File,
    bytes: u64,
    oldest_ms: Option<u64>,
}

struct Writer {
    dir: PathBuf,
    limits: FeedbackLimits,
    open: HashMap<String, TenantLog>,
}

type Pending = Vec<(Vec<u8>, oneshot::Sender<Result<(), StoreError>>)>;

impl Writer {
    fn run(mut self, commands: mpsc::Receiver<Command>) {
        while let Ok(first) = commands.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match commands.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            let mut pending: HashMap<String, Pending> = HashMap::new();
            for command in batch {
                match command {
                    Command::Append { tenant, line, done } => pending.entry(tenant).or_default().push((line, done)),
                    Command::Delete { tenant, done } => {
                        if let Some(appends) = pending.remove(&tenant) {
                            self.commit(&tenant, appends);
                        }
                        let _ = done.send(self.delete(&tenant));
                    }
                }
            }
            for (tenant, appends) in pending {
                self.commit(&tenant, appends);
            }
        }
    }

    /// Writes a tenant's lines in one write, syncs, then acknowledges them all (or fails them all).
    fn commit(&mut self, tenant: &str, appends: Pending) {
        let mut bytes = Vec::with_capacity(appends.iter().map(|(line, _)| line.len()).sum());
        for (line, _) in &appends {
            bytes.extend_from_slice(line);
        }
        let result = self.write(tenant, &bytes);
        if result.is_err() {
            // The file may now end in a partial line: reopen (and cut it) at the next write.
            self.open.remove(tenant);
        }
        if let Err(error) = &result {
            tracing::error!(tenant, %error, "feedback not written");
        }
        for (_, done) in appends {
            let _ = done.send(result.clone());
        }
        if result.is_ok() {
            if let Err(error) = self.keep_bounds(tenant) {
                tracing::warn!(tenant, %error, "feedback log not compacted");
                self.open.remove(tenant);
            }
        }
    }

    fn write(&mut self, tenant: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = tenant_dir(&self.dir, tenant).join(LOG_FILE);
        if !self.open.contains_key(tenant) {
            if self.open.len() >= MAX_OPEN_FILES {
                self.open.clear();
            }
            let log = open_log(&path)?;
            self.open.insert(tenant.to_string(), log);
        }
        let Some(log) = self.open.get_mut(tenant) else { return Err(StoreError::Stopped) };
        log.file.write_all(bytes).map_err(|error| io_error(&path, error))?;
        log.file.sync_data().map_err(|error| io_error(&path, error))?;
        log.bytes += bytes.len() as u64;
        if log.oldest_ms.is_none() {
            log.oldest_ms = parse_lines(bytes).next().map(|record| record.at_ms);
        }
        Ok(())
    }

    /// Rewrites the tenant's log when it is over the size bound or holds expired records.
    fn keep_bounds(&mut self, tenant: &str) -> Result<(), StoreError> {
        let Some(log) = self.open.get(tenant) else { return Ok(()) };
        let max_age_ms = self.limits.max_age.as_millis() as u64;
        let expired_before = now_ms().saturating_sub(max_age_ms);
        let expired = log.oldest_ms.is_some_and(|oldest| oldest < expired_before);
        if log.bytes <= self.limits.max_bytes && !expired {
            return Ok(());
        }
        self.open.remove(tenant);
        let directory = tenant_dir(&self.dir, tenant);
        let path = directory.join(LOG_FILE);
        let bytes = std::fs::read(&path).map_err(|error| io_error(&path, error))?;
        let mut kept: Vec<&[u8]> = bytes
            .split(|byte| *byte == b'\n')
            .filter(|line| {
                serde_json::from_slice::<FeedbackRecord>(line).is_ok_and(|record| record.at_ms >= expired_before)
            })
            .collect();
        // Over the bound: keep the newest records that fill half of it, so the next rewrite is
        // many posts away.
        let target = self.limits.max_bytes / 2;
        let mut total: u64 = kept.iter().map(|line| line.len() as u64 + 1).sum();
        let mut first = 0;
        while total > target && first < kept.len() {
            total -= kept[first].len() as u64 + 1;
            first += 1;
        }
        kept.drain(..first);
        let temporary = directory.join(format!("{LOG_FILE}.tmp"));
        let mut out = File::create(&temporary).map_err(|error| io_error(&temporary, error))?;
        for line in &kept {
            out.write_all(line).and_then(|()| out.write_all(b"\n")).map_err(|error| io_error(&temporary, error))?;
        }
        out.sync_all().map_err(|error| io_error(&temporary, error))?;
        std::fs::rename(&temporary, &path).map_err(|error| io_error(&path, error))?;
        sync_dir(&directory)?;
        Ok(())
    }

    fn delete(&mut self, tenant: &str) -> Result<usize, StoreError> {
        self.open.remove(tenant);
        let directory = tenant_dir(&self.dir, tenant);
        let path = directory.join(LOG_FILE);
        let count = match std::fs::read(&path) {
            Ok(bytes) => parse_lines(&bytes).count(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(error) => return Err(io_error(&path, error)),
        };
        std::fs::remove_file(&path).map_err(|error| io_error(&path, error))?;
        sync_dir(&directory)?;
        Ok(count)
    }
}

/// Opens a tenant's log for appending, creating it (and its directory) when missing, and cuts a
/// partial last line left by a crash.
fn open_log(path: &Path) -> Result<TenantLog, StoreError> {
    if let Some(directory) = path.parent() {
        if !directory.exists() {
            std::fs::create_dir_all(directory).map_err(|error| io_error(directory, error))?;
            if let Some(parent) = directory.parent() {
                sync_dir(parent)?;
            }
        }
    }
    let mut file =
        OpenOptions::new().read(true).append(true).create(true).open(path).map_err(|error| io_error(path, error))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|error| io_error(path, error))?;
    let whole = bytes.iter().rposition(|byte| *byte == b'\n').map_or(0, |last| last + 1);
    if whole < bytes.len() {
        tracing::warn!(path = %path.display(), bytes = bytes.len() - whole, "cut a torn last feedback line");
        file.set_len(whole as u64).map_err(|error| io_error(path, error))?;
        file.sync_data().map_err(|error| io_error(path, error))?;
    }
    let oldest_ms = parse_lines(&bytes[..whole]).next().map(|record| record.at_ms);
    Ok(TenantLog { file, bytes: whole as u64, oldest_ms })
}

fn sync_dir(directory: &Path) -> Result<(), StoreError> {
    File::open(directory).and_then(|handle| handle.sync_all()).map_err(|error| io_error(directory, error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feedback::{now_ms, Verdict};

    fn record(trace: &str, at_ms: u64) -> FeedbackRecord {
        FeedbackRecord {
            at_ms,
            trace_id: trace.into(),
            query: "как настроить dns".into(),
            used: vec!["doc.md#s1".into()],
            shown: vec![],
            verdict: Some(Verdict::Helpful),
        }
    }

    fn limits() -> FeedbackLimits {
        FeedbackLimits { max_bytes: 1 << 20, max_age: Duration::from_secs(3600) }
    }

    #[tokio::test]
    async fn records_are_kept_per_tenant_and_read_back_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = FeedbackStore::open(dir.path(), limits()).unwrap();
        store.append("acme", &record("t1", now_ms())).await.unwrap();
        store.append("demo", &record("t2", now_ms())).await.unwrap();
        store.append("acme", &record("t3", now_ms())).await.unwrap();
        drop(store);
        let store = FeedbackStore::open(dir.path(), limits()).unwrap();
        let traces = |tenant| store.read(tenant).unwrap().into_iter().map(|r| r.trace_id).collect::<Vec<_>>();
        assert_eq!(traces("acme"), ["t1", "t3"]);
        assert_eq!(traces("demo"), ["t2"]);
        assert!(traces("other").is_empty());
    }

    #[tokio::test]
    async fn the_dot_tenants_stay_inside_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("feedback");
        let store = FeedbackStore::open(&root, limits()).unwrap();
        store.append("..", &record("t1", now_ms())).await.unwrap();
        assert!(root.join("t-..").join(LOG_FILE).is_file());
        assert!(!dir.path().join(LOG_FILE).exists());
    }

    #[tokio::test]
    async fn delete_removes_only_that_tenants_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = FeedbackStore::open(dir.path(), limits()).unwrap();
        for trace in ["a", "b"] {
            store.append("acme", &record(trace, now_ms())).await.unwrap();
        }
        store.append("demo", &record("c", now_ms())).await.unwrap();
        assert_eq!(store.delete("acme").await.unwrap(), 2);
        assert_eq!(store.delete("acme").await.unwrap(), 0);
        assert!(store.read("acme").unwrap().is_empty());
        assert_eq!(store.read("demo").unwrap().len(), 1);
        store.append("acme", &record("d", now_ms())).await.unwrap();
        assert_eq!(store.read("acme").unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_torn_last_line_is_cut_and_the_next_record_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = FeedbackStore::open(dir.path(), limits()).unwrap();
        store.append("acme", &record("t1", now_ms())).await.unwrap();
        drop(store);
        let path = dir.path().join("t-acme").join(LOG_FILE);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"at_ms":1,"trace_id":"torn"#).unwrap();
        let store = FeedbackStore::open(dir.path(), limits()).unwrap();
        store.append("acme", &record("t2", now_ms())).await.unwrap();
        let traces: Vec<_> = store.read("acme").unwrap().into_iter().map(|r| r.trace_id).collect();
        assert_eq!(traces, ["t1", "t2"]);
    }

    #[tokio::test]
    async fn a_log_over_its_size_bound_keeps_its_newest_records() {
        let dir = tempfile::tempdir().unwrap();
        let line_bytes = serde_json::to_vec(&record("t000", now_ms())).unwrap().len() as u64 + 1;
        let bound = FeedbackLimits { max_bytes: line_bytes * 20, max_age: Duration::from_secs(3600) };
        let store = FeedbackStore::open(dir.path(), bound).unwrap();
        for number in 0..100 {
            store.append("acme", &record(&format!("t{number:03}"), now_ms())).await.unwrap();
        }
        let kept = store.read("acme").unwrap();
        let bytes = std::fs::metadata(dir.path().join("t-acme").join(LOG_FILE)).unwrap().len();
        assert!(bytes <= bound.max_bytes, "{bytes} bytes");
        assert!(kept.len() >= 10 && kept.len() <= 20, "{} kept", kept.len());
        assert_eq!(kept.last().unwrap().trace_id, "t099");
    }

    #[tokio::test]
    async fn expired_records_are_neither_read_nor_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = FeedbackStore::open(dir.path(), limits()).unwrap();
        let two_hours_ago = now_ms() - 7_200_000;
        store.append("acme", &record("old", two_hours_ago)).await.unwrap();
        store.append("acme", &record("new", now_ms())).await.unwrap();
        let traces: Vec<_> = store.read("acme").unwrap().into_iter().map(|r| r.trace_id).collect();
        assert_eq!(traces, ["new"]);
        let on_disk = std::fs::read_to_string(dir.path().join("t-acme").join(LOG_FILE)).unwrap();
        assert!(!on_disk.contains("\"old\""), "{on_disk}");
    }
}
