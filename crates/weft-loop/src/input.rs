//! Inputs to a session: a user message starts a run; tool results and approval decisions
//! answer the open turn's calls and resume it. Each is checked against the session first, and
//! refused with an [`InputError`] that leaves the session as it was.

use std::collections::HashSet;

use weft_core::{
    ApprovalDecision, CallState, Input, Message, OpenTurn, RunState, Session, TimestampMs,
    ToolExecutionResult, ToolResultMessage, UserMessage,
};

use crate::InputError;
use crate::machine::{Machine, Progress, rejected_execution};

impl Machine {
    /// Checks `input` against the session and applies it. `Err` leaves the session untouched.
    /// `is_local` says which tool names have local executors (for approved calls).
    pub fn begin(
        &mut self,
        session: &mut Session,
        input: Input,
        is_local: impl Fn(&str) -> bool,
        now: TimestampMs,
        run_id: String,
    ) -> Result<Progress, InputError> {
        let progress = match input {
            Input::User(message) => self.begin_run(session, message, now, &run_id)?,
            Input::ToolResults(results) => self.take_results(session, results, now)?,
            Input::Approvals { approvals } => {
                self.take_approvals(session, approvals, &is_local, now)?
            }
        };
        // Each execution is a run of its own on the wire (its own `run_start`/`RUN_STARTED`);
        // what the logical run accumulates (turns, steps) stays in the run state.
        if let Some(run) = session.run.as_mut() {
            run.run_id = run_id;
        }
        Ok(progress)
    }

    /// A user message starts a run, unless calls wait for answers.
    fn begin_run(
        &mut self,
        session: &mut Session,
        message: UserMessage,
        now: TimestampMs,
        run_id: &str,
    ) -> Result<Progress, InputError> {
        if let Some(turn) = session.open_turn() {
            let calls = turn
                .calls
                .iter()
                .filter(|s| !matches!(s.state, CallState::Done { .. }))
                .map(|s| s.call.id.clone())
                .collect();
            return Err(InputError::AwaitingToolCalls { session: session.id.clone(), calls });
        }
        let task = message.text_content();
        session.messages.push(Message::User(message));
        let mode_state = self.mode.logic().start(task);
        session.run = Some(Box::new(RunState {
            run_id: run_id.to_string(),
            mode: self.mode.name().to_string(),
            turns: 0,
            open_turn: None,
            mode_state,
            executions: 0,
            started_at: now,
            first_run_id: Some(run_id.to_string()),
        }));
        Ok(self.mode_next(session))
    }

    /// Results for the open turn's remote calls.
    fn take_results(
        &mut self,
        session: &mut Session,
        results: Vec<ToolResultMessage>,
        now: TimestampMs,
    ) -> Result<Progress, InputError> {
        let turn = session
            .open_turn()
            .ok_or_else(|| nothing_pending_for(session, results.iter().map(|r| &r.tool_call_id)))?;
        if results.is_empty() {
            return Err(InputError::EmptyInput);
        }
        let mut seen = HashSet::new();
        let mut indices = Vec::with_capacity(results.len());
        for result in &results {
            let id = &result.tool_call_id;
            if !seen.insert(id.as_str()) {
                return Err(InputError::DuplicateAnswer(id.clone()));
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
                return Err(InputError::ToolNameMismatch {
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
        Ok(self.advance(session))
    }

    /// Approval decisions for the open turn's calls that wait for one.
    fn take_approvals(
        &mut self,
        session: &mut Session,
        approvals: Vec<ApprovalDecision>,
        is_local: &impl Fn(&str) -> bool,
        now: TimestampMs,
    ) -> Result<Progress, InputError> {
        let turn = session.open_turn().ok_or_else(|| {
            nothing_pending_for(session, approvals.iter().map(|a| &a.tool_call_id))
        })?;
        if approvals.is_empty() {
            return Err(InputError::EmptyInput);
        }
        let mut seen = HashSet::new();
        let mut indices = Vec::with_capacity(approvals.len());
        for decision in &approvals {
            let id = &decision.tool_call_id;
            if !seen.insert(id.as_str()) {
                return Err(InputError::DuplicateAnswer(id.clone()));
            }
            let index = turn
                .calls
                .iter()
                .position(|s| s.call.id == *id && s.state == CallState::AwaitingApproval)
                .ok_or_else(|| match turn.calls.iter().find(|s| s.call.id == *id) {
                    Some(slot) if matches!(slot.state, CallState::AwaitingResult { .. }) => {
                        InputError::AwaitsResult(id.clone())
                    }
                    Some(_) => InputError::AlreadyAnswered(id.clone()),
                    None => InputError::UnknownApproval(id.clone()),
                })?;
            indices.push(index);
        }
        let timeout = self.remote_timeout_ms;
        count_execution(session);
        let turn = open_turn_mut(session)?;
        for (decision, index) in approvals.into_iter().zip(indices) {
            apply_decision(turn, index, decision, is_local, now, timeout);
        }
        Ok(self.advance(session))
    }
}

fn open_turn_mut(session: &mut Session) -> Result<&mut OpenTurn, InputError> {
    let id = session.id.clone();
    session.open_turn_mut().ok_or_else(|| nothing_pending(&id))
}

/// A result for `id`, which no call of the open turn awaits: a call answered already (in this
/// turn or an earlier one), or one that never was.
fn unknown_or_answered(session: &Session, turn: &OpenTurn, id: &str) -> InputError {
    if turn.calls.iter().any(|s| s.call.id == id && s.state == CallState::AwaitingApproval) {
        return InputError::AwaitsApproval(id.to_string());
    }
    let in_turn =
        turn.calls.iter().any(|s| s.call.id == id && matches!(s.state, CallState::Done { .. }));
    if in_turn || answered_before(session, id) {
        InputError::AlreadyAnswered(id.to_string())
    } else {
        InputError::UnknownToolCall(id.to_string())
    }
}

/// Answers arrived while no turn waits for any. If one of them names a call whose result is in
/// the conversation already (another process or request got there first and the run went on),
/// that is the clearer refusal; otherwise the session simply waits for nothing.
fn nothing_pending_for<'a>(
    session: &Session,
    mut ids: impl Iterator<Item = &'a String>,
) -> InputError {
    match ids.find(|id| answered_before(session, id)) {
        Some(id) => InputError::AlreadyAnswered(id.clone()),
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

fn nothing_pending(session: &str) -> InputError {
    InputError::NothingPending(session.to_string())
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
        let result = ToolResultMessage::error_at(
            &slot.call,
            format!("Tool call denied by the user{why}"),
            now,
        );
        turn.step.tool_results.push(rejected_execution(&slot.call, &result, now));
        CallState::Done { result }
    };
}

/// A resume starts another execution of the run.
fn count_execution(session: &mut Session) {
    if let Some(run) = session.run.as_mut() {
        run.executions = run.executions.saturating_add(1);
    }
}
