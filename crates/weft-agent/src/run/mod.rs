//! The run driver: does what the [`Machine`] decides (model calls, tool executions), turns what
//! happens into [`AgentEvent`]s, and records the outcome in the session.
//!
//! The session lock is taken only for short, synchronous updates, never across an await. The
//! per-token path moves each delta string from the provider into its event: no copy of the
//! partial message, no re-parsing.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::time::Instant;

use futures::FutureExt;
use tokio::sync::mpsc;
use weft_core::{
    AgentEvent, AssistantMessage, Cost, Durability, Message, MessageSpan, Role, SessionStatus,
    ToolCall, Usage, now_ms,
};
use weft_llm::{CancellationToken, ModelRequest};
use weft_loop::{
    CompletedTurn, Disposition, Machine, Next, NodeLoop, NodeOutcome, Progress, Ready,
};

use crate::calls::{panic_message, run_batch};
use crate::catalog::Catalog;
use crate::content::{EventSink, stream_message};
use crate::context::AgentInner;
use crate::execute::{Emitter, ExecuteResult};
use crate::graph::{GraphMsg, GraphNodeRun};
use crate::outcome::{Ending, FailureKind};
use crate::session::SessionHandle;
use crate::telemetry::{self, CallInfo};
use crate::tool::ToolContext;

mod boundary;

/// How long a run that ends waits for the persister's append under its lease to come back
/// before it lets the lease go (a store that hangs is not waited for longer).
const FENCED_WRITES_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A model call made in a node run of its own ([`Run::model_node`]).
struct ModelNode {
    /// The run's state before the node.
    before: serde_json::Value,
    step_id: String,
    started_at: u64,
    latency_ms: u64,
    message: AssistantMessage,
    /// Why the call failed, if it did.
    failure: Option<String>,
}

/// One run in progress.
pub(crate) struct Run {
    agent: Arc<AgentInner>,
    session: SessionHandle,
    machine: Machine,
    emitter: Emitter,
    cancel: CancellationToken,
    start_len: usize,
    session_id: String,
    /// The scope its model calls are opened in: the session's id.
    scope: Arc<str>,
    /// What decided the run's end so far: its result's `outcome` and `error`.
    ending: Ending,
    /// The run's lease, when a store keeps the session.
    lease: Option<crate::lease::Lease>,
    /// Checkpoints taken and not stored yet (stored at the next boundary).
    checkpoints: Vec<weft_core::Checkpoint>,
    /// The id of the last checkpoint taken.
    last_checkpoint: Option<String>,
    /// The run's state at the last node's end (or before the execution's input).
    last_state: Option<serde_json::Value>,
    /// For a recovery: the id of the run whose answer it completes (its `session_start` says so).
    recovers: Option<String>,
    /// The steps this execution finished, for its result (the event log keeps every step).
    steps: Vec<Arc<weft_core::AgentStep>>,
    /// How durably the run is stored: under `exit`, nothing is saved at a boundary.
    durability: Durability,
    /// Its `invoke_agent` span ([`crate::telemetry`]): the parent of its calls' spans.
    span: tracing::Span,
    /// The seq its events come after.
    after_seq: u64,
}

impl Run {
    pub(crate) fn new(
        agent: Arc<AgentInner>,
        session: SessionHandle,
        machine: Machine,
        emitter: Emitter,
        cancel: CancellationToken,
        start_len: usize,
    ) -> Self {
        let session_id = session.id();
        let scope = Arc::from(session_id.as_str());
        Self {
            scope,
            agent,
            session,
            machine,
            emitter,
            cancel,
            start_len,
            session_id,
            ending: Ending::default(),
            lease: None,
            checkpoints: Vec::new(),
            last_checkpoint: None,
            recovers: None,
            last_state: None,
            steps: Vec::new(),
            durability: Durability::default(),
            span: tracing::Span::none(),
            after_seq: 0,
        }
    }

    /// Gives the run its span, and the seq its events come after (recorded on the span at its
    /// end, with the last one's).
    pub(crate) fn set_span(&mut self, span: tracing::Span, after_seq: u64) {
        self.span = span;
        self.after_seq = after_seq;
    }

