//! Reading a snapshot file straight into an index: its records are added to an `IndexBuilder` as
//! they are read, never gathered as a `Snapshot` first, and parsed on the machine's cores a batch
//! at a time (the embeddings' numbers by `parse_numbers`, the rest by serde_json). The result,
//! and every check, is that of `read_snapshot_file` then `LoadedIndex::build`.

use super::block_source::{string_end, value_end, Failure, Source, Step};
use super::build::IndexBuilder;
use super::engine::LoadedIndex;
use super::numbers::{parse_number, parse_numbers_with, skip_space};
use super::snapshot::{check_header, corrupt, open_snapshot_file};
use crate::index::Result;
use crate::model::{Level, Record};
use std::path::Path;
use std::sync::Arc;

/// What one read adds to the buffer; a record is parsed from the buffer itself.
const BLOCK: usize = 8 << 20;

/// Reads and indexes the snapshot at `path`, keeping the records `keep` accepts (the tenants an
/// instance serves). A reload passes the index it replaces as `base`: what the file leaves as it
/// was is taken from it (`IndexBuilder::for_snapshot`). Blocking: call it off the async threads.
pub(crate) fn load_snapshot_file(
    path: &Path,
    keep: &(dyn Fn(&Record) -> bool + Sync),
    base: Option<Arc<LoadedIndex>>,
) -> Result<LoadedIndex> {
    load_in_blocks(path, keep, base, BLOCK)
}

fn load_in_blocks(
    path: &Path,
    keep: &(dyn Fn(&Record) -> bool + Sync),
    base: Option<Arc<LoadedIndex>>,
    block: usize,
) -> Result<LoadedIndex> {
    let file = open_snapshot_file(path)?;
    let mut load = Load { builder: IndexBuilder::for_snapshot(base), keep, header: Header::default() };
    let mut source = Source::new(file, block);
    load.read(&mut source).map_err(|failure| match failure {
        Failure::Index(error) => error,
        Failure::Text(message) => corrupt(format!("{}: {message}", path.display())),
    })?;
    let Header { format_version, dimension, indexed_at, embedding_model } = load.header;
    let Some(format_version) = format_version else {
        return Err(corrupt(format!("{}: missing field `format_version`", path.display())));
    };
    check_header(format_version, dimension, load.builder.dimension())?;
    load.builder.finish(embedding_model, indexed_at)
}

/// The snapshot's fields besides its records.
#[derive(Default)]
struct Header {
    format_version: Option<u32>,
    dimension: usize,
    indexed_at: String,
    embedding_model: String,
}

struct Load<'k> {
    builder: IndexBuilder,
    keep: &'k (dyn Fn(&Record) -> bool + Sync),
    header: Header,
}

