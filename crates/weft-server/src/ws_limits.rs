//! The WebSocket's limits: its messages are requests, and what it sends waits in a bounded
//! queue.
//!
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

/// How long a closing socket's last frames (and its close frame) may take to leave.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// WebSocket streams open per API key (rate-limit bucket), over all sockets.
#[derive(Default)]
pub(crate) struct KeyStreams(Mutex<HashMap<String, usize>>);

/// One open stream: counted against its socket and its key while it lives.
pub(crate) struct StreamSlot {
    state: Arc<AppState>,
    key: String,
    socket: Arc<AtomicUsize>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.socket.fetch_sub(1, Ordering::AcqRel);
        let mut keys = self.state.ws_streams.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = keys.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                keys.remove(&self.key);
            }
        }
    }
}

fn too_many_streams(message: String) -> ApiError {
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message)
}

/// A slot for one more stream on `socket` (the count of its streams) for the key `key`.
pub(crate) fn open_stream(
    state: &Arc<AppState>,
    key: &str,
    socket: &Arc<AtomicUsize>,
) -> Result<StreamSlot, ApiError> {
    let (per_socket, per_key) =
        (state.settings.ws_streams_per_socket, state.settings.ws_streams_per_key);
    if per_socket > 0 && socket.load(Ordering::Acquire) >= per_socket {
        return Err(too_many_streams(format!(
            "this WebSocket carries {per_socket} streams already, the most it may \
             (limits.ws_streams_per_socket); wait for one to end"
        )));
    }
    let mut keys = state.ws_streams.0.lock().unwrap_or_else(|e| e.into_inner());
    let count = keys.entry(key.to_string()).or_insert(0);
    if per_key > 0 && *count >= per_key {
        return Err(too_many_streams(format!(
            "this API key has {per_key} WebSocket streams open already, the most it may \
             (limits.ws_streams_per_key); wait for one to end"
        )));
    }
    *count += 1;
    drop(keys);
    socket.fetch_add(1, Ordering::AcqRel);
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
        let queued = Queued { text, bytes, _room: room, state: Arc::clone(&self.state) };
        self.tx.send(queued).map_err(|_| Gone)
    }
}

impl Writer {
    /// Sends the queue's messages until every [`Outbox`] is dropped, then closes the socket.
    /// When the client is gone, or takes nothing for `ws_send_timeout`, it stops early (the
    /// latter with a close frame saying why) and cancels `stopped`.
    pub(crate) async fn run(
        mut self,
        mut sink: SplitSink<WebSocket, Message>,
        state: &AppState,
        stopped: &CancellationToken,
    ) {
        let limit = Some(state.settings.ws_send_timeout).filter(|t| !t.is_zero());
        while let Some(mut queued) = self.rx.recv().await {
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
                    let close = CloseFrame { code: CLOSE_NOT_READING, reason: reason.into() };
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
