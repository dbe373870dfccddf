//! `POST /api/ag-ui`: [AG-UI](https://docs.ag-ui.com) 1.0. A `RunAgentInput` in, AG-UI events out
//! over SSE (rendered by `weft_protocol::agui`).
//!
//! - `threadId` is the session (created on the first run, owned by the caller's API key; another
//!   owner's thread is a 404). `runId` is the client's: the run's events carry Weft's own run id.
//! - `messages` is the client's view of the conversation. On a new thread everything before the
//!   last user message becomes the session's history; on an existing one, the request's input is
//!   what is new: a user message the session has not seen (matched by message id), the `tool`
//!   messages answering the calls the session waits for, or the `resume[]` answers to its
//!   interrupts; an edited user message forks the thread (see `frontends`). A request with
//!   nothing new follows the thread's run under way (that is how a client reconnects), or gets
//!   `RUN_STARTED` + `RUN_FINISHED` when none is. `POST /api/ag-ui/{threadId}/stop` stops it.
//! - A client whose `messages` lack some of the thread's (by user message id, or by count without
//!   ids) gets `MESSAGES_SNAPSHOT` with the whole conversation right after `RUN_STARTED`.
//! - `tools` are the client's tools, remote tools for Weft (a tool named like one of the server's
//!   own runs on the server). `metadata.requiresApproval: true` (or `requiresApproval: true`)
//!   makes every call of it wait for approval. Tools are fixed when the thread is created.
//! - A run that stops on client tools ends with `RUN_FINISHED` outcome `success` and
//!   `pendingToolCallIds`; the results come back as `tool` messages in the next run and are not
//!   echoed back. A run that needs approval ends with outcome `interrupt`, one interrupt per call
//!   (`id` = the tool call id); `resume: [{interruptId, status: "resolved", payload: {approved,
//!   reason?}}]` decides (a `resolved` without `approved: false` approves; `cancelled` denies).
//! - `state` (only when the client asks, `forwardedProps.weft.state: true`; Weft's state is an
//!   extra a client's own state should not carry unasked): every `STATE_SNAPSHOT` is the client's
//!   state with the session's own under `weft`
//!   (`sessionId`, `status`, and while the run goes on `state`: the run's state after each node
//!   run, whose changes follow as `STATE_DELTA` under `/weft/state`); the last, sent before the
//!   run's last event, has its final status.
//! - `context` entries and `system` / `developer` messages join the new session's system prompt.
//! - `forwardedProps.weft` takes the options of `/api/agent/execute` (`provider`, `model`,
//!   `systemPrompt`, `maxTurns`, `multitask`, `onDisconnect`).

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::{
    ApprovalDecision, AssistantContent, AssistantMessage, Input, Message, SessionStatus,
    StopReason, TextContent, ToolCall, ToolResultMessage, ToolSpec, UserContent, UserMessage,
    now_ms,
};
use weft_protocol::agui::{self, AgUiEncoder, AgUiVersion, StateView};

use crate::AppState;
use crate::api::{AbortResponse, ExecuteContext, ExecuteOptions, JsonBody};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::frontends::{self, Conversation, Intent, Plan, arguments};

/// AG-UI's `RunAgentInput` (unknown fields are ignored).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAgentInput {
    /// The conversation: Weft's session id.
    pub(crate) thread_id: String,
    /// The client's id of this run.
    #[serde(default)]
    pub(crate) run_id: Option<String>,
    /// The AG-UI version the client speaks (1.0 clients send it, 0.0.x ones do not): what the
    /// events may carry.
    #[serde(default)]
    pub(crate) protocol_version: Option<String>,
    /// The state the run starts from.
    #[serde(default)]
    pub(crate) state: Option<Value>,
    /// The whole conversation, in order.
    pub(crate) messages: Vec<AgUiMessage>,
    /// The client's tools (remote tools).
    #[serde(default, deserialize_with = "null_default")]
    pub(crate) tools: Vec<AgUiTool>,
    /// Ambient information for the run.
    #[serde(default, deserialize_with = "null_default")]
    pub(crate) context: Vec<AgUiContext>,
    /// Application values; `weft` holds the execute options.
    #[serde(default)]
    pub(crate) forwarded_props: Option<Value>,
    /// Answers to the interrupts of the previous run.
    #[serde(default, deserialize_with = "null_default")]
    pub(crate) resume: Vec<ResumeEntry>,
}

fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// An AG-UI message.
#[derive(Debug, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase", rename_all_fields = "camelCase")]
pub(crate) enum AgUiMessage {
    /// From the user.
    User {
        /// Its id (the client's).
        #[serde(default)]
        id: Option<String>,
        /// Text or content parts.
        content: Content,
    },
    /// From the agent.
    Assistant {
        /// Its text.
        #[serde(default)]
        content: Option<String>,
        /// Its tool calls.
        #[serde(default, deserialize_with = "null_default")]
        tool_calls: Vec<AgUiToolCall>,
    },
    /// A tool's result.
    Tool {
        /// The result.
        content: Content,
        /// The call it answers.
        tool_call_id: String,
        /// Set when the tool failed.
        #[serde(default)]
        error: Option<String>,
    },
    /// A system message.
    System {
        /// Its text.
        content: String,
    },
    /// A developer message.
    Developer {
        /// Its text.
        content: String,
    },
    /// `reasoning`, `activity` and roles to come: not part of the model's conversation.
    #[serde(other)]
    Other,
}

/// Text, or content parts (`{type: "text", text}`; other parts are not read).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    /// Text.
    Text(String),
    /// Parts.
    Parts(Vec<Value>),
}

impl Content {
    fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        }
    }
}

/// A tool call of an assistant message.
#[derive(Debug, Deserialize)]
pub(crate) struct AgUiToolCall {
    /// Its id.
    pub(crate) id: String,
    /// The function called.
    pub(crate) function: AgUiFunctionCall,
}

/// `{name, arguments}` (arguments: a JSON text).
#[derive(Debug, Deserialize)]
pub(crate) struct AgUiFunctionCall {
    /// The tool.
    pub(crate) name: String,
    /// The arguments.
    #[serde(default)]
    pub(crate) arguments: Value,
}

/// A client tool.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgUiTool {
    /// Its name.
    pub(crate) name: String,
    /// What it does.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// JSON Schema of its arguments.
    #[serde(default)]
    pub(crate) parameters: Option<Value>,
    /// `requiresApproval: true` asks for approval of every call.
    #[serde(default)]
    pub(crate) metadata: Option<Value>,
    /// The same, outside `metadata`.
    #[serde(default)]
    pub(crate) requires_approval: Option<bool>,
}

/// A context entry.
#[derive(Debug, Deserialize)]
pub(crate) struct AgUiContext {
    /// What it is.
    #[serde(default)]
    pub(crate) description: String,
    /// The context itself.
    #[serde(default)]
    pub(crate) value: Value,
}

/// An answer to an interrupt.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    /// The interrupt (Weft: the tool call id).
    pub(crate) interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub(crate) status: ResumeStatus,
    /// For a tool call: `{approved, reason?}`.
    #[serde(default)]
    pub(crate) payload: Option<Value>,
}

/// How an interrupt was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResumeStatus {
    /// Answered.
    Resolved,
    /// Abandoned.
    Cancelled,
}

