//! [`ExecuteStream`]: the events of one execution across its runs and its connections.

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use weft_core::{
    AgentEvent, ApprovalDecision, Cost, Input, Message, SessionStatus, ToolCall, ToolResultMessage,
    Usage,
};
use weft_llm::CancellationToken;
use weft_llm::sse::{SseEvent, SseParser};
use weft_protocol::native::{NativeMessage, decode_frame};
use weft_tool_api::{Tool, ToolContext, ToolEvent};

use crate::types::{ApprovalRequest, Event, ExecuteOptions, ExecuteResult};
use crate::{Client, Error, FrameOut};
use weft_protocol::Protocol;

/// How long a client tool may run when it does not say ([`Tool::timeout`]).
const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(300);

/// What the stream and its handles share. Locks are held for a copy, never across an await.
#[derive(Debug)]
pub(crate) struct Shared {
    session: tokio::sync::watch::Sender<Option<String>>,
    last_event_id: Mutex<Option<u64>>,
    reconnects: AtomicU32,
    result: Mutex<Option<ExecuteResult>>,
}

impl Shared {
    pub(crate) fn new(session: Option<String>, after: Option<u64>) -> Arc<Self> {
        Arc::new(Self {
            session: tokio::sync::watch::Sender::new(session),
            last_event_id: Mutex::new(after),
            reconnects: AtomicU32::new(0),
            result: Mutex::new(None),
        })
    }

    fn session_id(&self) -> Option<String> {
        self.session.borrow().clone()
    }

    fn set_session(&self, id: &str) {
        self.session.send_if_modified(|current| {
            if current.as_deref() == Some(id) {
                return false;
            }
            *current = Some(id.to_string());
            true
        });
    }

    fn last_event_id(&self) -> Option<u64> {
        *self.last_event_id.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_last_event_id(&self, seq: u64) {
        *self.last_event_id.lock().unwrap_or_else(|e| e.into_inner()) = Some(seq);
    }
}

/// The events of one execution: every run it leads to (client tools run and approvals decided
/// in between, each resumed automatically), read across dropped connections with
/// `Last-Event-ID`: no event is yielded twice and none is missed.
///
/// Ends after the last run's `execute_complete` (one the client cannot go on from); an
/// [`Error`] item ends it early. [`finish`](Self::finish) drains it and gives the
/// [`ExecuteResult`].
pub struct ExecuteStream {
    inner: BoxStream<'static, Result<Event, Error>>,
    shared: Arc<Shared>,
    client: Client,
}

impl std::fmt::Debug for ExecuteStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteStream").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl ExecuteStream {
    pub(crate) fn new(client: Client, first: Request, options: ExecuteOptions) -> Self {
        let shared = Shared::new(first.session_id(&options), first.after());
        let inner = exchange(client.clone(), first, options, Arc::clone(&shared)).boxed();
        Self { inner, shared, client }
    }

    /// The session, once the server named it (the `X-Session-Id` of the first response).
    pub fn session_id(&self) -> Option<String> {
        self.shared.session_id()
    }

    /// Waits until the server names the session (at most `timeout`).
    pub async fn wait_session_id(&self, timeout: Duration) -> Option<String> {
        wait_session(&self.shared, timeout).await
    }

    /// The sequence number of the last event received: the cursor to resume after.
    pub fn last_event_id(&self) -> Option<u64> {
        self.shared.last_event_id()
    }

    /// How many times the stream was reattached after a dropped connection.
    pub fn reconnects(&self) -> u32 {
        self.shared.reconnects.load(Ordering::Relaxed)
    }

