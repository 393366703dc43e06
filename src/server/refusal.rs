//! The answer to a connection refused at `RETR_MAX_CONNECTIONS` with every connection busy:
//! 503 `overloaded` with `Retry-After` and `Connection: close`, instead of a reset.

use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Refused connections being answered 503 at once; beyond, a refused connection is closed
/// without an answer (each answer holds a file descriptor for up to `REFUSAL_TIME`).
pub(super) const MAX_REFUSALS_IN_PROGRESS: usize = 64;

/// How long answering a refused connection may take (writing the 503, reading what it sent).
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// The answer to a connection refused at the limit.
fn refusal_response() -> Vec<u8> {
    let body = r#"{"error":{"code":"overloaded","message":"too many connections in progress; retry later"}}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a refused connection 503 (when fewer than `MAX_REFUSALS_IN_PROGRESS` are being
/// answered) and closes it: what it sent is read and dropped first, so that closing does not
/// reset the connection before the client reads the answer.
pub(super) fn refuse(stream: TcpStream, refusals: &Arc<Semaphore>) {
    let Ok(permit) = Arc::clone(refusals).try_acquire_owned() else {
        drop(stream);
        return;
    };
    tokio::spawn(async move {
        let mut stream = stream;
        let _ = tokio::time::timeout(REFUSAL_TIME, async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream.write_all(&refusal_response()).await?;
            stream.shutdown().await?;
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            io::Result::Ok(())
        })
        .await;
        drop(permit);
    });
}
