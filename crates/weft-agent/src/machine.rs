//! The agent loop's decisions, as a pure state machine over a [`Session`].
//!
//! The machine is told what happened (an input, a model's message, tool results, an abort) and
//! answers with the next action ([`Next`]); it never does IO, never awaits and never reads a
//! clock (times are passed in). The driver ([`crate::run`]) does the IO and emits events. Every
//! piece of state a suspended run needs lives in the session ([`Session::open_turn`]), so a
//! suspended run can be saved and resumed exactly.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_core::{
    AgentStep, ApprovalDecision, AssistantMessage, CallSlot, CallState, Input, Message,
    ModeProgress, OpenTurn, RunState, Session, SessionStatus, StepAnnotations, StopReason,
    TimestampMs, ToolCall, ToolExecutionResult, ToolResultMessage,
};

use crate::error::ExecuteError;
use crate::modes::got::{self, GotState, NodeOutcome, Ready};
use crate::modes::tot::{self, TotState};
use crate::modes::{Mode, TotOptions};

/// What the loop does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
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
pub(crate) struct CompletedTurn {
    /// The results appended, in the model's order: the log's own messages.
    pub(crate) results: Vec<Arc<Message>>,
    /// The position in the log of the first result (with no results: the position after the
    /// step's assistant message, which is always the one before).
    pub(crate) first_result: u64,
    /// The finished step (shared with the execution's step trace).
    pub(crate) step: Arc<AgentStep>,
}

/// What the machine answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    /// A step that ended, with the tool results it appended.
    pub(crate) completed: Option<CompletedTurn>,
    /// The mode's progress to report (inside the node that made it).
    pub(crate) events: Vec<ModeProgress>,
    /// Steps that ended outside the conversation (scratch calls, graph nodes' calls).
    pub(crate) steps: Vec<Arc<AgentStep>>,
    /// Why the run ends, when the mode ends it (a bound, a refused plan, every path failed).
    pub(crate) error: Option<String>,
    /// The next action.
    pub(crate) next: Next,
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
}

/// How one tool call of a model's message is to be handled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Disposition {
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
pub(crate) struct ToolOutcome {
    /// The result the model sees.
    pub(crate) result: ToolResultMessage,
    /// The trace record.
    pub(crate) execution: ToolExecutionResult,
}

/// The decisions of one execution of a run. The run's state lives in the session
/// ([`Session::run`]), so a run suspended in one process goes on in another exactly: the machine
/// itself holds only its limits and the steps this execution finished (for its result; the
/// event log keeps every step).
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    max_turns: u32,
    remote_timeout_ms: u64,
    mode: Mode,
    /// The steps this execution finished.
    steps: Vec<Arc<AgentStep>>,
    /// This execution recovers a run whose process died (which may have entered nodes it
    /// never finished).
    recovered: bool,
}

impl Machine {
    pub(crate) fn new(max_turns: u32, remote_timeout_ms: u64) -> Self {
        Self::with_mode(max_turns, remote_timeout_ms, Mode::React)
    }

    pub(crate) fn with_mode(max_turns: u32, remote_timeout_ms: u64, mode: Mode) -> Self {
        Self {
            max_turns: max_turns.max(1),
            remote_timeout_ms,
            mode,
            steps: Vec::new(),
            recovered: false,
        }
    }

    /// The most model calls the run may make.
    pub(crate) fn max_turns(&self) -> u32 {
        self.max_turns
    }

    /// The run's mode.
    pub(crate) fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The process that ran the session's run died: the run goes on from its last checkpoint
    /// (the state saved at its last node boundary). Calls it left running are answered with an
    /// error saying so, except those `replay_safe` says may run again, which run again; nodes
    /// that were running (graph nodes) run again; everything that completed stays completed.
    /// Then the mode decides as it would have: react calls the model with the interrupted
    /// results in the conversation, tot and got go on with their search or graph.
    pub(crate) fn begin_recovery(
        &mut self,
        session: &mut Session,
        replay_safe: impl Fn(&str) -> bool,
        now: TimestampMs,
    ) -> Progress {
        self.recovered = true;
        if let Some(turn) = session.open_turn_mut() {
            for slot in &mut turn.calls {
                if slot.state == CallState::Running && !replay_safe(&slot.call.name) {
                    let result = ToolResultMessage::error(
                        &slot.call,
                        "Tool call interrupted: the process running it stopped before it finished",
                    );
                    turn.step.tool_results.push(rejected_execution(&slot.call, &result, now));
                    slot.state = CallState::Done { result };
                }
            }
        }
        if let Some(run) = session.run.as_mut() {
            run.executions = run.executions.saturating_add(1);
        }
        if let Mode::Got(_) = self.mode {
            update_state(session, |g: &mut GotState| g.restart_running());
        }
        if session.open_turn().is_some() { self.advance(session) } else { self.mode_next(session) }
    }

