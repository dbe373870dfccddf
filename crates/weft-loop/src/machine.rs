//! The agent loop's decisions, as a pure state machine over a [`Session`].
//!
//! The machine is told what happened (an input, a model's message, tool results, an abort) and
//! answers with the next action ([`Next`]); it never does IO, never awaits and never reads a
//! clock (times are passed in). The driver (weft-agent's run driver) does the IO and emits events. Every
//! piece of state a suspended run needs lives in the session ([`Session::open_turn`]), so a
//! suspended run can be saved and resumed exactly.

use std::sync::Arc;

use weft_core::{
    AgentStep, AssistantMessage, CallSlot, CallState, Message, ModeProgress, OpenTurn, RunState,
    Session, SessionStatus, StepAnnotations, StopReason, TimestampMs, ToolCall,
    ToolExecutionResult, ToolResultMessage,
};

use crate::modes::{Action, Decision, DynReasoning, Mode, NodeOutcome, Ready, summary};

/// What the loop does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Call the model with the session's context (react's `think`).
    CallModel,
    /// Call the model with the session's context and `guidance` (not kept in the
    /// conversation) in node `node`: tot's step on its chosen thought, got's synthesis.
    Think {
        /// The node's name.
        node: &'static str,
        /// What the model is told to do now.
        guidance: String,
    },
    /// Call the model on a scratch context (this prompt alone), in node `node`: its answer
    /// is the mode's (candidates, scores, a plan), never part of the conversation. Report
    /// with [`Machine::on_scratch`].
    Scratch {
        /// The node's name.
        node: &'static str,
        /// The prompt.
        prompt: String,
    },
    /// Run the graph's ready nodes ([`Machine::graph_ready`]), reporting each with
    /// [`Machine::on_graph_node`], until the machine says otherwise.
    RunGraph,
    /// Run these local calls (in the model's order), then report with
    /// [`Machine::on_tool_results`] and [`Machine::proceed`].
    RunTools(Vec<ToolCall>),
    /// Stop; the run is suspended with this status (the open turn says on what).
    Suspend(SessionStatus),
    /// Stop; the run is over with this status.
    Finish(SessionStatus),
}

/// A turn whose calls are all answered: its results were appended to the session.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedTurn {
    /// The results appended, in the model's order: the log's own messages.
    pub results: Vec<Arc<Message>>,
    /// The position in the log of the first result (with no results: the position after the
    /// step's assistant message, which is always the one before).
    pub first_result: u64,
    /// The finished step (shared with the execution's step trace).
    pub step: Arc<AgentStep>,
}

/// What the machine answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// A step that ended, with the tool results it appended.
    pub completed: Option<CompletedTurn>,
    /// The mode's progress to report (inside the node that made it).
    pub events: Vec<ModeProgress>,
    /// Steps that ended outside the conversation (scratch calls, graph nodes' calls).
    pub steps: Vec<Arc<AgentStep>>,
    /// Why the run ends, when the mode ends it (a bound, a refused plan, every path failed).
    pub error: Option<String>,
    /// The next action.
    pub next: Next,
}

impl Progress {
    fn next(next: Next) -> Self {
        Self { completed: None, events: Vec::new(), steps: Vec::new(), error: None, next }
    }

    fn finish(status: SessionStatus, error: String) -> Self {
        Self { error: Some(error), ..Self::next(Next::Finish(status)) }
    }

    fn with_events(mut self, mut events: Vec<ModeProgress>) -> Self {
        events.append(&mut self.events);
        self.events = events;
        self
    }

    /// The same progress, with what `decision` decides next (and reports).
    fn then(self, decision: Decision) -> Self {
        let decided = Progress::from(decision);
        Self { events: decided.events, error: decided.error, next: decided.next, ..self }
    }
}

impl From<Decision> for Progress {
    fn from(decision: Decision) -> Self {
        let (next, error) = match decision.action {
            Action::CallModel => (Next::CallModel, None),
            Action::Think { node, guidance } => (Next::Think { node, guidance }, None),
            Action::Scratch { node, prompt } => (Next::Scratch { node, prompt }, None),
            Action::RunGraph => (Next::RunGraph, None),
            Action::Finish { status, error } => (Next::Finish(status), error),
        };
        Self { events: decision.events, error, ..Self::next(next) }
    }
}

