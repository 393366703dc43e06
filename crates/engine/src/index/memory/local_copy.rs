//! The local copy of a loaded index: each tenant's part written as one binary file (records in
//! number order, the scan matrix, norms and the BM25 index as built), so that a restart reads
//! them back instead of parsing a multi-gigabyte snapshot and tokenizing every text again.
//!
//! A copy is a cache, never a source of truth: it is stamped with the version of what it copies
//! (`source`: the snapshot file's size and modification time), every file is written unnamed
//! (Linux's `O_TMPFILE`; elsewhere under a temporary name), then named and renamed into place, the
//! manifest naming the tenants last, and a copy that is missing,
//! stale, of another format or damaged is ignored (the snapshot is read instead and the copy
//! written again).
//!
//! Layout of a copy directory: `manifest.json` ({format, source, dimension, embedding_model,
//! indexed_at, tenants}), and per tenant `tenant-<hex of the tenant id>.bin` (record counts,
//! norms, BM25 indexes), its records in parts of `PART_RECORDS` (`….bin.records<level>-<part>`,
//! decoded on all cores at once) and one `….bin.level<0|1|2>` per level: its scan matrix, raw,
//! which a restart maps instead of reading (no copy, no page zeroing; the kernel pages it in).
//!
//! A source may keep a note of its own in the manifest (`write_with`, `write_note`): the Chroma
//! backend keeps there what it knows of Chroma's state (its sync note), so that a restart catches
//! up through the change log from where the copy left off. A write may also skip the tenant parts
//! the directory already holds (`Written`): after one tenant changed, only its files are written.

use super::build::PageNumbers;
use super::engine::{level_slot, LevelData, LoadedIndex, TenantIndex};
use crate::index::codec::{damaged, Reader, Writer};
use crate::index::features::{RecordFeatures, TopicTable};
use crate::index::tenant_level::TenantLevel;
use crate::index::LevelStore;
use crate::model::{Level, Metadata, Record};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// Bumped whenever what a copy holds or how it is encoded changes: an older copy is then ignored.
const FORMAT: u32 = 6;
const MAGIC: &[u8; 8] = b"RSCOPY05";
const MANIFEST: &str = "manifest.json";

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Manifest {
    format: u32,
    source: String,
    dimension: usize,
    embedding_model: String,
    indexed_at: String,
    tenants: Vec<String>,
    /// The source's own note (`write_with`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<serde_json::Value>,
}

/// Held while a copy or a note is written: one writer at a time in this process, so that a note
/// is never written over a manifest a copy is replacing.
static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The directory a copy is being written to by this process, if any (one at a time: `WRITING`);
/// its files without a manifest are the copy to come, not a dead writer's.
static WRITING_TO: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Marks `directory` as being written to until dropped.
struct WritingTo;

impl WritingTo {
    fn new(directory: &Path) -> Self {
        *WRITING_TO.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(directory.to_path_buf());
        WritingTo
    }

    fn holds(directory: &Path) -> bool {
        WRITING_TO.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).as_deref() == Some(directory)
    }
}

impl Drop for WritingTo {
    fn drop(&mut self) {
        *WRITING_TO.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }
}

/// The tenant parts a copy directory holds whole, as last written or read: a later write of an
/// index sharing a part (the same `Arc`) skips its files. Held weakly, so no part outlives its
/// index for it, and a freed part's address is never taken for a new part's.
#[derive(Debug, Default, Clone)]
pub(crate) struct Written(HashMap<String, Weak<TenantIndex>>);

impl Written {
    /// The parts of `index`, as a copy of it holds them.
    pub(crate) fn of(index: &LoadedIndex) -> Self {
        Self(index.tenants.iter().map(|(tenant, part)| (tenant.clone(), Arc::downgrade(part))).collect())
    }

    fn holds(&self, tenant: &str, part: &Arc<TenantIndex>) -> bool {
        self.0.get(tenant).is_some_and(|held| std::ptr::eq(held.as_ptr(), Arc::as_ptr(part)))
    }

