//! The request framing the server follows itself, on every byte a connection sends, before hyper
//! sees it: each request head is held until its blank line has arrived, checked, and only then
//! handed on; its body is then followed to its end (`Content-Length` bytes, or chunk by chunk as
//! hyper decodes it), and the next head starts there. So every request of a connection is checked,
//! the second of a pipelined write as much as the first, and a refused head never reaches hyper
//! (nor does anything after it): the server answers it with a JSON error and closes.
//!
//! A head is refused when it has both `Content-Length` and `Transfer-Encoding` (hyper would drop
//! one and read on: the ambiguity request smuggling through a proxy relies on), a
//! `Transfer-Encoding` other than exactly `chunked` (hyper would ignore the codings before a final
//! `chunked`, e.g. `gzip, chunked`), `Transfer-Encoding` in an HTTP/1.0 request, a
//! `Content-Length` that is not one number, or a head longer than `MAX_READ_BUFFER` (held in
//! place of hyper's buffer: one head at a time, never more).

use std::time::Duration;

/// How many bytes of each head line are kept for the checks: enough for any header name and
/// value they look at, with room for the whitespace around it. A longer `Content-Length` or
/// `Transfer-Encoding` line is refused; any other line is only counted.
const KEPT_LINE_PREFIX: usize = 64;

/// The most a connection keeps allocated for holding heads between them.
const HELD_CAPACITY_KEPT: usize = 4 * 1024;

/// Why a request head is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    BothLengths,
    TransferCoding,
    /// `Transfer-Encoding` in an HTTP/1.0 request (RFC 9112 §6.1: its framing is faulty).
    TransferEncodingInHttp10,
    ContentLength,
    /// Longer than the server holds (`MAX_READ_BUFFER`); `in_request_line`: its request line
    /// alone is (a URI too long).
    TooLong {
        in_request_line: bool,
    },
}

impl Refusal {
    /// The whole HTTP response to the refused head (JSON error, `Connection: close`).
    pub(super) fn response(self) -> Vec<u8> {
        let (status, code, message) = match self {
            Refusal::BothLengths => {
                ("400 Bad Request", "bad_request", "a request may not carry both Content-Length and Transfer-Encoding")
            }
            Refusal::TransferCoding => {
                ("501 Not Implemented", "not_implemented", "the only Transfer-Encoding accepted is `chunked`")
            }
            Refusal::TransferEncodingInHttp10 => {
                ("400 Bad Request", "bad_request", "an HTTP/1.0 request may not carry Transfer-Encoding")
            }
            Refusal::ContentLength => {
                ("400 Bad Request", "bad_request", "Content-Length must be one non-negative integer")
            }
            Refusal::TooLong { in_request_line: true } => {
                ("414 URI Too Long", "uri_too_long", "the request line is longer than the server reads")
            }
            Refusal::TooLong { in_request_line: false } => (
                "431 Request Header Fields Too Large",
                "headers_too_large",
                "the request head is longer than the server reads",
            ),
        };
        let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }
}

/// Where in a chunked body the bytes are (as hyper's decoder reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Start,
    Size,
    SizeSpace,
    Extension,
    SizeLf,
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk's size line: a blank line ends the body, anything else is a trailer.
    EndCr,
    Trailer,
    TrailerLf,
    EndLf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading a request head (held until it is complete).
    Head,
    /// This many body bytes still to come.
    Length(u64),
    Chunked(Chunk),
    /// A head was refused: nothing more is handed on.
    Refused(Refusal),
    /// The bytes can no longer be followed (a chunk hyper refuses too): they are handed on as they
    /// come, and no further request is served (see `Framing::heads`).
    Untracked,
}

/// What the lines of the head read so far say about its framing.
#[derive(Debug, Default)]
struct HeadFacts {
    content_length: Option<u64>,
    content_length_lines: usize,
    content_length_invalid: bool,
    transfer_encoding_lines: usize,
    /// Codings named in all `Transfer-Encoding` lines together.
    codings: usize,
    /// A coding other than `chunked` (or a line too long to read) was among them.
    other_coding: bool,
}