    /// Ends the execution with `status`: the steps it finished are returned; a run that is over
    /// (not suspended) is cleared from the session.
    pub(crate) fn end(&mut self, session: &mut Session, status: SessionStatus) -> Vec<AgentStep> {
        session.status = status;
        if !status.is_suspended() {
            session.run = None;
        }
        std::mem::take(&mut self.steps).into_iter().map(Arc::unwrap_or_clone).collect()
    }

    /// Checks `input` against the session and applies it. `Err` leaves the session untouched.
    /// `locals` says which tool names have local executors (for approved calls).
    pub(crate) fn begin(
        &mut self,
        session: &mut Session,
        input: Input,
        is_local: impl Fn(&str) -> bool,
        now: TimestampMs,
        run_id: String,
    ) -> Result<Progress, ExecuteError> {
        let progress = match input {
            Input::User(message) => {
                if let Some(turn) = session.open_turn() {
                    let calls = turn
                        .calls
                        .iter()
                        .filter(|s| !matches!(s.state, CallState::Done { .. }))
                        .map(|s| s.call.id.clone())
                        .collect();
                    return Err(ExecuteError::AwaitingToolCalls {
                        session: session.id.clone(),
                        calls,
                    });
                }
                let task = message.text_content();
                session.messages.push(Message::User(message));
                let mode_state = match &self.mode {
                    Mode::React => serde_json::Value::Null,
                    Mode::Tot(_) => to_value(&TotState::new(task)),
                    Mode::Got(_) => to_value(&GotState::new(task)),
                };
                session.run = Some(Box::new(RunState {
                    run_id: run_id.clone(),
                    mode: self.mode.name().to_string(),
                    turns: 0,
                    open_turn: None,
                    mode_state,
                    executions: 0,
                    started_at: now,
                    first_run_id: Some(run_id.clone()),
                }));
                self.mode_next(session)
            }
            Input::ToolResults(results) => {
                let turn = session.open_turn().ok_or_else(|| {
                    nothing_pending_for(session, results.iter().map(|r| &r.tool_call_id))
                })?;
                if results.is_empty() {
                    return Err(ExecuteError::EmptyInput);
                }
                let mut seen = HashSet::new();
                let mut indices = Vec::with_capacity(results.len());
                for result in &results {
                    let id = &result.tool_call_id;
                    if !seen.insert(id.as_str()) {
                        return Err(ExecuteError::DuplicateAnswer(id.clone()));
                    }
                    let index = turn
                        .calls
                        .iter()
                        .position(|s| {
                            s.call.id == *id && matches!(s.state, CallState::AwaitingResult { .. })
                        })
                        .ok_or_else(|| unknown_or_answered(session, turn, id))?;
                    let expected = &turn.calls[index].call.name;
                    if !result.tool_name.is_empty() && result.tool_name != *expected {
                        return Err(ExecuteError::ToolNameMismatch {
                            id: id.clone(),
                            given: result.tool_name.clone(),
                            expected: expected.clone(),
                        });
                    }
                    indices.push(index);
                }
                count_execution(session);
                let turn = open_turn_mut(session)?;
                for (mut result, index) in results.into_iter().zip(indices) {
                    let slot = &mut turn.calls[index];
                    let since = match slot.state {
                        CallState::AwaitingResult { since, .. } => since,
                        _ => now,
                    };
                    result.tool_name = slot.call.name.clone();
                    if result.timestamp == 0 {
                        result.timestamp = now;
                    }
                    let execution = ToolExecutionResult {
                        call: slot.call.clone(),
                        output: result.text_content(),
                        error: result.is_error.then(|| result.text_content()),
                        details: result.details.clone(),
                        started_at: since,
                        latency_ms: now.saturating_sub(since),
                    };
                    turn.step.tool_results.push(execution);
                    slot.state = CallState::Done { result };
                }
                self.advance(session)
            }
            Input::Approvals { approvals } => {
                let turn = session.open_turn().ok_or_else(|| {
                    nothing_pending_for(session, approvals.iter().map(|a| &a.tool_call_id))
                })?;
                if approvals.is_empty() {
                    return Err(ExecuteError::EmptyInput);
                }
                let mut seen = HashSet::new();
                let mut indices = Vec::with_capacity(approvals.len());
                for decision in &approvals {
                    let id = &decision.tool_call_id;
                    if !seen.insert(id.as_str()) {
                        return Err(ExecuteError::DuplicateAnswer(id.clone()));
                    }
                    let index = turn
                        .calls
                        .iter()
                        .position(|s| s.call.id == *id && s.state == CallState::AwaitingApproval)
                        .ok_or_else(|| match turn.calls.iter().find(|s| s.call.id == *id) {
                            Some(slot)
                                if matches!(slot.state, CallState::AwaitingResult { .. }) =>
                            {
                                ExecuteError::AwaitsResult(id.clone())
                            }
                            Some(_) => ExecuteError::AlreadyAnswered(id.clone()),
                            None => ExecuteError::UnknownApproval(id.clone()),
                        })?;
                    indices.push(index);
                }
                let timeout = self.remote_timeout_ms;
                count_execution(session);
                let turn = open_turn_mut(session)?;
                for (decision, index) in approvals.into_iter().zip(indices) {
                    apply_decision(turn, index, decision, &is_local, now, timeout);
                }
                self.advance(session)
            }
        };
        // Each execution is a run of its own on the wire (its own `run_start`/`RUN_STARTED`);
        // what the logical run accumulates (turns, steps) stays in the run state.
        if let Some(run) = session.run.as_mut() {
            run.run_id = run_id;
        }
        Ok(progress)
    }

