//! [`ProviderStream`]: one model call's events, and the message they build.
//!
//! Adapters emit [`ProviderEvent`]s; the stream applies each to the growing partial
//! [`AssistantMessage`] (text appended in place, tool arguments fed to an incremental
//! [`PartialJson`] parser), hands the content delta on, and ends with exactly one terminal
//! [`StreamEvent::Done`] or [`StreamEvent::Error`] carrying the finished message. It enforces the
//! provider contract for every adapter: a stream that ends early, a delta for a block that does
//! not exist, or a cancellation becomes a terminal error with the partial kept. Nothing is copied
//! per delta beyond the delta itself.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::stream::BoxStream;
use futures::task::AtomicWaker;
use futures::{Future, Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::WaitForCancellationFutureOwned;
use weft_core::{
    AssistantContent, AssistantMessage, Cost, Prices, StopReason, TextContent, ThinkingContent,
    ToolCall,
};

use crate::CancellationToken;
use crate::event::{ContentDelta, ProviderEvent};
use crate::partial_json::PartialJson;

/// What a [`ProviderStream`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A content change, already applied to [`ProviderStream::partial`].
    Content(ContentDelta),
    /// The call ended normally; the finished message.
    Done(Box<AssistantMessage>),
    /// The call failed or was aborted; the partial message, with stop reason `error` or
    /// `aborted` and an `error_message`.
    Error(Box<AssistantMessage>),
}

/// One model call in progress.
///
/// Adapters emit [`ProviderEvent`]s; the stream applies each to the growing partial
/// [`AssistantMessage`] (text appended in place, tool arguments fed to an incremental
/// [`PartialJson`] parser), hands the content delta on, and ends with exactly one terminal
/// [`StreamEvent::Done`] or [`StreamEvent::Error`] carrying the finished message, its usage
/// totalled and its cost computed from the prices it was given. It enforces the provider contract
/// for every adapter: a stream that ends early, a delta for a block that does not exist, or a
/// cancellation becomes a terminal error with the partial kept. Nothing is copied per delta
/// beyond the delta itself.
pub struct ProviderStream {
    inner: Option<BoxStream<'static, ProviderEvent>>,
    partial: AssistantMessage,
    /// One slot per content block: the argument parser of a tool call still streaming.
    args: Vec<Option<PartialJson>>,
    /// Which blocks are still open.
    open: Vec<bool>,
    cancel: CancelWatch,
    prices: Option<Prices>,
    finished: bool,
}

impl ProviderStream {
    /// Wraps an adapter's event stream for a call to `provider`/`model`.
    pub fn new(
        provider: &str,
        model: &str,
        prices: Option<Prices>,
        cancel: CancellationToken,
        inner: impl Stream<Item = ProviderEvent> + Send + 'static,
    ) -> Self {
        Self {
            inner: Some(inner.boxed()),
            partial: AssistantMessage::empty(provider, model),
            args: Vec::new(),
            open: Vec::new(),
            cancel: CancelWatch::new(cancel),
            prices,
            finished: false,
        }
    }

    /// A stream that fails at once with `message` (for requests that cannot even start).
    pub fn failed(provider: &str, model: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let inner =
            futures::stream::iter([ProviderEvent::Error { reason: StopReason::Error, message }]);
        Self::new(provider, model, None, CancellationToken::new(), inner)
    }

    /// The message as streamed so far. Tool calls still streaming have `null` arguments until
    /// they end; [`tool_call_arguments`](Self::tool_call_arguments) gives their best-effort value.
    /// After the terminal event the message has been handed over and this is empty.
    pub fn partial(&self) -> &AssistantMessage {
        &self.partial
    }

    /// The best-effort arguments of the tool call at content `index` while it streams.
    pub fn tool_call_arguments(&self, index: u32) -> Option<&Value> {
        let slot = self.args.get(index as usize)?.as_ref()?;
        slot.value()
    }

