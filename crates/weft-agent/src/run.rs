//! The run driver: does what the [`Machine`] decides (model calls, tool executions), turns what
//! happens into [`AgentEvent`]s, and records the outcome in the session.
//!
//! The session lock is taken only for short, synchronous updates, never across an await. The
//! per-token path moves each delta string from the provider into its event: no copy of the
//! partial message, no re-parsing.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use weft_core::{
    AgentEvent, AssistantContent, AssistantMessage, Cost, Message, MessageSpan, Role,
    SessionStatus, ToolCall, ToolExecutionResult, ToolResultMessage, Usage, UserContent, now_ms,
};
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, ProviderStream, StreamEvent};

use crate::agent::{AgentInner, SessionHandle, ToolGate};
use crate::catalog::{Catalog, Resolved};
use crate::execute::{Emitter, ExecuteResult};
use crate::machine::{CompletedTurn, Disposition, MODE, Machine, Next, Progress, ToolOutcome};
use crate::tool::{ToolContext, ToolEvent};

/// One run in progress.
pub(crate) struct Run {
    agent: Arc<AgentInner>,
    session: SessionHandle,
    machine: Machine,
    emitter: Emitter,
    cancel: CancellationToken,
    start_len: usize,
    session_id: String,
    error: Option<String>,
    /// The run's lease, when a store keeps the session.
    lease: Option<crate::lease::Lease>,
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
        Self {
            agent,
            session,
            machine,
            emitter,
            cancel,
            start_len,
            session_id,
            error: None,
            lease: None,
        }
    }

    /// Gives the run its lease, released when the run has ended (and before the session takes
    /// new input).
    pub(crate) fn set_lease(&mut self, lease: Option<crate::lease::Lease>) {
        self.lease = lease;
    }

    /// Presets the error the result reports (a recovery says why it ran).
    pub(crate) fn set_error(&mut self, error: Option<String>) {
        self.error = error;
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
            agent: MODE.to_string(),
        });
        if let Some((message, position)) = input {
            self.emit_message(message, position);
        }
        let mut progress = first;
        let status = loop {
            if let Some(done) = progress.completed.take() {
                self.emit_completed(done);
            }
            match progress.next {
                Next::CallModel if self.cancel.is_cancelled() => {
                    progress = self.with_session(|m, s| m.abort(s, now_ms()));
                }
                Next::CallModel => progress = self.call_model().await,
                Next::RunTools(calls) => progress = self.run_tools(calls).await,
                Next::Suspend(status) | Next::Finish(status) => break status,
            }
            self.checkpoint().await;
            self.emitter.pace().await;
        };
        self.finish(status).await
    }

    /// Saves what the last step changed (a boundary: a model call or a batch of tools ended).
    /// A store that refuses or fails stops the run: it is aborted, and the error reported.
    async fn checkpoint(&mut self) {
        let failure = match self.session.save().await {
            Err(error) => Some(error.to_string()),
            Ok(()) => self.emitter.failure().map(ToString::to_string),
        };
        if let Some(error) = failure {
            tracing::error!(session_id = %self.session_id, %error, "the session store failed: the run stops");
            self.error.get_or_insert(format!("the session store failed: {error}"));
            self.cancel.cancel();
        }
    }

    /// Records the end of the run: the session's resting state is saved before anything
    /// reports it (suspension events, `session_end`, the result), then the events are persisted
    /// and the session takes new input.
    async fn finish(&mut self, status: SessionStatus) -> ExecuteResult {
        if status == SessionStatus::MaxTurns && self.error.is_none() {
            self.error = Some(format!(
                "the run stopped after {} model calls (max_turns)",
                self.machine.max_turns()
            ));
        }
        let (messages, pending_tool_calls, pending_approvals, steps) = {
            let mut state = self.session.lock();
            let s = &mut state.session;
            let steps = self.machine.end(s, status);
            if self.session.shared.store.is_none() {
                s.version += 1;
                s.updated_at = now_ms();
            }
            let messages = s.messages.shared_from(self.start_len).to_vec();
            (messages, s.pending_tool_calls(), s.pending_approvals(), steps)
        };
        if let Err(error) = self.session.save().await {
            tracing::error!(session_id = %self.session_id, %error, "saving the run's end failed");
            self.error.get_or_insert(format!("the session store failed: {error}"));
        }
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
        let (mut usage, mut cost) = (Usage::default(), Cost::default());
        for message in &messages {
            if let Message::Assistant(m) = &**message {
                usage += m.usage;
                cost += m.cost.unwrap_or_default();
            }
        }
        let span = MessageSpan { first: self.start_len as u64, count: messages.len() as u64 };
        self.emitter.emit_repeating(
            AgentEvent::SessionEnd {
                session_id: self.session_id.clone(),
                status,
                messages: messages.clone(),
                usage,
                cost,
            },
            Some(span),
        );
        // From here the run counts as ended: its resting state is saved.
        self.session.lock().ending = true;
        if let Err(error) = self.emitter.flush_durable().await {
            // This process's watchers have the events all the same; the store may miss them.
            tracing::error!(session_id = %self.session_id, %error, "persisting the run's events failed");
        }
        if let Some(lease) = self.lease.take() {
            lease.release().await;
        }
        let hub = Arc::clone(self.emitter.hub());
        // The log first, then the session: a run started right after sees this one ended.
        hub.end_run();
        {
            let mut state = self.session.lock();
            state.session.last_event_seq = hub.last_seq();
            state.run = None;
            state.ending = false;
        }
        self.session.shared.idle.notify_waiters();
        if !pending_tool_calls.is_empty() {
            // Its deadlines are the sweeper's to watch.
            self.agent.sweep_now.notify_one();
        }
        ExecuteResult {
            session_id: self.session_id.clone(),
            status,
            messages: messages.iter().map(|m| Message::clone(m)).collect(),
            pending_tool_calls,
            pending_approvals,
            usage,
            cost,
            steps,
            error: self.error.take(),
        }
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
        self.error = Some(error.clone());
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
    fn emit_completed(&mut self, done: CompletedTurn) {
        let CompletedTurn { results, first_result, step } = done;
        if !results.is_empty() {
            let node_id = format!("observe-{}", step.step_index);
            self.emitter
                .emit(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
            for (position, result) in (first_result..).zip(results) {
                self.emit_message(result, position);
            }
            self.emitter.emit(AgentEvent::NodeExit {
                name: "observe".into(),
                node_id,
                error: None,
            });
        }
        // The step's assistant message sits right before its results.
        let span = first_result.checked_sub(1).map(MessageSpan::one);
        self.emitter.emit_repeating(AgentEvent::StepEnd { step }, span);
    }

    /// One model call: streams its events, then hands the message to the machine.
    async fn call_model(&mut self) -> Progress {
        let agent = self.agent.clone();
        let (mut request, step_index, provider) = {
            let state = self.session.lock();
            let s = &state.session;
            let mut tools: Vec<_> = agent.tools.specs().cloned().collect();
            tools.extend(s.tools.iter().cloned());
            let request = ModelRequest {
                session_id: s.id.clone(),
                model: s.model.clone(),
                system_prompt: s.system_prompt.clone(),
                messages: s.messages.clone(),
                tools,
                temperature: agent.config.temperature,
                max_tokens: agent.config.max_tokens,
                prices: None,
            };
            (request, s.step_count, agent.provider_for(&s.provider))
        };
        agent.hooks.before_model_call(&mut request).await;

        let step_id = uuid::Uuid::new_v4().to_string();
        let node_id = format!("think-{step_index}");
        self.emitter.emit(AgentEvent::NodeEnter { name: "think".into(), node_id: node_id.clone() });
        self.emitter.emit(AgentEvent::StepStart { step_id: step_id.clone(), step_index });
        self.emitter.emit(AgentEvent::MessageStart { role: Role::Assistant });

        let started_at = now_ms();
        let clock = Instant::now();
        let stream = provider.stream(request, self.cancel.child_token());
        let message = self.stream_message(stream).await;
        let latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);

        let failure = message.stop_reason.is_failure().then(|| {
            message.error_message.clone().unwrap_or_else(|| "the model call failed".to_string())
        });
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
            self.error = Some(error.clone());
            let (message, span) = match logged {
                Some((message, position)) => (Some(message), Some(MessageSpan::one(position))),
                None => (None, None),
            };
            self.emitter.emit_repeating(AgentEvent::Error { error: error.clone(), message }, span);
        }
        self.emitter.emit(AgentEvent::NodeExit { name: "think".into(), node_id, error: failure });
        progress
    }

    /// Streams one model call's events and returns its final message.
    async fn stream_message(&mut self, mut stream: ProviderStream) -> AssistantMessage {
        // Blocks started and not yet ended: after a failure mid-block they are ended here, so
        // every `*_start` has its `*_end` (with the partial content).
        let mut open: Vec<u32> = Vec::new();
        loop {
            let event = match stream.next().now_or_never() {
                Some(event) => event,
                None => {
                    // The model is thinking: hand over what is queued before waiting.
                    self.emitter.flush().await;
                    stream.next().await
                }
            };
            let Some(event) = event else {
                // ProviderStream always ends with a terminal event; should it not, the partial
                // is still kept.
                let mut message = stream.partial().clone();
                message.stop_reason = weft_core::StopReason::Error;
                message.error_message = Some("the model's stream ended early".into());
                return message;
            };
            match event {
                StreamEvent::Content(delta) => {
                    match &delta {
                        ContentDelta::TextStart { index }
                        | ContentDelta::ThinkingStart { index }
                        | ContentDelta::ToolCallStart { index, .. } => open.push(*index),
                        ContentDelta::TextEnd { index }
                        | ContentDelta::ThinkingEnd { index }
                        | ContentDelta::ToolCallEnd { index } => open.retain(|i| i != index),
                        _ => {}
                    }
                    if let Some(event) = content_event(delta, &stream.partial().content) {
                        self.emitter.emit(event);
                        self.emitter.pace().await;
                    }
                }
                StreamEvent::Done(message) | StreamEvent::Error(message) => {
                    for index in open {
                        if let Some(event) = end_event(index, &message.content) {
                            self.emitter.emit(event);
                        }
                    }
                    return *message;
                }
            }
        }
    }

    /// How each tool call of `message` is to be handled: validation, hooks, approval.
    async fn dispositions(&self, message: &AssistantMessage) -> Vec<Disposition> {
        let agent = &self.agent;
        let catalog = Catalog { local: &agent.tools, remote: &self.session.shared.remote };
        let mut out = Vec::new();
        for call in message.tool_calls() {
            let (spec, checked, local) = match catalog.resolve(&call.name) {
                Resolved::Unknown => {
                    out.push(Disposition::Reject(format!("Tool {} not found", call.name)));
                    continue;
                }
                Resolved::Local(tool) => (tool.tool.spec(), &tool.checked, true),
                Resolved::Remote(spec, checked) => (spec, checked, false),
            };
            if let Err(problem) = checked.validate(&call.name, &call.arguments) {
                out.push(Disposition::Reject(problem));
                continue;
            }
            if let ToolGate::Block(reason) = agent.hooks.before_tool_call(call).await {
                out.push(Disposition::Reject(format!("Tool call blocked: {reason}")));
                continue;
            }
            let approval = spec.requires_approval
                || agent.approval.as_ref().is_some_and(|policy| policy(spec, call));
            out.push(if approval {
                Disposition::Approval
            } else if local {
                Disposition::Run
            } else {
                Disposition::Remote
            });
        }
        out
    }

    /// Runs local calls concurrently, each in a task of its own (a panic, a timeout or an abort
    /// touches only that call), streaming their output; results are handed over in the model's
    /// order by the machine.
    async fn run_tools(&mut self, calls: Vec<ToolCall>) -> Progress {
        let node_id = {
            let state = self.session.lock();
            let index = state.session.open_turn().map_or(0, |t| t.step.step_index);
            format!("act-{index}")
        };
        self.emitter.emit(AgentEvent::NodeEnter { name: "act".into(), node_id: node_id.clone() });
        let (tx, mut rx) = mpsc::channel::<(usize, ToolEvent)>(256);
        let mut tasks = JoinSet::new();
        let mut started = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            self.emitter.emit(AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
            });
            started.push((now_ms(), Instant::now()));
            let Some(local) = self.agent.tools.get(&call.name) else {
                let _ = tx.try_send((i, ToolEvent::Error(format!("Tool {} not found", call.name))));
                continue;
            };
            let tool = local.tool.clone();
            let timeout = tool.timeout().unwrap_or(self.agent.config.tool_timeout);
            let ctx = ToolContext { call_id: call.id.clone(), cancel: self.cancel.child_token() };
            let args = call.arguments.clone();
            let tx = tx.clone();
            tasks.spawn(run_one(i, tool, args, ctx, timeout, tx));
        }
        drop(tx);

        let mut outcomes: Vec<Option<ToolOutcome>> = vec![None; calls.len()];
        let mut remaining = calls.len();
        let mut aborted = false;
        while remaining > 0 {
            let next = match rx.try_recv() {
                Ok(item) => Some(item),
                Err(_) => {
                    self.emitter.flush().await;
                    tokio::select! {
                        item = rx.recv() => item,
                        () = self.cancel.cancelled() => { aborted = true; None }
                    }
                }
            };
            let Some((i, event)) = next else { break };
            let call = &calls[i];
            match event {
                ToolEvent::Delta(delta) => {
                    self.emitter.emit(AgentEvent::ToolExecutionDelta {
                        tool_call_id: call.id.clone(),
                        delta,
                    });
                    self.emitter.pace().await;
                }
                ToolEvent::Complete(out) => {
                    if outcomes[i].is_none() {
                        remaining -= 1;
                        outcomes[i] =
                            Some(self.outcome(call, out.output, out.details, false, started[i]));
                    }
                }
                ToolEvent::Error(error) => {
                    if outcomes[i].is_none() {
                        remaining -= 1;
                        outcomes[i] = Some(self.outcome(call, error, None, true, started[i]));
                    }
                }
            }
        }
        if aborted {
            tasks.abort_all();
            for (i, call) in calls.iter().enumerate() {
                if outcomes[i].is_none() {
                    let text = "Tool call aborted: the run was aborted".to_string();
                    outcomes[i] = Some(self.outcome(call, text, None, true, started[i]));
                }
            }
        }
        self.emitter.emit(AgentEvent::NodeExit { name: "act".into(), node_id, error: None });
        let outcomes: Vec<ToolOutcome> = outcomes.into_iter().flatten().collect();
        let now = now_ms();
        self.with_session(|m, s| {
            let progress = m.on_tool_results(s, outcomes);
            if aborted { m.abort(s, now) } else { progress }
        })
    }

    /// Records a finished call: emits `tool_execution_end` and builds its result.
    fn outcome(
        &mut self,
        call: &ToolCall,
        output: String,
        details: Option<serde_json::Value>,
        is_error: bool,
        (started_at, clock): (u64, Instant),
    ) -> ToolOutcome {
        self.emitter.emit(AgentEvent::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            output: output.clone(),
            details: details.clone(),
            is_error,
        });
        let result = ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: vec![UserContent::text(output.clone())],
            details: details.clone(),
            is_error,
            timestamp: now_ms(),
        };
        let execution = ToolExecutionResult {
            call: call.clone(),
            error: is_error.then(|| output.clone()),
            output,
            details,
            started_at,
            latency_ms: u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        ToolOutcome { result, execution }
    }
}

