//! A snapshot file read a block at a time (past the page cache where it can be), and where a
//! JSON value in the text ends: what `load` parses records from.

use crate::index::IndexError;

pub(super) type Step<T> = std::result::Result<T, Failure>;

/// Why a read stopped: the index refused a record, or the text is not a snapshot.
pub(super) enum Failure {
    Index(IndexError),
    Text(String),
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::Text(format!("unreadable: {error}"))
    }
}

/// The file, read a block at a time into `buffer`: `text()` is what was read and not dropped,
/// of which `at` is the first byte not consumed.
///
/// Blocks are read past the page cache (`O_DIRECT`, where the file system allows it and the
/// block is a whole number of `DIRECT_ALIGN`s): the disk writes them into the buffer and no core
/// copies them, which on a multi-gigabyte snapshot is seconds of CPU the parsing threads get
/// instead. When the parsing waits for the disk (`SLOW_DIRECT_READS` blocks in a row), the rest
/// is read through the page cache, which is faster when the file is cached and the disk slow.
pub(super) struct Source {
    pub(super) file: std::fs::File,
    /// Allocated (and zeroed) once, grown only for a value longer than a block.
    pub(super) buffer: Vec<u8>,
    /// Where the next block is read while the records of `buffer` are parsed (`more_beside`);
    /// then the two change places.
    pub(super) spare: Vec<u8>,
    /// How much of `buffer` holds text.
    pub(super) filled: usize,
    /// Bytes read at a time.
    pub(super) block: usize,
    pub(super) at: usize,
    pub(super) ended: bool,
    /// Whether reads bypass the page cache: each then lands on an aligned address of the buffer.
    pub(super) direct: bool,
    /// Direct reads in a row that the parsing waited for.
    pub(super) slow_reads: u32,
}

/// The alignment of a direct read's address, length and file offset (the largest logical block
/// size of common disks).
pub(super) const DIRECT_ALIGN: usize = 4096;

/// Direct reads in a row that finish after the parsing of the block before them: then the file
/// is read through the page cache.
pub(super) const SLOW_DIRECT_READS: u32 = 3;

impl Source {
    pub(super) fn new(file: std::fs::File, block: usize) -> Self {
        let mut source = Source {
            file,
            buffer: Vec::new(),
            spare: Vec::new(),
            filled: 0,
            block,
            at: 0,
            ended: false,
            direct: false,
            slow_reads: 0,
        };
        source.direct = block.is_multiple_of(DIRECT_ALIGN) && set_direct(&source.file, true);
        source
    }

    /// Stops bypassing the page cache (after slow or refused direct reads).
    pub(super) fn read_cached(&mut self) {
        stop_direct(&self.file, &mut self.direct);
    }

    /// Where in `buffer` a kept tail of `tail` bytes goes so that the read after it starts on an
    /// aligned address (0 for cached reads); `buffer` has room for it and a block.
    pub(super) fn tail_start(direct: bool, block: usize, buffer: &mut Vec<u8>, tail: usize) -> usize {
        let room = tail + block + if direct { DIRECT_ALIGN } else { 0 };
        if buffer.len() < room {
            buffer.resize(room, 0);
        }
        if !direct {
            return 0;
        }
        let end = buffer.as_ptr() as usize + tail;
        (DIRECT_ALIGN - end % DIRECT_ALIGN) % DIRECT_ALIGN
    }

    /// One block read into `into`, through the page cache when a direct read is refused.
    pub(super) fn read_into(file: &mut std::fs::File, direct: &mut bool, into: &mut [u8]) -> std::io::Result<usize> {
        match read_block(file, into) {
            Err(error) if *direct && error.raw_os_error() == Some(libc::EINVAL) => {
                stop_direct(file, direct);
                read_block(file, into)
            }
            read => read,
        }
    }

    /// Drops what was consumed and reads another block; false at the end of the file.
    pub(super) fn more(&mut self) -> std::io::Result<bool> {
        if self.ended {
            return Ok(false);
        }
        let tail = self.filled - self.at;
        let start = Self::tail_start(self.direct, self.block, &mut self.buffer, tail);
        self.buffer.copy_within(self.at..self.filled, start);
        self.at = start;
        self.filled = start + tail;
        let into = &mut self.buffer[self.filled..self.filled + self.block];
        let read = Self::read_into(&mut self.file, &mut self.direct, into)?;
        self.filled += read;
        self.ended = read == 0;
        Ok(read > 0)
    }

