//! What the front-end endpoints (`POST /api/ag-ui`, `POST /api/chat`) share: a front end sends
//! its view of the conversation on every request (all of it, or only its last message), and Weft
//! keeps the conversation in a session. Each request is turned into one of four things: a new
//! session (everything but the last user message is its context), the next input of an existing
//! one (a user message it has not seen, the client's tool results, approval decisions), a fork
//! (the client edited a message or asked for another answer: a new branch from the common
//! prefix, which the chat's id then leads to), or nothing new.
//!
//! User messages are matched by the ids the client gave them (the AI SDK's `UIMessage.id`,
//! AG-UI's message ids), kept with each stored user message; a client that gives none is
//! matched by count and text.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use weft_agent::SessionHandle;
use weft_core::{Input, Message, Session, SessionStatus, UserMessage};
use weft_protocol::{Encoder, Frame};

use crate::AppState;
use crate::api::{ExecuteContext, ExecuteOptions, ExecuteRequest};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::execute::{self, load_owned, wait_for_end};
use crate::stream::{Feed, Framing, body_with};

/// What a front end's request asks for.
pub(crate) enum Plan {
    /// Run this input.
    Run(Input),
    /// Nothing new: stream the session's live or last run.
    Attach,
}

/// A conversation as a front end sent it, in Weft's terms.
pub(crate) struct Conversation {
    /// Every message but the last user message (a new session's context).
    pub(crate) history: Vec<Message>,
    /// The last user message, if the conversation ends with one.
    pub(crate) last_user: Option<UserMessage>,
    /// How many user messages the conversation has.
    pub(crate) user_count: usize,
}

/// What a request's last user message is to the session.
#[derive(Debug, PartialEq)]
pub(crate) enum Intent {
    /// A message the session has not seen: its next input.
    New(UserMessage),
    /// The client's conversation leaves the session's at message `at` (an edited message, or a
    /// regenerated answer): a branch keeps the messages before `at` and runs `message`.
    Fork {
        /// How many of the session's messages the branch keeps.
        at: usize,
        /// The input of the branch.
        message: UserMessage,
    },
    /// Nothing new.
    Nothing,
}

/// What the request's last user message `last` (if the request ends with one) is to `session`;
/// `regenerate`: the client asks for another answer to it; `count`: the request's user messages.
pub(crate) fn intent(
    session: &Session,
    last: Option<&UserMessage>,
    count: usize,
    regenerate: bool,
) -> Intent {
    let Some(last) = last else { return Intent::Nothing };
    let users: Vec<(usize, &UserMessage)> = session
        .messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match m {
            Message::User(user) => Some((i, user)),
            _ => None,
        })
        .collect();
    let known = match last.id.as_deref() {
        Some(id) => users.iter().rev().find(|(_, u)| u.id.as_deref() == Some(id)).copied(),
        // No id: the client's n-th user message is the session's n-th.
        None => count.checked_sub(1).and_then(|n| users.get(n)).copied(),
    };
    let Some((at, seen)) = known else {
        return Intent::New(last.clone());
    };
    let is_last = users.last().is_some_and(|(i, _)| *i == at);
    if regenerate || !is_last || seen.content != last.content {
        Intent::Fork { at, message: last.clone() }
    } else {
        Intent::Nothing
    }
}

/// A front end's conversation (an AI SDK chat, an AG-UI thread): the session its id names, and
/// the branch requests go to (that session itself until a fork).
pub(crate) struct Chat {
    /// The chat's id (a client id).
    pub(crate) id: String,
    /// The branch's client id.
    pub(crate) current: String,
    /// The branch.
    pub(crate) handle: SessionHandle,
    /// What the branch holds.
    pub(crate) session: Session,
}

