//! The Vercel AI SDK UI message stream (v1): the canonical events as the parts `useChat` reads,
//! for `POST /api/chat` and `?protocol=vercel`.
//!
//! Each frame is one UI message chunk (a JSON object with a kebab-case `type`), sent as an SSE
//! `data:` line; [`Encoder::finish`] appends the terminator `[DONE]`. The response carries the
//! header [`HEADER`].
//!
//! # Source
//!
//! Followed: AI SDK 6 (`ai` 6.0.x), `packages/ai/src/ui-message-stream/ui-message-chunks.ts`
//! (`uiMessageChunkSchema`: every chunk is a *strict* object, so no field beyond the schema's is
//! sent), `packages/ai/src/ui/process-ui-message-stream.ts` (how `useChat` applies them) and
//! `ui/chat.ts`, with the *Stream Protocols* page of ai-sdk.dev (header
//! `x-vercel-ai-ui-message-stream: v1`, the `[DONE]` terminator). `tool-approval-request` and
//! `finish.finishReason` are AI SDK 6 additions.
//!
//! # Mapping
//!
//! | canonical | UI message stream |
//! | --- | --- |
//! | `session_start` | `start` (`messageId`: below) |
//! | `step_start` / `step_end` (one model call and its tools) | `start-step` / `finish-step` |
//! | `text_start` / `_delta` / `_end` | `text-start` / `text-delta {id, delta}` / `text-end` |
//! | `thinking_start` / `_delta` / `_end` | `reasoning-start` / `reasoning-delta` / `reasoning-end` (a signature in `providerMetadata.weft.signature`) |
//! | `toolcall_start` / `_delta` / `_end` | `tool-input-start {toolCallId, toolName}` / `tool-input-delta {toolCallId, inputTextDelta}` / `tool-input-available {toolCallId, toolName, input}` |
//! | `message_end` of a `toolResult` | `tool-output-available {toolCallId, output}` or, for an error result, `tool-output-error {toolCallId, errorText}` |
//! | `tool_execution_delta` | `data-tool-output {data: {toolCallId, delta}, transient: true}` |
//! | `approval_required` | `tool-approval-request {approvalId: toolCallId, toolCallId}` per call |
//! | `awaiting_tool_execution` | nothing: a tool part without output is how `useChat` shows a client-side call |
//! | `state_snapshot`, `state_update` | `data-state {id: "state", data: the state}` |
//! | `checkpoint` | `data-checkpoint {data: its fields, transient: true}` |
//! | `tot_*`, `got_*` | `data-<type> {data: the event's fields}` |
//! | `custom` | `data-custom {data: value}` |
//! | `error` (a failed model call) | `error {errorText}` |
//! | `session_end` | `abort` (aborted runs) or `error` (failed runs not yet reported), then `finish {finishReason}` |
//!
//! Not sent: `node_enter` / `node_exit` (steps come from `step_*`), `message_start`, the user's
//! and the assistant's `message_end` (the client has the one; the other was streamed),
//! `tool_execution_start` / `_end` (the result arrives as `tool-output-*`).
//!
//! ## Ids and the message
//!
//! A run is one assistant UI message. A text or reasoning block of step `n` of run `R` has the id
//! `R-n-<index>` (`index`: the block's position in the model's message). `start` carries
//! `messageId: R` when the run begins with the user's message (a new assistant message). A run
//! that resumes a suspended one (tool results or approval decisions; no user message) sends
//! `start` without `messageId`, so that `useChat` continues its last assistant message, whose tool
//! parts the results refer to, instead of adding a second one. [`VercelEncoder::with_message_id`]
//! sets the id explicitly. `start` is therefore written when the event after `session_start`
//! arrives, before anything else of the run.
//!
//! ## How a run ends
//!
//! Open text and reasoning parts and the open step are closed; then an aborted run sends `abort`
//! (AI SDK's own part for a stop the user asked for: `useChat` keeps the partial message and does
//! not enter its error state), a failed run whose failure was not reported yet sends `error`, and
//! every run ends with `finish {finishReason}`: `stop` / `length` (the last model call's stop
//! reason), `tool-calls` (suspended for remote calls or approvals), `error`, `other` (aborted or
//! stopped by its turn limit). A model call that failed after starting tool calls leaves them
//! unrun: each gets a `tool-output-error`, so no tool part is left waiting forever. If the
//! stream ends without `session_end`, [`Encoder::finish`] closes the message with `error` and
//! `finish` before `[DONE]`.
//!
//! ## Choices where the formats differ
//!
//! - Local tool output deltas: AI SDK's streaming tool output (`tool-output-available` with
//!   `preliminary: true`) repeats the whole output so far in every chunk, quadratic in the
//!   output's length; they go out instead as transient `data-tool-output` parts (delivered to
//!   `useChat`'s `onData`, not stored in the message), and the whole output follows in
//!   `tool-output-available`.
//! - `output` is the result's text (text blocks joined); the result's `details` are not sent.
//! - A denied approval is the error result the model sees, so it arrives as `tool-output-error`
//!   (the canonical stream does not tell a denial from other error results).
//! - Empty deltas are not sent.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};
use weft_core::{AgentEvent, AssistantMessage, Message, Role, SessionStatus, StopReason, ToolCall};

use crate::{Encoder, Frame};

/// The response header that marks a UI message stream.
pub const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// The stream's terminator, sent by [`Encoder::finish`].
pub const DONE: &str = "[DONE]";

/// Renders canonical events as a UI message stream. One encoder serves one HTTP response: one
/// run, or several runs of a session in order (each its own `start` … `finish`).
#[derive(Debug, Default)]
pub struct VercelEncoder {
    /// `messageId` for the next `start`, when set by the server.
    message_id: Option<String>,
    /// The run being encoded, between `start` and `finish`.
    run: Option<RunState>,
    /// Whether `[DONE]` was sent.
    done: bool,
}