    /// Its `invoke_agent` span.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// What a model call's span is made of, in node run `node_id`.
    fn call_info<'a>(
        &'a self,
        provider: &'a str,
        node_id: &'a str,
        step_index: Option<u32>,
    ) -> CallInfo<'a> {
        CallInfo {
            parent: &self.span,
            session_id: &self.session_id,
            provider,
            node_id,
            step_index,
            capture_content: self.agent.config.capture_content,
        }
    }

    /// How durably the run is stored ([`Durability`]).
    pub(crate) fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// Gives the run its lease, released when the run has ended (and before the session takes
    /// new input).
    pub(crate) fn set_lease(&mut self, lease: Option<crate::lease::Lease>) {
        self.lease = lease;
    }

    /// The run's state before the execution's input was applied (what its first node changed
    /// is measured from it).
    pub(crate) fn set_state_before(&mut self, state: serde_json::Value) {
        self.last_state = Some(state);
    }

    /// Marks the run as the recovery of the run `recovers` (whose process died).
    pub(crate) fn set_recovers(&mut self, recovers: Option<String>) {
        self.recovers = recovers;
    }

    /// Runs to a resting status and reports what the run did.
    ///
    /// Borrows the run so that, should it panic (a hook or a provider breaking its contract),
    /// [`Run::end_after_panic`] can still close the stream with the events already numbered.
    pub(crate) async fn drive(
        &mut self,
        input: Option<(Arc<Message>, u64)>,
        first: Progress,
    ) -> ExecuteResult {
        self.emitter.emit(AgentEvent::SessionStart {
            session_id: self.session_id.clone(),
            run_id: self.emitter.run_id().to_string(),
            agent: self.machine.mode().name().to_string(),
            recovers: self.recovers.take().map(Box::new),
        });
        if let Some((message, position)) = input {
            self.emit_message(message, position);
        }
        let mut progress = first;
        let status = loop {
            if let Some(error) = progress.error.take() {
                // Why the mode ends the run (its bound, a refused plan, every path failed). A
                // failed scratch call's words come here too: recorded as the model's already.
                let status = match progress.next {
                    Next::Finish(status) | Next::Suspend(status) => status,
                    _ => SessionStatus::Running,
                };
                self.ending.mode_ended(status, error);
            }
            let events = std::mem::take(&mut progress.events);
            if let Some(done) = progress.completed.take() {
                self.emit_completed(done, events);
            } else {
                self.emit_progress(events);
            }
            for step in std::mem::take(&mut progress.steps) {
                self.step_ended(step, None, None);
            }
            // A node run ended here (an observation): its checkpoint is stored before the next
            // node starts.
            if !self.checkpoints.is_empty() {
                self.checkpoint().await;
            }
            let calls_model = matches!(
                progress.next,
                Next::CallModel | Next::Think { .. } | Next::Scratch { .. } | Next::RunGraph
            );
            if calls_model && self.cancel.is_cancelled() {
                progress = self.with_session(|m, s| m.abort(s, now_ms()));
                continue;
            }
            match progress.next {
                Next::CallModel => progress = self.call_model(None).await,
                Next::Think { node, guidance } => {
                    progress = self.call_model(Some((node, guidance))).await;
                }
                Next::Scratch { node, prompt } => progress = self.scratch(node, prompt).await,
                Next::RunGraph => progress = self.run_graph().await,
                Next::RunTools(calls) => progress = self.run_tools(calls).await,
                Next::Suspend(status) | Next::Finish(status) => break status,
            }
            self.checkpoint().await;
            self.emitter.pace().await;
        };
        self.finish(status).await
    }

    /// Records the end of the run: the session's resting state is saved before anything
    /// reports it (suspension events, `session_end`, the result), then the events are persisted
    /// and the session takes new input.
    async fn finish(&mut self, status: SessionStatus) -> ExecuteResult {
        if status == SessionStatus::MaxTurns {
            let max_turns = self.machine.max_turns();
            self.ending
                .max_turns(|| format!("the run stopped after {max_turns} model calls (max_turns)"));
        }
        let (messages, mut pending_tool_calls, mut pending_approvals, steps) = {
            let mut state = self.session.lock();
            let s = &mut state.session;
            self.machine.end(s, status);
            let steps: Vec<weft_core::AgentStep> =
                std::mem::take(&mut self.steps).into_iter().map(Arc::unwrap_or_clone).collect();
            if self.session.shared.store.is_none() {
                s.version += 1;
                s.updated_at = now_ms();
            }
            let messages = s.messages.shared_from(self.start_len).to_vec();
            (messages, s.pending_tool_calls(), s.pending_approvals(), steps)
        };
        // Nothing reports the end before the store has it.
        let config = &self.agent.config;
        let until = Instant::now() + config.end_commit_timeout.min(config.lease_ttl * 2 / 3);
        let status = match self.save_end(until).await {
            Ok(()) => status,
            Err(error) => {
                // Calls the store does not know to be waiting cannot be answered.
                pending_tool_calls.clear();
                pending_approvals.clear();
                self.end_not_kept(status, &error)
            }
        };
        if status == SessionStatus::AwaitingApproval {
            self.emitter.emit(AgentEvent::ApprovalRequired {
                session_id: self.session_id.clone(),
                tool_calls: pending_approvals.clone(),
            });
        }
        if status.is_suspended() && !pending_tool_calls.is_empty() {
            self.emitter.emit(AgentEvent::AwaitingToolExecution {
                session_id: self.session_id.clone(),
                tool_calls: pending_tool_calls.clone(),
            });
        }
        let (usage, cost) = run_usage(&messages, &steps);
        let span = MessageSpan { first: self.start_len as u64, count: messages.len() as u64 };
        self.emitter.emit_repeating(
            AgentEvent::SessionEnd {
                session_id: self.session_id.clone(),
                status,
                messages: messages.clone(),
                usage: Box::new(usage),
                cost: Box::new(cost),
            },
            Some(span),
        );
        // From here the run counts as ended: its resting state is saved.
        self.session.lock().ending = true;
        if let Err(error) = self.emitter.flush_durable().await {
            // This process's watchers have the events all the same; the store may miss them, and
            // the caller is told so: this end is not durable.
            tracing::error!(session_id = %self.session_id, %error, "persisting the run's events failed");
            self.ending.store_failed(&error);
        }
        let last_seq = self.let_go().await;
        if !pending_tool_calls.is_empty() {
            // Its deadlines are the sweeper's to watch.
            self.agent.sweep_now.notify_one();
        }
        // The outcome and the error text come from one record: they always agree.
        let (outcome, error) = self.ending.take(status);
        telemetry::run_ended(
            &self.span,
            status,
            telemetry::error_type(&outcome),
            (&usage, &cost),
            (last_seq > self.after_seq).then_some((self.after_seq + 1, last_seq)),
        );
        ExecuteResult {
            session_id: self.session_id.clone(),
            status,
            outcome,
            messages: messages.iter().map(|m| Message::clone(m)).collect(),
            pending_tool_calls,
            pending_approvals,
            usage,
            cost,
            steps,
            error,
        }
    }

    /// The ended run lets go of what it holds: its lease (once its fenced appends are back), its
    /// place in the log and in the session, which takes new input from here. The seq of its
    /// last event.
    async fn let_go(&mut self) -> u64 {
        if let Some(lease) = self.lease.take() {
            self.session.lock().fence = None;
            self.emitter.hub().release_fence();
            self.emitter.hub().fenced_writes_over(FENCED_WRITES_WAIT).await;
            lease.release().await;
        }
        let hub = Arc::clone(self.emitter.hub());
        // The log first, then the session: a run started right after sees this one ended.
        hub.end_run();
        let last_seq = hub.last_seq();
        {
            let mut state = self.session.lock();
            state.session.last_event_seq = last_seq;
            state.run = None;
            state.ending = false;
            state.recovering = false;
        }
        self.session.shared.idle.notify_waiters();
        last_seq
    }

    /// The run's end could not be stored: the run reports an error saying so (never the status
    /// it reached, which a later recovery may not reach again), and this process lets go of
    /// what it holds as if the run had died with it: the session is reloaded from the store
    /// before it is used again, and the run is recovered from its last stored boundary, here or
    /// in another process, once the store takes writes again.
    fn end_not_kept(
        &mut self,
        reached: SessionStatus,
        error: &weft_core::StoreError,
    ) -> SessionStatus {
        tracing::error!(session_id = %self.session_id, %error, status = %reached, "the run's end could not be stored: it is not kept");
        let text = format!(
            "the run's end ({reached}) could not be stored, so it is not kept: {error}; the \
             session goes on from its last stored state"
        );
        self.emitter.emit(AgentEvent::Error { error: text.clone(), message: None });
        self.ending.end_not_kept(reached, text);
        let mut state = self.session.lock();
        state.stale = true;
        state.session.status = SessionStatus::Error;
        SessionStatus::Error
    }

    /// After the run panicked: every unanswered call gets an error result (the conversation
    /// stays valid), the session rests in `error`, and the stream still ends the way every stream
    /// ends (`error`, then `session_end`), numbered after the events already given out, so
    /// that every wire format writes its closing frame and no sequence number is reused.
    pub(crate) async fn end_after_panic(&mut self, panic: String) -> ExecuteResult {
        let error = format!("the run stopped unexpectedly: {panic}");
        tracing::error!(%error, session_id = %self.session_id, "agent run panicked");
        {
            let mut state = self.session.lock();
            Machine::new(1, 0).abort(&mut state.session, now_ms());
        }
        self.ending.failed(FailureKind::Panic, error.clone());
        self.emitter.emit(AgentEvent::Error { error, message: None });
        let mut result = self.finish(SessionStatus::Error).await;
        // Steps of a run that panicked are not trustworthy; its usage is in its messages.
        result.steps.clear();
        result
    }

    fn with_session<T>(&mut self, f: impl FnOnce(&mut Machine, &mut weft_core::Session) -> T) -> T {
        let mut state = self.session.lock();
        f(&mut self.machine, &mut state.session)
    }

    /// A message of the log (at `position`): `message_start`, then `message_end` with the log's
    /// own message.
    fn emit_message(&mut self, message: Arc<Message>, position: u64) {
        self.emitter.emit(AgentEvent::MessageStart { role: message.role() });
        self.emitter
            .emit_repeating(AgentEvent::MessageEnd { message }, Some(MessageSpan::one(position)));
    }

    /// A step ended: its tool results (the observe node) and the step itself.
    fn emit_completed(&mut self, done: CompletedTurn, events: Vec<weft_core::ModeProgress>) {
        let CompletedTurn { results, first_result, step } = done;
        if !results.is_empty() {
            let node_id = Machine::observe_node_id(step.step_index);
            // The results joined the conversation before this node reports them: what it
            // changed is measured from the state the run was in before (at the last node's end,
            // or before the input that completed the turn).
            let before = self.last_state.take().unwrap_or_else(|| self.mode_state());
            self.emitter
                .emit(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
            for (position, result) in (first_result..).zip(results) {
                self.emit_message(result, position);
            }
            // What the observation decided (a backtrack) belongs to it.
            self.emit_progress(events);
            self.emitter.emit(AgentEvent::NodeExit {
                name: "observe".into(),
                node_id: node_id.clone(),
                error: None,
            });
            self.after_node("observe", &node_id, before);
        } else {
            self.emit_progress(events);
        }
        // The step's assistant message sits right before its results.
        let span = first_result.checked_sub(1).map(MessageSpan::one);
        self.step_ended(step, span, None);
    }

    /// A step ended: it is reported (`step_end`, in node run `node` when a graph node made it;
    /// `span`: the log's messages it repeats) and kept for the run's result.
    fn step_ended(
        &mut self,
        step: Arc<weft_core::AgentStep>,
        span: Option<MessageSpan>,
        node: Option<Arc<str>>,
    ) {
        self.steps.push(Arc::clone(&step));
        let event = AgentEvent::StepEnd { step };
        match node {
            Some(node) => self.emitter.emit_in(Some(node), event),
            None => self.emitter.emit_repeating(event, span),
        }
    }

    fn emit_progress(&mut self, events: Vec<weft_core::ModeProgress>) {
        for event in events {
            self.emitter.emit(AgentEvent::Progress(event));
        }
    }

    /// The run's state now ([`Machine::mode_state`]).
    fn mode_state(&self) -> serde_json::Value {
        Machine::mode_state(&self.session.lock().session)
    }

    /// One model call: streams its events, then hands the message to the machine.
    /// `guided`: the node's name and what the model is told to do now (a mode's step; the
    /// guidance is not kept in the conversation).
    async fn call_model(&mut self, guided: Option<(&'static str, String)>) -> Progress {
        let agent = self.agent.clone();
        let name = guided.as_ref().map_or("think", |(name, _)| name);
        let (mut request, step_index, provider, node_id) = {
            let state = self.session.lock();
            let s = &state.session;
            let mut tools: Vec<_> = agent.tools.snapshot().specs().cloned().collect();
            tools.extend(s.tools.iter().cloned());
            let mut messages = s.messages.clone();
            if let Some((_, guidance)) = &guided {
                messages.push(Message::User(weft_core::UserMessage::text(guidance.clone())));
            }
            let request = crate::model::request(&agent, s, messages, tools);
            let node_id = self.machine.node_id(s, name);
            (request, s.step_count, agent.provider_for(&s.provider), node_id)
        };
        agent.hooks.before_model_call(&mut request).await;
        let ModelNode { before, step_id, started_at, latency_ms, message, failure } =
            self.model_node(name, &node_id, step_index, provider.as_ref(), request).await;
        let dispositions =
            if failure.is_some() { Vec::new() } else { self.dispositions(&message).await };
        // The machine appends the message to the log; the events repeat the log's own.
        // (Rejected calls' results may follow it in the log at once.)
        let (progress, logged) = self.with_session(|m, s| {
            let position = s.messages.len();
            let progress =
                m.on_model_message(s, message, dispositions, step_id, started_at, latency_ms);
            (progress, s.messages.shared().get(position).cloned().map(|m| (m, position as u64)))
        });
        if let Some((message, position)) = &logged {
            self.emitter.emit_repeating(
                AgentEvent::MessageEnd { message: Arc::clone(message) },
                Some(MessageSpan::one(*position)),
            );
        }
        if let Some(error) = &failure {
            self.ending.failed(FailureKind::Model, error.clone());
            let (message, span) = match logged {
                Some((message, position)) => (Some(message), Some(MessageSpan::one(position))),
                None => (None, None),
            };
            self.emitter.emit_repeating(AgentEvent::Error { error: error.clone(), message }, span);
        }
        let mut progress = progress;
        // What the answer decided (a dead end's backtrack) belongs to this node, when no tool
        // results follow (they have an `observe` node of their own).
        if progress.completed.as_ref().is_some_and(|c| c.results.is_empty()) {
            self.emit_progress(std::mem::take(&mut progress.events));
        }
        self.emitter.emit(AgentEvent::NodeExit {
            name: name.into(),
            node_id: node_id.clone(),
            error: failure,
        });
        self.after_node(name, &node_id, before);
        progress
    }

    /// Enters node run `node_id` (named `name`) and streams one model call in it as step
    /// `step_index`: what the caller needs to hand the message on.
    async fn model_node(
        &mut self,
        name: &str,
        node_id: &str,
        step_index: u32,
        provider: &dyn weft_llm::Provider,
        request: ModelRequest,
    ) -> ModelNode {
        let before = self.mode_state();
        let step_id = uuid::Uuid::new_v4().to_string();
        self.emitter.emit(AgentEvent::NodeEnter { name: name.into(), node_id: node_id.into() });
        self.emitter.emit(AgentEvent::StepStart { step_id: step_id.clone(), step_index });
        self.emitter.emit(AgentEvent::MessageStart { role: Role::Assistant });
        let started_at = now_ms();
        let clock = Instant::now();
        let call = self.call_info(provider.name(), node_id, Some(step_index));
        let (stream, chat) =
            crate::model::open(provider, &self.scope, request, self.cancel.child_token(), &call);
        let message = stream_message(stream, &mut RunSink(&mut self.emitter), chat).await;
        let latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        let failure = message.stop_reason.is_failure().then(|| message.failure_text().to_string());
        ModelNode { before, step_id, started_at, latency_ms, message, failure }
    }

    /// A scratch model call in node `name`: the prompt alone, no tools; its answer is the
    /// mode's, never part of the conversation.
    async fn scratch(&mut self, name: &'static str, prompt: String) -> Progress {
        let agent = self.agent.clone();
        let (request, step_index, provider, node_id) = {
            let s = &self.session.lock().session;
            let mut messages = weft_core::History::new();
            messages.push(Message::User(weft_core::UserMessage::text(prompt)));
            let request = crate::model::request(&agent, s, messages, Vec::new());
            let node_id = self.machine.node_id(s, name);
            (request, s.step_count, agent.provider_for(&s.provider), node_id)
        };
        let ModelNode { before, step_id, started_at, latency_ms, message, failure } =
            self.model_node(name, &node_id, step_index, provider.as_ref(), request).await;
        let shared = Arc::new(Message::Assistant(message.clone()));
        self.emitter.emit(AgentEvent::MessageEnd { message: Arc::clone(&shared) });
        if let Some(error) = &failure {
            // The machine ends the run with this text too (the first failure is the run's).
            self.ending.failed_first(FailureKind::Model, error.clone());
            self.emitter.emit(AgentEvent::Error { error: error.clone(), message: Some(shared) });
        }
        let id = node_id.clone();
        let mut progress = self.with_session(|m, s| {
            m.on_scratch(s, name, id, message, step_id, started_at, latency_ms)
        });
        self.emit_progress(std::mem::take(&mut progress.events));
        for step in std::mem::take(&mut progress.steps) {
            self.step_ended(step, None, None);
        }
        let error = failure.or_else(|| progress.error.clone());
        self.emitter.emit(AgentEvent::NodeExit {
            name: name.into(),
            node_id: node_id.clone(),
            error,
        });
        self.after_node(name, &node_id, before);
        progress
    }

    /// Runs the graph's ready nodes concurrently (up to the mode's limit), each a small ReAct
    /// loop in a task of its own whose events carry its node run's id; reports each to the
    /// machine as it ends, saving the run after each, until the graph is done with.
    async fn run_graph(&mut self) -> Progress {
        let (tx, mut rx) = mpsc::channel::<GraphMsg>(256);
        let mut running = 0usize;
        let mut last: Option<Progress> = None;
        loop {
            let ready = if self.cancel.is_cancelled() || last.is_some() {
                Vec::new()
            } else {
                self.with_session(|m, s| m.graph_ready(s))
            };
            for node in ready {
                self.start_graph_node(node, tx.clone());
                running += 1;
            }
            if running == 0 {
                return last.unwrap_or_else(|| {
                    let aborted = self.cancel.is_cancelled();
                    self.with_session(|m, s| m.graph_stalled(s, now_ms(), aborted))
                });
            }
            let message = match rx.try_recv() {
                Ok(message) => Some(message),
                Err(_) => {
                    self.emitter.flush().await;
                    rx.recv().await
                }
            };
            let Some(message) = message else { continue };
            match message {
                GraphMsg::Event(node, event) => {
                    self.emitter.emit_in(Some(node), event);
                    self.emitter.pace().await;
                }
                GraphMsg::Done { id, node_id, outcome, calls } => {
                    running -= 1;
                    let before = self.mode_state();
                    let error = outcome.result.as_ref().err().cloned();
                    let mut progress =
                        self.with_session(|m, s| m.on_graph_node(s, &id, outcome, calls));
                    let node: Arc<str> = Arc::from(node_id.as_str());
                    for step in std::mem::take(&mut progress.steps) {
                        self.step_ended(step, None, Some(node.clone()));
                    }
                    for event in std::mem::take(&mut progress.events) {
                        self.emitter.emit_in(Some(node.clone()), AgentEvent::Progress(event));
                    }
                    self.emitter.emit_in(
                        Some(node),
                        AgentEvent::NodeExit {
                            name: "got_node".into(),
                            node_id: node_id.clone(),
                            error,
                        },
                    );
                    self.after_node("got_node", &node_id, before);
                    self.checkpoint().await;
                    if progress.next != Next::RunGraph {
                        last = Some(progress);
                    }
                }
            }
        }
    }

    /// Starts graph node `node`: its node run is entered, and its first model call made, here
    /// (in the order nodes become ready), the rest in a task of its own.
    fn start_graph_node(&mut self, node: Ready, tx: mpsc::Sender<GraphMsg>) {
        let agent = self.agent.clone();
        let graph_id = node.id.clone();
        let (request, provider, node_id, node) = {
            let s = &self.session.lock().session;
            let node_id = self.machine.graph_node_id(s, &node.id);
            let node = NodeLoop::new(node, node_id.clone(), self.machine.node_turns(), now_ms());
            // Only local tools are offered: a graph node runs its calls itself and cannot
            // suspend on a client's (remote) tool.
            let tools: Vec<_> = agent.tools.snapshot().specs().cloned().collect();
            let request = crate::model::request(&agent, s, node.messages().clone(), tools);
            (request, agent.provider_for(&s.provider), node_id, node)
        };
        let node_ref: Arc<str> = Arc::from(node_id.as_str());
        self.emitter.emit_in(
            Some(node_ref.clone()),
            AgentEvent::NodeEnter { name: "got_node".into(), node_id: node_id.clone() },
        );
        self.emitter.emit_in(
            Some(node_ref.clone()),
            AgentEvent::Progress(weft_core::ModeProgress::GotNodeStart { id: graph_id.clone() }),
        );
        let cancel = self.cancel.child_token();
        let started_at = now_ms();
        let call = self.call_info(provider.name(), &node_id, None);
        let first = crate::model::open(
            provider.as_ref(),
            &self.scope,
            request.clone(),
            cancel.clone(),
            &call,
        );
        let tool_context = ToolContext {
            call_id: String::new(),
            session_id: self.session_id.clone(),
            run_id: self.emitter.run_id().to_string(),
            owner_id: self.session.lock().session.owner.clone(),
            cancel: cancel.clone(),
        };
        let ctx = GraphNodeRun {
            agent,
            shared: Arc::clone(&self.session.shared),
            provider,
            request,
            node,
            node_id,
            node_ref,
            scope: Arc::clone(&self.scope),
            cancel,
            tx,
            tool_context,
            span: self.span.clone(),
        };
        let (id, node_id, tx) = (graph_id, ctx.node_id.clone(), ctx.tx.clone());
        tokio::spawn(async move {
            // A node that panics (a provider or a tool breaking its contract) fails; the graph
            // goes on without it.
            if let Err(panic) = AssertUnwindSafe(ctx.run(first, started_at)).catch_unwind().await {
                let error = format!("the node stopped unexpectedly: {}", panic_message(&*panic));
                let outcome = NodeOutcome { result: Err(error), model_calls: 0, expansion: None };
                let _ = tx.send(GraphMsg::Done { id, node_id, outcome, calls: Vec::new() }).await;
            }
        });
    }

    /// How each tool call of `message` is to be handled ([`crate::admission`]).
    async fn dispositions(&self, message: &AssistantMessage) -> Vec<Disposition> {
        let local = self.agent.tools.snapshot();
        let catalog = Catalog { local: &local, remote: &self.session.shared.remote };
        crate::admission::dispositions(&self.agent, catalog, message).await
    }

    /// Runs local calls concurrently, each in a task of its own (a panic, a timeout or an abort
    /// touches only that call), streaming their output; results are handed over in the model's
    /// order by the machine.
    async fn run_tools(&mut self, calls: Vec<ToolCall>) -> Progress {
        let (node_id, owner_id) = {
            let state = self.session.lock();
            (Machine::act_node_id(&state.session), state.session.owner.clone())
        };
        let before = self.mode_state();
        self.emitter.emit(AgentEvent::NodeEnter { name: "act".into(), node_id: node_id.clone() });
        let base = ToolContext {
            call_id: String::new(),
            session_id: self.session_id.clone(),
            run_id: self.emitter.run_id().to_string(),
            owner_id,
            cancel: self.cancel.clone(),
        };
        let (agent, cancel) = (Arc::clone(&self.agent), self.cancel.clone());
        let (outcomes, aborted) =
            run_batch(&agent, &calls, &base, &self.span, &cancel, &mut RunSink(&mut self.emitter))
                .await;
        self.with_session(|m, s| m.on_tool_results(s, outcomes));
        self.emitter.emit(AgentEvent::NodeExit {
            name: "act".into(),
            node_id: node_id.clone(),
            error: None,
        });
        self.after_node("act", &node_id, before);
        let now = now_ms();
        // The turn complete, its results join the conversation (the observe node).
        self.with_session(|m, s| if aborted { m.abort(s, now) } else { m.proceed(s) })
    }
}

/// The run's events go to its emitter, paced; what is queued goes out while it waits.
struct RunSink<'a>(&'a mut Emitter);

impl EventSink for RunSink<'_> {
    fn emit(&mut self, event: AgentEvent) {
        self.0.emit(event);
    }

    async fn pace(&mut self) {
        self.0.pace().await;
    }

    async fn idle(&mut self) {
        self.0.flush().await;
    }
}

/// What a run's model calls used and cost: its messages', and its scratch calls' (candidates,
/// scores, plans, graph nodes), which are not in the conversation.
fn run_usage(messages: &[Arc<Message>], steps: &[weft_core::AgentStep]) -> (Usage, Cost) {
    let (mut usage, mut cost) = (Usage::default(), Cost::default());
    for message in messages {
        if let Message::Assistant(m) = &**message {
            usage += m.usage;
            cost += m.cost_or_zero();
        }
    }
    for step in steps.iter().filter(|s| s.annotations.extra.contains_key("scratch")) {
        usage += step.llm_response.usage;
        cost += step.llm_response.cost_or_zero();
    }
    (usage, cost)
}