/// One connection's framing: fed the bytes read from the socket, it gives back those hyper may
/// read now.
pub(super) struct Framing {
    phase: Phase,
    /// The head in progress, held back from hyper.
    held: Vec<u8>,
    /// The longest head held; a longer one is refused.
    max_head: usize,
    /// The first `KEPT_LINE_PREFIX` bytes of the current head line, and its whole length.
    line: Vec<u8>,
    line_length: usize,
    /// The last bytes of the current line (for the request line's version).
    line_tail: u128,
    past_request_line: bool,
    /// The request line ends in `HTTP/1.0`.
    http_10: bool,
    facts: HeadFacts,
    chunk_size: u64,
    /// Request heads handed on so far.
    heads: u64,
}

impl Framing {
    pub(super) fn new(max_head: usize) -> Self {
        Self {
            phase: Phase::Head,
            held: Vec::new(),
            max_head,
            line: Vec::new(),
            line_length: 0,
            line_tail: 0,
            past_request_line: false,
            http_10: false,
            facts: HeadFacts::default(),
            chunk_size: 0,
            heads: 0,
        }
    }

    /// How many request heads were handed on: hyper can have parsed no more requests than this
    /// (while the bytes are followed).
    pub(super) fn heads(&self) -> u64 {
        self.heads
    }

    /// Whether the bytes are no longer followed, so no further request may be served.
    #[cfg(test)]
    fn untracked(&self) -> bool {
        self.phase == Phase::Untracked
    }

    /// The refused head, once one was.
    pub(super) fn refusal(&self) -> Option<Refusal> {
        match self.phase {
            Phase::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// Whether a request's body is still arriving (its head was handed on, its end not yet read).
    pub(super) fn receiving_body(&self) -> bool {
        matches!(self.phase, Phase::Length(_) | Phase::Chunked(_))
    }

    /// The end of the stream: a head in progress is handed on as it is (hyper sees it end unfinished).
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
        if self.phase == Phase::Head {
            self.hand_on(out);
        }
    }

    /// Moves the held head to `out`, keeping no more than a small buffer for the next one (a
    /// connection holds one head at a time, in place of hyper's buffer, which then holds none).
    fn hand_on(&mut self, out: &mut Vec<u8>) {
        if out.is_empty() {
            std::mem::swap(out, &mut self.held);
        } else {
            out.append(&mut self.held);
        }
        if self.held.capacity() > HELD_CAPACITY_KEPT {
            self.held = Vec::new();
        }
    }

    /// Reads `input` (the next bytes from the socket); appends to `out` the bytes hyper may read.
    pub(super) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while let Some((&byte, rest)) = input.split_first() {
            match self.phase {
                Phase::Refused(_) => return,
                Phase::Untracked => {
                    out.extend_from_slice(input);
                    return;
                }
                Phase::Length(remaining) => {
                    let take = usize::try_from(remaining).unwrap_or(usize::MAX).min(input.len());
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    let remaining = remaining - take as u64;
                    self.phase = if remaining == 0 { Phase::Head } else { Phase::Length(remaining) };
                }
                Phase::Chunked(Chunk::Data(remaining)) => {
                    let take = usize::try_from(remaining).unwrap_or(usize::MAX).min(input.len());
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    let remaining = remaining - take as u64;
                    self.phase = Phase::Chunked(if remaining == 0 { Chunk::DataCr } else { Chunk::Data(remaining) });
                }
                Phase::Chunked(state) => {
                    out.push(byte);
                    input = rest;
                    self.phase = match self.chunk_step(state, byte) {
                        Some(None) => Phase::Head,
                        Some(Some(next)) => Phase::Chunked(next),
                        None => Phase::Untracked,
                    };
                }
                Phase::Head => {
                    input = rest;
                    self.head_byte(byte, out);
                }
            }
        }
    }