    /// The model's message arrived; `dispositions` say how to handle each of its tool calls, in
    /// order. `step_id` names the step; `started_at` and `latency_ms` time the model call.
    pub(crate) fn on_model_message(
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
        match self.mode {
            Mode::React => {}
            Mode::Tot(_) => update_state(session, |t: &mut TotState| t.on_act_call()),
            Mode::Got(_) => update_state(session, |g: &mut GotState| g.model_calls += 1),
        }
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
            if let Mode::Tot(options) = &self.mode {
                let text = session.messages.last().map(message_text).unwrap_or_default();
                if tot::is_dead_end(&text) {
                    let options = options.clone();
                    let mut progress = self.finish_step(session, step, SessionStatus::Completed);
                    let reason = format!(
                        "the model reported a dead end: {}",
                        crate::modes::summary(&text, 80)
                    );
                    let then = self.tot_failed(session, &reason, &options);
                    progress.events = then.events;
                    progress.error = then.error;
                    progress.next = then.next;
                    return progress;
                }
            }
            return self.finish_step(session, step, SessionStatus::Completed);
        }
        let now = started_at + latency_ms;
        let slots = calls
            .into_iter()
            .zip(dispositions.into_iter().chain(std::iter::repeat(Disposition::Run)))
            .map(|(call, disposition)| {
                let state = match disposition {
                    Disposition::Reject(error) => {
                        CallState::Done { result: ToolResultMessage::error(&call, error) }
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
    pub(crate) fn on_tool_results(&mut self, session: &mut Session, outcomes: Vec<ToolOutcome>) {
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
    pub(crate) fn proceed(&mut self, session: &mut Session) -> Progress {
        self.advance(session)
    }

    /// The run is aborted: every unanswered call gets an error result, so the conversation
    /// stays valid for the next input, and the run ends `aborted`.
    pub(crate) fn abort(&mut self, session: &mut Session, now: TimestampMs) -> Progress {
        if let Some(turn) = session.open_turn_mut() {
            for slot in &mut turn.calls {
                if !matches!(slot.state, CallState::Done { .. }) {
                    let result = ToolResultMessage::error(
                        &slot.call,
                        "Tool call aborted: the run was aborted",
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
    fn advance(&mut self, session: &mut Session) -> Progress {
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
        let failed_call = results.iter().find(|r| r.is_error).map(|r| {
            format!("tool {} failed: {}", r.tool_name, crate::modes::summary(&r.text_content(), 80))
        });
        let next = if run.turns >= self.max_turns {
            Next::Finish(SessionStatus::MaxTurns)
        } else {
            Next::CallModel
        };
        let step = Arc::new(step);
        self.steps.push(Arc::clone(&step));
        let first_result = session.messages.len() as u64;
        let results: Vec<Arc<Message>> =
            results.into_iter().map(|r| Arc::new(Message::ToolResult(r))).collect();
        for result in &results {
            session.messages.push_shared(Arc::clone(result));
        }
        let completed = Some(CompletedTurn { results, first_result, step });
        let mut progress = Progress { completed, ..Progress::next(next) };
        if progress.next == Next::CallModel {
            let then = match self.mode.clone() {
                Mode::React | Mode::Got(_) => return progress,
                Mode::Tot(options) => match failed_call {
                    Some(reason) => self.tot_failed(session, &reason, &options),
                    None => {
                        match update_state(session, |t: &mut TotState| t.on_step_ok(&options)) {
                            Some(reason) => self.tot_failed(session, &reason, &options),
                            None => self.mode_next(session),
                        }
                    }
                },
            };
            progress.events = then.events;
            progress.error = then.error;
            progress.next = then.next;
        }
        progress
    }

    /// The id of a node run named `name` starting now: unique over the session's life (the
    /// session's step count, and the execution of the run after a resume or recovery).
    pub(crate) fn node_id(&self, session: &Session, name: &str) -> String {
        let executions = session.run.as_ref().map_or(0, |r| r.executions);
        // ReAct's `think` and `observe` are unique by step already (each step has one of
        // each); its `act` may run again in a resumed execution of the same step, and any node
        // in a recovery (the dead process may have entered the step's `think` or `observe`).
        let react_unique = self.mode == Mode::React && name != "act" && !self.recovered;
        if executions == 0 || react_unique {
            format!("{name}-{}", session.step_count)
        } else {
            format!("{name}-{}.{executions}", session.step_count)
        }
    }

    /// The name of the node a conversation call of this mode runs in.
    pub(crate) fn conversation_node(&self, session: &Session) -> String {
        let name = match &self.mode {
            Mode::Got(_) => "synthesize",
            _ => "think",
        };
        self.node_id(session, name)
    }

    /// What the mode does next, with no turn open.
    fn mode_next(&mut self, session: &mut Session) -> Progress {
        let calls_error = |mode: &str, max: u32| {
            format!("the run stopped after {max} model calls ({mode} maxModelCalls)")
        };
        match self.mode.clone() {
            Mode::React => Progress::next(Next::CallModel),
            Mode::Tot(options) => {
                let Some(state) = read_state::<TotState>(session) else {
                    return Progress::finish(
                        SessionStatus::Error,
                        "the tot state is missing".into(),
                    );
                };
                match state.next(&options) {
                    tot::Action::Scratch { node, prompt } => {
                        Progress::next(Next::Scratch { node, prompt })
                    }
                    tot::Action::Think { guidance } => {
                        Progress::next(Next::Think { node: "think", guidance })
                    }
                    tot::Action::OutOfCalls => Progress::finish(
                        SessionStatus::MaxTurns,
                        calls_error("tot", options.max_model_calls),
                    ),
                }
            }
            Mode::Got(options) => {
                let Some(state) = read_state::<GotState>(session) else {
                    return Progress::finish(
                        SessionStatus::Error,
                        "the got state is missing".into(),
                    );
                };
                let out_of_calls = state.model_calls >= options.max_model_calls;
                match &state.phase {
                    got::Phase::Plan | got::Phase::Replan { .. } if out_of_calls => {
                        Progress::finish(
                            SessionStatus::MaxTurns,
                            calls_error("got", options.max_model_calls),
                        )
                    }
                    got::Phase::Plan | got::Phase::Replan { .. } => Progress::next(Next::Scratch {
                        node: "plan_graph",
                        prompt: state.plan_prompt(&options),
                    }),
                    got::Phase::Run if state.out_of_calls(&options) => Progress::finish(
                        SessionStatus::MaxTurns,
                        calls_error("got", options.max_model_calls),
                    ),
                    got::Phase::Run => Progress::next(Next::RunGraph),
                    got::Phase::Synthesize if out_of_calls => Progress::finish(
                        SessionStatus::MaxTurns,
                        calls_error("got", options.max_model_calls),
                    ),
                    got::Phase::Synthesize => Progress::next(Next::Think {
                        node: "synthesize",
                        guidance: state.synthesis_guidance(),
                    }),
                }
            }
        }
    }

    /// A tot path failed: backtrack, or end the run when no candidate is left.
    fn tot_failed(
        &mut self,
        session: &mut Session,
        reason: &str,
        options: &TotOptions,
    ) -> Progress {
        match update_state(session, |t: &mut TotState| t.backtrack(reason, options)) {
            Some(event) => self.mode_next(session).with_events(vec![event]),
            None => Progress::finish(
                SessionStatus::Error,
                format!("every path of the tree of thoughts failed (last: {reason})"),
            ),
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
    pub(crate) fn on_scratch(
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
        self.steps.push(Arc::clone(&step));
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
        let progress = match (self.mode.clone(), node) {
            (Mode::Tot(options), "think_expand") => {
                let events = update_state(session, |t: &mut TotState| t.on_expand(&text, &options));
                self.mode_next(session).with_events(events)
            }
            (Mode::Tot(options), _) => {
                let (events, failed) =
                    update_state(session, |t: &mut TotState| t.on_evaluate(&text));
                match failed {
                    Some(reason) => self.tot_failed(session, &reason, &options).with_events(events),
                    None => self.mode_next(session).with_events(events),
                }
            }
            (Mode::Got(options), _) => {
                match update_state(session, |g: &mut GotState| g.on_plan(&text, &options)) {
                    Ok(events) => self.mode_next(session).with_events(events),
                    Err(error) => Progress::finish(SessionStatus::Error, error),
                }
            }
            (Mode::React, _) => Progress::next(Next::CallModel),
        };
        Progress { steps, ..progress }
    }

    /// The graph's nodes that may start now, marked running.
    pub(crate) fn graph_ready(&mut self, session: &mut Session) -> Vec<Ready> {
        let Mode::Got(options) = &self.mode else { return Vec::new() };
        update_state(session, |g: &mut GotState| g.ready(options))
    }

    /// Graph node `id` ended; `calls` are its model calls (each a step outside the
    /// conversation). Goes on with the graph while nodes run or may start.
    pub(crate) fn on_graph_node(
        &mut self,
        session: &mut Session,
        id: &str,
        outcome: NodeOutcome,
        calls: Vec<NodeCall>,
    ) -> Progress {
        let Mode::Got(options) = self.mode.clone() else { return Progress::next(Next::CallModel) };
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
            self.steps.push(Arc::clone(&step));
            steps.push(step);
        }
        let events = update_state(session, |g: &mut GotState| g.on_node(id, outcome, &options));
        let running = read_state::<GotState>(session)
            .is_some_and(|g| g.nodes.iter().any(|n| n.status == got::NodeStatus::Running));
        let progress =
            if running { Progress::next(Next::RunGraph) } else { self.mode_next(session) };
        Progress { steps, ..progress.with_events(events) }
    }

    /// The run's state (for `values` and checkpoints): the mode's own, as saved (tot, got), or
    /// react's, which is the conversation: its size and the calls it waits for, never the
    /// messages themselves, so a snapshot costs the same at turn 1,000 as at turn 1 (the
    /// messages are in the session, which is saved with the checkpoint).
    pub(crate) fn mode_state(session: &Session) -> serde_json::Value {
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
        self.steps.push(Arc::clone(&step));
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

fn open_turn_mut(session: &mut Session) -> Result<&mut OpenTurn, ExecuteError> {
    let id = session.id.clone();
    session.open_turn_mut().ok_or_else(|| nothing_pending(&id))
}

/// A result for `id`, which no call of the open turn awaits: a call answered already (in this
/// turn or an earlier one), or one that never was.
fn unknown_or_answered(session: &Session, turn: &OpenTurn, id: &str) -> ExecuteError {
    if turn.calls.iter().any(|s| s.call.id == id && s.state == CallState::AwaitingApproval) {
        return ExecuteError::AwaitsApproval(id.to_string());
    }
    let in_turn =
        turn.calls.iter().any(|s| s.call.id == id && matches!(s.state, CallState::Done { .. }));
    if in_turn || answered_before(session, id) {
        ExecuteError::AlreadyAnswered(id.to_string())
    } else {
        ExecuteError::UnknownToolCall(id.to_string())
    }
}

/// Answers arrived while no turn waits for any. If one of them names a call whose result is in
/// the conversation already (another process or request got there first and the run went on),
/// that is the clearer refusal; otherwise the session simply waits for nothing.
fn nothing_pending_for<'a>(
    session: &Session,
    mut ids: impl Iterator<Item = &'a String>,
) -> ExecuteError {
    match ids.find(|id| answered_before(session, id)) {
        Some(id) => ExecuteError::AlreadyAnswered(id.clone()),
        None => nothing_pending(&session.id),
    }
}

/// Whether the conversation holds a result for call `id`. Searched on error paths only, newest
/// first: the answer is usually recent.
fn answered_before(session: &Session, id: &str) -> bool {
    session
        .messages
        .iter()
        .rev()
        .any(|m| matches!(m, Message::ToolResult(r) if r.tool_call_id == id))
}

fn nothing_pending(session: &str) -> ExecuteError {
    ExecuteError::NothingPending(session.to_string())
}

fn apply_decision(
    turn: &mut OpenTurn,
    index: usize,
    decision: ApprovalDecision,
    is_local: &impl Fn(&str) -> bool,
    now: TimestampMs,
    remote_timeout_ms: u64,
) {
    let slot = &mut turn.calls[index];
    slot.state = if decision.approved {
        if is_local(&slot.call.name) {
            CallState::Running
        } else {
            CallState::AwaitingResult { since: now, deadline: now + remote_timeout_ms }
        }
    } else {
        let why = decision.reason.map(|r| format!(": {r}")).unwrap_or_default();
        let result =
            ToolResultMessage::error(&slot.call, format!("Tool call denied by the user{why}"));
        turn.step.tool_results.push(rejected_execution(&slot.call, &result, now));
        CallState::Done { result }
    };
}

fn rejected_execution(
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
pub(crate) struct NodeCall {
    /// The model's message.
    pub(crate) message: AssistantMessage,
    /// The step's id.
    pub(crate) step_id: String,
    /// When the call started.
    pub(crate) started_at: TimestampMs,
    /// How long it took.
    pub(crate) latency_ms: u64,
    /// The node run it was made in.
    pub(crate) node_id: String,
    /// The tools it called, executed.
    pub(crate) tool_results: Vec<ToolExecutionResult>,
}

fn to_value(state: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(state).unwrap_or_default()
}

/// The mode's state, read from the run.
fn read_state<T: DeserializeOwned>(session: &Session) -> Option<T> {
    serde_json::from_value(session.run.as_ref()?.mode_state.clone()).ok()
}

/// Changes the mode's state in the run with `f` (a missing or unreadable state starts as the
/// default).
fn update_state<T: DeserializeOwned + Serialize + Default, R>(
    session: &mut Session,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    let mut state: T = read_state(session).unwrap_or_default();
    let out = f(&mut state);
    if let Some(run) = session.run.as_mut() {
        run.mode_state = to_value(&state);
    }
    out
}

/// A resume starts another execution of the run.
fn count_execution(session: &mut Session) {
    if let Some(run) = session.run.as_mut() {
        run.executions = run.executions.saturating_add(1);
    }
}

fn message_text(message: &Message) -> String {
    match message {
        Message::Assistant(m) => m.text(),
        _ => String::new(),
    }
}
