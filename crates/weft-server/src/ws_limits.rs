//! The WebSocket's limits: sockets are capped per key and closed when idle, their messages are
//! requests, and what they send waits in a bounded queue.
//!
//! - Sockets open at once are capped per API key ([`Settings::ws_sockets_per_key`]): one more
//!   is refused at the upgrade with `429 too_many_sockets`.
//! - A socket with no stream open for [`Settings::idle_timeout`] (from its opening or its last
//!   stream's end) is closed with code 1000 and a reason, as an idle keep-alive connection is;
//!   a socket carrying a stream is never idle, however quiet the stream. At the connection cap
//!   a socket with no stream may be replaced by a new connection, as an idle one is: it is
//!   closed with code 1013 (try again later) and a reason (see `conn`).
//! - Every `execute`, `attach` and `abort` message (each reaches the store) takes a token from
//!   its key's rate limit, as an HTTP request does (`limits.requests_per_minute`,
//!   `limits.burst`): past the burst, the answer is `{"error":{"code":"rate_limited"}}`.
//! - Streams open at once are capped per socket ([`Settings::ws_streams_per_socket`]) and per
//!   API key over all its sockets ([`Settings::ws_streams_per_key`]): one more is refused with
//!   `too_many_streams` before any run starts. A stream ends with its `end` message.
//! - What the server sends waits in a queue of at most [`Settings::ws_send_queue`] bytes, and
//!   streams wait while it is full, so a socket holds at most the queue and one event per
//!   stream. A socket that takes nothing for [`Settings::ws_send_timeout`] (the client does not
//!   read) is closed with code 1008 (policy violation) and a reason; its streams stop and what
//!   waited is dropped (runs go on; a client re-attaches with `after`).
//!
//! [`Settings::ws_sockets_per_key`]: crate::Settings::ws_sockets_per_key
//! [`Settings::idle_timeout`]: crate::Settings::idle_timeout
//! [`Settings::ws_streams_per_socket`]: crate::Settings::ws_streams_per_socket
//! [`Settings::ws_streams_per_key`]: crate::Settings::ws_streams_per_key
//! [`Settings::ws_send_queue`]: crate::Settings::ws_send_queue
//! [`Settings::ws_send_timeout`]: crate::Settings::ws_send_timeout

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use axum::http::StatusCode;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::error::ApiError;

/// The close code of a socket that does not read (RFC 6455 §7.4.1: policy violation).
pub(crate) const CLOSE_NOT_READING: u16 = 1008;

/// The close code of a socket closed for being idle (RFC 6455 §7.4.1: normal closure).
pub(crate) const CLOSE_IDLE: u16 = 1000;

/// The close code of a socket replaced at the connection cap (IANA's registry: try again
/// later).
pub(crate) const CLOSE_AT_CAP: u16 = 1013;

/// How long a closing socket's last frames (and its close frame) may take to leave.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// How long a socket replaced at the connection cap may take to close: its slot is another
/// connection's already.
pub(crate) const EVICTED_GRACE: Duration = Duration::from_secs(1);

/// A close frame: `code`, and `reason` cut to the 123 bytes a control frame leaves it (RFC 6455
/// §5.5: 125 bytes of payload, the code's two included; a longer one is a protocol error).
fn close_frame(code: u16, mut reason: String) -> CloseFrame {
    const MOST: usize = 123;
    if reason.len() > MOST {
        let mut end = MOST;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    CloseFrame { code, reason: reason.into() }
}

/// Counts per API key (rate-limit bucket): WebSocket streams, or sockets.
#[derive(Default)]
pub(crate) struct PerKey(Mutex<HashMap<String, usize>>);

impl PerKey {
    /// Counts one more for `key`, unless it has `most` already (0: no limit).
    fn take(&self, key: &str, most: usize) -> bool {
        let mut keys = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = keys.entry(key.to_string()).or_insert(0);
        if most > 0 && *count >= most {
            return false;
        }
        *count += 1;
        true
    }

    /// Counts one less for `key`.
    fn give(&self, key: &str) {
        let mut keys = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = keys.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                keys.remove(key);
            }
        }
    }
}

