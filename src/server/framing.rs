//! The request framing the server checks itself, on the bytes of each head as they arrive: a
//! head with both `Content-Length` and `Transfer-Encoding` is refused (hyper would drop one and
//! read on: the ambiguity request smuggling through a proxy relies on).

/// The longest request head inspected for conflicting length headers (hyper refuses longer ones).
const MAX_INSPECTED_HEAD: usize = 512 * 1024;

/// The bytes of a request head as they arrive, and whether its blank line has been seen.
#[derive(Default)]
pub(super) struct HeadCapture {
    bytes: Vec<u8>,
    complete: bool,
}

impl HeadCapture {
    /// Keeps `bytes` (read while no request is in progress) until the head's blank line.
    pub(super) fn capture(&mut self, bytes: &[u8]) {
        if self.complete || self.bytes.len() >= MAX_INSPECTED_HEAD {
            return;
        }
        // Only the new bytes (and the 3 before them) can complete the blank line: a head that
        // arrives a byte at a time is not scanned again and again.
        let scan_from = self.bytes.len().saturating_sub(3);
        let room = MAX_INSPECTED_HEAD - self.bytes.len();
        self.bytes.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.complete = head_end(&self.bytes[scan_from..]).is_some();
    }

    /// Whether the captured head has both a `Content-Length` and a `Transfer-Encoding` line.
    pub(super) fn has_conflicting_lengths(&self) -> bool {
        has_conflicting_lengths(&self.bytes[..head_end(&self.bytes).unwrap_or(self.bytes.len())])
    }
}

/// Where a request head ends (the index after its blank line), if it has been read.
fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|window| window == b"\r\n\r\n").map(|at| at + 4)
}

/// Whether a request head has both a `Content-Length` and a `Transfer-Encoding` header line.
fn has_conflicting_lengths(head: &[u8]) -> bool {
    let (mut length, mut encoding) = (false, false);
    for line in head.split(|&byte| byte == b'\n').skip(1) {
        let name = line.split(|&byte| byte == b':').next().unwrap_or_default();
        let name = name.trim_ascii();
        length |= name.eq_ignore_ascii_case(b"content-length");
        encoding |= name.eq_ignore_ascii_case(b"transfer-encoding");
    }
    length && encoding
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
    fn one_length_header_or_a_name_in_the_body_is_no_conflict() {
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ncontent-length: 5\r\n\r\n"]));
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"]));
        // After the blank line is the body: a header name there is data.
        assert!(!conflicting(&[b"POST /s HTTP/1.1\r\ncontent-length: 30\r\n\r\ntransfer-encoding: chunked\r\n"]));
        // The request line is not a header.
        assert!(!conflicting(&[b"Transfer-Encoding: x /s HTTP/1.1\r\ncontent-length: 0\r\n\r\n"]));
    }
}
