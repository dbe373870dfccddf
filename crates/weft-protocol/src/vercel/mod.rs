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
//! | `state_snapshot` | `data-state {id: "state", data: the state, transient: true}` |
//! | `state_update` | `data-updates {data: {name, state}, transient: true}` (what a node changed) |
//! | `checkpoint` | `data-checkpoint {data: its fields, transient: true}` |
//! | `tot_*`, `got_*` | `data-<type> {data: the event's fields, transient: true}` |
//! | `custom` | `data-custom {data: value, transient: true}` |
//!
//! Every `data-*` part is transient: `useChat` hands it to `onData` and never adds it to the
//! message, so a page's history holds only the conversation's own parts (a generic renderer
//! shows no `[data-state]`), and a page that wants Weft's extras reads them in `onData`.
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
//! ## The conversation as UI messages
//!
//! [`ui_messages`] renders a session's conversation as the `UIMessage`s `useChat` restores on
//! load (`GET /api/chat/{id}`): one assistant message per run, its tool parts in the state the
//! session has them.
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
//! `finish` before `[DONE]`. A `session_start` while a run is open (its process died, and the
//! new run recovers it) continues the same message: the open parts and step are closed, and the
//! recovery's steps follow with no `error`, `finish` or second `start` between them. A recovery
//! streamed without the dead run before it (a client resuming after the restart) starts with
//! `messageId` = the id the dead run's answer had (`session_start.recovers`): a page that kept
//! the partial answer has it replaced by the recovered one, not a second message beside it.
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
//!   (the canonical stream does not tell a denial from other error results), unless the server
//!   says which calls the client denied ([`VercelEncoder::client_denied`]).
//! - Empty deltas are not sent.
//!
//! ## What the server knows of the request (`POST /api/chat`)
//!
//! `useChat` keeps the conversation itself and reads the stream as changes to its last
//! assistant message, so what a response may repeat depends on what the request carried. The
//! server says so with these options (none is set by default, as for `?protocol=vercel`):
//!
//! - [`VercelEncoder::client_answered`]: results the client supplied (its client-side tools'
//!   outputs) are not echoed back: their part has its output already.
//! - [`VercelEncoder::client_denied`]: a call the client denied ends as `tool-output-denied`
//!   (the part's `output-denied` state), not as the error result the model sees.
//! - [`VercelEncoder::client_approved`]: a client-side call the client has just approved is
//!   handed to it again as `tool-input-available` when the run then waits for its result: its
//!   part leaves the `approval-responded` state, so `useChat` runs the tool (`onToolCall`)
//!   instead of posting the approval again and again
//!   (`lastAssistantMessageIsCompleteWithApprovalResponses`).
//! - [`VercelEncoder::hold_inputs_until_approval_known`]: a call's `tool-input-available` is
//!   held back until the run says whether the call needs approval. `useChat` runs a client-side
//!   tool as soon as its input is available, so a call waiting for approval gets only its input
//!   stream and `tool-approval-request`, and is handed over once approved. The held inputs go
//!   out before the first event that shows the calls need no approval (a tool's execution, the
//!   wait for client-side results, a tool result, a step's start or end, an error, the run's
//!   end) and at [`Encoder::finish`]; `approval_required` drops the inputs of the calls it names
//!   and sends the others.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use weft_core::{AgentEvent, AssistantMessage, Message, Role, SessionStatus, StopReason, ToolCall};

use crate::{Encoder, Frame, event_fields};

mod messages;

pub use messages::ui_messages;

/// The response header that marks a UI message stream.
pub const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// The stream's terminator, sent by [`Encoder::finish`].
pub const DONE: &str = "[DONE]";

/// The answer to a request the server refuses: one `error {errorText}` part (`useChat` shows it
/// as its error), then `[DONE]`.
pub fn refusal(error_text: &str) -> Vec<Frame> {
    vec![Frame::json(&Part::Error { error_text }), Frame::raw(DONE)]
}