    /// The outcome, once the stream has ended without an error.
    pub fn result(&self) -> Option<ExecuteResult> {
        self.shared.result.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A handle that aborts the run on the server (the stream then ends with the aborted run's
    /// end), usable while the stream is being read.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle { client: self.client.clone(), shared: Arc::clone(&self.shared) }
    }

    /// Reads the stream to its end and returns its outcome (the first error otherwise).
    pub async fn finish(mut self) -> Result<ExecuteResult, Error> {
        while let Some(item) = self.inner.next().await {
            item?;
        }
        self.result().ok_or_else(|| Error::Dropped("the stream ended without a result".into()))
    }
}

impl Stream for ExecuteStream {
    type Item = Result<Event, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

async fn wait_session(shared: &Shared, timeout: Duration) -> Option<String> {
    let mut watch = shared.session.subscribe();
    let waited = tokio::time::timeout(timeout, watch.wait_for(Option::is_some)).await;
    match waited {
        Ok(Ok(id)) => id.clone(),
        _ => shared.session_id(),
    }
}

/// Aborts the run of an [`ExecuteStream`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct AbortHandle {
    client: Client,
    shared: Arc<Shared>,
}

impl AbortHandle {
    /// Aborts the session's run (waiting up to 5 s for the server to name the session, when it
    /// has not yet). A session with nothing running answers 409 (`Error::Api`).
    pub async fn abort(&self) -> Result<(), Error> {
        let Some(id) = wait_session(&self.shared, Duration::from_secs(5)).await else {
            return Err(Error::NoSession("the server has not named the session".into()));
        };
        self.client.abort(&id).await
    }

    /// The session, once named.
    pub fn session_id(&self) -> Option<String> {
        self.shared.session_id()
    }
}

/// The request that opens a run's stream.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    /// `POST /api/agent/execute` with this body.
    Post(serde_json::Value),
    /// `GET /api/agent/session/{id}/stream`, after this event.
    Attach { session_id: String, after: Option<u64> },
}

impl Request {
    fn session_id(&self, options: &ExecuteOptions) -> Option<String> {
        match self {
            Request::Post(_) => options.session_id.clone(),
            Request::Attach { session_id, .. } => Some(session_id.clone()),
        }
    }

    fn after(&self) -> Option<u64> {
        match self {
            Request::Post(_) => None,
            Request::Attach { after, .. } => *after,
        }
    }
}

/// The run-by-run exchange: read a run, then run client tools or ask for approvals and post
/// the answer, until a run ends in a way this client cannot go on from.
fn exchange(
    client: Client,
    first: Request,
    options: ExecuteOptions,
    shared: Arc<Shared>,
) -> impl Stream<Item = Result<Event, Error>> + Send + 'static {
    async_stream::stream! {
        let mut messages: Vec<Arc<Message>> = Vec::new();
        let (mut usage, mut cost) = (Usage::default(), Cost::default());
        let mut request = first;
        loop {
            let mut complete: Option<(SessionStatus, Vec<ToolCall>)> = None;
            let mut approvals: Vec<ToolCall> = Vec::new();
            let mut run = Box::pin(read_run(&client, &request, &shared));
            while let Some(item) = run.next().await {
                let event = match item {
                    Ok(event) => event,
                    Err(error) => {
                        yield Err(error);
                        return;
                    }
                };
                match &event.message {
                    NativeMessage::Event(AgentEvent::SessionStart { .. }) => approvals.clear(),
                    NativeMessage::Event(AgentEvent::ApprovalRequired { tool_calls, .. }) => {
                        approvals.extend(tool_calls.iter().cloned());
                    }
                    NativeMessage::Event(AgentEvent::SessionEnd {
                        messages: added, usage: u, cost: c, ..
                    }) => {
                        messages.extend(added.iter().cloned());
                        usage += **u;
                        cost += **c;
                    }
                    NativeMessage::Complete { status, pending_tool_calls } => {
                        complete = Some((*status, pending_tool_calls.clone()));
                    }
                    NativeMessage::Event(_) => {}
                }
                yield Ok(event);
            }
            drop(run);
            let Some((status, pending)) = complete else {
                yield Err(Error::Dropped("the stream ended before its run did".into()));
                return;
            };
            let session_id = shared.session_id().unwrap_or_default();
            match next_input(&options, &session_id, status, &pending, &approvals).await {
                Some(input) => {
                    let body = serde_json::json!({
                        "sessionId": session_id,
                        "input": crate::wire_input(&input),
                        "options": options.request.for_resume(),
                    });
                    request = Request::Post(body);
                }
                None => {
                    let approval_ids: Vec<&str> = approvals.iter().map(|c| c.id.as_str()).collect();
                    let pending_approvals = pending
                        .iter()
                        .filter(|c| approval_ids.contains(&c.id.as_str()))
                        .cloned()
                        .collect();
                    let error = messages.iter().rev().find_map(|m| match m.as_ref() {
                        Message::Assistant(a) => Some(a.error_message.as_deref().map(String::from)),
                        _ => None,
                    }).flatten();
                    let result = ExecuteResult {
                        session_id,
                        status,
                        messages: std::mem::take(&mut messages),
                        pending_tool_calls: pending,
                        pending_approvals,
                        usage,
                        cost,
                        error,
                    };
                    *shared.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                    return;
                }
            }
        }
    }
}