impl Load<'_> {
    /// The top-level object: its header fields parsed as they come, its three arrays of records
    /// added as they are read, any other field skipped.
    fn read(&mut self, source: &mut Source) -> Step<()> {
        source.expect(b'{')?;
        if source.peek()? == Some(b'}') {
            source.at += 1;
        } else {
            loop {
                let end = source.value()?;
                let key: String = serde_json::from_slice(&source.text()[source.at..end])
                    .map_err(|error| Failure::Text(format!("a field name: {error}")))?;
                source.at = end;
                source.expect(b':')?;
                let level = match key.as_str() {
                    "docs" => Some(Level::Doc),
                    "sections" => Some(Level::Section),
                    "chunks" => Some(Level::Chunk),
                    _ => None,
                };
                match level {
                    Some(level) => self.read_records(source, level)?,
                    None => {
                        let end = source.value()?;
                        let text = &source.text()[source.at..end];
                        self.header_field(&key, text).map_err(|error| Failure::Text(format!("{key}: {error}")))?;
                        source.at = end;
                    }
                }
                match source.peek()? {
                    Some(b',') => source.at += 1,
                    Some(b'}') => {
                        source.at += 1;
                        break;
                    }
                    _ => return Err(Failure::Text("expected `,` or `}` after a field".into())),
                }
            }
        }
        match source.peek()? {
            None => Ok(()),
            Some(_) => Err(Failure::Text("trailing characters after the snapshot".into())),
        }
    }

    fn header_field(&mut self, key: &str, text: &[u8]) -> serde_json::Result<()> {
        match key {
            "format_version" => self.header.format_version = Some(serde_json::from_slice(text)?),
            "indexed_at" => self.header.indexed_at = serde_json::from_slice(text)?,
            "embedding_model" => self.header.embedding_model = serde_json::from_slice(text)?,
            "dimension" => self.header.dimension = serde_json::from_slice(text)?,
            _ => serde_json::from_slice::<serde::de::IgnoredAny>(text).map(|_| ())?,
        }
        Ok(())
    }

    /// One level's array: the records the buffer holds whole are parsed together (on up to four
    /// threads) and added in order, then the buffer is refilled.
    fn read_records(&mut self, source: &mut Source, level: Level) -> Step<()> {
        if source.peek()? == Some(b'n') {
            // `null`, as serde reads an absent array.
            let end = source.value()?;
            if &source.text()[source.at..end] != b"null" {
                return Err(Failure::Text(format!("{}: expected an array", level_field(level))));
            }
            source.at = end;
            return Ok(());
        }
        source.expect(b'[')?;
        if source.peek()? == Some(b']') {
            source.at += 1;
            return Ok(());
        }
        // Parsed, not yet added.
        let mut pending: Option<Vec<serde_json::Result<Record>>> = None;
        // The whole records of the buffer, when found as it was read.
        let mut found: Option<Step<WholeRecords>> = None;
        loop {
            let WholeRecords { records, at, closed } = match found.take() {
                Some(found) => found?,
                None => whole_records(source.text(), source.at, level)?,
            };
            if records.is_empty() && !closed {
                if !source.more()? {
                    return Err(Failure::Text(format!("{}: the file ends inside the array", level_field(level))));
                }
                continue;
            }
            if closed {
                if let Some(parsed) = pending.take() {
                    self.add_parsed(level, parsed)?;
                }
                self.add_parsed(level, parse_batch(source.text(), &records))?;
                source.at = at;
                return Ok(());
            }
            // These records are parsed while the next block is read and the records parsed
            // before them are added (copying their vectors into the level's matrix); the reading
            // thread then finds the whole records of the next block.
            let earlier = pending.take();
            let ((added, parsed), next) = source.more_beside(
                at,
                |text| {
                    std::thread::scope(|scope| {
                        let adding = earlier.map(|parsed| scope.spawn(|| self.add_parsed(level, parsed)));
                        let parsed = parse_batch(text, &records);
                        let added = adding.map_or(Ok(()), |adding| {
                            adding.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                        });
                        (added, parsed)
                    })
                },
                |text, at| whole_records(text, at, level),
            )?;
            added?;
            pending = Some(parsed);
            found = next;
        }
    }

    fn add_parsed(&mut self, level: Level, parsed: Vec<serde_json::Result<Record>>) -> Step<()> {
        for record in parsed {
            let record =
                record.map_err(|error| Failure::Text(format!("a record of {}: {error}", level_field(level))))?;
            if (self.keep)(&record) {
                self.builder.add(level, record).map_err(Failure::Index)?;
            }
        }
        Ok(())
    }
}

/// The records of a level's array that a buffer holds whole (`whole_records`).
struct WholeRecords {
    /// Where each is in the buffer.
    records: Vec<std::ops::Range<usize>>,
    /// Where the text after the last one and the comma or bracket after it starts.
    at: usize,
    /// Whether the array ended after the last one.
    closed: bool,
}

/// Every record of `level`'s array that `text` holds whole from `at` on, with what follows each.
fn whole_records(text: &[u8], mut at: usize, level: Level) -> Step<WholeRecords> {
    let mut records = Vec::new();
    loop {
        let start = skip_space(text, at);
        let Some(length) = text.get(start..).and_then(value_end) else { break };
        let after = skip_space(text, start + length);
        match text.get(after) {
            Some(b',') => {
                records.push(start..start + length);
                at = after + 1;
            }
            Some(b']') => {
                records.push(start..start + length);
                return Ok(WholeRecords { records, at: after + 1, closed: true });
            }
            Some(&byte) => {
                return Err(Failure::Text(format!(
                    "{}: expected `,` or `]` after a record, found `{}`",
                    level_field(level),
                    byte as char
                )))
            }
            None => break,
        }
    }
    Ok(WholeRecords { records, at, closed: false })
}

