//! The [`Provider`] contract: a model call as a stream of events.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use weft_core::{History, Prices, ToolSpec};

use crate::CancellationToken;
use crate::stream::ProviderStream;

/// Everything one model call needs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
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
/// inner stream of [`ProviderEvent`](crate::ProviderEvent)s.
pub trait Provider: Send + Sync {
    /// The provider's name (`faux`, `openai`, `anthropic` …), recorded on every message.
    fn name(&self) -> &str;

    /// Starts a model call. Cancelling `cancel` ends the stream with stop reason `aborted`, the
    /// partial message kept.
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream;
}
