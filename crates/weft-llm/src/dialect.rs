//! The contract between the HTTP layer and a provider dialect.
//!
//! A dialect turns the provider's Server-Sent Events into [`ProviderEvent`]s. It is a pure state
//! machine (no IO), so it is tested with byte-exact SSE fixtures alone; the HTTP layer
//! ([`crate::http::sse_call`]) feeds it, retries, times out and cancels.

use crate::event::ProviderEvent;
use crate::sse::SseEvent;

/// Why a dialect cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeFailure {
    /// What went wrong, readable by a person (never containing credentials).
    pub message: String,
    /// Whether the failure is one the provider asks to retry (such as an `overloaded` error
    /// event); retried only if no content has streamed yet.
    pub retryable: bool,
}

impl DecodeFailure {
    /// A failure that is not retried.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self { message: message.into(), retryable: false }
    }

    /// A failure the provider asks to retry.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self { message: message.into(), retryable: true }
    }
}

/// Turns one provider's SSE stream into provider events.
pub trait SseDecoder: Send + 'static {
    /// One SSE event: appends the provider events it means to `out`. `Err` ends the call with
    /// stop reason `error` (the partial message kept).
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure>;

    /// The body ended. Appends the terminal event (`Done`, or `Error` if the stream ended before
    /// the dialect's own end marker) unless one was already emitted.
    fn end(&mut self, out: &mut Vec<ProviderEvent>);
}