impl VercelEncoder {
    /// An encoder for a new stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the `messageId` of the next `start`: the id of the assistant UI message the run
    /// writes (for a run that continues a message, that message's id).
    pub fn with_message_id(mut self, message_id: impl Into<String>) -> Self {
        self.message_id = Some(message_id.into());
        self
    }
}

impl Encoder for VercelEncoder {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        if let AgentEvent::SessionStart { run_id, .. } = event {
            if let Some(run) = self.run.take() {
                run.fail_incomplete(out);
            }
            self.run = Some(RunState::new(run_id, self.message_id.take()));
            return;
        }
        // A stream taken up mid-run (no `session_start`) still gets a well-formed message.
        let run = self.run.get_or_insert_with(|| RunState::new("resumed", None));
        run.write_start(matches!(event, AgentEvent::MessageStart { role: Role::User }), out);
        match event {
            AgentEvent::SessionStart { .. } => {}
            AgentEvent::SessionEnd { status, messages, .. } => {
                if let Some(run) = self.run.take() {
                    run.end(*status, messages, out);
                }
            }
            AgentEvent::StepStart { step_index, .. } => {
                run.close_step(out);
                run.open_step(out);
                run.next_step = Some(*step_index);
            }
            AgentEvent::StepEnd { .. } => run.close_step(out),
            AgentEvent::MessageStart { role } => {
                if *role == Role::Assistant {
                    run.new_message(out);
                }
            }
            AgentEvent::MessageEnd { message } => match message.as_ref() {
                Message::Assistant(m) => run.assistant_end(m, out),
                Message::ToolResult(r) => {
                    let text = r.text_content();
                    if r.is_error {
                        push(
                            out,
                            &Part::ToolOutputError {
                                tool_call_id: &r.tool_call_id,
                                error_text: &text,
                            },
                        );
                    } else {
                        push(
                            out,
                            &Part::ToolOutputAvailable {
                                tool_call_id: &r.tool_call_id,
                                output: &text,
                            },
                        );
                    }
                }
                Message::User(_) => {}
            },
            AgentEvent::TextStart { index } => {
                run.block_start(*index, Kind::Text, out);
            }
            AgentEvent::TextDelta { index, delta } => {
                run.block_delta(*index, Kind::Text, delta, out)
            }
            AgentEvent::TextEnd { index, text } => {
                run.block_end(*index, Kind::Text, text, None, out)
            }
            AgentEvent::ThinkingStart { index } => {
                run.block_start(*index, Kind::Reasoning, out);
            }
            AgentEvent::ThinkingDelta { index, delta } => {
                run.block_delta(*index, Kind::Reasoning, delta, out);
            }
            AgentEvent::ThinkingEnd { index, thinking, signature } => {
                run.block_end(*index, Kind::Reasoning, thinking, signature.as_deref(), out);
            }
            AgentEvent::ToolcallStart { index, id, name } => run.call_start(*index, id, name, out),
            AgentEvent::ToolcallDelta { index, delta } => run.call_delta(*index, delta, out),
            AgentEvent::ToolcallEnd { index, tool_call } => run.call_end(*index, tool_call, out),
            AgentEvent::ToolExecutionDelta { tool_call_id, delta } => {
                let data = json!({ "toolCallId": tool_call_id, "delta": delta });
                push_data(out, "data-tool-output", None, &data, true);
            }
            AgentEvent::ToolExecutionStart { .. } | AgentEvent::ToolExecutionEnd { .. } => {}
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                for call in tool_calls {
                    push(
                        out,
                        &Part::ToolApprovalRequest {
                            approval_id: &call.id,
                            tool_call_id: &call.id,
                        },
                    );
                }
            }
            AgentEvent::AwaitingToolExecution { .. } => {}
            AgentEvent::NodeEnter { .. } | AgentEvent::NodeExit { .. } => {}
            AgentEvent::StateSnapshot { state } | AgentEvent::StateUpdate { state, .. } => {
                push_data(out, "data-state", Some("state"), state, false);
            }
            AgentEvent::Checkpoint { .. } => {
                push_data(out, "data-checkpoint", None, &fields(event), true);
            }
            AgentEvent::Custom { value } => push_data(out, "data-custom", None, value, false),
            AgentEvent::TotExpand { .. }
            | AgentEvent::TotEvaluate { .. }
            | AgentEvent::TotBacktrack { .. }
            | AgentEvent::GotPlan { .. }
            | AgentEvent::GotNodeStart { .. }
            | AgentEvent::GotNodeComplete { .. }
            | AgentEvent::GotNodeFailed { .. }
            | AgentEvent::GotExpand { .. } => {
                let kind = format!("data-{}", event.kind());
                push_data(out, &kind, None, &fields(event), false);
            }
            AgentEvent::Error { error, message } => {
                let aborted = matches!(
                    message.as_deref(),
                    Some(Message::Assistant(m)) if m.stop_reason == StopReason::Aborted
                );
                if !aborted && !run.error_sent {
                    push(out, &Part::Error { error_text: error });
                    run.error_sent = true;
                }
                run.failure.get_or_insert_with(|| error.clone());
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<Frame>) {
        if let Some(run) = self.run.take() {
            run.fail_incomplete(out);
        }
        if !self.done {
            out.push(Frame::raw(DONE));
            self.done = true;
        }
    }
}