/// What to post to go on after a run ended suspended, or `None` (the stream ends): approval
/// decisions when the callback is set, results when every waiting call is a client tool's.
async fn next_input(
    options: &ExecuteOptions,
    session_id: &str,
    status: SessionStatus,
    pending: &[ToolCall],
    approvals: &[ToolCall],
) -> Option<Input> {
    if status == SessionStatus::AwaitingApproval
        && !approvals.is_empty()
        && let Some(decide) = &options.approval
    {
        let request =
            ApprovalRequest { session_id: session_id.to_string(), calls: approvals.to_vec() };
        let decisions: Vec<ApprovalDecision> = decide(request).await;
        return Some(Input::Approvals { approvals: decisions });
    }
    if status != SessionStatus::AwaitingToolExecution {
        return None;
    }
    let calls: Vec<&ToolCall> =
        pending.iter().filter(|c| !approvals.iter().any(|a| a.id == c.id)).collect();
    let tool = |name: &str| options.tools.iter().find(|t| t.spec().name == name).cloned();
    if calls.is_empty() || calls.iter().any(|c| tool(&c.name).is_none()) {
        return None;
    }
    let runs = calls.into_iter().map(|call| {
        let tool = tool(&call.name);
        let call = call.clone();
        async move {
            match tool {
                Some(tool) => run_tool(tool, call).await,
                None => ToolResultMessage::error(&call, format!("Tool {} not found", call.name)),
            }
        }
    });
    Some(Input::ToolResults(futures::future::join_all(runs).await))
}

/// Runs one client tool call to its result: its output (details kept), or an error result
/// when it fails, ends without a result, panics or times out.
async fn run_tool(tool: Arc<dyn Tool>, call: ToolCall) -> ToolResultMessage {
    let cancel = CancellationToken::new();
    let timeout = tool.timeout().unwrap_or(DEFAULT_TOOL_TIMEOUT);
    let ctx = ToolContext::new(call.id.clone(), cancel.clone());
    let mut events = tool.execute(serde_json::Value::clone(&call.arguments), ctx);
    let task = tokio::spawn(async move {
        let mut streamed = String::new();
        while let Some(event) = events.next().await {
            match event {
                ToolEvent::Delta(delta) => streamed.push_str(&delta),
                ToolEvent::Complete(output) => return Ok(output),
                ToolEvent::Error(error) => return Err(error.to_string()),
            }
        }
        Err(format!("the tool ended without a result (output so far: {streamed:?})"))
    });
    let outcome = match tokio::time::timeout(timeout, task).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => Err("the tool panicked".to_string()),
        Err(_) => {
            cancel.cancel();
            Err(format!("the tool timed out after {}", humane(timeout)))
        }
    };
    match outcome {
        Ok(output) => {
            let mut result = ToolResultMessage::ok(&call, output.text_output());
            result.content = output.result_content();
            result.details = output.details;
            result
        }
        Err(message) => ToolResultMessage::error(&call, message),
    }
}

