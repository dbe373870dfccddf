//! The client's one error type.

use serde::Deserialize;

/// What went wrong talking to a Weft server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status and (usually) its
    /// `{"error": {"code", "message"}}` body.
    #[error("{status} {code}: {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The server's stable code (`session_not_found`, `session_running` …), or `http_error`
        /// when the body was not the server's error JSON.
        code: String,
        /// What happened, as the server said it.
        message: String,
        /// With `session_running`: the id of the run under way.
        run_id: Option<String>,
    },
    /// The request could not be sent or its response not read (connection refused, reset …).
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    /// The stream dropped and could not be resumed (`tries` reattachments failed), or dropped
    /// before the server named the session.
    #[error("the stream dropped and could not be resumed: {0}")]
    Dropped(String),
    /// The server sent something this client cannot read (a frame that does not decode, a body
    /// that is not the JSON it should be).
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
    /// There is no session to act on yet (an abort before the server named the session).
    #[error("no session yet: {0}")]
    NoSession(String),
    /// The server sent an event larger than this client keeps ([`Client::max_frame_bytes`]):
    /// the stream was dropped rather than held in memory.
    ///
    /// [`Client::max_frame_bytes`]: crate::Client::max_frame_bytes
    #[error(
        "the server sent an event larger than {limit} bytes, this client's limit; the stream was \
         dropped"
    )]
    FrameTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl Error {
    /// The HTTP status, for an [`Error::Api`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's error code, for an [`Error::Api`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether retrying the same request may help (a 5xx, a 429 or a transport failure).
    pub(crate) fn transient(&self) -> bool {
        match self {
            Error::Api { status, .. } => *status >= 500 || *status == 429,
            Error::Http(_) | Error::Dropped(_) => true,
            Error::Protocol(_) | Error::NoSession(_) | Error::FrameTooLarge { .. } => false,
        }
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ErrorDetail {
    code: String,
    message: String,
    #[serde(default)]
    run_id: Option<String>,
}

/// The error of a response whose status is not a success: its JSON body when it has one.
pub(crate) async fn from_response(response: reqwest::Response) -> Error {
    let status = response.status();
    let reason = status.canonical_reason().unwrap_or("");
    let body = response.bytes().await.unwrap_or_default();
    match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(ErrorBody { error }) => Error::Api {
            status: status.as_u16(),
            code: error.code,
            message: error.message,
            run_id: error.run_id,
        },
        Err(_) => Error::Api {
            status: status.as_u16(),
            code: "http_error".into(),
            message: format!("{} {reason}", status.as_u16()),
            run_id: None,
        },
    }
}