/// One run being encoded: one assistant UI message.
#[derive(Debug)]
struct RunState {
    run_id: String,
    /// `start` is pending until the event after `session_start` (see the module docs); holds the
    /// explicit `messageId`, if any.
    start: Option<Option<String>>,
    /// Whether a `start-step` is open.
    step_open: bool,
    /// The step index announced by `step_start`, for the next model call's block ids.
    next_step: Option<u32>,
    /// Model calls begun, for block ids when no step index is known.
    call_count: u32,
    /// Block id prefix of the current model call (`R-n`); empty between model calls.
    scope: String,
    /// Open blocks by index.
    blocks: BTreeMap<u32, Open>,
    /// Tool calls of the current model call: (id, name).
    calls: Vec<(String, String)>,
    /// The first failure reported.
    failure: Option<String>,
    /// Whether an `error` part was sent.
    error_sent: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Reasoning,
}

#[derive(Debug)]
enum Open {
    Block(Kind, String),
    Call(String),
}

impl RunState {
    fn new(run_id: &str, message_id: Option<String>) -> Self {
        Self {
            run_id: run_id.to_string(),
            start: Some(message_id),
            step_open: false,
            next_step: None,
            call_count: 0,
            scope: String::new(),
            blocks: BTreeMap::new(),
            calls: Vec::new(),
            failure: None,
            error_sent: false,
        }
    }

    /// Writes the pending `start`, if it is: a run that begins with the user's message
    /// (`new_message`) is a new assistant message (`messageId`: the run id); any other continues
    /// the client's last one.
    fn write_start(&mut self, new_message: bool, out: &mut Vec<Frame>) {
        let Some(explicit) = self.start.take() else {
            return;
        };
        let message_id = explicit.or_else(|| new_message.then(|| self.run_id.clone()));
        push(out, &Part::Start { message_id: message_id.as_deref() });
    }

    fn open_step(&mut self, out: &mut Vec<Frame>) {
        push(out, &Part::StartStep);
        self.step_open = true;
    }

    /// Closes the open blocks and the open step.
    fn close_step(&mut self, out: &mut Vec<Frame>) {
        self.close_blocks(out);
        if self.step_open {
            push(out, &Part::FinishStep);
            self.step_open = false;
        }
    }

    fn close_blocks(&mut self, out: &mut Vec<Frame>) {
        for open in std::mem::take(&mut self.blocks).into_values() {
            if let Open::Block(kind, id) = open {
                push(out, &end_part(kind, &id, None));
            }
        }
    }

    /// A model call begins: a step if none is open, new block ids.
    fn new_message(&mut self, out: &mut Vec<Frame>) {
        self.close_blocks(out);
        if !self.step_open {
            self.open_step(out);
        }
        self.scope = match self.next_step.take() {
            Some(step) => format!("{}-{step}", self.run_id),
            None => format!("{}-m{}", self.run_id, self.call_count),
        };
        self.call_count += 1;
        self.calls.clear();
    }

    fn block_start(&mut self, index: u32, kind: Kind, out: &mut Vec<Frame>) -> String {
        if let Some(Open::Block(old, id)) = self.blocks.remove(&index) {
            push(out, &end_part(old, &id, None));
        }
        if self.scope.is_empty() {
            self.new_message(out);
        } else if !self.step_open {
            self.open_step(out);
        }
        let id = format!("{}-{index}", self.scope);
        push(
            out,
            &match kind {
                Kind::Text => Part::TextStart { id: &id },
                Kind::Reasoning => Part::ReasoningStart { id: &id },
            },
        );
        self.blocks.insert(index, Open::Block(kind, id.clone()));
        id
    }

    fn open_block(&self, index: u32, kind: Kind) -> Option<String> {
        match self.blocks.get(&index)? {
            Open::Block(k, id) if *k == kind => Some(id.clone()),
            _ => None,
        }
    }

    fn block_delta(&mut self, index: u32, kind: Kind, delta: &str, out: &mut Vec<Frame>) {
        let id = match self.open_block(index, kind) {
            Some(id) => id,
            None => self.block_start(index, kind, out),
        };
        if !delta.is_empty() {
            push(
                out,
                &match kind {
                    Kind::Text => Part::TextDelta { id: &id, delta },
                    Kind::Reasoning => Part::ReasoningDelta { id: &id, delta },
                },
            );
        }
    }

    fn block_end(
        &mut self,
        index: u32,
        kind: Kind,
        whole: &str,
        signature: Option<&str>,
        out: &mut Vec<Frame>,
    ) {
        if self.open_block(index, kind).is_none() {
            // The start was not seen (a stream taken up mid-block): send the whole content.
            self.block_delta(index, kind, whole, out);
        }
        if let Some(Open::Block(kind, id)) = self.blocks.remove(&index) {
            push(out, &end_part(kind, &id, signature));
        }
    }

    fn call_start(&mut self, index: u32, id: &str, name: &str, out: &mut Vec<Frame>) {
        if let Some(Open::Block(old, block)) = self.blocks.remove(&index) {
            push(out, &end_part(old, &block, None));
        }
        if self.scope.is_empty() {
            self.new_message(out);
        } else if !self.step_open {
            self.open_step(out);
        }
        push(out, &Part::ToolInputStart { tool_call_id: id, tool_name: name });
        self.blocks.insert(index, Open::Call(id.to_string()));
        self.calls.push((id.to_string(), name.to_string()));
    }

    fn call_delta(&mut self, index: u32, delta: &str, out: &mut Vec<Frame>) {
        // `useChat` fails on a `tool-input-delta` for a call it has not seen start, so a delta is
        // sent only for a call started in this stream.
        if let Some(Open::Call(id)) = self.blocks.get(&index)
            && !delta.is_empty()
        {
            push(out, &Part::ToolInputDelta { tool_call_id: id, input_text_delta: delta });
        }
    }

