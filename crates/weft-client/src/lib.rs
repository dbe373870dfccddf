//! # weft-client
//!
//! The Rust client of a Weft server's agent API (`weft serve`), in its native format: the agent
//! plan's events over SSE, decoded by [`weft_protocol::native`].
//!
//! [`Client::execute`] starts a run (or resumes one) and returns an [`ExecuteStream`]: a
//! [`Stream`](futures::Stream) of typed [`Event`]s over the whole exchange. When a run suspends
//! on calls to this client's tools (given as [`weft_tool_api::Tool`]s, the same trait a local
//! agent's tools implement), the client runs them, posts their results and goes on reading the
//! resumed run; when calls need approval, the approval callback decides and the run goes on. A dropped
//! connection is reattached with `Last-Event-ID` and backoff: no event is yielded twice, none is
//! missed.
//!
//! ```no_run
//! use futures::StreamExt;
//! use weft_tool_api::tool_fn;
//! use weft_client::{Client, ExecuteOptions};
//! use weft_core::Input;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct City { city: String }
//!
//! # async fn run() -> Result<(), weft_client::Error> {
//! let client = Client::new("http://127.0.0.1:8080").api_key("secret");
//! let weather = tool_fn("get_weather", "The weather in a city", |args: City| async move {
//!     Ok::<_, String>(format!("sunny in {}", args.city))
//! });
//! let mut stream = client.execute(
//!     Input::text("What is the weather in Paris?"),
//!     ExecuteOptions::new().tool(weather).on_approval(|request| async move { request.approve_all() }),
//! );
//! while let Some(event) = stream.next().await {
//!     if let Some(weft_core::AgentEvent::TextDelta { delta, .. }) = event?.event() {
//!         print!("{delta}");
//!     }
//! }
//! let result = stream.result();
//! # let _ = result; Ok(()) }
//! ```
//!
//! This crate only talks to a server: it never runs an agent or a model, never opens a store,
//! and never holds a lock across an await.

mod error;
mod stream;
mod types;

use std::sync::Arc;

use futures::StreamExt;
use weft_core::Input;
use weft_core::store::SessionHead;
use weft_protocol::Protocol;

pub use error::Error;
pub use stream::{AbortHandle, ExecuteStream, FrameStream};
pub use types::{
    ApprovalRequest, Event, ExecuteOptions, ExecuteResult, Multitask, Reconnect, SessionView,
};
pub use weft_protocol::native::NativeMessage;

use crate::stream::Request;
use crate::types::SessionList;

/// A client of one Weft server; cheap to clone (clones share connections).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Arc<str>,
    api_key: Option<Arc<str>>,
    reconnect: Reconnect,
    max_frame: usize,
}

/// The largest event a client keeps by default ([`Client::max_frame_bytes`]): 32 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 32 * 1024 * 1024;

impl Client {
    /// A client of the server at `base_url` (`http://127.0.0.1:8080`; a trailing `/` is
    /// dropped).
    pub fn new(base_url: impl AsRef<str>) -> Self {
        Self::with_http(base_url, reqwest::Client::new())
    }

    /// The same, on an HTTP client of the caller's (proxies, TLS roots, timeouts).
    pub fn with_http(base_url: impl AsRef<str>, http: reqwest::Client) -> Self {
        Self {
            http,
            base: base_url.as_ref().trim_end_matches('/').into(),
            api_key: None,
            reconnect: Reconnect::default(),
            max_frame: DEFAULT_MAX_FRAME_BYTES,
        }
    }

    /// Sends this bearer API key with every request.
    pub fn api_key(mut self, key: impl AsRef<str>) -> Self {
        self.api_key = Some(key.as_ref().into());
        self
    }

    /// The largest event this client keeps, in bytes (default [`DEFAULT_MAX_FRAME_BYTES`]): one
    /// SSE event (its lines and data), with the frames of one native event held until its id
    /// arrives. A stream that sends a larger one ends with [`Error::FrameTooLarge`] (never
    /// reattached: the server would send it again), so a server cannot make the client hold
    /// an unbounded line in memory.
    pub fn max_frame_bytes(mut self, limit: usize) -> Self {
        self.max_frame = limit.max(1);
        self
    }