/// The caller's chat `id`, if there is one.
pub(crate) async fn chat(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Option<Chat>, ApiError> {
    let Some((root, _)) = load_owned(state, caller, id).await? else { return Ok(None) };
    let snapshot = root.snapshot();
    if let Some(branch) = weft_agent::latest_branch(&snapshot.options) {
        let current = caller.namespace.client_id(branch).to_string();
        if let Some((handle, _)) = load_owned(state, caller, &current).await? {
            let session = handle.snapshot();
            return Ok(Some(Chat { id: id.to_string(), current, handle, session }));
        }
    }
    Ok(Some(Chat { id: id.to_string(), current: id.to_string(), handle: root, session: snapshot }))
}

/// Stops the run under way on `chat`'s branch; whether there was one.
pub(crate) async fn stop(chat: &Chat) -> bool {
    if chat.handle.status() != SessionStatus::Running {
        return false;
    }
    chat.handle.abort().await
}

/// A new branch of `chat` keeping its branch's first `at` messages; the chat's id leads to it
/// from now on. A run under way on the branch is aborted first. The new branch's client id.
pub(crate) async fn fork(
    state: &AppState,
    caller: &Caller,
    chat: &Chat,
    at: usize,
) -> Result<String, ApiError> {
    if chat.handle.status() == SessionStatus::Running {
        chat.handle.abort().await;
        wait_for_end(&chat.handle).await;
    }
    let stem: String = chat.id.chars().take(100).collect();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let branch = format!("{stem}.{}", &suffix[..12]);
    execute::fork(state, caller, &chat.current, Some(at), Some(branch.clone())).await?;
    let Some((root, _)) = load_owned(state, caller, &chat.id).await? else {
        return Err(ApiError::session_not_found(&chat.id));
    };
    root.set_branch(&caller.namespace.store_id(&branch)).await.map_err(ApiError::from)?;
    tracing::info!(chat = %chat.id, branch = %branch, at, "chat forked");
    Ok(branch)
}

/// A started (or attached) stream.
pub(crate) struct Streamed {
    pub(crate) session_id: String,
    pub(crate) run_id: Option<String>,
    pub(crate) feed: Feed,
}

/// Runs `plan` on session `id`, creating the session from `conversation` and `context` if the
/// caller has none of that id.
pub(crate) async fn start(
    state: &Arc<AppState>,
    caller: &Caller,
    id: &str,
    existing: bool,
    plan: Plan,
    context: impl FnOnce() -> ExecuteContext,
    options: ExecuteOptions,
) -> Result<Streamed, ApiError> {
    match plan {
        Plan::Attach => {
            let feed = execute::attach(state, caller, id, None).await?;
            Ok(Streamed { session_id: id.to_string(), run_id: None, feed })
        }
        Plan::Run(input) => {
            let request = ExecuteRequest {
                session_id: Some(id.to_string()),
                input,
                context: (!existing).then(context),
                options,
            };
            let started = execute::start(state, caller, request).await?;
            Ok(Streamed {
                session_id: started.session_id,
                run_id: started.run_id,
                feed: started.feed,
            })
        }
    }
}

/// An SSE response of `streamed` rendered by `encoder`.
pub(crate) fn sse(
    state: Arc<AppState>,
    streamed: Streamed,
    encoder: Box<dyn Encoder>,
    extra: Option<(&'static str, &'static str)>,
) -> Response {
    let mut response = Response::new(body_with(state, streamed.feed, Framing::Sse, encoder));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some((name, value)) = extra {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if let Ok(value) = HeaderValue::from_str(&streamed.session_id) {
        headers.insert("x-session-id", value);
    }
    if let Some(value) = streamed.run_id.as_deref().and_then(|r| HeaderValue::from_str(r).ok()) {
        headers.insert("x-run-id", value);
    }
    response
}

/// A finished SSE stream holding only `frames` (rendered by the front end's protocol), with the
/// front end's header.
pub(crate) fn sse_frames(
    frames: &[Frame],
    extra: Option<(&'static str, &'static str)>,
) -> Response {
    let mut body = String::new();
    for frame in frames {
        weft_protocol::framing::write_sse(frame, &mut body);
    }
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some((name, value)) = extra {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// A refusal said in a front end's own stream (`frames`: the protocol's error), with the error's
/// code in `x-weft-error` for programs.
pub(crate) fn refusal(
    error: &ApiError,
    frames: &[Frame],
    extra: Option<(&'static str, &'static str)>,
) -> Response {
    tracing::info!(code = %error.detail.code, "front-end request refused: {}", error.detail.message);
    let mut response = sse_frames(frames, extra);
    if let Ok(code) = HeaderValue::from_str(&error.detail.code) {
        response.headers_mut().insert("x-weft-error", code);
    }
    response
}

/// An empty body with a status (`204` for "nothing is running").
pub(crate) fn empty(status: axum::http::StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// A tool call's arguments as a front end sent them (a JSON text, or already JSON).
pub(crate) fn arguments(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(text) => {
            serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.clone()))
        }
        serde_json::Value::Null => serde_json::json!({}),
        other => other.clone(),
    }
}

/// A tool's output as the text the model reads.
pub(crate) fn output_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
