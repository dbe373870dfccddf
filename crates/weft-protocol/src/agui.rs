//! AG-UI: the canonical events as [AG-UI](https://docs.ag-ui.com) events, for `POST /api/ag-ui`
//! and `?protocol=ag-ui`.
//!
//! Each frame is one AG-UI event: a JSON object with a `type` in SCREAMING_SNAKE_CASE and
//! camelCase fields, sent as one SSE `data:` line. There is no terminator beyond the run's own
//! `RUN_FINISHED` or `RUN_ERROR`.
//!
//! # Source
//!
//! Followed: the AG-UI specification 1.1 (`docs/spec/1.1` of `ag-ui-protocol/ag-ui`: *Runs and
//! Steps* (`events/lifecycle.mdx`), *Tool Calls* (`events/tool-calls.mdx`), *Reasoning*,
//! *Interrupts and Resume* (`basic/patterns/interrupt-resume.mdx`) and the generated *Schema
//! Reference*, `schema.mdx` from `ag-ui.com/spec/1.1/schema.json`), cross-checked against the
//! zod schemas of `@ag-ui/core` (`sdks/typescript/packages/core`) and the *Interrupts* concept
//! page (`docs/concepts/interrupts.mdx`, its `reason` taxonomy). `THINKING_*` are the deprecated
//! spellings of `REASONING_*` (removed in `@ag-ui/core` 1.0.0); only `REASONING_*` is sent.
//!
//! # Mapping
//!
//! | canonical | AG-UI |
//! | --- | --- |
//! | `session_start` | `RUN_STARTED {threadId: session id, runId}` |
//! | `node_enter` / `node_exit` | `STEP_STARTED` / `STEP_FINISHED {stepName: node name}` |
//! | `text_start` / `_delta` / `_end` | `TEXT_MESSAGE_START {messageId, role: "assistant"}` / `_CONTENT {messageId, delta}` / `_END` |
//! | `thinking_start` / `_delta` / `_end` | `REASONING_START`, `REASONING_MESSAGE_START {role: "reasoning"}` / `REASONING_MESSAGE_CONTENT` / `REASONING_MESSAGE_END`, `REASONING_ENCRYPTED_VALUE` (the signature, if any), `REASONING_END` |
//! | `toolcall_start` / `_delta` / `_end` | `TOOL_CALL_START {toolCallId, toolCallName, parentMessageId}` / `TOOL_CALL_ARGS {toolCallId, delta}` / `TOOL_CALL_END` |
//! | `message_end` of a `toolResult` | `TOOL_CALL_RESULT {messageId, toolCallId, content, role: "tool"}` |
//! | `tool_execution_delta` | `CUSTOM {name: "tool_output", value: {toolCallId, delta}}` |
//! | `state_snapshot`, `state_update` | `STATE_SNAPSHOT {snapshot}` |
//! | `checkpoint`, `tot_*`, `got_*` | `CUSTOM {name: the canonical type, value: the event's fields}` |
//! | `custom` | `CUSTOM {name: "custom", value}` |
//! | `session_end` | `RUN_FINISHED` or `RUN_ERROR` (below) |
//!
//! Not sent (they have no AG-UI counterpart and their content reaches the client otherwise):
//! `message_start`, the user's `message_end` (the client sent that message), the assistant's
//! `message_end` (its blocks were streamed), `step_start` / `step_end`, `tool_execution_start` /
//! `_end` (the result arrives as `TOOL_CALL_RESULT`), `awaiting_tool_execution`,
//! `approval_required` and `error` (all three are folded into the run's last event).
//!
//! ## Ids
//!
//! Ids are derived from the canonical stream, so the same stream always gives the same frames.
//! The assistant message of step `n` of run `R` is `R-n`; its first text block carries that id,
//! any later text block `R-n-<index>` (`index`: the block's position in the message). A tool
//! call's `parentMessageId` is the id of the last text message before it in the same assistant
//! message, or `R-n` when no text came first. A thinking block is the reasoning message
//! `R-n-<index>` inside the span `R-n-reasoning-<index>`. A tool result is the tool message
//! `R-result-<toolCallId>`.
//!
//! ## How a run ends
//!
//! Everything the run opened (text and reasoning messages, tool calls, steps) is closed first,
//! then, by the run's status:
//!
//! - `completed`: `RUN_FINISHED {outcome: {type: "success"}}`.
//! - `awaiting_tool_execution`: the calls the client must run were streamed as `TOOL_CALL_*`
//!   without a result; `RUN_FINISHED {outcome: {type: "success", pendingToolCallIds}}`, as the
//!   spec's *frontend tools* rules ask (a run that stops on a client-side tool call is a completed
//!   run, never an interrupted one). The client answers in its next `RunAgentInput` with one
//!   `tool` message per call.
//! - `awaiting_approval`: `RUN_FINISHED {outcome: {type: "interrupt", interrupts}}`, one
//!   interrupt per call: `{id: toolCallId, reason: "tool_call", toolCallId, message,
//!   responseSchema: {approved: boolean, reason?: string}, metadata: {toolName, arguments}}`.
//!   The client resumes with `resume: [{interruptId, status, payload: {approved, reason?}}]`.
//!   Calls that wait for a remote result at the same time are not listed: per the spec a client
//!   derives them from the stream.
//! - `aborted` and `max_turns`: `RUN_FINISHED {outcome: {type: "cancelled"}}`, the spec's outcome
//!   for a run "stopped on purpose before it completes — by the person it is running for, by the
//!   application's own code, by a limit the producer enforces".
//! - `error`: `RUN_ERROR {message, code: "error"}`, `message` being the failure the run reported
//!   (the `error` event, else the failed assistant message's `errorMessage`). `RUN_ERROR` is
//!   terminal: no `RUN_FINISHED` follows.
//!
//! `RUN_FINISHED` and `RUN_ERROR` carry `usage`: one `TokenUsage` per provider and model of the
//! run's assistant messages, in the spec's accounting (`inputTokens` includes cached reads and
//! writes; `outputTokens` includes reasoning).
//!
//! If the stream ends inside a run (no `session_end`), [`Encoder::finish`] closes what is open
//! and sends `RUN_ERROR {code: "incomplete"}`.
//!
//! ## Choices where the formats differ
//!
//! - Local tool output deltas have no AG-UI event: they go out as `CUSTOM` `tool_output` so a UI
//!   can show a tool's progress; the whole output follows in `TOOL_CALL_RESULT`.
//! - `state_update` carries the whole state after the merge, so it is sent as a `STATE_SNAPSHOT`
//!   (which replaces the state) rather than a JSON Patch `STATE_DELTA`.
//! - `TOOL_CALL_RESULT.content` is the result's text (text blocks joined); AG-UI's result event has
//!   no error flag, so an error result's text is its content.
//! - A result the client itself supplied (the answer to a remote call) is not echoed as
//!   `TOOL_CALL_RESULT`: the event would mint a second tool message for a call the client has
//!   already answered. The encoder knows such calls from an `awaiting_tool_execution` it encoded
//!   earlier, or from [`AgUiEncoder::client_answered`] (what the server received in the run's
//!   input).
//! - Empty text and reasoning deltas are not sent (`@ag-ui/core` before 1.0 rejects an empty
//!   `TEXT_MESSAGE_CONTENT.delta`).
//! - Events outside a run (before `session_start` or after `session_end`) cannot be expressed:
//!   every AG-UI event but `RUN_ERROR` belongs to a run opened by `RUN_STARTED`, which needs the
//!   run's ids. They produce no frame.
//! - Compatibility: `pendingToolCallIds` and the `cancelled` outcome are spec 1.0/1.1 fields; the
//!   strict outcome schema of `@ag-ui/core` 0.0.x rejects them.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::{Value, json};
use weft_core::{
    AgentEvent, AssistantMessage, Message, Role, SessionStatus, ToolCall, ToolResultMessage,
};

use crate::{Encoder, Frame};

/// Renders canonical events as AG-UI events. One encoder serves one stream: one run, or several
/// runs of a session in order.
#[derive(Debug, Default)]
pub struct AgUiEncoder {
    /// The run being encoded, between `session_start` and `session_end`.
    run: Option<RunState>,
    /// Calls whose results the client supplied: their `TOOL_CALL_RESULT` is not sent.
    client_answered: HashSet<String>,
}

impl AgUiEncoder {
    /// An encoder for a new stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks calls whose results the client sent in this run's input (the tool messages of its
    /// `RunAgentInput`): the run re-emits those results as `toolResult` messages, and they are
    /// not echoed back as `TOOL_CALL_RESULT`.
    pub fn client_answered<I, S>(mut self, tool_call_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.client_answered.extend(tool_call_ids.into_iter().map(Into::into));
        self
    }
}