impl AgUiTool {
    pub(crate) fn spec(&self) -> ToolSpec {
        let approval = self.requires_approval.unwrap_or(false)
            || self
                .metadata
                .as_ref()
                .and_then(|m| m.get("requiresApproval"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
        ToolSpec {
            name: self.name.clone(),
            label: String::new(),
            description: self.description.clone().unwrap_or_default(),
            parameters: self
                .parameters
                .clone()
                .filter(|p| p.is_object())
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            requires_approval: approval,
        }
    }
}

pub(crate) fn decision(entry: &ResumeEntry) -> ApprovalDecision {
    let payload = entry.payload.as_ref();
    let reason = payload.and_then(|p| p.get("reason")).and_then(Value::as_str).map(str::to_string);
    let approved = entry.status == ResumeStatus::Resolved
        && match payload {
            Some(Value::Bool(b)) => *b,
            Some(p) => p.get("approved").and_then(Value::as_bool).unwrap_or(true),
            None => true,
        };
    let reason = match (approved, reason, entry.status) {
        (true, _, _) => None,
        (false, Some(reason), _) => Some(reason),
        (false, None, ResumeStatus::Cancelled) => Some("The user cancelled the call.".into()),
        (false, None, ResumeStatus::Resolved) => Some("The user denied the call.".into()),
    };
    ApprovalDecision { tool_call_id: entry.interrupt_id.clone(), approved, reason }
}

/// The request's conversation in Weft's terms, and its system prompt.
pub(crate) fn conversation(input: &RunAgentInput) -> (Conversation, Option<String>) {
    let mut names = std::collections::HashMap::new();
    let mut history = Vec::new();
    let mut system = Vec::new();
    let mut user_count = 0;
    for message in &input.messages {
        match message {
            AgUiMessage::User { id, content } => {
                user_count += 1;
                history.push(Message::User(UserMessage {
                    content: vec![UserContent::text(content.text())],
                    timestamp: now_ms(),
                    id: id.as_deref().filter(|id| !id.is_empty()).map(Into::into),
                }));
            }
            AgUiMessage::Assistant { content, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(AssistantContent::Text(TextContent { text: text.to_string() }));
                }
                for call in tool_calls {
                    names.insert(call.id.clone(), call.function.name.clone());
                    blocks.push(AssistantContent::ToolCall(ToolCall {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: arguments(&call.function.arguments).into(),
                    }));
                }
                let mut message = AssistantMessage::empty("ag-ui", "client");
                message.stop_reason =
                    if tool_calls.is_empty() { StopReason::Stop } else { StopReason::ToolUse };
                message.content = blocks;
                history.push(Message::Assistant(message));
            }
            AgUiMessage::Tool { content, tool_call_id, error } => {
                let text = match error {
                    Some(error) if content.text().is_empty() => error.clone(),
                    _ => content.text(),
                };
                history.push(Message::ToolResult(ToolResultMessage {
                    tool_call_id: tool_call_id.clone(),
                    tool_name: names.get(tool_call_id).cloned().unwrap_or_default(),
                    content: vec![UserContent::text(text)],
                    details: None,
                    is_error: error.is_some(),
                    timestamp: now_ms(),
                }));
            }
            AgUiMessage::System { content } | AgUiMessage::Developer { content } => {
                system.push(content.clone());
            }
            AgUiMessage::Other => {}
        }
    }
    for entry in &input.context {
        let value = match &entry.value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        system.push(format!("{}: {value}", entry.description));
    }
    let last_user = match history.last() {
        Some(Message::User(_)) => match history.pop() {
            Some(Message::User(user)) => Some(user),
            _ => None,
        },
        _ => None,
    };
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    (Conversation { history, last_user, user_count }, system)
}

pub(crate) fn options(input: &RunAgentInput) -> Result<ExecuteOptions, ApiError> {
    let Some(weft) = input.forwarded_props.as_ref().and_then(|p| p.get("weft")) else {
        return Ok(ExecuteOptions::default());
    };
    let mut weft = weft.clone();
    // `state` is this endpoint's own (see `wants_state`), not an execute option.
    if let Some(map) = weft.as_object_mut() {
        map.remove("state");
    }
    serde_path_to_error::deserialize(weft).map_err(|e| {
        let path = e.path().to_string();
        ApiError::bad_request(
            "bad_request",
            format!("invalid request: forwardedProps.weft.{path}: {}", e.inner()),
        )
    })
}

/// Whether the client asked for Weft's own state (`forwardedProps.weft.state: true`); a value
/// that is not a boolean is refused.
fn wants_state(input: &RunAgentInput) -> Result<bool, ApiError> {
    match input.forwarded_props.as_ref().and_then(|p| p.get("weft")).and_then(|w| w.get("state")) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(asked)) => Ok(*asked),
        Some(_) => Err(ApiError::bad_request(
            "bad_request",
            "invalid request: forwardedProps.weft.state: expected a boolean",
        )),
    }
}

