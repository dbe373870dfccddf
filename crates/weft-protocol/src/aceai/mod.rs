//! The AceAI format: `agent.*` step events (`specs/agent-response.zh.md`, "Agent 级事件流提案").
//!
//! Every frame is one `AgentStepEvent` in JSON with the spec's snake_case names:
//!
//! ```json
//! {"event_type":"agent.llm.output_text.delta","step_index":0,"step_id":"st0","llm_delta":"Hel"}
//! ```
//!
//! Only the spec's fields appear at the top level — `event_type`, `step_index`, `step_id`, then,
//! when they have a value, `step`, `llm_delta`, `tool_call`, `tool_result`, `error` and
//! `annotations` — so every frame parses as a spec `AgentStepEvent`. What Weft adds goes in
//! `annotations`.
//!
//! | canonical event | frame |
//! | --- | --- |
//! | `step_start` | `agent.llm.started` |
//! | `text_delta` | `agent.llm.output_text.delta`, `llm_delta` (the fragment) |
//! | `thinking_delta` | `agent.llm.reasoning`, `llm_delta` (the fragment) |
//! | `toolcall_start` | `agent.llm.tool_call.delta`, `tool_call: {id, name, arguments_delta: ""}` (names the call before its arguments stream) |
//! | `toolcall_delta` | `agent.llm.tool_call.delta`, `tool_call: {id, name, arguments_delta}` |
//! | assistant `message_end` of a complete response | `agent.llm.completed`, `step` with `llm_response` and no `tool_results` |
//! | assistant `message_end` of a failed call (stop reason `error` or `aborted`) | nothing: the response is not complete; the step's `agent.step.failed` carries it |
//! | `tool_execution_start` | `agent.tool.started`, `tool_call` |
//! | `tool_execution_delta` | `agent.tool.output`, `tool_result: {call: {id, name}, output}` (the increment) |
//! | `tool_execution_end` | `agent.tool.completed`, or `agent.tool.failed` when `isError` (`tool_result.error` set) |
//! | `approval_required` | `agent.tool.approval_requested`, one per call, `tool_call` |
//! | `awaiting_tool_execution` | `agent.run.suspended`, `annotations: {status: "awaiting_tool_execution", tool_calls: [...]}` |
//! | `step_end` | first one `agent.tool.failed` (the whole `ToolExecutionResult`, `tool_result.error` set) per error result no `tool_execution_end` of this stream reported (calls that never ran: unknown tool, invalid arguments, denied, blocked; remote error results), in the model's order; then `agent.step.completed` with the whole `step`, or `agent.step.failed` with `step` and `error` when the model call stopped with `error`/`aborted` |
//! | `error` | nothing when it reports a failed model call (the `agent.step.failed` of its step follows and carries it); otherwise `agent.step.failed` with `error` and no `step` |
//! | `state_*`, `tot_*`, `got_*`, `custom` | `agent.custom`, `annotations: {event: <the canonical event>}` |
//! | `session_end` | `agent.run.completed` (last): `step` = the run's last step when it ended in this run and no step started after it, `error` when the status is `error`, `aborted` or `max_turns`, `annotations: {status, usage, cost}` |
//! | `session_start`, user and tool-result messages, `message_start`, `*_start` and `*_end` of text, thinking and tool calls, nodes, `checkpoint` | nothing (a block's whole content is in the `llm_response` of `agent.llm.completed` or `agent.step.failed`; tool results are in the step's `tool_results`) |
//!
//! **Deltas are deltas.** Every `agent.llm.output_text.delta` and `agent.llm.reasoning` frame
//! carries its fragment in `llm_delta`, and every `agent.llm.tool_call.delta` its fragment in
//! `tool_call.arguments_delta`: concatenating them gives exactly what the model streamed. The
//! start and end of a block are not sent: the spec's event set has no event for them (and is a
//! closed set, extended only by explicitly registered new families such as `agent.planner.*`),
//! and the whole blocks arrive once, in the `llm_response` of `agent.llm.completed`.
//!
//! **Steps.** `step` is the spec's `AgentStep` in snake_case: `step_id`, `step_index`,
//! `timestamp` (RFC 3339, UTC, milliseconds), `llm_response` (the canonical assistant message,
//! as in the native format), `latency_ms` (the model call's; absent on `agent.llm.completed`),
//! `tool_results` (`ToolExecutionResult`s: `call` `{id, name, arguments}`, `output`, `error`,
//! `details`, `started_at` (RFC 3339), `latency_ms`), `annotations` (`safety`, `citations`,
//! `extra`; absent when empty). Canonical objects carried whole (`llm_response`, `usage`, `cost`,
//! the event of `agent.custom`) keep their canonical camelCase JSON.
//!
//! **Step of a frame.** `step_index`/`step_id` are those of the step the frame belongs to: the
//! last step the stream started (`step_start`) or ended (`step_end`). A run that resumes a
//! suspended step continues that step; when the encoder has seen it (one encoder for a session's
//! runs), its frames name it; a stream that starts with a resumed run does not know the step
//! until its `step_end`, and frames before it carry `step_index: -1`, `step_id: ""`.
//!
//! **Decoding.** [`decode`] rebuilds the [`Transcript`] from these frames alone: texts,
//! thinking and tool calls from the content of each model response, in the `llm_response` of
//! `agent.llm.completed` or, for a failed call, of `agent.step.failed` (the deltas are not
//! needed), tool results from the `tool_results` of `agent.step.completed`/`failed` (which also
//! hold the results that never ran locally: remote results, unknown tools, invalid arguments,
//! denials), pending calls from `agent.tool.approval_requested` and `agent.run.suspended` (a
//! frame after an `agent.run.completed` starts a new run, with nothing pending), and the status
//! from `agent.run.completed`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_core::{
    AgentEvent, AgentStep, AssistantMessage, CitationRef, Cost, Message, SafetyNote, SessionStatus,
    StepAnnotations, StopReason, TimestampMs, ToolExecutionResult, Usage,
};