/// The answer to a request that brings nothing to run: an empty stream, `[DONE]` alone.
pub fn empty_stream() -> Vec<Frame> {
    vec![Frame::raw(DONE)]
}

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
    /// Calls whose results the client supplied: their `tool-output-*` is not sent.
    client_answered: HashSet<String>,
    /// Calls the client denied: their error result is sent as `tool-output-denied`.
    client_denied: HashSet<String>,
    /// Calls the client approved: handed to it as `tool-input-available` when the run waits
    /// for their results.
    client_approved: HashSet<String>,
    /// Whether `tool-input-available` waits until the run says whether the call needs approval.
    hold_inputs: bool,
    /// The calls whose `tool-input-available` is held back, in order.
    held: Vec<ToolCall>,
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

    /// Marks calls whose results the client sent in the request (outputs of its client-side
    /// tools): the run re-emits those results, and they are not echoed back as
    /// `tool-output-available` / `tool-output-error`, their part having its output already.
    pub fn client_answered<I, S>(mut self, tool_call_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.client_answered.extend(tool_call_ids.into_iter().map(Into::into));
        self
    }

    /// Marks calls the client denied in the request: the error result the run gives each is
    /// sent as `tool-output-denied {toolCallId}`, so the part ends in `useChat`'s `output-denied`
    /// state. A result the client also answered ([`Self::client_answered`]) is not sent at all.
    pub fn client_denied<I, S>(mut self, tool_call_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.client_denied.extend(tool_call_ids.into_iter().map(Into::into));
        self
    }

    /// Marks calls the client approved in the request: when the run then waits for the result
    /// of one of them (`awaiting_tool_execution`: a client-side tool), it is handed over again as
    /// `tool-input-available`, so its part leaves the `approval-responded` state and `useChat`
    /// runs the tool instead of posting the approval again.
    pub fn client_approved<I, S>(mut self, tool_call_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.client_approved.extend(tool_call_ids.into_iter().map(Into::into));
        self
    }

    /// Whether a call's `tool-input-available` is held back until the run says whether the
    /// call needs approval (default: no). `useChat` runs a client-side tool as soon as its input
    /// is available; held back, a call waiting for approval gets only its input stream and
    /// `tool-approval-request` (see the module's docs for when held inputs go out).
    pub fn hold_inputs_until_approval_known(mut self, hold: bool) -> Self {
        self.hold_inputs = hold;
        self
    }

    /// Sends the held `tool-input-available` parts.
    fn release_inputs(&mut self, out: &mut Vec<Frame>) {
        for call in self.held.drain(..) {
            push(out, &input_available(&call));
        }
    }

    /// Sends the held inputs once `event` shows whether their calls need approval.
    fn release_held(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        match event {
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                self.held.retain(|held| !tool_calls.iter().any(|c| c.id == held.id));
                self.release_inputs(out);
            }
            AgentEvent::ToolExecutionStart { .. }
            | AgentEvent::AwaitingToolExecution { .. }
            | AgentEvent::StepStart { .. }
            | AgentEvent::StepEnd { .. }
            | AgentEvent::SessionEnd { .. }
            | AgentEvent::Error { .. } => self.release_inputs(out),
            AgentEvent::MessageEnd { message } if matches!(**message, Message::ToolResult(_)) => {
                self.release_inputs(out);
            }
            _ => {}
        }
    }

    /// `session_start`: a new run, which takes over a run still open (one it recovers).
    fn session_start(&mut self, run_id: &str, recovers: Option<&String>, out: &mut Vec<Frame>) {
        // A recovery taken up on its own (the dead run's events were not sent) completes
        // the answer the client knows by the dead run's id: the same message, replayed.
        let message_id = self.message_id.take().or_else(|| recovers.cloned());
        let mut next = RunState::new(run_id, message_id);
        if let Some(mut dead) = self.run.take() {
            // A run starts while one is open: the open one's process died and this run
            // recovers it (a run's end is always in the log otherwise). The message goes on:
            // what was open is closed, and the recovery's steps follow in the same message,
            // with no error or finish between them.
            dead.write_start(false, out);
            dead.close_step(out);
            next.start = None;
        }
        self.run = Some(next);
    }

    /// A tool result the model receives: its output, error or denial part.
    fn tool_result(&self, r: &weft_core::ToolResultMessage, out: &mut Vec<Frame>) {
        let id = r.tool_call_id.as_str();
        let text = r.text_content();
        // A result the client supplied is not echoed: its part has it already.
        if !self.client_answered.contains(id) {
            push(
                out,
                &match (r.is_error, self.client_denied.contains(id)) {
                    (true, true) => Part::ToolOutputDenied { tool_call_id: id },
                    (true, false) => Part::ToolOutputError { tool_call_id: id, error_text: &text },
                    (false, _) => Part::ToolOutputAvailable { tool_call_id: id, output: &text },
                },
            );
        }
    }

    /// A call's input is complete: its `tool-input-available`, now or held back.
    fn input_ready(&mut self, tool_call: &ToolCall, out: &mut Vec<Frame>) {
        if self.hold_inputs {
            self.held.push(tool_call.clone());
        } else {
            push(out, &input_available(tool_call));
        }
    }

    /// `awaiting_tool_execution`: the calls the client approved are handed over again.
    fn awaiting_client(&self, tool_calls: &[ToolCall], out: &mut Vec<Frame>) {
        for call in tool_calls.iter().filter(|c| self.client_approved.contains(&c.id)) {
            push(out, &input_available(call));
        }
    }
}