    /// `more` done beside `work` on the text (on another thread: reading a block is a copy the
    /// parsing threads would otherwise wait for), keeping the text from `keep` on; returns what
    /// `work` returned, and what `then` returned for the text as it is after the read (run on the
    /// reading thread, after the read: none when the file had ended).
    pub(super) fn more_beside<R, T: Send>(
        &mut self,
        keep: usize,
        work: impl FnOnce(&[u8]) -> R,
        then: impl FnOnce(&[u8], usize) -> T + Send,
    ) -> std::io::Result<(R, Option<T>)> {
        if self.ended {
            let done = work(self.text());
            self.at = keep;
            return Ok((done, None));
        }
        let tail = self.filled - keep;
        let start = Self::tail_start(self.direct, self.block, &mut self.spare, tail);
        self.spare[start..start + tail].copy_from_slice(&self.buffer[keep..self.filled]);
        let mut direct = self.direct;
        let (file, text, spare, block) = (&mut self.file, &self.buffer[..self.filled], &mut self.spare, self.block);
        let (done, read, worked) = std::thread::scope(|scope| {
            let reading = scope.spawn(|| {
                let into = &mut spare[start + tail..start + tail + block];
                let read = Self::read_into(file, &mut direct, into)?;
                let read_at = std::time::Instant::now();
                Ok::<_, std::io::Error>((read, read_at, then(&spare[..start + tail + read], start)))
            });
            let done = work(text);
            let worked = std::time::Instant::now();
            (done, reading.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), worked)
        });
        self.direct = direct;
        let (read, read_at, then) = read?;
        // The disk was slower than the parsing when the read itself ended after the work (not
        // what the reading thread did with the block after it).
        let waited = read_at > worked;
        std::mem::swap(&mut self.buffer, &mut self.spare);
        self.filled = start + tail + read;
        self.at = start;
        self.ended = read == 0;
        self.slow_reads = if self.direct && waited { self.slow_reads + 1 } else { 0 };
        if self.slow_reads >= SLOW_DIRECT_READS {
            self.read_cached();
            tracing::info!("snapshot read through the page cache: the disk was slower than the parsing");
        }
        Ok((done, Some(then)))
    }

    pub(super) fn text(&self) -> &[u8] {
        &self.buffer[..self.filled]
    }

    /// The next byte that is not white space, read as needed; `None` at the end of the file.
    pub(super) fn peek(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            while let Some(&byte) = self.text().get(self.at) {
                if !byte.is_ascii_whitespace() {
                    return Ok(Some(byte));
                }
                self.at += 1;
            }
            if !self.more()? {
                return Ok(None);
            }
        }
    }

    pub(super) fn expect(&mut self, wanted: u8) -> Step<()> {
        match self.peek()? {
            Some(byte) if byte == wanted => {
                self.at += 1;
                Ok(())
            }
            Some(byte) => Err(Failure::Text(format!("expected `{}`, found `{}`", wanted as char, byte as char))),
            None => Err(Failure::Text(format!("expected `{}`, found the end of the file", wanted as char))),
        }
    }

    /// The extent of the JSON value starting at `at` (after white space), read as needed; it is
    /// `buffer[at..end]`. Only its bounds are found here: whoever parses it checks the rest.
    pub(super) fn value(&mut self) -> Step<usize> {
        if self.peek()?.is_none() {
            return Err(Failure::Text("expected a value, found the end of the file".into()));
        }
        loop {
            if let Some(end) = value_end(&self.text()[self.at..]) {
                return Ok(self.at + end);
            }
            if !self.more()? {
                return Err(Failure::Text("the file ends inside a value".into()));
            }
        }
    }
}

/// One read of `file` into `into`, retried when interrupted; 0 at the end of the file.
fn read_block(file: &mut std::fs::File, into: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    loop {
        match file.read(into) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            read => return read,
        }
    }
}

/// Turns reading past the page cache on or off for `file`; whether that was done.
#[cfg(target_os = "linux")]
fn set_direct(file: &std::fs::File, on: bool) -> bool {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL and F_SETFL on a descriptor this file owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return false;
        }
        let flags = if on { flags | libc::O_DIRECT } else { flags & !libc::O_DIRECT };
        libc::fcntl(fd, libc::F_SETFL, flags) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn set_direct(_file: &std::fs::File, _on: bool) -> bool {
    false
}

/// Reads of `file` go through the page cache from now on; `direct` says so.
fn stop_direct(file: &std::fs::File, direct: &mut bool) {
    if *direct {
        set_direct(file, false);
        *direct = false;
    }
}

/// The length of the JSON value `text` starts with, if `text` holds all of it (a number or
/// literal ends at the first byte that cannot continue it, which must be in `text`).
pub(super) fn value_end(text: &[u8]) -> Option<usize> {
    match text.first()? {
        b'{' => object_end(text),
        b'"' => string_end(text, 1),
        b'[' => nested_end(text),
        _ => text.iter().position(|byte| matches!(byte, b',' | b'}' | b']') || byte.is_ascii_whitespace()),
    }
}

/// A record's object: only braces and strings count (in valid JSON, brackets nest inside the
/// braces; in anything else the parser of the cut-out text finds the fault), so the bytes between
/// them — the embedding's numbers, most of a record — are skipped by `memchr3`.
pub(super) fn object_end(text: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = 0;
    loop {
        at += memchr::memchr3(b'"', b'{', b'}', &text[at..])?;
        match text[at] {
            b'"' => {
                at = string_end(text, at + 1)?;
                continue;
            }
            b'{' => depth += 1,
            _ => {
                depth -= 1;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
        }
        at += 1;
    }
}

/// The end (past the closing quote) of a string whose text starts at `at`.
pub(super) fn string_end(text: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at += memchr::memchr2(b'"', b'\\', &text[at..])?;
        if text[at] == b'"' {
            return Some(at + 1);
        }
        at += 2;
        if at > text.len() {
            return None;
        }
    }
}

/// An array (a field this reader skips): brackets, braces and strings count.
pub(super) fn nested_end(text: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'"' => {
                at = string_end(text, at + 1)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}
