//! `GET /api/agent/ws`: the same exchange over WebSocket text frames.
//!
//! The client sends JSON messages, each with a `type`:
//!
//! - `{"type":"execute", …ExecuteRequest}`: the body of `POST /api/agent/execute`;
//! - `{"type":"attach","sessionId":"…","after":12}`: `GET …/stream` (`after` optional);
//! - `{"type":"abort","sessionId":"…"}`: `POST …/abort`.
//!
//! The server answers with JSON messages: `{"type":"started","sessionId","runId"}` when a run
//! starts; one `{"sessionId","id","data"}` per frame of the wire format (`id`: the event's seq
//! on the last frame of each event, else `null`; `data`: the frame, as SSE's `data:` holds it);
//! `{"type":"end","sessionId"}` when a stream ends; `{"type":"aborted","sessionId"}`; and
//! `{"error":{"code","message"},"sessionId"?}` for a refused message (the codes of the HTTP
//! API). Several streams may share one socket. The wire format is the upgrade request's
//! `?protocol=` (default `native`). When the socket closes, streams stop; runs go on, except
//! those started with `onDisconnect: "cancel"`.
//!
//! Each `execute`, `attach` and `abort` message is a request: it counts against the key's rate
//! limit, and streams are capped per socket and per key (`too_many_streams`); a client that does
//! not read is closed with code 1008 and a reason. Sockets are capped per key (the upgrade is
//! refused with `429 too_many_sockets`); a socket with no stream open for `idle_timeout` is
//! closed with code 1000 and a reason, and one replaced at the connection cap with code 1013
//! (see `ws_limits`).

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::StreamExt;
use futures::stream::SplitStream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use weft_protocol::{Frame, Protocol};

