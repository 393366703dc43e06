//! The snapshot file format: validation, atomic writes, reads.

use crate::index::{IndexError, IndexErrorKind, Result};
use crate::model::{Level, Record, Snapshot};
use std::collections::HashSet;
use std::path::Path;

pub(super) fn corrupt(message: impl Into<String>) -> IndexError {
    IndexError::new(IndexErrorKind::Corrupt, format!("index empty or corrupted: {}", message.into()))
}

/// What a snapshot must satisfy besides what `IndexBuilder::add` checks of each of its records:
/// its format version, its declared dimension, and ids unique per tenant and level (a snapshot is
/// written whole, so a repeated id is a broken file, not offset paging).
pub(super) fn validate_snapshot(snapshot: &Snapshot) -> Result<()> {
    check_header(snapshot.format_version, 0, 0)?;
    if snapshot.docs.is_empty() || snapshot.chunks.is_empty() {
        return Err(corrupt("the snapshot has no docs or no chunks"));
    }
    let dimension = snapshot.docs[0].embedding.len();
    if dimension == 0 {
        return Err(corrupt("records carry no embeddings"));
    }
    check_header(snapshot.format_version, snapshot.dimension, dimension)?;
    for level in Level::ALL {
        let mut seen = HashSet::new();
        for record in snapshot.records(level) {
            if !seen.insert((record.meta.tenant_id.as_str(), record.id.as_str())) {
                return Err(corrupt(format!("duplicate {} id {}", level.as_str(), record.id)));
            }
        }
    }
    Ok(())
}

/// A snapshot's format version is this build's, and the dimension it declares (0: none) is its
/// records' (`found`; 0: not known yet).
pub(super) fn check_header(format_version: u32, declared: usize, found: usize) -> Result<()> {
    if format_version != Snapshot::FORMAT_VERSION {
        return Err(corrupt(format!(
            "unsupported format_version {format_version} (expected {})",
            Snapshot::FORMAT_VERSION
        )));
    }
    if declared != 0 && found != 0 && declared != found {
        return Err(corrupt(format!("dimension is {declared} but records have {found}")));
    }
    Ok(())
}

/// Each record has its ids, belongs to `level` and has a finite embedding of `dimension`.
pub(super) fn validate_records<'a>(
    level: Level,
    records: impl Iterator<Item = &'a Record>,
    dimension: usize,
) -> Result<()> {
    for record in records {
        if record.meta.tenant_id.is_empty() || record.id.is_empty() || record.meta.doc_id.is_empty() {
            return Err(corrupt(format!("a {} record lacks id, tenant_id or doc_id", level.as_str())));
        }
        if record.level() != level {
            return Err(corrupt(format!(
                "record {} is listed as a {} but its ids say otherwise",
                record.id,
                level.as_str()
            )));
        }
        if record.embedding.len() != dimension || record.embedding.iter().any(|v| !v.is_finite()) {
            return Err(corrupt(format!("record {} has a bad embedding", record.id)));
        }
    }
    Ok(())
}

/// Reads and validates a snapshot file. Blocking: call it off the async threads.
pub fn read_snapshot_file(path: &Path) -> Result<Snapshot> {
    let file = open_snapshot_file(path)?;
    // Parsed as it is read: a whole-file buffer would double the memory a load needs (7.7 GB
    // for 1.24M records) while the replica it replaces still serves.
    let reader = std::io::BufReader::with_capacity(1 << 20, file);
    serde_json::from_reader(reader).map_err(|error| corrupt(format!("{}: {error}", path.display())))
}

/// Opens a snapshot file: a missing one is `NotFound` (nothing ingested yet).
pub(super) fn open_snapshot_file(path: &Path) -> Result<std::fs::File> {
    std::fs::File::open(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            IndexError::new(IndexErrorKind::NotFound, format!("index not found at {} — run ingest", path.display()))
        } else {
            IndexError::new(IndexErrorKind::Corrupt, format!("index at {} unreadable: {error}", path.display()))
        }
    })
}

/// Writes a snapshot atomically: a temporary file in the same directory, then a rename, so a
/// reader sees either the old file or the new one, never half of one. The temporary file is
/// removed when any step fails (a full disk, a failed rename); one left by a writer that was
/// killed is removed by the next write to the same path.
pub fn write_snapshot_file(path: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    pub(super) static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(directory)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("snapshot.json");
    remove_abandoned_temporaries(directory, file_name);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temporary = directory.join(format!(".{file_name}.tmp-{}-{write}", std::process::id()));
    let written = write_then_rename(&temporary, path, snapshot);
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

pub(super) fn write_then_rename(temporary: &Path, path: &Path, snapshot: &Snapshot) -> std::io::Result<()> {
    let file = std::fs::File::create(temporary)?;
    // The new file keeps the old one's permissions: a snapshot an operator made private stays so.
    let existing = std::fs::metadata(path).ok();
    if let Some(existing) = &existing {
        file.set_permissions(existing.permissions())?;
    }
    let mut writer = std::io::BufWriter::new(file);
    serde_json::to_writer(&mut writer, snapshot).map_err(std::io::Error::other)?;
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    // The file's modification time is its version (`index_version`, which read-your-writes
    // clients wait for): a new file is stamped later than the one it replaces, even when the
    // clock went back since, so a version never goes backwards.
    if let Some(previous) = existing.and_then(|existing| existing.modified().ok()) {
        let written = file.metadata()?.modified()?;
        let after = previous + std::time::Duration::from_millis(1);
        if written < after {
            file.set_modified(after)?;
        }
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(temporary, path)
}

/// Removes the temporary files of `file_name` whose writer process is gone (killed mid-write: a
/// process that no longer runs cannot remove its own).
pub(super) fn remove_abandoned_temporaries(directory: &Path, file_name: &str) {
    let prefix = format!(".{file_name}.tmp-");
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(writer) = name.to_str().and_then(|name| name.strip_prefix(&prefix)) else {
            continue;
        };
        let pid = writer.split('-').next().and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !process_runs(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` runs; where this cannot be told, it is assumed to run.
pub(super) fn process_runs(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}