/// How one tool call of a model's message is to be handled.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    /// Answered at once with an error (unknown tool, invalid arguments, blocked by a hook).
    Reject(String),
    /// Run it locally now.
    Run,
    /// Hand it to the client and suspend.
    Remote,
    /// Ask for approval and suspend; once approved it runs locally or remotely.
    Approval,
}

/// A local call's outcome, reported by the driver.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The result the model sees.
    pub result: ToolResultMessage,
    /// The trace record.
    pub execution: ToolExecutionResult,
}

/// The decisions of one execution of a run. The run's state lives in the session
/// ([`Session::run`]), so a run suspended in one process goes on in another exactly: the machine
/// itself holds only its limits, its mode, and whether this execution recovers a run whose
/// process died. The steps it finishes are handed to the driver in each [`Progress`].
#[derive(Debug, Clone)]
pub struct Machine {
    pub(crate) max_turns: u32,
    pub(crate) remote_timeout_ms: u64,
    pub(crate) mode: Mode,
    /// This execution recovers a run whose process died (which may have entered nodes it
    /// never finished).
    recovered: bool,
}

impl Machine {
    /// A react machine allowing `max_turns` model calls, whose remote calls wait
    /// `remote_timeout_ms` for their results.
    pub fn new(max_turns: u32, remote_timeout_ms: u64) -> Self {
        Self::with_mode(max_turns, remote_timeout_ms, Mode::React)
    }

    /// A machine of mode `mode` allowing `max_turns` model calls, whose remote calls wait
    /// `remote_timeout_ms` for their results.
    pub fn with_mode(max_turns: u32, remote_timeout_ms: u64, mode: Mode) -> Self {
        Self { max_turns: max_turns.max(1), remote_timeout_ms, mode, recovered: false }
    }

    /// The machine of a run of a session with `settings`: its mode, and its own turn limit or
    /// else `default_max_turns`.
    pub fn for_session(
        settings: &crate::SessionSettings,
        default_max_turns: u32,
        remote_timeout_ms: u64,
    ) -> Self {
        let max_turns = settings.max_turns.unwrap_or(default_max_turns);
        Self::with_mode(max_turns, remote_timeout_ms, settings.mode.clone())
    }

    /// The most model calls the run may make.
    pub fn max_turns(&self) -> u32 {
        self.max_turns
    }

    /// The run's mode.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The process that ran the session's run died: the run goes on from its last checkpoint
    /// (the state saved at its last node boundary). Calls it left running are answered with an
    /// error saying so, except those `replay_safe` says may run again, which run again; nodes
    /// that were running (graph nodes) run again; everything that completed stays completed.
    /// Then the mode decides as it would have: react calls the model with the interrupted
    /// results in the conversation, tot and got go on with their search or graph.
    pub fn begin_recovery(
        &mut self,
        session: &mut Session,
        replay_safe: impl Fn(&str) -> bool,
        now: TimestampMs,
    ) -> Progress {
        self.recovered = true;
        if let Some(turn) = session.open_turn_mut() {
            for slot in &mut turn.calls {
                if slot.state == CallState::Running && !replay_safe(&slot.call.name) {
                    let result = ToolResultMessage::error_at(
                        &slot.call,
                        "Tool call interrupted: the process running it stopped before it finished",
                        now,
                    );
                    turn.step.tool_results.push(rejected_execution(&slot.call, &result, now));
                    slot.state = CallState::Done { result };
                }
            }
        }
        if let Some(run) = session.run.as_mut() {
            run.executions = run.executions.saturating_add(1);
        }
        if let Some(run) = session.run.as_mut() {
            self.mode.logic().on_recovery(&mut run.mode_state);
        }
        if session.open_turn().is_some() { self.advance(session) } else { self.mode_next(session) }
    }

