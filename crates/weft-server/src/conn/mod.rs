//! Connections and their limits: the accept loop [`crate::Server::serve`] runs (HTTP/1.1 on
//! hyper), a cap on open connections, and the timers that close a connection nobody uses.
//!
//! - **Header timeout** ([`Settings::header_timeout`], 10 s): a request's head must arrive whole
//!   within it, counted from the connection's accept, or from the first byte after a keep-alive
//!   wait. A client sending its headers a byte at a time (slowloris) is closed.
//! - **Idle timeout** ([`Settings::idle_timeout`], 60 s): a connection with no request in flight
//!   is closed after it. A connection is busy from a request's complete head until its response
//!   body has ended, so a stream that runs for hours (SSE with its keep-alive comments, or a
//!   quiet NDJSON stream) is never idle, and no timer here cuts a handler that takes long.
//! - **Body timeout** ([`Settings::body_timeout`], 60 s): a request body must arrive whole
//!   within it, from the request's start; if not, the answer is `408 request_timeout` and the
//!   connection closes (`body_timeout.rs`, a layer of the router). Only reading the body counts.
//! - **Write timeout** ([`Settings::write_timeout`], 60 s): a connection whose writes make no
//!   progress for this long (the socket is full: its client takes no data) is closed, as
//!   nginx's `send_timeout` does. Only a stall counts: a stream to a client that reads, however
//!   slowly, makes progress and is never cut. On Linux the kernel keeps at most
//!   `NOTSENT_LOWAT` (16 KiB) unsent bytes per connection, so progress shows as soon as the
//!   client reads, not once a send buffer of megabytes has drained by half. Without this timer a
//!   client that never read a stream kept its connection busy, and not replaceable, for ever.
//! - **Cap** ([`Settings::max_connections`], 16,384, lowered to the open-file limit minus
//!   [`FD_RESERVE`]): at the cap a new connection takes the place of the connection waiting the
//!   longest for its client: for a request (an idle keep-alive connection, or one that has not
//!   finished its head), or to take data (its writes stalled), which is closed. So a flood of
//!   idle, slow or non-reading connections cannot keep anyone out: a client's new connection is
//!   the last the flood would close, and its request is answered. When every connection has a
//!   request in flight and its client reading, the new connection is closed at once (accepted
//!   and dropped: the client sees it closed).
//!
//! Closing an idle connection is what HTTP/1.1 allows a server at any time (clients retry on a
//! new one). A connection that upgraded to a WebSocket counts against the cap until it closes;
//! while its socket carries no stream (or its client takes no data) it may be replaced at the
//! cap like an idle connection: [`ConnHandle`] lets the socket say so and learn that it was
//! replaced, and the WebSocket closes itself (with a close frame) when that happens. Its other
//! limits are the WebSocket endpoint's (`ws_limits`).
//!
//! Only HTTP/1.1 is served. Before, HTTP/2 with prior knowledge (h2c) was answered too, by a
//! dependency's feature rather than by choice; nothing used it (browsers speak HTTP/2 only over
//! TLS), and its streams would need limits of their own.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::shards::Shards;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::AppState;
use crate::config::Settings;

mod tracked;

pub(crate) use tracked::ConnHandle;
use tracked::{InFlight, TrackedBody, TrackedIo};

/// File descriptors kept out of the connection cap: the store, tool processes, the listener.
pub const FD_RESERVE: usize = 256;

/// The fewest connections the cap allows, whatever the open-file limit says.
const MIN_CONNECTIONS: usize = 16;

/// The unsent bytes the kernel keeps per connection (`TCP_NOTSENT_LOWAT`, Linux): past them a
/// write waits, and it goes on as soon as the client has taken some. Without it a write waits
/// until the send buffer (grown to megabytes) has drained by half, which a client that reads
/// slowly may take longer than the write timeout to do. 16 KiB, as is common for HTTP servers.
#[cfg(any(target_os = "linux", target_os = "android"))]
const NOTSENT_LOWAT: u32 = 16 * 1024;

/// Why the server closed a connection itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// Its request head did not arrive in time.
    HeaderTimeout,
    /// It waited for a request longer than the idle timeout.
    IdleTimeout,
    /// Its client took no data for longer than the write timeout.
    WriteTimeout,
    /// A new connection took its place at the cap.
    Evicted,
    /// It came at the cap with every connection busy.
    Refused,
}