    /// Applies one content delta; `Err` names a protocol violation.
    fn apply(&mut self, delta: &ContentDelta) -> Result<(), String> {
        match delta {
            ContentDelta::TextStart { index } => self
                .start_block(*index, AssistantContent::Text(TextContent { text: String::new() })),
            ContentDelta::ThinkingStart { index } => self.start_block(
                *index,
                AssistantContent::Thinking(ThinkingContent {
                    thinking: String::new(),
                    signature: None,
                }),
            ),
            ContentDelta::ToolCallStart { index, id, name } => {
                self.start_block(
                    *index,
                    AssistantContent::ToolCall(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: Value::Null.into(),
                    }),
                )?;
                self.args[*index as usize] = Some(PartialJson::new());
                Ok(())
            }
            ContentDelta::TextDelta { index, delta } => match self.open_block(*index)? {
                AssistantContent::Text(t) => {
                    t.text.push_str(delta);
                    Ok(())
                }
                _ => Err(format!("text delta for block {index}, which is not text")),
            },
            ContentDelta::ThinkingDelta { index, delta } => match self.open_block(*index)? {
                AssistantContent::Thinking(t) => {
                    t.thinking.push_str(delta);
                    Ok(())
                }
                _ => Err(format!("thinking delta for block {index}, which is not thinking")),
            },
            ContentDelta::ThinkingSignature { index, signature } => {
                match self.open_block(*index)? {
                    AssistantContent::Thinking(t) => {
                        t.signature.get_or_insert_with(String::new).push_str(signature);
                        Ok(())
                    }
                    _ => Err(format!("signature for block {index}, which is not thinking")),
                }
            }
            ContentDelta::ToolCallDelta { index, delta } => {
                self.open_block(*index)?;
                match self.args.get_mut(*index as usize).and_then(Option::as_mut) {
                    // A syntax error is not a stream failure: the raw text is kept and the
                    // call's arguments become that text when the call ends.
                    Some(parser) => {
                        let _ = parser.push(delta);
                        Ok(())
                    }
                    None => Err(format!("tool call delta for block {index}, which is not a call")),
                }
            }
            ContentDelta::TextEnd { index }
            | ContentDelta::ThinkingEnd { index }
            | ContentDelta::ToolCallEnd { index } => {
                self.open_block(*index)?;
                self.close_block(*index as usize);
                Ok(())
            }
        }
    }

    fn start_block(&mut self, index: u32, block: AssistantContent) -> Result<(), String> {
        if index as usize != self.partial.content.len() {
            return Err(format!(
                "block {index} started, but the next block is {}",
                self.partial.content.len()
            ));
        }
        self.partial.content.push(block);
        self.args.push(None);
        self.open.push(true);
        Ok(())
    }

    fn open_block(&mut self, index: u32) -> Result<&mut AssistantContent, String> {
        let i = index as usize;
        if !self.open.get(i).copied().unwrap_or(false) {
            return Err(format!("block {index} is not open"));
        }
        Ok(&mut self.partial.content[i])
    }

    fn close_block(&mut self, i: usize) {
        self.open[i] = false;
        if let Some(parser) = self.args[i].take()
            && let AssistantContent::ToolCall(call) = &mut self.partial.content[i]
        {
            call.arguments = finish_arguments(parser).into();
        }
    }

    /// Ends the stream: closes open blocks, sets the stop reason and hands the message over.
    fn terminal(&mut self, reason: StopReason, error: Option<String>) -> StreamEvent {
        self.finished = true;
        self.inner = None;
        for i in 0..self.open.len() {
            if self.open[i] {
                self.close_block(i);
            }
        }
        let mut message = std::mem::replace(&mut self.partial, AssistantMessage::empty("", ""));
        message.usage = message.usage.with_total();
        if let Some(prices) = &self.prices {
            message.cost = Some(Box::new(Cost::of(&message.usage, prices)));
        }
        message.stop_reason = reason;
        if reason.is_failure() {
            // Consumers show this after their own "the model call failed: ", so the default
            // says something else.
            message.error_message = Some(
                error
                    .unwrap_or_else(|| {
                        format!(
                            "the provider ended the call with stop reason {} and no message",
                            reason.as_str()
                        )
                    })
                    .into(),
            );
            StreamEvent::Error(Box::new(message))
        } else {
            StreamEvent::Done(Box::new(message))
        }
    }
}

