//! The real server on a socket: header-read and keep-alive timeouts, the connection limit (idle
//! and body-receiving connections evicted, busy ones kept), load shedding, the request framing of
//! every request (pipelined or keep-alive), credentials checked before a body is read, and the
//! real binary's stop on SIGTERM. Every wait is bounded by `HANG` so a regression fails instead of
//! hanging; nothing asserts a duration except the 10 s a stop must take at most.

use crate::common::fixture_state;
use retrieval_service::config::Settings;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far longer than any timer a test configures; far shorter than the ones it must not hit.
const HANG: Duration = Duration::from_secs(10);

const SEARCH: &str = "/internal/retrieval/search";

struct Server {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(adjust: impl FnOnce(&mut Settings)) -> Server {
        Self::start_with_state(fixture_state(adjust)).await
    }

    async fn start_with_state(state: retrieval_service::AppState) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(retrieval_service::server::serve(listener, state, async {
            let _ = stopped.await;
        }));
        Server { address, stop: Some(stop), task }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(HANG, self.task).await.expect("server stops").unwrap().unwrap();
    }
}

/// Reads until the server closes the connection; panics if it stays open for `HANG`.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(HANG, stream.read(&mut buffer)).await.expect("the server closes the connection") {
            Ok(0) | Err(_) => return seen,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
        }
    }
}

/// Sends one keep-alive request and reads exactly its response (head + Content-Length body).
async fn request(stream: &mut TcpStream, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(HANG, stream.read(&mut buffer)).await.expect("a response").unwrap();
        assert!(n > 0, "connection closed before a full response: {:?}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&received).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let headers = text[..end].to_ascii_lowercase();
            let length: usize = headers
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                let status = headers[9..12].parse().unwrap();
                return (status, headers, text[end + 4..end + 4 + length].to_string());
            }
        }
    }
}

