//! The local copy of a loaded index: each tenant's part written as one binary file (records in
//! number order, the scan matrix, norms and the BM25 index as built), so that a restart reads
//! them back instead of parsing a multi-gigabyte snapshot and tokenizing every text again.
//!
//! A copy is a cache, never a source of truth: it is stamped with the version of what it copies
//! (`source`: the snapshot file's size and modification time), every file is written to a
//! temporary name and renamed, the manifest naming the tenants last, and a copy that is missing,
//! stale, of another format or damaged is ignored (the snapshot is read instead and the copy
//! written again).
//!
//! Layout of a copy directory: `manifest.json` ({format, source, dimension, embedding_model,
//! indexed_at, tenants}), and per tenant `tenant-<hex of the tenant id>.bin` (records, norms,
//! BM25 indexes) and one `….bin.level<0|1|2>` per level: its scan matrix, raw, which a restart
//! maps instead of reading (no copy, no page zeroing; the kernel pages it in).

use super::build::PageNumbers;
use super::engine::{LevelData, LoadedIndex, TenantIndex};
use crate::index::codec::{damaged, Reader, Writer};
use crate::index::features::RecordFeatures;
use crate::index::tenant_level::TenantLevel;
use crate::index::LevelStore;
use crate::model::{Metadata, Record};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bumped whenever what a copy holds or how it is encoded changes: an older copy is then ignored.
const FORMAT: u32 = 2;
const MAGIC: &[u8; 8] = b"RSCOPY02";
const MANIFEST: &str = "manifest.json";

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Manifest {
    format: u32,
    source: String,
    dimension: usize,
    embedding_model: String,
    indexed_at: String,
    tenants: Vec<String>,
}

fn tenant_file(directory: &Path, tenant: &str) -> PathBuf {
    let hex: String = tenant.bytes().map(|byte| format!("{byte:02x}")).collect();
    directory.join(format!("tenant-{hex}.bin"))
}