fn level_field(level: Level) -> &'static str {
    match level {
        Level::Doc => "docs",
        Level::Section => "sections",
        Level::Chunk => "chunks",
    }
}

/// What one parsing thread reuses from record to record.
#[derive(Clone, Default)]
struct Scratch {
    /// The record's text with `[]` for its embedding.
    text: Vec<u8>,
    /// How many numbers the last embedding had.
    numbers: usize,
}

/// Parses the records at `ranges` of `buffer`, in order, on up to four threads.
fn parse_batch(buffer: &[u8], ranges: &[std::ops::Range<usize>]) -> Vec<serde_json::Result<Record>> {
    let workers = if ranges.len() < 64 { 1 } else { crate::index::in_parts::build_workers() };
    crate::index::in_parts::map_in_parts(ranges, &mut vec![Scratch::default(); workers], |scratch, range| {
        parse_record(&buffer[range.clone()], scratch)
    })
}

/// One record: its embedding's numbers (most of a file) read here, in one pass, and the rest by
/// serde_json from a copy of the record with `[]` for them (serde_json reads a number as an
/// `f64` first, its own way, ~3x slower). Anything this fast path does not expect is read by
/// serde_json whole, so errors are serde_json's.
fn parse_record(text: &[u8], scratch: &mut Scratch) -> serde_json::Result<Record> {
    // The records of a snapshot have one dimension: the previous record's is the capacity.
    let mut embedding = Vec::with_capacity(scratch.numbers);
    let Some((start, end)) = embedding_at(text).and_then(|start| {
        let length = parse_numbers(&text[start..], &mut embedding)?;
        Some((start, start + length))
    }) else {
        return serde_json::from_slice(text);
    };
    scratch.numbers = embedding.len();
    // A record shorter than the one before (only in a file of mixed dimensions, which the
    // index refuses) keeps no more than it holds while its batch waits.
    if embedding.capacity() > 2 * embedding.len() {
        embedding.shrink_to_fit();
    }
    let copy = &mut scratch.text;
    copy.clear();
    copy.extend_from_slice(&text[..start]);
    copy.extend_from_slice(b"[]");
    copy.extend_from_slice(&text[end..]);
    // Checked once here (several times faster than the standard check on Cyrillic text), serde_json
    // then reads the record without checking each string; text that is not UTF-8 gets its error.
    let mut record: Record = match simdutf8::basic::from_utf8(copy) {
        Ok(copy) => serde_json::from_str(copy)?,
        Err(_) => serde_json::from_slice(copy)?,
    };
    record.embedding = embedding;
    Ok(record)
}

/// Where the value of the record object's `"embedding"` key starts, found by walking its keys;
/// `None` when there is none or the text is not as expected.
fn embedding_at(text: &[u8]) -> Option<usize> {
    let mut at = skip_space(text, 0);
    if text.get(at) != Some(&b'{') {
        return None;
    }
    loop {
        at = skip_space(text, at + 1);
        if text.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(text, at + 1)?;
        let key = &text[at + 1..key_end - 1];
        at = skip_space(text, key_end);
        if text.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(text, at + 1);
        if key == b"embedding" {
            return Some(at);
        }
        at = skip_space(text, at + value_end(text.get(at..)?)?);
        if text.get(at) != Some(&b',') {
            return None;
        }
    }
}

/// Reads the JSON array of numbers `text` starts with into `numbers`, each the `f32` nearest to
/// its decimal text; its length in `text`, or `None` for anything but an array of numbers.
fn parse_numbers(text: &[u8], numbers: &mut Vec<f32>) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if super::numbers_x86::available() {
        // SAFETY: the CPU has the instructions it needs (just checked).
        return unsafe { super::numbers_x86::parse_numbers(text, numbers) };
    }
    parse_numbers_with(text, numbers, parse_number)
}

#[cfg(test)]
mod tests {
    use super::super::block_source::{DIRECT_ALIGN, SLOW_DIRECT_READS};
    use super::super::numbers::xorshift;
    use super::super::tests::assert_serves_alike;
    use super::super::write_snapshot_file;
    use super::*;
    use crate::fixtures;
    use crate::index::IndexErrorKind;
    use crate::model::Snapshot;