    /// One framing byte of a chunked body: the next state, `Some(None)` at the body's end, `None`
    /// when hyper's decoder would refuse it.
    fn chunk_step(&mut self, state: Chunk, byte: u8) -> Option<Option<Chunk>> {
        let hex = |byte: u8| char::from(byte).to_digit(16).map(u64::from);
        let next = match (state, byte) {
            (Chunk::Start, _) => {
                self.chunk_size = hex(byte)?;
                Chunk::Size
            }
            (Chunk::Size, b'\t' | b' ') | (Chunk::SizeSpace, b'\t' | b' ') => Chunk::SizeSpace,
            (Chunk::Size | Chunk::SizeSpace, b';') => Chunk::Extension,
            (Chunk::Size | Chunk::SizeSpace | Chunk::Extension, b'\r') => Chunk::SizeLf,
            (Chunk::Size, _) => {
                self.chunk_size = self.chunk_size.checked_mul(16)?.checked_add(hex(byte)?)?;
                Chunk::Size
            }
            (Chunk::Extension, b'\n') => return None,
            (Chunk::Extension, _) => Chunk::Extension,
            (Chunk::SizeLf, b'\n') if self.chunk_size == 0 => Chunk::EndCr,
            (Chunk::SizeLf, b'\n') => Chunk::Data(self.chunk_size),
            (Chunk::DataCr, b'\r') => Chunk::DataLf,
            (Chunk::DataLf, b'\n') => Chunk::Start,
            (Chunk::EndCr, b'\r') => Chunk::EndLf,
            (Chunk::Trailer, b'\r') => Chunk::TrailerLf,
            (Chunk::EndCr | Chunk::Trailer, _) => Chunk::Trailer,
            (Chunk::TrailerLf, b'\n') => Chunk::EndCr,
            (Chunk::EndLf, b'\n') => return Some(None),
            _ => return None,
        };
        Some(Some(next))
    }

    fn head_byte(&mut self, byte: u8, out: &mut Vec<u8>) {
        if self.held.len() >= self.max_head {
            self.held = Vec::new();
            self.phase = Phase::Refused(Refusal::TooLong { in_request_line: !self.past_request_line });
            return;
        }
        self.held.push(byte);
        if byte != b'\n' {
            if self.line.len() < KEPT_LINE_PREFIX {
                self.line.push(byte);
            }
            self.line_length += 1;
            self.line_tail = (self.line_tail << 8) | u128::from(byte);
            return;
        }
        let blank = self.line_length == 0 || (self.line_length == 1 && self.line == b"\r");
        if blank && self.past_request_line {
            self.end_of_head(out);
        } else if self.past_request_line {
            self.header_line();
        } else if !blank {
            let tail = if self.line_tail & 0xff == u128::from(b'\r') { self.line_tail >> 8 } else { self.line_tail };
            self.http_10 = tail as u64 == u64::from_be_bytes(*b"HTTP/1.0");
        }
        self.line_tail = 0;
        // (Blank lines before the request line are skipped, as hyper does.)
        self.past_request_line |= !blank;
        self.line.clear();
        self.line_length = 0;
    }

