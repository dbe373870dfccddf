//! OpenAI Chat Completions (`POST {base_url}/chat/completions`, `stream: true`), which also serves
//! OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Groq, DeepSeek).
//!
//! The request is built from the [`ModelRequest`]; the stream is decoded by [`ChatDecoder`], a
//! pure state machine over the chunks (`data: {"choices":[{"delta":…}]}` … `data: [DONE]`).
//! Differences between servers are configuration ([`ChatCompat`]), not code paths:
//! servers that reject `stream_options`, reasoning deltas named `reasoning_content` or
//! `reasoning`, `max_tokens` instead of `max_completion_tokens`. Missing tool-call ids get
//! deterministic ids, and arguments delivered in one piece work like streamed ones.

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use weft_core::{AssistantContent, Message, StopReason, ToolSpec, Usage, UserContent};

use crate::CancellationToken;
use crate::dialect::{DecodeFailure, SseDecoder};
use crate::event::{ContentDelta, ProviderEvent};
use crate::http::{self, HttpClient, HttpRequest};
use crate::provider::{ModelRequest, Provider};
use crate::providers::ProviderSettings;
use crate::sse::SseEvent;
use crate::stream::ProviderStream;

/// The provider name of this dialect.
pub const NAME: &str = "openai";

/// Where a server puts its reasoning (thinking) text in streamed deltas.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ReasoningField {
    /// `reasoning_content` (DeepSeek, vLLM, llama.cpp, LM Studio) or `reasoning` (OpenRouter,
    /// Ollama, Groq), whichever a delta has.
    #[default]
    Auto,
    /// Only this field.
    Named(String),
    /// Reasoning deltas are ignored.
    Ignore,
}

/// The request field that limits output tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_completion_tokens` (OpenAI's current name).
    #[default]
    MaxCompletionTokens,
    /// `max_tokens` (the older name most compatible servers know).
    MaxTokens,
}

impl MaxTokensField {
    fn name(self) -> &'static str {
        match self {
            Self::MaxCompletionTokens => "max_completion_tokens",
            Self::MaxTokens => "max_tokens",
        }
    }
}

/// Per-server quirks of the Chat Completions dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatCompat {
    /// Send `stream_options: {"include_usage": true}` (some servers reject the field; without it
    /// they usually send no usage).
    pub stream_options: bool,
    /// Where reasoning deltas are read from.
    pub reasoning_field: ReasoningField,
    /// The output-token limit's field name.
    pub max_tokens_field: MaxTokensField,
    /// Send earlier thinking back on assistant messages in this field (such as
    /// `reasoning_content`); `None` (the default) drops it, as OpenAI does not accept it.
    pub send_reasoning_as: Option<String>,
}

impl Default for ChatCompat {
    fn default() -> Self {
        Self {
            stream_options: true,
            reasoning_field: ReasoningField::Auto,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            send_reasoning_as: None,
        }
    }
}

/// The OpenAI Chat Completions adapter. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    settings: ProviderSettings,
    client: HttpClient,
    compat: ChatCompat,
}

impl OpenAiChat {
    /// An adapter for the server at `settings.base_url` (which includes the version path, such
    /// as `https://api.openai.com/v1`).
    pub fn new(settings: ProviderSettings, client: HttpClient) -> Self {
        Self { settings, client, compat: ChatCompat::default() }
    }

    /// The same adapter with these server quirks.
    pub fn with_compat(mut self, compat: ChatCompat) -> Self {
        self.compat = compat;
        self
    }

    /// The quirks in use.
    pub fn compat(&self) -> &ChatCompat {
        &self.compat
    }

    /// The JSON body this adapter sends for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let messages = crate::replay::prepare(request.messages.shared(), NAME, &request.model);
        build_body(request, &messages, &self.compat)
    }

    fn http_request(&self, body: Value) -> HttpRequest {
        self.settings.bearer_request("/chat/completions", body)
    }
}

impl Provider for OpenAiChat {
    fn name(&self) -> &str {
        NAME
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let body = self.request_body(&request);
        let reasoning = self.compat.reasoning_field.clone();
        let decoder = move || ChatDecoder::new(reasoning.clone());
        let inner = http::sse_call(self.client.clone(), self.http_request(body), decoder);
        let prices = self.settings.prices_for(NAME, &request.model, request.prices);
        ProviderStream::new(NAME, &request.model, prices, cancel, inner)
    }
}

