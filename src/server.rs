//! The HTTP/1.1 server around `app(state)`: an accept loop with a connection limit and, per
//! connection, a header-read timeout and an idle keep-alive timeout (axum::serve has neither).
//!
//! - A request head must arrive complete within `header_read_timeout` of its first byte; a new
//!   connection must send its first head within `header_read_timeout` of being accepted
//!   (slowloris and never-speaking connections are closed).
//! - A keep-alive connection with no request in progress is closed after `keep_alive_timeout`.
//! - At `max_connections` open connections, a new connection takes the place of the one idle the
//!   longest (no request in progress: never spoken, a slow head, or keep-alive), which is closed,
//!   as nginx drains keep-alive connections when it runs out; so thousands of idle connections
//!   cannot lock real clients out until their timers expire. When every connection has a request
//!   in progress, the new one is answered 503 `overloaded` with `Retry-After: 1` and
//!   `Connection: close` and closed (at most 64 such answers at a time;
//!   beyond, the connection is closed at once). Both are counted in `/metrics` (refusals logged
//!   at most every 10 s), and the process never runs out of file descriptors.
//! - A request head with both `Content-Length` and `Transfer-Encoding` is answered 400
//!   `bad_request` and the connection closed (hyper would drop one of them and read on: the
//!   ambiguity request smuggling relies on).
//! - A request in progress is never cut by these timers (`RETR_REQUEST_TIMEOUT_SECONDS` bounds it).
//! - When `serve`'s shutdown future completes (SIGTERM or SIGINT in `main`), it stops accepting,
//!   closes idle connections and lets requests in progress finish within `shutdown_grace`
//!   (`RETR_SHUTDOWN_GRACE_SECONDS`), then returns.

use crate::config::Settings;
use crate::state::AppState;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};

mod framing;
mod refusal;

/// The largest read buffer of a connection, and so about the longest request head it accepts
/// (hyper checks it when the buffer fills; its default is ~400 KiB): 1,200 connections sending
/// unfinished 390 KB heads held 1.28 GB before, and hold nothing now (431 at once). Request bodies
/// stream through it in pieces and are not limited by it.
pub const MAX_READ_BUFFER: usize = 64 * 1024;

/// How long an expired idle connection may take to close after a graceful shutdown was asked.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How long a new connection at the limit waits for the idle connection closed for it to go.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// The open connections' activity, so that at the limit the longest-idle one can be closed.
#[derive(Default)]
struct OpenConnections {
    next_id: AtomicU64,
    /// New connections waiting for the permit of an idle connection closed for them.
    waiting: AtomicUsize,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl OpenConnections {
    fn add(&self, activity: &Arc<Activity>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::clone(activity));
        id
    }

    /// Waits (at most `EVICTION_WAIT`) for the permit of the idle connection closed for this one.
    async fn wait_for(&self, permits: &Arc<Semaphore>) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let acquired = tokio::time::timeout(EVICTION_WAIT, Arc::clone(permits).acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        acquired.ok().and_then(Result::ok)
    }