    fn header_line(&mut self) {
        let complete = self.line_length <= KEPT_LINE_PREFIX;
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let Some(colon) = line.iter().position(|&b| b == b':') else { return };
        let (name, value) = (line[..colon].trim_ascii(), line[colon + 1..].trim_ascii());
        let facts = &mut self.facts;
        if name.eq_ignore_ascii_case(b"content-length") {
            facts.content_length_lines += 1;
            match parse_digits(value).filter(|_| complete) {
                Some(length) if facts.content_length.is_none_or(|known| known == length) => {
                    facts.content_length = Some(length);
                }
                _ => facts.content_length_invalid = true,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            facts.transfer_encoding_lines += 1;
            for coding in value.split(|&b| b == b',') {
                facts.codings += 1;
                facts.other_coding |= !coding.trim_ascii().eq_ignore_ascii_case(b"chunked");
            }
            facts.other_coding |= !complete;
        }
    }

    /// The head's blank line: refuse it, or hand it on and follow its body.
    fn end_of_head(&mut self, out: &mut Vec<u8>) {
        let facts = std::mem::take(&mut self.facts);
        self.past_request_line = false;
        let chunked = facts.transfer_encoding_lines > 0;
        let refusal = if chunked && facts.content_length_lines > 0 {
            Some(Refusal::BothLengths)
        } else if chunked && self.http_10 {
            Some(Refusal::TransferEncodingInHttp10)
        } else if chunked && (facts.codings != 1 || facts.other_coding) {
            Some(Refusal::TransferCoding)
        } else if facts.content_length_invalid {
            Some(Refusal::ContentLength)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.held = Vec::new();
            self.phase = Phase::Refused(refusal);
            return;
        }
        self.hand_on(out);
        self.heads += 1;
        self.phase = match facts.content_length {
            _ if chunked => Phase::Chunked(Chunk::Start),
            Some(length) if length > 0 => Phase::Length(length),
            _ => Phase::Head,
        };
    }
}

/// A `Content-Length` value as hyper reads it: ASCII digits only, no sign, no overflow.
fn parse_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |number, &byte| {
        if byte.is_ascii_digit() {
            number.checked_mul(10)?.checked_add(u64::from(byte - b'0'))
        } else {
            None
        }
    })
}

/// How long answering a refused head may take (writing the answer, reading what the client still
/// sends, so that closing does not reset the connection before the answer is read).
pub(super) const ANSWER_TIME: Duration = Duration::from_secs(1);