impl Encoder for AgUiEncoder {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        if let AgentEvent::SessionStart { session_id, run_id, .. } = event {
            if let Some(run) = self.run.take() {
                run.fail_incomplete(out);
            }
            push(out, &Ev::RunStarted { thread_id: session_id, run_id });
            self.run = Some(RunState::new(session_id, run_id));
            return;
        }
        let Some(run) = self.run.as_mut() else {
            return;
        };
        match event {
            AgentEvent::SessionStart { .. } => {}
            AgentEvent::SessionEnd { status, messages, .. } => {
                if let Some(run) = self.run.take() {
                    run.end(*status, messages, out);
                }
            }
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => {
                for call in tool_calls {
                    self.client_answered.insert(call.id.clone());
                    run.pending.push(call.id.clone());
                }
            }
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                run.approvals.extend(tool_calls.iter().cloned());
            }
            AgentEvent::NodeEnter { name, node_id } => run.step_started(name, node_id, out),
            AgentEvent::NodeExit { node_id, error, .. } => {
                if let Some(error) = error {
                    run.failure.get_or_insert_with(|| error.clone());
                }
                run.step_finished(node_id, out);
            }
            AgentEvent::StepStart { step_index, .. } => run.next_step = Some(*step_index),
            AgentEvent::StepEnd { .. } => {}
            AgentEvent::MessageStart { role } => {
                if *role == Role::Assistant {
                    run.new_message(out);
                }
            }
            AgentEvent::MessageEnd { message } => match message.as_ref() {
                Message::Assistant(m) => run.assistant_end(m, out),
                Message::ToolResult(r) => {
                    if !self.client_answered.contains(&r.tool_call_id) {
                        run.tool_result(r, out);
                    }
                }
                Message::User(_) => {}
            },
            AgentEvent::TextStart { index } => {
                run.text_start(*index, out);
            }
            AgentEvent::TextDelta { index, delta } => run.text_delta(*index, delta, out),
            AgentEvent::TextEnd { index, text } => run.text_end(*index, text, out),
            AgentEvent::ThinkingStart { index } => {
                run.thinking_start(*index, out);
            }
            AgentEvent::ThinkingDelta { index, delta } => run.thinking_delta(*index, delta, out),
            AgentEvent::ThinkingEnd { index, thinking, signature } => {
                run.thinking_end(*index, thinking, signature.as_deref(), out);
            }
            AgentEvent::ToolcallStart { index, id, name } => run.call_start(*index, id, name, out),
            AgentEvent::ToolcallDelta { index, delta } => run.call_delta(*index, delta, out),
            AgentEvent::ToolcallEnd { index, tool_call } => run.call_end(*index, tool_call, out),
            AgentEvent::ToolExecutionStart { .. } | AgentEvent::ToolExecutionEnd { .. } => {}
            AgentEvent::ToolExecutionDelta { tool_call_id, delta } => {
                let value = json!({ "toolCallId": tool_call_id, "delta": delta });
                push(out, &Ev::Custom { name: "tool_output", value: &value });
            }
            AgentEvent::StateSnapshot { state } | AgentEvent::StateUpdate { state, .. } => {
                push(out, &Ev::StateSnapshot { snapshot: state });
            }
            AgentEvent::Custom { value } => push(out, &Ev::Custom { name: "custom", value }),
            AgentEvent::Checkpoint { .. }
            | AgentEvent::TotExpand { .. }
            | AgentEvent::TotEvaluate { .. }
            | AgentEvent::TotBacktrack { .. }
            | AgentEvent::GotPlan { .. }
            | AgentEvent::GotNodeStart { .. }
            | AgentEvent::GotNodeComplete { .. }
            | AgentEvent::GotNodeFailed { .. }
            | AgentEvent::GotExpand { .. } => {
                let value = fields(event);
                push(out, &Ev::Custom { name: event.kind(), value: &value });
            }
            AgentEvent::Error { error, .. } => {
                run.failure.get_or_insert_with(|| error.clone());
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<Frame>) {
        if let Some(run) = self.run.take() {
            run.fail_incomplete(out);
        }
    }
}

/// One run being encoded.
#[derive(Debug)]
struct RunState {
    thread_id: String,
    run_id: String,
    /// The step index announced by `step_start`, for the next assistant message's id.
    next_step: Option<u32>,
    /// Assistant messages begun, for ids when no step index is known.
    assistant_count: u32,
    /// The assistant message being streamed.
    message: Option<MessageState>,
    /// Open AG-UI steps: (node id, step name), in opening order.
    steps: Vec<(String, String)>,
    /// The first failure the run reported.
    failure: Option<String>,
    /// Calls left for the client (`awaiting_tool_execution`).
    pending: Vec<String>,
    /// Calls waiting for approval (`approval_required`).
    approvals: Vec<ToolCall>,
}

/// The assistant message being streamed and its open blocks.
#[derive(Debug)]
struct MessageState {
    /// `R-n`.
    id: String,
    /// Whether `id` itself is taken (by a text message, or as a tool call's parent).
    id_used: bool,
    /// The parent for the next tool call: the last text message so far.
    anchor: Option<String>,
    /// Open blocks by index.
    blocks: BTreeMap<u32, Block>,
}

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking { message_id: String, span_id: String },
    Call(String),
}

impl MessageState {
    fn new(id: String) -> Self {
        Self { id, id_used: false, anchor: None, blocks: BTreeMap::new() }
    }
}

/// The id of a run's next assistant message: `R-n` for step `n`, `R-m<k>` for the `k`-th message
/// when no step index was announced.
fn message_id(run_id: &str, next_step: &mut Option<u32>, count: &mut u32) -> String {
    let id = match next_step.take() {
        Some(step) => format!("{run_id}-{step}"),
        None => format!("{run_id}-m{count}"),
    };
    *count += 1;
    id
}

impl RunState {
    fn new(thread_id: &str, run_id: &str) -> Self {
        Self {
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            next_step: None,
            assistant_count: 0,
            message: None,
            steps: Vec::new(),
            failure: None,
            pending: Vec::new(),
            approvals: Vec::new(),
        }
    }

    /// Begins a new assistant message, closing what the previous one left open.
    fn new_message(&mut self, out: &mut Vec<Frame>) {
        self.close_message(out);
        let id = message_id(&self.run_id, &mut self.next_step, &mut self.assistant_count);
        self.message = Some(MessageState::new(id));
    }

    /// The current assistant message (begun now if content arrives without `message_start`).
    fn message(&mut self) -> &mut MessageState {
        let (run_id, next_step, count) =
            (&self.run_id, &mut self.next_step, &mut self.assistant_count);
        self.message.get_or_insert_with(|| MessageState::new(message_id(run_id, next_step, count)))
    }

    /// Closes the open blocks of the current message, in index order, and forgets it.
    fn close_message(&mut self, out: &mut Vec<Frame>) {
        if let Some(message) = self.message.take() {
            for block in message.blocks.into_values() {
                close_block(&block, out);
            }
        }
    }

    fn text_start(&mut self, index: u32, out: &mut Vec<Frame>) -> String {
        let message = self.message();
        if let Some(old) = message.blocks.remove(&index) {
            close_block(&old, out);
        }
        let id = if message.id_used {
            format!("{}-{index}", message.id)
        } else {
            message.id_used = true;
            message.id.clone()
        };
        message.anchor = Some(id.clone());
        message.blocks.insert(index, Block::Text(id.clone()));
        push(out, &Ev::TextMessageStart { message_id: &id, role: "assistant" });
        id
    }

    fn open_text(&self, index: u32) -> Option<String> {
        match self.message.as_ref()?.blocks.get(&index)? {
            Block::Text(id) => Some(id.clone()),
            _ => None,
        }
    }

    fn text_delta(&mut self, index: u32, delta: &str, out: &mut Vec<Frame>) {
        let id = match self.open_text(index) {
            Some(id) => id,
            None => self.text_start(index, out),
        };
        if !delta.is_empty() {
            push(out, &Ev::TextMessageContent { message_id: &id, delta });
        }
    }

    fn text_end(&mut self, index: u32, text: &str, out: &mut Vec<Frame>) {
        if self.open_text(index).is_none() {
            // The start was not seen (a stream taken up mid-block): send the whole text.
            let id = self.text_start(index, out);
            if !text.is_empty() {
                push(out, &Ev::TextMessageContent { message_id: &id, delta: text });
            }
        }
        if let Some(block) = self.message.as_mut().and_then(|m| m.blocks.remove(&index)) {
            close_block(&block, out);
        }
    }

    fn thinking_start(&mut self, index: u32, out: &mut Vec<Frame>) -> String {
        let message = self.message();
        if let Some(old) = message.blocks.remove(&index) {
            close_block(&old, out);
        }
        let message_id = format!("{}-{index}", message.id);
        let span_id = format!("{}-reasoning-{index}", message.id);
        push(out, &Ev::ReasoningStart { message_id: &span_id });
        push(out, &Ev::ReasoningMessageStart { message_id: &message_id, role: "reasoning" });
        message.blocks.insert(index, Block::Thinking { message_id: message_id.clone(), span_id });
        message_id
    }