/// One open socket, counted against its key while it lives.
pub(crate) struct SocketSlot {
    state: Arc<AppState>,
    key: String,
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        self.state.ws_sockets.give(&self.key);
    }
}

/// A slot for one more socket of the key `key`, taken at the upgrade (and given back if the
/// upgrade never completes).
pub(crate) fn open_socket(state: &Arc<AppState>, key: &str) -> Result<SocketSlot, ApiError> {
    let most = state.settings.ws_sockets_per_key;
    if !state.ws_sockets.take(key, most) {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_sockets",
            format!(
                "this API key has {most} WebSockets open already, the most it may \
                 (limits.ws_sockets_per_key); close one first"
            ),
        ));
    }
    Ok(SocketSlot { state: Arc::clone(state), key: key.to_string() })
}

/// The streams a socket carries: how many are open, and a signal when one ends.
#[derive(Default)]
pub(crate) struct SocketStreams {
    open: AtomicUsize,
    ended: tokio::sync::Notify,
}

impl SocketStreams {
    /// How many streams are open.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Completes when a stream has ended since the last call (or ends).
    pub(crate) async fn ended(&self) {
        self.ended.notified().await;
    }
}

/// One open stream: counted against its socket and its key while it lives.
pub(crate) struct StreamSlot {
    state: Arc<AppState>,
    key: String,
    socket: Arc<SocketStreams>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.socket.open.fetch_sub(1, Ordering::AcqRel);
        self.socket.ended.notify_one();
        self.state.ws_streams.give(&self.key);
    }
}

fn too_many_streams(message: String) -> ApiError {
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message)
}

/// A slot for one more stream on `socket` for the key `key`.
pub(crate) fn open_stream(
    state: &Arc<AppState>,
    key: &str,
    socket: &Arc<SocketStreams>,
) -> Result<StreamSlot, ApiError> {
    let (per_socket, per_key) =
        (state.settings.ws_streams_per_socket, state.settings.ws_streams_per_key);
    if per_socket > 0 && socket.open() >= per_socket {
        return Err(too_many_streams(format!(
            "this WebSocket carries {per_socket} streams already, the most it may \
             (limits.ws_streams_per_socket); wait for one to end"
        )));
    }
    if !state.ws_streams.take(key, per_key) {
        return Err(too_many_streams(format!(
            "this API key has {per_key} WebSocket streams open already, the most it may \
             (limits.ws_streams_per_key); wait for one to end"
        )));
    }
    socket.open.fetch_add(1, Ordering::AcqRel);
    Ok(StreamSlot { state: Arc::clone(state), key: key.to_string(), socket: Arc::clone(socket) })
}

/// The end of a close the server began (its close frame sent, or given up on): what the client
/// still sends is read and dropped until its close frame, [`CLOSE_GRACE`] at most. The socket
/// then ends with a FIN. Dropped with unread data, it would end with a reset, which can destroy
/// what the client has not read yet, the close frame and its reason among it.
pub(crate) async fn finish_close(incoming: &mut SplitStream<WebSocket>) {
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Some(Ok(message)) = incoming.next().await {
            if matches!(message, Message::Close(_)) {
                return;
            }
        }
    })
    .await;
}

/// The socket is closed: nothing more can be sent.
#[derive(Debug)]
pub(crate) struct Gone;

/// The sending side of a socket's queue (cloned by each stream).
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: mpsc::UnboundedSender<Queued>,
    room: Arc<Semaphore>,
    bound: usize,
    state: Arc<AppState>,
}

/// A message waiting to be sent, holding its bytes' room in the queue.
pub(crate) struct Queued {
    text: String,
    /// A close frame instead: the last message.
    close: Option<CloseFrame>,
    bytes: usize,
    _room: OwnedSemaphorePermit,
    state: Arc<AppState>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.state.metrics.ws_queued(-i64::try_from(self.bytes).unwrap_or(i64::MAX));
    }
}

/// What writes a socket's queue to it.
pub(crate) struct Writer {
    rx: mpsc::UnboundedReceiver<Queued>,
    room: Arc<Semaphore>,
}