impl Closed {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::HeaderTimeout => "header_timeout",
            Self::IdleTimeout => "idle_timeout",
            Self::WriteTimeout => "write_timeout",
            Self::Evicted => "evicted",
            Self::Refused => "refused",
        }
    }
}

/// The timers of a connection.
#[derive(Debug, Clone, Copy)]
struct Timers {
    header: Option<Duration>,
    idle: Option<Duration>,
    write: Option<Duration>,
}

pub(crate) fn nonzero(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}

/// The cap on open connections: `configured` (zero: none), lowered to the open-file limit
/// minus [`FD_RESERVE`] when that is smaller.
pub(crate) fn connection_cap(configured: usize) -> usize {
    let Some(room) = fd_room() else {
        return if configured == 0 { usize::MAX } else { configured };
    };
    if configured == 0 {
        return room;
    }
    if configured > room {
        tracing::warn!(
            configured,
            cap = room,
            "limits.max_connections is lowered to the open-file limit minus {FD_RESERVE}; raise \
             the limit (ulimit -n) for more"
        );
        return room;
    }
    configured
}

/// How many connections the open-file limit leaves room for.
fn fd_room() -> Option<usize> {
    #[cfg(unix)]
    {
        let (soft, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()?;
        let soft = usize::try_from(soft).unwrap_or(usize::MAX);
        Some(soft.saturating_sub(FD_RESERVE).max(MIN_CONNECTIONS))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No request in flight since `since` (its accept, or its last response's end); `head`:
    /// when the next request's head began (a new connection's starts at its accept).
    Waiting { since: Instant, head: Option<Instant> },
    /// This many requests in flight (head read, response body not ended).
    Busy(usize),
    /// Handed over to a WebSocket (or another protocol): not HTTP's any more. `idle`: it holds
    /// nothing (a WebSocket with no stream open).
    Upgraded { idle: bool },
    /// Closed to make room for a new connection; its slot was handed over.
    Evicted,
    /// Gone.
    Released,
}

/// The open connections: how many hold a slot, and those waiting for their client (for a
/// request, or to take data) in the order they began to wait (the first is the one a new
/// connection replaces at the cap).
pub(crate) struct Connections {
    cap: usize,
    timers: Timers,
    state: Arc<AppState>,
    inner: Mutex<Inner>,
}

struct Inner {
    open: usize,
    next_stamp: u64,
    waiting: BTreeMap<u64, Arc<Conn>>,
}

/// One connection's state, shared by its IO (which holds its slot), its requests and its
/// watchdog.
pub(crate) struct Conn {
    connections: Arc<Connections>,
    state: Mutex<ConnState>,
    /// Set while waiting with no byte of a next request: the read path looks at this flag, not
    /// the lock.
    awaits_head: AtomicBool,
    /// Wakes the watchdog: the phase changed.
    wake: tokio::sync::Notify,
}

/// A connection's state, under its lock.
struct ConnState {
    phase: Phase,
    /// Since when its writes have found the socket full with no progress (the client takes no
    /// data).
    stalled: Option<Instant>,
    /// Its place in the order of connections waiting for their client, while it is one
    /// ([`ConnState::waits_for_client`]).
    stamp: Option<u64>,
}

impl ConnState {
    /// Whether the connection waits for its client, so that a new connection may take its place
    /// at the cap: for a request, for its client to take data, or, upgraded, for anything to
    /// do.
    fn waits_for_client(&self) -> bool {
        match self.phase {
            Phase::Waiting { .. } => true,
            Phase::Busy(_) => self.stalled.is_some(),
            Phase::Upgraded { idle } => idle || self.stalled.is_some(),
            Phase::Evicted | Phase::Released => false,
        }
    }
}

impl Connections {
    fn new(settings: &Settings, state: Arc<AppState>) -> Arc<Self> {
        Arc::new(Self {
            cap: connection_cap(settings.max_connections),
            timers: Timers {
                header: nonzero(settings.header_timeout),
                idle: nonzero(settings.idle_timeout),
                write: nonzero(settings.write_timeout),
            },
            state,
            inner: Mutex::new(Inner { open: 0, next_stamp: 0, waiting: BTreeMap::new() }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection: a free one, or the slot of the connection waiting the
    /// longest for its client, which is closed. `None`: every connection is busy.
    fn admit(self: &Arc<Self>) -> Option<Arc<Conn>> {
        loop {
            let (stamp, victim) = {
                let mut inner = self.lock();
                if inner.open < self.cap {
                    inner.open += 1;
                    self.state.metrics.connection_opened();
                    return Some(self.register(&mut inner));
                }
                inner.waiting.pop_first()?
            };
            if victim.evict(stamp) {
                self.state.metrics.connection_closed(Closed::Evicted);
                return Some(self.register(&mut self.lock()));
            }
        }
    }

    /// A new connection holding a slot already counted, waiting for its first head.
    fn register(self: &Arc<Self>, inner: &mut Inner) -> Arc<Conn> {
        let now = Instant::now();
        let stamp = inner.next_stamp;
        inner.next_stamp += 1;
        let conn = Arc::new(Conn {
            connections: Arc::clone(self),
            state: Mutex::new(ConnState {
                phase: Phase::Waiting { since: now, head: Some(now) },
                stalled: None,
                stamp: Some(stamp),
            }),
            awaits_head: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        });
        inner.waiting.insert(stamp, Arc::clone(&conn));
        conn
    }
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts the connection into the order of those waiting for their client, or takes it out,
    /// after `state` changed. A connection that begins to wait goes last.
    fn settle(self: &Arc<Self>, state: &mut ConnState) {
        match (state.waits_for_client(), state.stamp) {
            (true, None) => {
                let mut inner = self.connections.lock();
                let stamp = inner.next_stamp;
                inner.next_stamp += 1;
                inner.waiting.insert(stamp, Arc::clone(self));
                state.stamp = Some(stamp);
            }
            (false, Some(stamp)) => {
                self.connections.lock().waiting.remove(&stamp);
                state.stamp = None;
            }
            _ => {}
        }
    }

    /// Closes this connection for a new one if it still waits where `stamp` says. It stops
    /// counting as stalled: the gauge counts connections that hold a slot.
    fn evict(&self, stamp: u64) -> bool {
        let mut state = self.lock();
        if state.stamp != Some(stamp) {
            return false;
        }
        state.stamp = None;
        state.phase = Phase::Evicted;
        self.clear_stall(&mut state);
        drop(state);
        self.wake.notify_waiters();
        true
    }

    /// Bytes came in: while waiting, the next request's head has begun.
    fn bytes_read(&self) {
        if !self.awaits_head.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut state = self.lock();
        if let Phase::Waiting { head: head @ None, .. } = &mut state.phase {
            *head = Some(Instant::now());
            drop(state);
            self.wake.notify_waiters();
        }
    }

    /// A request's head was read: the connection is busy until its response body ends.
    fn begin_request(self: &Arc<Self>) {
        let mut state = self.lock();
        match state.phase {
            Phase::Waiting { .. } => {
                state.phase = Phase::Busy(1);
                self.awaits_head.store(false, Ordering::Release);
            }
            Phase::Busy(n) => state.phase = Phase::Busy(n + 1),
            Phase::Upgraded { .. } | Phase::Evicted | Phase::Released => {}
        }
        self.settle(&mut state);
        drop(state);
        self.wake.notify_waiters();
    }

    /// A response body ended (or was dropped).
    fn end_request(self: &Arc<Self>) {
        let mut state = self.lock();
        match state.phase {
            Phase::Busy(n) if n > 1 => state.phase = Phase::Busy(n - 1),
            Phase::Busy(_) => {
                state.phase = Phase::Waiting { since: Instant::now(), head: None };
                self.awaits_head.store(true, Ordering::Release);
                self.settle(&mut state);
                drop(state);
                self.wake.notify_waiters();
            }
            Phase::Waiting { .. } | Phase::Upgraded { .. } | Phase::Evicted | Phase::Released => {}
        }
    }

    /// The connection switched protocols: its life is the new protocol's, holding nothing yet.
    fn upgraded(self: &Arc<Self>) {
        let mut state = self.lock();
        if !matches!(state.phase, Phase::Evicted | Phase::Released) {
            state.phase = Phase::Upgraded { idle: true };
        }
        self.settle(&mut state);
    }

    /// An upgraded connection holds nothing (`idle`), or something again. `false`: it was
    /// replaced at the cap, and must close.
    fn set_upgrade_idle(self: &Arc<Self>, idle: bool) -> bool {
        let mut state = self.lock();
        match &mut state.phase {
            Phase::Upgraded { idle: current } => *current = idle,
            Phase::Evicted | Phase::Released => return false,
            Phase::Waiting { .. } | Phase::Busy(_) => {}
        }
        self.settle(&mut state);
        true
    }

    /// Completes once the connection was replaced at the cap.
    async fn evicted(&self) {
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if matches!(self.lock().phase, Phase::Evicted) {
                return;
            }
            woken.await;
        }
    }

    /// A write found the socket full: the client takes no data, until a write makes progress.
    fn write_stalled(self: &Arc<Self>) {
        let mut state = self.lock();
        if state.stalled.is_some() || matches!(state.phase, Phase::Evicted | Phase::Released) {
            return;
        }
        state.stalled = Some(Instant::now());
        self.settle(&mut state);
        self.connections.state.metrics.connection_stalled(1);
        drop(state);
        self.wake.notify_waiters();
    }

    /// A write made progress after a stall.
    fn write_progressed(self: &Arc<Self>) {
        let mut state = self.lock();
        if self.clear_stall(&mut state) {
            self.settle(&mut state);
        }
    }

    /// Ends a stall, if there is one (`true`), and counts it out of the gauge.
    fn clear_stall(&self, state: &mut ConnState) -> bool {
        let stalled = state.stalled.take().is_some();
        if stalled {
            self.connections.state.metrics.connection_stalled(-1);
        }
        stalled
    }

    /// The socket is gone: its slot is free (unless it was handed over).
    fn release(&self) {
        let mut state = self.lock();
        let previous = std::mem::replace(&mut state.phase, Phase::Released);
        let stamp = state.stamp.take();
        self.clear_stall(&mut state);
        drop(state);
        let mut inner = self.connections.lock();
        if let Some(stamp) = stamp {
            inner.waiting.remove(&stamp);
        }
        if matches!(previous, Phase::Evicted | Phase::Released) {
            return;
        }
        inner.open = inner.open.saturating_sub(1);
        // Under the lock, as `admit` counts its opening: the gauge never shows a slot twice.
        self.connections.state.metrics.connection_released();
    }

    /// When the connection must close, and why; `Err`: it must close now.
    fn deadline(&self) -> Result<Option<(Instant, Closed)>, Closed> {
        let timers = self.connections.timers;
        let state = self.lock();
        let waiting = match state.phase {
            Phase::Waiting { head: Some(head), .. } => {
                timers.header.map(|t| (head + t, Closed::HeaderTimeout))
            }
            Phase::Waiting { since, head: None } => {
                timers.idle.map(|t| (since + t, Closed::IdleTimeout))
            }
            Phase::Busy(_) => None,
            Phase::Evicted => return Err(Closed::Evicted),
            Phase::Upgraded { .. } | Phase::Released => return Ok(None),
        };
        // A response the client takes no data of, whether or not a request is in flight (hyper
        // may hold a next head unread until the write is flushed).
        let stalled =
            state.stalled.zip(timers.write).map(|(since, t)| (since + t, Closed::WriteTimeout));
        Ok(match (waiting, stalled) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        })
    }

    /// Completes when the connection must be closed, with the reason.
    async fn watchdog(&self) -> Closed {
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            match self.deadline() {
                Err(reason) => return reason,
                Ok(Some((at, reason))) if at <= Instant::now() => return reason,
                Ok(Some((at, _))) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = woken => {}
                    }
                }
                Ok(None) => woken.await,
            }
        }
    }
}

/// The router as one connection's hyper service. Every connection gets a clone of the router
/// (a reference count, as `into_make_service` gave), and its requests the client's address
/// (`ConnectInfo<SocketAddr>`).
#[derive(Clone)]
struct ConnService {
    router: Router,
    conn: Arc<Conn>,
    remote: SocketAddr,
}

impl hyper::service::Service<axum::http::Request<Incoming>> for ConnService {
    type Response = axum::http::Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, mut request: axum::http::Request<Incoming>) -> Self::Future {
        self.conn.begin_request();
        let in_flight = InFlight(Arc::clone(&self.conn));
        request.extensions_mut().insert(ConnectInfo(self.remote));
        request.extensions_mut().insert(ConnHandle(Arc::clone(&self.conn)));
        let router = self.router.clone();
        Box::pin(async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                in_flight.0.upgraded();
            }
            Ok(response.map(|body| TrackedBody { body, _in_flight: in_flight }))
        })
    }
}

