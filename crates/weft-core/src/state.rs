//! The state of a session as it is stored: where it stands ([`SessionStatus`]), its head
//! ([`SessionHead`]), the state of its current or suspended run ([`RunState`], with the open
//! turn's calls: [`OpenTurn`], [`CallSlot`], [`CallState`]), what a commit does to that run state
//! ([`RunChange`]) and a session as a store loads it ([`StoredSession`]).
//!
//! Plain data below both [`session`](crate::session) and [`store`](crate::store) (and
//! [`event`](crate::event), whose `session_end` names a status): those modules re-export these
//! types, so `weft_core::session::SessionStatus`, `weft_core::store::RunState` … name them as
//! well.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::History;
use crate::message::{TimestampMs, ToolCall, ToolResultMessage};
use crate::step::AgentStep;
use crate::tool::ToolSpec;
use crate::usage::{Cost, Usage};

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Created, never run.
    #[default]
    Idle,
    /// A run is in progress.
    Running,
    /// The last run ended with the model's answer.
    Completed,
    /// The last run is suspended until remote tool results arrive.
    AwaitingToolExecution,
    /// The last run is suspended until tool calls are approved or denied.
    AwaitingApproval,
    /// The last run failed (the model's message says why).
    Error,
    /// The last run was aborted.
    Aborted,
    /// The last run stopped because it reached its `max_turns` limit.
    MaxTurns,
}

impl SessionStatus {
    /// Whether a run is suspended waiting for tool results or approvals.
    pub fn is_suspended(self) -> bool {
        matches!(self, Self::AwaitingToolExecution | Self::AwaitingApproval)
    }

    /// The JSON name (`"awaiting_tool_execution"` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::AwaitingToolExecution => "awaiting_tool_execution",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Error => "error",
            Self::Aborted => "aborted",
            Self::MaxTurns => "max_turns",
        }
    }
}

impl std::fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a suspended call waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CallState {
    /// Done; its result is held until every call of the turn is done.
    Done {
        /// The result.
        result: ToolResultMessage,
    },
    /// Waiting for a remote result.
    AwaitingResult {
        /// When the call was handed over.
        since: TimestampMs,
        /// After this instant the call is answered with an error result.
        deadline: TimestampMs,
    },
    /// Running locally.
    Running,
    /// Waiting for an approval decision.
    AwaitingApproval,
}

/// One call of a suspended turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallSlot {
    /// The call.
    pub call: ToolCall,
    /// What it waits for.
    #[serde(flatten)]
    pub state: CallState,
}

/// A turn whose tool calls are not all answered yet: the run executes them, or is suspended on
/// them until remote results or approval decisions arrive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenTurn {
    /// The step the calls belong to, with the results known so far.
    pub step: AgentStep,
    /// Every call of the turn in the model's order.
    pub calls: Vec<CallSlot>,
}

impl OpenTurn {
    /// Calls waiting for a remote result.
    pub fn pending_tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls
            .iter()
            .filter(|s| matches!(s.state, CallState::AwaitingResult { .. }))
            .map(|s| &s.call)
    }

    /// Calls waiting for approval.
    pub fn pending_approvals(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls
            .iter()
            .filter(|s| matches!(s.state, CallState::AwaitingApproval))
            .map(|s| &s.call)
    }
}

/// What a session is, without its messages: rewritten by every commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHead {
    /// Its id.
    pub id: String,
    /// Who owns it (an API key's owner), if anyone. Fixed at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Where it stands.
    pub status: SessionStatus,
    /// The provider of the last (or next) model call.
    pub provider: String,
    /// The model of the last (or next) model call.
    pub model: String,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<Arc<str>>,
    /// The session's own tools (remote tools: specs given by the client).
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Other options the session was created with (mode, limits …), kept as given.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub options: Value,
    /// Tokens used over the session's life.
    #[serde(default)]
    pub usage: Usage,
    /// Cost over the session's life.
    #[serde(default)]
    pub cost: Cost,
    /// How many messages the log holds.
    #[serde(default)]
    pub message_count: u64,
    /// How many steps (model calls) the session has made.
    #[serde(default)]
    pub step_count: u32,
    /// The earliest deadline of a remote call its suspended run waits for (what the deadline
    /// sweeper looks for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_deadline: Option<TimestampMs>,
    /// Bumped by every commit (optimistic concurrency).
    #[serde(default)]
    pub version: u64,
    /// When it was created.
    pub created_at: TimestampMs,
    /// When it last changed.
    pub updated_at: TimestampMs,
}

/// The state of a session's current or suspended run: everything needed to go on with it in
/// another process. Its size does not grow with the run: finished steps are in the event log
/// (`step_end`), not here, so a boundary's commit costs the same at turn 1,000 as at turn 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// The id of the run's current execution: a resume is an execution of its own with a new
    /// id, as the wire formats expect (`run_start`, `RUN_STARTED`), while the turn count and
    /// steps accumulate over all of them.
    pub run_id: String,
    /// The agent mode (`react`, `tot`, `got`).
    pub mode: String,
    /// How many model calls the run has made, over all its resumes (`max_turns` counts these).
    #[serde(default)]
    pub turns: u32,
    /// The turn whose tool calls are not all answered, with each call's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_turn: Option<OpenTurn>,
    /// The mode's own state, for modes that keep one.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub mode_state: Value,
    /// How many executions of the run came before the current one (resumes after a
    /// suspension, recoveries after a crash): node ids of later executions carry it, so they
    /// never repeat an earlier execution's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub executions: u32,
    /// When the run started.
    pub started_at: TimestampMs,
    /// The id of the run's first execution (the one its input started), kept through resumes
    /// and recoveries: the id clients know the run's answer by. `None` in runs stored before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run_id: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What a commit does to the run state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "op", content = "run", rename_all = "snake_case")]
pub enum RunChange {
    /// Leaves it as it is.
    #[default]
    Keep,
    /// Replaces it.
    Set(Box<RunState>),
    /// Removes it (the run is over).
    Clear,
}

/// A session as loaded from a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSession {
    /// Its head.
    pub head: SessionHead,
    /// The whole message log, in order.
    pub messages: History,
    /// The current or suspended run, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunState>,
    /// The seq of its last stored event (0: none).
    pub last_seq: u64,
    /// The highest seq reserved so far (numbering goes on above it).
    pub reserved_seq: u64,
}