/// Answers a refused head on the connection's socket and closes it.
pub(super) async fn answer(mut stream: tokio::net::TcpStream, refusal: Refusal) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tokio::time::timeout(ANSWER_TIME, async {
        stream.write_all(&refusal.response()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` one after the other; returns what was handed on and the framing.
    fn run(pieces: &[&[u8]]) -> (Vec<u8>, Framing) {
        let mut framing = Framing::new(64 * 1024);
        let mut out = Vec::new();
        for piece in pieces {
            framing.feed(piece, &mut out);
        }
        (out, framing)
    }

    fn refusal_of(stream: &[u8]) -> Option<Refusal> {
        // Whole, and a byte at a time: the answer may not depend on how the reads split.
        let whole = run(&[stream]).1.refusal();
        let pieces: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(run(&pieces).1.refusal(), whole, "{}", String::from_utf8_lossy(stream));
        whole
    }

    #[test]
    fn both_length_headers_are_refused_in_any_case_order_or_position() {
        let both = b"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTRANSFER-ENCODING: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(refusal_of(both), Some(Refusal::BothLengths));
        let reversed = b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n";
        assert_eq!(refusal_of(reversed), Some(Refusal::BothLengths));
        // Behind a request with a body, and behind a chunked one: the second head is found.
        let mut pipelined = b"POST /a HTTP/1.1\r\ncontent-length: 4\r\n\r\nabcd".to_vec();
        pipelined.extend_from_slice(
            b"POST /b HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n",
        );
        pipelined.extend_from_slice(reversed);
        assert_eq!(refusal_of(&pipelined), Some(Refusal::BothLengths));
        let (out, framing) = run(&[&pipelined]);
        assert_eq!(framing.heads(), 2);
        assert!(!out.windows(7).any(|w| w == b"POST /s"), "the refused head is not handed on");
    }

    #[test]
    fn only_exactly_chunked_is_a_transfer_encoding() {
        for coding in ["gzip, chunked", "gzip", "chunked, gzip", "chunked, chunked", "identity", "", "chunked,"] {
            let head = format!("POST /s HTTP/1.1\r\ntransfer-encoding: {coding}\r\n\r\n");
            assert_eq!(refusal_of(head.as_bytes()), Some(Refusal::TransferCoding), "{coding:?}");
        }
        let twice = b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(refusal_of(twice), Some(Refusal::TransferCoding));
        let http_10 = b"POST /s HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(refusal_of(http_10), Some(Refusal::TransferEncodingInHttp10));
        let (_, framing) =
            run(&[b"POST /s HTTP/1.0\ncontent-length: 0\n\nPOST /s HTTP/1.1\ntransfer-encoding: chunked\n\n"]);
        assert_eq!((framing.refusal(), framing.heads()), (None, 2), "only the request's own version counts");
        for coding in ["chunked", "Chunked", " chunked "] {
            let head = format!("POST /s HTTP/1.1\r\ntransfer-encoding:{coding}\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
            let (out, framing) = run(&[head.as_bytes()]);
            assert_eq!(framing.refusal(), None, "{coding:?}");
            assert_eq!(out, head.as_bytes());
            assert!(!framing.receiving_body());
        }
    }

    #[test]
    fn a_content_length_must_be_one_number() {
        for value in ["-1", "+5", "5, 6", "0x10", "", "99999999999999999999999"] {
            let head = format!("POST /s HTTP/1.1\r\ncontent-length: {value}\r\n\r\n");
            assert_eq!(refusal_of(head.as_bytes()), Some(Refusal::ContentLength), "{value:?}");
        }
        let differing = b"POST /s HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n";
        assert_eq!(refusal_of(differing), Some(Refusal::ContentLength));
        let same = b"POST /s HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok";
        assert_eq!(refusal_of(same), None);
    }

    #[test]
    fn heads_are_held_until_complete_and_bodies_are_followed() {
        let mut framing = Framing::new(64 * 1024);
        let mut out = Vec::new();
        framing.feed(b"POST /s HTTP/1.1\r\ncontent-length: 6\r\n", &mut out);
        assert!(out.is_empty(), "an unfinished head is held");
        framing.feed(b"\r\nabc", &mut out);
        assert!(out.ends_with(b"\r\n\r\nabc"));
        assert!(framing.receiving_body());
        // A header name in the body is data.
        framing.feed(b"de\nGET /x HTTP/1.1\r\ntransfer-encoding: x\r\ncontent-length: 1\r", &mut out);
        assert!(!framing.receiving_body());
        assert!(out.ends_with(b"de\n"), "the next head is held");
        assert_eq!(framing.refusal(), None);
        framing.feed(b"\n\r\n", &mut out);
        assert_eq!(framing.refusal(), Some(Refusal::BothLengths));
        assert_eq!(framing.heads(), 1);
    }

    #[test]
    fn a_chunk_hyper_would_refuse_stops_the_following() {
        let (_, framing) = run(&[b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"]);
        assert!(framing.untracked());
        let (_, framing) = run(&[b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabX\n"]);
        assert!(framing.untracked());
    }

    #[test]
    fn a_head_over_the_limit_is_refused_and_never_held_whole() {
        let mut framing = Framing::new(100);
        let mut out = Vec::new();
        framing.feed(b"GET / HTTP/1.1\r\nx-pad: ", &mut out);
        framing.feed(&[b'a'; 200], &mut out);
        assert_eq!(framing.refusal(), Some(Refusal::TooLong { in_request_line: false }));
        assert!(out.is_empty() && framing.held.capacity() == 0);
        // A huge line keeps a fixed space for the checks.
        assert!(framing.line.capacity() <= 2 * KEPT_LINE_PREFIX);
        let (_, framing) = run(&[format!("GET /{} HTTP/1.1\r\n", "a".repeat(70_000)).as_bytes()]);
        assert_eq!(framing.refusal(), Some(Refusal::TooLong { in_request_line: true }));
    }

    #[test]
    fn the_request_line_and_leading_blank_lines_are_no_headers() {
        let head = b"\r\n\r\nTransfer-Encoding: x /s HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
        let (out, framing) = run(&[head]);
        assert_eq!(framing.refusal(), None);
        assert_eq!(framing.heads(), 1);
        assert_eq!(out, head);
        // A long name that starts like one of them is not one.
        let (_, framing) =
            run(&[b"POST /s HTTP/1.1\r\ncontent-length-and-more: 5\r\ntransfer-encoding: chunked\r\n\r\n"]);
        assert_eq!(framing.refusal(), None);
    }
}