/// Serves one connection until it ends, its watchdog closes it, or the shutdown has it finish
/// its request in flight.
async fn serve_connection(
    stream: TcpStream,
    remote: SocketAddr,
    conn: Arc<Conn>,
    router: Router,
    shutdown: CancellationToken,
) {
    let service = ConnService { router, conn: Arc::clone(&conn), remote };
    let io = TokioIo::new(TrackedIo { stream, conn: Arc::clone(&conn), stalled: false });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The timers are this module's: hyper's header timer would also count the idle wait.
    builder.header_read_timeout(None);
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    let watchdog = conn.watchdog();
    tokio::pin!(watchdog);
    let mut finishing = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::trace!(%error, "connection ended with an error");
                }
                return;
            }
            reason = &mut watchdog => {
                tracing::debug!(%remote, reason = reason.as_str(), "closing a connection");
                if reason != Closed::Evicted {
                    conn.connections.state.metrics.connection_closed(reason);
                }
                // Dropping the connection closes the socket.
                return;
            }
            () = shutdown.cancelled(), if !finishing => {
                finishing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Accepts connections until `signal` completes, serving each under the limits; then stops
/// accepting, has every connection finish the request it is serving (streams end as
/// `closing` is cancelled), and waits for them, `grace` at most.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    state: Arc<AppState>,
    shards: &Shards,
    signal: impl Future<Output = ()> + Send + 'static,
    closing: CancellationToken,
) {
    let connections = Connections::new(&state.settings, Arc::clone(&state));
    tracing::debug!(cap = connections.cap, "connection cap");
    let shutdown = CancellationToken::new();
    let mut tasks = JoinSet::new();
    tokio::pin!(signal);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut signal => break,
        };
        while tasks.try_join_next().is_some() {}
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                // Out of file descriptors, most likely: wait rather than spin.
                tracing::error!(%error, "accepting a connection failed; retrying in 1 s");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    () = &mut signal => break,
                }
            }
        };
        let Some(conn) = connections.admit() else {
            state.metrics.connection_closed(Closed::Refused);
            tracing::debug!(%remote, "connection refused: every connection is busy");
            drop(stream);
            continue;
        };
        // Every event is written as soon as it is rendered: no Nagle delay behind an
        // unacknowledged one (a stream writes many small chunks).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY could not be set");
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Err(error) = socket2::SockRef::from(&stream).set_tcp_notsent_lowat(NOTSENT_LOWAT) {
            tracing::debug!(%error, "TCP_NOTSENT_LOWAT could not be set");
        }
        let (router, shutdown) = (router.clone(), shutdown.clone());
        let Some(shard) = shards.next() else {
            tasks.spawn(serve_connection(stream, remote, conn, router, shutdown));
            continue;
        };
        // Served on a connection thread, its socket registered with that thread's event loop.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%error, %remote, "a connection could not be handed to its thread");
                continue;
            }
        };
        tasks.spawn_on(
            async move {
                match TcpStream::from_std(stream) {
                    Ok(stream) => serve_connection(stream, remote, conn, router, shutdown).await,
                    Err(error) => {
                        tracing::debug!(%error, %remote, "a connection could not be registered");
                    }
                }
            },
            shard,
        );
    }
    drop(listener);
    tracing::info!("shutting down: no new connections; ending streams");
    closing.cancel();
    shutdown.cancel();
    let grace = state.settings.shutdown_grace;
    let finished =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(connections = tasks.len(), "closing connections still open after the grace");
        tasks.shutdown().await;
    }
}

fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