/// `approval_required`: a `tool-approval-request` for each call.
fn approval_requests(tool_calls: &[ToolCall], out: &mut Vec<Frame>) {
    for call in tool_calls {
        push(out, &Part::ToolApprovalRequest { approval_id: &call.id, tool_call_id: &call.id });
    }
}

impl Encoder for VercelEncoder {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        // Held inputs go out once the run shows whether their calls need approval.
        self.release_held(event, out);
        if let AgentEvent::SessionStart { run_id, recovers, .. } = event {
            self.session_start(run_id, recovers.as_deref(), out);
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
                Message::ToolResult(r) => self.tool_result(r, out),
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
            AgentEvent::ToolcallEnd { index, tool_call } => {
                run.call_end(*index, tool_call);
                self.input_ready(tool_call, out);
            }
            AgentEvent::ToolExecutionDelta { tool_call_id, delta } => {
                let data = json!({ "toolCallId": tool_call_id, "delta": delta });
                push_data(out, "data-tool-output", None, &data, true);
            }
            AgentEvent::ToolExecutionStart { .. } | AgentEvent::ToolExecutionEnd { .. } => {}
            AgentEvent::ApprovalRequired { tool_calls, .. } => approval_requests(tool_calls, out),
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => {
                self.awaiting_client(tool_calls, out);
            }
            AgentEvent::NodeEnter { .. } | AgentEvent::NodeExit { .. } => {}
            AgentEvent::StateSnapshot { state } => {
                push_data(out, "data-state", Some("state"), state, true);
            }
            AgentEvent::StateUpdate { name, state } => {
                let update = serde_json::json!({ "name": name, "state": state });
                push_data(out, "data-updates", None, &update, true);
            }
            AgentEvent::Checkpoint { .. } => {
                push_data(out, "data-checkpoint", None, &event_fields(event), true);
            }
            AgentEvent::Custom { value } => push_data(out, "data-custom", None, value, true),
            AgentEvent::Progress(_) => {
                let kind = format!("data-{}", event.kind());
                push_data(out, &kind, None, &event_fields(event), true);
            }
            AgentEvent::Error { error, message } => run.error(error, message.as_deref(), out),
        }
    }

    fn finish(&mut self, out: &mut Vec<Frame>) {
        self.release_inputs(out);
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
    /// `error`: an `error` part unless aborted or sent already; the first is the run's failure.
    fn error(&mut self, error: &str, message: Option<&Message>, out: &mut Vec<Frame>) {
        let aborted = matches!(
            message,
            Some(Message::Assistant(m)) if m.stop_reason == StopReason::Aborted
        );
        if !aborted && !self.error_sent {
            push(out, &Part::Error { error_text: error });
            self.error_sent = true;
        }
        self.failure.get_or_insert_with(|| error.to_owned());
    }

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

    /// A call's input is complete (its `tool-input-available` is the encoder's to send).
    fn call_end(&mut self, index: u32, call: &ToolCall) {
        if let Some(Open::Call(_)) = self.blocks.get(&index) {
            self.blocks.remove(&index);
        } else {
            self.calls.push((call.id.clone(), call.name.clone()));
        }
    }

    fn assistant_end(&mut self, message: &AssistantMessage, out: &mut Vec<Frame>) {
        self.close_blocks(out);
        self.scope.clear();
        if !message.stop_reason.is_failure() {
            return;
        }
        let why = message.failure_text().to_string();
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
    fn end(mut self, status: SessionStatus, messages: &[Arc<Message>], out: &mut Vec<Frame>) {
        self.close_step(out);
        match status {
            SessionStatus::Aborted => push(out, &Part::Abort),
            SessionStatus::Error if !self.error_sent => {
                let text = self
                    .failure
                    .take()
                    .or_else(|| crate::last_error_message(messages))
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

/// `tool-input-available` of `call`.
fn input_available(call: &ToolCall) -> Part<'_> {
    Part::ToolInputAvailable {
        tool_call_id: &call.id,
        tool_name: &call.name,
        input: &call.arguments,
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
fn finish_reason(status: SessionStatus, messages: &[Arc<Message>]) -> &'static str {
    match status {
        SessionStatus::Completed => {
            let last = messages.iter().rev().find_map(|m| match &**m {
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
    ToolOutputDenied {
        tool_call_id: &'a str,
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
mod tests;
