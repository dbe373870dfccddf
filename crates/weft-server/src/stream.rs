//! Event streams to clients: the wire format a request asks for, rendering a session's events
//! in it (SSE with `id:` = the event's seq, or NDJSON), and where a stream must start so that a
//! client resuming after an event gets exactly what it missed.

use std::pin::Pin;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use futures::{FutureExt, Stream, StreamExt};
use weft_agent::AbortHandle;
use weft_core::{AgentEvent, EventRecord};
use weft_protocol::{Encoder, Frame, Protocol};

use crate::AppState;
use crate::error::ApiError;
use crate::ids::{ClientIds, ShownId};

/// A session's events, in seq order.
pub(crate) type Records = Pin<Box<dyn Stream<Item = Arc<EventRecord>> + Send>>;

/// How frames are written (SSE with `id:`, or NDJSON lines).
pub(crate) use weft_protocol::Framing;

/// The wire format of one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireFormat {
    pub(crate) protocol: Protocol,
    pub(crate) framing: Framing,
}

impl WireFormat {
    /// `?protocol=` wins; else `Accept: application/x-ndjson` is Loom NDJSON, and anything else
    /// (`text/event-stream`, `*/*`, none) native SSE. The framing is NDJSON when the client
    /// accepts it and not SSE, SSE otherwise.
    pub(crate) fn negotiate(protocol: Option<&str>, headers: &HeaderMap) -> Result<Self, ApiError> {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
        let ndjson =
            accept.contains("application/x-ndjson") && !accept.contains("text/event-stream");
        let framing = if ndjson { Framing::Ndjson } else { Framing::Sse };
        let protocol = match protocol {
            Some(name) => name
                .parse::<Protocol>()
                .map_err(|e| ApiError::bad_request("unknown_protocol", e.to_string()))?,
            None if ndjson => Protocol::Loom,
            None => Protocol::Native,
        };
        Ok(Self { protocol, framing })
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self.framing {
            Framing::Sse => "text/event-stream",
            Framing::Ndjson => "application/x-ndjson",
        }
    }
}

/// Renders records in one format, keeping the encoder's per-stream state.
pub(crate) struct Renderer {
    encoder: Box<dyn Encoder>,
    frames: Vec<Frame>,
}

impl Renderer {
    /// A renderer with an encoder set up by the caller (the front-end endpoints configure theirs).
    pub(crate) fn with_encoder(encoder: Box<dyn Encoder>) -> Self {
        Self { encoder, frames: Vec::new() }
    }

    /// Feeds an event the client has already seen: the encoder's state moves on, nothing is
    /// written (so a resumed stream renders the rest exactly as the first one would have).
    pub(crate) fn prime(&mut self, record: &EventRecord) {
        self.encoder.set_node(record.node_id.as_ref());
        weft_protocol::encode(self.encoder.as_mut(), record.seq, &record.event, &mut self.frames);
        self.frames.clear();
    }

    /// The frames of one event.
    pub(crate) fn frames(&mut self, record: &EventRecord) -> std::vec::Drain<'_, Frame> {
        self.frames.clear();
        self.encoder.set_node(record.node_id.as_ref());
        weft_protocol::encode(self.encoder.as_mut(), record.seq, &record.event, &mut self.frames);
        self.frames.drain(..)
    }

    /// The format's closing frames.
    pub(crate) fn finish(&mut self) -> std::vec::Drain<'_, Frame> {
        self.frames.clear();
        self.encoder.finish(&mut self.frames);
        self.frames.drain(..)
    }
}

/// Aborts a run when its stream is dropped before the run's end (`onDisconnect: "cancel"`).
pub(crate) struct CancelOnDrop {
    abort: Option<AbortHandle>,
}

impl CancelOnDrop {
    pub(crate) fn new(abort: AbortHandle) -> Self {
        Self { abort: Some(abort) }
    }

    /// The run ended: nothing to cancel any more.
    pub(crate) fn disarm(&mut self) {
        self.abort = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(abort) = self.abort.take() {
            tracing::info!("the client went away: aborting its run (onDisconnect: cancel)");
            abort.abort();
        }
    }
}

/// Counts a stream client while it is open.
pub(crate) struct ClientGauge(Arc<AppState>);

impl ClientGauge {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        state.metrics.stream_opened();
        Self(state)
    }
}

impl Drop for ClientGauge {
    fn drop(&mut self) {
        self.0.metrics.stream_closed();
    }
}

/// What a stream sends: `records` from their start, those with seq up to `seen` only primed
/// into the encoder (the client has them).
pub(crate) struct Feed {
    pub(crate) records: Records,
    pub(crate) seen: u64,
    pub(crate) cancel: Option<CancelOnDrop>,
    /// The session's stored id and the id its client knows: events show the client's.
    pub(crate) ids: Option<ShownId>,
}

/// How many bytes of frames one body chunk gathers at most when several events are ready at once
/// (a client catching up): one write to the socket for many events.
const CHUNK_BYTES: usize = 32 * 1024;
/// A connection's frame buffer keeps at most this much capacity between events (a large event,
/// such as a `message_end` with a long text, does not stay allocated for the stream's life).
const KEEP_CAPACITY: usize = 4 * 1024;

/// Renders a feed as an HTTP body: frames as they come, SSE keep-alive comments while idle, the
/// format's closing frames at the end; ends early when the server shuts down.
pub(crate) fn body(state: Arc<AppState>, feed: Feed, format: WireFormat) -> Body {
    body_with(state, feed, format.framing, format.protocol.encoder())
}