    fn open_thinking(&self, index: u32) -> Option<String> {
        match self.message.as_ref()?.blocks.get(&index)? {
            Block::Thinking { message_id, .. } => Some(message_id.clone()),
            _ => None,
        }
    }

    fn thinking_delta(&mut self, index: u32, delta: &str, out: &mut Vec<Frame>) {
        let id = match self.open_thinking(index) {
            Some(id) => id,
            None => self.thinking_start(index, out),
        };
        if !delta.is_empty() {
            push(out, &Ev::ReasoningMessageContent { message_id: &id, delta });
        }
    }

    fn thinking_end(
        &mut self,
        index: u32,
        thinking: &str,
        signature: Option<&str>,
        out: &mut Vec<Frame>,
    ) {
        if self.open_thinking(index).is_none() {
            let id = self.thinking_start(index, out);
            if !thinking.is_empty() {
                push(out, &Ev::ReasoningMessageContent { message_id: &id, delta: thinking });
            }
        }
        let Some(Block::Thinking { message_id, span_id }) =
            self.message.as_mut().and_then(|m| m.blocks.remove(&index))
        else {
            return;
        };
        push(out, &Ev::ReasoningMessageEnd { message_id: &message_id });
        if let Some(signature) = signature {
            push(
                out,
                &Ev::ReasoningEncryptedValue {
                    subtype: "message",
                    entity_id: &message_id,
                    encrypted_value: signature,
                },
            );
        }
        push(out, &Ev::ReasoningEnd { message_id: &span_id });
    }

    fn call_start(&mut self, index: u32, id: &str, name: &str, out: &mut Vec<Frame>) {
        let message = self.message();
        if let Some(old) = message.blocks.remove(&index) {
            close_block(&old, out);
        }
        let parent = match &message.anchor {
            Some(anchor) => anchor.clone(),
            None => {
                message.id_used = true;
                message.anchor = Some(message.id.clone());
                message.id.clone()
            }
        };
        message.blocks.insert(index, Block::Call(id.to_string()));
        push(
            out,
            &Ev::ToolCallStart {
                tool_call_id: id,
                tool_call_name: name,
                parent_message_id: &parent,
            },
        );
    }

    fn open_call(&self, index: u32) -> Option<String> {
        match self.message.as_ref()?.blocks.get(&index)? {
            Block::Call(id) => Some(id.clone()),
            _ => None,
        }
    }

    fn call_delta(&mut self, index: u32, delta: &str, out: &mut Vec<Frame>) {
        // A delta for a call whose start was not seen cannot be attributed: it is skipped, and
        // the call's whole arguments go out at its `toolcall_end`.
        if let Some(id) = self.open_call(index)
            && !delta.is_empty()
        {
            push(out, &Ev::ToolCallArgs { tool_call_id: &id, delta });
        }
    }

    fn call_end(&mut self, index: u32, call: &ToolCall, out: &mut Vec<Frame>) {
        if self.open_call(index).as_deref() != Some(call.id.as_str()) {
            self.call_start(index, &call.id, &call.name, out);
            let args = arguments_text(&call.arguments);
            push(out, &Ev::ToolCallArgs { tool_call_id: &call.id, delta: &args });
        }
        if let Some(block) = self.message.as_mut().and_then(|m| m.blocks.remove(&index)) {
            close_block(&block, out);
        }
    }

    fn assistant_end(&mut self, message: &AssistantMessage, out: &mut Vec<Frame>) {
        self.close_message(out);
        if message.stop_reason.is_failure() {
            let why = message.error_message.clone();
            self.failure
                .get_or_insert_with(|| why.unwrap_or_else(|| "the model call failed".into()));
        }
    }

    fn tool_result(&mut self, result: &ToolResultMessage, out: &mut Vec<Frame>) {
        let message_id = format!("{}-result-{}", self.run_id, result.tool_call_id);
        let content = result.text_content();
        push(
            out,
            &Ev::ToolCallResult {
                message_id: &message_id,
                tool_call_id: &result.tool_call_id,
                content: &content,
                role: "tool",
            },
        );
    }

    fn step_started(&mut self, name: &str, node_id: &str, out: &mut Vec<Frame>) {
        // Step names must be unique among open steps; concurrent nodes of the same name (graph
        // modes) are told apart by their node id.
        let step_name = if self.steps.iter().any(|(_, open)| open == name) {
            format!("{name}:{node_id}")
        } else {
            name.to_string()
        };
        push(out, &Ev::StepStarted { step_name: &step_name });
        self.steps.push((node_id.to_string(), step_name));
    }

    fn step_finished(&mut self, node_id: &str, out: &mut Vec<Frame>) {
        if let Some(i) = self.steps.iter().rposition(|(id, _)| id == node_id) {
            let (_, step_name) = self.steps.remove(i);
            push(out, &Ev::StepFinished { step_name: &step_name });
        }
    }

    /// Closes everything the run opened: blocks, then steps (innermost first).
    fn close_all(&mut self, out: &mut Vec<Frame>) {
        self.close_message(out);
        while let Some((_, step_name)) = self.steps.pop() {
            push(out, &Ev::StepFinished { step_name: &step_name });
        }
    }

    /// The run's last event, by its status.
    fn end(mut self, status: SessionStatus, messages: &[Message], out: &mut Vec<Frame>) {
        self.close_all(out);
        let usage = token_usage(messages);
        let outcome = match status {
            SessionStatus::Error => {
                let message = self
                    .failure
                    .take()
                    .or_else(|| last_error_message(messages))
                    .unwrap_or_else(|| "the run failed".to_string());
                push(out, &Ev::RunError { message: &message, code: "error", usage });
                return;
            }
            SessionStatus::Aborted | SessionStatus::MaxTurns => Outcome::Cancelled,
            SessionStatus::AwaitingApproval if !self.approvals.is_empty() => {
                Outcome::Interrupt { interrupts: self.approvals.iter().map(interrupt).collect() }
            }
            SessionStatus::AwaitingToolExecution | SessionStatus::AwaitingApproval => {
                Outcome::Success { pending_tool_call_ids: self.pending.clone() }
            }
            SessionStatus::Completed | SessionStatus::Idle | SessionStatus::Running => {
                Outcome::Success { pending_tool_call_ids: Vec::new() }
            }
        };
        push(
            out,
            &Ev::RunFinished {
                thread_id: &self.thread_id,
                run_id: &self.run_id,
                outcome: Some(outcome),
                usage,
            },
        );
    }

    /// Ends a run whose `session_end` never came.
    fn fail_incomplete(mut self, out: &mut Vec<Frame>) {
        self.close_all(out);
        push(
            out,
            &Ev::RunError {
                message: "the event stream ended before the run finished",
                code: "incomplete",
                usage: Vec::new(),
            },
        );
    }
}

fn close_block(block: &Block, out: &mut Vec<Frame>) {
    match block {
        Block::Text(id) => push(out, &Ev::TextMessageEnd { message_id: id }),
        Block::Thinking { message_id, span_id } => {
            push(out, &Ev::ReasoningMessageEnd { message_id });
            push(out, &Ev::ReasoningEnd { message_id: span_id });
        }
        Block::Call(id) => push(out, &Ev::ToolCallEnd { tool_call_id: id }),
    }
}

/// An approval request as an AG-UI interrupt.
fn interrupt(call: &ToolCall) -> Interrupt<'_> {
    Interrupt {
        id: &call.id,
        reason: "tool_call",
        message: format!("Approve the call to {}?", call.name),
        tool_call_id: &call.id,
        response_schema: json!({
            "type": "object",
            "properties": {
                "approved": { "type": "boolean" },
                "reason": { "type": "string", "description": "Why, shown to the model on a denial" }
            },
            "required": ["approved"]
        }),
        metadata: json!({ "toolName": call.name, "arguments": call.arguments }),
    }
}

/// The run's usage, one entry per provider and model, in AG-UI's accounting.
fn token_usage(messages: &[Message]) -> Vec<TokenUsage<'_>> {
    let mut entries: Vec<TokenUsage<'_>> = Vec::new();
    for message in messages {
        let Message::Assistant(m) = message else { continue };
        let u = m.usage;
        let entry =
            match entries.iter_mut().find(|e| e.provider == m.provider && e.model == m.model) {
                Some(entry) => entry,
                None => {
                    entries.push(TokenUsage {
                        provider: &m.provider,
                        model: &m.model,
                        input_tokens: 0,
                        output_tokens: 0,
                        total_tokens: 0,
                        reasoning_tokens: None,
                        cached_input_tokens: 0,
                        cache_write_input_tokens: 0,
                    });
                    let last = entries.len() - 1;
                    &mut entries[last]
                }
            };
        let input = u.input + u.cache_read + u.cache_write;
        entry.input_tokens += input;
        entry.output_tokens += u.output;
        entry.total_tokens += input + u.output;
        entry.cached_input_tokens += u.cache_read;
        entry.cache_write_input_tokens += u.cache_write;
        if let Some(reasoning) = u.reasoning {
            *entry.reasoning_tokens.get_or_insert(0) += reasoning;
        }
    }
    entries
}

