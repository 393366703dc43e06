//! The HTTP/1.1 server around `app(state)`: an accept loop with a connection limit and, per
//! connection, a header-read timeout, an idle keep-alive timeout (axum::serve has neither) and
//! the request framing followed byte by byte.
//!
//! - A request head must arrive complete within `header_read_timeout` of its first byte; a new
//!   connection must send its first head within `header_read_timeout` of being accepted
//!   (slowloris and never-speaking connections are closed).
//! - A keep-alive connection with no request in progress is closed after `keep_alive_timeout`.
//! - At `max_connections` open connections, a new connection takes the place of the one idle the
//!   longest, which is closed, as nginx drains keep-alive connections when it runs out. Idle is
//!   no request being worked on: never spoken, a slow head, keep-alive, or a request whose body
//!   is still arriving (idle since its head arrived). So thousands of idle connections, or
//!   connections trickling bodies, cannot lock real clients out until their timers expire. When
//!   every connection has a request being worked on, the new one is answered 503 `overloaded`
//!   with `Retry-After: 1` and `Connection: close` and closed (at most 64 such answers at a time;
//!   beyond, the connection is closed at once). Both are counted in `/metrics` (refusals logged
//!   at most every 10 s), and the process never runs out of file descriptors.
//! - Every byte a connection sends goes through its `framing::Framing` before hyper sees it: each
//!   request head is held until complete and checked, its body followed to its end, so every
//!   request of the connection is checked (pipelined or keep-alive). A head with both
//!   `Content-Length` and `Transfer-Encoding` (400), a `Transfer-Encoding` other than exactly
//!   `chunked` (501), `Transfer-Encoding` in HTTP/1.0 or a bad `Content-Length` (400), or a
//!   head over `MAX_READ_BUFFER` (431, or 414 for the request line) never reaches hyper: once
//!   the requests before it are answered, the server answers it with a JSON error and closes
//!   the connection. A request hyper parses where the framing saw no checked head is answered
//!   400 and the connection closed.
//! - Credentials are checked from the head before a body is read (`api::admission`), and their
//!   refusal closes the connection.
//! - A request in progress is never cut by these timers (`RETR_REQUEST_TIMEOUT_SECONDS` bounds it).
//! - When `serve`'s shutdown future completes (SIGTERM or SIGINT in `main`), it stops accepting,
//!   closes idle connections and lets requests in progress finish within `shutdown_grace`
//!   (`RETR_SHUTDOWN_GRACE_SECONDS`), then returns.

use crate::config::Settings;
use crate::AppState;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};

mod framing;
mod refusal;

/// The largest read buffer of a connection, and so about the longest request head it accepts
/// (hyper checks it when the buffer fills; its default is ~400 KiB): connections that send huge
/// heads and never finish them are answered 431 at once instead of holding memory. Request bodies
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

    /// Asks the connection idle the longest to close: no request in progress (idle since the
    /// last response or since it was accepted), or a request still receiving its body (since its
    /// head arrived). False when every connection has a request being worked on.
    fn evict_longest_idle(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let longest = open
            .iter()
            .filter_map(|(id, activity)| activity.evictable_since().map(|since| (since, *id)))
            .min()
            .map(|(_, id)| id);
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
    /// When the body still arriving began (its head was read); 0 when no body is arriving.
    body_since: AtomicU64,
    /// Whether a request was served (the idle timer is then the keep-alive timeout).
    served: AtomicUsize,
    /// Request heads the framing handed to hyper, and requests hyper dispatched.
    heads: AtomicU64,
    dispatched: AtomicU64,
    /// The framing refused a head: once the requests before it are answered, the server answers
    /// it and closes.
    refused: AtomicBool,
    changed: Notify,
    /// Notified when the connection must close to make room for a new one.
    evict: Notify,
}