    fn call_end(&mut self, index: u32, call: &ToolCall, out: &mut Vec<Frame>) {
        if let Some(Open::Call(_)) = self.blocks.get(&index) {
            self.blocks.remove(&index);
        } else {
            self.calls.push((call.id.clone(), call.name.clone()));
        }
        push(
            out,
            &Part::ToolInputAvailable {
                tool_call_id: &call.id,
                tool_name: &call.name,
                input: &call.arguments,
            },
        );
    }

    fn assistant_end(&mut self, message: &AssistantMessage, out: &mut Vec<Frame>) {
        self.close_blocks(out);
        self.scope.clear();
        if !message.stop_reason.is_failure() {
            return;
        }
        let why = message.error_message.clone().unwrap_or_else(|| "the model call failed".into());
        // A failed message's tool calls never run: say so, so no tool part waits forever.
        let text = if message.stop_reason == StopReason::Aborted {
            "The tool call was not run: the run was aborted".to_string()
        } else {
            format!("The tool call was not run: the model call failed ({why})")
        };
        for (id, _) in std::mem::take(&mut self.calls) {
            push(out, &Part::ToolOutputError { tool_call_id: &id, error_text: &text });
        }
        self.failure.get_or_insert(why);
    }

    /// The run's last parts, by its status.
    fn end(mut self, status: SessionStatus, messages: &[Message], out: &mut Vec<Frame>) {
        self.close_step(out);
        match status {
            SessionStatus::Aborted => push(out, &Part::Abort),
            SessionStatus::Error if !self.error_sent => {
                let text = self
                    .failure
                    .take()
                    .or_else(|| last_error_message(messages))
                    .unwrap_or_else(|| "the run failed".to_string());
                push(out, &Part::Error { error_text: &text });
            }
            _ => {}
        }
        push(out, &Part::Finish { finish_reason: Some(finish_reason(status, messages)) });
    }

    /// Ends a run whose `session_end` never came.
    fn fail_incomplete(mut self, out: &mut Vec<Frame>) {
        self.write_start(false, out);
        self.close_step(out);
        push(out, &Part::Error { error_text: "the event stream ended before the run finished" });
        push(out, &Part::Finish { finish_reason: Some("error") });
    }
}

fn end_part<'a>(kind: Kind, id: &'a str, signature: Option<&str>) -> Part<'a> {
    match kind {
        Kind::Text => Part::TextEnd { id },
        Kind::Reasoning => Part::ReasoningEnd {
            id,
            provider_metadata: signature.map(|s| json!({ "weft": { "signature": s } })),
        },
    }
}

/// AI SDK's `FinishReason` for a run that ended with `status`.
fn finish_reason(status: SessionStatus, messages: &[Message]) -> &'static str {
    match status {
        SessionStatus::Completed => {
            let last = messages.iter().rev().find_map(|m| match m {
                Message::Assistant(a) => Some(a.stop_reason),
                _ => None,
            });
            match last {
                Some(StopReason::Length) => "length",
                Some(StopReason::ToolUse) => "tool-calls",
                Some(StopReason::Error) => "error",
                Some(StopReason::Aborted) => "other",
                Some(StopReason::Stop) | None => "stop",
            }
        }
        SessionStatus::AwaitingToolExecution | SessionStatus::AwaitingApproval => "tool-calls",
        SessionStatus::Error => "error",
        SessionStatus::Aborted | SessionStatus::MaxTurns => "other",
        SessionStatus::Idle | SessionStatus::Running => "unknown",
    }
}

fn last_error_message(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) if a.stop_reason.is_failure() => a.error_message.clone(),
        _ => None,
    })
}

/// The event's JSON fields, without its `type` tag.
fn fields(event: &AgentEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("type");
    }
    value
}

fn push(out: &mut Vec<Frame>, part: &Part<'_>) {
    out.push(Frame::json(part));
}

fn push_data(out: &mut Vec<Frame>, kind: &str, id: Option<&str>, data: &Value, transient: bool) {
    out.push(Frame::json(&DataPart { kind, id, data, transient: transient.then_some(true) }));
}

/// The UI message chunks this encoder sends (all but `data-*`).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase")]
enum Part<'a> {
    Start {
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<&'a str>,
    },
    StartStep,
    FinishStep,
    TextStart {
        id: &'a str,
    },
    TextDelta {
        id: &'a str,
        delta: &'a str,
    },
    TextEnd {
        id: &'a str,
    },
    ReasoningStart {
        id: &'a str,
    },
    ReasoningDelta {
        id: &'a str,
        delta: &'a str,
    },
    ReasoningEnd {
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Value>,
    },
    ToolInputStart {
        tool_call_id: &'a str,
        tool_name: &'a str,
    },
    ToolInputDelta {
        tool_call_id: &'a str,
        input_text_delta: &'a str,
    },
    ToolInputAvailable {
        tool_call_id: &'a str,
        tool_name: &'a str,
        input: &'a Value,
    },
    ToolApprovalRequest {
        approval_id: &'a str,
        tool_call_id: &'a str,
    },
    ToolOutputAvailable {
        tool_call_id: &'a str,
        output: &'a str,
    },
    ToolOutputError {
        tool_call_id: &'a str,
        error_text: &'a str,
    },
    Error {
        error_text: &'a str,
    },
    Abort,
    Finish {
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<&'a str>,
    },
}