/// A tool call's final arguments: the parsed value, or the raw text as a JSON string when it was
/// not valid JSON (nothing the model said is lost; validation then rejects it).
fn finish_arguments(parser: PartialJson) -> Value {
    if parser.text().trim().is_empty() {
        return Value::Object(Default::default());
    }
    // The raw text is moved into the value only when it did not parse: no copy of the (possibly
    // megabytes of) arguments otherwise.
    parser.finish_or_text().unwrap_or_else(Value::String)
}

impl Stream for ProviderStream {
    type Item = StreamEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamEvent>> {
        let this = &mut *self;
        loop {
            if this.finished {
                return Poll::Ready(None);
            }
            if this.cancel.fired(cx) {
                let event = this.terminal(StopReason::Aborted, Some("aborted".to_string()));
                return Poll::Ready(Some(event));
            }
            let Some(inner) = this.inner.as_mut() else {
                return Poll::Ready(None);
            };
            match inner.poll_next_unpin(cx) {
                Poll::Ready(Some(ProviderEvent::Content(delta))) => match this.apply(&delta) {
                    Ok(()) => return Poll::Ready(Some(StreamEvent::Content(delta))),
                    Err(violation) => {
                        let event = this.terminal(
                            StopReason::Error,
                            Some(format!("provider protocol violation: {violation}")),
                        );
                        return Poll::Ready(Some(event));
                    }
                },
                Poll::Ready(Some(ProviderEvent::Usage(usage))) => this.partial.usage = usage,
                Poll::Ready(Some(ProviderEvent::Done { stop_reason })) => {
                    return Poll::Ready(Some(this.terminal(stop_reason, None)));
                }
                Poll::Ready(Some(ProviderEvent::Error { reason, message })) => {
                    let reason = if reason.is_failure() { reason } else { StopReason::Error };
                    return Poll::Ready(Some(this.terminal(reason, Some(message))));
                }
                Poll::Ready(None) => {
                    let event = this.terminal(
                        StopReason::Error,
                        Some("the model's stream ended before the call was complete".to_string()),
                    );
                    return Poll::Ready(Some(event));
                }
                // A cancellation wakes this task too (the watch is armed by the look above).
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Watches a cancellation token from inside a stream's `poll_next` without taking the token's
/// lock on every poll (`CancellationToken::is_cancelled` locks a mutex; per delta, on a task
/// that moves between worker threads, that lock was ~5% of a busy server's CPU).
///
/// The token's cancellation future is polled with a waker of its own, which raises a flag and
/// then wakes the stream's task; a poll of the stream only reads the flag. The future is polled
/// only when the flag is up (it starts up, so the first look arms the watch), so the token's
/// lock is taken once when the watch is armed and once per wake-up of the token, not per delta.
struct CancelWatch {
    /// The token's cancellation future, polled with `signal` as its waker.
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    signal: Arc<CancelSignal>,
    /// The task waker last handed to `signal`: replaced only when the task's waker changes.
    task: Option<Waker>,
}

/// Raised by the token's cancellation (or a spurious wake of its future); wakes the task.
struct CancelSignal {
    raised: AtomicBool,
    task: AtomicWaker,
}

impl Wake for CancelSignal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.raised.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl CancelWatch {
    fn new(token: CancellationToken) -> Self {
        let signal = CancelSignal { raised: AtomicBool::new(true), task: AtomicWaker::new() };
        Self { cancelled: Box::pin(token.cancelled_owned()), signal: Arc::new(signal), task: None }
    }

    /// Whether the token is cancelled; otherwise a later cancellation wakes `cx`'s task.
    fn fired(&mut self, cx: &Context<'_>) -> bool {
        if !self.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.signal.task.register(cx.waker());
            self.task = Some(cx.waker().clone());
        }
        // A plain load per poll: the flag's line is written only by a wake-up.
        if !self.signal.raised.load(Ordering::Acquire) {
            return false;
        }
        self.signal.raised.store(false, Ordering::Release);
        let waker = Waker::from(Arc::clone(&self.signal));
        self.cancelled.as_mut().poll(&mut Context::from_waker(&waker)).is_ready()
    }
}