    /// Ends the execution with `status`: a run that is over (not suspended) is cleared from the
    /// session.
    pub fn end(&self, session: &mut Session, status: SessionStatus) {
        session.status = status;
        if !status.is_suspended() {
            session.run = None;
        }
    }

    /// The model's message arrived; `dispositions` say how to handle each of its tool calls, in
    /// order. `step_id` names the step; `started_at` and `latency_ms` time the model call.
    pub fn on_model_message(
        &mut self,
        session: &mut Session,
        message: AssistantMessage,
        dispositions: Vec<Disposition>,
        step_id: String,
        started_at: TimestampMs,
        latency_ms: u64,
    ) -> Progress {
        if let Some(run) = session.run.as_mut() {
            run.turns = run.turns.saturating_add(1);
        }
        self.with_state(session, |mode, state| mode.on_model_call(state));
        let node = Some(self.conversation_node(session));
        let step = self.new_step(session, &message, step_id, started_at, latency_ms, node, false);
        let failure = match message.stop_reason {
            StopReason::Error => Some(SessionStatus::Error),
            StopReason::Aborted => Some(SessionStatus::Aborted),
            _ => None,
        };
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        session.messages.push(Message::Assistant(message));
        // A failed message's tool calls are never executed: its arguments may be cut short.
        if let Some(status) = failure {
            return self.finish_step(session, step, status);
        }
        if calls.is_empty() {
            // The answer: the run ends, unless the mode goes on (a dead end it backtracks from).
            let text = session.messages.last().map(message_text).unwrap_or_default();
            let progress = self.finish_step(session, step, SessionStatus::Completed);
            let decision = self.with_state(session, |mode, state| mode.on_answer(state, &text));
            return progress.then(decision);
        }
        let now = started_at + latency_ms;
        let slots = calls
            .into_iter()
            .zip(dispositions.into_iter().chain(std::iter::repeat(Disposition::Run)))
            .map(|(call, disposition)| {
                let state = match disposition {
                    Disposition::Reject(error) => {
                        CallState::Done { result: ToolResultMessage::error_at(&call, error, now) }
                    }
                    Disposition::Run => CallState::Running,
                    Disposition::Remote => CallState::AwaitingResult {
                        since: now,
                        deadline: now + self.remote_timeout_ms,
                    },
                    Disposition::Approval => CallState::AwaitingApproval,
                };
                CallSlot { call, state }
            })
            .collect::<Vec<_>>();
        let mut step = step;
        for slot in &slots {
            if let CallState::Done { result } = &slot.state {
                step.tool_results.push(rejected_execution(&slot.call, result, now));
            }
        }
        if let Some(run) = session.run.as_mut() {
            run.open_turn = Some(OpenTurn { step, calls: slots });
        }
        self.advance(session)
    }

    /// Local calls finished (in any order): their outcomes are recorded in the open turn, and
    /// what follows is decided by [`proceed`](Self::proceed) (the act node ends in between).
    pub fn on_tool_results(&mut self, session: &mut Session, outcomes: Vec<ToolOutcome>) {
        if let Some(turn) = session.open_turn_mut() {
            for outcome in outcomes {
                if let Some(slot) = turn.calls.iter_mut().find(|s| {
                    s.call.id == outcome.result.tool_call_id && s.state == CallState::Running
                }) {
                    slot.state = CallState::Done { result: outcome.result };
                    turn.step.tool_results.push(outcome.execution);
                }
            }
        }
    }

    /// Decides what follows from the open turn's state (after
    /// [`on_tool_results`](Self::on_tool_results)).
    pub fn proceed(&mut self, session: &mut Session) -> Progress {
        self.advance(session)
    }

