//! [`ExecuteStream`]: a run's events as they happen, then its [`ExecuteResult`].
//!
//! The run itself is a task of its own; the stream only listens. Events travel in batches over a
//! bounded channel: a batch is sent when it is full or when the run is about to wait for
//! anything (the model, a tool), so a consumer that keeps up sees every event at once, a slow
//! consumer applies backpressure (the run waits, nothing is dropped), and a consumer that goes
//! away does not stop the run: it goes on to its end and the session records it.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use weft_core::{
    AgentEvent, AgentResponse, AgentStep, Cost, Message, SessionStatus, ToolCall, Usage,
};
use weft_llm::CancellationToken;

/// One event and its sequence number in the session.
pub type Sequenced = (u64, AgentEvent);

/// How many events travel in one batch at most.
pub(crate) const BATCH: usize = 256;
/// How many batches may wait for the consumer before the run waits.
pub(crate) const BATCHES_IN_FLIGHT: usize = 16;

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteResult {
    /// The session.
    pub session_id: String,
    /// How the run ended.
    pub status: SessionStatus,
    /// The messages the run added, in order.
    pub messages: Vec<Message>,
    /// Calls waiting for remote results (status `awaiting_tool_execution`).
    pub pending_tool_calls: Vec<ToolCall>,
    /// Calls waiting for approval (status `awaiting_approval`).
    pub pending_approvals: Vec<ToolCall>,
    /// Tokens used by this run's model calls.
    pub usage: Usage,
    /// What this run's model calls cost.
    pub cost: Cost,
    /// The steps the run finished, in order. A resumed run's first step may be the one its
    /// suspension began in (its model call was made, and counted in usage, by the earlier run).
    pub steps: Vec<AgentStep>,
    /// What went wrong, when the status is `error`, `aborted` or `max_turns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ExecuteResult {
    /// The step trace and final answer, for callers that do not stream.
    pub fn response(&self) -> AgentResponse {
        AgentResponse::from_steps(self.steps.clone())
    }
}

/// Aborts a run from anywhere; cloning shares it.
#[derive(Debug, Clone)]
pub struct AbortHandle(pub(crate) CancellationToken);

impl AbortHandle {
    /// Aborts the run: the model call ends `aborted` with its partial kept, running tools are
    /// cancelled, and no further model call is made.
    pub fn abort(&self) {
        self.0.cancel();
    }
}

/// A run's events as they happen; [`result`](Self::result) gives what it did.
pub struct ExecuteStream {
    session_id: String,
    batches: mpsc::Receiver<Vec<Sequenced>>,
    current: std::vec::IntoIter<Sequenced>,
    result: oneshot::Receiver<ExecuteResult>,
    cancel: CancellationToken,
}

impl ExecuteStream {
    pub(crate) fn new(
        session_id: String,
        batches: mpsc::Receiver<Vec<Sequenced>>,
        result: oneshot::Receiver<ExecuteResult>,
        cancel: CancellationToken,
    ) -> Self {
        Self { session_id, batches, current: Vec::new().into_iter(), result, cancel }
    }

    /// The session this run belongs to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Aborts the run (see [`AbortHandle::abort`]).
    pub fn abort(&self) {
        self.cancel.cancel();
    }

    /// A handle that aborts the run from elsewhere.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle(self.cancel.clone())
    }

    /// The events with their sequence numbers in the session (monotonic over the session's
    /// whole life: the resume cursor of the wire formats).
    pub fn sequenced(self) -> SequencedStream {
        SequencedStream(self)
    }

    /// Waits for the run to end and says what it did. Events not yet read are skipped (the run
    /// does not wait for them).
    pub async fn result(self) -> ExecuteResult {
        let Self { session_id, batches, result, .. } = self;
        drop(batches);
        match result.await {
            Ok(result) => result,
            Err(_) => ExecuteResult {
                session_id,
                status: SessionStatus::Error,
                messages: Vec::new(),
                pending_tool_calls: Vec::new(),
                pending_approvals: Vec::new(),
                usage: Usage::default(),
                cost: Cost::default(),
                steps: Vec::new(),
                error: Some("the run ended without a result (its task was cancelled)".into()),
            },
        }
    }

    /// Reads every event to the end, then the result.
    pub async fn collect_all(mut self) -> (Vec<AgentEvent>, ExecuteResult) {
        let mut events = Vec::new();
        while let Some(event) = futures::StreamExt::next(&mut self).await {
            events.push(event);
        }
        (events, self.result().await)
    }

    fn poll_sequenced(&mut self, cx: &mut Context<'_>) -> Poll<Option<Sequenced>> {
        loop {
            if let Some(item) = self.current.next() {
                return Poll::Ready(Some(item));
            }
            match self.batches.poll_recv(cx) {
                Poll::Ready(Some(batch)) => self.current = batch.into_iter(),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Stream for ExecuteStream {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.poll_sequenced(cx).map(|item| item.map(|(_, event)| event))
    }
}

/// [`ExecuteStream`] with sequence numbers; see [`ExecuteStream::sequenced`].
pub struct SequencedStream(ExecuteStream);

impl SequencedStream {
    /// Waits for the run to end (see [`ExecuteStream::result`]).
    pub async fn result(self) -> ExecuteResult {
        self.0.result().await
    }

    /// Aborts the run.
    pub fn abort(&self) {
        self.0.abort();
    }
}

impl Stream for SequencedStream {
    type Item = Sequenced;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Sequenced>> {
        self.0.poll_sequenced(cx)
    }
}

/// The run's side of the stream: numbers events and sends them in batches.
pub(crate) struct Emitter {
    tx: Option<mpsc::Sender<Vec<Sequenced>>>,
    buf: Vec<Sequenced>,
    seq: u64,
}

impl Emitter {
    pub(crate) fn new(tx: mpsc::Sender<Vec<Sequenced>>, last_seq: u64) -> Self {
        Self { tx: Some(tx), buf: Vec::with_capacity(BATCH), seq: last_seq }
    }

    /// The last sequence number given out.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Queues an event. Nothing is lost: callers [`pace`](Self::pace) or
    /// [`flush`](Self::flush) before the batch grows past [`BATCH`].
    pub(crate) fn emit(&mut self, event: AgentEvent) {
        self.seq += 1;
        if self.tx.is_some() {
            self.buf.push((self.seq, event));
        }
    }

    /// Sends the batch if it is full.
    pub(crate) async fn pace(&mut self) {
        if self.buf.len() >= BATCH {
            self.flush().await;
        }
    }

    /// Sends what is queued (waiting while the consumer is behind).
    pub(crate) async fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let Some(tx) = &self.tx else {
            self.buf.clear();
            return;
        };
        let batch = std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH));
        if tx.send(batch).await.is_err() {
            // The consumer went away; the run goes on without it.
            self.tx = None;
        }
    }
}
