//! `POST /api/chat`, `GET /api/chat/{id}`, `GET /api/chat/{id}/stream` and
//! `POST /api/chat/{id}/stop`: the Vercel AI SDK's `useChat` (AI SDK 6 and 7,
//! `DefaultChatTransport`). The UI message stream out (rendered by `weft_protocol::vercel`), with
//! the header `x-vercel-ai-ui-message-stream: v1`.
//!
//! - `id` is the chat: the session of that id (created on the first request, owned by the
//!   caller's API key), or its newest branch once it has forked. `messages` (or `message`, one)
//!   are the client's view of the conversation; what is new in them is the input (see
//!   `frontends`): a user message the session has not seen (matched by `UIMessage.id`); the
//!   outputs of the client-side tool parts the session waits for (`output-available` /
//!   `output-error`); the approval responses (`approval-responded` parts, `approval.approved`)
//!   of the calls waiting for approval. An edited user message or `trigger:
//!   "regenerate-message"` forks the chat. A request with nothing new gets an empty finished
//!   stream.
//! - Weft's extras in the body (`DefaultChatTransport({ body })`): `tools` (Weft tool specs
//!   `{name, description, parameters, requiresApproval?}`: remote tools the client runs, or
//!   server tools by name), `system` (the system prompt) and `options` (the options of
//!   `/api/agent/execute`). Tools and the system prompt are fixed when the chat is created.
//! - Results the client supplied are not echoed back; a denied call ends as
//!   `tool-output-denied`.
//! - A refusal of a well-formed request is the stream's `error` part (code in `x-weft-error`).
//! - `GET /api/chat/{id}/stream` streams the run under way from its start (`useChat({ resume:
//!   true })`), 204 when nothing runs (a chat never seen included).

use std::collections::HashSet;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use weft_core::{
    ApprovalDecision, AssistantContent, AssistantMessage, Input, Message, SessionStatus,
    StopReason, TextContent, ThinkingContent, ToolCall, ToolResultMessage, ToolSpec, UserContent,
    UserMessage, now_ms,
};
use weft_protocol::vercel::{self, HEADER, VercelEncoder};

use crate::AppState;
use crate::api::{AbortResponse, ExecuteContext, ExecuteOptions, JsonBody};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::frontends::{self, Conversation, Intent, Plan, arguments, output_text};

/// The body `useChat` posts (unknown fields are ignored).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatRequest {
    /// The chat: Weft's session id.
    pub(crate) id: String,
    /// The conversation as UI messages: all of it, or only its newest part.
    #[serde(default)]
    pub(crate) messages: Vec<UiMessage>,
    /// One message instead of `messages` (the AI SDK docs' `prepareSendMessagesRequest` that
    /// sends only the last message: `{ id, message }`).
    #[serde(default)]
    pub(crate) message: Option<UiMessage>,
    /// `submit-message` (default) or `regenerate-message`.
    #[serde(default)]
    pub(crate) trigger: Option<String>,
    /// Weft: the chat's tools (on creation).
    #[serde(default)]
    pub(crate) tools: Vec<ToolSpec>,
    /// Weft: the system prompt (on creation).
    #[serde(default)]
    pub(crate) system: Option<String>,
    /// Weft: the execute options.
    #[serde(default)]
    pub(crate) options: ExecuteOptions,
}

/// A UI message.
#[derive(Debug, Deserialize)]
pub(crate) struct UiMessage {
    /// Its id (the client's).
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// `system`, `user` or `assistant`.
    pub(crate) role: UiRole,
    /// Its parts.
    #[serde(default)]
    pub(crate) parts: Vec<Value>,
}

/// A UI message's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum UiRole {
    /// System.
    System,
    /// User.
    User,
    /// Assistant.
    Assistant,
}

/// A tool part of a UI message (`tool-NAME` or `dynamic-tool`).
pub(crate) struct ToolPart<'a> {
    name: String,
    id: &'a str,
    state: &'a str,
    part: &'a Value,
}