    fn remove(&self, id: u64) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    /// Asks the connection idle the longest (no request in progress) to close; false when every
    /// connection is busy.
    fn evict_longest_idle(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let longest = open
            .iter()
            .filter(|(_, activity)| activity.in_flight.load(Ordering::Acquire) == 0)
            .min_by_key(|(id, activity)| (activity.idle_since_instant(), **id))
            .map(|(id, _)| *id);
        match longest.and_then(|id| open.remove(&id)) {
            Some(activity) => {
                activity.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// The connection limits of `serve`, from the settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerLimits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) keep_alive_timeout: Duration,
    pub(crate) max_connections: usize,
    /// How long shutdown waits for requests in progress (`RETR_SHUTDOWN_GRACE_SECONDS`).
    pub(crate) shutdown_grace: Duration,
}

impl ServerLimits {
    pub(crate) fn from_settings(settings: &Settings) -> Self {
        Self {
            header_read_timeout: Duration::from_secs_f64(settings.header_read_timeout_seconds),
            keep_alive_timeout: Duration::from_secs_f64(settings.keep_alive_timeout_seconds),
            max_connections: settings.max_connections,
            shutdown_grace: Duration::from_secs_f64(settings.shutdown_grace_seconds),
        }
    }
}

/// Pending connections the kernel may queue before `accept` (capped by `net.core.somaxconn`):
/// a flood of connections must not overflow the queue, or a real client's SYN is dropped and
/// retried a second or more later.
pub(crate) const LISTEN_BACKLOG: u32 = 4096;

/// Binds `address` (host:port, resolved) with `LISTEN_BACKLOG`.
pub async fn listen(address: &str) -> io::Result<TcpListener> {
    let mut last_error = io::Error::new(io::ErrorKind::InvalidInput, format!("{address}: no address to bind"));
    for resolved in tokio::net::lookup_host(address).await? {
        let socket =
            if resolved.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        match socket.bind(resolved).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

/// Serves `app(state)` on `listener` until `shutdown` completes, then stops accepting, lets
/// requests in progress finish (at most `shutdown_grace`) and returns.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let limits = ServerLimits::from_settings(&state.settings);
    let metrics = Arc::clone(&state.metrics);
    let app = crate::app(state);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(refusal::MAX_REFUSALS_IN_PROGRESS));
    let connections = Arc::new(OpenConnections::default());
    let (close_tx, close_rx) = watch::channel(false);
    let last_refusal_log = AtomicU64::new(0);
    let started = Instant::now();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                // E.g. EMFILE: back off instead of spinning on the error.
                tracing::error!(%error, "accept error");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // At the limit, the longest-idle connection is asked to close and the new one takes its
        // permit when it does (in its own task: the accept loop never waits, so a flood of
        // connections cannot queue a real client's behind it).
        // While connections wait for a permit, a new one queues behind them (first come, first served).
        let free = if connections.waiting.load(Ordering::Acquire) == 0 {
            Arc::clone(&permits).try_acquire_owned().ok()
        } else {
            None
        };
        let permit = match free {
            Some(permit) => Some(Some(permit)),
            None if connections.evict_longest_idle() => {
                metrics.connections_evicted.inc();
                Some(None)
            }
            None => None,
        };
        let Some(permit) = permit else {
            metrics.connections_refused.inc();
            let now = started.elapsed().as_secs();
            let last = last_refusal_log.load(Ordering::Relaxed);
            if (now >= last + 10 || last == 0)
                && last_refusal_log.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok()
            {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached with every connection busy; closing new connections"
                );
            }
            refusal::refuse(stream, &refusals);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let close = close_rx.clone();
        let metrics = Arc::clone(&metrics);
        let connections = Arc::clone(&connections);
        let permits = Arc::clone(&permits);
        let refusals = Arc::clone(&refusals);
        tokio::spawn(async move {
            let permit = match permit {
                Some(permit) => permit,
                None => match connections.wait_for(&permits).await {
                    Some(permit) => permit,
                    None => {
                        metrics.connections_refused.inc();
                        refusal::refuse(stream, &refusals);
                        return;
                    }
                },
            };
            metrics.connections_open.inc();
            let activity = Arc::new(Activity::new());
            let id = connections.add(&activity);
            serve_connection(stream, app, limits, close, activity).await;
            connections.remove(id);
            metrics.connections_open.dec();
            drop(permit);
        });
    }
    drop(listener);
    let _ = close_tx.send(true);
    // Every connection holds a permit until it is closed: all permits back = all closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(limits.shutdown_grace + CLOSE_GRACE, permits.acquire_many(all)).await;
    Ok(())
}

/// Errors of one incoming connection that say nothing about the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// What the timers of one connection look at. Times are milliseconds since `epoch`, plus one
/// (0 = not set).
struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    /// When the connection last became idle (accepted, or a response was produced).
    idle_since: AtomicU64,
    /// The first byte read while idle: a request head has begun.
    head_started: AtomicU64,
    /// Whether a request was served (the idle timer is then the keep-alive timeout).
    served: AtomicUsize,
    changed: Notify,
    /// Notified when the connection must close to make room for a new one.
    evict: Notify,
    /// The bytes read while no request is in progress, up to the end of the head: the next
    /// request's head, inspected for conflicting length headers when it is dispatched.
    head: Mutex<framing::HeadCapture>,
}

impl Activity {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(1),
            head_started: AtomicU64::new(0),
            served: AtomicUsize::new(0),
            changed: Notify::new(),
            evict: Notify::new(),
            head: Mutex::default(),
        }
    }

    /// Keeps `bytes` (read while idle) until the head's blank line has been seen.
    fn capture_head(&self, bytes: &[u8]) {
        self.head.lock().unwrap_or_else(|p| p.into_inner()).capture(bytes);
    }

    /// Whether the head just dispatched carries both `Content-Length` and `Transfer-Encoding`;
    /// forgets it.
    fn take_length_conflict(&self) -> bool {
        std::mem::take(&mut *self.head.lock().unwrap_or_else(|p| p.into_inner())).has_conflicting_lengths()
    }

    /// When the connection last became idle (for choosing the longest idle).
    fn idle_since_instant(&self) -> Instant {
        self.epoch + Duration::from_millis(self.idle_since.load(Ordering::Acquire).saturating_sub(1))
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn on_read(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0
            && self.head_started.compare_exchange(0, self.now(), Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            self.changed.notify_one();
        }
    }

    fn begin_request(self: &Arc<Self>) -> RequestGuard {
        let conflicting_lengths = self.take_length_conflict();
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(0, Ordering::Release);
        self.changed.notify_one();
        RequestGuard { activity: Arc::clone(self), conflicting_lengths }
    }

    /// When the connection's current timer runs out; `None` while a request is in progress.
    fn deadline(&self, limits: &ServerLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let at = |millis: u64, timeout: Duration| self.epoch + Duration::from_millis(millis - 1) + timeout;
        match self.head_started.load(Ordering::Acquire) {
            0 if self.served.load(Ordering::Acquire) > 0 => {
                Some(at(self.idle_since.load(Ordering::Acquire), limits.keep_alive_timeout))
            }
            0 => Some(at(self.idle_since.load(Ordering::Acquire), limits.header_read_timeout)),
            started => Some(at(started, limits.header_read_timeout)),
        }
    }
}

