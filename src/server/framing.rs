//! The request framing the server checks itself, on the bytes of each head as they arrive: a
//! head with both `Content-Length` and `Transfer-Encoding` is refused (hyper would drop one and
//! read on: the ambiguity request smuggling through a proxy relies on).

/// How many bytes of each head line are kept: enough for any header name the check looks for,
/// with room for the whitespace around it. The rest of a line is only counted, so a client
/// that sends a huge head costs the server no more than hyper's own read buffer.
const KEPT_LINE_PREFIX: usize = 64;

/// What is known of the request head arriving on a connection, read a byte at a time and kept in
/// a fixed space (the beginning of the current line, and flags): whether it had a
/// `Content-Length` and a `Transfer-Encoding` line, and whether its blank line has been seen.
#[derive(Default)]
pub(super) struct HeadCapture {
    /// The first `KEPT_LINE_PREFIX` bytes of the current line.
    line: Vec<u8>,
    /// The current line's length so far (all of it, kept or not).
    line_length: usize,
    /// Whether the request line is behind us (header lines come after it).
    past_request_line: bool,
    content_length: bool,
    transfer_encoding: bool,
    complete: bool,
}

impl HeadCapture {
    /// Reads `bytes` (read while no request is in progress) until the head's blank line.
    pub(super) fn capture(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.complete {
                return;
            }
            if byte != b'\n' {
                if self.line.len() < KEPT_LINE_PREFIX {
                    self.line.push(byte);
                }
                self.line_length += 1;
                continue;
            }
            let blank = self.line_length == 0 || (self.line_length == 1 && self.line == b"\r");
            if blank && self.past_request_line {
                self.complete = true;
            } else if self.past_request_line {
                let name = self.line.split(|&b| b == b':').next().unwrap_or_default().trim_ascii();
                self.content_length |= name.eq_ignore_ascii_case(b"content-length");
                self.transfer_encoding |= name.eq_ignore_ascii_case(b"transfer-encoding");
            }
            self.past_request_line |= !blank;
            self.line.clear();
            self.line_length = 0;
        }
    }

    /// Whether the head had both a `Content-Length` and a `Transfer-Encoding` line.
    pub(super) fn has_conflicting_lengths(&self) -> bool {
        self.content_length && self.transfer_encoding
    }
}

/// The answer to a head with both `Content-Length` and `Transfer-Encoding`.
pub(super) fn conflicting_lengths_response() -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = crate::error::ApiError::new(
        crate::error::ErrorCode::BadRequest,
        "a request may not carry both Content-Length and Transfer-Encoding",
    )
    .into_response();
    response.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflicting(pieces: &[&[u8]]) -> bool {
        let mut capture = HeadCapture::default();
        for piece in pieces {
            capture.capture(piece);
        }
        capture.has_conflicting_lengths()
    }

    #[test]
    fn both_length_headers_in_one_head_conflict_in_any_case_and_order() {
        let both = b"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTRANSFER-ENCODING : chunked\r\n\r\n0\r\n\r\n";
        assert!(conflicting(&[both]));
        assert!(conflicting(&[b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n"]));
        // Split anywhere across reads, a byte at a time included.
        let pieces: Vec<&[u8]> = both.chunks(1).collect();
        assert!(conflicting(&pieces));
    }

    #[test]
    fn a_huge_head_is_read_in_fixed_space() {
        let mut capture = HeadCapture::default();
        capture.capture(b"POST /s HTTP/1.1\r\nX-Pad: ");
        for _ in 0..1000 {
            capture.capture(&[b'a'; 1000]);
        }
        capture.capture(b"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(capture.line.capacity() <= 2 * KEPT_LINE_PREFIX, "kept {} bytes", capture.line.capacity());
        assert!(capture.has_conflicting_lengths());
        // A long header name that merely starts like one of them is not one.
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ncontent-length-and-more: 5\r\ntransfer-encoding: x\r\n\r\n"]));
    }

    #[test]
    fn one_length_header_or_a_name_in_the_body_is_no_conflict() {
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ncontent-length: 5\r\n\r\n"]));
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"]));
        // After the blank line is the body: a header name there is data.
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ncontent-length: 30\r\n\r\ntransfer-encoding: chunked\r\n"]));
        // The request line is not a header.
        assert!(!conflicting(&[b"Transfer-Encoding: x /s HTTP/1.1\r\ncontent-length: 0\r\n\r\n"]));
    }
}
