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
//! | `state_snapshot` | `STATE_SNAPSHOT {snapshot}` |
//! | `state_update` | `STATE_DELTA {delta}` (JSON Patch `add` of each changed member) |
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
//! - `state_update` carries the members of the state a node changed: it is sent as a
//!   `STATE_DELTA` whose JSON Patch sets each of them (`add`), so applying it to the state the
//!   client has (the `STATE_SNAPSHOT` of `values`, sent just before) is exact.
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
//!
//! ## What the server knows of the request (`POST /api/ag-ui`)
//!
//! - Whose state the state events carry ([`StateView`], set with [`AgUiEncoder::state_view`]):
//!   the run's own (the default, as above); none ([`StateView::Hidden`]: Weft's state is an extra
//!   a client's own state should not carry unasked); or the client's state
//!   (`RunAgentInput.state`) with the session's own under `weft`
//!   ([`StateView::ClientWithWeft`]): every `STATE_SNAPSHOT` is the client's state with
//!   `weft: {sessionId, status: "running", state}` (the run's state after each node run), each
//!   `state_update` a `STATE_DELTA` under `/weft/state`, and one last `STATE_SNAPSHOT` with
//!   `weft: {sessionId, status}` (the final status) just before the run's last event. These
//!   state events are sent wherever their canonical events come, inside a run or not.
//! - The conversation as the session has it ([`AgUiEncoder::messages_snapshot`]), for a client
//!   whose messages lack it: `MESSAGES_SNAPSHOT {messages}` right after `RUN_STARTED`, once.
//!   Messages are AG-UI messages: `user {id, content}`, `assistant {id, content?, toolCalls?}`
//!   (`toolCalls`: `{id, type: "function", function: {name, arguments}}`, `arguments` a JSON
//!   text) and `tool {id, toolCallId, content}`; a message without an id of its own (all but
//!   user messages the client named) gets `<prefix>-m<i>`, `i` its position in its group.
//! - A request the server refuses, or one that brings nothing to run, is answered without an
//!   encoder: [`refusal`] (`RUN_STARTED` then `RUN_ERROR {message, code}`) and [`empty_run`]
//!   (`RUN_STARTED` then `RUN_FINISHED`), with the client's ids.
//!
//! ## Protocol versions
//!
//! What a client accepts depends on its AG-UI version ([`AgUiVersion`], set with
//! [`AgUiEncoder::version`]; the server reads it from `RunAgentInput.protocolVersion`, which
//! 1.0 clients send and 0.0.x clients do not: [`AgUiVersion::from_protocol_version`]).
//!
//! - [`AgUiVersion::V1`] (the default): everything above, exactly.
//! - [`AgUiVersion::V0`], for `@ag-ui/client` 0.0.x (CopilotKit 1.x bundles 0.0.59): the same
//!   events, but the only closed objects of 0.0.x, the `RUN_FINISHED` outcomes, are kept to what
//!   they accept — `{type: "success"}` (`.strict()`: no `pendingToolCallIds`; 0.0.x clients and
//!   CopilotKit find the calls to run among the streamed tool calls without a result) and
//!   `{type: "interrupt", interrupts}`. A cancelled run (`aborted`, `max_turns`) has no 0.0.x
//!   outcome: its `RUN_FINISHED` carries none. Every other event and field is sent as for 1.0:
//!   0.0.x events are open (`passthrough`), and `REASONING_*` is understood since 0.0.45.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use weft_core::{
    AgentEvent, AssistantMessage, Message, Role, SessionStatus, ToolCall, ToolResultMessage,
};

use crate::{Encoder, Frame, event_fields};

mod wire;

use wire::{Ev, Outcome, SnapshotMessage, arguments_text, interrupt, push, token_usage};
pub use wire::{empty_run, refusal, state_patch};

/// The AG-UI version a client speaks, as far as what it accepts differs (see the module's
/// *Protocol versions*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AgUiVersion {
    /// `@ag-ui/core` 0.0.x: no `pendingToolCallIds`, no `cancelled` outcome.
    V0,
    /// AG-UI 1.0 and later.
    #[default]
    V1,
}