use crate::AppState;
use crate::api::{ExecuteRequest, FormatQuery, QueryParams, parse_json};
use crate::auth::{Caller, RateBucket};
use crate::conn::{Closed, ConnHandle};
use crate::error::{ApiError, ErrorBody};
use crate::execute;
use crate::ids::ClientIds;
use crate::stream::{ClientGauge, Feed, Renderer};
use crate::ws_limits::{self, Outbox, SocketSlot, SocketStreams, StreamSlot};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AttachMessage {
    pub(crate) session_id: String,
    #[serde(default)]
    pub(crate) after: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AbortMessage {
    pub(crate) session_id: String,
}

/// A client's message, read.
pub(crate) enum ClientMessage {
    /// `execute`.
    Execute(Box<ExecuteRequest>),
    /// `attach`.
    Attach(AttachMessage),
    /// `abort`.
    Abort(AbortMessage),
}

impl ClientMessage {
    /// The session the message names (an `execute` for a new session names none).
    fn session_id(&self) -> Option<&str> {
        match self {
            Self::Execute(_) => None,
            Self::Attach(message) => Some(&message.session_id),
            Self::Abort(message) => Some(&message.session_id),
        }
    }
}

/// Reads a client's text frame: its `type`, then the rest as that message's body.
pub(crate) fn parse_message(text: &str) -> Result<ClientMessage, ApiError> {
    let mut value: Value = parse_json(text.as_bytes())?;
    let kind = value
        .as_object_mut()
        .and_then(|map| map.remove("type"))
        .and_then(|t| t.as_str().map(String::from))
        .unwrap_or_default();
    let body = value.to_string();
    match kind.as_str() {
        "execute" => Ok(ClientMessage::Execute(Box::new(parse_json(body.as_bytes())?))),
        "attach" => Ok(ClientMessage::Attach(parse_json(body.as_bytes())?)),
        "abort" => Ok(ClientMessage::Abort(parse_json(body.as_bytes())?)),
        other => Err(ApiError::bad_request(
            "bad_request",
            format!("unknown message type {other:?}: expected execute, attach or abort"),
        )),
    }
}

/// Upgrade to a WebSocket carrying the agent API.
#[utoipa::path(
    get,
    path = "/api/agent/ws",
    tag = "agent",
    params(FormatQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol (text frames; see the crate docs)"),
        (status = 400, description = "Not a WebSocket upgrade, or an unknown protocol", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 429, description = "Rate limited, or the key has limits.ws_sockets_per_key sockets open (too_many_sockets)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn upgrade(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Extension(RateBucket(bucket)): Extension<RateBucket>,
    conn: Option<Extension<ConnHandle>>,
    QueryParams(query): QueryParams<FormatQuery>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let protocol = match query.protocol() {
        Some(name) => name
            .parse::<Protocol>()
            .map_err(|e| ApiError::bad_request("unknown_protocol", e.to_string()))?,
        None => Protocol::Native,
    };
    let upgrade = upgrade.map_err(|e| {
        ApiError::bad_request("websocket_required", format!("this endpoint speaks WebSocket: {e}"))
    })?;
    // The socket holds a slot of its key's while it lives (given back if the upgrade fails).
    let held = ws_limits::open_socket(&state, &bucket)?;
    let conn = conn.map(|Extension(conn)| conn);
    let limit = state.settings.body_bytes;
    let socket = Socket { state, caller, bucket, protocol, conn, _held: held };
    // The socket's tasks are in the upgrade request's span: the runs its messages start are in
    // the trace the upgrade request continued (its `traceparent`), as an HTTP execute's are.
    let span = tracing::Span::current();
    Ok(upgrade.max_message_size(limit).on_upgrade(move |ws| serve(socket, ws).instrument(span)))
}

fn error_message(error: &ApiError, session_id: Option<&str>) -> String {
    let mut value = json!({ "error": error.detail });
    if let Some(id) = session_id {
        value["sessionId"] = json!(id);
    }
    value.to_string()
}

fn frame_message(session_id: &str, frame: &Frame) -> String {
    let data = if frame.is_json() {
        serde_json::from_str::<Value>(&frame.data).unwrap_or(Value::String(frame.data.clone()))
    } else {
        Value::String(frame.data.clone())
    };
    json!({ "sessionId": session_id, "id": frame.id, "data": data }).to_string()
}

/// One socket: who it serves, and its places among its key's sockets and at the connection cap.
struct Socket {
    state: Arc<AppState>,
    caller: Caller,
    bucket: String,
    protocol: Protocol,
    /// Its connection (absent when the router is driven without `Server::serve`).
    conn: Option<ConnHandle>,
    _held: SocketSlot,
}

/// Why a socket's loop ended.
enum Ending {
    /// The client closed it, or is gone.
    ClientClosed,
    /// The server is shutting down, or the writer stopped (the client does not read).
    Stopped,
    /// No stream was open for `idle_timeout`.
    Idle(Duration),
    /// A new connection took its place at the cap.
    Evicted,
}

async fn serve(socket: Socket, ws: WebSocket) {
    let (sink, mut incoming) = ws.split();
    let state = Arc::clone(&socket.state);
    let (outbox, writer) = ws_limits::outbox(&state);
    // Cancelled when the writer stops early: the client is gone or does not read.
    let stopped = CancellationToken::new();
    let mut writer = tokio::spawn({
        let (state, stopped) = (Arc::clone(&state), stopped.clone());
        async move { writer.run(sink, &state, &stopped).await }
    });
    let streams = Arc::new(SocketStreams::default());
    let mut tasks = JoinSet::new();
    let ending = tokio::select! {
        ending = receive(&socket, &mut incoming, &outbox, &streams, &mut tasks, &stopped) => ending,
        () = evicted(socket.conn.as_ref()) => Ending::Evicted,
    };
    // Streams stop (a run started with onDisconnect "cancel" is aborted as its feed drops).
    tasks.shutdown().await;
    match ending {
        Ending::ClientClosed => {
            drop(outbox);
            let _ = writer.await;
        }
        Ending::Stopped => {
            drop(outbox);
            let _ = writer.await;
            ws_limits::finish_close(&mut incoming).await;
        }
        Ending::Idle(limit) => {
            state.metrics.connection_closed(Closed::IdleTimeout);
            let reason = format!(
                "no stream for {} (limits.idle_timeout)",
                humantime::format_duration(limit)
            );
            let _ = outbox.close(ws_limits::CLOSE_IDLE, reason).await;
            let _ = writer.await;
            ws_limits::finish_close(&mut incoming).await;
        }
        Ending::Evicted => {
            // Its slot is another connection's already: a short goodbye.
            let reason =
                "idle at the connection cap (limits.max_connections); connect again".to_string();
            let closed = async {
                let _ = outbox.close(ws_limits::CLOSE_AT_CAP, reason).await;
                let _ = (&mut writer).await;
                ws_limits::finish_close(&mut incoming).await;
            };
            if tokio::time::timeout(ws_limits::EVICTED_GRACE, closed).await.is_err() {
                writer.abort();
            }
        }
    }
}

/// Completes once the socket's connection was replaced at the cap (never without one).
async fn evicted(conn: Option<&ConnHandle>) {
    match conn {
        Some(conn) => conn.evicted().await,
        None => std::future::pending().await,
    }
}

/// Completes at `at`, or never.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reads the client's messages and starts their streams, until the socket must close.
async fn receive(
    socket: &Socket,
    incoming: &mut SplitStream<WebSocket>,
    outbox: &Outbox,
    streams: &Arc<SocketStreams>,
    tasks: &mut JoinSet<()>,
    stopped: &CancellationToken,
) -> Ending {
    let Socket { state, caller, bucket, protocol, conn, .. } = socket;
    let idle_limit = Some(state.settings.idle_timeout).filter(|t| !t.is_zero());
    // Since when no stream has been open (`None`: one is).
    let mut idle_since = Some(Instant::now());
    loop {
        while tasks.try_join_next().is_some() {}
        if streams.open() == 0 {
            // Idle: its clock runs, and a new connection may take its place at the cap.
            idle_since.get_or_insert_with(Instant::now);
            if let Some(conn) = conn
                && !conn.set_idle(true)
            {
                return Ending::Evicted;
            }
        }
        let idle_at = idle_since.zip(idle_limit).map(|(since, limit)| since + limit);
        let message = tokio::select! {
            message = incoming.next() => message,
            () = streams.ended() => continue,
            () = sleep_until(idle_at) => return Ending::Idle(idle_limit.unwrap_or_default()),
            () = state.closing.cancelled() => return Ending::Stopped,
            () = stopped.cancelled() => return Ending::Stopped,
        };
        // Refusals are sent from here, so a client that floods without reading stops being
        // read once its queue is full.
        let text = match message {
            Some(Ok(Message::Text(text))) => text.to_string(),
            Some(Ok(Message::Binary(_))) => {
                let error = ApiError::bad_request("bad_request", "send JSON as text frames");
                if outbox.send(error_message(&error, None)).await.is_err() {
                    return Ending::Stopped;
                }
                continue;
            }
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return Ending::ClientClosed,
            Some(Ok(_)) => continue,
        };
        let request = match parse_message(&text) {
            Ok(request) => request,
            Err(error) => {
                if outbox.send(error_message(&error, None)).await.is_err() {
                    return Ending::Stopped;
                }
                continue;
            }
        };
        if let ClientMessage::Abort(AbortMessage { session_id: id }) = request {
            // An abort loads its session from the store: a request too.
            let aborted = match state.limiter.admit(bucket) {
                Ok(()) => execute::abort(state, caller, &id).await,
                Err(error) => Err(error),
            };
            let reply = match aborted {
                Ok(()) => json!({"type": "aborted", "sessionId": id}).to_string(),
                Err(error) => error_message(&error, Some(&id)),
            };
            if outbox.send(reply).await.is_err() {
                return Ending::Stopped;
            }
            continue;
        }
        // A stream is a request: it takes a token of the key's rate limit, and a slot.
        let slot = state
            .limiter
            .admit(bucket)
            .and_then(|()| ws_limits::open_stream(state, bucket, streams));
        let slot = match slot {
            Ok(slot) => slot,
            Err(error) => {
                if outbox.send(error_message(&error, request.session_id())).await.is_err() {
                    return Ending::Stopped;
                }
                continue;
            }
        };
        // Busy: no longer replaceable at the cap, unless it was replaced already.
        if let Some(conn) = conn
            && !conn.set_idle(false)
        {
            return Ending::Evicted;
        }
        idle_since = None;
        let (state, caller, outbox) = (Arc::clone(state), caller.clone(), outbox.clone());
        let protocol = *protocol;
        let task = async move {
            stream_or_refuse(&state, &caller, protocol, request, &outbox, slot).await
        };
        tasks.spawn(task.in_current_span());
    }
}

type Refusal = (ApiError, Option<String>);

/// [`stream`], and its refusal, if any, sent as an error message.
async fn stream_or_refuse(
    state: &Arc<AppState>,
    caller: &Caller,
    protocol: Protocol,
    request: ClientMessage,
    outbox: &Outbox,
    slot: StreamSlot,
) {
    if let Err((error, session_id)) = stream(state, caller, protocol, request, outbox, slot).await {
        let _ = outbox.send(error_message(&error, session_id.as_deref())).await;
    }
}

/// Runs an `execute` or `attach` message's stream to its end. Its `slot` is given back before
/// the `end` (or the refusal) is sent: a client that sees either may open another stream.
async fn stream(
    state: &Arc<AppState>,
    caller: &Caller,
    protocol: Protocol,
    request: ClientMessage,
    outbox: &Outbox,
    slot: StreamSlot,
) -> Result<(), Refusal> {
    match request {
        ClientMessage::Execute(request) => {
            let started = execute::start(state, caller, *request).await.map_err(|e| (e, None))?;
            let id = started.session_id.clone();
            let hello = json!({"type": "started", "sessionId": id, "runId": started.run_id});
            if outbox.send(hello.to_string()).await.is_ok() {
                send_feed(state, started.feed, protocol, &id, outbox, slot).await;
            }
            Ok(())
        }
        ClientMessage::Attach(message) => {
            let id = message.session_id;
            let feed = execute::attach(state, caller, &id, message.after)
                .await
                .map_err(|e| (e, Some(id.clone())))?;
            send_feed(state, feed, protocol, &id, outbox, slot).await;
            Ok(())
        }
        ClientMessage::Abort(_) => Ok(()),
    }
}

async fn send_feed(
    state: &Arc<AppState>,
    feed: Feed,
    protocol: Protocol,
    session_id: &str,
    outbox: &Outbox,
    slot: StreamSlot,
) {
    let Feed { mut records, seen, mut cancel, ids } = feed;
    let _gauge = ClientGauge::new(Arc::clone(state));
    let mut renderer = Renderer::with_encoder(ClientIds::wrap(protocol.encoder(), ids.as_ref()));
    while let Some(record) = records.next().await {
        if record.seq <= seen {
            renderer.prime(&record);
            continue;
        }
        let ended = matches!(record.event, weft_core::AgentEvent::SessionEnd { .. });
        let messages: Vec<String> =
            renderer.frames(&record).map(|f| frame_message(session_id, &f)).collect();
        state.metrics.events(1);
        if ended && let Some(cancel) = cancel.as_mut() {
            cancel.disarm();
        }
        for message in messages {
            if outbox.send(message).await.is_err() {
                return;
            }
        }
    }
    let messages: Vec<String> = renderer.finish().map(|f| frame_message(session_id, &f)).collect();
    for message in messages {
        if outbox.send(message).await.is_err() {
            return;
        }
    }
    drop(slot);
    let _ = outbox.send(json!({"type": "end", "sessionId": session_id}).to_string()).await;
}