    /// The fixture snapshot with texts that hold what the record scanner must see through: braces,
    /// brackets, quotes and backslashes inside strings.
    fn snapshot() -> Snapshot {
        let mut snapshot = fixtures::snapshot();
        snapshot.chunks[0].text = format!("{}{}", snapshot.chunks[0].text, r#" {"a": [1, "}"]} \" \\ ]]"#).into();
        snapshot.docs[0].meta.title = format!("{} {{скобки}}", snapshot.docs[0].meta.title).into();
        snapshot
    }

    /// `snapshot` as `write_snapshot_file` writes it, loaded.
    fn written_and_loaded(snapshot: &Snapshot) -> LoadedIndex {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("index.json");
        write_snapshot_file(&path, snapshot).unwrap();
        load_snapshot_file(&path, &|_| true, None).unwrap()
    }

    fn load(text: impl AsRef<[u8]>, block: usize) -> Result<LoadedIndex> {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("index.json");
        std::fs::write(&path, text).unwrap();
        load_in_blocks(&path, &|_| true, None, block)
    }

    #[test]
    fn a_snapshot_read_straight_into_an_index_serves_as_one_built_from_it() {
        let snapshot = snapshot();
        let whole = LoadedIndex::build(snapshot.clone()).unwrap();
        let compact = serde_json::to_string(&snapshot).unwrap();
        // Another writer's layout: white space everywhere, other fields, another field order.
        let mut value = serde_json::to_value(&snapshot).unwrap();
        value["comment"] = serde_json::json!({"nested": [1, {"x": "]"}], "s": "}"});
        let chunks = value.as_object_mut().unwrap().remove("chunks").unwrap();
        let mut reordered = serde_json::Map::new();
        reordered.insert("chunks".into(), chunks);
        reordered.extend(value.as_object().unwrap().clone());
        let pretty = serde_json::to_string_pretty(&reordered).unwrap();
        // Blocks of 3 and 7 bytes: every record and field straddles a read.
        for (text, block) in [(&compact, BLOCK), (&compact, 7), (&pretty, 3), (&pretty, 4096)] {
            let loaded = load(text, block).unwrap();
            assert_serves_alike(&loaded, &whole);
        }
        // A written snapshot, and the records of the tenants an instance serves.
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("index.json");
        write_snapshot_file(&path, &snapshot).unwrap();
        assert_serves_alike(&load_snapshot_file(&path, &|_| true, None).unwrap(), &whole);
        let t1 = load_snapshot_file(&path, &|record| record.meta.tenant_id == "t1", None).unwrap();
        assert!(t1.tenant("t1").is_some() && t1.tenant("t2").is_none());
        assert_eq!(t1.tenant("t1").unwrap().records(Level::Chunk), whole.tenant("t1").unwrap().records(Level::Chunk));
    }

    /// Every byte of the file, in order, once: read by blocks whose kept tails move to aligned
    /// places, past the page cache and then (after a switch half-way) through it, beside work.
    #[test]
    fn blocks_read_past_the_page_cache_and_through_it_give_the_file_exactly() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bytes");
        // Not a whole number of blocks; no byte repeats within 251.
        let bytes: Vec<u8> = (0..5 * DIRECT_ALIGN + 1234).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        for switch_after in [1, 3, usize::MAX] {
            let mut source = Source::new(std::fs::File::open(&path).unwrap(), DIRECT_ALIGN);
            let mut seen = Vec::new();
            let mut reads = 0;
            while source.more().unwrap() {
                reads += 1;
                // Consume all but an odd tail, so the next read keeps bytes in front of it.
                let keep = (source.filled - source.at).min(7 + reads);
                seen.extend_from_slice(&source.text()[source.at..source.filled - keep]);
                source.at = source.filled - keep;
                if reads == switch_after {
                    source.read_cached();
                }
                if reads % 2 == 0 {
                    let at = source.at;
                    let (length, after) =
                        source.more_beside(at, |text| text.len(), |text, start| text[start..].to_vec()).unwrap();
                    assert!(length >= at);
                    // What the reading thread saw after its read is the text from where reading resumes.
                    if let Some(after) = after {
                        assert_eq!(after, &source.text()[source.at..], "switch after {switch_after}");
                    }
                    seen.extend_from_slice(
                        &source.text()[source.at..source.filled - keep.min(source.filled - source.at)],
                    );
                    source.at = source.filled - keep.min(source.filled - source.at);
                }
            }
            seen.extend_from_slice(&source.text()[source.at..source.filled]);
            assert_eq!(seen.len(), bytes.len(), "switch after {switch_after}");
            assert!(seen == bytes, "switch after {switch_after}");
        }
    }

