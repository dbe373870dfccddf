//! The native format: the agent plan's own events, as its HTTP transport sends them.
//!
//! Each frame is one canonical [`AgentEvent`] serialized as is (the plan's JSON: a snake_case
//! `type` tag, camelCase fields), for the events the plan has ([`AgentEvent::is_plan_event`]:
//! session, message, text, thinking, tool-call, tool-execution and error events, plus
//! `approval_required`). Node, step, state, checkpoint, tree/graph-of-thought and custom events
//! are not sent.
//!
//! After each `session_end`, one more frame closes the run, as the plan's server does:
//!
//! ```json
//! {"type":"execute_complete","status":"awaiting_approval",
//!  "pendingToolCalls":[{"id":"c1","name":"delete","arguments":{"path":"a"}}],
//!  "pendingApprovals":[{"id":"c1","name":"delete","arguments":{"path":"a"}}]}
//! ```
//!
//! `status` is the `session_end`'s. `pendingToolCalls` lists every call the run left waiting:
//! those of its `approval_required` and `awaiting_tool_execution` events, in stream order
//! (empty when the run did not suspend). `pendingApprovals` (an addition to the plan) is the
//! subset that waits for an approval rather than for a remote result.
//!
//! [`decode_frame`] and [`decode`] read the format back: frames into [`NativeMessage`]s, a whole
//! stream into a [`Transcript`].

use serde::{Deserialize, Serialize};
use weft_core::{AgentEvent, SessionStatus, ToolCall};

use crate::transcript::Transcript;
use crate::{Encoder, Frame};

/// The `type` of the frame that closes a run.
const EXECUTE_COMPLETE: &str = "execute_complete";

/// The `type` tags of the plan's events, the only events a native stream carries.
const PLAN_EVENTS: [&str; 19] = [
    "session_start",
    "session_end",
    "awaiting_tool_execution",
    "approval_required",
    "message_start",
    "message_end",
    "text_start",
    "text_delta",
    "text_end",
    "thinking_start",
    "thinking_delta",
    "thinking_end",
    "toolcall_start",
    "toolcall_delta",
    "toolcall_end",
    "tool_execution_start",
    "tool_execution_delta",
    "tool_execution_end",
    "error",
];

/// Renders the canonical stream in the native format.
///
/// The only state it keeps is the calls the current run left waiting, between the suspension
/// event and `session_end`.
#[derive(Debug, Default)]
pub struct NativeEncoder {
    /// Calls of the run's `approval_required` and `awaiting_tool_execution` events, in order.
    pending: Vec<ToolCall>,
    /// Those of them that wait for an approval (for `pendingApprovals`).
    approvals: Vec<ToolCall>,
}

impl NativeEncoder {
    /// A fresh encoder for one stream (one run, or one session's runs in order).
    pub fn new() -> Self {
        Self::default()
    }
}

/// The `execute_complete` frame, as written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CompleteOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    status: SessionStatus,
    pending_tool_calls: &'a [ToolCall],
    pending_approvals: &'a [ToolCall],
}

impl Encoder for NativeEncoder {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        if !event.is_plan_event() {
            return;
        }
        out.push(Frame::json(event));
        match event {
            AgentEvent::SessionStart { .. } => {
                self.pending.clear();
                self.approvals.clear();
            }
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                self.pending.extend(tool_calls.iter().cloned());
                self.approvals.extend(tool_calls.iter().cloned());
            }
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => {
                self.pending.extend(tool_calls.iter().cloned());
            }
            AgentEvent::SessionEnd { status, .. } => {
                out.push(Frame::json(&CompleteOut {
                    kind: EXECUTE_COMPLETE,
                    status: *status,
                    pending_tool_calls: &self.pending,
                    pending_approvals: &self.approvals,
                }));
                self.pending.clear();
                self.approvals.clear();
            }
            _ => {}
        }
    }
}

/// A frame that could not be decoded: which one, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("frame {index}: {reason}")]
pub struct DecodeError {
    /// The frame's position in the stream, from 0 ([`decode_frame`], which sees one frame,
    /// reports 0).
    pub index: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl DecodeError {
    /// An error about frame `index`.
    pub fn new(index: usize, reason: impl Into<String>) -> Self {
        Self { index, reason: reason.into() }
    }
}

/// One decoded native frame.
#[derive(Debug, Clone, PartialEq)]
pub enum NativeMessage {
    /// A canonical event.
    Event(AgentEvent),
    /// The `execute_complete` frame that closes a run.
    Complete {
        /// How the run ended.
        status: SessionStatus,
        /// The calls it left waiting (remote results and approvals), in stream order.
        pending_tool_calls: Vec<ToolCall>,
    },
}

/// The `execute_complete` frame, as read (`pendingApprovals` is a subset of
/// `pendingToolCalls` and not needed to decode).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompleteIn {
    status: SessionStatus,
    #[serde(default)]
    pending_tool_calls: Vec<ToolCall>,
}