    /// Whether the directory holds exactly `index`'s parts (a note is then all a write changes).
    pub(crate) fn is_all_of(&self, index: &LoadedIndex) -> bool {
        self.0.len() == index.tenants.len() && index.tenants.iter().all(|(tenant, part)| self.holds(tenant, part))
    }
}

fn tenant_file(directory: &Path, tenant: &str) -> PathBuf {
    let hex: String = tenant.bytes().map(|byte| format!("{byte:02x}")).collect();
    directory.join(format!("tenant-{hex}.bin"))
}

/// The nice value of a thread that writes a copy in the background: the scheduler then gives it
/// about a tenth of what a search thread gets while both want a core (Linux's weights: 110
/// against 1,024), so searches keep their speed and a busy instance still finishes its copy.
const WRITER_NICE: libc::c_int = 10;

/// Lowers the calling thread's CPU priority to `WRITER_NICE`, never raising it (Linux: a thread's
/// nice value is its own, and the threads it starts inherit it): a copy is for the next start, so
/// the thread that writes it in the background gives way to the searches on the same cores.
pub(crate) fn give_way_to_searches() {
    #[cfg(target_os = "linux")]
    // SAFETY: `getpriority` and `setpriority` on the calling thread's id read and write no memory
    // of ours. A failure (a sandbox that forbids it) leaves the priority as it was: harmless.
    unsafe {
        let thread = libc::gettid() as libc::id_t;
        if libc::getpriority(libc::PRIO_PROCESS, thread) < WRITER_NICE {
            libc::setpriority(libc::PRIO_PROCESS, thread, WRITER_NICE);
        }
    }
}

/// Writes `index` as the copy of `source` into `directory` (created when missing), replacing the
/// copy there. A failure leaves either the old copy or none that matches `source`.
pub(crate) fn write(directory: &Path, source: &str, index: &LoadedIndex) -> io::Result<()> {
    write_with(directory, source, index, None, &Written::default()).map(drop)
}

/// `write`, with the source's `note` kept in the manifest, skipping the files of the tenant parts
/// `written` says the directory holds. Returns what the directory holds afterwards.
pub(crate) fn write_with(
    directory: &Path,
    source: &str,
    index: &LoadedIndex,
    note: Option<&serde_json::Value>,
    written: &Written,
) -> io::Result<Written> {
    let _writing = WRITING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let _writing_to = WritingTo::new(directory);
    std::fs::create_dir_all(directory)?;
    remove_abandoned_parts(directory);
    let written_now = write_files(directory, source, index, note, written);
    if written_now.is_err() {
        // No manifest names what this attempt wrote (the old one went first): its files are
        // garbage, and a full disk must not keep them. (Its temporary files went with each
        // failed `write_atomically`.)
        remove_tenant_files_without_manifest(directory);
    }
    written_now
}