/// Builds the request body from `messages` (already prepared for this provider).
fn build_body(request: &ModelRequest, messages: &[Message], compat: &ChatCompat) -> Value {
    let mut out = Vec::new();
    if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in messages {
        match message {
            Message::User(user) => {
                out.push(json!({"role": "user", "content": user_content(&user.content)}))
            }
            Message::Assistant(assistant) => {
                let mut text = String::new();
                let mut thinking = String::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => text.push_str(&t.text),
                        AssistantContent::Thinking(t) => thinking.push_str(&t.thinking),
                        AssistantContent::ToolCall(call) => calls.push(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments_text(&call.arguments)},
                        })),
                    }
                }
                if text.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut m = Map::new();
                m.insert("role".into(), "assistant".into());
                m.insert("content".into(), if text.is_empty() { Value::Null } else { text.into() });
                if let Some(field) = &compat.send_reasoning_as
                    && !thinking.is_empty()
                {
                    m.insert(field.clone(), thinking.into());
                }
                if !calls.is_empty() {
                    m.insert("tool_calls".into(), calls.into());
                }
                out.push(Value::Object(m));
            }
            Message::ToolResult(result) => {
                let text = result.text();
                out.push(
                    json!({"role": "tool", "tool_call_id": result.tool_call_id, "content": text}),
                );
                // The tool role takes text only: images a tool returned follow as a user message.
                let images: Vec<UserContent> = result
                    .content
                    .iter()
                    .filter(|c| matches!(c, UserContent::Image(_)))
                    .cloned()
                    .collect();
                if !images.is_empty() {
                    let mut blocks = vec![UserContent::text(format!(
                        "Images returned by {}:",
                        result.tool_name
                    ))];
                    blocks.extend(images);
                    out.push(json!({"role": "user", "content": user_content(&blocks)}));
                }
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), request.model.clone().into());
    body.insert("messages".into(), out.into());
    body.insert("stream".into(), true.into());
    if compat.stream_options {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool_json).collect::<Vec<_>>().into());
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(max) = request.max_tokens {
        body.insert(compat.max_tokens_field.name().into(), max.into());
    }
    Value::Object(body)
}

/// A user message's content: a plain string when it is text only (every server takes that),
/// else a list of parts.
fn user_content(blocks: &[UserContent]) -> Value {
    if blocks.iter().all(|b| matches!(b, UserContent::Text(_))) {
        let text: String = blocks
            .iter()
            .filter_map(|b| match b {
                UserContent::Text(t) => Some(t.text.as_str()),
                UserContent::Image(_) => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        return text.into();
    }
    blocks
        .iter()
        .map(|b| match b {
            UserContent::Text(t) => json!({"type": "text", "text": t.text}),
            UserContent::Image(i) => json!({
                "type": "image_url",
                "image_url": {"url": format!("data:{};base64,{}", i.mime_type, i.data)},
            }),
        })
        .collect::<Vec<_>>()
        .into()
}

fn tool_json(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    })
}

/// A tool call's arguments as the JSON text the API wants (raw text kept when it was not JSON).
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    }
}

/// One streamed tool call, keyed by the server's `index`.
#[derive(Debug)]
struct ToolSlot {
    id: Option<String>,
    name: Option<String>,
    /// The content block, once started.
    block: Option<u32>,
    /// Arguments received before the call could start (its name unknown yet).
    pending: String,
}

/// The Chat Completions stream decoder: a pure state machine. See the [module docs](self).
#[derive(Debug)]
pub struct ChatDecoder {
    reasoning: ReasoningField,
    next_index: u32,
    text: Option<u32>,
    thinking: Option<u32>,
    /// Tool calls by the server's index, and the order they appeared in.
    tools: HashMap<u64, ToolSlot>,
    tool_order: Vec<u64>,
    last_tool: Option<u64>,
    finish: Option<Finish>,
    completion_id: Option<String>,
    /// Refusal text (`delta.refusal`): the call ends as an error carrying it.
    refusal: String,
    done: bool,
}

#[derive(Debug, Clone)]
enum Finish {
    Stop(StopReason),
    Error(String),
    /// A `finish_reason` Weft does not know, decided at the end (see [`finish_reason`]).
    Unknown(String),
}