/// [`body`] with an encoder of the caller's.
///
/// Each event is written by [`Encoder::encode_to`] straight into one buffer per connection (the
/// native and Loom encoders write their per-token events in place; the other formats go through
/// their frames), and the events that are ready at once go out in one chunk. Keep-alive comments
/// come from the server's one keep-alive ticker ([`AppState::keep_alive`]), not from a timer per
/// stream: a stream that sent nothing since the last tick sends one.
pub(crate) fn body_with(
    state: Arc<AppState>,
    feed: Feed,
    framing: Framing,
    encoder: Box<dyn Encoder>,
) -> Body {
    let stream = async_stream::stream! {
        let Feed { mut records, seen, mut cancel, ids } = feed;
        let _gauge = ClientGauge::new(Arc::clone(&state));
        let mut encoder = ClientIds::wrap(encoder, ids.as_ref());
        let mut out: Vec<u8> = Vec::new();
        let ticks = state.keep_alive();
        let tick = ticks.notified();
        tokio::pin!(tick);
        // Counted as sent at the start: the first keep-alive comes after a whole idle period.
        let mut sent = true;
        let mut open = !state.closing.is_cancelled();
        while open {
            // The shutdown comes as a tick too (the ticker ticks once more when the server
            // closes): the cancellation token (a lock) is looked at per tick, not per event.
            let record = tokio::select! {
                biased;
                record = records.next() => Some(record),
                () = &mut tick => None,
            };
            let Some(record) = record else {
                // A keep-alive tick: a stream idle since the last one says it is alive.
                tick.set(ticks.notified());
                if state.closing.is_cancelled() {
                    open = false;
                    continue;
                }
                if framing == Framing::Sse && !std::mem::take(&mut sent) {
                    yield Ok::<Bytes, std::convert::Infallible>(Bytes::from_static(b": keep-alive\n\n"));
                }
                continue;
            };
            let Some(mut record) = record else { break };
            let mut done = false;
            loop {
                if record.seq <= seen {
                    // The client has it: the encoder's state moves on, nothing is sent.
                    let mark = out.len();
                    encoder.encode_to(record.seq, &record.event, framing, &mut out);
                    out.truncate(mark);
                } else {
                    encoder.encode_to(record.seq, &record.event, framing, &mut out);
                    state.metrics.events(1);
                    if matches!(record.event, AgentEvent::SessionEnd { .. })
                        && let Some(cancel) = cancel.as_mut()
                    {
                        cancel.disarm();
                    }
                }
                if out.len() >= CHUNK_BYTES {
                    break;
                }
                // More events ready right now go into the same chunk.
                match records.next().now_or_never() {
                    Some(Some(next)) => record = next,
                    Some(None) => {
                        done = true;
                        break;
                    }
                    None => break,
                }
            }
            if !out.is_empty() {
                yield Ok(Bytes::copy_from_slice(&out));
                sent = true;
                out.clear();
                if out.capacity() > KEEP_CAPACITY {
                    out.shrink_to(KEEP_CAPACITY);
                }
            }
            if done {
                break;
            }
        }
        encoder.finish_to(framing, &mut out);
        if !out.is_empty() {
            yield Ok(Bytes::from(out));
        }
        drop(cancel);
    };
    Body::from_stream(stream)
}

/// Where to subscribe to a session's log so that the stream is one run's, from its start: the
/// seq of the `session_end` that precedes the run (0 for the first run).
///
/// With a cursor (the client saw every event up to `seen`): the run `seen` belongs to, which is
/// the one after the last `session_end` at or before `seen`. Without one: the run under way when
/// `running`, else the last run.
///
/// `recorded` is where the current or last run starts as its start recorded it in the session's
/// head ([`weft_agent::OPTION_RUN_AFTER_SEQ`]): it answers without reading the log, unless the
/// cursor is in an earlier run. Otherwise (a session whose runs predate that record) the store's
/// `session_end`s answer: every `session_end` is in the store before anyone sees it, so the
/// store answers exactly; what this server has scanned is kept per session.
pub(crate) async fn run_start(
    state: &AppState,
    session_id: &str,
    seen: Option<u64>,
    running: bool,
    recorded: Option<u64>,
) -> Result<u64, ApiError> {
    if let Some(after) = recorded
        && seen.is_none_or(|seen| seen >= after)
    {
        return Ok(after);
    }
    let ends = scan_ends(state, session_id).await?;
    Ok(match seen {
        Some(seen) => ends.iter().rev().find(|end| **end <= seen).copied().unwrap_or(0),
        None if running => ends.last().copied().unwrap_or(0),
        None => {
            let mut last_two = ends.iter().rev();
            let _last = last_two.next();
            last_two.next().copied().unwrap_or(0)
        }
    })
}

/// The seqs of the session's `session_end` events, read from the store past what was scanned
/// before. A run's `session_end` is stored before anyone is shown it, and this process reports a
/// session not running only after its run published its end: the store has every end needed.
async fn scan_ends(state: &AppState, session_id: &str) -> Result<Vec<u64>, ApiError> {
    let Some(store) = state.agent.store().cloned() else { return Ok(Vec::new()) };
    let (mut scanned, mut ends) = {
        let cache = state.ends.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(session_id).cloned().unwrap_or_default()
    };
    loop {
        let started = std::time::Instant::now();
        let page =
            store.read_events(session_id, scanned, 1024).await.map_err(|e| ApiError::store(&e))?;
        state.metrics.store_call(started.elapsed());
        let Some(last) = page.last() else { break };
        scanned = last.seq;
        ends.extend(
            page.iter().filter(|r| matches!(r.event, AgentEvent::SessionEnd { .. })).map(|r| r.seq),
        );
    }
    let mut cache = state.ends.lock().unwrap_or_else(|e| e.into_inner());
    cache.insert(session_id.to_string(), (scanned, ends.clone()));
    Ok(ends)
}