    #[test]
    fn direct_reads_go_on_when_the_reading_thread_is_slow_after_its_read_not_the_disk() {
        // Each block's work takes 40 ms and the reading thread's work after its read 150 ms: the
        // reads themselves end long before the work, so the disk kept up and the file is still
        // read past the page cache.
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("bytes");
        std::fs::write(&path, vec![b'x'; 12 * DIRECT_ALIGN]).unwrap();
        let mut source = Source::new(std::fs::File::open(&path).unwrap(), DIRECT_ALIGN);
        if !source.direct {
            return; // This file system refuses direct reads: nothing to judge.
        }
        let pause = |millis| std::thread::sleep(std::time::Duration::from_millis(millis));
        for _ in 0..SLOW_DIRECT_READS + 1 {
            let at = source.filled;
            source.more_beside(at, |_| pause(40), |_, _| pause(150)).unwrap();
        }
        assert!(source.direct, "a slow step after the read is not a slow disk");
    }

    #[test]
    fn a_reload_shares_the_tenants_the_file_left_as_they_were() {
        let before = snapshot();
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("index.json");
        write_snapshot_file(&path, &before).unwrap();
        let base = Arc::new(load_snapshot_file(&path, &|_| true, None).unwrap());
        // t2 unchanged; in t1 one chunk's text, one section's embedding and one doc's title change
        // and a chunk goes.
        let mut after = before.clone();
        let t1 = |records: &mut Vec<Record>| records.iter().position(|record| record.meta.tenant_id == "t1").unwrap();
        let chunk = t1(&mut after.chunks);
        after.chunks[chunk].text = format!("{} и ещё одна фраза про webhook", after.chunks[chunk].text).into();
        let gone = after.chunks.iter().rposition(|record| record.meta.tenant_id == "t1").unwrap();
        after.chunks.remove(gone);
        let section = t1(&mut after.sections);
        after.sections[section].embedding.reverse();
        let doc = t1(&mut after.docs);
        after.docs[doc].meta.title = format!("{} (новое)", after.docs[doc].meta.title).into();
        write_snapshot_file(&path, &after).unwrap();
        let reloaded = load_snapshot_file(&path, &|_| true, Some(Arc::clone(&base))).unwrap();
        assert!(Arc::ptr_eq(reloaded.tenant("t2").unwrap(), base.tenant("t2").unwrap()), "t2 is shared");
        assert!(!Arc::ptr_eq(reloaded.tenant("t1").unwrap(), base.tenant("t1").unwrap()), "t1 is rebuilt");
        assert_serves_alike(&reloaded, &LoadedIndex::build(after.clone()).unwrap());
        // The same file again: every tenant shared.
        let reloaded = Arc::new(reloaded);
        let again = load_snapshot_file(&path, &|_| true, Some(Arc::clone(&reloaded))).unwrap();
        for tenant in ["t1", "t2"] {
            assert!(Arc::ptr_eq(again.tenant(tenant).unwrap(), reloaded.tenant(tenant).unwrap()), "{tenant}");
        }
        assert_serves_alike(&again, &LoadedIndex::build(after).unwrap());
    }

    #[test]
    fn the_records_of_a_page_hold_one_copy_of_its_strings() {
        let loaded = written_and_loaded(&snapshot());
        let chunks = loaded.tenant("t1").unwrap().records(Level::Chunk);
        let mut pages_with_several = 0;
        for pair in chunks.windows(2).filter(|pair| pair[0].meta.doc_id == pair[1].meta.doc_id) {
            let (a, b) = (&pair[0].meta, &pair[1].meta);
            for (x, y) in [(&a.doc_id, &b.doc_id), (&a.title, &b.title), (&a.url, &b.url), (&a.tenant_id, &b.tenant_id)]
            {
                assert!(x.shares_with(y), "{x} read twice for {} and {}", pair[0].id, pair[1].id);
            }
            pages_with_several += 1;
        }
        assert!(pages_with_several > 0, "the fixture has pages of several chunks");
    }