/// Runs one tool call to its terminal event, whatever happens to it.
async fn run_one(
    i: usize,
    tool: Arc<dyn crate::tool::Tool>,
    args: serde_json::Value,
    ctx: ToolContext,
    timeout: std::time::Duration,
    tx: mpsc::Sender<(usize, ToolEvent)>,
) {
    let cancel = ctx.cancel.clone();
    let forward = {
        let tx = tx.clone();
        async move {
            let mut stream = tool.execute(args, ctx);
            while let Some(event) = stream.next().await {
                let terminal = matches!(event, ToolEvent::Complete(_) | ToolEvent::Error(_));
                if tx.send((i, event)).await.is_err() || terminal {
                    return;
                }
            }
            let _ = tx.send((i, ToolEvent::Error("The tool ended without a result".into()))).await;
        }
    };
    let outcome = tokio::time::timeout(timeout, AssertUnwindSafe(forward).catch_unwind()).await;
    let error = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(panic)) => format!("The tool panicked: {}", panic_message(&*panic)),
        Err(_) => {
            cancel.cancel();
            format!("The tool timed out after {}", human_duration(timeout))
        }
    };
    let _ = tx.send((i, ToolEvent::Error(error))).await;
}

/// `250ms`, `1.5s`, `300s`.
fn human_duration(d: std::time::Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// The agent event for a content delta (`None` for signature parts, which are reported whole on
/// `thinking_end`); `*_end` events carry the block's whole content.
fn content_event(delta: ContentDelta, content: &[AssistantContent]) -> Option<AgentEvent> {
    Some(match delta {
        ContentDelta::TextStart { index } => AgentEvent::TextStart { index },
        ContentDelta::TextDelta { index, delta } => AgentEvent::TextDelta { index, delta },
        ContentDelta::ThinkingStart { index } => AgentEvent::ThinkingStart { index },
        ContentDelta::ThinkingDelta { index, delta } => AgentEvent::ThinkingDelta { index, delta },
        ContentDelta::ThinkingSignature { .. } => return None,
        ContentDelta::ToolCallStart { index, id, name } => {
            AgentEvent::ToolcallStart { index, id, name }
        }
        ContentDelta::ToolCallDelta { index, delta } => AgentEvent::ToolcallDelta { index, delta },
        ContentDelta::TextEnd { index }
        | ContentDelta::ThinkingEnd { index }
        | ContentDelta::ToolCallEnd { index } => return end_event(index, content),
    })
}

/// The `*_end` event of block `index`, with its whole content.
fn end_event(index: u32, content: &[AssistantContent]) -> Option<AgentEvent> {
    Some(match content.get(index as usize)? {
        AssistantContent::Text(t) => AgentEvent::TextEnd { index, text: t.text.clone() },
        AssistantContent::Thinking(t) => AgentEvent::ThinkingEnd {
            index,
            thinking: t.thinking.clone(),
            signature: t.signature.clone(),
        },
        AssistantContent::ToolCall(call) => {
            AgentEvent::ToolcallEnd { index, tool_call: call.clone() }
        }
    })
}