pub(crate) fn tool_part(part: &Value) -> Option<ToolPart<'_>> {
    let kind = part.get("type")?.as_str()?;
    let name = if kind == "dynamic-tool" {
        part.get("toolName")?.as_str()?.to_string()
    } else {
        kind.strip_prefix("tool-")?.to_string()
    };
    Some(ToolPart {
        name,
        id: part.get("toolCallId")?.as_str()?,
        state: part.get("state").and_then(Value::as_str).unwrap_or(""),
        part,
    })
}

fn text_of(part: &Value) -> Option<&str> {
    part.get("text").and_then(Value::as_str)
}

/// The tool result a finished tool part holds, if it holds one.
pub(crate) fn part_result(tool: &ToolPart<'_>) -> Option<ToolResultMessage> {
    let (text, is_error) = match tool.state {
        "output-available" => (output_text(tool.part.get("output").unwrap_or(&Value::Null)), false),
        "output-error" => (
            tool.part.get("errorText").and_then(Value::as_str).unwrap_or("error").to_string(),
            true,
        ),
        "output-denied" => {
            let reason = tool
                .part
                .get("approval")
                .and_then(|a| a.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("The user denied the call.");
            (reason.to_string(), true)
        }
        _ => return None,
    };
    Some(ToolResultMessage {
        tool_call_id: tool.id.to_string(),
        tool_name: tool.name.clone(),
        content: vec![UserContent::text(text)],
        details: None,
        is_error,
        timestamp: now_ms(),
    })
}

/// Checks what the parts Weft reads hold (parts are free-form JSON to serde): a part is an
/// object with a string `type`; a `text` or `reasoning` part has a string `text`; a tool part a
/// string `toolCallId` (and a `dynamic-tool` a string `toolName`), a string `state` and an
/// `approval.approved` that is a boolean, when they are there. A mistake is a 400 saying where,
/// never a message silently left empty.
fn check_parts(request: &ChatRequest) -> Result<(), ApiError> {
    let kind = |value: &Value| match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    for (i, message) in request.messages.iter().enumerate() {
        for (j, part) in message.parts.iter().enumerate() {
            let at = format!("messages[{i}].parts[{j}]");
            let wrong = |field: &str, want: &str, got: &Value| {
                ApiError::bad_request(
                    "bad_request",
                    format!("invalid request: {at}{field}: expected {want}, got {}", kind(got)),
                )
            };
            let Some(map) = part.as_object() else { return Err(wrong("", "an object", part)) };
            let part_type = match map.get("type") {
                Some(Value::String(t)) => t.as_str(),
                Some(other) => return Err(wrong(".type", "a string", other)),
                None => {
                    return Err(ApiError::bad_request(
                        "bad_request",
                        format!("invalid request: {at}: missing field `type`"),
                    ));
                }
            };
            let mut strings: Vec<&str> = Vec::new();
            match part_type {
                "text" | "reasoning" => strings.push("text"),
                "dynamic-tool" => strings.extend(["toolCallId", "toolName"]),
                t if t.starts_with("tool-") => strings.push("toolCallId"),
                _ => continue,
            }
            for field in strings {
                match map.get(field) {
                    Some(Value::String(_)) => {}
                    Some(other) => return Err(wrong(&format!(".{field}"), "a string", other)),
                    None => {
                        return Err(ApiError::bad_request(
                            "bad_request",
                            format!("invalid request: {at}: missing field `{field}`"),
                        ));
                    }
                }
            }
            if let Some(state) = map.get("state").filter(|s| !s.is_string()) {
                return Err(wrong(".state", "a string", state));
            }
            if let Some(approval) = map.get("approval") {
                match approval.get("approved") {
                    None | Some(Value::Bool(_)) => {}
                    Some(other) => return Err(wrong(".approval.approved", "a boolean", other)),
                }
            }
        }
    }
    Ok(())
}

/// The request's conversation in Weft's terms, and its system messages.
pub(crate) fn conversation(request: &ChatRequest) -> (Conversation, Vec<String>) {
    let mut history = Vec::new();
    let mut system = Vec::new();
    let mut user_count = 0;
    for message in &request.messages {
        match message.role {
            UiRole::System => {
                system.extend(message.parts.iter().filter_map(text_of).map(str::to_string));
            }
            UiRole::User => {
                user_count += 1;
                let text: String = message
                    .parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(text_of)
                    .collect();
                history.push(Message::User(UserMessage {
                    content: vec![UserContent::text(text)],
                    timestamp: now_ms(),
                    id: message.id.as_deref().filter(|id| !id.is_empty()).map(Into::into),
                }));
            }
            UiRole::Assistant => {
                // One UI message is a whole run: each step is a model call, its tool results
                // follow it.
                let mut blocks = Vec::new();
                let mut results = Vec::new();
                let flush = |blocks: &mut Vec<AssistantContent>,
                             results: &mut Vec<ToolResultMessage>,
                             history: &mut Vec<Message>| {
                    if blocks.is_empty() {
                        return;
                    }
                    let mut m = AssistantMessage::empty("vercel", "client");
                    m.stop_reason =
                        if blocks.iter().any(|b| matches!(b, AssistantContent::ToolCall(_))) {
                            StopReason::ToolUse
                        } else {
                            StopReason::Stop
                        };
                    m.content = std::mem::take(blocks);
                    history.push(Message::Assistant(m));
                    history.extend(results.drain(..).map(Message::ToolResult));
                };
                for part in &message.parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("step-start") => flush(&mut blocks, &mut results, &mut history),
                        Some("text") => blocks.push(AssistantContent::Text(TextContent {
                            text: text_of(part).unwrap_or("").to_string(),
                        })),
                        Some("reasoning") => {
                            blocks.push(AssistantContent::Thinking(ThinkingContent {
                                thinking: text_of(part).unwrap_or("").to_string(),
                                signature: None,
                            }))
                        }
                        _ => {
                            if let Some(tool) = tool_part(part) {
                                blocks.push(AssistantContent::ToolCall(ToolCall {
                                    id: tool.id.to_string(),
                                    name: tool.name.clone(),
                                    arguments: arguments(part.get("input").unwrap_or(&Value::Null))
                                        .into(),
                                }));
                                results.extend(part_result(&tool));
                            }
                        }
                    }
                }
                flush(&mut blocks, &mut results, &mut history);
            }
        }
    }
    let last_user = match history.last() {
        Some(Message::User(_)) => match history.pop() {
            Some(Message::User(user)) => Some(user),
            _ => None,
        },
        _ => None,
    };
    (Conversation { history, last_user, user_count }, system)
}