/// Decodes one frame's text: a plan event or `execute_complete`. A frame that is not a JSON
/// object, has no string `type`, has a `type` the native format does not send, or whose fields
/// do not fit its type, is an error saying so (with index 0; [`decode`] gives the position).
pub fn decode_frame(data: &str) -> Result<NativeMessage, DecodeError> {
    decode_at(0, data)
}

fn decode_at(index: usize, data: &str) -> Result<NativeMessage, DecodeError> {
    let fail = |reason: String| DecodeError::new(index, reason);
    let value: serde_json::Value =
        serde_json::from_str(data).map_err(|e| fail(format!("invalid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(fail(format!("expected a JSON object, got {}", json_kind(&value))));
    };
    let kind = match object.get("type") {
        Some(serde_json::Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(fail(format!("\"type\" must be a string, got {}", json_kind(other))));
        }
        None => return Err(fail("missing \"type\"".to_string())),
    };
    if kind == EXECUTE_COMPLETE {
        let complete: CompleteIn = serde_json::from_value(value)
            .map_err(|e| fail(format!("invalid execute_complete frame: {e}")))?;
        return Ok(NativeMessage::Complete {
            status: complete.status,
            pending_tool_calls: complete.pending_tool_calls,
        });
    }
    if !PLAN_EVENTS.contains(&kind) {
        let reason = if serde_json::from_value::<AgentEvent>(value.clone()).is_ok() {
            format!("event type {kind:?} is not part of the native format")
        } else {
            format!("unknown event type {kind:?}")
        };
        return Err(fail(reason));
    }
    let kind = kind.to_string();
    let event: AgentEvent =
        serde_json::from_value(value).map_err(|e| fail(format!("invalid {kind:?} event: {e}")))?;
    Ok(NativeMessage::Event(event))
}

pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Decodes a whole native stream into the [`Transcript`] it says: the transcript of its events
/// ([`Transcript::from_events`]), with the pending calls and status of the last run's
/// `execute_complete` when it has one (a `session_start` after it starts a run that has not
/// closed yet). The first frame that does not decode is the error.
pub fn decode(frames: &[Frame]) -> Result<Transcript, DecodeError> {
    let mut events = Vec::with_capacity(frames.len());
    let mut complete: Option<(SessionStatus, Vec<String>)> = None;
    for (index, frame) in frames.iter().enumerate() {
        match decode_at(index, &frame.data)? {
            NativeMessage::Event(event) => {
                if matches!(event, AgentEvent::SessionStart { .. }) {
                    complete = None;
                }
                events.push(event);
            }
            NativeMessage::Complete { status, pending_tool_calls } => {
                complete =
                    Some((status, pending_tool_calls.into_iter().map(|call| call.id).collect()));
            }
        }
    }
    let mut transcript = Transcript::from_events(&events);
    if let Some((status, pending)) = complete {
        transcript.status = Some(status);
        transcript.pending = pending;
    }
    Ok(transcript)
}

/// Canonical event streams shaped as the agent emits them (see `ARCHITECTURE.md`, "Event
/// order"), shared by this crate's format tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod fixtures {
    use serde_json::json;
    use weft_core::{
        AgentEvent, AgentStep, AssistantContent, AssistantMessage, Cost, Message, Role,
        SessionStatus, StepAnnotations, StopReason, TextContent, ThinkingContent, ToolCall,
        ToolExecutionResult, ToolResultMessage, Usage, UserMessage,
    };

    /// The fixed clock of the fixtures.
    pub(crate) const T0: u64 = 1_700_000_000_000;

    pub(crate) fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments }
    }

    pub(crate) fn text(t: &str) -> AssistantContent {
        AssistantContent::Text(TextContent { text: t.into() })
    }

    pub(crate) fn thinking(t: &str, signature: Option<&str>) -> AssistantContent {
        AssistantContent::Thinking(ThinkingContent {
            thinking: t.into(),
            signature: signature.map(Into::into),
        })
    }

    pub(crate) fn assistant(content: Vec<AssistantContent>, stop: StopReason) -> AssistantMessage {
        AssistantMessage {
            content,
            stop_reason: stop,
            error_message: None,
            usage: Usage::new(10, 5, 0, 0),
            cost: None,
            provider: "faux".into(),
            model: "faux-1".into(),
            timestamp: T0,
        }
    }

    pub(crate) fn result(c: &ToolCall, output: &str, is_error: bool) -> ToolResultMessage {
        let mut r = ToolResultMessage::new(c.id.clone(), c.name.clone(), output, is_error);
        r.timestamp = T0;
        r
    }

    pub(crate) fn execution(c: &ToolCall, output: &str, is_error: bool) -> ToolExecutionResult {
        ToolExecutionResult {
            call: c.clone(),
            output: output.into(),
            error: is_error.then(|| output.to_string()),
            details: None,
            started_at: T0 + 100,
            latency_ms: 7,
        }
    }

    pub(crate) fn step(
        id: &str,
        index: u32,
        message: &AssistantMessage,
        results: Vec<ToolExecutionResult>,
    ) -> AgentStep {
        AgentStep {
            step_id: id.into(),
            step_index: index,
            timestamp: T0,
            llm_response: message.clone(),
            latency_ms: 42,
            tool_results: results,
            annotations: StepAnnotations::default(),
        }
    }

    /// A run's opening: `session_start` and, for a new run, the user's message.
    pub(crate) fn start(out: &mut Vec<AgentEvent>, user: Option<&str>) {
        out.push(AgentEvent::SessionStart {
            session_id: "s1".into(),
            run_id: "r1".into(),
            agent: "react".into(),
        });
        if let Some(user) = user {
            let mut m = UserMessage::text(user);
            m.timestamp = T0;
            out.push(AgentEvent::MessageStart { role: Role::User });
            out.push(AgentEvent::MessageEnd { message: Box::new(Message::User(m)) });
        }
    }

    /// One model call, streamed block by block (text and thinking in two deltas, arguments in
    /// two deltas), with the `error` event of a failed call.
    pub(crate) fn model_call(
        out: &mut Vec<AgentEvent>,
        step_id: &str,
        index: u32,
        message: &AssistantMessage,
    ) {
        out.push(AgentEvent::NodeEnter { name: "think".into(), node_id: format!("think-{index}") });
        out.push(AgentEvent::StepStart { step_id: step_id.into(), step_index: index });
        out.push(AgentEvent::MessageStart { role: Role::Assistant });
        for (i, block) in message.content.iter().enumerate() {
            let i = i as u32;
            match block {
                AssistantContent::Text(t) => {
                    out.push(AgentEvent::TextStart { index: i });
                    for part in halves(&t.text) {
                        out.push(AgentEvent::TextDelta { index: i, delta: part });
                    }
                    out.push(AgentEvent::TextEnd { index: i, text: t.text.clone() });
                }
                AssistantContent::Thinking(t) => {
                    out.push(AgentEvent::ThinkingStart { index: i });
                    for part in halves(&t.thinking) {
                        out.push(AgentEvent::ThinkingDelta { index: i, delta: part });
                    }
                    out.push(AgentEvent::ThinkingEnd {
                        index: i,
                        thinking: t.thinking.clone(),
                        signature: t.signature.clone(),
                    });
                }
                AssistantContent::ToolCall(c) => {
                    out.push(AgentEvent::ToolcallStart {
                        index: i,
                        id: c.id.clone(),
                        name: c.name.clone(),
                    });
                    for part in halves(&c.arguments.to_string()) {
                        out.push(AgentEvent::ToolcallDelta { index: i, delta: part });
                    }
                    out.push(AgentEvent::ToolcallEnd { index: i, tool_call: c.clone() });
                }
            }
        }
        out.push(AgentEvent::MessageEnd { message: Box::new(Message::Assistant(message.clone())) });
        let failure = message.stop_reason.is_failure().then(|| {
            message.error_message.clone().unwrap_or_else(|| "the model call failed".into())
        });
        if let Some(error) = &failure {
            out.push(AgentEvent::Error {
                error: error.clone(),
                message: Some(Box::new(Message::Assistant(message.clone()))),
            });
        }
        out.push(AgentEvent::NodeExit {
            name: "think".into(),
            node_id: format!("think-{index}"),
            error: failure,
        });
    }

    /// One local execution: start, its output in deltas, end.
    pub(crate) fn execute(
        out: &mut Vec<AgentEvent>,
        c: &ToolCall,
        deltas: &[&str],
        output: &str,
        is_error: bool,
    ) {
        out.push(AgentEvent::ToolExecutionStart {
            tool_call_id: c.id.clone(),
            tool_name: c.name.clone(),
            args: c.arguments.clone(),
        });
        for d in deltas {
            out.push(AgentEvent::ToolExecutionDelta {
                tool_call_id: c.id.clone(),
                delta: (*d).into(),
            });
        }
        out.push(AgentEvent::ToolExecutionEnd {
            tool_call_id: c.id.clone(),
            tool_name: c.name.clone(),
            output: output.into(),
            details: None,
            is_error,
        });
    }

    /// A step's end: the observe node with its results (in the model's order), then `step_end`.
    pub(crate) fn end_step(
        out: &mut Vec<AgentEvent>,
        step: AgentStep,
        results: &[ToolResultMessage],
    ) {
        if !results.is_empty() {
            let node_id = format!("observe-{}", step.step_index);
            out.push(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
            for r in results {
                out.push(AgentEvent::MessageStart { role: Role::ToolResult });
                out.push(AgentEvent::MessageEnd {
                    message: Box::new(Message::ToolResult(r.clone())),
                });
            }
            out.push(AgentEvent::NodeExit { name: "observe".into(), node_id, error: None });
        }
        out.push(AgentEvent::StepEnd { step: Box::new(step) });
    }

    pub(crate) fn end(out: &mut Vec<AgentEvent>, status: SessionStatus, messages: Vec<Message>) {
        out.push(AgentEvent::SessionEnd {
            session_id: "s1".into(),
            status,
            messages,
            usage: Usage::default(),
            cost: Cost::default(),
        });
    }

    fn halves(s: &str) -> Vec<String> {
        let mid = s.char_indices().nth(s.chars().count() / 2).map_or(s.len(), |(i, _)| i);
        let (a, b) = s.split_at(mid);
        [a, b].into_iter().filter(|p| !p.is_empty()).map(String::from).collect()
    }

    /// Thinking, then text: one step, completed.
    pub(crate) fn text_and_thinking() -> Vec<AgentEvent> {
        let mut ev = Vec::new();
        start(&mut ev, Some("hi"));
        let m =
            assistant(vec![thinking("Greet them.", Some("sig")), text("Hello!")], StopReason::Stop);
        model_call(&mut ev, "st0", 0, &m);
        end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
        end(&mut ev, SessionStatus::Completed, vec![Message::Assistant(m)]);
        ev
    }

    /// Two steps: the first calls a streaming local tool, a failing one and an unknown one
    /// (answered without running); the second answers.
    pub(crate) fn tools_two_steps() -> Vec<AgentEvent> {
        let mut ev = Vec::new();
        start(&mut ev, Some("weather?"));
        let echo = call("c1", "echo", json!({"text": "Paris \"sunny\""}));
        let fail = call("c2", "fail", json!({}));
        let unknown = call("c3", "nope", json!({"x": 1}));
        let m0 = assistant(
            vec![
                text("Let me check."),
                AssistantContent::ToolCall(echo.clone()),
                AssistantContent::ToolCall(fail.clone()),
                AssistantContent::ToolCall(unknown.clone()),
            ],
            StopReason::ToolUse,
        );
        model_call(&mut ev, "st0", 0, &m0);
        ev.push(AgentEvent::NodeEnter { name: "act".into(), node_id: "act-0".into() });
        execute(&mut ev, &echo, &["Paris ", "\"sunny\""], "Paris \"sunny\"", false);
        execute(&mut ev, &fail, &[], "failed on {}", true);
        ev.push(AgentEvent::NodeExit { name: "act".into(), node_id: "act-0".into(), error: None });
        let results = [
            result(&echo, "Paris \"sunny\"", false),
            result(&fail, "failed on {}", true),
            result(&unknown, "Tool nope not found", true),
        ];
        let executions = vec![
            execution(&echo, "Paris \"sunny\"", false),
            execution(&fail, "failed on {}", true),
            execution(&unknown, "Tool nope not found", true),
        ];
        end_step(&mut ev, step("st0", 0, &m0, executions), &results);
        let m1 = assistant(vec![text("Sunny in Paris.")], StopReason::Stop);
        model_call(&mut ev, "st1", 1, &m1);
        end_step(&mut ev, step("st1", 1, &m1, vec![]), &[]);
        let mut messages = vec![Message::Assistant(m0)];
        messages.extend(results.into_iter().map(Message::ToolResult));
        messages.push(Message::Assistant(m1));
        end(&mut ev, SessionStatus::Completed, messages);
        ev
    }

    /// A remote call suspends the run; a second run resumes it with the client's result.
    pub(crate) fn remote_suspend_and_resume() -> Vec<AgentEvent> {
        let mut ev = Vec::new();
        start(&mut ev, Some("click it"));
        let click = call("r1", "browser_click", json!({"selector": "#go"}));
        let m0 = assistant(vec![AssistantContent::ToolCall(click.clone())], StopReason::ToolUse);
        model_call(&mut ev, "st0", 0, &m0);
        ev.push(AgentEvent::AwaitingToolExecution {
            session_id: "s1".into(),
            tool_calls: vec![click.clone()],
        });
        end(&mut ev, SessionStatus::AwaitingToolExecution, vec![Message::Assistant(m0.clone())]);
        // The resumed run: the step being completed, then the next model call.
        start(&mut ev, None);
        let r = result(&click, "clicked", false);
        end_step(
            &mut ev,
            step("st0", 0, &m0, vec![execution(&click, "clicked", false)]),
            std::slice::from_ref(&r),
        );
        let m1 = assistant(vec![text("Done.")], StopReason::Stop);
        model_call(&mut ev, "st1", 1, &m1);
        end_step(&mut ev, step("st1", 1, &m1, vec![]), &[]);
        end(
            &mut ev,
            SessionStatus::Completed,
            vec![Message::ToolResult(r), Message::Assistant(m1)],
        );
        ev
    }

    /// Only the first run of [`remote_suspend_and_resume`]: it ends suspended.
    pub(crate) fn remote_suspended() -> Vec<AgentEvent> {
        let events = remote_suspend_and_resume();
        let end = events.iter().position(|e| matches!(e, AgentEvent::SessionEnd { .. })).unwrap();
        events[..=end].to_vec()
    }

    /// Two calls need approval; the run suspends; a second run resumes it with one approved
    /// (it runs) and one denied (an error result that never ran).
    pub(crate) fn approval_and_denial() -> Vec<AgentEvent> {
        let mut ev = Vec::new();
        start(&mut ev, Some("clean up"));
        let del = call("a1", "delete", json!({"path": "/tmp/x"}));
        let wipe = call("a2", "wipe", json!({}));
        let m0 = assistant(
            vec![AssistantContent::ToolCall(del.clone()), AssistantContent::ToolCall(wipe.clone())],
            StopReason::ToolUse,
        );
        model_call(&mut ev, "st0", 0, &m0);
        ev.push(AgentEvent::ApprovalRequired {
            session_id: "s1".into(),
            tool_calls: vec![del.clone(), wipe.clone()],
        });
        end(&mut ev, SessionStatus::AwaitingApproval, vec![Message::Assistant(m0.clone())]);
        start(&mut ev, None);
        ev.push(AgentEvent::NodeEnter { name: "act".into(), node_id: "act-0".into() });
        execute(&mut ev, &del, &[], "deleted", false);
        ev.push(AgentEvent::NodeExit { name: "act".into(), node_id: "act-0".into(), error: None });
        let denied = "Tool call denied by the user: not now";
        let results = [result(&del, "deleted", false), result(&wipe, denied, true)];
        let executions = vec![execution(&del, "deleted", false), execution(&wipe, denied, true)];
        end_step(&mut ev, step("st0", 0, &m0, executions), &results);
        let m1 = assistant(vec![text("Deleted; not wiped.")], StopReason::Stop);
        model_call(&mut ev, "st1", 1, &m1);
        end_step(&mut ev, step("st1", 1, &m1, vec![]), &[]);
        end(&mut ev, SessionStatus::Completed, vec![]);
        ev
    }

    /// The provider fails mid-text: the partial is kept, the step fails, the run ends `error`.
    pub(crate) fn provider_error() -> Vec<AgentEvent> {
        let mut ev = Vec::new();
        start(&mut ev, Some("hi"));
        let mut m = assistant(vec![text("Hel")], StopReason::Error);
        m.error_message = Some("429 rate limited".into());
        model_call(&mut ev, "st0", 0, &m);
        end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
        end(&mut ev, SessionStatus::Error, vec![Message::Assistant(m)]);
        ev
    }

    /// Tree-of-thought progress, state and a checkpoint around a one-step answer.
    pub(crate) fn tot_with_extras() -> Vec<AgentEvent> {
        let mut ev = Vec::new();
        start(&mut ev, Some("plan"));
        ev.push(AgentEvent::TotExpand { candidates: vec!["a".into(), "b".into()] });
        ev.push(AgentEvent::TotEvaluate { chosen: 1, scores: vec![0.2, 0.9] });
        ev.push(AgentEvent::StateUpdate { name: "think".into(), state: json!({"depth": 1}) });
        ev.push(AgentEvent::Checkpoint {
            checkpoint_id: "k1".into(),
            thread_id: "s1".into(),
            checkpoint_ns: "".into(),
            step: 0,
            timestamp: T0,
            state: json!({}),
        });
        let m = assistant(vec![text("b it is")], StopReason::Stop);
        model_call(&mut ev, "st0", 0, &m);
        end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
        ev.push(AgentEvent::Custom { value: json!({"kind": "note"}) });
        end(&mut ev, SessionStatus::Completed, vec![]);
        ev
    }

    /// Every fixture, named.
    pub(crate) fn all() -> Vec<(&'static str, Vec<AgentEvent>)> {
        let every: Vec<AgentEvent> = [
            text_and_thinking(),
            tools_two_steps(),
            remote_suspend_and_resume(),
            approval_and_denial(),
            provider_error(),
            tot_with_extras(),
        ]
        .concat();
        vec![
            ("text_and_thinking", text_and_thinking()),
            ("tools_two_steps", tools_two_steps()),
            ("remote_suspend_and_resume", remote_suspend_and_resume()),
            ("remote_suspended", remote_suspended()),
            ("approval_and_denial", approval_and_denial()),
            ("approval_pending", {
                let events = approval_and_denial();
                let end =
                    events.iter().position(|e| matches!(e, AgentEvent::SessionEnd { .. })).unwrap();
                events[..=end].to_vec()
            }),
            ("provider_error", provider_error()),
            ("tot_with_extras", tot_with_extras()),
            ("all_in_one_stream", every),
        ]
    }

    /// One event of every variant (for tag and coverage checks).
    pub(crate) fn one_of_each() -> Vec<AgentEvent> {
        let c = call("c", "t", json!({}));
        let m = assistant(vec![], StopReason::Stop);
        vec![
            AgentEvent::SessionStart {
                session_id: "s".into(),
                run_id: "r".into(),
                agent: "react".into(),
            },
            AgentEvent::SessionEnd {
                session_id: "s".into(),
                status: SessionStatus::Completed,
                messages: vec![],
                usage: Usage::default(),
                cost: Cost::default(),
            },
            AgentEvent::AwaitingToolExecution {
                session_id: "s".into(),
                tool_calls: vec![c.clone()],
            },
            AgentEvent::ApprovalRequired { session_id: "s".into(), tool_calls: vec![c.clone()] },
            AgentEvent::NodeEnter { name: "think".into(), node_id: "n".into() },
            AgentEvent::NodeExit { name: "think".into(), node_id: "n".into(), error: None },
            AgentEvent::StepStart { step_id: "st".into(), step_index: 0 },
            AgentEvent::StepEnd { step: Box::new(step("st", 0, &m, vec![])) },
            AgentEvent::MessageStart { role: Role::Assistant },
            AgentEvent::MessageEnd { message: Box::new(Message::Assistant(m.clone())) },
            AgentEvent::TextStart { index: 0 },
            AgentEvent::TextDelta { index: 0, delta: "a".into() },
            AgentEvent::TextEnd { index: 0, text: "a".into() },
            AgentEvent::ThinkingStart { index: 0 },
            AgentEvent::ThinkingDelta { index: 0, delta: "b".into() },
            AgentEvent::ThinkingEnd { index: 0, thinking: "b".into(), signature: None },
            AgentEvent::ToolcallStart { index: 0, id: "c".into(), name: "t".into() },
            AgentEvent::ToolcallDelta { index: 0, delta: "{}".into() },
            AgentEvent::ToolcallEnd { index: 0, tool_call: c.clone() },
            AgentEvent::ToolExecutionStart {
                tool_call_id: "c".into(),
                tool_name: "t".into(),
                args: json!({}),
            },
            AgentEvent::ToolExecutionDelta { tool_call_id: "c".into(), delta: "o".into() },
            AgentEvent::ToolExecutionEnd {
                tool_call_id: "c".into(),
                tool_name: "t".into(),
                output: "o".into(),
                details: None,
                is_error: false,
            },
            AgentEvent::StateSnapshot { state: json!({}) },
            AgentEvent::StateUpdate { name: "n".into(), state: json!({}) },
            AgentEvent::Checkpoint {
                checkpoint_id: "k".into(),
                thread_id: "s".into(),
                checkpoint_ns: "".into(),
                step: 0,
                timestamp: 0,
                state: json!({}),
            },
            AgentEvent::TotExpand { candidates: vec![] },
            AgentEvent::TotEvaluate { chosen: 0, scores: vec![] },
            AgentEvent::TotBacktrack { reason: "r".into(), to_depth: 0 },
            AgentEvent::GotPlan { node_count: 0, edge_count: 0, node_ids: vec![] },
            AgentEvent::GotNodeStart { id: "g".into() },
            AgentEvent::GotNodeComplete { id: "g".into(), result_summary: "ok".into() },
            AgentEvent::GotNodeFailed { id: "g".into(), error: "e".into() },
            AgentEvent::GotExpand { node_id: "g".into(), nodes_added: 0, edges_added: 0 },
            AgentEvent::Custom { value: json!(1) },
            AgentEvent::Error { error: "e".into(), message: None },
        ]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Value, json};
    use weft_core::{AgentEvent, SessionStatus};

    use super::fixtures::{self, call};
    use super::*;

    fn render(events: &[AgentEvent]) -> Vec<Frame> {
        let mut encoder = NativeEncoder::new();
        let mut frames = Vec::new();
        for (i, event) in events.iter().enumerate() {
            crate::encode(&mut encoder, i as u64 + 1, event, &mut frames);
        }
        encoder.finish(&mut frames);
        frames
    }

    fn frames_of(texts: &[&str]) -> Vec<Frame> {
        texts.iter().map(|t| Frame::raw(*t)).collect()
    }

    #[test]
    fn small_run_exact_frames() {
        let events = [
            AgentEvent::SessionStart {
                session_id: "s".into(),
                run_id: "r".into(),
                agent: "react".into(),
            },
            AgentEvent::NodeEnter { name: "think".into(), node_id: "think-0".into() },
            AgentEvent::StepStart { step_id: "st0".into(), step_index: 0 },
            AgentEvent::TextStart { index: 0 },
            AgentEvent::TextDelta { index: 0, delta: "Hi \"you\"\n".into() },
            AgentEvent::TextEnd { index: 0, text: "Hi \"you\"\n".into() },
            AgentEvent::Checkpoint {
                checkpoint_id: "k".into(),
                thread_id: "s".into(),
                checkpoint_ns: "".into(),
                step: 0,
                timestamp: 0,
                state: json!({}),
            },
            AgentEvent::SessionEnd {
                session_id: "s".into(),
                status: SessionStatus::Completed,
                messages: vec![],
                usage: Default::default(),
                cost: Default::default(),
            },
        ];
        let frames = render(&events);
        let data: Vec<&str> = frames.iter().map(|f| f.data.as_str()).collect();
        assert_eq!(
            data,
            [
                r#"{"type":"session_start","sessionId":"s","runId":"r","agent":"react"}"#,
                r#"{"type":"text_start","index":0}"#,
                r#"{"type":"text_delta","index":0,"delta":"Hi \"you\"\n"}"#,
                r#"{"type":"text_end","index":0,"text":"Hi \"you\"\n"}"#,
                concat!(
                    r#"{"type":"session_end","sessionId":"s","status":"completed","messages":[],"#,
                    r#""usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0},"#,
                    r#""cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}}"#
                ),
                r#"{"type":"execute_complete","status":"completed","pendingToolCalls":[],"pendingApprovals":[]}"#,
            ]
        );
        // Each frame carries the sequence number of its event; execute_complete shares
        // session_end's (it is the last frame that event produced).
        let ids: Vec<Option<u64>> = frames.iter().map(|f| f.id).collect();
        assert_eq!(ids, [Some(1), Some(4), Some(5), Some(6), None, Some(8)]);
    }

    #[test]
    fn plan_events_are_sent_as_is_and_the_rest_dropped() {
        for event in fixtures::one_of_each() {
            let mut frames = Vec::new();
            NativeEncoder::new().encode(&event, &mut frames);
            if event.is_plan_event() {
                assert_eq!(frames[0].data, serde_json::to_string(&event).unwrap());
                assert_eq!(decode_frame(&frames[0].data).unwrap(), NativeMessage::Event(event));
            } else {
                assert!(frames.is_empty(), "{} should be dropped", event.kind());
                let err = decode_frame(&serde_json::to_string(&event).unwrap()).unwrap_err();
                assert!(err.reason.contains(event.kind()), "{err}");
            }
        }
    }

    #[test]
    fn approval_required_is_kept() {
        let events = fixtures::approval_and_denial();
        let frames = render(&events);
        let kinds: Vec<String> = frames
            .iter()
            .map(|f| {
                serde_json::from_str::<Value>(&f.data).unwrap()["type"].as_str().unwrap().into()
            })
            .collect();
        assert!(kinds.contains(&"approval_required".to_string()));
        assert!(!kinds.iter().any(|k| k.starts_with("node_") || k.starts_with("step_")));
    }

    #[test]
    fn execute_complete_lists_remote_and_approval_calls_and_resets_per_run() {
        let mut encoder = NativeEncoder::new();
        let mut frames = Vec::new();
        let remote = call("r1", "browser", json!({"q": 1}));
        let gated = call("a1", "delete", json!({}));
        for event in [
            AgentEvent::SessionStart {
                session_id: "s".into(),
                run_id: "r".into(),
                agent: "react".into(),
            },
            AgentEvent::ApprovalRequired {
                session_id: "s".into(),
                tool_calls: vec![gated.clone()],
            },
            AgentEvent::AwaitingToolExecution {
                session_id: "s".into(),
                tool_calls: vec![remote.clone()],
            },
            AgentEvent::SessionEnd {
                session_id: "s".into(),
                status: SessionStatus::AwaitingApproval,
                messages: vec![],
                usage: Default::default(),
                cost: Default::default(),
            },
        ] {
            encoder.encode(&event, &mut frames);
        }
        let last: Value = serde_json::from_str(&frames.last().unwrap().data).unwrap();
        assert_eq!(
            last,
            json!({
                "type": "execute_complete",
                "status": "awaiting_approval",
                "pendingToolCalls": [
                    {"id": "a1", "name": "delete", "arguments": {}},
                    {"id": "r1", "name": "browser", "arguments": {"q": 1}}
                ],
                "pendingApprovals": [{"id": "a1", "name": "delete", "arguments": {}}]
            })
        );
        assert_eq!(
            decode_frame(&frames.last().unwrap().data).unwrap(),
            NativeMessage::Complete {
                status: SessionStatus::AwaitingApproval,
                pending_tool_calls: vec![gated, remote],
            }
        );
        // The next run starts with nothing pending.
        frames.clear();
        for event in [
            AgentEvent::SessionStart {
                session_id: "s".into(),
                run_id: "r2".into(),
                agent: "react".into(),
            },
            AgentEvent::SessionEnd {
                session_id: "s".into(),
                status: SessionStatus::Completed,
                messages: vec![],
                usage: Default::default(),
                cost: Default::default(),
            },
        ] {
            encoder.encode(&event, &mut frames);
        }
        assert_eq!(
            frames.last().unwrap().data,
            r#"{"type":"execute_complete","status":"completed","pendingToolCalls":[],"pendingApprovals":[]}"#
        );
    }

    #[test]
    fn decode_of_encode_is_the_canonical_transcript() {
        for (name, events) in fixtures::all() {
            let expected = Transcript::from_events(&events);
            let decoded = decode(&render(&events)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(decoded, expected, "{name}");
        }
        // The fixtures exercise what they claim to.
        let t = decode(&render(&fixtures::remote_suspended())).unwrap();
        assert_eq!(t.pending, ["r1"]);
        assert_eq!(t.status, Some(SessionStatus::AwaitingToolExecution));
        let t = decode(&render(&fixtures::tools_two_steps())).unwrap();
        assert_eq!(t.tool_results.len(), 3);
        assert!(t.tool_results[2].is_error);
    }

    #[test]
    fn pending_comes_from_execute_complete() {
        // A client that only kept the closing frame still knows what is pending.
        let frames = frames_of(&[
            r#"{"type":"session_start","sessionId":"s","runId":"r","agent":"react"}"#,
            r#"{"type":"execute_complete","status":"awaiting_tool_execution","pendingToolCalls":[{"id":"x","name":"t","arguments":{}}]}"#,
        ]);
        let t = decode(&frames).unwrap();
        assert_eq!(t.pending, ["x"]);
        assert_eq!(t.status, Some(SessionStatus::AwaitingToolExecution));
        // A run started after it has not closed: its events decide.
        let mut frames = frames;
        frames.push(Frame::raw(
            r#"{"type":"session_start","sessionId":"s","runId":"r2","agent":"react"}"#,
        ));
        let t = decode(&frames).unwrap();
        assert!(t.pending.is_empty());
        assert_eq!(t.status, None);
    }

    #[test]
    fn decode_errors_name_the_frame_and_the_problem() {
        let ok = r#"{"type":"text_start","index":0}"#;
        let cases = [
            (r#"{"type":"text_start","index":0"#, "invalid JSON"),
            ("[DONE]", "invalid JSON"),
            ("[1,2]", "expected a JSON object, got an array"),
            (r#"{"index":0}"#, "missing \"type\""),
            (r#"{"type":7}"#, "\"type\" must be a string"),
            (r#"{"type":"text_shout","index":0}"#, "unknown event type \"text_shout\""),
            (
                r#"{"type":"node_enter","name":"think","nodeId":"n"}"#,
                "event type \"node_enter\" is not part of the native format",
            ),
            (r#"{"type":"text_delta","index":0}"#, "invalid \"text_delta\" event"),
            (r#"{"type":"execute_complete","status":"sleeping"}"#, "invalid execute_complete"),
        ];
        for (bad, expected) in cases {
            let err = decode(&frames_of(&[ok, ok, bad, ok])).unwrap_err();
            assert_eq!(err.index, 2, "{bad}");
            assert!(err.reason.contains(expected), "{bad}: {err}");
            assert!(err.to_string().starts_with("frame 2: "), "{err}");
        }
    }
}