fn last_error_message(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) if a.stop_reason.is_failure() => a.error_message.clone(),
        _ => None,
    })
}

/// A tool call's arguments as the text a model would have streamed.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        // Arguments that were not valid JSON are kept as a string of the raw text.
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The event's JSON fields, without its `type` tag.
fn fields(event: &AgentEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("type");
    }
    value
}

fn push(out: &mut Vec<Frame>, event: &Ev<'_>) {
    out.push(Frame::json(event));
}

/// The AG-UI events this encoder sends.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", rename_all_fields = "camelCase")]
enum Ev<'a> {
    RunStarted {
        thread_id: &'a str,
        run_id: &'a str,
    },
    RunFinished {
        thread_id: &'a str,
        run_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<Outcome<'a>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        usage: Vec<TokenUsage<'a>>,
    },
    RunError {
        message: &'a str,
        code: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        usage: Vec<TokenUsage<'a>>,
    },
    StepStarted {
        step_name: &'a str,
    },
    StepFinished {
        step_name: &'a str,
    },
    TextMessageStart {
        message_id: &'a str,
        role: &'a str,
    },
    TextMessageContent {
        message_id: &'a str,
        delta: &'a str,
    },
    TextMessageEnd {
        message_id: &'a str,
    },
    ReasoningStart {
        message_id: &'a str,
    },
    ReasoningMessageStart {
        message_id: &'a str,
        role: &'a str,
    },
    ReasoningMessageContent {
        message_id: &'a str,
        delta: &'a str,
    },
    ReasoningMessageEnd {
        message_id: &'a str,
    },
    ReasoningEncryptedValue {
        subtype: &'a str,
        entity_id: &'a str,
        encrypted_value: &'a str,
    },
    ReasoningEnd {
        message_id: &'a str,
    },
    ToolCallStart {
        tool_call_id: &'a str,
        tool_call_name: &'a str,
        parent_message_id: &'a str,
    },
    ToolCallArgs {
        tool_call_id: &'a str,
        delta: &'a str,
    },
    ToolCallEnd {
        tool_call_id: &'a str,
    },
    ToolCallResult {
        message_id: &'a str,
        tool_call_id: &'a str,
        content: &'a str,
        role: &'a str,
    },
    StateSnapshot {
        snapshot: &'a Value,
    },
    Custom {
        name: &'a str,
        value: &'a Value,
    },
}

/// `RunFinishedOutcome`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase", rename_all_fields = "camelCase")]
enum Outcome<'a> {
    Success {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pending_tool_call_ids: Vec<String>,
    },
    Interrupt {
        interrupts: Vec<Interrupt<'a>>,
    },
    Cancelled,
}

/// `Interrupt`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Interrupt<'a> {
    id: &'a str,
    reason: &'a str,
    message: String,
    tool_call_id: &'a str,
    response_schema: Value,
    metadata: Value,
}

/// `TokenUsage`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenUsage<'a> {
    provider: &'a str,
    model: &'a str,
    input_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_tokens: Option<u64>,
    cached_input_tokens: u64,
    cache_write_input_tokens: u64,
}