/// A socket's send queue.
pub(crate) fn outbox(state: &Arc<AppState>) -> (Outbox, Writer) {
    let bound = state.settings.ws_send_queue.clamp(1, u32::MAX as usize);
    let room = Arc::new(Semaphore::new(bound));
    let (tx, rx) = mpsc::unbounded_channel();
    let outbox = Outbox { tx, room: Arc::clone(&room), bound, state: Arc::clone(state) };
    (outbox, Writer { rx, room })
}

impl Outbox {
    /// Queues `text`, waiting while the queue is full (a message larger than the whole queue
    /// waits until it is empty).
    pub(crate) async fn send(&self, text: String) -> Result<(), Gone> {
        let bytes = text.len();
        let need = u32::try_from(bytes.clamp(1, self.bound)).unwrap_or(u32::MAX);
        let room = Arc::clone(&self.room).acquire_many_owned(need).await.map_err(|_| Gone)?;
        self.state.metrics.ws_queued(i64::try_from(bytes).unwrap_or(i64::MAX));
        let queued =
            Queued { text, close: None, bytes, _room: room, state: Arc::clone(&self.state) };
        self.tx.send(queued).map_err(|_| Gone)
    }

    /// Queues a close frame with `code` and `reason` after what waits: the writer sends it and
    /// stops.
    pub(crate) async fn close(self, code: u16, reason: String) -> Result<(), Gone> {
        let room = Arc::clone(&self.room).acquire_many_owned(1).await.map_err(|_| Gone)?;
        let close = Some(close_frame(code, reason));
        let queued =
            Queued { text: String::new(), close, bytes: 0, _room: room, state: self.state };
        self.tx.send(queued).map_err(|_| Gone)
    }
}

impl Writer {
    /// Sends the queue's messages until every [`Outbox`] is dropped, then closes the socket (with
    /// the close frame queued last, if any). When the client is gone, or takes nothing for
    /// `ws_send_timeout`, it stops early (the latter with a close frame saying why) and cancels
    /// `stopped`.
    pub(crate) async fn run(
        mut self,
        mut sink: SplitSink<WebSocket, Message>,
        state: &AppState,
        stopped: &CancellationToken,
    ) {
        let limit = Some(state.settings.ws_send_timeout).filter(|t| !t.is_zero());
        while let Some(mut queued) = self.rx.recv().await {
            if let Some(close) = queued.close.take() {
                drop(queued);
                let _ =
                    tokio::time::timeout(CLOSE_GRACE, sink.send(Message::Close(Some(close)))).await;
                return;
            }
            let sending = sink.send(Message::Text(std::mem::take(&mut queued.text).into()));
            let sent = match limit {
                Some(limit) => tokio::time::timeout(limit, sending).await,
                None => Ok(sending.await),
            };
            drop(queued);
            match sent {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    // The client is gone.
                    self.stop(stopped);
                    return;
                }
                Err(_) => {
                    let limit = limit.unwrap_or_default();
                    state.metrics.ws_slow_closed();
                    tracing::warn!(
                        "closing a WebSocket whose client took no data for {} \
                         (limits.ws_send_timeout)",
                        humantime::format_duration(limit)
                    );
                    self.stop(stopped);
                    let reason = format!(
                        "the client took no data for {} (limits.ws_send_timeout)",
                        humantime::format_duration(limit)
                    );
                    let close = close_frame(CLOSE_NOT_READING, reason);
                    let _ =
                        tokio::time::timeout(CLOSE_GRACE, sink.send(Message::Close(Some(close))))
                            .await;
                    return;
                }
            }
        }
        let _ = tokio::time::timeout(CLOSE_GRACE, sink.close()).await;
    }

    /// Stops the queue: waiting and later senders get [`Gone`], what waited is dropped.
    fn stop(&mut self, stopped: &CancellationToken) {
        self.room.close();
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
        stopped.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_in_a_control_frame() {
        let long = "é".repeat(100);
        let frame = close_frame(1000, long);
        assert_eq!(frame.reason.as_str().len(), 122, "cut on a character boundary");
        let short = close_frame(1013, "idle".into());
        assert_eq!((short.code, short.reason.as_str()), (1013, "idle"));
    }
}
