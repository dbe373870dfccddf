//! What the front-end endpoints (`POST /api/ag-ui`, `POST /api/chat`) share: a front end sends
//! the whole conversation on every request, and Weft keeps it in a session. Each request is
//! turned into one of three things: a new session (everything but the last user message is its
//! context), the next input of an existing one (a new user message, the client's tool results,
//! approval decisions), or nothing new (a client reconnecting: it gets the live or last run).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use weft_core::{Input, Message, Session, UserMessage};
use weft_protocol::Encoder;

use crate::AppState;
use crate::api::{ExecuteContext, ExecuteOptions, ExecuteRequest};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::execute::{self, load_owned};
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

/// The number of user messages of a session.
pub(crate) fn user_count(session: &Session) -> usize {
    session.messages.iter().filter(|m| matches!(**m, Message::User(_))).count()
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

/// The session `id` of the caller, if there is one.
pub(crate) async fn existing(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Option<Session>, ApiError> {
    Ok(load_owned(state, caller, id).await?.map(|(handle, _)| handle.snapshot()))
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