/// Canonical event sequences for this crate's tests, built in the order the agent emits them
/// (see `weft_core::event`), and a real stream recorded from `weft run`.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::Value;
    use weft_core::{
        AgentEvent, AgentStep, AssistantContent, AssistantMessage, Message, Role, SessionStatus,
        StepAnnotations, StopReason, TextContent, ThinkingContent, ToolCall, ToolResultMessage,
        Usage, UserMessage,
    };

    /// One block of a scripted assistant message.
    pub(crate) enum Block<'a> {
        /// Thinking, with an optional signature.
        Think(&'a str, Option<&'a str>),
        /// Text.
        Text(&'a str),
        /// A tool call: id, name, arguments.
        Call(&'a str, &'a str, Value),
    }

    /// Builds one run's canonical events.
    pub(crate) struct Script {
        session: String,
        step: u32,
        chunk: usize,
        open_step: Option<AgentStep>,
        /// The events so far.
        pub(crate) events: Vec<AgentEvent>,
        messages: Vec<Message>,
    }

    fn chunks(text: &str, size: usize) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        chars.chunks(size.max(1)).map(|c| c.iter().collect()).collect()
    }

    impl Script {
        /// `session_start` of run `run` of session `session`; the run's first step is `step`.
        pub(crate) fn new(session: &str, run: &str, step: u32) -> Self {
            let events = vec![AgentEvent::SessionStart {
                session_id: session.into(),
                run_id: run.into(),
                agent: "react".into(),
            }];
            Self {
                session: session.into(),
                step,
                chunk: 4,
                open_step: None,
                events,
                messages: Vec::new(),
            }
        }

        /// The user's message.
        pub(crate) fn user(mut self, text: &str) -> Self {
            let mut m = UserMessage::text(text);
            m.timestamp = 1;
            self.events.push(AgentEvent::MessageStart { role: Role::User });
            self.events.push(AgentEvent::MessageEnd { message: Box::new(m.clone().into()) });
            self.messages.push(m.into());
            self
        }

        /// One model call (the think node), its blocks streamed in chunks of 4 characters. A
        /// failed stop reason adds the `error` event and ends the step, as the agent does.
        pub(crate) fn model(mut self, blocks: &[Block<'_>], stop: StopReason) -> Self {
            let node_id = format!("think-{}", self.step);
            self.events
                .push(AgentEvent::NodeEnter { name: "think".into(), node_id: node_id.clone() });
            self.events.push(AgentEvent::StepStart {
                step_id: format!("step-{}", self.step),
                step_index: self.step,
            });
            self.events.push(AgentEvent::MessageStart { role: Role::Assistant });
            let mut m = AssistantMessage::empty("faux", "faux-1");
            m.timestamp = 1;
            m.usage = Usage::new(10, 5, 2, 0);
            for (i, block) in blocks.iter().enumerate() {
                let index = u32::try_from(i).unwrap_or(u32::MAX);
                match block {
                    Block::Text(text) => {
                        self.events.push(AgentEvent::TextStart { index });
                        for delta in chunks(text, self.chunk) {
                            self.events.push(AgentEvent::TextDelta { index, delta });
                        }
                        self.events.push(AgentEvent::TextEnd { index, text: text.to_string() });
                        m.content
                            .push(AssistantContent::Text(TextContent { text: text.to_string() }));
                    }
                    Block::Think(thinking, signature) => {
                        self.events.push(AgentEvent::ThinkingStart { index });
                        for delta in chunks(thinking, self.chunk) {
                            self.events.push(AgentEvent::ThinkingDelta { index, delta });
                        }
                        self.events.push(AgentEvent::ThinkingEnd {
                            index,
                            thinking: thinking.to_string(),
                            signature: signature.map(str::to_string),
                        });
                        m.content.push(AssistantContent::Thinking(ThinkingContent {
                            thinking: thinking.to_string(),
                            signature: signature.map(str::to_string),
                        }));
                    }
                    Block::Call(id, name, arguments) => {
                        self.events.push(AgentEvent::ToolcallStart {
                            index,
                            id: id.to_string(),
                            name: name.to_string(),
                        });
                        for delta in chunks(&arguments.to_string(), 5) {
                            self.events.push(AgentEvent::ToolcallDelta { index, delta });
                        }
                        let call = ToolCall {
                            id: id.to_string(),
                            name: name.to_string(),
                            arguments: arguments.clone(),
                        };
                        self.events
                            .push(AgentEvent::ToolcallEnd { index, tool_call: call.clone() });
                        m.content.push(AssistantContent::ToolCall(call));
                    }
                }
            }
            m.stop_reason = stop;
            if stop.is_failure() {
                m.error_message = Some(if stop == StopReason::Aborted {
                    "aborted".to_string()
                } else {
                    "upstream 500".to_string()
                });
            }
            let message = Message::Assistant(m.clone());
            self.events.push(AgentEvent::MessageEnd { message: Box::new(message.clone()) });
            self.messages.push(message.clone());
            let failure = m.error_message.clone();
            if let Some(error) = &failure {
                self.events.push(AgentEvent::Error {
                    error: error.clone(),
                    message: Some(Box::new(message)),
                });
            }
            self.events.push(AgentEvent::NodeExit {
                name: "think".into(),
                node_id,
                error: failure,
            });
            self.open_step = Some(AgentStep {
                step_id: format!("step-{}", self.step),
                step_index: self.step,
                timestamp: 1,
                llm_response: m,
                latency_ms: 1,
                tool_results: Vec::new(),
                annotations: StepAnnotations::default(),
            });
            self.step += 1;
            if stop.is_failure() {
                self = self.step_end();
            }
            self
        }

        /// The act node: each local call `(id, name, output deltas, is_error)` runs, streaming
        /// its output.
        pub(crate) fn act(mut self, calls: &[(&str, &str, &[&str], bool)]) -> Self {
            let node_id = format!("act-{}", self.step - 1);
            self.events
                .push(AgentEvent::NodeEnter { name: "act".into(), node_id: node_id.clone() });
            for (id, name, _, _) in calls {
                self.events.push(AgentEvent::ToolExecutionStart {
                    tool_call_id: id.to_string(),
                    tool_name: name.to_string(),
                    args: Value::Object(Default::default()),
                });
            }
            for (id, name, deltas, is_error) in calls {
                for delta in *deltas {
                    self.events.push(AgentEvent::ToolExecutionDelta {
                        tool_call_id: id.to_string(),
                        delta: delta.to_string(),
                    });
                }
                self.events.push(AgentEvent::ToolExecutionEnd {
                    tool_call_id: id.to_string(),
                    tool_name: name.to_string(),
                    output: deltas.concat(),
                    details: None,
                    is_error: *is_error,
                });
            }
            self.events.push(AgentEvent::NodeExit { name: "act".into(), node_id, error: None });
            self
        }

        /// The observe node with results `(id, name, output, is_error)`, then `step_end`.
        pub(crate) fn observe(mut self, results: &[(&str, &str, &str, bool)]) -> Self {
            let node_id = format!("observe-{}", self.step.saturating_sub(1));
            self.events
                .push(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
            for (id, name, output, is_error) in results {
                let mut r = ToolResultMessage::new(*id, *name, *output, *is_error);
                r.timestamp = 1;
                self.events.push(AgentEvent::MessageStart { role: Role::ToolResult });
                self.events.push(AgentEvent::MessageEnd { message: Box::new(r.clone().into()) });
                self.messages.push(r.into());
            }
            self.events.push(AgentEvent::NodeExit { name: "observe".into(), node_id, error: None });
            self.step_end()
        }

        /// `step_end` of the open step (a resumed run has none open: a placeholder is used).
        pub(crate) fn step_end(mut self) -> Self {
            let step = self.open_step.take().unwrap_or_else(|| AgentStep {
                step_id: "earlier".into(),
                step_index: self.step.saturating_sub(1),
                timestamp: 1,
                llm_response: AssistantMessage::empty("faux", "faux-1"),
                latency_ms: 1,
                tool_results: Vec::new(),
                annotations: StepAnnotations::default(),
            });
            self.events.push(AgentEvent::StepEnd { step: Box::new(step) });
            self
        }

        /// Any event.
        pub(crate) fn event(mut self, event: AgentEvent) -> Self {
            self.events.push(event);
            self
        }

        /// The run suspends for these remote calls.
        pub(crate) fn awaiting(mut self, calls: &[(&str, &str, Value)]) -> Self {
            let tool_calls = calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: arguments.clone(),
                })
                .collect();
            self.events.push(AgentEvent::AwaitingToolExecution {
                session_id: self.session.clone(),
                tool_calls,
            });
            self
        }

        /// The run suspends for these approvals.
        pub(crate) fn approval(mut self, calls: &[(&str, &str, Value)]) -> Self {
            let tool_calls = calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: arguments.clone(),
                })
                .collect();
            self.events.push(AgentEvent::ApprovalRequired {
                session_id: self.session.clone(),
                tool_calls,
            });
            self
        }

        /// `session_end` with `status`; the run's events.
        pub(crate) fn end(mut self, status: SessionStatus) -> Vec<AgentEvent> {
            let mut usage = Usage::default();
            for m in &self.messages {
                if let Message::Assistant(a) = m {
                    usage += a.usage;
                }
            }
            self.events.push(AgentEvent::SessionEnd {
                session_id: self.session.clone(),
                status,
                messages: self.messages,
                usage,
                cost: Default::default(),
            });
            self.events
        }
    }

    /// The texts of a canonical stream's text blocks, in order.
    pub(crate) fn texts(events: &[AgentEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::TextEnd { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    /// Recorded from `weft run hi --script weather.json --json` with the turns of
    /// `examples/scripts/weather.json` shortened and streamed in chunks of 8 characters (the two
    /// `step_end` lines trimmed to the fields they need): thinking, text, two local tool calls
    /// (one with streamed output), their results, then the answer.
    pub(crate) const REAL_WEATHER_RUN: &str = r##"{"type":"session_start","sessionId":"5f03c57a-2c77-4c2d-bfa8-5580ea0e3911","runId":"d1d1f092-f35a-47b4-8010-888be12201dc","agent":"react"}
{"type":"message_start","role":"user"}
{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1795306142218}}
{"type":"node_enter","name":"think","nodeId":"think-0"}
{"type":"step_start","stepId":"3066067d-1ce6-4908-bee4-ba00988536c9","stepIndex":0}
{"type":"message_start","role":"assistant"}
{"type":"thinking_start","index":0}
{"type":"thinking_delta","index":0,"delta":"The user"}
{"type":"thinking_delta","index":0,"delta":" wants t"}
{"type":"thinking_delta","index":0,"delta":"he weath"}
{"type":"thinking_delta","index":0,"delta":"er."}
{"type":"thinking_end","index":0,"thinking":"The user wants the weather."}
{"type":"text_start","index":1}
{"type":"text_delta","index":1,"delta":"Let me c"}
{"type":"text_delta","index":1,"delta":"heck."}
{"type":"text_end","index":1,"text":"Let me check."}
{"type":"toolcall_start","index":2,"id":"call_0_0","name":"echo"}
{"type":"toolcall_delta","index":2,"delta":"{\"text\":"}
{"type":"toolcall_delta","index":2,"delta":"\"Paris: "}
{"type":"toolcall_delta","index":2,"delta":"sunny\"}"}
{"type":"toolcall_end","index":2,"toolCall":{"id":"call_0_0","name":"echo","arguments":{"text":"Paris: sunny"}}}
{"type":"toolcall_start","index":3,"id":"call_0_1","name":"current_time"}
{"type":"toolcall_delta","index":3,"delta":"{}"}
{"type":"toolcall_end","index":3,"toolCall":{"id":"call_0_1","name":"current_time","arguments":{}}}
{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants the weather."},{"type":"text","text":"Let me check."},{"type":"toolCall","id":"call_0_0","name":"echo","arguments":{"text":"Paris: sunny"}},{"type":"toolCall","id":"call_0_1","name":"current_time","arguments":{}}],"stopReason":"toolUse","usage":{"input":120,"output":48,"cacheRead":0,"cacheWrite":0,"total":168},"provider":"faux","model":"faux","timestamp":1795306142218}}
{"type":"node_exit","name":"think","nodeId":"think-0"}
{"type":"node_enter","name":"act","nodeId":"act-0"}
{"type":"tool_execution_start","toolCallId":"call_0_0","toolName":"echo","args":{"text":"Paris: sunny"}}
{"type":"tool_execution_start","toolCallId":"call_0_1","toolName":"current_time","args":{}}
{"type":"tool_execution_end","toolCallId":"call_0_1","toolName":"current_time","output":"2026-11-22T00:09:02Z","isError":false}
{"type":"tool_execution_delta","toolCallId":"call_0_0","delta":"Paris: "}
{"type":"tool_execution_delta","toolCallId":"call_0_0","delta":"sunny"}
{"type":"tool_execution_end","toolCallId":"call_0_0","toolName":"echo","output":"Paris: sunny","isError":false}
{"type":"node_exit","name":"act","nodeId":"act-0"}
{"type":"node_enter","name":"observe","nodeId":"observe-0"}
{"type":"message_start","role":"toolResult"}
{"type":"message_end","message":{"role":"toolResult","toolCallId":"call_0_0","toolName":"echo","content":[{"type":"text","text":"Paris: sunny"}],"isError":false,"timestamp":1795306142219}}
{"type":"message_start","role":"toolResult"}
{"type":"message_end","message":{"role":"toolResult","toolCallId":"call_0_1","toolName":"current_time","content":[{"type":"text","text":"2026-11-22T00:09:02Z"}],"isError":false,"timestamp":1795306142219}}
{"type":"node_exit","name":"observe","nodeId":"observe-0"}
{"type":"step_end","step":{"stepId":"3066067d-1ce6-4908-bee4-ba00988536c9","stepIndex":0,"timestamp":1795306142218,"llmResponse":{"content":[{"type":"text","text":"Let me check."}],"stopReason":"toolUse","provider":"faux","model":"faux"},"latencyMs":1,"toolResults":[]}}
{"type":"node_enter","name":"think","nodeId":"think-1"}
{"type":"step_start","stepId":"c2f96802-0d29-4878-9474-7b8b28f18327","stepIndex":1}
{"type":"message_start","role":"assistant"}
{"type":"text_start","index":0}
{"type":"text_delta","index":0,"delta":"It is su"}
{"type":"text_delta","index":0,"delta":"nny in P"}
{"type":"text_delta","index":0,"delta":"aris."}
{"type":"text_end","index":0,"text":"It is sunny in Paris."}
{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"It is sunny in Paris."}],"stopReason":"stop","usage":{"input":190,"output":31,"cacheRead":0,"cacheWrite":0,"total":221},"provider":"faux","model":"faux","timestamp":1795306142219}}
{"type":"node_exit","name":"think","nodeId":"think-1"}
{"type":"step_end","step":{"stepId":"c2f96802-0d29-4878-9474-7b8b28f18327","stepIndex":1,"timestamp":1795306142219,"llmResponse":{"content":[{"type":"text","text":"It is sunny in Paris."}],"stopReason":"stop","provider":"faux","model":"faux"},"latencyMs":1,"toolResults":[]}}
{"type":"session_end","sessionId":"5f03c57a-2c77-4c2d-bfa8-5580ea0e3911","status":"completed","messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1795306142218},{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants the weather."},{"type":"text","text":"Let me check."},{"type":"toolCall","id":"call_0_0","name":"echo","arguments":{"text":"Paris: sunny"}},{"type":"toolCall","id":"call_0_1","name":"current_time","arguments":{}}],"stopReason":"toolUse","usage":{"input":120,"output":48,"cacheRead":0,"cacheWrite":0,"total":168},"provider":"faux","model":"faux","timestamp":1795306142218},{"role":"toolResult","toolCallId":"call_0_0","toolName":"echo","content":[{"type":"text","text":"Paris: sunny"}],"isError":false,"timestamp":1795306142219},{"role":"toolResult","toolCallId":"call_0_1","toolName":"current_time","content":[{"type":"text","text":"2026-11-22T00:09:02Z"}],"isError":false,"timestamp":1795306142219},{"role":"assistant","content":[{"type":"text","text":"It is sunny in Paris."}],"stopReason":"stop","usage":{"input":190,"output":31,"cacheRead":0,"cacheWrite":0,"total":221},"provider":"faux","model":"faux","timestamp":1795306142219}],"usage":{"input":310,"output":79,"cacheRead":0,"cacheWrite":0,"total":389},"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}}
"##;

    /// The recorded run's events.
    pub(crate) fn real_weather_run() -> Vec<AgentEvent> {
        REAL_WEATHER_RUN
            .lines()
            .map(|line| match serde_json::from_str(line) {
                Ok(event) => event,
                Err(e) => panic!("fixture line does not parse ({e}): {line}"),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::{BTreeMap, HashSet};

    use serde_json::{Value, json};
    use weft_core::{AgentEvent, SessionStatus, StopReason};

    use super::AgUiEncoder;
    use super::fixtures::{Block, Script, real_weather_run, texts};
    use crate::{Encoder, Frame};

    fn encode_with(encoder: &mut AgUiEncoder, events: &[AgentEvent]) -> Vec<Frame> {
        let mut out = Vec::new();
        for event in events {
            encoder.encode(event, &mut out);
        }
        out
    }

    /// A whole stream through a fresh encoder, `finish` included.
    fn encode(events: &[AgentEvent]) -> Vec<Frame> {
        let mut encoder = AgUiEncoder::new();
        let mut out = encode_with(&mut encoder, events);
        encoder.finish(&mut out);
        out
    }

    fn lines(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.data.as_str()).collect()
    }

    fn values(frames: &[Frame]) -> Vec<Value> {
        frames.iter().map(|f| serde_json::from_str(&f.data).unwrap()).collect()
    }

    fn of_type<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
        frames.iter().filter(|f| f["type"] == kind).collect()
    }

    /// What an AG-UI stream says, after checking the protocol's sequencing rules.
    #[derive(Debug, Default)]
    struct Seen {
        /// Text messages: (id, concatenated content), in start order.
        texts: Vec<(String, String)>,
        /// Reasoning messages' content, in start order.
        reasoning: Vec<String>,
        /// Tool call arguments by call id.
        args: BTreeMap<String, String>,
        /// Step names in start order.
        steps: Vec<String>,
        /// Runs closed: the terminal frames.
        ends: Vec<Value>,
    }

    /// Checks the AG-UI rules this encoder promises: a run opens with RUN_STARTED and closes with
    /// RUN_FINISHED or RUN_ERROR and nothing else is sent outside a run; every START has its END
    /// with the same id and its CONTENT / ARGS in between; ids are not reused; steps balance;
    /// nothing is open when a run closes; the stream ends with a closed run.
    fn check(frames: &[Frame]) -> Seen {
        let mut seen = Seen::default();
        let mut run_open = false;
        let (mut open_texts, mut open_reasoning, mut open_spans) =
            (HashSet::new(), HashSet::new(), HashSet::new());
        let mut open_calls: HashSet<String> = HashSet::new();
        let mut open_steps: Vec<String> = Vec::new();
        let mut ids: HashSet<String> = HashSet::new();
        let mut reasoning_index: BTreeMap<String, usize> = BTreeMap::new();
        for (i, frame) in frames.iter().enumerate() {
            assert!(frame.is_json(), "frame {i} is not JSON: {}", frame.data);
            let v: Value = serde_json::from_str(&frame.data).unwrap();
            let kind = v["type"].as_str().unwrap();
            let id = |field: &str| v[field].as_str().unwrap().to_string();
            if !run_open {
                assert!(
                    kind == "RUN_STARTED" || kind == "RUN_ERROR",
                    "frame {i} ({kind}) is outside a run"
                );
            }
            match kind {
                "RUN_STARTED" => {
                    assert!(!run_open, "nested RUN_STARTED at {i}");
                    assert!(v["threadId"].is_string() && v["runId"].is_string());
                    run_open = true;
                }
                "RUN_FINISHED" | "RUN_ERROR" => {
                    assert!(open_texts.is_empty(), "text open at {kind}: {open_texts:?}");
                    assert!(open_reasoning.is_empty() && open_spans.is_empty());
                    assert!(open_calls.is_empty(), "tool calls open at {kind}: {open_calls:?}");
                    assert!(open_steps.is_empty(), "steps open at {kind}: {open_steps:?}");
                    if kind == "RUN_ERROR" {
                        assert!(v["message"].is_string());
                    }
                    run_open = false;
                    seen.ends.push(v.clone());
                }
                "TEXT_MESSAGE_START" => {
                    let id = id("messageId");
                    assert_eq!(v["role"], "assistant");
                    assert!(ids.insert(id.clone()), "message id {id} reused");
                    open_texts.insert(id.clone());
                    seen.texts.push((id, String::new()));
                }
                "TEXT_MESSAGE_CONTENT" => {
                    let id = id("messageId");
                    assert!(open_texts.contains(&id), "content for closed message {id}");
                    let delta = v["delta"].as_str().unwrap();
                    assert!(!delta.is_empty(), "empty delta");
                    let text = seen.texts.iter_mut().find(|(t, _)| *t == id).unwrap();
                    text.1.push_str(delta);
                }
                "TEXT_MESSAGE_END" => assert!(open_texts.remove(&id("messageId"))),
                "REASONING_START" => {
                    let id = id("messageId");
                    assert!(ids.insert(id.clone()), "span id {id} reused");
                    open_spans.insert(id);
                }
                "REASONING_END" => assert!(open_spans.remove(&id("messageId"))),
                "REASONING_MESSAGE_START" => {
                    let id = id("messageId");
                    assert_eq!(v["role"], "reasoning");
                    assert!(!open_spans.is_empty(), "reasoning message outside a span");
                    assert!(ids.insert(id.clone()), "message id {id} reused");
                    reasoning_index.insert(id.clone(), seen.reasoning.len());
                    seen.reasoning.push(String::new());
                    open_reasoning.insert(id);
                }
                "REASONING_MESSAGE_CONTENT" => {
                    let id = id("messageId");
                    assert!(open_reasoning.contains(&id));
                    seen.reasoning[reasoning_index[&id]].push_str(v["delta"].as_str().unwrap());
                }
                "REASONING_MESSAGE_END" => assert!(open_reasoning.remove(&id("messageId"))),
                "REASONING_ENCRYPTED_VALUE" => {
                    assert!(reasoning_index.contains_key(&id("entityId")));
                }
                "TOOL_CALL_START" => {
                    let id = id("toolCallId");
                    assert!(v["toolCallName"].is_string() && v["parentMessageId"].is_string());
                    assert!(!seen.args.contains_key(&id), "tool call {id} started twice");
                    open_calls.insert(id.clone());
                    seen.args.insert(id, String::new());
                }
                "TOOL_CALL_ARGS" => {
                    let id = id("toolCallId");
                    assert!(open_calls.contains(&id), "args for closed call {id}");
                    seen.args.get_mut(&id).unwrap().push_str(v["delta"].as_str().unwrap());
                }
                "TOOL_CALL_END" => {
                    let id = id("toolCallId");
                    assert!(open_calls.remove(&id), "end of a call not open: {id}");
                    assert!(!seen.args[&id].is_empty(), "call {id} ended without ARGS");
                }
                "TOOL_CALL_RESULT" => {
                    assert_eq!(v["role"], "tool");
                    assert!(v["content"].is_string() && v["messageId"].is_string());
                }
                "STEP_STARTED" => {
                    let name = id("stepName");
                    assert!(!open_steps.contains(&name), "step {name} opened twice");
                    open_steps.push(name.clone());
                    seen.steps.push(name);
                }
                "STEP_FINISHED" => {
                    let name = id("stepName");
                    let at = open_steps.iter().position(|s| *s == name).expect("step not open");
                    open_steps.remove(at);
                }
                "STATE_SNAPSHOT" => assert!(v.get("snapshot").is_some()),
                "CUSTOM" => assert!(v["name"].is_string() && v.get("value").is_some()),
                other => panic!("unexpected event type {other}"),
            }
        }
        assert!(!run_open, "the stream ended inside a run");
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
                r#"{"type":"RUN_STARTED","threadId":"s1","runId":"r1"}"#,
                r#"{"type":"STEP_STARTED","stepName":"think"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"r1-0","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"r1-0","delta":"Hell"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"r1-0","delta":"o"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"r1-0"}"#,
                r#"{"type":"STEP_FINISHED","stepName":"think"}"#,
                concat!(
                    r#"{"type":"RUN_FINISHED","threadId":"s1","runId":"r1","outcome":{"type":"success"},"#,
                    r#""usage":[{"provider":"faux","model":"faux-1","inputTokens":12,"outputTokens":5,"#,
                    r#""totalTokens":17,"cachedInputTokens":2,"cacheWriteInputTokens":0}]}"#
                ),
            ]
        );
        check(&frames);
    }

    #[test]
    fn thinking_then_text_gives_exact_frames() {
        let events = Script::new("s1", "r1", 3)
            .model(&[Block::Think("Hmm.", Some("sig-1")), Block::Text("Hi")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        assert_eq!(
            lines(&frames)[1..12],
            [
                r#"{"type":"STEP_STARTED","stepName":"think"}"#,
                r#"{"type":"REASONING_START","messageId":"r1-3-reasoning-0"}"#,
                r#"{"type":"REASONING_MESSAGE_START","messageId":"r1-3-0","role":"reasoning"}"#,
                r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"r1-3-0","delta":"Hmm."}"#,
                r#"{"type":"REASONING_MESSAGE_END","messageId":"r1-3-0"}"#,
                r#"{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"r1-3-0","encryptedValue":"sig-1"}"#,
                r#"{"type":"REASONING_END","messageId":"r1-3-reasoning-0"}"#,
                r#"{"type":"TEXT_MESSAGE_START","messageId":"r1-3","role":"assistant"}"#,
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"r1-3","delta":"Hi"}"#,
                r#"{"type":"TEXT_MESSAGE_END","messageId":"r1-3"}"#,
                r#"{"type":"STEP_FINISHED","stepName":"think"}"#,
            ]
        );
        let seen = check(&frames);
        assert_eq!(seen.reasoning, ["Hmm."]);
    }

    #[test]
    fn tool_calls_stream_their_arguments_output_and_results() {
        let events = weather("r1");
        let frames = encode(&events);
        let seen = check(&frames);
        let v = values(&frames);

        // Texts arrive whole, each in its own message.
        let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(contents, texts(&events));
        assert_eq!(seen.texts[0].0, "r1-0");
        assert_eq!(seen.texts[1].0, "r1-1");
        assert_eq!(seen.reasoning, ["Use the tools."]);

        // The calls hang off the text message before them; arguments are the model's JSON.
        let starts = of_type(&v, "TOOL_CALL_START");
        assert_eq!(starts.len(), 2);
        assert_eq!(
            *starts[0],
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "echo",
                   "parentMessageId": "r1-0"})
        );
        assert_eq!(starts[1]["parentMessageId"], "r1-0");
        assert_eq!(seen.args["c1"], r#"{"text":"Paris"}"#);
        assert_eq!(seen.args["c2"], "{}");
        assert!(of_type(&v, "TOOL_CALL_ARGS").len() > 2, "arguments are streamed in pieces");

        // Local output streams as CUSTOM tool_output, then the results.
        let output: String = of_type(&v, "CUSTOM")
            .iter()
            .filter(|c| c["name"] == "tool_output" && c["value"]["toolCallId"] == "c1")
            .map(|c| c["value"]["delta"].as_str().unwrap())
            .collect();
        assert_eq!(output, "Paris");
        let results = of_type(&v, "TOOL_CALL_RESULT");
        assert_eq!(
            *results[0],
            json!({"type": "TOOL_CALL_RESULT", "messageId": "r1-result-c1", "toolCallId": "c1",
                   "content": "Paris", "role": "tool"})
        );
        assert_eq!(results[1]["content"], "12:00");

        assert_eq!(seen.steps, ["think", "act", "observe", "think"]);
        assert_eq!(seen.ends.len(), 1);
        assert_eq!(seen.ends[0]["outcome"], json!({"type": "success"}));
        assert_eq!(seen.ends[0]["usage"][0]["inputTokens"], 24);
    }

    #[test]
    fn a_call_before_any_text_is_parented_to_the_message_and_later_text_gets_its_own_id() {
        let events = Script::new("s1", "r1", 0)
            .model(
                &[Block::Call("c1", "echo", json!({"a": 1})), Block::Text("Done.")],
                StopReason::ToolUse,
            )
            .act(&[("c1", "echo", &["1"], false)])
            .observe(&[("c1", "echo", "1", false)])
            .model(&[Block::Text("Fine.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        let seen = check(&frames);
        let v = values(&frames);
        assert_eq!(of_type(&v, "TOOL_CALL_START")[0]["parentMessageId"], "r1-0");
        assert_eq!(seen.texts[0], ("r1-0-1".to_string(), "Done.".to_string()));
        assert_eq!(seen.texts[1], ("r1-1".to_string(), "Fine.".to_string()));
    }

    #[test]
    fn a_remote_suspension_finishes_with_the_pending_calls_and_the_resume_does_not_echo_them() {
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
        let run2 = Script::new("s1", "r2", 1)
            .observe(&[("c1", "read_page", "Weft 0.1", false)])
            .model(&[Block::Text("The headline is Weft 0.1.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);

        // One encoder for both runs (a session stream).
        let mut encoder = AgUiEncoder::new();
        let first = encode_with(&mut encoder, &run1);
        let v1 = values(&first);
        assert_eq!(of_type(&v1, "TOOL_CALL_END").len(), 1);
        assert!(of_type(&v1, "TOOL_CALL_RESULT").is_empty(), "the client runs the call");
        let last = v1.last().unwrap();
        assert_eq!(last["type"], "RUN_FINISHED");
        assert_eq!(last["outcome"], json!({"type": "success", "pendingToolCallIds": ["c1"]}));
        let mut all = first.clone();
        let second = encode_with(&mut encoder, &run2);
        let v2 = values(&second);
        assert_eq!(v2[0], json!({"type": "RUN_STARTED", "threadId": "s1", "runId": "r2"}));
        assert!(
            of_type(&v2, "TOOL_CALL_RESULT").is_empty(),
            "the client's own result is not echoed"
        );
        assert_eq!(v2.last().unwrap()["outcome"], json!({"type": "success"}));
        all.extend(second);
        encoder.finish(&mut all);
        let seen = check(&all);
        assert_eq!(seen.ends.len(), 2);
        assert_eq!(seen.steps, ["think", "observe", "think"]);

        // One encoder per request, as the server runs it: told which calls the client answered.
        let told = encode_with(&mut AgUiEncoder::new().client_answered(["c1"]), &run2);
        assert!(of_type(&values(&told), "TOOL_CALL_RESULT").is_empty());
        let untold = encode(&run2);
        let results = of_type(&values(&untold), "TOOL_CALL_RESULT").len();
        assert_eq!(results, 1, "without being told, the result is sent");
        check(&untold);
    }

    #[test]
    fn an_approval_request_finishes_with_an_interrupt_and_a_denial_is_a_result() {
        let run1 = Script::new("s1", "r1", 0)
            .user("Send it")
            .model(&[Block::Call("c1", "send_email", json!({"to": "a@b.c"}))], StopReason::ToolUse)
            .approval(&[("c1", "send_email", json!({"to": "a@b.c"}))])
            .end(SessionStatus::AwaitingApproval);
        let frames = encode(&run1);
        check(&frames);
        let v = values(&frames);
        let last = v.last().unwrap();
        assert_eq!(last["type"], "RUN_FINISHED");
        assert_eq!(
            last["outcome"],
            json!({"type": "interrupt", "interrupts": [{
                "id": "c1",
                "reason": "tool_call",
                "message": "Approve the call to send_email?",
                "toolCallId": "c1",
                "responseSchema": {
                    "type": "object",
                    "properties": {
                        "approved": {"type": "boolean"},
                        "reason": {"type": "string", "description": "Why, shown to the model on a denial"}
                    },
                    "required": ["approved"]
                },
                "metadata": {"toolName": "send_email", "arguments": {"to": "a@b.c"}}
            }]})
        );
        assert!(of_type(&v, "TOOL_CALL_RESULT").is_empty());

        // Resumed with a denial: the denial is the server's answer, sent as the call's result.
        let run2 = Script::new("s1", "r2", 1)
            .observe(&[("c1", "send_email", "Tool call denied by the user: no", true)])
            .model(&[Block::Text("Understood.")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed);
        let frames = encode(&run2);
        check(&frames);
        let v = values(&frames);
        assert_eq!(
            of_type(&v, "TOOL_CALL_RESULT")[0]["content"],
            "Tool call denied by the user: no"
        );
    }

    #[test]
    fn a_provider_error_closes_what_is_open_then_ends_with_run_error_only() {
        let events = Script::new("s1", "r1", 0)
            .user("hi")
            .model(&[Block::Text("Partial answ")], StopReason::Error)
            .end(SessionStatus::Error);
        let frames = encode(&events);
        let seen = check(&frames);
        assert_eq!(seen.texts[0].1, "Partial answ", "the partial text is kept");
        let v = values(&frames);
        let kinds: Vec<&str> = v.iter().map(|f| f["type"].as_str().unwrap()).collect();
        assert_eq!(kinds[kinds.len() - 3..], ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_ERROR"]);
        let last = v.last().unwrap();
        assert_eq!(last["message"], "upstream 500");
        assert_eq!(last["code"], "error");
        assert!(of_type(&v, "RUN_FINISHED").is_empty(), "RUN_ERROR is terminal");
    }

    #[test]
    fn an_aborted_run_finishes_cancelled() {
        let events = Script::new("s1", "r1", 0)
            .user("hi")
            .model(&[Block::Text("Thinking about")], StopReason::Aborted)
            .end(SessionStatus::Aborted);
        let frames = encode(&events);
        check(&frames);
        let v = values(&frames);
        assert_eq!(v.last().unwrap()["outcome"], json!({"type": "cancelled"}));
        assert!(of_type(&v, "RUN_ERROR").is_empty(), "a stop the user asked for is no error");

        // Aborted while tools run: the calls are answered with errors, then the run stops.
        let events = Script::new("s1", "r1", 0)
            .model(&[Block::Call("c1", "slow", json!({}))], StopReason::ToolUse)
            .act(&[("c1", "slow", &["Tool call aborted: the run was aborted"], true)])
            .observe(&[("c1", "slow", "Tool call aborted: the run was aborted", true)])
            .end(SessionStatus::Aborted);
        let frames = encode(&events);
        check(&frames);
        let v = values(&frames);
        assert_eq!(
            of_type(&v, "TOOL_CALL_RESULT")[0]["content"],
            "Tool call aborted: the run was aborted"
        );
        assert_eq!(v.last().unwrap()["outcome"], json!({"type": "cancelled"}));

        // A run stopped by its turn limit is cancelled too (a limit the producer enforces).
        let events = Script::new("s1", "r1", 0)
            .model(&[Block::Call("c1", "echo", json!({}))], StopReason::ToolUse)
            .act(&[("c1", "echo", &["x"], false)])
            .observe(&[("c1", "echo", "x", false)])
            .end(SessionStatus::MaxTurns);
        let v = values(&encode(&events));
        assert_eq!(v.last().unwrap()["outcome"], json!({"type": "cancelled"}));
    }

    #[test]
    fn a_multi_step_run_keeps_ids_distinct_and_texts_whole() {
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
        let seen = check(&frames);
        let ids: Vec<&str> = seen.texts.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["r1-0", "r1-1", "r1-2", "r1-3"]);
        let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(contents, texts(&events));
        assert_eq!(seen.args.len(), 3);
        assert_eq!(seen.steps.iter().filter(|s| *s == "think").count(), 4);
        assert_eq!(seen.ends[0]["usage"][0]["outputTokens"], 20);
    }

    #[test]
    fn a_recorded_run_keeps_every_rule() {
        let events = real_weather_run();
        let frames = encode(&events);
        let seen = check(&frames);
        let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(contents, texts(&events));
        assert_eq!(seen.reasoning, ["The user wants the weather."]);
        assert_eq!(seen.args["call_0_0"], r#"{"text":"Paris: sunny"}"#);
        let v = values(&frames);
        assert_eq!(of_type(&v, "TOOL_CALL_RESULT").len(), 2);
        assert_eq!(of_type(&v, "CUSTOM").len(), 2);
        let usage = &seen.ends[0]["usage"][0];
        assert_eq!(
            (usage["inputTokens"].as_u64(), usage["outputTokens"].as_u64()),
            (Some(310), Some(79))
        );
        assert_eq!(v[0]["threadId"], "5f03c57a-2c77-4c2d-bfa8-5580ea0e3911");
    }

    #[test]
    fn a_stream_cut_inside_a_run_is_closed_by_finish() {
        let events = Script::new("s1", "r1", 0).user("hi").events;
        let mut events = events;
        events.push(AgentEvent::NodeEnter { name: "think".into(), node_id: "think-0".into() });
        events.push(AgentEvent::MessageStart { role: weft_core::Role::Assistant });
        events.push(AgentEvent::TextStart { index: 0 });
        events.push(AgentEvent::TextDelta { index: 0, delta: "Hal".into() });
        let frames = encode(&events);
        check(&frames);
        let tail: Vec<&str> = lines(&frames)[frames.len() - 3..].to_vec();
        assert_eq!(
            tail,
            [
                r#"{"type":"TEXT_MESSAGE_END","messageId":"r1-m0"}"#,
                r#"{"type":"STEP_FINISHED","stepName":"think"}"#,
                r#"{"type":"RUN_ERROR","message":"the event stream ended before the run finished","code":"incomplete"}"#,
            ]
        );

        // After a complete run, finish adds nothing.
        let mut encoder = AgUiEncoder::new();
        let events = Script::new("s1", "r1", 0).end(SessionStatus::Completed);
        let mut out = encode_with(&mut encoder, &events);
        let n = out.len();
        encoder.finish(&mut out);
        assert_eq!(out.len(), n);
    }

    #[test]
    fn events_outside_a_run_are_not_sent() {
        let mut encoder = AgUiEncoder::new();
        let out = encode_with(
            &mut encoder,
            &[
                AgentEvent::TextDelta { index: 0, delta: "x".into() },
                AgentEvent::StateSnapshot { state: json!({}) },
            ],
        );
        assert!(out.is_empty());
    }

    #[test]
    fn blocks_taken_up_midway_are_sent_whole() {
        // An encoder that starts mid-message (a stream resumed from a cursor) still sends
        // well-formed messages: an `*_end` without its start carries the whole content.
        let events = Script::new("s1", "r1", 0)
            .event(AgentEvent::TextEnd { index: 0, text: "whole".into() })
            .event(AgentEvent::ToolcallEnd {
                index: 1,
                tool_call: weft_core::ToolCall {
                    id: "c9".into(),
                    name: "echo".into(),
                    arguments: json!({"a": 1}),
                },
            })
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        let seen = check(&frames);
        assert_eq!(seen.texts, [("r1-m0".to_string(), "whole".to_string())]);
        assert_eq!(seen.args["c9"], r#"{"a":1}"#);
    }

    #[test]
    fn state_and_progress_events_become_snapshots_and_custom_events() {
        let events = Script::new("s1", "r1", 0)
            .event(AgentEvent::StateSnapshot { state: json!({"n": 1}) })
            .event(AgentEvent::StateUpdate { name: "plan".into(), state: json!({"n": 2}) })
            .event(AgentEvent::TotExpand { candidates: vec!["a".into(), "b".into()] })
            .event(AgentEvent::GotNodeFailed { id: "g1".into(), error: "boom".into() })
            .event(AgentEvent::Custom { value: json!({"kind": "ping"}) })
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        check(&frames);
        let v = values(&frames);
        assert_eq!(
            v[1..6],
            [
                json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}),
                json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": 2}}),
                json!({"type": "CUSTOM", "name": "tot_expand", "value": {"candidates": ["a", "b"]}}),
                json!({"type": "CUSTOM", "name": "got_node_failed", "value": {"id": "g1", "error": "boom"}}),
                json!({"type": "CUSTOM", "name": "custom", "value": {"kind": "ping"}}),
            ]
        );
    }

    #[test]
    fn concurrent_nodes_of_one_name_get_distinct_step_names() {
        let events = Script::new("s1", "r1", 0)
            .event(AgentEvent::NodeEnter { name: "got_node".into(), node_id: "n1".into() })
            .event(AgentEvent::NodeEnter { name: "got_node".into(), node_id: "n2".into() })
            .event(AgentEvent::NodeExit {
                name: "got_node".into(),
                node_id: "n1".into(),
                error: None,
            })
            .event(AgentEvent::NodeExit {
                name: "got_node".into(),
                node_id: "n2".into(),
                error: None,
            })
            .end(SessionStatus::Completed);
        let frames = encode(&events);
        let seen = check(&frames);
        assert_eq!(seen.steps, ["got_node", "got_node:n2"]);
    }
}