fn humane(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Decoded messages of frames without an id yet, held until the frame that carries their seq.
#[derive(Default)]
struct Held {
    messages: Vec<NativeMessage>,
    /// The bytes of frame data held or read since the last id, against the frame limit.
    bytes: usize,
}

impl Held {
    /// Takes one frame: the messages it completes with their seq (when it carries an id), or
    /// `None` while they wait for one.
    fn frame(&mut self, frame: &SseEvent) -> Result<Option<(u64, Vec<NativeMessage>)>, Error> {
        if frame.data.is_empty() {
            return Ok(None);
        }
        let message = decode_frame(&frame.data).map_err(|e| Error::Protocol(e.to_string()))?;
        self.messages.push(message);
        let Some(id) = frame.id.as_deref() else { return Ok(None) };
        let seq = id
            .trim()
            .parse::<u64>()
            .map_err(|_| Error::Protocol(format!("an event id that is not a seq: {id:?}")))?;
        self.bytes = 0;
        Ok(Some((seq, std::mem::take(&mut self.messages))))
    }
}

/// One run's events, reattaching after a dropped connection. Frames without an `id:` belong to
/// the event whose frame carries it next (the native `session_end` is closed by the
/// `execute_complete` that follows it): they are held until it arrives, so after a drop the
/// server sends them again and nothing is yielded twice or lost.
fn read_run<'a>(
    client: &'a Client,
    request: &'a Request,
    shared: &'a Shared,
) -> impl Stream<Item = Result<Event, Error>> + Send + 'a {
    async_stream::stream! {
        let first = match request {
            Request::Post(body) => client.post_execute(body, None).await,
            Request::Attach { session_id, after } => {
                client.open_stream(session_id, *after, None).await
            }
        };
        let mut response = match first {
            Ok(response) => Some(response),
            Err(error) => {
                yield Err(error);
                return;
            }
        };
        let mut failures = 0u32;
        loop {
            if let Some(open) = response.take() {
                if let Some(id) = open.headers().get("x-session-id").and_then(|v| v.to_str().ok()) {
                    shared.set_session(id);
                }
                let mut parser = SseParser::new();
                let mut frames: Vec<SseEvent> = Vec::new();
                let mut held = Held::default();
                let mut body = open.bytes_stream();
                loop {
                    let chunk = match body.next().await {
                        Some(Ok(chunk)) => chunk,
                        Some(Err(error)) => {
                            tracing::debug!(%error, "the event stream dropped");
                            break;
                        }
                        None => break,
                    };
                    if let Err(error) = parser.push(&chunk, &mut frames) {
                        yield Err(Error::Protocol(error.to_string()));
                        return;
                    }
                    held.bytes += frames.iter().map(|f| f.data.len()).sum::<usize>();
                    if held.bytes + parser.pending_bytes() > client.max_frame {
                        yield Err(Error::FrameTooLarge { limit: client.max_frame });
                        return;
                    }
                    for frame in std::mem::take(&mut frames) {
                        let (seq, messages) = match held.frame(&frame) {
                            Ok(Some(event)) => event,
                            Ok(None) => continue,
                            Err(error) => {
                                yield Err(error);
                                return;
                            }
                        };
                        shared.set_last_event_id(seq);
                        failures = 0;
                        let mut complete = false;
                        for message in messages {
                            complete |= matches!(message, NativeMessage::Complete { .. });
                            yield Ok(Event { seq, message });
                        }
                        if complete {
                            return;
                        }
                    }
                }
            }
            // The connection dropped (or ended) before the run's end: reattach after the last
            // event received.
            let Some(session_id) = shared.session_id() else {
                yield Err(Error::Dropped("the connection dropped before the server named the session".into()));
                return;
            };
            if failures >= client.reconnect.max_tries {
                yield Err(Error::Dropped(format!("{failures} reattachments failed")));
                return;
            }
            tokio::time::sleep(client.reconnect.delay(failures)).await;
            failures += 1;
            shared.reconnects.fetch_add(1, Ordering::Relaxed);
            match client.open_stream(&session_id, shared.last_event_id(), None).await {
                Ok(open) => response = Some(open),
                Err(error) if !error.transient() => {
                    yield Err(error);
                    return;
                }
                Err(error) => tracing::debug!(%error, "reattaching failed"),
            }
        }
    }
}