/// A `finish_reason` as Weft reads it.
///
/// OpenAI documents `stop`, `length`, `tool_calls`, `content_filter` and the legacy
/// `function_call`. Compatible servers add their own names for the same ends, read as such:
/// `end_turn`, `stop_sequence`, `eos`, `eos_token` (a natural end: `stop`), `max_tokens`
/// (`length`), `tool_use` (`tool_use`); `safety`, `refusal`, `recitation` and `error` are errors
/// naming the reason, like `content_filter`. Any other value is [`Finish::Unknown`]: the content
/// is kept whatever it is, and the call ends as `tool_use` if it holds tool calls (they are
/// complete once a finish reason is sent), else as `error` naming the reason (it may be a cut
/// the server has its own word for).
fn finish_reason(reason: &str) -> Finish {
    match reason {
        "stop" | "end_turn" | "stop_sequence" | "eos" | "eos_token" => {
            Finish::Stop(StopReason::Stop)
        }
        "length" | "max_tokens" => Finish::Stop(StopReason::Length),
        "tool_calls" | "function_call" | "tool_use" => Finish::Stop(StopReason::ToolUse),
        "content_filter" | "safety" | "refusal" | "recitation" | "error" => {
            Finish::Error(format!("the provider stopped the response: {reason}"))
        }
        other => Finish::Unknown(other.to_string()),
    }
}

impl ChatDecoder {
    /// A decoder reading reasoning deltas from `reasoning`.
    pub fn new(reasoning: ReasoningField) -> Self {
        Self {
            reasoning,
            next_index: 0,
            text: None,
            thinking: None,
            tools: HashMap::new(),
            tool_order: Vec::new(),
            last_tool: None,
            finish: None,
            completion_id: None,
            refusal: String::new(),
            done: false,
        }
    }

    fn start(&mut self) -> u32 {
        let i = self.next_index;
        self.next_index += 1;
        i
    }

    fn close_text(&mut self, out: &mut Vec<ProviderEvent>) {
        if let Some(index) = self.text.take() {
            out.push(ProviderEvent::Content(ContentDelta::TextEnd { index }));
        }
    }

    fn close_thinking(&mut self, out: &mut Vec<ProviderEvent>) {
        if let Some(index) = self.thinking.take() {
            out.push(ProviderEvent::Content(ContentDelta::ThinkingEnd { index }));
        }
    }

    fn thinking_delta(&mut self, delta: &str, out: &mut Vec<ProviderEvent>) {
        if delta.is_empty() {
            return;
        }
        self.close_text(out);
        let index = match self.thinking {
            Some(i) => i,
            None => {
                let i = self.start();
                self.thinking = Some(i);
                out.push(ProviderEvent::Content(ContentDelta::ThinkingStart { index: i }));
                i
            }
        };
        out.push(ProviderEvent::Content(ContentDelta::ThinkingDelta {
            index,
            delta: delta.to_string(),
        }));
    }

    fn text_delta(&mut self, delta: &str, out: &mut Vec<ProviderEvent>) {
        if delta.is_empty() {
            return;
        }
        self.close_thinking(out);
        let index = match self.text {
            Some(i) => i,
            None => {
                let i = self.start();
                self.text = Some(i);
                out.push(ProviderEvent::Content(ContentDelta::TextStart { index: i }));
                i
            }
        };
        out.push(ProviderEvent::Content(ContentDelta::TextDelta {
            index,
            delta: delta.to_string(),
        }));
    }