/// A `data-*` chunk.
#[derive(Serialize)]
struct DataPart<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    data: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    transient: Option<bool>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::{BTreeMap, HashSet};

    use serde_json::{Value, json};
    use weft_core::{AgentEvent, SessionStatus, StopReason};

    use super::{DONE, HEADER, VercelEncoder};
    use crate::agui::fixtures::{Block, Script, real_weather_run, texts};
    use crate::{Encoder, Frame};

    fn encode_with(encoder: &mut VercelEncoder, events: &[AgentEvent]) -> Vec<Frame> {
        let mut out = Vec::new();
        for event in events {
            encoder.encode(event, &mut out);
        }
        encoder.finish(&mut out);
        out
    }

    fn encode(events: &[AgentEvent]) -> Vec<Frame> {
        encode_with(&mut VercelEncoder::new(), events)
    }

    fn lines(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.data.as_str()).collect()
    }

    fn parts(frames: &[Frame]) -> Vec<Value> {
        frames
            .iter()
            .filter(|f| f.is_json())
            .map(|f| serde_json::from_str(&f.data).unwrap())
            .collect()
    }

    fn of_type<'a>(parts: &'a [Value], kind: &str) -> Vec<&'a Value> {
        parts.iter().filter(|p| p["type"] == kind).collect()
    }

    /// (required fields, optional fields) of each chunk type, from AI SDK 6's strict
    /// `uiMessageChunkSchema`.
    fn schema(kind: &str) -> (&'static [&'static str], &'static [&'static str]) {
        match kind {
            "start" => (&[], &["messageId", "messageMetadata"]),
            "finish" => (&[], &["finishReason", "messageMetadata"]),
            "start-step" | "finish-step" | "abort" => (&[], &[]),
            "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => {
                (&["id"], &["providerMetadata"])
            }
            "text-delta" | "reasoning-delta" => (&["id", "delta"], &["providerMetadata"]),
            "error" => (&["errorText"], &[]),
            "tool-input-start" => {
                (&["toolCallId", "toolName"], &["providerExecuted", "dynamic", "title"])
            }
            "tool-input-delta" => (&["toolCallId", "inputTextDelta"], &[]),
            "tool-input-available" => (
                &["toolCallId", "toolName", "input"],
                &["providerExecuted", "providerMetadata", "dynamic", "title"],
            ),
            "tool-approval-request" => (&["approvalId", "toolCallId"], &[]),
            "tool-output-available" => {
                (&["toolCallId", "output"], &["providerExecuted", "dynamic", "preliminary"])
            }
            "tool-output-error" => (&["toolCallId", "errorText"], &["providerExecuted", "dynamic"]),
            k if k.starts_with("data-") => (&["data"], &["id", "transient"]),
            other => panic!("not a UI message chunk type: {other}"),
        }
    }

    /// What a UI message stream says, after checking it the way `useChat` reads it.
    #[derive(Debug, Default)]
    struct Seen {
        /// Text parts: (id, concatenated deltas), in start order.
        texts: Vec<(String, String)>,
        /// Reasoning parts' text, in start order.
        reasoning: Vec<String>,
        /// Streamed tool input text by call id.
        input_text: BTreeMap<String, String>,
        /// `tool-input-available` inputs by call id.
        inputs: BTreeMap<String, Value>,
        /// Outputs by call id: `output`, or `{"error": errorText}`.
        outputs: BTreeMap<String, Value>,
        /// The `finish` parts.
        finishes: Vec<Value>,
    }

    /// Checks a stream: only schema fields; `start` first and each message closed by `finish`;
    /// `[DONE]` once, last; steps neither nested nor left open; text and reasoning deltas only
    /// between their `*-start` and `*-end`, ids never reused, nothing open at `finish-step` or
    /// `finish`; tool input deltas only for started calls; outputs and approvals only for calls
    /// the client knows (streamed here, or `known` from an earlier response).
    fn check(frames: &[Frame], known: &[&str]) -> Seen {
        let mut seen = Seen::default();
        assert_eq!(
            frames.last().map(|f| f.data.as_str()),
            Some(DONE),
            "the stream ends with [DONE]"
        );
        assert_eq!(frames.iter().filter(|f| !f.is_json()).count(), 1, "one terminator");
        let mut in_message = false;
        let mut step_open = false;
        let mut open: BTreeMap<String, String> = BTreeMap::new();
        let mut ids: HashSet<String> = HashSet::new();
        let mut calls: HashSet<String> = known.iter().map(|s| s.to_string()).collect();
        let mut streaming_calls: HashSet<String> = HashSet::new();
        let mut reasoning_at: BTreeMap<String, usize> = BTreeMap::new();
        for (i, frame) in frames[..frames.len() - 1].iter().enumerate() {
            let v: Value = serde_json::from_str(&frame.data).unwrap();
            let kind = v["type"].as_str().unwrap();
            let (required, optional) = schema(kind);
            for key in v.as_object().unwrap().keys() {
                assert!(
                    key == "type"
                        || required.contains(&key.as_str())
                        || optional.contains(&key.as_str()),
                    "{kind} has a field the strict schema rejects: {key}"
                );
            }
            for key in required {
                assert!(v.get(*key).is_some(), "{kind} lacks {key}");
            }
            let id = |field: &str| v[field].as_str().unwrap().to_string();
            if kind == "start" {
                assert!(!in_message, "start at {i} inside a message");
                in_message = true;
                continue;
            }
            assert!(in_message, "{kind} at {i} outside start … finish");
            match kind {
                "finish" => {
                    assert!(!step_open, "finish with a step open");
                    assert!(open.is_empty(), "finish with parts open: {open:?}");
                    let reason = v["finishReason"].as_str().unwrap();
                    assert!(
                        [
                            "stop",
                            "length",
                            "content-filter",
                            "tool-calls",
                            "error",
                            "other",
                            "unknown"
                        ]
                        .contains(&reason)
                    );
                    in_message = false;
                    seen.finishes.push(v.clone());
                }
                "start-step" => {
                    assert!(!step_open, "start-step at {i} inside a step");
                    step_open = true;
                }
                "finish-step" => {
                    assert!(step_open, "finish-step at {i} without a step");
                    assert!(open.is_empty(), "finish-step with parts open: {open:?}");
                    step_open = false;
                }
                "text-start" | "reasoning-start" => {
                    let id = id("id");
                    assert!(step_open, "{kind} outside a step");
                    assert!(ids.insert(id.clone()), "part id {id} reused");
                    open.insert(id.clone(), kind.to_string());
                    if kind == "text-start" {
                        seen.texts.push((id, String::new()));
                    } else {
                        reasoning_at.insert(id, seen.reasoning.len());
                        seen.reasoning.push(String::new());
                    }
                }
                "text-delta" | "reasoning-delta" => {
                    let id = id("id");
                    let started =
                        if kind == "text-delta" { "text-start" } else { "reasoning-start" };
                    assert_eq!(
                        open.get(&id).map(String::as_str),
                        Some(started),
                        "{kind} for a part not open: {id}"
                    );
                    let delta = v["delta"].as_str().unwrap();
                    assert!(!delta.is_empty());
                    if kind == "text-delta" {
                        seen.texts.iter_mut().find(|(t, _)| *t == id).unwrap().1.push_str(delta);
                    } else {
                        seen.reasoning[reasoning_at[&id]].push_str(delta);
                    }
                }
                "text-end" | "reasoning-end" => {
                    let id = id("id");
                    assert!(open.remove(&id).is_some(), "{kind} for a part not open: {id}");
                }
                "tool-input-start" => {
                    let id = id("toolCallId");
                    assert!(calls.insert(id.clone()), "call {id} started twice");
                    streaming_calls.insert(id.clone());
                    seen.input_text.insert(id, String::new());
                }
                "tool-input-delta" => {
                    let id = id("toolCallId");
                    assert!(streaming_calls.contains(&id), "input delta for a call not started");
                    seen.input_text
                        .get_mut(&id)
                        .unwrap()
                        .push_str(v["inputTextDelta"].as_str().unwrap());
                }
                "tool-input-available" => {
                    let id = id("toolCallId");
                    streaming_calls.remove(&id);
                    calls.insert(id.clone());
                    seen.inputs.insert(id, v["input"].clone());
                }
                "tool-output-available" | "tool-output-error" | "tool-approval-request" => {
                    let id = id("toolCallId");
                    assert!(
                        calls.contains(&id),
                        "{kind} for a call the client does not know: {id}"
                    );
                    if kind == "tool-output-available" {
                        seen.outputs.insert(id, v["output"].clone());
                    } else if kind == "tool-output-error" {
                        seen.outputs.insert(id, json!({ "error": v["errorText"] }));
                    }
                }
                "error" | "abort" => {}
                data => assert!(data.starts_with("data-")),
            }
        }
        assert!(!in_message, "the stream ended inside a message");
        seen
    }

    fn weather(run: &str) -> Vec<AgentEvent> {
        Script::new("s1", run, 0)
            .user("What's the weather in Paris?")
            .model(
                &[
                    Block::Think("Use the tools.", None),
                    Block::Text("Let me look."),
                    Block::Call("c1", "echo", json!({"text": "Paris"})),
                    Block::Call("c2", "clock", json!({})),
                ],
                StopReason::ToolUse,
            )
            .act(&[("c1", "echo", &["Par", "is"], false), ("c2", "clock", &["12:00"], false)])
            .observe(&[("c1", "echo", "Paris", false), ("c2", "clock", "12:00", false)])
            .model(&[Block::Text("It is sunny in Paris.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed)
    }

    #[test]
    fn the_header_is_v1() {
        assert_eq!(HEADER, ("x-vercel-ai-ui-message-stream", "v1"));
    }

    #[test]
    fn a_text_answer_gives_exact_frames() {
        let events = Script::new("s1", "r1", 0)
            .user("hi")
            .model(&[Block::Text("Hello")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        assert_eq!(
            lines(&frames),
            [
                r#"{"type":"start","messageId":"r1"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"r1-0-0"}"#,
                r#"{"type":"text-delta","id":"r1-0-0","delta":"Hell"}"#,
                r#"{"type":"text-delta","id":"r1-0-0","delta":"o"}"#,
                r#"{"type":"text-end","id":"r1-0-0"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
                "[DONE]",
            ]
        );
        check(&frames, &[]);
    }

    #[test]
    fn thinking_then_text_gives_exact_frames() {
        let events = Script::new("s1", "r1", 3)
            .user("hi")
            .model(&[Block::Think("Hmm.", Some("sig-1")), Block::Text("Hi")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        assert_eq!(
            lines(&frames)[1..9],
            [
                r#"{"type":"start-step"}"#,
                r#"{"type":"reasoning-start","id":"r1-3-0"}"#,
                r#"{"type":"reasoning-delta","id":"r1-3-0","delta":"Hmm."}"#,
                r#"{"type":"reasoning-end","id":"r1-3-0","providerMetadata":{"weft":{"signature":"sig-1"}}}"#,
                r#"{"type":"text-start","id":"r1-3-1"}"#,
                r#"{"type":"text-delta","id":"r1-3-1","delta":"Hi"}"#,
                r#"{"type":"text-end","id":"r1-3-1"}"#,
                r#"{"type":"finish-step"}"#,
            ]
        );
        let seen = check(&frames, &[]);
        assert_eq!(seen.reasoning, ["Hmm."]);
    }

    #[test]
    fn tool_calls_stream_their_input_output_and_results_inside_the_step() {
        let events = weather("r1");
        let frames = encode(&events);
        let seen = check(&frames, &[]);
        let p = parts(&frames);

        let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(contents, texts(&events));
        assert_eq!(seen.reasoning, ["Use the tools."]);
        assert_eq!(
            *of_type(&p, "tool-input-start")[0],
            json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "echo"})
        );
        assert_eq!(seen.input_text["c1"], r#"{"text":"Paris"}"#);
        assert!(of_type(&p, "tool-input-delta").len() > 2, "input is streamed in pieces");
        assert_eq!(
            *of_type(&p, "tool-input-available")[0],
            json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "echo",
                   "input": {"text": "Paris"}})
        );
        assert_eq!(seen.inputs["c2"], json!({}));

        // Local output streams as transient data parts, then the outputs.
        let data = of_type(&p, "data-tool-output");
        assert!(data.iter().all(|d| d["transient"] == true));
        let streamed: String = data
            .iter()
            .filter(|d| d["data"]["toolCallId"] == "c1")
            .map(|d| d["data"]["delta"].as_str().unwrap())
            .collect();
        assert_eq!(streamed, "Paris");
        assert_eq!(seen.outputs["c1"], "Paris");
        assert_eq!(seen.outputs["c2"], "12:00");

        // The outputs belong to the first step, before the second model call's step.
        let kinds: Vec<&str> = p.iter().map(|v| v["type"].as_str().unwrap()).collect();
        let last_output = kinds.iter().rposition(|k| *k == "tool-output-available").unwrap();
        let second_step =
            kinds.iter().enumerate().filter(|(_, k)| **k == "start-step").nth(1).unwrap().0;
        assert!(last_output < second_step);
        assert_eq!(kinds.iter().filter(|k| **k == "finish-step").count(), 2);
        assert_eq!(seen.finishes, [json!({"type": "finish", "finishReason": "stop"})]);
    }

    #[test]
    fn a_remote_suspension_leaves_the_tool_part_waiting_and_the_resume_continues_the_message() {
        let run1 = Script::new("s1", "r1", 0)
            .user("Read the headline")
            .model(
                &[
                    Block::Text("Reading."),
                    Block::Call("c1", "read_page", json!({"selector": "h1"})),
                ],
                StopReason::ToolUse,
            )
            .awaiting(&[("c1", "read_page", json!({"selector": "h1"}))])
            .end(SessionStatus::AwaitingToolExecution);
        let frames = encode(&run1);
        let seen = check(&frames, &[]);
        assert_eq!(seen.inputs["c1"], json!({"selector": "h1"}));
        assert!(seen.outputs.is_empty(), "the client runs the call");
        assert_eq!(
            lines(&frames)[frames.len() - 4..],
            [
                r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"read_page","input":{"selector":"h1"}}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"tool-calls"}"#,
                "[DONE]",
            ]
        );

        // The next request (the client's result) continues the same assistant message.
        let run2 = Script::new("s1", "r2", 1)
            .observe(&[("c1", "read_page", "Weft 0.1", false)])
            .model(&[Block::Text("The headline is Weft 0.1.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&run2);
        assert_eq!(
            lines(&frames)[..2],
            [
                r#"{"type":"start"}"#,
                r#"{"type":"tool-output-available","toolCallId":"c1","output":"Weft 0.1"}"#
            ]
        );
        let seen = check(&frames, &["c1"]);
        assert_eq!(seen.texts, [("r2-1-0".to_string(), "The headline is Weft 0.1.".to_string())]);

        // The server can name the message explicitly.
        let frames = encode_with(&mut VercelEncoder::new().with_message_id("msg-7"), &run2);
        assert_eq!(frames[0].data, r#"{"type":"start","messageId":"msg-7"}"#);
    }

    #[test]
    fn an_approval_request_names_the_call_and_a_denial_is_an_output_error() {
        let run1 = Script::new("s1", "r1", 0)
            .user("Send it")
            .model(&[Block::Call("c1", "send_email", json!({"to": "a@b.c"}))], StopReason::ToolUse)
            .approval(&[("c1", "send_email", json!({"to": "a@b.c"}))])
            .end(SessionStatus::AwaitingApproval);
        let frames = encode(&run1);
        check(&frames, &[]);
        assert_eq!(
            lines(&frames)[frames.len() - 5..],
            [
                r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"send_email","input":{"to":"a@b.c"}}"#,
                r#"{"type":"tool-approval-request","approvalId":"c1","toolCallId":"c1"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"tool-calls"}"#,
                "[DONE]",
            ]
        );

        let run2 = Script::new("s1", "r2", 1)
            .observe(&[("c1", "send_email", "Tool call denied by the user: no", true)])
            .model(&[Block::Text("Understood.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let seen = check(&encode(&run2), &["c1"]);
        assert_eq!(seen.outputs["c1"], json!({"error": "Tool call denied by the user: no"}));
    }

    #[test]
    fn a_provider_error_is_reported_once_and_the_stream_still_ends_properly() {
        let events = Script::new("s1", "r1", 0)
            .user("hi")
            .model(
                &[Block::Text("Partial answ"), Block::Call("c1", "echo", json!({"t": 1}))],
                StopReason::Error,
            )
            .end(SessionStatus::Error);
        let frames = encode(&events);
        let seen = check(&frames, &[]);
        assert_eq!(seen.texts[0].1, "Partial answ", "the partial text is kept");
        assert_eq!(
            seen.outputs["c1"],
            json!({"error": "The tool call was not run: the model call failed (upstream 500)"})
        );
        let p = parts(&frames);
        assert_eq!(of_type(&p, "error"), [&json!({"type": "error", "errorText": "upstream 500"})]);
        assert_eq!(
            lines(&frames)[frames.len() - 3..],
            [r#"{"type":"finish-step"}"#, r#"{"type":"finish","finishReason":"error"}"#, "[DONE]"]
        );
    }

    #[test]
    fn an_abort_is_an_abort_part_not_an_error() {
        let events = Script::new("s1", "r1", 0)
            .user("hi")
            .model(&[Block::Text("Thinking about")], StopReason::Aborted)
            .end(SessionStatus::Aborted);
        let frames = encode(&events);
        check(&frames, &[]);
        assert!(of_type(&parts(&frames), "error").is_empty());
        assert_eq!(
            lines(&frames)[frames.len() - 5..],
            [
                r#"{"type":"text-end","id":"r1-0-0"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"abort"}"#,
                r#"{"type":"finish","finishReason":"other"}"#,
                "[DONE]",
            ]
        );
    }

    #[test]
    fn a_multi_step_run_balances_its_steps_and_keeps_texts_whole() {
        let mut script = Script::new("s1", "r1", 0).user("Count to three");
        for (i, word) in ["one", "two", "three"].iter().enumerate() {
            let id = format!("c{i}");
            script = script
                .model(
                    &[
                        Block::Text(&format!("Saying {word}, a longer text than four characters.")),
                        Block::Call(&id, "say", json!({ "word": word })),
                    ],
                    StopReason::ToolUse,
                )
                .act(&[(&id, "say", &[word], false)])
                .observe(&[(&id, "say", word, false)]);
        }
        let events = script
            .model(&[Block::Text("Done.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        let seen = check(&frames, &[]);
        let ids: Vec<&str> = seen.texts.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["r1-0-0", "r1-1-0", "r1-2-0", "r1-3-0"]);
        let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(contents, texts(&events));
        assert_eq!(seen.outputs.len(), 3);
        assert_eq!(of_type(&parts(&frames), "start-step").len(), 4);
    }

    #[test]
    fn a_recorded_run_keeps_every_rule() {
        let events = real_weather_run();
        let frames = encode(&events);
        let seen = check(&frames, &[]);
        let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(contents, texts(&events));
        assert_eq!(seen.reasoning, ["The user wants the weather."]);
        assert_eq!(seen.input_text["call_0_0"], r#"{"text":"Paris: sunny"}"#);
        assert_eq!(seen.outputs["call_0_1"], "2026-11-22T00:09:02Z");
        assert_eq!(
            frames[0].data,
            r#"{"type":"start","messageId":"d1d1f092-f35a-47b4-8010-888be12201dc"}"#
        );
    }

    #[test]
    fn a_stream_cut_inside_a_run_is_closed_by_finish() {
        let mut events = Script::new("s1", "r1", 0).user("hi").events;
        events.push(AgentEvent::MessageStart { role: weft_core::Role::Assistant });
        events.push(AgentEvent::TextStart { index: 0 });
        events.push(AgentEvent::TextDelta { index: 0, delta: "Hal".into() });
        let mut encoder = VercelEncoder::new();
        let mut frames = encode_with(&mut encoder, &events);
        encoder.finish(&mut frames);
        check(&frames, &[]);
        assert_eq!(
            lines(&frames)[frames.len() - 5..],
            [
                r#"{"type":"text-end","id":"r1-m0-0"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"error","errorText":"the event stream ended before the run finished"}"#,
                r#"{"type":"finish","finishReason":"error"}"#,
                "[DONE]",
            ]
        );

        // Taken up mid-run, without `session_start`: still one well-formed message.
        let frames = encode(&[
            AgentEvent::TextDelta { index: 0, delta: "lo".into() },
            AgentEvent::TextEnd { index: 0, text: "Hallo".into() },
        ]);
        check(&frames, &[]);
        assert_eq!(frames[0].data, r#"{"type":"start"}"#);
    }

    #[test]
    fn state_and_progress_events_become_data_parts() {
        let events = Script::new("s1", "r1", 0)
            .user("plan")
            .event(AgentEvent::StateSnapshot { state: json!({"n": 1}) })
            .event(AgentEvent::StateUpdate { name: "plan".into(), state: json!({"n": 2}) })
            .event(AgentEvent::TotEvaluate { chosen: 1, scores: vec![0.5, 0.75] })
            .event(AgentEvent::Checkpoint {
                checkpoint_id: "k1".into(),
                thread_id: "s1".into(),
                checkpoint_ns: "".into(),
                step: 0,
                timestamp: 5,
                state: json!({}),
            })
            .event(AgentEvent::Custom { value: json!({"kind": "ping"}) })
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        check(&frames, &[]);
        let p = parts(&frames);
        assert_eq!(
            p[1..6],
            [
                json!({"type": "data-state", "id": "state", "data": {"n": 1}}),
                json!({"type": "data-state", "id": "state", "data": {"n": 2}}),
                json!({"type": "data-tot_evaluate", "data": {"chosen": 1, "scores": [0.5, 0.75]}}),
                json!({"type": "data-checkpoint", "transient": true, "data": {
                    "checkpointId": "k1", "threadId": "s1", "checkpointNs": "", "step": 0,
                    "timestamp": 5, "state": {}}}),
                json!({"type": "data-custom", "data": {"kind": "ping"}}),
            ]
        );
    }

    #[test]
    fn done_is_sent_once() {
        let mut encoder = VercelEncoder::new();
        let mut out =
            encode_with(&mut encoder, &Script::new("s1", "r1", 0).end(SessionStatus::Completed));
        encoder.finish(&mut out);
        assert_eq!(
            lines(&out),
            [r#"{"type":"start"}"#, r#"{"type":"finish","finishReason":"stop"}"#, "[DONE]"]
        );
    }
}