    /// The run is aborted: every unanswered call gets an error result, so the conversation
    /// stays valid for the next input, and the run ends `aborted`.
    pub fn abort(&mut self, session: &mut Session, now: TimestampMs) -> Progress {
        if let Some(turn) = session.open_turn_mut() {
            for slot in &mut turn.calls {
                if !matches!(slot.state, CallState::Done { .. }) {
                    let result = ToolResultMessage::error_at(
                        &slot.call,
                        "Tool call aborted: the run was aborted",
                        now,
                    );
                    turn.step.tool_results.push(rejected_execution(&slot.call, &result, now));
                    slot.state = CallState::Done { result };
                }
            }
        }
        let mut progress = self.advance(session);
        progress.next = Next::Finish(SessionStatus::Aborted);
        progress
    }

    /// Decides what follows from the open turn's state.
    pub(crate) fn advance(&mut self, session: &mut Session) -> Progress {
        let Some(turn) = session.open_turn() else {
            return Progress::next(Next::CallModel);
        };
        let mut run = Vec::new();
        let (mut approvals, mut remote) = (false, false);
        for slot in &turn.calls {
            match slot.state {
                CallState::Running => run.push(slot.call.clone()),
                CallState::AwaitingApproval => approvals = true,
                CallState::AwaitingResult { .. } => remote = true,
                CallState::Done { .. } => {}
            }
        }
        if !run.is_empty() {
            return Progress::next(Next::RunTools(run));
        }
        if approvals {
            return Progress::next(Next::Suspend(SessionStatus::AwaitingApproval));
        }
        if remote {
            return Progress::next(Next::Suspend(SessionStatus::AwaitingToolExecution));
        }
        let Some(run) = session.run.as_mut() else {
            return Progress::next(Next::CallModel);
        };
        let Some(turn) = run.open_turn.take() else {
            return Progress::next(Next::CallModel);
        };
        let OpenTurn { mut step, calls } = turn;
        let mut results = Vec::with_capacity(calls.len());
        let mut executions = std::mem::take(&mut step.tool_results);
        for slot in calls {
            if let CallState::Done { result } = slot.state {
                if let Some(i) = executions.iter().position(|e| e.call.id == slot.call.id) {
                    step.tool_results.push(executions.swap_remove(i));
                }
                results.push(result);
            }
        }
        let failed_call = results
            .iter()
            .find(|r| r.is_error)
            .map(|r| format!("tool {} failed: {}", r.tool_name, summary(&r.text_content(), 80)));
        let next = if run.turns >= self.max_turns {
            Next::Finish(SessionStatus::MaxTurns)
        } else {
            Next::CallModel
        };
        let step = Arc::new(step);
        let first_result = session.messages.len() as u64;
        let results: Vec<Arc<Message>> =
            results.into_iter().map(|r| Arc::new(Message::ToolResult(r))).collect();
        for result in &results {
            session.messages.push_shared(Arc::clone(result));
        }
        let completed = Some(CompletedTurn { results, first_result, step });
        let mut progress = Progress { completed, ..Progress::next(next) };
        if progress.next == Next::CallModel {
            let decision = self.with_state(session, |mode, state| mode.on_turn(state, failed_call));
            progress = progress.then(decision);
        }
        progress
    }

    /// The id of a node run named `name` starting now: unique over the session's life (the
    /// session's step count, and the execution of the run after a resume or recovery).
    pub fn node_id(&self, session: &Session, name: &str) -> String {
        let executions = session.run.as_ref().map_or(0, |r| r.executions);
        // ReAct's `think` and `observe` are unique by step already (each step has one of
        // each); its `act` may run again in a resumed execution of the same step, and any node
        // in a recovery (the dead process may have entered the step's `think` or `observe`).
        let react_unique = self.mode.is_react() && name != "act" && !self.recovered;
        if executions == 0 || react_unique {
            format!("{name}-{}", session.step_count)
        } else {
            format!("{name}-{}.{executions}", session.step_count)
        }
    }

    /// The id of the `act` node run of the open turn: a resumed execution may act again on the
    /// same step, and its node run is another.
    pub fn act_node_id(session: &Session) -> String {
        let index = session.open_turn().map_or(0, |t| t.step.step_index);
        match session.run.as_ref().map_or(0, |r| r.executions) {
            0 => format!("act-{index}"),
            executions => format!("act-{index}.{executions}"),
        }
    }