/// One run's frames in `protocol`, as the server wrote them, reattaching after a dropped
/// connection (a body that fails before its end) after the last frame with an id.
pub(crate) fn frames(
    client: Client,
    body: serde_json::Value,
    protocol: Protocol,
    named: Arc<Mutex<Option<String>>>,
) -> impl Stream<Item = Result<FrameOut, Error>> + Send + 'static {
    async_stream::stream! {
        let mut response = match client.post_execute(&body, Some(protocol)).await {
            Ok(response) => Some(response),
            Err(error) => {
                yield Err(error);
                return;
            }
        };
        let (mut session, mut last, mut failures) = (None::<String>, None::<u64>, 0u32);
        loop {
            if let Some(open) = response.take() {
                if let Some(id) = open.headers().get("x-session-id").and_then(|v| v.to_str().ok()) {
                    session = Some(id.to_string());
                    *named.lock().unwrap_or_else(|e| e.into_inner()) = session.clone();
                }
                let mut parser = SseParser::new();
                let mut frames: Vec<SseEvent> = Vec::new();
                let mut held: Vec<String> = Vec::new();
                let mut held_bytes = 0usize;
                let mut body = open.bytes_stream();
                let ended = loop {
                    let chunk = match body.next().await {
                        Some(Ok(chunk)) => chunk,
                        Some(Err(error)) => {
                            tracing::debug!(%error, "the event stream dropped");
                            break false;
                        }
                        None => break true,
                    };
                    if let Err(error) = parser.push(&chunk, &mut frames) {
                        yield Err(Error::Protocol(error.to_string()));
                        return;
                    }
                    held_bytes += frames.iter().map(|f| f.data.len()).sum::<usize>();
                    if held_bytes + parser.pending_bytes() > client.max_frame {
                        yield Err(Error::FrameTooLarge { limit: client.max_frame });
                        return;
                    }
                    for frame in std::mem::take(&mut frames) {
                        held.push(frame.data);
                        let Some(id) = frame.id.as_deref() else { continue };
                        let Ok(seq) = id.trim().parse::<u64>() else {
                            yield Err(Error::Protocol(format!("an event id that is not a seq: {id:?}")));
                            return;
                        };
                        last = Some(seq);
                        failures = 0;
                        held_bytes = 0;
                        for data in std::mem::take(&mut held) {
                            yield Ok(FrameOut { seq: Some(seq), data });
                        }
                    }
                };
                if ended {
                    // The format's closing frames carry no id.
                    for data in held {
                        yield Ok(FrameOut { seq: None, data });
                    }
                    return;
                }
            }
            let Some(session_id) = session.clone() else {
                yield Err(Error::Dropped("the connection dropped before the server named the session".into()));
                return;
            };
            if failures >= client.reconnect.max_tries {
                yield Err(Error::Dropped(format!("{failures} reattachments failed")));
                return;
            }
            tokio::time::sleep(client.reconnect.delay(failures)).await;
            failures += 1;
            match client.open_stream(&session_id, last, Some(protocol)).await {
                Ok(open) => response = Some(open),
                Err(error) if !error.transient() => {
                    yield Err(error);
                    return;
                }
                Err(error) => tracing::debug!(%error, "reattaching failed"),
            }
        }
    }
}

/// The frames of one run in another wire format ([`Client::execute_frames`]).
pub struct FrameStream {
    pub(crate) inner: BoxStream<'static, Result<FrameOut, Error>>,
    pub(crate) session: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for FrameStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameStream").field("session", &self.session).finish_non_exhaustive()
    }
}

impl FrameStream {
    /// The session, once the server named it.
    pub fn session_id(&self) -> Option<String> {
        self.session.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Stream for FrameStream {
    type Item = Result<FrameOut, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