impl AgUiVersion {
    /// The version of a client from its `RunAgentInput.protocolVersion`: absent (a client from
    /// before the protocol carried a version, as 1.0 defines it) or a `0.x` is [`Self::V0`];
    /// any other declared version is [`Self::V1`], the newest this encoder speaks.
    pub fn from_protocol_version(declared: Option<&str>) -> Self {
        let Some(declared) = declared else { return Self::V0 };
        let major = declared.trim().split('.').next().unwrap_or_default();
        if major.parse::<u64>() == Ok(0) { Self::V0 } else { Self::V1 }
    }
}

/// Whose state a stream's `STATE_SNAPSHOT` and `STATE_DELTA` carry (see the module's *What the
/// server knows of the request*).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum StateView {
    /// The run's own state, as the state is: `state_snapshot` is the snapshot, `state_update` a
    /// delta of it (`?protocol=ag-ui`).
    #[default]
    Run,
    /// No state events at all.
    Hidden,
    /// The client's state (`RunAgentInput.state`; anything but an object counts as `{}`) with
    /// the session's own under `weft`, and a last snapshot with the run's final status.
    ClientWithWeft(Option<Value>),
}

/// Renders canonical events as AG-UI events. One encoder serves one stream: one run, or several
/// runs of a session in order.
#[derive(Debug, Default)]
pub struct AgUiEncoder {
    /// The run being encoded, between `session_start` and `session_end`.
    run: Option<RunState>,
    /// Calls whose results the client supplied: their `TOOL_CALL_RESULT` is not sent.
    client_answered: HashSet<String>,
    /// What the client accepts.
    version: AgUiVersion,
    /// Whose state the state events carry.
    state_view: StateView,
    /// The session of the last `session_start` (`weft.sessionId` of a snapshot).
    session_id: String,
    /// `MESSAGES_SNAPSHOT` to send after the next `RUN_STARTED`.
    messages_snapshot: Option<Vec<SnapshotMessage>>,
}

impl AgUiEncoder {
    /// An encoder for a new stream, for a 1.0 client.
    pub fn new() -> Self {
        Self::default()
    }

    /// Renders for a client of `version` (default [`AgUiVersion::V1`]).
    pub fn version(mut self, version: AgUiVersion) -> Self {
        self.version = version;
        self
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

    /// Sets whose state the state events carry (default [`StateView::Run`]).
    pub fn state_view(mut self, view: StateView) -> Self {
        self.state_view = view;
        self
    }

    /// Adds `messages` to the `MESSAGES_SNAPSHOT` sent once, right after the next
    /// `RUN_STARTED` (for a client whose messages lack the conversation). A message without an
    /// id of its own is `<id_prefix>-m<i>`, `i` its position among `messages`; each call adds a
    /// group of its own, and a call with no messages still sends the snapshot.
    pub fn messages_snapshot<'a>(
        mut self,
        id_prefix: &str,
        messages: impl IntoIterator<Item = &'a Message>,
    ) -> Self {
        let snapshot = self.messages_snapshot.get_or_insert_with(Vec::new);
        for (i, message) in messages.into_iter().enumerate() {
            snapshot.push(SnapshotMessage::new(message, format!("{id_prefix}-m{i}")));
        }
        self
    }