impl Activity {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(1),
            head_started: AtomicU64::new(0),
            body_since: AtomicU64::new(0),
            served: AtomicUsize::new(0),
            heads: AtomicU64::new(0),
            dispatched: AtomicU64::new(0),
            refused: AtomicBool::new(false),
            changed: Notify::new(),
            evict: Notify::new(),
        }
    }

    fn instant(&self, millis: u64) -> Instant {
        self.epoch + Duration::from_millis(millis.saturating_sub(1))
    }

    /// Since when the connection may be closed for a new one: idle (no request in progress), or
    /// its request still receiving its body; `None` while a request is being worked on.
    fn evictable_since(&self) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) == 0 {
            return Some(self.instant(self.idle_since.load(Ordering::Acquire)));
        }
        match self.body_since.load(Ordering::Acquire) {
            0 => None,
            since => Some(self.instant(since)),
        }
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

    /// Takes what the framing learned from the bytes just read.
    fn on_framing(&self, framing: &framing::Framing) {
        self.heads.store(framing.heads(), Ordering::Release);
        if !framing.receiving_body() {
            self.body_since.store(0, Ordering::Release);
        } else if self.body_since.load(Ordering::Acquire) == 0 {
            self.body_since.store(self.now(), Ordering::Release);
        }
        if framing.refusal().is_some() && !self.refused.swap(true, Ordering::AcqRel) {
            self.changed.notify_one();
        }
    }

    /// Whether a refused head is next: every request before it was dispatched and answered.
    fn refusal_due(&self) -> bool {
        self.refused.load(Ordering::Acquire)
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.dispatched.load(Ordering::Acquire) == self.heads.load(Ordering::Acquire)
    }

    fn begin_request(self: &Arc<Self>) -> RequestGuard {
        // hyper parses only what the framing handed on: a request beyond the heads it saw means
        // the two no longer agree on where requests begin, and it is not served.
        let dispatched = self.dispatched.fetch_add(1, Ordering::AcqRel) + 1;
        let unframed = dispatched > self.heads.load(Ordering::Acquire);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(0, Ordering::Release);
        self.changed.notify_one();
        RequestGuard { activity: Arc::clone(self), unframed }
    }

    /// When the connection's current timer runs out; `None` while a request is in progress.
    fn deadline(&self, limits: &ServerLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let at = |millis: u64, timeout: Duration| self.instant(millis) + timeout;
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
    /// hyper parsed a request the framing did not hand on as a checked head.
    unframed: bool,
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

/// The TCP stream, read through the connection's `Framing`: hyper reads only the bytes it hands
/// on, and `Activity` hears when bytes arrive.
struct TrackedStream {
    inner: TcpStream,
    activity: Arc<Activity>,
    framing: framing::Framing,
    /// Bytes handed on that hyper has not read yet (from `handed_at`).
    handed: Vec<u8>,
    handed_at: usize,
    eof: bool,
}

/// How much a connection reads from its socket at a time.
const READ_CHUNK: usize = 8 * 1024;

impl TrackedStream {
    fn new(inner: TcpStream, activity: Arc<Activity>) -> Self {
        Self {
            inner,
            activity,
            framing: framing::Framing::new(MAX_READ_BUFFER),
            handed: Vec::new(),
            handed_at: 0,
            eof: false,
        }
    }
}

impl AsyncRead for TrackedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.handed_at < this.handed.len() {
                let n = buf.remaining().min(this.handed.len() - this.handed_at);
                buf.put_slice(&this.handed[this.handed_at..this.handed_at + n]);
                this.handed_at += n;
                if this.handed_at == this.handed.len() {
                    // A long head's buffer is not kept once hyper has it.
                    if this.handed.capacity() > 2 * READ_CHUNK {
                        this.handed = Vec::new();
                    } else {
                        this.handed.clear();
                    }
                    this.handed_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.framing.refusal().is_some() {
                // Nothing more for hyper: the connection answers the refused head once hyper is done.
                return Poll::Pending;
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; READ_CHUNK];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    this.eof = true;
                    this.framing.finish(&mut this.handed);
                }
                Poll::Ready(Ok(())) => {
                    this.activity.on_read();
                    this.framing.feed(read.filled(), &mut this.handed);
                    this.activity.on_framing(&this.framing);
                }
                other => return other,
            }
        }
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

/// The answer to a request hyper parsed where the framing saw no checked head.
fn unframed_response() -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = crate::error::ApiError::new(
        crate::error::ErrorCode::BadRequest,
        "the request's framing could not be followed; send it on a new connection",
    )
    .into_response();
    response.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    response
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send>>;

async fn serve_connection(
    stream: TcpStream,
    app: axum::Router,
    limits: ServerLimits,
    mut close: watch::Receiver<bool>,
    activity: Arc<Activity>,
) {
    let io = TokioIo::new(TrackedStream::new(stream, Arc::clone(&activity)));
    let service = hyper::service::service_fn({
        let activity = Arc::clone(&activity);
        move |request: hyper::Request<Incoming>| -> ResponseFuture {
            let guard = activity.begin_request();
            let app = app.clone();
            Box::pin(async move {
                if guard.unframed {
                    return Ok(unframed_response());
                }
                let response = tower::ServiceExt::oneshot(app, request).await;
                drop(guard);
                response
            })
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our own timers below replace hyper's (which needs a timer and counts idle time as header time).
    builder.header_read_timeout(None);
    // A connection holds at most this much unparsed input: a longer head is answered 431.
    builder.max_buf_size(MAX_READ_BUFFER);
    let mut connection = builder.serve_connection(io, service);
    // Polled without shutting the socket down, so that it can be taken back to answer a refused head.
    macro_rules! run {
        () => {
            std::future::poll_fn(|cx| connection.poll_without_shutdown(cx))
        };
    }
    let grace = loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            result = run!() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                    return;
                }
                break None;
            }
            () = sleep_until(deadline) => {
                if activity.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!("closing an idle or too slow connection");
                    break Some(CLOSE_GRACE);
                }
            }
            () = activity.changed.notified() => {
                if activity.refusal_due() {
                    break Some(CLOSE_GRACE);
                }
            }
            () = activity.evict.notified() => {
                // Nothing is being worked on (idle, or a body still arriving): the socket is closed
                // at once and its permit goes to the new connection without delay. A request whose
                // body was cut off this way fails to read it and is never handled.
                tracing::debug!("closing the longest idle connection for a new one");
                return;
            }
            _ = close.changed() => break Some(limits.shutdown_grace),
        }
    };
    if let Some(grace) = grace {
        // Requests in progress finish, no new one starts; an idle connection closes at once.
        Pin::new(&mut connection).graceful_shutdown();
        match tokio::time::timeout(grace, run!()).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
    let stream = connection.into_parts().io.into_inner();
    match stream.framing.refusal() {
        Some(refusal) if activity.refusal_due() => framing::answer(stream.inner, refusal).await,
        _ => {
            let mut inner = stream.inner;
            let _ = tokio::time::timeout(CLOSE_GRACE, tokio::io::AsyncWriteExt::shutdown(&mut inner)).await;
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