    /// The id of the `observe` node run of step `step_index` (its results joining the
    /// conversation happens once per step).
    pub fn observe_node_id(step_index: u32) -> String {
        format!("observe-{step_index}")
    }

    /// The id of the node run of graph node `id`.
    pub fn graph_node_id(&self, session: &Session, id: &str) -> String {
        self.node_id(session, &format!("got-{id}"))
    }

    /// The model calls one graph node may make.
    pub fn node_turns(&self) -> u32 {
        self.mode.logic().node_turns()
    }

    /// No graph node runs and none may start: the run ends, aborted when `aborted`, else in an
    /// error (the graph cannot go on).
    pub fn graph_stalled(
        &mut self,
        session: &mut Session,
        now: TimestampMs,
        aborted: bool,
    ) -> Progress {
        let mut progress = self.abort(session, now);
        if !aborted {
            progress.error = Some("the graph cannot go on: no node is ready".into());
            progress.next = Next::Finish(SessionStatus::Error);
        }
        progress
    }

    /// The name of the node a conversation call of this mode runs in.
    pub fn conversation_node(&self, session: &Session) -> String {
        self.node_id(session, self.mode.logic().conversation_node())
    }

    /// What the mode does next, with no turn open.
    pub(crate) fn mode_next(&mut self, session: &mut Session) -> Progress {
        self.with_state(session, |mode, state| mode.next(state)).into()
    }

    /// Runs `f` with the mode and its state in the run (a run that has none: a fresh one).
    fn with_state<T>(
        &self,
        session: &mut Session,
        f: impl FnOnce(&dyn DynReasoning, &mut serde_json::Value) -> T,
    ) -> T {
        let mode = self.mode.logic();
        match session.run.as_mut() {
            Some(run) => f(mode, &mut run.mode_state),
            None => f(mode, &mut serde_json::Value::Null),
        }
    }

    /// A step of `message` (the session's next), its usage and cost counted in the session.
    #[allow(clippy::too_many_arguments)]
    fn new_step(
        &self,
        session: &mut Session,
        message: &AssistantMessage,
        step_id: String,
        started_at: TimestampMs,
        latency_ms: u64,
        node: Option<String>,
        scratch: bool,
    ) -> AgentStep {
        session.usage += message.usage;
        if let Some(cost) = &message.cost {
            session.cost += **cost;
        }
        let mut annotations = StepAnnotations::default();
        annotations.extra.insert("mode".into(), self.mode.name().into());
        if let Some(node) = node {
            annotations.extra.insert("node".into(), node.into());
        }
        if scratch {
            annotations.extra.insert("scratch".into(), true.into());
        }
        let step = AgentStep {
            step_id,
            step_index: session.step_count,
            timestamp: started_at,
            llm_response: message.clone(),
            latency_ms,
            tool_results: Vec::new(),
            annotations,
        };
        session.step_count += 1;
        step
    }

    /// A scratch call (candidates, scores, a plan) answered in node `node` (its name) with
    /// node run `node_id`: a step of its own, never part of the conversation.
    #[allow(clippy::too_many_arguments)]
    pub fn on_scratch(
        &mut self,
        session: &mut Session,
        node: &str,
        node_id: String,
        message: AssistantMessage,
        step_id: String,
        started_at: TimestampMs,
        latency_ms: u64,
    ) -> Progress {
        let step =
            self.new_step(session, &message, step_id, started_at, latency_ms, Some(node_id), true);
        let step = Arc::new(step);
        let steps = vec![step];
        let text = message.text();
        let failure = match message.stop_reason {
            StopReason::Error => Some(SessionStatus::Error),
            StopReason::Aborted => Some(SessionStatus::Aborted),
            _ => None,
        };
        if let Some(status) = failure {
            let why = message.failure_text().to_string();
            return Progress { steps, ..Progress::finish(status, why) };
        }
        let progress: Progress =
            self.with_state(session, |mode, state| mode.on_scratch(state, node, &text)).into();
        Progress { steps, ..progress }
    }

