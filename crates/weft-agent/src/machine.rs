//! The agent loop's decisions, as a pure state machine over a [`Session`].
//!
//! The machine is told what happened (an input, a model's message, tool results, an abort) and
//! answers with the next action ([`Next`]); it never does IO, never awaits and never reads a
//! clock (times are passed in). The driver ([`crate::run`]) does the IO and emits events. Every
//! piece of state a suspended run needs lives in the session ([`Session::open_turn`]), so a
//! suspended run can be saved and resumed exactly.

use std::collections::HashSet;
use std::sync::Arc;

use weft_core::{
    AgentStep, ApprovalDecision, AssistantMessage, CallSlot, CallState, Input, Message, OpenTurn,
    RunState, Session, SessionStatus, StepAnnotations, StopReason, TimestampMs, ToolCall,
    ToolExecutionResult, ToolResultMessage,
};

use crate::error::ExecuteError;

/// The agent mode this machine runs.
pub(crate) const MODE: &str = "react";

/// What the loop does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    /// Call the model with the session's context.
    CallModel,
    /// Run these local calls (in the model's order), then report with
    /// [`Machine::on_tool_results`].
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
    /// The next action.
    pub(crate) next: Next,
}

impl Progress {
    fn next(next: Next) -> Self {
        Self { completed: None, next }
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
    /// The steps this execution finished.
    steps: Vec<Arc<AgentStep>>,
    /// A recovery: once the open turn is complete the run rests instead of calling the model.
    recovering: bool,
}

impl Machine {
    pub(crate) fn new(max_turns: u32, remote_timeout_ms: u64) -> Self {
        Self {
            max_turns: max_turns.max(1),
            remote_timeout_ms,
            steps: Vec::new(),
            recovering: false,
        }
    }

    /// The most model calls the run may make.
    pub(crate) fn max_turns(&self) -> u32 {
        self.max_turns
    }

    /// The process that ran the session's run died. Calls it left running are answered with an
    /// error saying so, except those `replay_safe` says may run again, which run again; once
    /// the open turn is complete the run ends `error` instead of calling the model, so the
    /// session takes new input with a valid conversation.
    pub(crate) fn begin_recovery(
        &mut self,
        session: &mut Session,
        replay_safe: impl Fn(&str) -> bool,
        now: TimestampMs,
    ) -> Progress {
        self.recovering = true;
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
        let mut progress = self.advance(session);
        if progress.next == Next::CallModel {
            progress.next = Next::Finish(SessionStatus::Error);
        }
        progress
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
                session.messages.push(Message::User(message));
                session.run = Some(RunState {
                    run_id: run_id.clone(),
                    mode: MODE.to_string(),
                    turns: 0,
                    open_turn: None,
                    mode_state: serde_json::Value::Null,
                    started_at: now,
                });
                Progress::next(Next::CallModel)
            }
            Input::ToolResults(results) => {
                let turn = open_turn(session)?;
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
                let turn = open_turn(session)?;
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
                        .ok_or_else(|| {
                            if turn.calls.iter().any(|s| s.call.id == *id) {
                                ExecuteError::AlreadyAnswered(id.clone())
                            } else {
                                ExecuteError::UnknownApproval(id.clone())
                            }
                        })?;
                    indices.push(index);
                }
                let timeout = self.remote_timeout_ms;
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
        session.usage += message.usage;
        if let Some(cost) = message.cost {
            session.cost += cost;
        }
        let step = AgentStep {
            step_id,
            step_index: session.step_count,
            timestamp: started_at,
            llm_response: message.clone(),
            latency_ms,
            tool_results: Vec::new(),
            annotations: StepAnnotations::default(),
        };
        session.step_count += 1;
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

    /// Local calls finished (in any order).
    pub(crate) fn on_tool_results(
        &mut self,
        session: &mut Session,
        outcomes: Vec<ToolOutcome>,
    ) -> Progress {
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
        let next = if self.recovering {
            Next::Finish(SessionStatus::Error)
        } else if run.turns >= self.max_turns {
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
        Progress { completed: Some(CompletedTurn { results, first_result, step }), next }
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
            next: Next::Finish(status),
        }
    }
}

fn open_turn(session: &Session) -> Result<&OpenTurn, ExecuteError> {
    session.open_turn().ok_or_else(|| nothing_pending(&session.id))
}

fn open_turn_mut(session: &mut Session) -> Result<&mut OpenTurn, ExecuteError> {
    let id = session.id.clone();
    session.open_turn_mut().ok_or_else(|| nothing_pending(&id))
}

/// A result for `id`, which no call of the open turn awaits: a call answered already (in this
/// turn or an earlier one), or one that never was.
fn unknown_or_answered(session: &Session, turn: &OpenTurn, id: &str) -> ExecuteError {
    let in_turn =
        turn.calls.iter().any(|s| s.call.id == id && matches!(s.state, CallState::Done { .. }));
    // Searched only on this error path, newest first: the answer is usually recent.
    let answered_before = || {
        session
            .messages
            .iter()
            .rev()
            .any(|m| matches!(m, Message::ToolResult(r) if r.tool_call_id == id))
    };
    if in_turn || answered_before() {
        ExecuteError::AlreadyAnswered(id.to_string())
    } else {
        ExecuteError::UnknownToolCall(id.to_string())
    }
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