    /// How dropped streams are reattached.
    pub fn reconnect(mut self, reconnect: Reconnect) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Starts a run with `input` (a user message; a new session unless
    /// [`ExecuteOptions::session`] names one) or resumes one (tool results or approval
    /// decisions), and streams it, with the runs it resumes into.
    pub fn execute(&self, input: Input, options: ExecuteOptions) -> ExecuteStream {
        let mut body =
            serde_json::json!({ "input": wire_input(&input), "options": options.request });
        if let Some(id) = &options.session_id {
            body["sessionId"] = serde_json::Value::String(id.clone());
        }
        if matches!(input, Input::User(_)) && !options.existing_only {
            // Ignored by the server for a session that exists; creates one otherwise.
            body["context"] = serde_json::json!({
                "messages": options.messages,
                "tools": options.specs(),
            });
        }
        ExecuteStream::new(self.clone(), Request::Post(body), options)
    }

    /// Attaches to a session's live (or last) run, after event `after` when given, and goes on
    /// as [`execute`](Self::execute) does (client tools, approvals, reconnection).
    pub fn attach(
        &self,
        session_id: &str,
        after: Option<u64>,
        options: ExecuteOptions,
    ) -> ExecuteStream {
        let request = Request::Attach { session_id: session_id.to_string(), after };
        ExecuteStream::new(self.clone(), request, options.session(session_id))
    }

    /// Aborts the session's run (409 `Error::Api` when nothing runs).
    pub async fn abort(&self, session_id: &str) -> Result<(), Error> {
        let url = self.url(&format!("/api/agent/session/{}/abort", path_segment(session_id)));
        self.send(self.http.post(url)).await.map(drop)
    }

    /// The session: messages, status, pending calls, usage, cost, last event seq.
    pub async fn get_session(&self, session_id: &str) -> Result<SessionView, Error> {
        let url = self.url(&format!("/api/agent/session/{}", path_segment(session_id)));
        json(self.send(self.http.get(url)).await?).await
    }

    /// The caller's sessions, most recently updated first (at most `limit`, the server's
    /// default 100 without one).
    pub async fn list_sessions(&self, limit: Option<usize>) -> Result<Vec<SessionHead>, Error> {
        let query = limit.map(|n| format!("?limit={n}")).unwrap_or_default();
        let url = self.url(&format!("/api/agent/sessions{query}"));
        Ok(json::<SessionList>(self.send(self.http.get(url)).await?).await?.sessions)
    }

    /// Deletes a session with its messages and events.
    pub async fn delete_session(&self, session_id: &str) -> Result<(), Error> {
        let url = self.url(&format!("/api/agent/session/{}", path_segment(session_id)));
        self.send(self.http.delete(url)).await.map(drop)
    }

    /// Starts a run like [`execute`](Self::execute), but streams it in another wire format
    /// (`?protocol=`): each SSE frame's data as the server wrote it, reattached after a drop
    /// like the native stream. No client tools run and no approvals are asked: the stream is
    /// one run's.
    pub fn execute_frames(
        &self,
        input: Input,
        options: &ExecuteOptions,
        protocol: Protocol,
    ) -> FrameStream {
        let mut body =
            serde_json::json!({ "input": wire_input(&input), "options": options.request });
        if let Some(id) = &options.session_id {
            body["sessionId"] = serde_json::Value::String(id.clone());
        }
        if matches!(input, Input::User(_)) && !options.existing_only {
            body["context"] = serde_json::json!({
                "messages": options.messages,
                "tools": options.specs(),
            });
        }
        let session = Arc::new(std::sync::Mutex::new(options.session_id.clone()));
        let inner = stream::frames(self.clone(), body, protocol, Arc::clone(&session)).boxed();
        FrameStream { inner, session }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Sends a request; a status that is not a success is the server's error.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Error> {
        let response = self.authorized(request).send().await?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(error::from_response(response).await)
        }
    }

    /// `POST /api/agent/execute` (native SSE, or `protocol`'s).
    pub(crate) async fn post_execute(
        &self,
        body: &serde_json::Value,
        protocol: Option<Protocol>,
    ) -> Result<reqwest::Response, Error> {
        let query = protocol.map(|p| format!("?protocol={p}")).unwrap_or_default();
        let bytes = serde_json::to_vec(body).map_err(|e| Error::Protocol(e.to_string()))?;
        let request = self
            .http
            .post(self.url(&format!("/api/agent/execute{query}")))
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(bytes);
        self.send(request).await
    }

    /// `GET /api/agent/session/{id}/stream` with `Last-Event-ID`.
    pub(crate) async fn open_stream(
        &self,
        session_id: &str,
        after: Option<u64>,
        protocol: Option<Protocol>,
    ) -> Result<reqwest::Response, Error> {
        let query = protocol.map(|p| format!("?protocol={p}")).unwrap_or_default();
        let url =
            self.url(&format!("/api/agent/session/{}/stream{query}", path_segment(session_id)));
        let mut request = self.http.get(url).header("accept", "text/event-stream");
        if let Some(after) = after {
            request = request.header("last-event-id", after.to_string());
        }
        self.send(request).await
    }
}

/// One frame of [`Client::execute_frames`]: its data and, when it has one, its event seq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameOut {
    /// The SSE `id:` (the event's seq), when the frame has one.
    pub seq: Option<u64>,
    /// The frame's data (one JSON document, or a terminal marker such as `[DONE]`).
    pub data: String,
}

/// An input as the server reads it: a user message carries its `role`.
pub(crate) fn wire_input(input: &Input) -> serde_json::Value {
    match input {
        Input::User(message) => {
            serde_json::to_value(weft_core::Message::User(message.clone())).unwrap_or_default()
        }
        other => serde_json::to_value(other).unwrap_or_default(),
    }
}

/// A response's JSON body.
async fn json<T: serde::de::DeserializeOwned>(response: reqwest::Response) -> Result<T, Error> {
    let bytes = response.bytes().await?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Protocol(format!("invalid JSON body: {e}")))
}

/// An id as one path segment: characters outside the unreserved set percent-encoded.
fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