pub use crate::native::DecodeError;
use crate::native::json_kind;
use crate::transcript::{CallRecord, ResultRecord, Transcript};
use crate::{Encoder, Frame};

/// A step's model request starts.
pub const LLM_STARTED: &str = "agent.llm.started";
/// More text: `llm_delta`.
pub const LLM_OUTPUT_TEXT_DELTA: &str = "agent.llm.output_text.delta";
/// More reasoning (thinking): `llm_delta`.
pub const LLM_REASONING: &str = "agent.llm.reasoning";
/// A tool call's start (an empty `arguments_delta`) or more of its arguments.
pub const LLM_TOOL_CALL_DELTA: &str = "agent.llm.tool_call.delta";
/// The model's whole response (only when it is complete: not for a failed or aborted call).
pub const LLM_COMPLETED: &str = "agent.llm.completed";
/// A local tool starts.
pub const TOOL_STARTED: &str = "agent.tool.started";
/// A running tool's output increment.
pub const TOOL_OUTPUT: &str = "agent.tool.output";
/// A local tool succeeded.
pub const TOOL_COMPLETED: &str = "agent.tool.completed";
/// A tool call's result is an error: a local tool failed, or the call never ran (unknown tool,
/// invalid arguments, denied, blocked), or a remote result is an error.
pub const TOOL_FAILED: &str = "agent.tool.failed";
/// A call waits for approval.
pub const TOOL_APPROVAL_REQUESTED: &str = "agent.tool.approval_requested";
/// A step ended, with all of its tool results.
pub const STEP_COMPLETED: &str = "agent.step.completed";
/// A step failed (or, without `step`, something else failed).
pub const STEP_FAILED: &str = "agent.step.failed";
/// The run is suspended until remote calls have results.
pub const RUN_SUSPENDED: &str = "agent.run.suspended";
/// The run ended; always its last frame.
pub const RUN_COMPLETED: &str = "agent.run.completed";
/// Progress the spec has no event for (state, tree/graph of thoughts, custom values).
pub const CUSTOM: &str = "agent.custom";

