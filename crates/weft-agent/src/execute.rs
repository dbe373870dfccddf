//! [`ExecuteStream`]: a run's events as they happen, then its [`ExecuteResult`].
//!
//! The run itself is a task of its own; the stream only listens. The run publishes its events to
//! the session's log ([`crate::hub`]) in batches: a batch is published when it is full or when
//! the run is about to wait for anything (the model, a tool), so a reader that keeps up sees
//! every event at once. Readers never slow the run: a slow one catches up from the log (memory,
//! then the store), and one that goes away does not stop the run.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use tokio::sync::oneshot;
use weft_core::{
    AgentEvent, AgentResponse, AgentStep, Cost, EventRecord, Message, MessageSpan, SessionStatus,
    StoreError, ToolCall, Usage,
};
use weft_llm::CancellationToken;

use crate::hub::{Draft, Hub};
use crate::outcome::{FailureKind, RunOutcome};

/// One event and its sequence number in the session.
pub type Sequenced = (u64, AgentEvent);

/// How many events are published in one batch at most.
pub(crate) const BATCH: usize = 256;
/// How many queued events' room the emitter keeps after publishing a smaller batch.
const KEEP_DRAFTS: usize = 16;

/// What a run did.
///
/// Its JSON has every field camelCase; `outcome` may be missing from JSON written before it
/// existed, and is then rebuilt from `status` and `error` ([`RunOutcome::from_status`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "ExecuteResultJson")]
pub struct ExecuteResult {
    /// The session.
    pub session_id: String,
    /// How the run ended.
    pub status: SessionStatus,
    /// How the run ended, as a type to match on: which end it was, and what failed. It agrees
    /// with `status` and `error`, and is decided in the same place.
    pub outcome: RunOutcome,
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

/// [`ExecuteResult`] as JSON may have it: `outcome` missing from JSON written before it
/// existed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecuteResultJson {
    session_id: String,
    status: SessionStatus,
    #[serde(default)]
    outcome: Option<RunOutcome>,
    messages: Vec<Message>,
    pending_tool_calls: Vec<ToolCall>,
    pending_approvals: Vec<ToolCall>,
    usage: Usage,
    cost: Cost,
    steps: Vec<AgentStep>,
    #[serde(default)]
    error: Option<String>,
}

impl From<ExecuteResultJson> for ExecuteResult {
    fn from(json: ExecuteResultJson) -> Self {
        let outcome = json
            .outcome
            .unwrap_or_else(|| RunOutcome::from_status(json.status, json.error.as_deref()));
        Self {
            session_id: json.session_id,
            status: json.status,
            outcome,
            messages: json.messages,
            pending_tool_calls: json.pending_tool_calls,
            pending_approvals: json.pending_approvals,
            usage: json.usage,
            cost: json.cost,
            steps: json.steps,
            error: json.error,
        }
    }
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
///
/// A view over the session's event log ([`crate::SessionHandle::subscribe`]) from the run's first
/// event to its `session_end`: reading it never slows the run, and a reader that falls behind
/// catches up from the store.
pub struct ExecuteStream {
    session_id: String,
    /// The seq of the session's last event before this run's first.
    after_seq: u64,
    events: Pin<Box<dyn Stream<Item = Arc<EventRecord>> + Send>>,
    result: oneshot::Receiver<ExecuteResult>,
    cancel: CancellationToken,
}

impl ExecuteStream {
    pub(crate) fn new(
        session_id: String,
        after_seq: u64,
        events: impl Stream<Item = Arc<EventRecord>> + Send + 'static,
        result: oneshot::Receiver<ExecuteResult>,
        cancel: CancellationToken,
    ) -> Self {
        Self { session_id, after_seq, events: Box::pin(events), result, cancel }
    }

