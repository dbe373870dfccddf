//! The [`Provider`] contract: a model call as a stream of events.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use weft_core::{History, Prices, StopReason, ToolSpec, Usage};

use crate::CancellationToken;
use crate::stream::ProviderStream;

/// Everything one model call needs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The session the call belongs to (the faux provider keeps one script cursor per session).
    pub session_id: String,
    /// The model id.
    pub model: String,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<Arc<str>>,
    /// The conversation so far: the session's own log, shared (see [`History`]); a hook that
    /// edits it copies it first.
    pub messages: History,
    /// The tools the model may call.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The model's prices, to compute the call's cost; `None` leaves the cost unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<Prices>,
}

/// A model provider: turns a [`ModelRequest`] into a [`ProviderStream`].
///
/// Contract: `stream` never panics and the stream never fails mid-way: every failure (network,
/// HTTP status, malformed data, cancellation) ends the stream with a terminal
/// [`StreamEvent::Error`](crate::StreamEvent::Error) carrying the partial message, its stop
/// reason `error` or `aborted` and an `error_message`. [`ProviderStream`] enforces this for any
/// inner stream of [`ProviderEvent`]s.
pub trait Provider: Send + Sync {
    /// The provider's name (`faux`, `openai`, `anthropic` …), recorded on every message.
    fn name(&self) -> &str;

    /// Starts a model call. Cancelling `cancel` ends the stream with stop reason `aborted`, the
    /// partial message kept.
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream;
}

/// A change to one content block of the message being streamed.
///
/// `index` is the block's position in the assistant message's content: a block is started with
/// the next free index and then referred to by it, so deltas of several blocks may interleave.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentDelta {
    /// A text block starts.
    TextStart {
        /// The block's position.
        index: u32,
    },
    /// More text.
    TextDelta {
        /// The block's position.
        index: u32,
        /// The new text.
        delta: String,
    },
    /// A text block ends.
    TextEnd {
        /// The block's position.
        index: u32,
    },
    /// A thinking block starts.
    ThinkingStart {
        /// The block's position.
        index: u32,
    },
    /// More thinking.
    ThinkingDelta {
        /// The block's position.
        index: u32,
        /// The new thinking text.
        delta: String,
    },
    /// Part of a thinking block's signature (appended to what came before).
    ThinkingSignature {
        /// The block's position.
        index: u32,
        /// The signature text.
        signature: String,
    },
    /// A thinking block ends.
    ThinkingEnd {
        /// The block's position.
        index: u32,
    },
    /// A tool call starts.
    ToolCallStart {
        /// The block's position.
        index: u32,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallDelta {
        /// The block's position.
        index: u32,
        /// The new argument text.
        delta: String,
    },
    /// A tool call ends.
    ToolCallEnd {
        /// The block's position.
        index: u32,
    },
}

/// What a provider adapter emits; [`ProviderStream`] builds the message from it.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A content change.
    Content(ContentDelta),
    /// Usage so far (replaces what came before).
    Usage(Usage),
    /// The call ended normally.
    Done {
        /// Why the model stopped (`stop`, `length` or `tool_use`).
        stop_reason: StopReason,
    },
    /// The call failed.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// What went wrong, readable by a person.
        message: String,
    },
}