/// Removes the temporary files of copy writers that are gone (a process killed mid-write cannot
/// remove its own): a crash loop during the background write must not fill the disk.
fn remove_abandoned_parts(directory: &Path) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|name| name.strip_prefix(".tmp-")) else { continue };
        let pid = rest.rsplit('-').next().and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !super::snapshot::process_runs(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// With no manifest at all (a writer killed or failed before writing it), the directory's tenant
/// files serve nothing: they are removed. A copy of another version keeps its files: the next
/// write replaces only the tenants that changed.
fn remove_tenant_files_without_manifest(directory: &Path) {
    if directory.join(MANIFEST).exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with("tenant-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn write_files(
    directory: &Path,
    source: &str,
    index: &LoadedIndex,
    note: Option<&serde_json::Value>,
    written: &Written,
) -> io::Result<Written> {
    // The old manifest goes first: from here on no reader takes the files for a whole copy.
    match std::fs::remove_file(directory.join(MANIFEST)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let mut tenants: Vec<&String> = index.tenants.keys().collect();
    tenants.sort();
    let mut kept = Vec::new();
    // The file names of the tenants whose files are kept as they are (a tenant's files all
    // start with its file's name, and no other tenant's do).
    let mut kept_tenants = Vec::new();
    for tenant in &tenants {
        let part = &index.tenants[*tenant];
        let file = tenant_file(directory, tenant);
        if written.holds(tenant, part) && file.exists() {
            kept_tenants.extend(file.file_name().map(|name| name.to_string_lossy().into_owned()));
            continue;
        }
        write_atomically(&file, |out| {
            kept.extend(write_tenant(out, directory, source, tenant, index.dimension, part)?);
            Ok(())
        })?;
        kept.push(file);
    }
    let manifest = Manifest {
        format: FORMAT,
        source: source.to_string(),
        dimension: index.dimension,
        embedding_model: index.embedding_model.clone(),
        indexed_at: index.indexed_at.clone(),
        tenants: tenants.iter().map(|tenant| tenant.to_string()).collect(),
        note: note.cloned(),
    };
    write_manifest(directory, &manifest)?;
    // Files of tenants the index no longer has, and parts a tenant no longer needs.
    for entry in std::fs::read_dir(directory)?.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kept_tenant = kept_tenants.iter().any(|prefix| name.starts_with(prefix.as_str()));
        if (name.starts_with("tenant-") && !kept_tenant || name.starts_with(".tmp-")) && !kept.contains(&path) {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(Written::of(index))
}

fn write_manifest(directory: &Path, manifest: &Manifest) -> io::Result<()> {
    write_atomically(&directory.join(MANIFEST), |out| {
        serde_json::to_writer(&mut *out, manifest).map_err(io::Error::other)
    })
}

/// Replaces the note of the whole copy of `source` in `directory`, leaving its data as it is.
/// Returns false when there is no such copy.
pub(crate) fn write_note(directory: &Path, source: &str, note: &serde_json::Value) -> io::Result<bool> {
    let _writing = WRITING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let Some(mut manifest) = read_manifest(directory, source)? else { return Ok(false) };
    manifest.note = Some(note.clone());
    write_manifest(directory, &manifest)?;
    Ok(true)
}

fn read_manifest(directory: &Path, source: &str) -> io::Result<Option<Manifest>> {
    let manifest = match std::fs::read(directory.join(MANIFEST)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    Ok(serde_json::from_slice::<Manifest>(&manifest)
        .ok()
        .filter(|manifest| manifest.format == FORMAT && manifest.source == source))
}

/// The copy in `directory` when it is a whole copy of `source` in this format; `Ok(None)` when
/// there is none (or it is of something else); an error when it is damaged.
pub(crate) fn read(directory: &Path, source: &str) -> io::Result<Option<LoadedIndex>> {
    Ok(read_with_note(directory, source)?.map(|(index, _)| index))
}

/// `read`, with the note the copy was written with.
pub(crate) fn read_with_note(
    directory: &Path,
    source: &str,
) -> io::Result<Option<(LoadedIndex, Option<serde_json::Value>)>> {
    remove_abandoned_parts(directory);
    let Some(manifest) = read_manifest(directory, source)? else {
        // Unless a writer of this process is at work: its files are the copy to come.
        if !WritingTo::holds(directory) {
            remove_tenant_files_without_manifest(directory);
        }
        return Ok(None);
    };
    let mut tenants = HashMap::new();
    let topics = Arc::new(TopicTable::default());
    for tenant in &manifest.tenants {
        let file = std::fs::File::open(tenant_file(directory, tenant))?;
        let mut input = Reader(BufReader::with_capacity(1 << 20, file));
        let part = read_tenant(&mut input, directory, source, tenant, manifest.dimension, &topics)?;
        if input.u8().is_ok() {
            return Err(damaged(format!("tenant {tenant}: bytes after the end")));
        }
        tenants.insert(tenant.clone(), Arc::new(part));
    }
    let index = LoadedIndex {
        embedding_model: manifest.embedding_model,
        dimension: manifest.dimension,
        indexed_at: manifest.indexed_at,
        tenants,
        topics,
    };
    Ok(Some((index, manifest.note)))
}

/// The scan matrix of one level of a tenant: a header of `FILE_HEADER` bytes (so that the
/// columns start aligned for `Column`), then the raw columns.
fn vectors_file(directory: &Path, tenant: &str, slot: usize) -> PathBuf {
    let mut name = tenant_file(directory, tenant).into_os_string();
    name.push(format!(".level{slot}"));
    PathBuf::from(name)
}

const FILE_HEADER: usize = 64;

/// The magic, then a hash of what the file at `path` is a copy of (the source, and the file's
/// name, which names its tenant, level and part), zero-padded.
fn file_header(source: &str, path: &Path) -> [u8; FILE_HEADER] {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (source, path.file_name(), FORMAT).hash(&mut hasher);
    let mut header = [0u8; FILE_HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&hasher.finish().to_le_bytes());
    header
}

/// The `columns` columns of a level's scan matrix of `dimension`: mapped from its file when the
/// platform allows, else read.
fn read_vectors(
    directory: &Path,
    source: &str,
    tenant: &str,
    slot: usize,
    (columns, dimension): (usize, usize),
) -> io::Result<crate::index::vectors::Columns> {
    use crate::index::vectors::Columns;
    let path = vectors_file(directory, tenant, slot);
    let mut file = std::fs::File::open(&path)?;
    let mut header = [0u8; FILE_HEADER];
    io::Read::read_exact(&mut file, &mut header)?;
    let size = file.metadata()?.len();
    let expected = (columns as u64) * 64 + FILE_HEADER as u64;
    if header != file_header(source, &path) || size != expected {
        return Err(damaged(format!("{}: not the scan matrix of this copy", path.display())));
    }
    // SAFETY: the local copy's files are replaced by renaming new ones over them, never written
    // in place, so the mapped bytes do not change while mapped.
    if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
        if let Some(mapped) = Columns::mapped(&Arc::new(map), FILE_HEADER, columns) {
            return Ok(mapped);
        }
    }
    Columns::read(&mut BufReader::with_capacity(1 << 20, file), columns, dimension)
}

fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<std::fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let directory = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = directory.join(format!(".tmp-{name}-{}", std::process::id()));
    let written = (|| {
        let (file, unnamed) = match create_unnamed(directory) {
            Some(file) => (file, true),
            None => (std::fs::File::create(&temporary)?, false),
        };
        let mut out = BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()?;
        if unnamed {
            name_unnamed(&file, &temporary)?;
        }
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A new file in `directory` that has no name yet (Linux's `O_TMPFILE`): a writer killed while
/// writing it leaves nothing behind (the kernel frees an unnamed file with its last descriptor),
/// so only the instant between naming and renaming can leave a temporary file. `None` where the
/// platform or file system has none: the caller writes a named temporary file instead.
#[cfg(target_os = "linux")]
fn create_unnamed(directory: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().write(true).mode(0o644).custom_flags(libc::O_TMPFILE).open(directory).ok()
}

#[cfg(not(target_os = "linux"))]
fn create_unnamed(_directory: &Path) -> Option<std::fs::File> {
    None
}

/// Gives the unnamed `file` the name `temporary` (replacing a file a dead writer of the same
/// process number left there).
#[cfg(target_os = "linux")]
fn name_unnamed(file: &std::fs::File, temporary: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let source = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(io::Error::other)?;
    let target = std::ffi::CString::new(temporary.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let _ = std::fs::remove_file(temporary);
    // SAFETY: both arguments are NUL-terminated strings that live across the call; `linkat` reads
    // no other memory of ours.
    let linked = unsafe {
        libc::linkat(libc::AT_FDCWD, source.as_ptr(), libc::AT_FDCWD, target.as_ptr(), libc::AT_SYMLINK_FOLLOW)
    };
    if linked == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn name_unnamed(_file: &std::fs::File, _temporary: &Path) -> io::Result<()> {
    Ok(())
}

/// Writes a tenant's file to `out` and its record parts and scan matrices beside it; returns
/// the paths of those written beside it.
fn write_tenant<W: Write>(
    out: W,
    directory: &Path,
    source: &str,
    tenant: &str,
    dimension: usize,
    part: &TenantIndex,
) -> io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut out = Writer(out);
    out.0.write_all(MAGIC)?;
    out.str(tenant)?;
    out.len(dimension)?;
    // Records first (all levels, in parts of `PART_RECORDS` that a restart decodes side by
    // side), then the levels' indexes: a reader numbers the tenant's pages from the records of
    // all three levels before it builds any level.
    let sections = &part.levels[SECTIONS].store.records;
    for (slot, level) in part.levels.iter().enumerate() {
        let records = &level.store.records;
        // A chunk's text that is a share of its section's is written as where it is in it.
        let sections: &[Arc<Record>] = if slot == CHUNKS { sections } else { &[] };
        out.len(records.len())?;
        for (number, part) in records.chunks(PART_RECORDS).enumerate() {
            let path = records_file(directory, tenant, slot, number);
            write_atomically(&path, |file| {
                let mut file = Writer(file);
                file.0.write_all(&file_header(source, &path))?;
                part.iter().try_for_each(|record| write_record(&mut file, record, sections))
            })?;
            written.push(path);
        }
    }
    for (slot, level) in part.levels.iter().enumerate() {
        let path = vectors_file(directory, tenant, slot);
        write_atomically(&path, |vectors| {
            vectors.write_all(&file_header(source, &path))?;
            level.index.write_to(&mut out, vectors)
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Records per part file: a level's parts are decoded on all cores at once.
const PART_RECORDS: usize = 100_000;

fn records_file(directory: &Path, tenant: &str, slot: usize, part: usize) -> PathBuf {
    let mut name = tenant_file(directory, tenant).into_os_string();
    name.push(format!(".records{slot}-{part}"));
    PathBuf::from(name)
}

/// The records of every level of `tenant`, `counts[slot]` of them per level, decoded from their
/// part files on the machine's cores: the docs and sections first, then the chunks, whose texts
/// may be passages of their sections'.
fn read_records(directory: &Path, source: &str, tenant: &str, counts: &[usize]) -> io::Result<Vec<Vec<Arc<Record>>>> {
    let parts = |slots: std::ops::Range<usize>| -> Vec<(usize, usize, usize)> {
        slots
            .flat_map(|slot| {
                let count = counts.get(slot).copied().unwrap_or(0);
                (0..count.div_ceil(PART_RECORDS))
                    .map(move |part| (slot, part, PART_RECORDS.min(count - part * PART_RECORDS)))
            })
            .collect()
    };
    let mut levels: Vec<Vec<Arc<Record>>> = counts.iter().map(|&count| Vec::with_capacity(count)).collect();
    for (slot, records) in decode_parts(directory, source, tenant, &parts(0..CHUNKS), &[])? {
        levels[slot].extend(records);
    }
    let sections = std::mem::take(&mut levels[SECTIONS]);
    for (slot, records) in decode_parts(directory, source, tenant, &parts(CHUNKS..counts.len()), &sections)? {
        levels[slot].extend(records);
    }
    levels[SECTIONS] = sections;
    Ok(levels)
}

/// The record parts `jobs` names (slot, part, count), decoded side by side, in order, each with
/// its slot.
fn decode_parts(
    directory: &Path,
    source: &str,
    tenant: &str,
    jobs: &[(usize, usize, usize)],
    sections: &[Arc<Record>],
) -> io::Result<Vec<(usize, Vec<Arc<Record>>)>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    /// What a worker decoded for one part (`None` until it has).
    type Decoded = std::sync::Mutex<Option<io::Result<Vec<Arc<Record>>>>>;
    let results: Vec<Decoded> = jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8).min(jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let job = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&job_part) = jobs.get(job) else { break };
                let decoded = read_part(directory, source, tenant, job_part, sections);
                *results[job].lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(decoded);
            });
        }
    });
    jobs.iter()
        .zip(results)
        .map(|(&(slot, ..), result)| {
            let decoded = result.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
            Ok((slot, decoded.unwrap_or_else(|| Err(damaged("a part was not read")))?))
        })
        .collect()
}

fn read_part(
    directory: &Path,
    source: &str,
    tenant: &str,
    (slot, part, count): (usize, usize, usize),
    sections: &[Arc<Record>],
) -> io::Result<Vec<Arc<Record>>> {
    let path = records_file(directory, tenant, slot, part);
    let mut input = Reader(BufReader::with_capacity(1 << 20, std::fs::File::open(&path)?));
    let mut header = [0u8; FILE_HEADER];
    io::Read::read_exact(&mut input.0, &mut header)?;
    if header != file_header(source, &path) {
        return Err(damaged(format!("tenant {tenant}: a records part of another copy")));
    }
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        let record = read_record(&mut input, sections)?;
        if record.meta.tenant_id != tenant {
            return Err(damaged(format!("tenant {tenant}: a record of another tenant")));
        }
        records.push(Arc::new(record));
    }
    if input.u8().is_ok() {
        return Err(damaged(format!("tenant {tenant}: bytes after a records part")));
    }
    Ok(records)
}

fn read_tenant<R: io::Read>(
    input: &mut Reader<R>,
    directory: &Path,
    source: &str,
    tenant: &str,
    dimension: usize,
    topics: &TopicTable,
) -> io::Result<TenantIndex> {
    let mut magic = [0u8; 8];
    input.0.read_exact(&mut magic)?;
    if &magic != MAGIC || input.string()? != tenant || input.len()? != dimension {
        return Err(damaged(format!("tenant {tenant}: not a copy of this tenant in this format")));
    }
    let counts = [input.len()?, input.len()?, input.len()?];
    let levels = read_records(directory, source, tenant, &counts)?;
    if levels.iter().any(|records| records.windows(2).any(|pair| pair[0].id >= pair[1].id)) {
        return Err(damaged(format!("tenant {tenant}: records out of id order")));
    }
    let pages = PageNumbers::new(levels.iter().flatten().map(|record| record.meta.doc_id.as_str()));
    let mut built = Vec::with_capacity(3);
    for (slot, records) in levels.into_iter().enumerate() {
        let columns = read_vectors(
            directory,
            source,
            tenant,
            slot,
            (TenantLevel::column_count(records.len(), dimension), dimension),
        )?;
        let mut previous = None;
        let features: Vec<RecordFeatures> = records
            .iter()
            .map(|record| {
                let mut features = RecordFeatures::of_after(record, topics, &mut previous);
                features.page = pages.of(&record.meta.doc_id);
                features
            })
            .collect();
        let page_of = PageNumbers::numbers_of(&features);
        let index = TenantLevel::read_from(
            input,
            &records,
            dimension,
            page_of.as_deref().map(|of| (&pages.scope, of)),
            columns,
        )?;
        built.push(LevelData { store: Arc::new(LevelStore::new(records, features)), index, memo: Default::default() });
    }
    let levels = built.try_into().unwrap_or_else(|_| unreachable!("three levels read, three built"));
    Ok(TenantIndex { levels })
}

/// The slots of the levels whose texts a copy shares: a chunk's text may be a passage of its section's.
const SECTIONS: usize = level_slot(Level::Section);
const CHUNKS: usize = level_slot(Level::Chunk);

/// How a record's text is written: whole, or as where it is in its section's (`TEXT_IN_SECTION`,
/// then its start and end in bytes), which the section's record holds.
const TEXT_WHOLE: u8 = 0;
const TEXT_IN_SECTION: u8 = 1;

/// The section of `sections` (in id order) whose id is `id`, the section a record names.
fn section_of<'s>(id: Option<&str>, sections: &'s [Arc<Record>]) -> Option<&'s Arc<Record>> {
    crate::index::number_by_id(sections, id?).map(|number| &sections[number])
}

fn write_record<W: Write>(out: &mut Writer<W>, record: &Record, sections: &[Arc<Record>]) -> io::Result<()> {
    let meta = &record.meta;
    out.str(&record.id)?;
    let section = section_of(meta.section_id.as_deref(), sections);
    match section.and_then(|section| record.text.bounds_in(&section.text)) {
        Some((start, end)) => {
            out.u8(TEXT_IN_SECTION)?;
            out.u32(start)?;
            out.u32(end)?;
        }
        None => {
            out.u8(TEXT_WHOLE)?;
            out.str(&record.text)?;
        }
    }
    for value in [meta.tenant_id.as_str(), &meta.doc_id] {
        out.str(value)?;
    }
    out.option_str(meta.section_id.as_deref())?;
    out.option_str(meta.chunk_id.as_deref())?;
    for value in [
        meta.title.as_str(),
        &meta.summary,
        &meta.url,
        &meta.source,
        &meta.product,
        &meta.version,
        &meta.domain,
        &meta.section,
        &meta.platform,
        &meta.role,
        &meta.page_type,
        meta.heading.as_str(),
        &meta.indexed_at,
    ] {
        out.str(value)?;
    }
    out.strs(&meta.tags)?;
    out.strs(&meta.heading_path)?;
    out.strs(&meta.breadcrumbs)?;
    for value in [meta.page, meta.chunk_index, meta.content_length] {
        out.u32(value)?;
    }
    Ok(())
}

/// One record as `write_record` wrote it; `sections` are those a chunk's text may be in.
fn read_record<R: io::Read>(input: &mut Reader<R>, sections: &[Arc<Record>]) -> io::Result<Record> {
    let id = input.string()?;
    enum Text {
        Whole(String),
        InSection(u32, u32),
    }
    let text = match input.u8()? {
        TEXT_WHOLE => Text::Whole(input.string()?),
        TEXT_IN_SECTION => Text::InSection(input.u32()?, input.u32()?),
        _ => return Err(damaged("a record's text is neither whole nor in its section")),
    };
    let tenant_id = input.string()?;
    let doc_id = input.string()?;
    let section_id = input.option_string()?;
    let text = match text {
        Text::Whole(whole) => whole.into(),
        Text::InSection(start, end) => section_of(section_id.as_deref(), sections)
            .and_then(|section| crate::shared_str::SharedText::passage(&section.text, start as usize, end as usize))
            .ok_or_else(|| damaged(format!("record {id}: its text is not in its section")))?,
    };
    let chunk_id = input.option_string()?;
    let mut strings = [(); 13].map(|_| String::new());
    for value in &mut strings {
        *value = input.string()?;
    }
    let [title, summary, url, source, product, version, domain, section, platform, role, page_type, heading, indexed_at] =
        strings;
    let tags = input.strings()?;
    let heading_path = input.strings()?;
    let breadcrumbs = input.strings()?;
    let (page, chunk_index, content_length) = (input.u32()?, input.u32()?, input.u32()?);
    let meta = Metadata {
        tenant_id: tenant_id.into(),
        doc_id: doc_id.into(),
        section_id,
        chunk_id,
        title: title.into(),
        summary: summary.into(),
        url: url.into(),
        source: source.into(),
        product: product.into(),
        version: version.into(),
        tags,
        domain: domain.into(),
        section: section.into(),
        platform: platform.into(),
        role: role.into(),
        page_type: page_type.into(),
        heading,
        heading_path,
        breadcrumbs,
        page,
        chunk_index,
        content_length,
        indexed_at: indexed_at.into(),
    };
    Ok(Record { id, meta, text, embedding: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While a copy's file is being written, nothing of it has a name in the directory: a writer
    /// killed at that moment leaves nothing there.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_being_written_has_no_name_until_it_is_whole() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("tenant-74.bin");
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(directory.path())
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        write_atomically(&path, |out| {
            out.write_all(&[7u8; 3 << 20])?;
            out.flush()?;
            assert_eq!(listing(), Vec::<String>::new(), "a named part while writing");
            Ok(())
        })
        .unwrap();
        assert_eq!(listing(), vec!["tenant-74.bin".to_string()]);
        assert_eq!(std::fs::read(&path).unwrap().len(), 3 << 20);
        // Written again over it: the same, and still nothing else.
        write_atomically(&path, |out| out.write_all(b"again")).unwrap();
        assert_eq!((listing().len(), std::fs::read(&path).unwrap()), (1, b"again".to_vec()));
    }
}