/// `submit-message` (or none) and `regenerate-message` are taken; anything else is refused.
/// Whether the client asks for another answer.
pub(crate) fn regenerates(trigger: Option<&str>) -> Result<bool, ApiError> {
    match trigger {
        None | Some("submit-message") => Ok(false),
        Some("regenerate-message") => Ok(true),
        Some(other) => Err(ApiError::bad_request(
            "bad_request",
            format!("invalid request: trigger: unknown trigger {other:?}"),
        )),
    }
}

/// Chat with the Vercel AI SDK's `useChat` (its request in, the UI message stream out).
#[utoipa::path(
    post,
    path = "/api/chat",
    tag = "front ends",
    request_body(content = Object, description = "The `useChat` request: `id` (the chat), `messages` (UI messages with ids and parts: the whole conversation or only its last message; client tool outputs, approval responses), `trigger` (`submit-message`, `regenerate-message`); Weft's extras: `tools`, `system`, `options`"),
    responses(
        (status = 200, description = "The UI message stream (SSE, header `x-vercel-ai-ui-message-stream: v1`, ends with `[DONE]`). A request the server cannot take is answered here too, as one `error` part whose `errorText` says why (`useChat` shows it as its error)",
         content_type = "text/event-stream", body = String),
        (status = 400, description = "The body is not a chat request: not JSON, or the wrong shape (the message says where)", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 413, description = "The body is larger than this server accepts", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn post(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    body: Result<JsonBody<ChatRequest>, ApiError>,
) -> Response {
    // A body that is not a chat request (not JSON, the wrong shape) is a client's bug, never
    // something useChat sends: a plain 4xx. What a page can meet comes in the stream.
    let request = match body {
        Ok(JsonBody(request)) => request,
        Err(error) => return error.into_response(),
    };
    chat(state, caller, request).await.unwrap_or_else(|error| error_stream(&error))
}

/// An error as the UI message stream says it: one `error` part, then the end.
fn error_stream(error: &ApiError) -> Response {
    frontends::refusal(error, &vercel::refusal(&error.detail.message), Some(HEADER))
}

/// A finished stream with nothing in it: the request brought nothing new.
fn nothing_new() -> Response {
    frontends::sse_frames(&vercel::empty_stream(), Some(HEADER))
}

async fn chat(
    state: Arc<AppState>,
    caller: Caller,
    request: ChatRequest,
) -> Result<Response, ApiError> {
    let mut request = request;
    if let Some(message) = request.message.take() {
        request.messages.push(message);
    }
    let regenerate = regenerates(request.trigger.as_deref())?;
    check_parts(&request)?;
    let chat = frontends::chat(&state, &caller, &request.id).await?;
    let (conversation, system) = conversation(&request);
    let mut answered = HashSet::new();
    let mut denied = HashSet::new();
    let mut approved = HashSet::new();
    let mut options = request.options;
    if options.multitask.is_none() {
        options.multitask = Some(state.settings.frontend_multitask);
    }
    let (target, plan) = match &chat {
        None => match conversation.last_user.clone() {
            Some(user) => (request.id.clone(), Plan::Run(Input::User(user))),
            None => {
                return Err(ApiError::bad_request(
                    "user_message_required",
                    format!(
                        "chat {:?} is new: its messages must end with a user message",
                        request.id
                    ),
                ));
            }
        },
        Some(chat) => {
            let session = &chat.session;
            let approvals = session.pending_approvals();
            let pending = session.pending_tool_calls();
            let last = request.messages.iter().rev().find(|m| m.role == UiRole::Assistant);
            let parts: Vec<ToolPart<'_>> =
                last.map(|m| m.parts.iter().filter_map(tool_part).collect()).unwrap_or_default();
            let decisions = approval_decisions(&parts, &approvals);
            let results: Vec<ToolResultMessage> = parts
                .iter()
                .filter(|p| pending.iter().any(|c| c.id == p.id))
                .filter_map(part_result)
                .collect();
            if session.status == SessionStatus::AwaitingApproval && !decisions.is_empty() {
                denied.extend(
                    decisions.iter().filter(|d| !d.approved).map(|d| d.tool_call_id.clone()),
                );
                approved.extend(
                    decisions.iter().filter(|d| d.approved).map(|d| d.tool_call_id.clone()),
                );
                (chat.current.clone(), Plan::Run(Input::Approvals { approvals: decisions }))
            } else if !results.is_empty() {
                answered.extend(results.iter().map(|r| r.tool_call_id.clone()));
                (chat.current.clone(), Plan::Run(Input::ToolResults(results)))
            } else {
                let last_user = conversation.last_user.as_ref();
                match frontends::intent(session, last_user, conversation.user_count, regenerate) {
                    Intent::New(user) => (chat.current.clone(), Plan::Run(Input::User(user))),
                    Intent::Fork { at, message } => {
                        let branch = frontends::fork(&state, &caller, chat, at).await?;
                        (branch, Plan::Run(Input::User(message)))
                    }
                    Intent::Nothing => return Ok(nothing_new()),
                }
            }
        }
    };
    let tools = request.tools;
    let history = conversation.history;
    let system = request.system.or_else(|| (!system.is_empty()).then(|| system.join("\n\n")));
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
    let encoder =
        encoder().client_answered(answered).client_denied(denied).client_approved(approved);
    Ok(frontends::sse(state, streamed, Box::new(encoder), Some(HEADER)))
}

/// The approval decisions among a message's tool parts, for the calls awaiting approval: a
/// denial without a reason gets a default one, so the model learns why.
fn approval_decisions(parts: &[ToolPart<'_>], awaiting: &[ToolCall]) -> Vec<ApprovalDecision> {
    parts
        .iter()
        .filter(|p| awaiting.iter().any(|c| c.id == p.id))
        .filter_map(|p| {
            let approval = p.part.get("approval")?;
            let approved = approval.get("approved")?.as_bool()?;
            let reason = approval.get("reason").and_then(Value::as_str).map(str::to_string);
            Some(ApprovalDecision {
                tool_call_id: p.id.to_string(),
                approved,
                reason: if approved {
                    None
                } else {
                    Some(reason.unwrap_or_else(|| "The user denied the call.".into()))
                },
            })
        })
        .collect()
}

/// The chat's conversation as AI SDK `UIMessage`s (its current branch), so a page can restore
/// `useChat({ messages })` on load. A run is one assistant message: a `step-start` per model
/// call, then its reasoning, text and tool parts, each tool part in the state the session has it
/// (`output-available`, `output-error`, `input-available` for a call the client must run,
/// `approval-requested`). The message of the run under way has the run's id, as its stream's
/// `start` says, so resuming replaces it instead of adding a second.
#[utoipa::path(
    get,
    path = "/api/chat/{id}",
    tag = "front ends",
    params(("id" = String, Path, description = "The chat (session) id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "`{id, branchId, status, messages}`: `messages` are AI SDK UI messages", body = Object),
        (status = 400, description = "Invalid chat id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such chat for this caller", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<axum::Json<Value>, ApiError> {
    let Some(chat) = frontends::chat(&state, &caller, &id).await? else {
        return Err(ApiError::session_not_found(&id));
    };
    let session = chat.handle.snapshot();
    let messages = vercel::ui_messages(&session, &chat.current);
    Ok(axum::Json(json!({
        "id": id,
        "branchId": chat.current,
        "status": session.status,
        "messages": messages,
    })))
}

/// Stop the chat's run (what `useChat`'s `stop()` should also call).
#[utoipa::path(
    post,
    path = "/api/chat/{id}/stop",
    tag = "front ends",
    params(("id" = String, Path, description = "The chat (session) id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "`{\"aborted\": true}` when a run was stopped, `false` when none was under way", body = AbortResponse),
        (status = 400, description = "Invalid chat id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such chat for this caller", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn stop(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<axum::Json<AbortResponse>, ApiError> {
    let Some(chat) = frontends::chat(&state, &caller, &id).await? else {
        return Err(ApiError::session_not_found(&id));
    };
    Ok(axum::Json(AbortResponse { aborted: frontends::stop(&chat).await }))
}

/// Resume the chat's running stream (`useChat({ resume: true })`).
#[utoipa::path(
    get,
    path = "/api/chat/{id}/stream",
    tag = "front ends",
    params(("id" = String, Path, description = "The chat (session) id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "The running run's UI message stream from its start", content_type = "text/event-stream", body = String),
        (status = 204, description = "Nothing is running (also for a chat this server has never seen)"),
        (status = 400, description = "Invalid chat id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn resume(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let Some(chat) = frontends::chat(&state, &caller, &id).await? else {
        return Ok(frontends::empty(StatusCode::NO_CONTENT));
    };
    if chat.handle.status() != SessionStatus::Running {
        return Ok(frontends::empty(StatusCode::NO_CONTENT));
    }
    let streamed = frontends::start(
        &state,
        &caller,
        &chat.current,
        true,
        Plan::Attach,
        ExecuteContext::default,
        ExecuteOptions::default(),
    )
    .await?;
    Ok(frontends::sse(state, streamed, Box::new(encoder()), Some(HEADER)))
}

/// The UI message stream as `useChat` needs it: a call's `tool-input-available` waits until the
/// run says whether the call needs approval (`useChat` runs a client-side tool as soon as its
/// input is available). What the request answered, denied and approved is added by `chat`.
fn encoder() -> VercelEncoder {
    VercelEncoder::new().hold_inputs_until_approval_known(true)
}