    #[test]
    fn a_chunk_holds_a_share_of_its_sections_text_not_a_copy() {
        let snapshot = snapshot();
        let loaded = written_and_loaded(&snapshot);
        // And as a restart reads it back from the local copy (which writes where such a chunk's
        // text is in its section's, not the text again).
        let directory = tempfile::tempdir().unwrap();
        super::super::local_copy::write(directory.path(), "v1", &loaded).unwrap();
        let copy = super::super::local_copy::read(directory.path(), "v1").unwrap().expect("a whole copy");
        for loaded in [&loaded, &copy] {
            let tenant = loaded.tenant("t1").unwrap();
            chunks_share_their_sections_text(&snapshot, tenant.records(Level::Section), tenant.records(Level::Chunk));
        }
    }

    fn chunks_share_their_sections_text(snapshot: &Snapshot, sections: &[Arc<Record>], chunks: &[Arc<Record>]) {
        let mut shared = 0;
        for chunk in chunks {
            let written = snapshot.chunks.iter().find(|written| written.id == chunk.id).unwrap();
            assert_eq!(chunk.text.as_str(), written.text.as_str(), "{}", chunk.id);
            let Some(section) = sections.iter().find(|section| Some(&section.id) == chunk.meta.section_id.as_ref())
            else {
                continue;
            };
            if section.text.contains(chunk.text.as_str()) {
                assert!(chunk.text.shares_with(&section.text), "{} holds a copy", chunk.id);
                shared += 1;
            } else {
                assert!(!chunk.text.shares_with(&section.text), "{}", chunk.id);
            }
        }
        assert!(shared > 0, "the fixture's chunks are passages of their sections");
    }

