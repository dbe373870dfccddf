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

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weft_protocol::{Frame, Protocol};

use crate::AppState;
use crate::api::{ExecuteRequest, QueryParams, parse_json};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::execute;
use crate::ids::ClientIds;
use crate::routes::FormatQuery;
use crate::stream::{ClientGauge, Feed, Renderer};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AttachMessage {
    session_id: String,
    #[serde(default)]
    after: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AbortMessage {
    session_id: String,
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
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn upgrade(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
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
    let limit = state.settings.body_bytes;
    Ok(upgrade
        .max_message_size(limit)
        .on_upgrade(move |socket| serve(state, caller, protocol, socket)))
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

async fn serve(state: Arc<AppState>, caller: Caller, protocol: Protocol, socket: WebSocket) {
    let (mut sink, mut incoming) = socket.split();
    let (tx, mut rx) = mpsc::channel::<String>(256);
    let writer = tokio::spawn(async move {
        while let Some(text) = rx.recv().await {
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut tasks = tokio::task::JoinSet::new();
    let closing = state.closing.clone();
    loop {
        let message = tokio::select! {
            message = incoming.next() => message,
            () = closing.cancelled() => break,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text.to_string(),
            Some(Ok(Message::Binary(_))) => {
                let error = ApiError::bad_request("bad_request", "send JSON as text frames");
                let _ = tx.send(error_message(&error, None)).await;
                continue;
            }
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            Some(Ok(_)) => continue,
        };
        let (state, caller, tx) = (Arc::clone(&state), caller.clone(), tx.clone());
        tasks.spawn(async move {
            if let Err((error, session_id)) = handle(&state, &caller, protocol, &text, &tx).await {
                let _ = tx.send(error_message(&error, session_id.as_deref())).await;
            }
        });
    }
    // Streams stop (a run started with onDisconnect "cancel" is aborted as its feed drops).
    tasks.shutdown().await;
    drop(tx);
    let _ = writer.await;
}

type Refusal = (ApiError, Option<String>);

async fn handle(
    state: &Arc<AppState>,
    caller: &Caller,
    protocol: Protocol,
    text: &str,
    tx: &mpsc::Sender<String>,
) -> Result<(), Refusal> {
    let mut value: Value = parse_json(text.as_bytes()).map_err(|e| (e, None))?;
    let kind = value
        .as_object_mut()
        .and_then(|map| map.remove("type"))
        .and_then(|t| t.as_str().map(String::from))
        .unwrap_or_default();
    let body = value.to_string();
    match kind.as_str() {
        "execute" => {
            let request: ExecuteRequest = parse_json(body.as_bytes()).map_err(|e| (e, None))?;
            let started = execute::start(state, caller, request).await.map_err(|e| (e, None))?;
            let id = started.session_id.clone();
            let hello = json!({"type": "started", "sessionId": id, "runId": started.run_id});
            let _ = tx.send(hello.to_string()).await;
            send_feed(state, started.feed, protocol, &id, tx).await;
            Ok(())
        }
        "attach" => {
            let message: AttachMessage = parse_json(body.as_bytes()).map_err(|e| (e, None))?;
            let id = message.session_id;
            let feed = execute::attach(state, caller, &id, message.after)
                .await
                .map_err(|e| (e, Some(id.clone())))?;
            send_feed(state, feed, protocol, &id, tx).await;
            Ok(())
        }
        "abort" => {
            let message: AbortMessage = parse_json(body.as_bytes()).map_err(|e| (e, None))?;
            let id = message.session_id;
            execute::abort(state, caller, &id).await.map_err(|e| (e, Some(id.clone())))?;
            let _ = tx.send(json!({"type": "aborted", "sessionId": id}).to_string()).await;
            Ok(())
        }
        other => Err((
            ApiError::bad_request(
                "bad_request",
                format!("unknown message type {other:?}: expected execute, attach or abort"),
            ),
            None,
        )),
    }
}

async fn send_feed(
    state: &Arc<AppState>,
    feed: Feed,
    protocol: Protocol,
    session_id: &str,
    tx: &mpsc::Sender<String>,
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
            if tx.send(message).await.is_err() {
                return;
            }
        }
    }
    let messages: Vec<String> = renderer.finish().map(|f| frame_message(session_id, &f)).collect();
    for message in messages {
        let _ = tx.send(message).await;
    }
    let _ = tx.send(json!({"type": "end", "sessionId": session_id}).to_string()).await;
}
