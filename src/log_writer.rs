//! A log writer that never blocks or fails the caller: each formatted line goes into a queue
//! bounded in bytes and a thread of its own writes the queue to the sink (stderr). When the sink
//! is slow or stuck (a full pipe, a stalled collector) the queue fills and further lines are
//! dropped; when the sink fails a write (a full disk) the line is lost. Both are counted
//! (`retrieval_log_lines_dropped_total`). A request thus never waits on, or fails because of, its
//! log lines.

use prometheus_client::metrics::counter::Counter;
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of log lines the queue holds at most (a few seconds of a busy service's lines).
pub(crate) const DEFAULT_QUEUE_BYTES: usize = 8 << 20;

struct Shared {
    queued_bytes: AtomicUsize,
    capacity: usize,
    dropped: Counter,
}

/// The writing end, cloned into every event (`tracing_subscriber`'s `MakeWriter`).
#[derive(Clone)]
pub struct LossyWriter {
    lines: mpsc::Sender<Vec<u8>>,
    shared: Arc<Shared>,
}

/// Waits, when dropped, for the lines already queued to be written (at most a second), so the
/// last lines of a command are not lost at exit.
pub struct FlushOnDrop(Arc<Shared>);

impl LossyWriter {
    /// A writer over `sink` holding at most `capacity` bytes of lines; lost lines (dropped, or
    /// failed by the sink) are counted in `dropped`. The sink is written by a thread of its own.
    pub(crate) fn new(mut sink: impl Write + Send + 'static, capacity: usize, dropped: Counter) -> (Self, FlushOnDrop) {
        let shared = Arc::new(Shared { queued_bytes: AtomicUsize::new(0), capacity, dropped });
        let (lines, receiver) = mpsc::channel::<Vec<u8>>();
        let drained = Arc::clone(&shared);
        let spawned = std::thread::Builder::new().name("log-writer".into()).spawn(move || {
            for line in receiver {
                // Nothing else can be done about a failed log write: the line is lost, and counted.
                if sink.write_all(&line).is_err() {
                    drained.dropped.inc();
                }
                let _ = sink.flush();
                drained.queued_bytes.fetch_sub(line.len(), Ordering::AcqRel);
            }
        });
        if spawned.is_err() {
            // No thread: every line is dropped (and counted) rather than written inline.
            shared.queued_bytes.store(usize::MAX / 2, Ordering::Release);
        }
        (Self { lines, shared: Arc::clone(&shared) }, FlushOnDrop(shared))
    }

    /// A writer over stderr with [`DEFAULT_QUEUE_BYTES`].
    pub fn stderr(dropped: Counter) -> (Self, FlushOnDrop) {
        Self::new(io::stderr(), DEFAULT_QUEUE_BYTES, dropped)
    }

    fn enqueue(&self, bytes: &[u8]) {
        let shared = &self.shared;
        let reserved = shared.queued_bytes.fetch_add(bytes.len(), Ordering::AcqRel);
        if reserved.saturating_add(bytes.len()) > shared.capacity || self.lines.send(bytes.to_vec()).is_err() {
            shared.queued_bytes.fetch_sub(bytes.len(), Ordering::AcqRel);
            shared.dropped.inc();
        }
    }
}

impl Write for LossyWriter {
    /// Queues `bytes` (one formatted event) or drops it; never blocks, never fails.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if !bytes.is_empty() {
            self.enqueue(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LossyWriter {
    type Writer = LossyWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        let until = Instant::now() + Duration::from_secs(1);
        while self.0.queued_bytes.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A sink that blocks every write until the test releases it, like a full pipe.
    struct Stuck(Arc<Mutex<()>>);

    impl Write for Stuck {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            drop(self.0.lock().unwrap());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A sink whose every write fails, like a full disk.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("no space left on device"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::other("no space left on device"))
        }
    }

    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<u8>>>);

    impl Write for Collect {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_sink_never_blocks_the_writer_and_the_lost_lines_are_counted() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let dropped = Counter::default();
        let (mut writer, _flush) = LossyWriter::new(Stuck(Arc::clone(&gate)), 1000, dropped.clone());
        let started = Instant::now();
        for _ in 0..1000 {
            writer.write_all(&[b'x'; 99]).unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(1), "writes waited on the sink");
        // At most 1000 bytes queued, plus the one line the thread holds while the sink blocks.
        assert!(dropped.get() >= 1000 - 11, "dropped {}", dropped.get());
        drop(held);
    }

    /// A full disk: the writer still never fails, and every line the sink could not take is
    /// counted as lost.
    #[test]
    fn lines_the_sink_fails_to_write_are_counted_as_lost() {
        let dropped = Counter::default();
        let (mut writer, flush) = LossyWriter::new(Full, 1 << 20, dropped.clone());
        for _ in 0..100 {
            writer.write_all(b"a line\n").unwrap();
        }
        writer.flush().unwrap();
        drop(flush);
        assert_eq!(dropped.get(), 100);
    }

    #[test]
    fn lines_reach_the_sink_in_order() {
        let sink = Collect::default();
        let (mut writer, flush) = LossyWriter::new(sink.clone(), 1 << 20, Counter::default());
        for n in 0..100 {
            writer.write_all(format!("{n}\n").as_bytes()).unwrap();
        }
        drop(flush);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let expected: String = (0..100).map(|n| format!("{n}\n")).collect();
        assert_eq!(text, expected);
    }
}