    #[test]
    fn a_broken_snapshot_is_corrupt_and_a_missing_one_not_found() {
        let text = serde_json::to_string(&snapshot()).unwrap();
        let corrupt = |text: &str, wanted: &str| {
            for block in [BLOCK, 64] {
                let error = load(text, block).err().unwrap_or_else(|| panic!("{wanted}: loaded"));
                assert_eq!(error.kind, IndexErrorKind::Corrupt, "{wanted}: {error}");
                assert!(error.message.contains(wanted), "{wanted}: {error}");
            }
        };
        // Cut anywhere: never a panic or a partial index.
        for cut in (0..text.len()).step_by(text.len() / 60).chain([text.len() - 1]) {
            let error = load(&text.as_bytes()[..cut], BLOCK).err().unwrap_or_else(|| panic!("cut at {cut}: loaded"));
            assert_eq!(error.kind, IndexErrorKind::Corrupt, "cut at {cut}: {error}");
        }
        corrupt(&format!("{text} {{}}"), "trailing");
        corrupt(&text.replacen(r#""format_version":1"#, r#""format_version":7"#, 1), "unsupported format_version 7");
        corrupt(&text.replacen(r#""format_version":1,"#, "", 1), "format_version");
        corrupt(&text.replacen(r#""dimension":"#, r#""dimension":3,"x":"#, 1), "dimension is 3");
        let mut repeated = snapshot();
        repeated.sections.push(repeated.sections[0].clone());
        corrupt(&serde_json::to_string(&repeated).unwrap(), "duplicate section id");
        let mut short = snapshot();
        short.chunks[1].embedding.pop();
        corrupt(&serde_json::to_string(&short).unwrap(), "bad embedding");
        corrupt(&text.replacen(r#""text":"#, r#""text":5,"t":"#, 1), "a record of");
        // A record's text that is not UTF-8 (a byte 0xff in it) is refused with serde_json's error.
        let mut bytes = text.clone().into_bytes();
        bytes.insert(text.find(r#""text":""#).unwrap() + 8, 0xff);
        let error = load(&bytes, BLOCK).expect_err("not UTF-8: loaded");
        assert_eq!(error.kind, IndexErrorKind::Corrupt, "{error}");
        assert!(error.message.contains("invalid unicode code point"), "{error}");
        corrupt(r#"{"format_version": 1, "docs": [], "chunks": []}"#, "no docs or no chunks");
        corrupt(r#"{"format_version": 1, "docs": {}}"#, "expected `[`");
        corrupt("[]", "expected `{`");
        let missing = load_snapshot_file(Path::new("/nonexistent/index.json"), &|_| true, None).err().unwrap();
        assert_eq!(missing.kind, IndexErrorKind::NotFound);
    }

    /// The next number of a xorshift sequence (`state` is its last).
    #[test]
    fn embeddings_and_records_read_as_serde_json_reads_them_and_errors_are_its_own() {
        // Shortest round-trip texts (what `ingest` writes), fixed 8 digits (Python's generator),
        // exponents, integers and zeros, with spaces and new lines between them.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut values = vec![0.0f32, -0.0, 1.0, -1.0, 1e-5, 3.4e38, -1.17e-38, 1e-45];
        for _ in 0..20_000 {
            values.push(f32::from_bits(xorshift(&mut state) as u32 & 0xbfff_ffff) % 1.0);
        }
        let texts = [
            serde_json::to_string(&values).unwrap(),
            format!("[{}]", values.iter().map(|v| format!("{v:.8}")).collect::<Vec<_>>().join(",")),
            format!("[ {} ]", values.iter().map(|v| format!("{v:e}")).collect::<Vec<_>>().join(" ,\n ")),
            "[1, -0, 0, 25, 1E+2, 5e-0]".to_string(),
            // More digits than the fast path takes (24 bits, powers of ten up to 10) or than a u64
            // holds: the standard parser's reading.
            "[0.000000000000000000001234,12345678901234567890,1.00000000000000000000001,0.12345678,\
             -98765432.1,0.0000000001,0.00000000001,16777217,0.16777217,123456789012345678.9]"
                .to_string(),
            "[]".to_string(),
            "[ \n ]".to_string(),
        ];
        for text in texts {
            let mut ours = Vec::new();
            let length = parse_numbers(text.as_bytes(), &mut ours)
                .unwrap_or_else(|| panic!("refused {}", &text[..40.min(text.len())]));
            assert_eq!(length, text.len());
            let theirs: Vec<f32> = serde_json::from_str(&text).unwrap();
            assert_eq!(ours.len(), theirs.len());
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a.to_bits(), b.to_bits(), "{a} vs {b}");
            }
        }
        for bad in [
            "[1,]", "[,1]", "[01]", "[1.]", "[.5]", "[+1]", "[-]", "[1e]", "[1e+]", "[NaN]", "[inf]", "[\"1\"]",
            "[null]", "[[1]]", "[1 2]", "[1,,2]", "{}", "null", "1", "[0x10]", "[1_000]",
        ] {
            assert_eq!(parse_numbers(bad.as_bytes(), &mut Vec::new()), None, "{bad}");
        }
        // A record: the fast path reads what serde_json reads, and leaves anything else, with
        // serde_json's errors, to serde_json.
        let mut scratch = Scratch::default();
        for text in [
            r#"{"id":"c","tenant_id":"t","doc_id":"d","embedding":[0.5, 2],"text":"x [1] {}"}"#,
            r#" { "embedding" : [ -1e-3 ] , "id" : "c", "tenant_id":"t","doc_id":"d"} "#,
            r#"{"id":"c","tenant_id":"t","doc_id":"d"}"#,
            r#"{"id":"c","tenant_id":"t","doc_id":"d","embedd\u0069ng":[3]}"#,
        ] {
            let ours = parse_record(text.as_bytes(), &mut scratch).unwrap();
            assert_eq!(ours, serde_json::from_str::<Record>(text).unwrap(), "{text}");
        }
        for text in [
            r#"{"id":"c","tenant_id":"t","doc_id":"d","embedding":[1,"x"]}"#,
            r#"{"id":"c","tenant_id":"t","doc_id":"d","embedding":null}"#,
            r#"{"id":"c","tenant_id":"t","doc_id":"d","embedding":[1],"embedding":[2]}"#,
            r#"{"id":"c","tenant_id":"t","doc_id":"d","embedding":[1],"text":5}"#,
            r#"{"id":"c","embedding":[1]"#,
        ] {
            let ours = parse_record(text.as_bytes(), &mut scratch).err().unwrap_or_else(|| panic!("{text}"));
            let theirs = serde_json::from_str::<Record>(text).err().unwrap();
            assert_eq!(ours.to_string().split(" at line").next(), theirs.to_string().split(" at line").next());
        }
    }
}