/// Writes `index` as the copy of `source` into `directory` (created when missing), replacing the
/// copy there. A failure leaves either the old copy or none that matches `source`.
pub fn write(directory: &Path, source: &str, index: &LoadedIndex) -> io::Result<()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _writing = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    std::fs::create_dir_all(directory)?;
    // The old manifest goes first: from here on no reader takes the files for a whole copy.
    match std::fs::remove_file(directory.join(MANIFEST)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let mut tenants: Vec<&String> = index.tenants.keys().collect();
    tenants.sort();
    for tenant in &tenants {
        let part = &index.tenants[*tenant];
        write_atomically(&tenant_file(directory, tenant), |out| {
            write_tenant(out, directory, source, tenant, index.dimension, part)
        })?;
    }
    let manifest = Manifest {
        format: FORMAT,
        source: source.to_string(),
        dimension: index.dimension,
        embedding_model: index.embedding_model.clone(),
        indexed_at: index.indexed_at.clone(),
        tenants: tenants.iter().map(|tenant| tenant.to_string()).collect(),
    };
    write_atomically(&directory.join(MANIFEST), |out| {
        serde_json::to_writer(&mut *out, &manifest).map_err(io::Error::other)
    })?;
    // Files of tenants the index no longer has.
    let kept: Vec<PathBuf> = tenants
        .iter()
        .flat_map(|tenant| {
            std::iter::once(tenant_file(directory, tenant))
                .chain((0..3).map(|slot| vectors_file(directory, tenant, slot)))
        })
        .collect();
    for entry in std::fs::read_dir(directory)?.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if (name.starts_with("tenant-") || name.starts_with(".tmp-")) && !kept.contains(&path) {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// The copy in `directory` when it is a whole copy of `source` in this format; `Ok(None)` when
/// there is none (or it is of something else); an error when it is damaged.
pub fn read(directory: &Path, source: &str) -> io::Result<Option<LoadedIndex>> {
    let manifest = match std::fs::read(directory.join(MANIFEST)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let Ok(manifest) = serde_json::from_slice::<Manifest>(&manifest) else { return Ok(None) };
    if manifest.format != FORMAT || manifest.source != source {
        return Ok(None);
    }
    let mut tenants = HashMap::new();
    for tenant in &manifest.tenants {
        let file = std::fs::File::open(tenant_file(directory, tenant))?;
        let mut input = Reader(BufReader::with_capacity(1 << 20, file));
        let part = read_tenant(&mut input, directory, source, tenant, manifest.dimension)?;
        if input.u8().is_ok() {
            return Err(damaged(format!("tenant {tenant}: bytes after the end")));
        }
        tenants.insert(tenant.clone(), Arc::new(part));
    }
    Ok(Some(LoadedIndex {
        embedding_model: manifest.embedding_model,
        dimension: manifest.dimension,
        indexed_at: manifest.indexed_at,
        tenants,
    }))
}

/// The scan matrix of one level of a tenant: a header of `VECTORS_HEADER` bytes (so that the
/// columns start aligned for `Column`), then the raw columns.
fn vectors_file(directory: &Path, tenant: &str, slot: usize) -> PathBuf {
    let mut name = tenant_file(directory, tenant).into_os_string();
    name.push(format!(".level{slot}"));
    PathBuf::from(name)
}

const VECTORS_HEADER: usize = 64;

/// The magic, then a hash of what the file is a copy of (source, tenant, level), zero-padded.
fn vectors_header(source: &str, tenant: &str, slot: usize) -> [u8; VECTORS_HEADER] {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (source, tenant, slot, FORMAT).hash(&mut hasher);
    let mut header = [0u8; VECTORS_HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&hasher.finish().to_le_bytes());
    header
}

/// The `columns` columns of a level's scan matrix: mapped from its file when the platform allows,
/// else read.
fn read_vectors(
    directory: &Path,
    source: &str,
    tenant: &str,
    slot: usize,
    columns: usize,
) -> io::Result<crate::index::vectors::Columns> {
    use crate::index::vectors::Columns;
    let path = vectors_file(directory, tenant, slot);
    let mut file = std::fs::File::open(&path)?;
    let mut header = [0u8; VECTORS_HEADER];
    io::Read::read_exact(&mut file, &mut header)?;
    let size = file.metadata()?.len();
    let expected = (columns as u64) * 64 + VECTORS_HEADER as u64;
    if header != vectors_header(source, tenant, slot) || size != expected {
        return Err(damaged(format!("{}: not the scan matrix of this copy", path.display())));
    }
    // SAFETY: the local copy's files are replaced by renaming new ones over them, never written
    // in place, so the mapped bytes do not change while mapped.
    if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
        if let Some(mapped) = Columns::mapped(&Arc::new(map), VECTORS_HEADER, columns) {
            return Ok(mapped);
        }
    }
    Columns::read(&mut BufReader::with_capacity(1 << 20, file), columns)
}

fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<std::fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let directory = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = directory.join(format!(".tmp-{name}-{}", std::process::id()));
    let written = (|| {
        let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&temporary)?);
        write(&mut out)?;
        out.into_inner().map_err(|error| error.into_error())?.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

fn write_tenant<W: Write>(
    out: W,
    directory: &Path,
    source: &str,
    tenant: &str,
    dimension: usize,
    part: &TenantIndex,
) -> io::Result<()> {
    let mut out = Writer(out);
    out.0.write_all(MAGIC)?;
    out.str(tenant)?;
    out.len(dimension)?;
    // Records first (all levels), then the levels' indexes: a reader numbers the tenant's pages
    // from the records of all three levels before it builds any level.
    for level in &part.levels {
        out.len(level.store.records.len())?;
        for record in &level.store.records {
            write_record(&mut out, record)?;
        }
    }
    for (slot, level) in part.levels.iter().enumerate() {
        write_atomically(&vectors_file(directory, tenant, slot), |vectors| {
            vectors.write_all(&vectors_header(source, tenant, slot))?;
            level.index.write_to(&mut out, vectors)
        })?;
    }
    Ok(())
}

fn read_tenant<R: io::Read>(
    input: &mut Reader<R>,
    directory: &Path,
    source: &str,
    tenant: &str,
    dimension: usize,
) -> io::Result<TenantIndex> {
    let mut magic = [0u8; 8];
    input.0.read_exact(&mut magic)?;
    if &magic != MAGIC || input.string()? != tenant || input.len()? != dimension {
        return Err(damaged(format!("tenant {tenant}: not a copy of this tenant in this format")));
    }
    let mut levels = Vec::with_capacity(3);
    let mut doc_ids: Vec<String> = Vec::new();
    for _ in 0..3 {
        let count = input.len()?;
        let mut records = Vec::with_capacity(count.min(1 << 24));
        for _ in 0..count {
            let record = read_record(input)?;
            if record.meta.tenant_id != tenant {
                return Err(damaged(format!("tenant {tenant}: a record of another tenant")));
            }
            records.push(Arc::new(record));
        }
        if records.windows(2).any(|pair| pair[0].id >= pair[1].id) {
            return Err(damaged(format!("tenant {tenant}: records out of id order")));
        }
        doc_ids.extend(records.iter().map(|record| record.meta.doc_id.clone()));
        levels.push(records);
    }
    doc_ids.sort_unstable();
    doc_ids.dedup();
    let pages = PageNumbers { doc_ids, scope: Arc::new(()) };
    let mut built = Vec::with_capacity(3);
    for (slot, records) in levels.into_iter().enumerate() {
        let columns =
            read_vectors(directory, source, tenant, slot, TenantLevel::column_count(records.len(), dimension))?;
        let features: Vec<RecordFeatures> = records
            .iter()
            .map(|record| {
                let mut features = RecordFeatures::of(record);
                features.page = pages.of(&record.meta.doc_id);
                features
            })
            .collect();
        let page_of: Option<Vec<u32>> = features.iter().map(|f| f.page.as_ref().map(|page| page.number)).collect();
        let index = TenantLevel::read_from(
            input,
            &records,
            dimension,
            page_of.as_deref().map(|of| (&pages.scope, of)),
            columns,
        )?;
        built.push(LevelData { store: Arc::new(LevelStore::new(records, features)), index, scope: Arc::new(()) });
    }
    let mut built = built.into_iter();
    let mut next = || built.next().expect("three levels");
    Ok(TenantIndex { levels: [next(), next(), next()] })
}

fn write_record<W: Write>(out: &mut Writer<W>, record: &Record) -> io::Result<()> {
    let meta = &record.meta;
    out.str(&record.id)?;
    out.str(&record.text)?;
    for value in [&meta.tenant_id, &meta.doc_id] {
        out.str(value)?;
    }
    out.option_str(meta.section_id.as_deref())?;
    out.option_str(meta.chunk_id.as_deref())?;
    for value in [
        &meta.title,
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
        &meta.heading,
        &meta.indexed_at,
    ] {
        out.str(value)?;
    }
    out.strs(&meta.tags)?;
    out.strs(&meta.heading_path)?;
    for value in [meta.page, meta.chunk_index, meta.content_length] {
        out.u32(value)?;
    }
    Ok(())
}

fn read_record<R: io::Read>(input: &mut Reader<R>) -> io::Result<Record> {
    let id = input.string()?;
    let text = input.string()?;
    let tenant_id = input.string()?;
    let doc_id = input.string()?;
    let section_id = input.option_string()?;
    let chunk_id = input.option_string()?;
    let mut strings = [(); 13].map(|_| String::new());
    for value in &mut strings {
        *value = input.string()?;
    }
    let [title, summary, url, source, product, version, domain, section, platform, role, page_type, heading, indexed_at] =
        strings;
    let tags = input.strings()?;
    let heading_path = input.strings()?;
    let (page, chunk_index, content_length) = (input.u32()?, input.u32()?, input.u32()?);
    let meta = Metadata {
        tenant_id,
        doc_id,
        section_id,
        chunk_id,
        title,
        summary,
        url,
        source,
        product,
        version,
        tags,
        domain,
        section,
        platform,
        role,
        page_type,
        heading,
        heading_path,
        page,
        chunk_index,
        content_length,
        indexed_at,
    };
    Ok(Record { id, meta, text, embedding: Vec::new() })
}