#[tokio::test]
async fn a_connection_that_never_sends_a_request_is_closed_after_the_header_timeout() {
    let server = Server::start(|s| {
        s.header_read_timeout_seconds = 0.3;
        s.keep_alive_timeout_seconds = 600.0;
    })
    .await;
    let mut silent = TcpStream::connect(server.address).await.unwrap();
    assert!(read_until_closed(&mut silent).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn a_slowloris_head_is_closed_after_the_header_timeout() {
    let server = Server::start(|s| {
        s.header_read_timeout_seconds = 0.3;
        s.keep_alive_timeout_seconds = 600.0;
    })
    .await;
    let mut slow = TcpStream::connect(server.address).await.unwrap();
    // A keep-alive connection that served one request, then starts a head it never finishes.
    let (status, _, _) = request(&mut slow, "GET", "/health", "").await;
    assert_eq!(status, 200);
    slow.write_all(b"GET /health HTTP/1.1\r\nhost: test\r\nx-slow: ").await.unwrap();
    let mut closed = false;
    for _ in 0..200 {
        // One more header byte every 50 ms keeps the socket busy but the head incomplete.
        if slow.write_all(b"a").await.is_err() {
            closed = true;
            break;
        }
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(50), slow.read(&mut byte)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            _ => {}
        }
    }
    assert!(closed, "a head trickling in for 10 s was not cut by a 0.3 s header timeout");
    server.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let server = Server::start(|s| {
        s.header_read_timeout_seconds = 600.0;
        s.keep_alive_timeout_seconds = 0.3;
    })
    .await;
    let mut client = TcpStream::connect(server.address).await.unwrap();
    for _ in 0..2 {
        let (status, headers, _) = request(&mut client, "GET", "/health", "").await;
        assert_eq!(status, 200);
        assert!(!headers.contains("connection: close"), "{headers}");
    }
    assert!(read_until_closed(&mut client).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn at_the_limit_a_new_connection_replaces_the_longest_idle_one() {
    let server = Server::start(|s| s.max_connections = 2).await;
    let mut first = TcpStream::connect(server.address).await.unwrap();
    let mut second = TcpStream::connect(server.address).await.unwrap();
    assert_eq!(request(&mut first, "GET", "/health", "").await.0, 200);
    assert_eq!(request(&mut second, "GET", "/health", "").await.0, 200);
    // Both are idle keep-alive connections: the third is served, and the first (idle longest) goes.
    let mut third = TcpStream::connect(server.address).await.unwrap();
    let (status, _, metrics) = request(&mut third, "GET", "/metrics", "").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("retrieval_connections_evicted_total 1"), "{metrics}");
    assert!(read_until_closed(&mut first).await.is_empty(), "the longest idle connection is closed");
    assert_eq!(request(&mut second, "GET", "/health", "").await.0, 200, "the other one keeps working");
    server.stop().await;
}

/// An embedder that holds every search until the gate opens: requests being worked on, on demand.
struct GateEmbedder {
    gate: Arc<tokio::sync::Semaphore>,
    entered: Arc<std::sync::atomic::AtomicUsize>,
    inner: retrieval_engine::PseudoEmbedder,
}

#[async_trait::async_trait]
impl retrieval_engine::Embedder for GateEmbedder {
    async fn embed(
        &self,
        texts: &[String],
        kind: retrieval_engine::InputKind,
    ) -> Result<Vec<Vec<f32>>, retrieval_engine::EmbedError> {
        self.entered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _open = self.gate.acquire().await;
        self.inner.embed(texts, kind).await
    }

    fn model_name(&self) -> &str {
        "gate"
    }
}

#[tokio::test]
async fn at_the_limit_with_every_connection_busy_a_new_one_is_refused() {
    let dimension = retrieval_engine::fixtures::DIMENSION;
    let settings = Settings { embedding_dimension: dimension, max_connections: 2, ..Settings::default() };
    let index =
        Arc::new(retrieval_engine::InMemoryIndex::from_snapshot(retrieval_engine::fixtures::snapshot()).unwrap());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let embedder = GateEmbedder {
        gate: Arc::clone(&gate),
        entered: Arc::clone(&entered),
        inner: retrieval_engine::PseudoEmbedder::new(dimension),
    };
    let server =
        Server::start_with_state(retrieval_service::startup::state_with(settings, index, Arc::new(embedder))).await;
    // Two searches being worked on: their bodies are in, their handlers wait at the gate.
    let mut busy = Vec::new();
    for _ in 0..2 {
        let address = server.address;
        busy.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(address).await.unwrap();
            request(&mut stream, "POST", SEARCH, r#"{"query": "Gradle", "tenant_id": "t1"}"#).await.0
        }));
    }
    tokio::time::timeout(HANG, async {
        while entered.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("both searches reach the embedder");
    // The new connection is told why and when to retry, then closed (not reset).
    let mut refused = TcpStream::connect(server.address).await.unwrap();
    let _ = refused.write_all(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n").await;
    let answer = String::from_utf8_lossy(&read_until_closed(&mut refused).await).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1\r\n") && answer.contains("connection: close\r\n"), "{answer}");
    assert!(answer.contains("\"overloaded\""), "{answer}");
    gate.add_permits(1000);
    for search in busy {
        assert_eq!(
            tokio::time::timeout(HANG, search).await.unwrap().unwrap(),
            200,
            "busy connections are never closed"
        );
    }
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let (status, _, metrics) = request(&mut stream, "GET", "/metrics", "").await;
    assert_eq!(status, 200);
    assert_eq!(counter(&metrics, "retrieval_connections_evicted_total"), 0, "{metrics}");
    assert!(counter(&metrics, "retrieval_connections_refused_total") >= 1, "{metrics}");
    server.stop().await;
}

/// The value of a counter in a `/metrics` text.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_search_over_the_socket_still_works() {
    let server = Server::start(|_| {}).await;
    let mut client = TcpStream::connect(server.address).await.unwrap();
    let (status, headers, body) =
        request(&mut client, "POST", "/internal/retrieval/search", r#"{"query": "Gradle", "tenant_id": "t1"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert!(headers.contains("x-request-id"));
    assert!(body.contains("sdk/android/install"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn long_uris_are_414() {
    let server = Server::start(|_| {}).await;
    // Up to hyper's own URI limit (64 KiB) the answer is our JSON error.
    let mut client = TcpStream::connect(server.address).await.unwrap();
    let path = format!("/internal/retrieval/stats?tenant_id=t1&pad={}", "x".repeat(20_000));
    let (status, _, body) = request(&mut client, "GET", &path, "").await;
    assert_eq!(status, 414);
    assert!(body.contains("uri_too_long"), "{body}");
    // A request line longer than the server reads (`MAX_READ_BUFFER`) is refused before the
    // router, with the same JSON error, and the connection closed.
    let mut client = TcpStream::connect(server.address).await.unwrap();
    let path = format!("/health?pad={}", "x".repeat(100_000));
    // The server may answer and close before it has read all of it: a failed write is fine.
    let _ = client.write_all(format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n").as_bytes()).await;
    let answer = String::from_utf8_lossy(&read_until_closed(&mut client).await).to_string();
    assert!(answer.starts_with("HTTP/1.1 414"), "{answer}");
    assert!(answer.contains("\"uri_too_long\""), "{answer}");
    server.stop().await;
}

/// A head with both `Content-Length` and `Transfer-Encoding` (in either order) is 400 and the
/// connection closed: the two framings a proxy and this service could disagree on are never
/// guessed between. Either header alone still works.
#[tokio::test]
async fn content_length_with_transfer_encoding_is_400_and_closes() {
    let server = Server::start(|_| {}).await;
    let body = r#"{"query": "Gradle", "tenant_id": "t1"}"#;
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    for lengths in [
        format!("content-length: {}\r\ntransfer-encoding: chunked", chunked.len()),
        format!("Transfer-Encoding: chunked\r\nContent-Length: {}", chunked.len()),
    ] {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        let head = format!(
            "POST /internal/retrieval/search HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n{lengths}\r\n\r\n"
        );
        stream.write_all(format!("{head}{chunked}").as_bytes()).await.unwrap();
        let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).to_ascii_lowercase();
        assert!(answer.starts_with("http/1.1 400"), "{lengths}: {answer}");
        assert!(answer.contains("\"bad_request\""), "{answer}");
    }
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let head = "POST /internal/retrieval/search HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
                transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    stream.write_all(format!("{head}{chunked}").as_bytes()).await.unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let (status, _, answer) = request(&mut stream, "POST", "/internal/retrieval/search", body).await;
    assert_eq!(status, 200, "{answer}");
    server.stop().await;
}

/// A head well over the connection's read buffer is answered 431 (JSON) at once and the
/// connection closed (it is never kept growing); a head just under it and a body far over it still work.
#[tokio::test]
async fn a_head_over_the_read_buffer_is_431_and_a_big_body_still_streams() {
    let server = Server::start(|_| {}).await;
    let limit = retrieval_service::server::MAX_READ_BUFFER;
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let pad = "a".repeat(3 * limit);
    let head = format!("GET /health HTTP/1.1\r\nhost: test\r\nx-pad: {pad}\r\n\r\n");
    // The server may answer and close before it has read all of it: a failed write is fine.
    let _ = stream.write_all(head.as_bytes()).await;
    let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 431"), "{}", &answer[..answer.len().min(200)]);
    assert!(answer.contains("\"headers_too_large\""), "{answer}");

    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let pad = "a".repeat(limit / 2);
    let head = format!("GET /health HTTP/1.1\r\nhost: test\r\nx-pad: {pad}\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..answer.len().min(200)]);

    // A body of 4 read buffers (within the body limit) is read through the buffer in pieces.
    let query = "Gradle ".repeat(4 * limit / 7);
    let body = format!(r#"{{"query": "{}", "tenant_id": "t1"}}"#, query.trim());
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let (status, _, answer) = request(&mut stream, "POST", "/internal/retrieval/search", &body).await;
    assert_ne!(status, 431, "{answer}");
    assert_ne!(status, 400, "{answer}");
    server.stop().await;
}

/// Clients trickling their bodies hold connections, not work slots: with every slot's worth of
/// them connected, a real search is still served, and each slow one gets 408 at its deadline.
#[tokio::test]
async fn slow_bodies_do_not_hold_work_slots() {
    let server = Server::start(|s| {
        s.max_in_flight_requests = 2;
        s.body_read_timeout_seconds = 1.0;
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        stream
            .write_all(b"POST /internal/retrieval/search HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
            .await
            .unwrap();
        slow.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let (status, _, body) =
        request(&mut stream, "POST", "/internal/retrieval/search", r#"{"query": "Gradle", "tenant_id": "t1"}"#).await;
    assert_eq!(status, 200, "{body}");
    for mut stream in slow {
        let answer = String::from_utf8_lossy(&read_until_closed(&mut stream).await).into_owned();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("request_timeout"), "{answer}");
    }
    server.stop().await;
}

/// The responses in `bytes` (each head, then its `Content-Length` body): status, lowercase head, body.
fn responses(bytes: &[u8]) -> Vec<(u16, String, String)> {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(end) = rest.find("\r\n\r\n") {
        let head = rest[..end].to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map_or(0, |value| value.trim().parse().unwrap());
        let body_end = (end + 4 + length).min(rest.len());
        found.push((head[9..12].parse().unwrap(), head, rest[end + 4..body_end].to_string()));
        rest = &rest[body_end..];
    }
    found
}

fn search_head(lengths: &str) -> String {
    format!("POST {SEARCH} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n{lengths}\r\n\r\n")
}

/// Every request of a connection is checked, not only the first: a pipelined second request (in
/// the same write as the first) or a keep-alive one with both `Content-Length` and
/// `Transfer-Encoding` is 400, the requests before it are answered, and the connection closes.
#[tokio::test]
async fn every_request_of_a_connection_is_checked_for_conflicting_lengths() {
    let server = Server::start(|_| {}).await;
    let body = r#"{"query": "Gradle", "tenant_id": "t1"}"#;
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    let first = format!("{}{body}", search_head(&format!("content-length: {}", body.len())));
    let second_chunked = format!("{}{chunked}", search_head("transfer-encoding: chunked"));
    let conflicting = format!(
        "{}{chunked}",
        search_head(&format!("content-length: {}\r\ntransfer-encoding: chunked", chunked.len()))
    );
    let after = "GET /health HTTP/1.1\r\nhost: test\r\n\r\n";
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    stream.write_all(format!("{first}{second_chunked}{conflicting}{after}").as_bytes()).await.unwrap();
    let answers = responses(&read_until_closed(&mut stream).await);
    let statuses: Vec<u16> = answers.iter().map(|(status, _, _)| *status).collect();
    assert_eq!(statuses, [200, 200, 400], "{answers:?}");
    assert!(answers[2].2.contains("\"bad_request\"") && answers[2].1.contains("connection: close"), "{answers:?}");

    // The same on a keep-alive connection, the headers the other way round.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    assert_eq!(request(&mut stream, "GET", "/health", "").await.0, 200);
    let reversed = format!(
        "{}{chunked}",
        search_head(&format!("transfer-encoding: chunked\r\ncontent-length: {}", chunked.len()))
    );
    stream.write_all(reversed.as_bytes()).await.unwrap();
    let answers = responses(&read_until_closed(&mut stream).await);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].0, 400, "{answers:?}");
    server.stop().await;
}

/// `Transfer-Encoding` is `chunked` or nothing: `gzip, chunked` is not read as plain chunked
/// with the gzip ignored, and any other coding gets a JSON 501 (not a silent close).
#[tokio::test]
async fn a_transfer_encoding_other_than_chunked_is_501() {
    let server = Server::start(|_| {}).await;
    let body = r#"{"query": "Gradle", "tenant_id": "t1"}"#;
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    for coding in ["gzip, chunked", "gzip", "chunked, gzip", "identity"] {
        let mut stream = TcpStream::connect(server.address).await.unwrap();
        let _ = stream
            .write_all(format!("{}{chunked}", search_head(&format!("transfer-encoding: {coding}"))).as_bytes())
            .await;
        let answers = responses(&read_until_closed(&mut stream).await);
        assert_eq!(answers.len(), 1, "{coding}: {answers:?}");
        let (status, head, body) = &answers[0];
        assert_eq!(*status, 501, "{coding}: {answers:?}");
        assert!(head.contains("connection: close") && head.contains("application/json"), "{head}");
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "not_implemented", "{body}");
    }
    // In HTTP/1.0, even `chunked` is faulty framing: a JSON 400.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let head = search_head("transfer-encoding: chunked").replace("HTTP/1.1", "HTTP/1.0");
    let _ = stream.write_all(format!("{head}{chunked}").as_bytes()).await;
    let answers = responses(&read_until_closed(&mut stream).await);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].0 == 400 && answers[0].2.contains("\"bad_request\""), "{answers:?}");
    // Exactly `chunked` still works.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    stream.write_all(format!("{}{chunked}", search_head("transfer-encoding: chunked")).as_bytes()).await.unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await.unwrap();
    let answers = responses(&read_until_closed(&mut stream).await);
    let statuses: Vec<u16> = answers.iter().map(|(status, _, _)| *status).collect();
    assert_eq!(statuses, [200, 200], "{answers:?}");
    server.stop().await;
}

/// A keys file granting `KEY` tenant t1.
const KEY: &str = "t1-reader-key-0123456789";

fn keys_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keys.txt"), format!("{KEY}: t1\n")).unwrap();
    dir
}

/// A search whose head is sent whole and whose body then trickles in one byte at a time (or
/// stops when the server closes the connection), until `stop` or 10 s; reconnects when closed.
fn trickle(address: SocketAddr, stop: Arc<std::sync::atomic::AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) && started.elapsed() < HANG {
            let Ok(mut stream) = TcpStream::connect(address).await else { return };
            let head = search_head("content-length: 100");
            if stream.write_all(head.as_bytes()).await.is_err() {
                continue;
            }
            for _ in 0..100 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) || stream.write_all(b" ").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Searches (each on a new connection, as a client does whose keep-alive connection was closed);
/// returns how many were answered 200.
async fn searches(address: SocketAddr, count: usize, authorization: Option<&str>) -> usize {
    let mut served = 0;
    for i in 0..count {
        let body = format!(r#"{{"query": "Gradle {i}", "tenant_id": "t1"}}"#);
        let key = authorization.map(|key| format!("authorization: Bearer {key}\r\n")).unwrap_or_default();
        let mut stream = TcpStream::connect(address).await.unwrap();
        let head = format!(
            "POST {SEARCH} HTTP/1.1\r\nhost: test\r\n{key}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        if stream.write_all(format!("{head}{body}").as_bytes()).await.is_err() {
            continue;
        }
        let answer = read_until_closed(&mut stream).await;
        if responses(&answer).first().is_some_and(|(status, _, _)| *status == 200) {
            served += 1;
        }
    }
    served
}

/// With API keys on, a request without a valid key is answered 401 from its head: no
/// `100 Continue`, its body never read, the connection closed. So connections trickling bodies
/// without a key cannot fill the connection limit, and a keyed client from the same address is
/// served.
#[tokio::test]
async fn without_a_key_a_request_is_refused_before_its_body() {
    let keys = keys_file();
    let server = Server::start(|s| {
        s.api_keys = keys.path().join("keys.txt");
        s.max_connections = 16;
    })
    .await;
    // `Expect: 100-continue` without a key: 401 at once, never 100.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let head = search_head("content-length: 100\r\nexpect: 100-continue");
    stream.write_all(head.as_bytes()).await.unwrap();
    let answers = responses(&read_until_closed(&mut stream).await);
    let statuses: Vec<u16> = answers.iter().map(|(status, _, _)| *status).collect();
    assert_eq!(statuses, [401], "{answers:?}");
    assert!(answers[0].1.contains("connection: close") && answers[0].2.contains("\"unauthorized\""), "{answers:?}");
    // A wrong key, a body begun: the same.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let head = search_head("content-length: 100\r\nauthorization: Bearer not-a-known-key-0123456789");
    stream.write_all(format!("{head}{{\"query\"").as_bytes()).await.unwrap();
    let answers = responses(&read_until_closed(&mut stream).await);
    assert_eq!(answers.iter().map(|(status, _, _)| *status).collect::<Vec<_>>(), [401], "{answers:?}");
    // With the key, `Expect: 100-continue` is answered 100, then the search.
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let body = r#"{"query": "Gradle", "tenant_id": "t1"}"#;
    let head = search_head(&format!(
        "content-length: {}\r\nexpect: 100-continue\r\nauthorization: Bearer {KEY}\r\nconnection: close",
        body.len()
    ));
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut continued = [0u8; 25];
    tokio::time::timeout(HANG, stream.read_exact(&mut continued)).await.unwrap().unwrap();
    assert!(continued.starts_with(b"HTTP/1.1 100 Continue"), "{}", String::from_utf8_lossy(&continued));
    stream.write_all(body.as_bytes()).await.unwrap();
    let answers = responses(&read_until_closed(&mut stream).await);
    assert_eq!(answers.iter().map(|(status, _, _)| *status).collect::<Vec<_>>(), [200], "{answers:?}");

    // 40 connections trickling bodies without a key (more than the limit of 16), reconnecting
    // when closed: the keyed client's searches are served.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tricklers: Vec<_> = (0..40).map(|_| trickle(server.address, Arc::clone(&stop))).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let total = 20;
    let served = searches(server.address, total, Some(KEY)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for trickler in tricklers {
        let _ = trickler.await;
    }
    assert!(served * 100 >= total * 95, "{served} of {total} keyed searches served");
    server.stop().await;
}

/// A connection whose request is still receiving its body is not being worked on: at the limit it
/// makes room for a new connection as an idle one does (the one whose body began the longest ago
/// first). So connections trickling bodies (here with no keys configured) cannot lock out
/// clients from the same address.
#[tokio::test]
async fn connections_still_receiving_a_body_make_room_for_new_ones() {
    let server = Server::start(|s| s.max_connections = 16).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tricklers: Vec<_> = (0..40).map(|_| trickle(server.address, Arc::clone(&stop))).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let total = 20;
    let served = searches(server.address, total, None).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for trickler in tricklers {
        let _ = trickler.await;
    }
    assert!(served * 100 >= total * 95, "{served} of {total} searches served");
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let (_, _, metrics) = request(&mut stream, "GET", "/metrics", "").await;
    assert!(counter(&metrics, "retrieval_connections_evicted_total") >= 1, "{metrics}");
    server.stop().await;
}

/// The real binary stops on SIGTERM as a deploy needs: no new connections, the searches in
/// progress answered, exit 0 within the 10 s a container runtime waits before SIGKILL.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_finishes_the_requests_in_progress_and_exits_0() {
    use crate::common::fake_http::{FakeResponse, FakeServer};
    // A reranker that takes 2 s: every search is in progress for that long.
    let reranker = FakeServer::start(vec![
        FakeResponse::json(200, &serde_json::json!({"results": []})).with_delay(Duration::from_secs(2))
    ])
    .await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_retrieval-service"))
        .args(["serve", "--port", &port.to_string()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .env("RETR_RERANK_ENABLED", "true")
        .env("RETR_RERANK_BACKEND", "rerank_api")
        .env("RETR_RERANK_API_BASE", reranker.url())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let address: SocketAddr = ([127, 0, 0, 1], port).into();
    let started = std::time::Instant::now();
    loop {
        if let Ok(mut stream) = TcpStream::connect(address).await {
            if request(&mut stream, "GET", "/health", "").await.0 == 200 {
                break;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the service did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = reranker.request_count();
    let total = 50;
    let searches: Vec<_> = (0..total)
        .map(|i| {
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(address).await.unwrap();
                let body =
                    format!(r#"{{"query": "как подключить Android SDK через gradle {i}", "tenant_id": "demo"}}"#);
                request(&mut stream, "POST", SEARCH, &body).await.0
            })
        })
        .collect();
    // Every search waits on the reranker: all 50 are in progress.
    let waiting = tokio::time::timeout(HANG, async {
        while reranker.request_count() < before + total {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waiting.is_ok(), "only {} of {total} searches reached the reranker", reranker.request_count() - before);
    let pid = child.0.id().to_string();
    let signalled = std::time::Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut statuses = Vec::new();
    for search in searches {
        statuses.push(tokio::time::timeout(HANG, search).await.expect("an answer").unwrap());
    }
    let exit = loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            break exit;
        }
        assert!(signalled.elapsed() < Duration::from_secs(10), "still running 10 s after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(statuses, vec![200; total], "every search in progress is answered");
    assert!(exit.success(), "{exit:?}");
    // And it no longer accepts connections.
    assert!(TcpStream::connect(address).await.is_err());
}

/// A child process killed if the test ends before it exits.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