/// Every `event_type` this format sends.
pub const EVENT_TYPES: [&str; 15] = [
    LLM_STARTED,
    LLM_OUTPUT_TEXT_DELTA,
    LLM_REASONING,
    LLM_TOOL_CALL_DELTA,
    LLM_COMPLETED,
    TOOL_STARTED,
    TOOL_OUTPUT,
    TOOL_COMPLETED,
    TOOL_FAILED,
    TOOL_APPROVAL_REQUESTED,
    STEP_COMPLETED,
    STEP_FAILED,
    RUN_SUSPENDED,
    RUN_COMPLETED,
    CUSTOM,
];

/// Renders the canonical stream as AceAI step events.
///
/// It remembers the current step's index and id, the tool calls of the message being streamed
/// (to name them in argument deltas), the local executions under way (to name them in output
/// deltas and give their arguments on completion), the calls whose result an
/// `agent.tool.completed`/`failed` already reported, the run's last ended step and its last error.
#[derive(Debug)]
pub struct AceaiEncoder {
    step_index: i64,
    step_id: String,
    /// The streamed message's tool calls: content index, id, name.
    calls: Vec<(u32, String, String)>,
    /// Local executions under way: id, name, arguments.
    running: Vec<(String, String, Arc<Value>)>,
    /// The open step's calls whose execution end was sent (their result is reported).
    reported: Vec<String>,
    /// The run's last ended step, while no later step has started.
    last_step: Option<Arc<AgentStep>>,
    /// The run's last failure.
    error: Option<String>,
}

impl AceaiEncoder {
    /// A fresh encoder for one stream (one run, or one session's runs in order).
    pub fn new() -> Self {
        Self {
            step_index: -1,
            step_id: String::new(),
            calls: Vec::new(),
            running: Vec::new(),
            reported: Vec::new(),
            last_step: None,
            error: None,
        }
    }

