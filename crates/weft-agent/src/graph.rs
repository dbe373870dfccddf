//! One graph-of-thoughts node run, in a task of its own: the node's small ReAct loop, whose
//! decisions are the machine's ([`NodeLoop`]); this file does its IO — model calls through the
//! run's request builder, calls admitted like the conversation's and run together like them —
//! and sends its events to the driver ([`crate::run`]) tagged with the node run's id, so
//! concurrent nodes keep their own.

use std::sync::Arc;
use tokio::time::Instant;

use tokio::sync::mpsc;
use weft_core::{AgentEvent, AssistantMessage, Message, Role, UserMessage, now_ms};
use weft_llm::{CancellationToken, ModelRequest, Provider, ProviderStream};
use weft_loop::{NodeCall, NodeLoop, NodeNext, NodeOutcome};

use crate::calls::run_batch;
use crate::catalog::Catalog;
use crate::content::{EventSink, stream_message};
use crate::context::AgentInner;
use crate::session::Shared;
use crate::telemetry::{CallInfo, Chat};
use crate::tool::ToolContext;

/// What a graph node's task tells the driver.
pub(crate) enum GraphMsg {
    /// An event of node run `.0`.
    Event(Arc<str>, AgentEvent),
    /// The node's run ended.
    Done {
        /// The graph node.
        id: String,
        /// Its node run.
        node_id: String,
        /// How it ended.
        outcome: NodeOutcome,
        /// Its model calls.
        calls: Vec<NodeCall>,
    },
}

/// A graph node to run.
pub(crate) struct GraphNodeRun {
    pub(crate) agent: Arc<AgentInner>,
    /// The session's shared parts (its remote tools, for admission).
    pub(crate) shared: Arc<Shared>,
    pub(crate) provider: Arc<dyn Provider>,
    /// The node's first request: its later ones differ in their messages only.
    pub(crate) request: ModelRequest,
    /// The node's loop: what it does next.
    pub(crate) node: NodeLoop,
    pub(crate) node_id: String,
    pub(crate) node_ref: Arc<str>,
    /// The scope its model calls are opened in (the session's).
    pub(crate) scope: Arc<str>,
    pub(crate) cancel: CancellationToken,
    pub(crate) tx: mpsc::Sender<GraphMsg>,
    /// What the node's tool calls are told of their run: session, run and owner ids (the call
    /// id and cancellation are each call's own).
    pub(crate) tool_context: ToolContext,
    /// The run's `invoke_agent` span: the parent of the node's calls' spans.
    pub(crate) span: tracing::Span,
}

/// A graph node's events, sent to the driver tagged with its node run (each as soon as the
/// caller paces, which it does after every event).
struct NodeEvents<'a> {
    node_ref: &'a Arc<str>,
    tx: &'a mpsc::Sender<GraphMsg>,
    queued: Vec<AgentEvent>,
}

impl EventSink for NodeEvents<'_> {
    fn emit(&mut self, event: AgentEvent) {
        self.queued.push(event);
    }

    async fn pace(&mut self) {
        for event in self.queued.drain(..) {
            let _ = self.tx.send(GraphMsg::Event(self.node_ref.clone(), event)).await;
        }
    }

    async fn idle(&mut self) {
        self.pace().await;
    }
}

impl GraphNodeRun {
    fn events(&self) -> NodeEvents<'_> {
        NodeEvents { node_ref: &self.node_ref, tx: &self.tx, queued: Vec::new() }
    }

    async fn send(&self, event: AgentEvent) {
        let mut events = self.events();
        events.emit(event);
        events.pace().await;
    }

    /// Runs the node to its end, starting with the model call `first` (opened by the driver on
    /// [`request`](Self::request)).
    pub(crate) async fn run(mut self, first: (ProviderStream, Chat), started_at: u64) {
        let mut first = Some((first, started_at));
        let mut next = NodeNext::CallModel;
        loop {
            next = match next {
                NodeNext::CallModel => {
                    let (opened, started_at) = match first.take() {
                        Some(first) => first,
                        None => {
                            let messages = self.node.messages().clone();
                            let request = ModelRequest { messages, ..self.request.clone() };
                            (self.open(request), now_ms())
                        }
                    };
                    let clock = Instant::now();
                    let (message, step_id) = self.model_call(opened).await;
                    let latency_ms = elapsed_ms(clock);
                    let dispositions = if message.stop_reason.is_failure() {
                        Vec::new()
                    } else {
                        let local = self.agent.tools.snapshot();
                        let catalog = Catalog { local: &local, remote: &self.shared.remote };
                        crate::admission::dispositions(&self.agent, catalog, &message).await
                    };
                    self.node.on_message(message, dispositions, step_id, started_at, latency_ms)
                }
                NodeNext::RunTools(calls) => {
                    let (agent, cancel) = (Arc::clone(&self.agent), self.cancel.clone());
                    let context = self.tool_context.clone();
                    let mut events =
                        NodeEvents { node_ref: &self.node_ref, tx: &self.tx, queued: Vec::new() };
                    let (outcomes, _) =
                        run_batch(&agent, &calls, &context, &self.span, &cancel, &mut events).await;
                    self.node.on_tool_results(outcomes)
                }
                NodeNext::Expand(prompt) => {
                    let mut messages = weft_core::History::new();
                    messages.push(Message::User(UserMessage::text(prompt)));
                    let request =
                        ModelRequest { messages, tools: Vec::new(), ..self.request.clone() };
                    let started_at = now_ms();
                    let clock = Instant::now();
                    let opened = self.open(request);
                    let (message, step_id) = self.model_call(opened).await;
                    self.node.on_expansion(message, step_id, started_at, elapsed_ms(clock))
                }
                NodeNext::Done => break,
            };
        }
        let id = self.node.id().to_string();
        let (outcome, calls) = self.node.finish();
        let done = GraphMsg::Done { id, node_id: self.node_id.clone(), outcome, calls };
        let _ = self.tx.send(done).await;
    }

    /// Opens model call `request` in the session's scope.
    fn open(&self, request: ModelRequest) -> (ProviderStream, Chat) {
        let call = CallInfo {
            parent: &self.span,
            session_id: &self.tool_context.session_id,
            provider: self.provider.name(),
            node_id: &self.node_id,
            step_index: None,
            capture_content: self.agent.config.capture_content,
        };
        crate::model::open(self.provider.as_ref(), &self.scope, request, self.cancel.clone(), &call)
    }

    /// Streams one model call of the node, between its `message_start` and `message_end`;
    /// returns its message and step id.
    async fn model_call(
        &self,
        (stream, chat): (ProviderStream, Chat),
    ) -> (AssistantMessage, String) {
        let step_id = uuid::Uuid::new_v4().to_string();
        self.send(AgentEvent::MessageStart { role: Role::Assistant }).await;
        let message = stream_message(stream, &mut self.events(), chat).await;
        let shared = Arc::new(Message::Assistant(message.clone()));
        self.send(AgentEvent::MessageEnd { message: shared }).await;
        (message, step_id)
    }
}

fn elapsed_ms(clock: Instant) -> u64 {
    u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX)
}