/// Marks a request in progress on its connection until dropped (also when it is cancelled).
struct RequestGuard {
    activity: Arc<Activity>,
    /// The request's head had both `Content-Length` and `Transfer-Encoding`.
    conflicting_lengths: bool,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let activity = &self.activity;
        activity.served.store(1, Ordering::Release);
        activity.idle_since.store(activity.now(), Ordering::Release);
        activity.head_started.store(0, Ordering::Release);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
        activity.changed.notify_one();
    }
}

/// The TCP stream, telling `Activity` when bytes arrive.
struct TrackedStream {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for TrackedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.on_read();
            if self.activity.in_flight.load(Ordering::Acquire) == 0 {
                self.activity.capture_head(&buf.filled()[before..]);
            }
        }
        result
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

async fn serve_connection(
    stream: TcpStream,
    app: axum::Router,
    limits: ServerLimits,
    mut close: watch::Receiver<bool>,
    activity: Arc<Activity>,
) {
    let io = TokioIo::new(TrackedStream { inner: stream, activity: Arc::clone(&activity) });
    let service = hyper::service::service_fn({
        let activity = Arc::clone(&activity);
        move |request: hyper::Request<Incoming>| {
            let guard = activity.begin_request();
            let app = app.clone();
            async move {
                if guard.conflicting_lengths {
                    return Ok(framing::conflicting_lengths_response());
                }
                let response = tower::ServiceExt::oneshot(app, request).await;
                drop(guard);
                response
            }
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our own timers below replace hyper's (which needs a timer and counts idle time as header time).
    builder.header_read_timeout(None);
    // A connection holds at most this much unparsed input: a longer head is answered 431.
    builder.max_buf_size(MAX_READ_BUFFER);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let grace = loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            () = sleep_until(deadline) => {
                if activity.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!("closing an idle or too slow connection");
                    break CLOSE_GRACE;
                }
            }
            () = activity.changed.notified() => {}
            () = activity.evict.notified() => {
                // No request in progress: nothing to finish, so the socket is closed at once and
                // its permit goes to the new connection without delay.
                tracing::debug!("closing the longest idle connection for a new one");
                return;
            }
            _ = close.changed() => break limits.shutdown_grace,
        }
    };
    connection.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(grace, connection).await;
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
