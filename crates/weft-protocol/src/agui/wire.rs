//! The AG-UI events as they are written: one type per event, the outcome and interrupt
//! objects, the history snapshot's messages, and the whole-run frames (a refusal, a run with
//! nothing new) a server sends without an encoder.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use weft_core::{AssistantContent, Message, ToolCall};

use crate::Frame;

/// An approval request as an AG-UI interrupt.
pub(super) fn interrupt(call: &ToolCall) -> Interrupt<'_> {
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
pub(super) fn token_usage(messages: &[Arc<Message>]) -> Vec<TokenUsage<'_>> {
    let mut entries: Vec<TokenUsage<'_>> = Vec::new();
    for message in messages {
        let Message::Assistant(m) = &**message else { continue };
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
        // Counts come from a provider: saturate rather than overflow.
        let input = u.total_input();
        entry.input_tokens = entry.input_tokens.saturating_add(input);
        entry.output_tokens = entry.output_tokens.saturating_add(u.output);
        entry.total_tokens = entry.total_tokens.saturating_add(input.saturating_add(u.output));
        entry.cached_input_tokens = entry.cached_input_tokens.saturating_add(u.cache_read);
        entry.cache_write_input_tokens =
            entry.cache_write_input_tokens.saturating_add(u.cache_write);
        if let Some(reasoning) = u.reasoning {
            let total = entry.reasoning_tokens.get_or_insert(0);
            *total = total.saturating_add(reasoning);
        }
    }
    entries
}

/// A tool call's arguments as the text a model would have streamed.
pub(super) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        // Arguments that were not valid JSON are kept as a string of the raw text.
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

pub(super) fn push(out: &mut Vec<Frame>, event: &Ev<'_>) {
    out.push(Frame::json(event));
}

/// The AG-UI events this encoder sends.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", rename_all_fields = "camelCase")]
pub(super) enum Ev<'a> {
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
    StateDelta {
        delta: &'a [Value],
    },
    MessagesSnapshot {
        messages: &'a [SnapshotMessage],
    },
    Custom {
        name: &'a str,
        value: &'a Value,
    },
}

/// A message of `MESSAGES_SNAPSHOT`.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase", rename_all_fields = "camelCase")]
pub(super) enum SnapshotMessage {
    User {
        id: String,
        content: String,
    },
    Assistant {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<SnapshotCall>,
    },
    Tool {
        id: String,
        tool_call_id: String,
        content: String,
    },
}

/// A tool call of a snapshot's assistant message.
#[derive(Debug, Serialize)]
pub(super) struct SnapshotCall {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    function: SnapshotFunction,
}

/// `{name, arguments}` (`arguments`: a JSON text).
#[derive(Debug, Serialize)]
pub(super) struct SnapshotFunction {
    name: String,
    arguments: String,
}

impl SnapshotMessage {
    /// `message` as AG-UI has it (`generated`: its id when it has none of its own).
    pub(super) fn new(message: &Message, generated: String) -> Self {
        match message {
            Message::User(user) => Self::User {
                id: user.id.as_deref().map_or(generated, str::to_string),
                content: user.text_content(),
            },
            Message::Assistant(assistant) => {
                let mut text = String::new();
                let mut tool_calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => text.push_str(&t.text),
                        AssistantContent::ToolCall(call) => tool_calls.push(SnapshotCall {
                            id: call.id.clone(),
                            kind: "function",
                            function: SnapshotFunction {
                                name: call.name.clone(),
                                arguments: call.arguments.to_string(),
                            },
                        }),
                        _ => {}
                    }
                }
                Self::Assistant {
                    id: generated,
                    content: (!text.is_empty()).then_some(text),
                    tool_calls,
                }
            }
            Message::ToolResult(result) => Self::Tool {
                id: generated,
                tool_call_id: result.tool_call_id.clone(),
                content: result.text_content(),
            },
        }
    }
}

/// The answer to a run the server refuses: the client's run opened (`RUN_STARTED` with the
/// client's `thread_id` and `run_id`), then `RUN_ERROR {message, code}`.
pub fn refusal(thread_id: &str, run_id: &str, message: &str, code: &str) -> Vec<Frame> {
    vec![
        Frame::json(&Ev::RunStarted { thread_id, run_id }),
        Frame::json(&Ev::RunError { message, code, usage: Vec::new() }),
    ]
}

/// The answer to a run that brings nothing to run: `RUN_STARTED`, then `RUN_FINISHED` without
/// an outcome, with the client's ids.
pub fn empty_run(thread_id: &str, run_id: &str) -> Vec<Frame> {
    vec![
        Frame::json(&Ev::RunStarted { thread_id, run_id }),
        Frame::json(&Ev::RunFinished { thread_id, run_id, outcome: None, usage: Vec::new() }),
    ]
}

/// A JSON Patch (RFC 6902) that sets each member of `changed` (an object: what a node changed)
/// under the JSON Pointer `prefix` (RFC 6901: `~` and `/` in keys escaped). `add` replaces a
/// member that exists and creates one that does not.
pub fn state_patch(prefix: &str, changed: &Value) -> Vec<Value> {
    let Value::Object(members) = changed else { return Vec::new() };
    members
        .iter()
        .map(|(key, value)| {
            let key = key.replace('~', "~0").replace('/', "~1");
            json!({"op": "add", "path": format!("{prefix}/{key}"), "value": value})
        })
        .collect()
}

/// `RunFinishedOutcome`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase", rename_all_fields = "camelCase")]
pub(super) enum Outcome<'a> {
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
pub(super) struct Interrupt<'a> {
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
pub(super) struct TokenUsage<'a> {
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
