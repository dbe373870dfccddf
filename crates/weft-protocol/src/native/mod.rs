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

use crate::framing::write_u64;
use crate::transcript::Transcript;
use crate::{Encoder, Frame, Framing, write_json_frame, write_str};

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

impl NativeEncoder {
    /// Keeps what `execute_complete` needs. Returns the frame that closes the run, after a
    /// `session_end`.
    fn track(&mut self, event: &AgentEvent) -> Option<CompleteOut<'_>> {
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
                return Some(CompleteOut {
                    kind: EXECUTE_COMPLETE,
                    status: *status,
                    pending_tool_calls: &self.pending,
                    pending_approvals: &self.approvals,
                });
            }
            _ => {}
        }
        None
    }
}

impl Encoder for NativeEncoder {
    /// Every event is one frame, serialized straight into `out`; `session_end` is followed by
    /// `execute_complete`, which carries the id.
    fn encode_to(&mut self, seq: u64, event: &AgentEvent, framing: Framing, out: &mut Vec<u8>) {
        if !event.is_plan_event() {
            return;
        }
        // Deltas (one per token) are written field by field: the bytes serde writes for them,
        // without its map serializer escaping every key.
        let delta = match event {
            AgentEvent::TextDelta { index, delta } => Some(("text_delta", *index, delta)),
            AgentEvent::ThinkingDelta { index, delta } => Some(("thinking_delta", *index, delta)),
            AgentEvent::ToolcallDelta { index, delta } => Some(("toolcall_delta", *index, delta)),
            _ => None,
        };
        if let Some((kind, index, delta)) = delta {
            framing.open(Some(seq), out);
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(kind.as_bytes());
            out.extend_from_slice(b"\",\"index\":");
            write_u64(u64::from(index), out);
            out.extend_from_slice(b",\"delta\":");
            write_str(delta, out);
            out.push(b'}');
            framing.close(out);
            return;
        }
        let closing = matches!(event, AgentEvent::SessionEnd { .. });
        write_json_frame(framing, (!closing).then_some(seq), event, out);
        if let Some(complete) = self.track(event) {
            write_json_frame(framing, Some(seq), &complete, out);
            self.pending.clear();
            self.approvals.clear();
        }
    }

    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        if !event.is_plan_event() {
            return;
        }
        out.push(Frame::json(event));
        if let Some(complete) = self.track(event) {
            out.push(Frame::json(&complete));
            self.pending.clear();
            self.approvals.clear();
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
pub(crate) mod fixtures;

#[cfg(test)]
mod tests;