    fn tool_delta(&mut self, call: &Value, out: &mut Vec<ProviderEvent>) {
        let id = call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
        let function = call.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
        let arguments = function.and_then(|f| f.get("arguments"));
        // The key: the server's index; servers that omit it send each call whole, told apart by
        // a new id (else the delta continues the last call).
        let key = match call.get("index").and_then(Value::as_u64) {
            Some(k) => k,
            None => {
                // A name only comes with a call's first delta; an id names the call.
                let continues = match (id, name) {
                    (Some(id), _) => self
                        .last_tool
                        .and_then(|last| self.tools.get(&last))
                        .is_some_and(|s| s.id.as_deref() == Some(id)),
                    (None, Some(_)) => false,
                    (None, None) => true,
                };
                match self.last_tool {
                    Some(last) if continues => last,
                    _ => 1_000_000 + self.tool_order.len() as u64,
                }
            }
        };
        if let std::collections::hash_map::Entry::Vacant(slot) = self.tools.entry(key) {
            slot.insert(ToolSlot { id: None, name: None, block: None, pending: String::new() });
            self.tool_order.push(key);
        }
        self.last_tool = Some(key);
        self.close_text(out);
        self.close_thinking(out);
        let started = {
            let Some(slot) = self.tools.get_mut(&key) else { return };
            if slot.id.is_none() {
                slot.id = id.map(str::to_string);
            }
            if slot.name.is_none() {
                slot.name = name.filter(|n| !n.is_empty()).map(str::to_string);
            }
            slot.block.is_some()
        };
        let text = match arguments {
            Some(Value::String(s)) => s.clone(),
            // Some servers send the arguments as an object.
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        };
        if started {
            if let Some(index) = self.tools.get(&key).and_then(|s| s.block)
                && !text.is_empty()
            {
                out.push(ProviderEvent::Content(ContentDelta::ToolCallDelta {
                    index,
                    delta: text,
                }));
            }
            return;
        }
        let has_name = self.tools.get(&key).is_some_and(|s| s.name.is_some());
        if has_name {
            self.start_tool(key, out);
            if let Some(index) = self.tools.get(&key).and_then(|s| s.block)
                && !text.is_empty()
            {
                out.push(ProviderEvent::Content(ContentDelta::ToolCallDelta {
                    index,
                    delta: text,
                }));
            }
        } else if let Some(slot) = self.tools.get_mut(&key) {
            slot.pending.push_str(&text);
        }
    }

    /// Starts the call at `key` with the next block index (and flushes arguments held back).
    fn start_tool(&mut self, key: u64, out: &mut Vec<ProviderEvent>) {
        let index = self.start();
        let generated = self.generated_id(index);
        let Some(slot) = self.tools.get_mut(&key) else { return };
        let id = slot.id.clone().unwrap_or(generated);
        slot.id = Some(id.clone());
        slot.block = Some(index);
        let name = slot.name.clone().unwrap_or_default();
        let pending = std::mem::take(&mut slot.pending);
        out.push(ProviderEvent::Content(ContentDelta::ToolCallStart { index, id, name }));
        if !pending.is_empty() {
            out.push(ProviderEvent::Content(ContentDelta::ToolCallDelta { index, delta: pending }));
        }
    }

    /// A deterministic id for a call the server sent without one.
    fn generated_id(&self, index: u32) -> String {
        let base: String = self
            .completion_id
            .as_deref()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(40)
            .collect();
        if base.is_empty() { format!("call_{index}") } else { format!("call_{base}_{index}") }
    }

    /// Closes every open block, in content order.
    fn close_all(&mut self, out: &mut Vec<ProviderEvent>) {
        self.close_thinking(out);
        self.close_text(out);
        for key in std::mem::take(&mut self.tool_order) {
            let block = self.tools.get(&key).and_then(|s| s.block);
            let block = match block {
                Some(b) => b,
                None => {
                    self.start_tool(key, out);
                    match self.tools.get(&key).and_then(|s| s.block) {
                        Some(b) => b,
                        None => continue,
                    }
                }
            };
            out.push(ProviderEvent::Content(ContentDelta::ToolCallEnd { index: block }));
        }
        self.tools.clear();
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.done {
            return;
        }
        self.done = true;
        let calls = !self.tool_order.is_empty();
        self.close_all(out);
        if !self.refusal.is_empty() {
            let message = format!("the model refused: {}", self.refusal);
            out.push(ProviderEvent::Error { reason: StopReason::Error, message });
            return;
        }
        match self.finish.take() {
            Some(Finish::Error(message)) => {
                out.push(ProviderEvent::Error { reason: StopReason::Error, message })
            }
            // Some servers (Gemini's OpenAI-compatible endpoint, older Ollama) say `stop` for a
            // turn that calls tools: the calls are what the turn asks for.
            Some(Finish::Stop(StopReason::Stop)) if calls => {
                out.push(ProviderEvent::Done { stop_reason: StopReason::ToolUse })
            }
            Some(Finish::Stop(stop_reason)) => out.push(ProviderEvent::Done { stop_reason }),
            Some(Finish::Unknown(_)) if calls => {
                out.push(ProviderEvent::Done { stop_reason: StopReason::ToolUse })
            }
            Some(Finish::Unknown(reason)) => out.push(ProviderEvent::Error {
                reason: StopReason::Error,
                message: format!(
                    "the provider stopped the response for a reason Weft does not know: {reason}"
                ),
            }),
            None => out.push(ProviderEvent::Done {
                stop_reason: if calls { StopReason::ToolUse } else { StopReason::Stop },
            }),
        }
    }