    /// The session this run belongs to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The sequence number of the session's last event before this run's first: a watcher
    /// that subscribes after it sees exactly this run's events (and whatever follows), even
    /// when the input waited for another run (a recovery) to end first.
    pub fn after_seq(&self) -> u64 {
        self.after_seq
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

    /// The events as the session's log keeps them (sequence number, run, node, time).
    pub fn records(self) -> RecordStream {
        RecordStream(self)
    }

    /// Waits for the run to end and says what it did. Events not yet read are skipped (the run
    /// never waits for them).
    pub async fn result(self) -> ExecuteResult {
        let Self { session_id, result, .. } = self;
        const LOST: &str = "the run ended without a result (its task was cancelled)";
        match result.await {
            Ok(result) => result,
            Err(_) => ExecuteResult {
                session_id,
                status: SessionStatus::Error,
                outcome: RunOutcome::Failed { kind: FailureKind::Lost, message: LOST.into() },
                messages: Vec::new(),
                pending_tool_calls: Vec::new(),
                pending_approvals: Vec::new(),
                usage: Usage::default(),
                cost: Cost::default(),
                steps: Vec::new(),
                error: Some(LOST.into()),
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

    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Option<Arc<EventRecord>>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// The event of a record the log shares: moved out when nobody else holds it, else copied.
fn owned_event(record: Arc<EventRecord>) -> (u64, AgentEvent) {
    match Arc::try_unwrap(record) {
        Ok(record) => (record.seq, record.event),
        Err(shared) => (shared.seq, shared.event.clone()),
    }
}

impl Stream for ExecuteStream {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.poll_record(cx).map(|item| item.map(|record| owned_event(record).1))
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
        self.0.poll_record(cx).map(|item| item.map(owned_event))
    }
}

/// [`ExecuteStream`] as the log's records; see [`ExecuteStream::records`].
pub struct RecordStream(ExecuteStream);

impl RecordStream {
    /// Waits for the run to end (see [`ExecuteStream::result`]).
    pub async fn result(self) -> ExecuteResult {
        self.0.result().await
    }

    /// Aborts the run.
    pub fn abort(&self) {
        self.0.abort();
    }
}

impl Stream for RecordStream {
    type Item = Arc<EventRecord>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Arc<EventRecord>>> {
        self.0.poll_record(cx)
    }
}

/// The run's side of the log: queues events with their node, numbers and publishes them in
/// batches (the hub assigns the numbers).
pub(crate) struct Emitter {
    hub: Arc<Hub>,
    run_id: Arc<str>,
    buf: Vec<Draft>,
    /// The node run under way, which content events belong to.
    node: Option<Arc<str>>,
    /// A store failure that stopped numbering; the run ends in error.
    failure: Option<StoreError>,
}

impl Emitter {
    pub(crate) fn new(hub: Arc<Hub>, run_id: Arc<str>) -> Self {
        Self {
            hub,
            run_id,
            // Grown as needed: a run paced by its model publishes one or two events at a time,
            // and every running session holds this buffer (a whole batch is ~50 KiB).
            buf: Vec::new(),
            node: None,
            failure: None,
        }
    }

    /// The run's id.
    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The hub the events go to.
    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// The store failure that stopped publishing, if any.
    pub(crate) fn failure(&self) -> Option<&StoreError> {
        self.failure.as_ref()
    }

    /// Queues an event. Nothing is lost: callers [`pace`](Self::pace) or
    /// [`flush`](Self::flush) before the batch grows past [`BATCH`].
    pub(crate) fn emit(&mut self, event: AgentEvent) {
        self.emit_repeating(event, None);
    }

    /// Queues an event that repeats messages of the session's log, at `messages` (see
    /// [`MessageSpan`]): a store keeps it without them.
    pub(crate) fn emit_repeating(&mut self, event: AgentEvent, messages: Option<MessageSpan>) {
        let node = match &event {
            AgentEvent::NodeEnter { node_id, .. } => {
                let node: Arc<str> = Arc::from(node_id.as_str());
                self.node = Some(Arc::clone(&node));
                Some(node)
            }
            AgentEvent::NodeExit { .. } => self.node.take(),
            _ => self.node.clone(),
        };
        self.buf.push(Draft { node_id: node, event, messages });
    }

    /// Queues an event of node run `node`, whatever node run is current (graph nodes run at
    /// once, each with its own events).
    pub(crate) fn emit_in(&mut self, node: Option<Arc<str>>, event: AgentEvent) {
        self.buf.push(Draft { node_id: node, event, messages: None });
    }

    /// Publishes the batch if it is full. Then the run yields once: a provider whose deltas are
    /// always ready would otherwise keep the persister (woken onto this worker) from running
    /// until the model call ends.
    pub(crate) async fn pace(&mut self) {
        if self.buf.len() >= BATCH {
            self.flush().await;
            tokio::task::yield_now().await;
        }
    }

    /// Numbers and publishes what is queued. While the store is far behind, adjacent deltas of
    /// one block are merged first (every character still arrives once, in order).
    pub(crate) async fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if self.hub.lagging() {
            self.buf = merge_deltas(std::mem::take(&mut self.buf));
        }
        let published = self.buf.len();
        // The buffer is drained, not replaced: no allocation per batch.
        if let Err(error) = self.hub.publish(&self.run_id, &mut self.buf).await
            && self.failure.is_none()
        {
            tracing::error!(%error, "reserving event numbers failed: the run stops");
            self.failure = Some(error);
        }
        // A burst does not keep its room for the rest of a run that has slowed down.
        if published < KEEP_DRAFTS && self.buf.capacity() > KEEP_DRAFTS {
            self.buf.shrink_to(KEEP_DRAFTS);
        }
    }

    /// Publishes what is queued once it is in the store (with everything before it): the
    /// events that report how a run ended are durable before anyone sees them.
    /// Whatever the store does, the events are shown to this process's watchers.
    pub(crate) async fn flush_durable(&mut self) -> Result<(), StoreError> {
        let batch = std::mem::take(&mut self.buf);
        self.hub.publish_durable(&self.run_id, batch).await.map(|_| ())
    }
}

/// Merges adjacent text, thinking and tool-argument deltas of the same block (of the same node
/// run: graph nodes stream at once, each with its own blocks).
fn merge_deltas(batch: Vec<Draft>) -> Vec<Draft> {
    let mut out: Vec<Draft> = Vec::with_capacity(batch.len());
    for draft in batch {
        if let Some(last) = out.last_mut().filter(|last| last.node_id == draft.node_id) {
            let merged = match (&mut last.event, &draft.event) {
                (
                    AgentEvent::TextDelta { index: a, delta: into },
                    AgentEvent::TextDelta { index: b, delta },
                )
                | (
                    AgentEvent::ThinkingDelta { index: a, delta: into },
                    AgentEvent::ThinkingDelta { index: b, delta },
                )
                | (
                    AgentEvent::ToolcallDelta { index: a, delta: into },
                    AgentEvent::ToolcallDelta { index: b, delta },
                ) if a == b => {
                    into.push_str(delta);
                    true
                }
                _ => false,
            };
            if merged {
                continue;
            }
        }
        out.push(draft);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_deltas_of_one_block_merge_and_nothing_else_does() {
        let node = Some(Arc::<str>::from("think-0"));
        let text = |index, delta: &str| AgentEvent::TextDelta { index, delta: delta.into() };
        let batch = [
            text(0, "He"),
            text(0, "llo"),
            text(1, " wor"),
            AgentEvent::ThinkingDelta { index: 1, delta: "x".into() },
            text(1, "ld"),
            text(1, "!"),
        ]
        .map(|event| Draft { node_id: node.clone(), event, messages: None });
        let merged: Vec<AgentEvent> =
            merge_deltas(batch.into()).into_iter().map(|d| d.event).collect();
        assert_eq!(
            merged,
            vec![
                text(0, "Hello"),
                text(1, " wor"),
                AgentEvent::ThinkingDelta { index: 1, delta: "x".into() },
                text(1, "ld!"),
            ]
        );
    }

    #[test]
    fn deltas_of_two_node_runs_do_not_merge() {
        let (a, b) = (Some(Arc::<str>::from("got-a-1")), Some(Arc::<str>::from("got-b-1")));
        let text = |node: &Option<Arc<str>>, delta: &str| Draft {
            node_id: node.clone(),
            event: AgentEvent::TextDelta { index: 0, delta: delta.into() },
            messages: None,
        };
        let batch = vec![text(&a, "from "), text(&a, "a"), text(&b, "from b"), text(&a, "!")];
        let merged: Vec<(Option<Arc<str>>, AgentEvent)> =
            merge_deltas(batch).into_iter().map(|d| (d.node_id, d.event)).collect();
        let expected = [(&a, "from a"), (&b, "from b"), (&a, "!")]
            .map(|(node, delta)| {
                (node.clone(), AgentEvent::TextDelta { index: 0, delta: delta.into() })
            })
            .to_vec();
        assert_eq!(merged, expected);
    }
}
