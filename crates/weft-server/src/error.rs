//! Errors at the HTTP edge: one [`ApiError`] type, rendered as
//! `{"error": {"code": "…", "message": "…"}}` with the status it carries.
//!
//! A client's mistake is always a 4xx with a code and a message saying what to change; a 5xx
//! means the server or its store failed, and its message never holds a secret (store errors never
//! repeat a URL, provider keys never reach an error).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use weft_agent::ExecuteError;
use weft_core::StoreError;

/// The JSON body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong: a stable code for programs and a message for people.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDetail {
    /// A stable, machine-readable code (`bad_request`, `session_not_found`, `session_running` …).
    pub code: String,
    /// What happened and what to do about it.
    pub message: String,
    /// With `session_running`: the id of the run under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// An error response.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub detail: ErrorDetail,
    /// Seconds to wait, for 429 (`Retry-After`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            detail: ErrorDetail { code: code.to_string(), message: message.into(), run_id: None },
            retry_after: None,
        }
    }

    /// 400: the request is malformed or names something that does not exist.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404 for a session the caller cannot see (missing, or another owner's: the same answer).
    pub fn session_not_found(id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "session_not_found", format!("no session {}", shown(id)))
    }

    /// 409: a session's run is under way.
    pub fn session_running(id: &str, run_id: Option<String>) -> Self {
        let mut error = Self::new(
            StatusCode::CONFLICT,
            "session_running",
            format!(
                "session {} is running; wait for its run to end, abort it, or send the input \
                 with options.multitask \"enqueue\" or \"interrupt\"",
                shown(id)
            ),
        );
        error.detail.run_id = run_id;
        error
    }

    /// 500/503: the server or its store failed. Logged; the message is generic enough to
    /// never leak a secret.
    pub fn store(error: &StoreError) -> Self {
        match error {
            StoreError::Conflict { session_id, .. } => Self::new(
                StatusCode::CONFLICT,
                "session_changed",
                format!(
                    "session {} changed in the meantime (another request or replica); try again",
                    shown(session_id)
                ),
            ),
            StoreError::LeaseLost { session_id, .. } => Self::new(
                StatusCode::CONFLICT,
                "session_changed",
                format!(
                    "session {}'s run was taken over by another replica; try again",
                    shown(session_id)
                ),
            ),
            StoreError::NotFound(id) => Self::session_not_found(id),
            other => {
                tracing::error!(error = %other, "the session store failed");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the session store failed; try again later",
                )
            }
        }
    }

    /// Sets `Retry-After`.
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

/// An id as shown in a message: quoted, cut to a readable length.
pub(crate) fn shown(id: &str) -> String {
    let cut: String = id.chars().take(80).collect();
    format!("{cut:?}")
}

impl From<ExecuteError> for ApiError {
    fn from(error: ExecuteError) -> Self {
        let message = error.to_string();
        match error {
            ExecuteError::AlreadyRunning(id) => Self::session_running(&id, None),
            ExecuteError::Store(store) => Self::store(&store),
            ExecuteError::AwaitingToolCalls { .. } => {
                Self::new(StatusCode::CONFLICT, "awaiting_tool_calls", message)
            }
            ExecuteError::NothingPending(_) => {
                Self::new(StatusCode::CONFLICT, "nothing_pending", message)
            }
            ExecuteError::AlreadyAnswered(_) => {
                Self::new(StatusCode::CONFLICT, "already_answered", message)
            }
            ExecuteError::UnknownToolCall(_) | ExecuteError::UnknownApproval(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "unknown_tool_call", message)
            }
            ExecuteError::AwaitsResult(_) | ExecuteError::AwaitsApproval(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "wrong_answer_kind", message)
            }
            ExecuteError::DuplicateAnswer(_) | ExecuteError::ToolNameMismatch { .. } => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_tool_result", message)
            }
            ExecuteError::EmptyInput => Self::bad_request("empty_input", message),
            ExecuteError::NoRuntime => {
                tracing::error!("execute called outside a runtime");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
            }
            // The server has one agent: a handle of another is a bug, never the caller's doing.
            ExecuteError::ForeignSession(_) => {
                tracing::error!(%message, "a session handle of another agent");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let retry_after = self.retry_after;
        let mut response = (status, axum::Json(ErrorBody { error: self.detail })).into_response();
        if let Some(seconds) = retry_after
            && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