    /// A frame of `event_type` for the current step, with no payload yet.
    fn frame(&self, event_type: &'static str) -> Out<'_> {
        Out {
            event_type,
            step_index: self.step_index,
            step_id: &self.step_id,
            step: None,
            llm_delta: None,
            tool_call: None,
            tool_result: None,
            error: None,
            annotations: Notes::default(),
        }
    }

    fn call_name(&self, index: u32) -> (&str, &str) {
        self.calls
            .iter()
            .find(|(i, _, _)| *i == index)
            .map_or(("", ""), |(_, id, name)| (id.as_str(), name.as_str()))
    }

    fn running_name(&self, id: &str) -> &str {
        self.running.iter().find(|(i, _, _)| i == id).map_or("", |(_, name, _)| name.as_str())
    }

    /// `agent.llm.completed` for a complete assistant message.
    fn message_end(&self, message: &Message, out: &mut Vec<Frame>) {
        // Only a complete response: a failed call's partial is on its failed step.
        if let Message::Assistant(m) = message
            && !m.stop_reason.is_failure()
        {
            let mut f = self.frame(LLM_COMPLETED);
            f.step = Some(StepOut::completed_message(self.step_index, &self.step_id, m));
            out.push(Frame::json(&f));
        }
    }

    /// `agent.tool.started` for a local execution, which is remembered until it ends.
    fn tool_execution_start(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        args: &Arc<Value>,
        out: &mut Vec<Frame>,
    ) {
        self.running.push((tool_call_id.to_owned(), tool_name.to_owned(), args.clone()));
        let mut f = self.frame(TOOL_STARTED);
        f.tool_call =
            Some(CallOut { arguments: Some(args), ..CallOut::new(tool_call_id, tool_name) });
        out.push(Frame::json(&f));
    }

    /// `agent.tool.completed` or `agent.tool.failed` for a local execution, with the arguments
    /// it started with; its result counts as reported for the step.
    fn tool_execution_end(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        output: &str,
        details: Option<&Value>,
        is_error: bool,
        out: &mut Vec<Frame>,
    ) {
        let args = self
            .running
            .iter()
            .position(|(id, _, _)| id == tool_call_id)
            .map(|i| self.running.swap_remove(i).2);
        self.reported.push(tool_call_id.to_owned());
        let mut f = self.frame(if is_error { TOOL_FAILED } else { TOOL_COMPLETED });
        let call = CallOut { arguments: args.as_deref(), ..CallOut::new(tool_call_id, tool_name) };
        let mut result = ResultOut::new(call, output);
        result.error = is_error.then_some(output);
        result.details = details;
        f.tool_result = Some(result);
        out.push(Frame::json(&f));
    }

    /// `agent.step.completed` or `agent.step.failed`, after an `agent.tool.failed` for each error
    /// result of the step no frame reported yet.
    fn step_end(&mut self, step: &Arc<AgentStep>, out: &mut Vec<Frame>) {
        self.step_index = i64::from(step.step_index);
        self.step_id.clone_from(&step.step_id);
        // Every other error result the model receives: calls that never ran (unknown
        // tool, invalid arguments, denied, blocked), remote errors, and executions this
        // stream did not see end (it started with a resumed run).
        for r in &step.tool_results {
            if r.error.is_some() && !self.reported.contains(&r.call.id) {
                let mut f = self.frame(TOOL_FAILED);
                f.tool_result = Some(ResultOut::of(r));
                out.push(Frame::json(&f));
            }
        }
        self.reported.clear();
        let failed = step.llm_response.stop_reason.is_failure();
        let mut f = self.frame(if failed { STEP_FAILED } else { STEP_COMPLETED });
        f.step = Some(StepOut::of(step));
        f.error = failed.then(|| step.llm_response.failure_text());
        out.push(Frame::json(&f));
        self.last_step = Some(step.clone());
    }

    /// Remembers the run's failure; `agent.step.failed` unless it is a model failure, which its
    /// failed step reports.
    fn failure(&mut self, error: &str, message: Option<&Message>, out: &mut Vec<Frame>) {
        self.error = Some(error.to_owned());
        let model_failure =
            matches!(message, Some(Message::Assistant(m)) if m.stop_reason.is_failure());
        if !model_failure {
            let mut f = self.frame(STEP_FAILED);
            f.error = Some(error);
            out.push(Frame::json(&f));
        }
    }

    /// `agent.run.completed`: the run's current step if it ended, its error if it failed, its
    /// status, usage and cost. The next run starts afresh.
    fn session_end(
        &mut self,
        status: SessionStatus,
        usage: &Usage,
        cost: &Cost,
        out: &mut Vec<Frame>,
    ) {
        let mut f = self.frame(RUN_COMPLETED);
        let current = self
            .last_step
            .as_deref()
            .filter(|s| i64::from(s.step_index) == self.step_index && s.step_id == self.step_id);
        f.step = current.map(StepOut::of);
        f.error = match status {
            SessionStatus::Error | SessionStatus::Aborted | SessionStatus::MaxTurns => {
                Some(self.error.as_deref().unwrap_or(match status {
                    SessionStatus::Aborted => "the run was aborted",
                    SessionStatus::MaxTurns => "the run reached its max_turns limit",
                    _ => "the run failed",
                }))
            }
            _ => None,
        };
        f.annotations.status = Some(status);
        f.annotations.usage = Some(usage);
        f.annotations.cost = Some(cost);
        out.push(Frame::json(&f));
        self.last_step = None;
        self.error = None;
    }
}

impl Default for AceaiEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder for AceaiEncoder {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        match event {
            AgentEvent::SessionStart { .. } => {
                self.last_step = None;
                self.error = None;
                self.calls.clear();
                self.running.clear();
            }
            AgentEvent::StepStart { step_id, step_index } => {
                self.step_index = i64::from(*step_index);
                self.step_id.clone_from(step_id);
                self.last_step = None;
                out.push(Frame::json(&self.frame(LLM_STARTED)));
            }
            AgentEvent::MessageStart { .. } => self.calls.clear(),
            AgentEvent::TextDelta { delta, .. } => {
                let mut f = self.frame(LLM_OUTPUT_TEXT_DELTA);
                f.llm_delta = Some(delta);
                out.push(Frame::json(&f));
            }
            AgentEvent::ThinkingDelta { delta, .. } => {
                let mut f = self.frame(LLM_REASONING);
                f.llm_delta = Some(delta);
                out.push(Frame::json(&f));
            }
            AgentEvent::ToolcallStart { index, id, name } => {
                self.calls.push((*index, id.clone(), name.clone()));
                let mut f = self.frame(LLM_TOOL_CALL_DELTA);
                f.tool_call = Some(CallOut { arguments_delta: Some(""), ..CallOut::new(id, name) });
                out.push(Frame::json(&f));
            }
            AgentEvent::ToolcallDelta { index, delta } => {
                let (id, name) = self.call_name(*index);
                let mut f = self.frame(LLM_TOOL_CALL_DELTA);
                f.tool_call =
                    Some(CallOut { arguments_delta: Some(delta), ..CallOut::new(id, name) });
                out.push(Frame::json(&f));
            }
            AgentEvent::MessageEnd { message } => self.message_end(message, out),
            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args } => {
                self.tool_execution_start(tool_call_id, tool_name, args, out);
            }
            AgentEvent::ToolExecutionDelta { tool_call_id, delta } => {
                let mut f = self.frame(TOOL_OUTPUT);
                let call = CallOut::new(tool_call_id, self.running_name(tool_call_id));
                f.tool_result = Some(ResultOut::new(call, delta));
                out.push(Frame::json(&f));
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, output, details, is_error } => {
                let details = details.as_deref();
                self.tool_execution_end(tool_call_id, tool_name, output, details, *is_error, out);
            }
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                for call in tool_calls {
                    let mut f = self.frame(TOOL_APPROVAL_REQUESTED);
                    f.tool_call = Some(CallOut::of(call));
                    out.push(Frame::json(&f));
                }
            }
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => {
                let mut f = self.frame(RUN_SUSPENDED);
                f.annotations.status = Some(SessionStatus::AwaitingToolExecution);
                f.annotations.tool_calls = Some(tool_calls.iter().map(CallOut::of).collect());
                out.push(Frame::json(&f));
            }
            AgentEvent::StepEnd { step } => self.step_end(step, out),
            AgentEvent::Error { error, message } => self.failure(error, message.as_deref(), out),
            AgentEvent::SessionEnd { status, usage, cost, .. } => {
                self.session_end(*status, usage, cost, out);
            }
            AgentEvent::StateSnapshot { .. }
            | AgentEvent::StateUpdate { .. }
            | AgentEvent::Progress(_)
            | AgentEvent::Custom { .. } => {
                let mut f = self.frame(CUSTOM);
                f.annotations.event = Some(event);
                out.push(Frame::json(&f));
            }
            AgentEvent::NodeEnter { .. }
            | AgentEvent::NodeExit { .. }
            | AgentEvent::TextStart { .. }
            | AgentEvent::TextEnd { .. }
            | AgentEvent::ThinkingStart { .. }
            | AgentEvent::ThinkingEnd { .. }
            | AgentEvent::ToolcallEnd { .. }
            | AgentEvent::Checkpoint { .. } => {}
        }
    }
}