/// Run an agent with AG-UI (`RunAgentInput` in, AG-UI events out).
#[utoipa::path(
    post,
    path = "/api/ag-ui",
    tag = "front ends",
    request_body(content = Object, description = "AG-UI `RunAgentInput`: `threadId` (the session), `runId`, `messages`, `tools` (the client's: remote tools; `metadata.requiresApproval`), `state`, `context`, `forwardedProps` (`weft`: execute options), `resume[]`"),
    responses(
        (status = 200, description = "AG-UI events (SSE): `RUN_STARTED` … `RUN_FINISHED` (outcome `success` with `pendingToolCallIds` for client tools, `interrupt` for approvals) or `RUN_ERROR`. A request the server cannot take (malformed, another owner's thread, answers for unknown calls) is answered here too: `RUN_STARTED`, then `RUN_ERROR` whose `message` says why and whose `code` is the error's code",
         content_type = "text/event-stream", body = String),
        (status = 400, description = "The body is not a `RunAgentInput`: not JSON, or the wrong shape (the message says where)", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 413, description = "The body is larger than this server accepts", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn run(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    body: Result<JsonBody<RunAgentInput>, ApiError>,
) -> Response {
    // A body that is not a `RunAgentInput` (not JSON, the wrong shape) is a client's bug, never
    // something an AG-UI client sends: a plain 4xx. What a page can meet comes in the stream.
    let input = match body {
        Ok(JsonBody(input)) => input,
        Err(error) => return error.into_response(),
    };
    let (thread, run) = (input.thread_id.clone(), input.run_id.clone());
    agent_run(state, caller, input)
        .await
        .unwrap_or_else(|error| error_stream(&error, &thread, run.as_deref()))
}

/// A run's ids as the client gave them (a new run id when it gave none).
fn run_ids(thread: &str, run: Option<&str>) -> (String, String) {
    let run = run.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_string);
    (thread.to_string(), run)
}

/// An error as AG-UI says it: the client's run opened, then `RUN_ERROR` with a sentence.
fn error_stream(error: &ApiError, thread: &str, run: Option<&str>) -> Response {
    let (thread, run) = run_ids(thread, run);
    let frames = agui::refusal(&thread, &run, &error.detail.message, &error.detail.code);
    frontends::refusal(error, &frames, None)
}

/// A run that brought nothing new: opened and finished at once.
fn nothing_new(thread: &str, run: Option<&str>) -> Response {
    let (thread, run) = run_ids(thread, run);
    frontends::sse_frames(&agui::empty_run(&thread, &run), None)
}

async fn agent_run(
    state: Arc<AppState>,
    caller: Caller,
    input: RunAgentInput,
) -> Result<Response, ApiError> {
    let mut options = options(&input)?;
    let weft_state = wants_state(&input)?;
    if options.multitask.is_none() {
        options.multitask = Some(state.settings.frontend_multitask);
    }
    let chat = frontends::chat(&state, &caller, &input.thread_id).await?;
    let (conversation, system) = conversation(&input);
    let mut answered: Vec<String> = input
        .messages
        .iter()
        .filter_map(|m| match m {
            AgUiMessage::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    // The conversation as the session has it, for a client whose messages lack it (a reloaded
    // page, a client sending only its new message): sent as `MESSAGES_SNAPSHOT` once the run
    // has started.
    let (target, plan, history_snapshot) = match &chat {
        None => match conversation.last_user.clone() {
            Some(user) => (input.thread_id.clone(), Plan::Run(Input::User(user)), None),
            None => {
                return Err(ApiError::bad_request(
                    "user_message_required",
                    format!(
                        "thread {:?} is new: its messages must end with a user message",
                        input.thread_id
                    ),
                ));
            }
        },
        Some(chat) => {
            match continue_chat(&state, &caller, &input, chat, &conversation, &mut answered).await?
            {
                Some(next) => next,
                None => return Ok(nothing_new(&input.thread_id, input.run_id.as_deref())),
            }
        }
    };
    let client_state = input.state.clone();
    let tools: Vec<ToolSpec> = input.tools.iter().map(AgUiTool::spec).collect();
    let history = conversation.history;
    let streamed = frontends::start(
        &state,
        &caller,
        &target,
        chat.is_some(),
        plan,
        move || ExecuteContext { messages: history, tools, system_prompt: system },
        options,
    )
    .await?;
    // The run's own state (react's counters, a tree's or a graph's) is not the client's: it
    // goes under `weft`, the client's state around it untouched, and only to a client that
    // asked for it.
    let state_view =
        if weft_state { StateView::ClientWithWeft(client_state) } else { StateView::Hidden };
    let mut encoder = AgUiEncoder::new()
        .client_answered(answered)
        .version(AgUiVersion::from_protocol_version(input.protocol_version.as_deref()))
        .state_view(state_view);
    // Read from the session in place: the conversation is not copied for the snapshot.
    if let (Some(snapshot), Some(chat)) = (&history_snapshot, &chat) {
        encoder = encoder.messages_snapshot(&chat.current, chat.session.messages.iter());
        if let Snapshot::SessionThen(new) = snapshot {
            encoder = encoder.messages_snapshot("new", std::iter::once(new));
        }
    }
    Ok(frontends::sse(state, streamed, Box::new(encoder), None))
}

/// What a run on an existing chat does with what the client sent: the branch to run on, the
/// plan, and the snapshot of the conversation to send first, if any; `None` when the client
/// brings nothing new and no run is under way. Resumed interrupts are taken out of `answered`.
async fn continue_chat(
    state: &AppState,
    caller: &Caller,
    input: &RunAgentInput,
    chat: &frontends::Chat,
    conversation: &Conversation,
    answered: &mut Vec<String>,
) -> Result<Option<(String, Plan, Option<Snapshot>)>, ApiError> {
    let session = &chat.session;
    let pending = session.pending_tool_calls();
    let next = if !input.resume.is_empty() {
        // CopilotKit's `useInterrupt` answers with `resume` and also adds a tool message
        // of its own for the call (the resume payload as its content). That message is
        // not the call's result: the server runs the call, and its result is sent
        // (not held back as the client's), after a snapshot of the conversation as the
        // session has it, which takes the stand-in message out of the client's list.
        let mut history_snapshot = None;
        let before = answered.len();
        answered.retain(|id| !input.resume.iter().any(|r| r.interrupt_id == *id));
        if answered.len() != before {
            history_snapshot = Some(Snapshot::Session);
        }
        let approvals = input.resume.iter().map(decision).collect();
        Some((chat.current.clone(), Plan::Run(Input::Approvals { approvals }), history_snapshot))
    } else if !pending.is_empty()
        && let results = tool_results(&conversation.history, &pending)
        && !results.is_empty()
    {
        Some((chat.current.clone(), Plan::Run(Input::ToolResults(results)), None))
    } else {
        let last_user = conversation.last_user.as_ref();
        match frontends::intent(session, last_user, conversation.user_count, false) {
            Intent::New(user) => {
                let snapshot = lacks_history(session, conversation)
                    .then(|| Snapshot::SessionThen(Message::User(user.clone())));
                Some((chat.current.clone(), Plan::Run(Input::User(user)), snapshot))
            }
            Intent::Fork { at, message } => {
                let branch = frontends::fork(state, caller, chat, at).await?;
                Some((branch, Plan::Run(Input::User(message)), None))
            }
            // A client reconnecting to a run under way follows it.
            Intent::Nothing if chat.handle.status() == SessionStatus::Running => {
                Some((chat.current.clone(), Plan::Attach, None))
            }
            Intent::Nothing => None,
        }
    };
    Ok(next)
}

/// The conversation a run's `MESSAGES_SNAPSHOT` shows a client (see
/// [`AgUiEncoder::messages_snapshot`]).
enum Snapshot {
    /// The session's messages.
    Session,
    /// The session's messages, then the request's new one.
    SessionThen(Message),
}

/// Whether the request's messages lack some of the session's: a user message of the session
/// whose id the request does not carry, or (without ids) fewer user messages than it has.
fn lacks_history(session: &weft_core::Session, conversation: &Conversation) -> bool {
    let sent: std::collections::HashSet<&str> = conversation
        .history
        .iter()
        .filter_map(|m| match m {
            Message::User(u) => u.id.as_deref(),
            _ => None,
        })
        .collect();
    let mut stored = 0;
    for message in session.messages.iter() {
        if let Message::User(user) = message {
            stored += 1;
            if user.id.as_deref().is_some_and(|id| !sent.contains(id)) {
                return true;
            }
        }
    }
    // The request's user messages but its new one.
    conversation.user_count.saturating_sub(1) < stored
}

/// Stop the thread's run (what a page's stop button should call beside `abortRun()`).
#[utoipa::path(
    post,
    path = "/api/ag-ui/{threadId}/stop",
    tag = "front ends",
    params(("threadId" = String, Path, description = "The thread (session) id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "`{\"aborted\": true}` when a run was stopped, `false` when none was under way", body = AbortResponse),
        (status = 400, description = "Invalid thread id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such thread for this caller", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn stop(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(thread_id): Path<String>,
) -> Result<axum::Json<AbortResponse>, ApiError> {
    let Some(chat) = frontends::chat(&state, &caller, &thread_id).await? else {
        return Err(ApiError::session_not_found(&thread_id));
    };
    Ok(axum::Json(AbortResponse { aborted: frontends::stop(&chat).await }))
}

/// The results, among the conversation's tool messages, of the calls the session waits for.
fn tool_results(history: &[Message], pending: &[ToolCall]) -> Vec<ToolResultMessage> {
    history
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => pending.iter().find(|c| c.id == r.tool_call_id).map(|c| {
                let mut r = r.clone();
                r.tool_name = c.name.clone();
                r
            }),
            _ => None,
        })
        .collect()
}
