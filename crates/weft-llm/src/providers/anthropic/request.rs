//! The Anthropic Messages request body built from a [`ModelRequest`].
//!
//! Anthropic wants a top-level `system` and alternating `user`/`assistant` messages:
//! consecutive messages of one role are merged and tool results go into a user message.
//! Thinking blocks are sent back with their signature exactly, to the model that made them (the
//! history is first [prepared](crate::replay::prepare), which turns other models' thinking into
//! text).

use serde_json::{Map, Value, json};
use weft_core::{
    AssistantContent, AssistantMessage, Message, ToolResultMessage, ToolSpec, UserContent,
};

use super::decode::REDACTED_THINKING_MARKER;
use crate::provider::ModelRequest;

/// The provider name on messages this adapter makes.
pub(crate) const PROVIDER: &str = "anthropic";

/// What the body needs besides the request.
pub(crate) struct BodyOptions {
    /// `max_tokens` (required by Anthropic).
    pub(crate) max_tokens: u32,
    /// Extended thinking's token budget, when enabled.
    pub(crate) thinking_budget: Option<u32>,
}

/// The JSON body of a streamed `POST /v1/messages`.
pub(crate) fn body(request: &ModelRequest, messages: &[Message], options: &BodyOptions) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let mut max_tokens = options.max_tokens;
    if let Some(budget) = options.thinking_budget {
        // The budget must be below `max_tokens`, which counts thinking too.
        if max_tokens <= budget {
            max_tokens = budget.saturating_add(options.max_tokens.max(1024));
        }
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages_json(messages, &request.model)));
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool_json).collect());
    }
    match options.thinking_budget {
        Some(budget) => {
            // Extended thinking does not allow changing the temperature.
            body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
        }
        None => {
            if let Some(t) = request.temperature {
                body.insert("temperature".into(), json!(t));
            }
        }
    }
    Value::Object(body)
}

fn tool_json(tool: &ToolSpec) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), json!(tool.name));
    if !tool.description.is_empty() {
        t.insert("description".into(), json!(tool.description));
    }
    let schema = match &tool.parameters {
        Value::Object(_) => tool.parameters.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    t.insert("input_schema".into(), schema);
    Value::Object(t)
}

/// The `messages` array of messages already [prepared](crate::replay::prepare) for this model
/// (failed turns skipped, every call followed by its result, ids valid for Anthropic): tool
/// results become user `tool_result` blocks and consecutive messages of one role are merged.
fn messages_json(messages: &[Message], model: &str) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User(m) => ("user", m.content.iter().filter_map(user_block).collect()),
            Message::ToolResult(r) => ("user", vec![tool_result(r)]),
            Message::Assistant(m) => ("assistant", assistant_blocks(m, model)),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns.into_iter().map(|(role, blocks)| json!({"role": role, "content": blocks})).collect()
}

fn tool_result(result: &ToolResultMessage) -> Value {
    let content: Vec<Value> = result.content.iter().filter_map(user_block).collect();
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(result.tool_call_id));
    if !content.is_empty() {
        block.insert("content".into(), Value::Array(content));
    }
    if result.is_error {
        block.insert("is_error".into(), json!(true));
    }
    Value::Object(block)
}

fn user_block(block: &UserContent) -> Option<Value> {
    match block {
        UserContent::Text(t) if t.text.is_empty() => None,
        UserContent::Text(t) => Some(json!({"type": "text", "text": t.text})),
        UserContent::Image(i) => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
        })),
    }
}

fn assistant_blocks(message: &AssistantMessage, model: &str) -> Vec<Value> {
    let same_model = message.provider == PROVIDER && message.model == model;
    let mut blocks = Vec::new();
    for block in &message.content {
        match block {
            AssistantContent::Text(t) if t.text.is_empty() => {}
            AssistantContent::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
            AssistantContent::Thinking(t) => {
                let signature = t.signature.as_deref().filter(|s| !s.is_empty());
                match signature {
                    Some(sig) if same_model => match sig.strip_prefix(REDACTED_THINKING_MARKER) {
                        Some(data) => {
                            blocks.push(json!({"type": "redacted_thinking", "data": data}))
                        }
                        None => blocks.push(json!({
                            "type": "thinking",
                            "thinking": t.thinking,
                            "signature": sig,
                        })),
                    },
                    // Thinking another model made (or one without a signature) cannot be sent
                    // as thinking: its text is kept as text.
                    _ if !t.thinking.is_empty() => {
                        blocks.push(json!({"type": "text", "text": t.thinking}))
                    }
                    _ => {}
                }
            }
            AssistantContent::ToolCall(call) => {
                let input = match &*call.arguments {
                    Value::Object(_) => Value::clone(&call.arguments),
                    Value::String(raw) => match serde_json::from_str::<Value>(raw) {
                        Ok(v @ Value::Object(_)) => v,
                        _ => json!({}),
                    },
                    _ => json!({}),
                };
                blocks.push(json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": input,
                }));
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use weft_core::{StopReason, TextContent, ThinkingContent, ToolCall, UserMessage};

    use super::*;

    fn assistant(provider: &str, model: &str, content: Vec<AssistantContent>) -> Message {
        let mut m = AssistantMessage::empty(provider, model);
        m.content = content;
        m.stop_reason = StopReason::ToolUse;
        Message::Assistant(m)
    }

    #[test]
    fn roles_alternate_and_results_merge_into_one_user_message() {
        let call = AssistantContent::ToolCall(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: Value::String("{\"a\": 1}".into()).into(),
        });
        let messages = vec![
            Message::User(UserMessage::text("one")),
            Message::User(UserMessage::text("two")),
            assistant("anthropic", "m", vec![call]),
            Message::ToolResult(ToolResultMessage::new("c1", "f", "ok", false)),
            Message::User(UserMessage::text("three")),
            assistant(
                "anthropic",
                "m",
                vec![
                    AssistantContent::Thinking(ThinkingContent {
                        thinking: "unsigned".into(),
                        signature: None,
                    }),
                    AssistantContent::Text(TextContent { text: String::new() }),
                ],
            ),
        ];
        let json = messages_json(&messages, "m");
        assert_eq!(json.len(), 4, "{json:#?}");
        assert_eq!(json[0]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(json[1]["content"][0]["input"], json!({"a": 1}));
        assert_eq!(json[2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(json[2]["content"][1]["text"], "three");
        assert_eq!(json[3]["content"], json!([{"type": "text", "text": "unsigned"}]));
    }
}