/// One frame, as written: the spec's `AgentStepEvent`.
#[derive(Serialize)]
struct Out<'a> {
    event_type: &'static str,
    step_index: i64,
    step_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<StepOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    llm_delta: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call: Option<CallOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_result: Option<ResultOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Notes::is_empty")]
    annotations: Notes<'a>,
}

/// The `annotations` Weft writes (each only when set).
#[derive(Serialize, Default)]
struct Notes<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<SessionStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<CallOut<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost: Option<&'a Cost>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a AgentEvent>,
}

impl Notes<'_> {
    fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.tool_calls.is_none()
            && self.usage.is_none()
            && self.cost.is_none()
            && self.event.is_none()
    }
}

/// A tool call record `{id, name, arguments}`, or a piece of one (`arguments_delta`).
#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments_delta: Option<&'a str>,
}

impl<'a> CallOut<'a> {
    fn new(id: &'a str, name: &'a str) -> Self {
        Self { id, name, arguments: None, arguments_delta: None }
    }

    fn of(call: &'a weft_core::ToolCall) -> Self {
        Self { arguments: Some(&call.arguments), ..Self::new(&call.id, &call.name) }
    }
}

/// A `ToolExecutionResult`, whole or partial.
#[derive(Serialize)]
struct ResultOut<'a> {
    call: CallOut<'a>,
    output: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
}