    fn usage(usage: &Value) -> Option<Usage> {
        let n = |v: Option<&Value>| v.and_then(super::token_count).unwrap_or(0);
        let prompt = n(usage.get("prompt_tokens"));
        let completion = n(usage.get("completion_tokens"));
        let cached = n(usage.pointer("/prompt_tokens_details/cached_tokens"))
            .max(n(usage.get("prompt_cache_hit_tokens")));
        let reasoning = usage
            .pointer("/completion_tokens_details/reasoning_tokens")
            .and_then(super::token_count);
        if !usage.is_object() {
            return None;
        }
        let mut u = Usage::new(prompt.saturating_sub(cached), completion, cached, 0);
        u.reasoning = reasoning;
        Some(u)
    }
}

impl SseDecoder for ChatDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        if self.done {
            return Ok(());
        }
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.finish(out);
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            DecodeFailure::fatal(format!("the provider sent malformed JSON in its stream: {e}"))
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let detail = http::error_detail(&error.to_string());
            let detail = if detail.is_empty() { "unknown error".to_string() } else { detail };
            let message = format!("the provider reported an error: {detail}");
            let lower = detail.to_ascii_lowercase();
            let transient =
                ["overloaded", "rate limit", "rate_limit"].iter().any(|w| lower.contains(w));
            if transient && self.next_index == 0 {
                // Nothing streamed yet: the provider asks to try again.
                self.done = true;
                return Err(DecodeFailure::retryable(message));
            }
            self.finish = Some(Finish::Error(message));
            self.finish(out);
            return Ok(());
        }
        if self.completion_id.is_none() {
            self.completion_id = chunk.get("id").and_then(Value::as_str).map(str::to_string);
        }
        // Usage first: a consumer that stops at this chunk's content still has it.
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()).and_then(Self::usage) {
            out.push(ProviderEvent::Usage(usage));
        }
        if let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first())
        {
            if let Some(delta) = choice.get("delta") {
                let reasoning = match &self.reasoning {
                    ReasoningField::Auto => delta
                        .get("reasoning_content")
                        .and_then(Value::as_str)
                        .or_else(|| delta.get("reasoning").and_then(Value::as_str)),
                    ReasoningField::Named(field) => delta.get(field).and_then(Value::as_str),
                    ReasoningField::Ignore => None,
                };
                if let Some(r) = reasoning {
                    self.thinking_delta(r, out);
                }
                if let Some(text) = delta.get("content").and_then(Value::as_str) {
                    self.text_delta(text, out);
                }
                if let Some(refusal) = delta.get("refusal").and_then(Value::as_str) {
                    self.refusal.push_str(refusal);
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for call in calls {
                        self.tool_delta(call, out);
                    }
                }
                // The legacy single `function_call` delta.
                if let Some(f) = delta.get("function_call").filter(|f| f.is_object()) {
                    let call = json!({"index": 0, "function": f});
                    self.tool_delta(&call, out);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str)
                && !matches!(self.finish, Some(Finish::Error(_)))
            {
                self.finish = Some(finish_reason(reason));
            }
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.done {
            return;
        }
        if self.finish.is_some() {
            // Some servers end the body without `[DONE]` after the finish reason.
            self.finish(out);
            return;
        }
        self.done = true;
        self.close_all(out);
        out.push(ProviderEvent::Error {
            reason: StopReason::Error,
            message: "the model's stream ended before it finished (no finish reason, no [DONE])"
                .to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(lines: &[&str]) -> Vec<ProviderEvent> {
        let mut d = ChatDecoder::new(ReasoningField::Auto);
        let mut out = Vec::new();
        for line in lines {
            let event = SseEvent { data: (*line).to_string(), ..SseEvent::default() };
            d.event(&event, &mut out).unwrap();
        }
        d.end(&mut out);
        out
    }

    #[test]
    fn arguments_in_one_piece_without_ids_or_index() {
        let out = decode(&[
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":"{\"x\":1}"}},{"function":{"name":"b","arguments":{"y":2}}}]}}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let starts: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::Content(ContentDelta::ToolCallStart { index, id, name }) => {
                    Some((*index, id.clone(), name.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            vec![
                (0, "call_chatcmpl1_0".to_string(), "a".to_string()),
                (1, "call_chatcmpl1_1".to_string(), "b".to_string())
            ]
        );
        assert_eq!(out.last(), Some(&ProviderEvent::Done { stop_reason: StopReason::ToolUse }));
    }
}