    /// The graph's nodes that may start now, marked running.
    pub fn graph_ready(&mut self, session: &mut Session) -> Vec<Ready> {
        self.with_state(session, |mode, state| mode.graph_ready(state))
    }

    /// Graph node `id` ended; `calls` are its model calls (each a step outside the
    /// conversation). Goes on with the graph while nodes run or may start.
    pub fn on_graph_node(
        &mut self,
        session: &mut Session,
        id: &str,
        outcome: NodeOutcome,
        calls: Vec<NodeCall>,
    ) -> Progress {
        let mut steps = Vec::with_capacity(calls.len());
        for call in calls {
            let NodeCall { message, step_id, started_at, latency_ms, node_id, tool_results } = call;
            let mut step = self.new_step(
                session,
                &message,
                step_id,
                started_at,
                latency_ms,
                Some(node_id),
                true,
            );
            step.tool_results = tool_results;
            let step = Arc::new(step);
            steps.push(step);
        }
        let (events, running) =
            self.with_state(session, |mode, state| mode.on_graph_node(state, id, outcome));
        let progress =
            if running { Progress::next(Next::RunGraph) } else { self.mode_next(session) };
        Progress { steps, ..progress.with_events(events) }
    }

    /// The run's state (for `values` and checkpoints): the mode's own, as saved (tot, got), or
    /// react's, which is the conversation: its size and the calls it waits for, never the
    /// messages themselves, so a snapshot costs the same at turn 1,000 as at turn 1 (the
    /// messages are in the session, which is saved with the checkpoint).
    pub fn mode_state(session: &Session) -> serde_json::Value {
        match session.run.as_ref() {
            Some(run) if run.mode_state.is_null() => react_state(session, run),
            Some(run) => run.mode_state.clone(),
            None => serde_json::Value::Null,
        }
    }

    fn finish_step(
        &mut self,
        session: &Session,
        step: AgentStep,
        status: SessionStatus,
    ) -> Progress {
        let step = Arc::new(step);
        let first_result = session.messages.len() as u64;
        Progress {
            completed: Some(CompletedTurn { results: Vec::new(), first_result, step }),
            ..Progress::next(Next::Finish(status))
        }
    }
}

/// React's state: `turns` (model calls of the run), `message_count`, `step_count`, and
/// `pending`: the open turn's calls not answered yet (`id`, `name`, `state`: `running`,
/// `awaiting_approval` or `awaiting_result`).
fn react_state(session: &Session, run: &RunState) -> serde_json::Value {
    let pending: Vec<serde_json::Value> = run
        .open_turn
        .iter()
        .flat_map(|turn| &turn.calls)
        .filter_map(|slot| {
            let state = match slot.state {
                CallState::Running => "running",
                CallState::AwaitingApproval => "awaiting_approval",
                CallState::AwaitingResult { .. } => "awaiting_result",
                CallState::Done { .. } => return None,
            };
            Some(serde_json::json!({"id": slot.call.id, "name": slot.call.name, "state": state}))
        })
        .collect();
    serde_json::json!({
        "turns": run.turns,
        "message_count": session.messages.len(),
        "step_count": session.step_count,
        "pending": pending,
    })
}

pub(crate) fn rejected_execution(
    call: &ToolCall,
    result: &ToolResultMessage,
    now: TimestampMs,
) -> ToolExecutionResult {
    let text = result.text_content();
    ToolExecutionResult {
        call: call.clone(),
        output: text.clone(),
        error: Some(text),
        details: None,
        started_at: now,
        latency_ms: 0,
    }
}

/// One model call a graph node made, as the driver reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCall {
    /// The model's message.
    pub message: AssistantMessage,
    /// The step's id.
    pub step_id: String,
    /// When the call started.
    pub started_at: TimestampMs,
    /// How long it took.
    pub latency_ms: u64,
    /// The node run it was made in.
    pub node_id: String,
    /// The tools it called, executed.
    pub tool_results: Vec<ToolExecutionResult>,
}

fn message_text(message: &Message) -> String {
    match message {
        Message::Assistant(m) => m.text(),
        _ => String::new(),
    }
}