impl<'a> ResultOut<'a> {
    fn new(call: CallOut<'a>, output: &'a str) -> Self {
        Self { call, output, error: None, details: None, started_at: None, latency_ms: None }
    }

    fn of(r: &'a ToolExecutionResult) -> Self {
        Self {
            call: CallOut::of(&r.call),
            output: &r.output,
            error: r.error.as_deref(),
            details: r.details.as_ref(),
            started_at: Some(rfc3339(r.started_at)),
            latency_ms: Some(r.latency_ms),
        }
    }
}

/// The spec's `AgentStep`.
#[derive(Serialize)]
struct StepOut<'a> {
    step_id: &'a str,
    step_index: i64,
    timestamp: String,
    llm_response: &'a AssistantMessage,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
    tool_results: Vec<ResultOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<StepNotesOut<'a>>,
}

impl<'a> StepOut<'a> {
    fn of(step: &'a AgentStep) -> Self {
        Self {
            step_id: &step.step_id,
            step_index: i64::from(step.step_index),
            timestamp: rfc3339(step.timestamp),
            llm_response: &step.llm_response,
            latency_ms: Some(step.latency_ms),
            tool_results: step.tool_results.iter().map(ResultOut::of).collect(),
            annotations: (!step.annotations.is_empty())
                .then(|| StepNotesOut::of(&step.annotations)),
        }
    }

    /// The step as it stands when the model's response is complete: no tool results yet.
    fn completed_message(step_index: i64, step_id: &'a str, message: &'a AssistantMessage) -> Self {
        Self {
            step_id,
            step_index,
            timestamp: rfc3339(message.timestamp),
            llm_response: message,
            latency_ms: None,
            tool_results: Vec::new(),
            annotations: None,
        }
    }
}

/// The spec's `AgentStepAnnotations`.
#[derive(Serialize)]
struct StepNotesOut<'a> {
    safety: &'a [SafetyNote],
    citations: Vec<CitationOut<'a>>,
    extra: &'a Map<String, Value>,
}

impl<'a> StepNotesOut<'a> {
    fn of(a: &'a StepAnnotations) -> Self {
        Self {
            safety: &a.safety,
            citations: a.citations.iter().map(CitationOut::of).collect(),
            extra: &a.extra,
        }
    }
}

/// The spec's `AgentCitationRef`.
#[derive(Serialize)]
struct CitationOut<'a> {
    label: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider_ref: Option<&'a Value>,
}

impl<'a> CitationOut<'a> {
    fn of(c: &'a CitationRef) -> Self {
        Self { label: &c.label, url: c.url.as_deref(), provider_ref: c.provider_ref.as_ref() }
    }
}

/// `ms` (milliseconds since the Unix epoch) as RFC 3339 in UTC with milliseconds:
/// `2023-11-14T22:13:20.123Z`. Instants after the year 9999 (which RFC 3339 cannot write) are
/// clamped to its last millisecond.
fn rfc3339(ms: TimestampMs) -> String {
    const LAST: TimestampMs = 253_402_300_799_999;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.min(LAST));
    humantime::format_rfc3339_millis(at).to_string()
}

/// What the decoder reads of a frame (everything else is ignored).
#[derive(Deserialize)]
struct In {
    #[serde(default)]
    step: Option<StepIn>,
    #[serde(default)]
    tool_call: Option<CallIn>,
    #[serde(default)]
    annotations: NotesIn,
}

#[derive(Deserialize)]
struct StepIn {
    #[serde(default)]
    llm_response: Option<ResponseIn>,
    #[serde(default)]
    tool_results: Vec<ResultIn>,
}

/// What the decoder reads of a model response: how it stopped and its content blocks.
#[derive(Deserialize)]
struct ResponseIn {
    #[serde(default, rename = "stopReason")]
    stop_reason: Option<StopReason>,
    #[serde(default)]
    content: Vec<BlockIn>,
}