    /// The client's state with `weft` set to `weft` (for [`StateView::ClientWithWeft`]).
    fn client_with_weft(&self, weft: Value) -> Option<Value> {
        let StateView::ClientWithWeft(client) = &self.state_view else { return None };
        let mut snapshot = match client {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        snapshot.insert("weft".into(), weft);
        Some(Value::Object(snapshot))
    }

    /// The state events of a view other than [`StateView::Run`]; `false` for any other event
    /// or view (the run's state goes through the run, as every other event).
    fn view_state(&self, event: &AgentEvent, out: &mut Vec<Frame>) -> bool {
        match (&self.state_view, event) {
            (StateView::Run, _) => false,
            (
                StateView::Hidden,
                AgentEvent::StateSnapshot { .. } | AgentEvent::StateUpdate { .. },
            ) => true,
            (StateView::ClientWithWeft(_), AgentEvent::StateSnapshot { state }) => {
                let weft =
                    json!({ "sessionId": self.session_id, "status": "running", "state": state });
                if let Some(snapshot) = self.client_with_weft(weft) {
                    push(out, &Ev::StateSnapshot { snapshot: &snapshot });
                }
                true
            }
            (StateView::ClientWithWeft(_), AgentEvent::StateUpdate { state, .. }) => {
                let delta = state_patch("/weft/state", state);
                if !delta.is_empty() {
                    push(out, &Ev::StateDelta { delta: &delta });
                }
                true
            }
            _ => false,
        }
    }
}

impl Encoder for AgUiEncoder {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        if self.view_state(event, out) {
            return;
        }
        if let AgentEvent::SessionStart { session_id, run_id, .. } = event {
            self.session_id.clone_from(session_id);
            if let Some(run) = self.run.take() {
                run.fail_incomplete(out);
            }
            push(out, &Ev::RunStarted { thread_id: session_id, run_id });
            if let Some(messages) = self.messages_snapshot.take() {
                push(out, &Ev::MessagesSnapshot { messages: &messages });
            }
            self.run = Some(RunState::new(session_id, run_id, self.version));
            return;
        }
        let Some(run) = self.run.as_mut() else {
            return;
        };
        match event {
            AgentEvent::SessionStart { .. } => {}
            AgentEvent::SessionEnd { session_id, status, messages, .. } => {
                let last = json!({ "sessionId": session_id, "status": status });
                let last = self.client_with_weft(last);
                if let Some(run) = self.run.take() {
                    run.end(*status, messages, last.as_ref(), out);
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
            AgentEvent::StateSnapshot { state } => {
                push(out, &Ev::StateSnapshot { snapshot: state })
            }
            AgentEvent::StateUpdate { state, .. } => {
                let delta = state_patch("", state);
                if !delta.is_empty() {
                    push(out, &Ev::StateDelta { delta: &delta });
                }
            }
            AgentEvent::Custom { value } => push(out, &Ev::Custom { name: "custom", value }),
            AgentEvent::Checkpoint { .. } | AgentEvent::Progress(_) => {
                let value = event_fields(event);
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
    /// What the client accepts.
    version: AgUiVersion,
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
    fn new(thread_id: &str, run_id: &str, version: AgUiVersion) -> Self {
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
            version,
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
            self.failure.get_or_insert_with(|| message.failure_text().to_string());
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

    /// The run's last event, by its status; `state`, if any, is sent as a `STATE_SNAPSHOT` just
    /// before it.
    fn end(
        mut self,
        status: SessionStatus,
        messages: &[Arc<Message>],
        state: Option<&Value>,
        out: &mut Vec<Frame>,
    ) {
        self.close_all(out);
        if let Some(snapshot) = state {
            push(out, &Ev::StateSnapshot { snapshot });
        }
        let usage = token_usage(messages);
        let outcome = match status {
            SessionStatus::Error => {
                let message = self
                    .failure
                    .take()
                    .or_else(|| crate::last_error_message(messages))
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
        let outcome = match (self.version, outcome) {
            (AgUiVersion::V1, outcome) => Some(outcome),
            // 0.0.x: `success` is closed to its `type`, and there is no `cancelled`.
            (AgUiVersion::V0, Outcome::Success { .. }) => {
                Some(Outcome::Success { pending_tool_call_ids: Vec::new() })
            }
            (AgUiVersion::V0, Outcome::Cancelled) => None,
            (AgUiVersion::V0, outcome @ Outcome::Interrupt { .. }) => Some(outcome),
        };
        push(
            out,
            &Ev::RunFinished { thread_id: &self.thread_id, run_id: &self.run_id, outcome, usage },
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

/// Canonical event sequences for this crate's tests, built in the order the agent emits them
/// (see `weft_core::event`), and a real stream recorded from `weft run`.
#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod client_tests;