/// A content block of a model response (canonical JSON: a `type` tag, camelCase).
#[derive(Deserialize)]
#[serde(tag = "type")]
enum BlockIn {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "thinking")]
    Thinking { thinking: String },
    #[serde(rename = "toolCall")]
    ToolCall {
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        arguments: Value,
    },
    /// A kind of block the transcript does not record.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct ResultIn {
    call: CallIn,
    output: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct CallIn {
    id: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NotesIn {
    status: Option<SessionStatus>,
    tool_calls: Vec<CallIn>,
}

/// Decodes a whole AceAI stream into the [`Transcript`] it says (see the module docs for where
/// each part comes from). The first frame that is not a JSON object, has no string
/// `event_type`, has one this format does not send, or lacks what its type needs (the status of
/// `agent.run.completed`, the response of `agent.llm.completed`, the call of an approval
/// request) is the error.
pub fn decode(frames: &[Frame]) -> Result<Transcript, DecodeError> {
    let mut t = Transcript::default();
    let mut run_over = false;
    for (index, frame) in frames.iter().enumerate() {
        let fail = |reason: String| DecodeError::new(index, reason);
        let value: Value =
            serde_json::from_str(&frame.data).map_err(|e| fail(format!("invalid JSON: {e}")))?;
        let event_type = match value.get("event_type") {
            Some(Value::String(kind)) => match EVENT_TYPES.iter().find(|k| **k == kind) {
                Some(kind) => *kind,
                None => return Err(fail(format!("unknown event type {kind:?}"))),
            },
            Some(other) => {
                return Err(fail(format!(
                    "\"event_type\" must be a string, got {}",
                    json_kind(other)
                )));
            }
            None if value.is_object() => return Err(fail("missing \"event_type\"".into())),
            None => return Err(fail(format!("expected a JSON object, got {}", json_kind(&value)))),
        };
        let f: In = serde_json::from_value(value)
            .map_err(|e| fail(format!("invalid {event_type:?} frame: {e}")))?;
        if run_over {
            // A frame after a run's end belongs to the next run, which starts with nothing
            // pending.
            t.pending.clear();
            run_over = false;
        }
        match event_type {
            LLM_COMPLETED => {
                let response = f.step.and_then(|s| s.llm_response).ok_or_else(|| {
                    fail("agent.llm.completed without \"step.llm_response\"".into())
                })?;
                add_response(&mut t, response);
            }
            TOOL_APPROVAL_REQUESTED => {
                let call = f
                    .tool_call
                    .ok_or_else(|| fail("approval request without \"tool_call\"".into()))?;
                t.pending.push(call.id);
            }
            RUN_SUSPENDED => t.pending.extend(f.annotations.tool_calls.into_iter().map(|c| c.id)),
            STEP_COMPLETED | STEP_FAILED => {
                let Some(step) = f.step else { continue };
                // A failed model call has no `agent.llm.completed`: its partial response is
                // here.
                if event_type == STEP_FAILED
                    && let Some(response) = step.llm_response
                    && response.stop_reason.is_some_and(StopReason::is_failure)
                {
                    add_response(&mut t, response);
                }
                t.tool_results.extend(step.tool_results.into_iter().map(|r| ResultRecord {
                    id: r.call.id,
                    output: r.output,
                    is_error: r.error.is_some(),
                }));
            }
            RUN_COMPLETED => {
                let status = f.annotations.status.ok_or_else(|| {
                    fail("agent.run.completed without \"annotations.status\"".into())
                })?;
                t.status = Some(status);
                run_over = true;
            }
            _ => {}
        }
    }
    Ok(t)
}

/// A model response's blocks, into the transcript.
fn add_response(t: &mut Transcript, response: ResponseIn) {
    for block in response.content {
        match block {
            BlockIn::Text { text } => t.texts.push(text),
            BlockIn::Thinking { thinking } => t.thinking.push(thinking),
            BlockIn::ToolCall { id, name, arguments } => {
                t.tool_calls.push(CallRecord { id, name, arguments });
            }
            BlockIn::Other => {}
        }
    }
}

#[cfg(test)]
mod tests;
