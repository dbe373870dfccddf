//! OpenAI Responses (`POST {base_url}/responses`, `stream: true`).
//!
//! The request is built from the [`ModelRequest`] with `store: false` and
//! `include: ["reasoning.encrypted_content"]`, so a reasoning model's reasoning items come back
//! encrypted; each is kept on its thinking block (the block's `signature` holds the item's JSON)
//! and sent back exactly on the next request to the same model. Tool call ids are
//! `{call_id}|{item_id}`: the function call's `call_id` (what results refer to) and its output
//! item id (what a reasoning item must be followed by), split again when sent back.
//!
//! The stream is decoded by [`ResponsesDecoder`], a pure state machine over the semantic events
//! (`response.output_item.added`, `response.output_text.delta`,
//! `response.reasoning_summary_text.delta`, `response.function_call_arguments.delta`,
//! `response.output_item.done`, `response.completed` / `response.incomplete` /
//! `response.failed`, `error`).

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
pub const NAME: &str = "openai-responses";

/// The OpenAI Responses adapter. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct OpenAiResponses {
    settings: ProviderSettings,
    client: HttpClient,
    reasoning_summary: Option<Option<String>>,
}

impl OpenAiResponses {
    /// An adapter for the server at `settings.base_url` (which includes the version path, such
    /// as `https://api.openai.com/v1`).
    pub fn new(settings: ProviderSettings, client: HttpClient) -> Self {
        Self { settings, client, reasoning_summary: None }
    }

    /// Asks for reasoning summaries (`reasoning: {"summary": …}`, such as `auto` or
    /// `detailed`), or with `None` never sends `reasoning`. By default `auto` is asked of
    /// reasoning models (`o1`, `o3`, `o4-mini`, `gpt-5` … by name) only, since other models
    /// reject the field.
    pub fn with_reasoning_summary(mut self, summary: Option<String>) -> Self {
        self.reasoning_summary = Some(summary);
        self
    }

    /// The JSON body this adapter sends for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let messages = crate::replay::prepare(request.messages.shared(), NAME, &request.model);
        let summary = match &self.reasoning_summary {
            Some(choice) => choice.clone(),
            None => is_reasoning_model(&request.model).then(|| "auto".to_string()),
        };
        build_body(request, &messages, summary.as_deref())
    }

    fn http_request(&self, body: Value) -> HttpRequest {
        self.settings.bearer_request("/responses", body)
    }
}

impl Provider for OpenAiResponses {
    fn name(&self) -> &str {
        NAME
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let body = self.request_body(&request);
        let inner =
            http::sse_call(self.client.clone(), self.http_request(body), ResponsesDecoder::new);
        let prices = self.settings.prices_for(NAME, &request.model, request.prices);
        ProviderStream::new(NAME, &request.model, prices, cancel, inner)
    }
}

/// Whether `model` is (by its name) an OpenAI reasoning model, which takes `reasoning`.
fn is_reasoning_model(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    let o_series = m.starts_with('o') && m.chars().nth(1).is_some_and(|c| c.is_ascii_digit());
    o_series || m.starts_with("gpt-5") || m.contains("codex")
}

/// Builds the request body from `messages` (already prepared for this provider).
fn build_body(request: &ModelRequest, messages: &[Message], summary: Option<&str>) -> Value {
    let mut input = Vec::new();
    for message in messages {
        match message {
            Message::User(user) => {
                let content: Vec<Value> = user.content.iter().map(input_part).collect();
                input.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(assistant) => assistant_items(assistant, &request.model, &mut input),
            Message::ToolResult(result) => tool_result_items(result, &mut input),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), request.model.clone().into());
    if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), system.into());
    }
    body.insert("input".into(), input.into());
    body.insert("stream".into(), true.into());
    body.insert("store".into(), false.into());
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool_json).collect::<Vec<_>>().into());
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(max) = request.max_tokens {
        body.insert("max_output_tokens".into(), max.into());
    }
    if let Some(summary) = summary {
        body.insert("reasoning".into(), json!({"summary": summary}));
    }
    Value::Object(body)
}

/// The input items of an assistant message: its reasoning items (those this API made), text
/// messages and function calls; `model` is the model the request is for.
fn assistant_items(assistant: &weft_core::AssistantMessage, model: &str, input: &mut Vec<Value>) {
    // Output item ids (`fc_…`) are only valid with the reasoning items of the model
    // that made them, which only the same model gets back.
    let same_model = assistant.provider == NAME && assistant.model == model;
    for (i, block) in assistant.content.iter().enumerate() {
        match block {
            AssistantContent::Thinking(t) => {
                // Only reasoning items this API made can go back (sent exactly).
                if let Some(item) = t
                    .signature
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .filter(|v| v.get("type").and_then(Value::as_str) == Some("reasoning"))
                {
                    input.push(item);
                }
            }
            AssistantContent::Text(t) => {
                if t.text.is_empty() {
                    continue;
                }
                input.push(json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": t.text, "annotations": []}],
                    "status": "completed",
                    "id": format!("msg_{}_{i}", assistant.timestamp),
                }));
            }
            AssistantContent::ToolCall(call) => {
                let (call_id, item_id) = split_call_id(&call.id);
                let mut item = Map::new();
                item.insert("type".into(), "function_call".into());
                if let Some(item_id) = item_id.filter(|_| same_model) {
                    item.insert("id".into(), item_id.into());
                }
                item.insert("call_id".into(), call_id.into());
                item.insert("name".into(), call.name.clone().into());
                item.insert(
                    "arguments".into(),
                    super::openai_chat::arguments_text(&call.arguments).into(),
                );
                input.push(Value::Object(item));
            }
        }
    }
}

/// The input items of a tool result: its `function_call_output`, and a user message with its
/// images if it has any.
fn tool_result_items(result: &weft_core::ToolResultMessage, input: &mut Vec<Value>) {
    let (call_id, _) = split_call_id(&result.tool_call_id);
    input.push(json!({
        "type": "function_call_output",
        "call_id": call_id,
        "output": result.text(),
    }));
    let images: Vec<Value> = result
        .content
        .iter()
        .filter(|c| matches!(c, UserContent::Image(_)))
        .map(input_part)
        .collect();
    if !images.is_empty() {
        let mut content = vec![json!({
            "type": "input_text",
            "text": format!("Images returned by {}:", result.tool_name),
        })];
        content.extend(images);
        input.push(json!({"role": "user", "content": content}));
    }
}

fn input_part(block: &UserContent) -> Value {
    match block {
        UserContent::Text(t) => json!({"type": "input_text", "text": t.text}),
        UserContent::Image(i) => json!({
            "type": "input_image",
            "image_url": format!("data:{};base64,{}", i.mime_type, i.data),
        }),
    }
}

fn tool_json(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": false,
    })
}

/// `call_id|item_id` → (`call_id`, `Some(item_id)`); an id without `|` is a plain call id.
fn split_call_id(id: &str) -> (&str, Option<&str>) {
    match id.split_once('|') {
        Some((call, item)) if !item.is_empty() => (call, Some(item)),
        Some((call, _)) => (call, None),
        None => (id, None),
    }
}

/// What an output item became in the message.
#[derive(Debug)]
struct Item {
    kind: Kind,
    /// The content block.
    index: u32,
    /// Whether any delta arrived (else the `done` event's full value is used).
    streamed: bool,
    /// The last reasoning summary part seen (parts are joined with a blank line).
    summary_part: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    Call,
}

/// The Responses stream decoder: a pure state machine. See the [module docs](self).
#[derive(Debug, Default)]
pub struct ResponsesDecoder {
    next_index: u32,
    /// Output items by `output_index`.
    items: HashMap<u64, Item>,
    /// Items still open, in the order they started.
    open: Vec<u64>,
    saw_call: bool,
    /// A function call item was complete (its `response.output_item.done` came).
    complete_call: bool,
    saw_content: bool,
    refusal: String,
    done: bool,
}

impl ResponsesDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A delta of a reasoning item's summary (or text): a new summary part is set off from the
    /// previous one by a blank line.
    fn reasoning_delta(
        &mut self,
        key: u64,
        part: Option<u64>,
        delta: &str,
        out: &mut Vec<ProviderEvent>,
    ) {
        let separator = match self.items.get_mut(&key) {
            Some(item) if item.kind == Kind::Thinking => {
                let sep = item.streamed && part.is_some() && item.summary_part != part;
                if part.is_some() {
                    item.summary_part = part;
                }
                sep
            }
            _ => false,
        };
        if separator {
            self.delta(key, Kind::Thinking, "\n\n", out);
        }
        self.delta(key, Kind::Thinking, delta, out);
    }

    /// An `error` event: retried when it is transient and nothing was streamed yet, the end of
    /// the stream otherwise.
    fn stream_error(
        &mut self,
        v: &Value,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        let error = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
        let text = error_text(Some(error));
        let message = format!("the provider reported an error: {text}");
        let lower = text.to_ascii_lowercase();
        let transient = ["overloaded", "rate_limit", "rate limit", "server_error"]
            .iter()
            .any(|w| lower.contains(w));
        if transient && !self.saw_content {
            self.done = true;
            return Err(DecodeFailure::retryable(message));
        }
        self.terminal(ProviderEvent::Error { reason: StopReason::Error, message }, out);
        Ok(())
    }

    fn start(&mut self, key: u64, kind: Kind, out: &mut Vec<ProviderEvent>, id: &str, name: &str) {
        let index = self.next_index;
        self.next_index += 1;
        self.saw_content = true;
        out.push(ProviderEvent::Content(match kind {
            Kind::Text => ContentDelta::TextStart { index },
            Kind::Thinking => ContentDelta::ThinkingStart { index },
            Kind::Call => {
                ContentDelta::ToolCallStart { index, id: id.to_string(), name: name.to_string() }
            }
        }));
        if kind == Kind::Call {
            self.saw_call = true;
        }
        self.items.insert(key, Item { kind, index, streamed: false, summary_part: None });
        self.open.push(key);
    }

    /// The open item at `key` of `kind`, started (as an item without id) if there is none.
    fn item(&mut self, key: u64, kind: Kind, out: &mut Vec<ProviderEvent>) -> Option<&mut Item> {
        match self.items.get(&key) {
            Some(i) if i.kind == kind && self.open.contains(&key) => {}
            // An item of another kind, or one already done: not ours to extend.
            Some(_) => return None,
            None => self.start(key, kind, out, "", ""),
        }
        self.items.get_mut(&key)
    }

    fn close(&mut self, key: u64, out: &mut Vec<ProviderEvent>) {
        let Some(pos) = self.open.iter().position(|k| *k == key) else { return };
        self.open.remove(pos);
        if let Some(item) = self.items.get(&key) {
            let index = item.index;
            out.push(ProviderEvent::Content(match item.kind {
                Kind::Text => ContentDelta::TextEnd { index },
                Kind::Thinking => ContentDelta::ThinkingEnd { index },
                Kind::Call => ContentDelta::ToolCallEnd { index },
            }));
        }
    }

    fn close_all(&mut self, out: &mut Vec<ProviderEvent>) {
        for key in self.open.clone() {
            self.close(key, out);
        }
    }

    fn terminal(&mut self, event: ProviderEvent, out: &mut Vec<ProviderEvent>) {
        self.close_all(out);
        self.done = true;
        out.push(event);
    }

    fn usage(response: &Value, out: &mut Vec<ProviderEvent>) {
        let Some(usage) = response.get("usage").filter(|u| u.is_object()) else { return };
        let n = |p: &str| usage.pointer(p).and_then(super::token_count).unwrap_or(0);
        let cached = n("/input_tokens_details/cached_tokens");
        let mut u =
            Usage::new(n("/input_tokens").saturating_sub(cached), n("/output_tokens"), cached, 0);
        u.reasoning =
            usage.pointer("/output_tokens_details/reasoning_tokens").and_then(super::token_count);
        out.push(ProviderEvent::Usage(u));
    }

    fn output_item_added(&mut self, key: u64, item: &Value, out: &mut Vec<ProviderEvent>) {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => self.start(key, Kind::Text, out, "", ""),
            Some("reasoning") => self.start(key, Kind::Thinking, out, "", ""),
            Some("function_call") => {
                let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                let item_id = item.get("id").and_then(Value::as_str).unwrap_or("");
                let id = if item_id.is_empty() {
                    call_id.to_string()
                } else {
                    format!("{call_id}|{item_id}")
                };
                let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                self.start(key, Kind::Call, out, &id, name);
                if let Some(args) = item.get("arguments").and_then(Value::as_str)
                    && !args.is_empty()
                    && let Some(it) = self.items.get_mut(&key)
                {
                    it.streamed = true;
                    let index = it.index;
                    out.push(ProviderEvent::Content(ContentDelta::ToolCallDelta {
                        index,
                        delta: args.to_string(),
                    }));
                }
            }
            // Built-in tools (web search …) are not content of the message.
            _ => {}
        }
    }

    fn output_item_done(&mut self, key: u64, item: &Value, out: &mut Vec<ProviderEvent>) {
        let kind = match item.get("type").and_then(Value::as_str) {
            Some("message") => Kind::Text,
            Some("reasoning") => Kind::Thinking,
            Some("function_call") => Kind::Call,
            _ => return,
        };
        if !self.items.contains_key(&key) {
            self.output_item_added(key, item, out);
        }
        let Some(it) = self.items.get(&key).filter(|i| i.kind == kind) else { return };
        let (index, streamed) = (it.index, it.streamed);
        if !self.open.contains(&key) {
            return;
        }
        match kind {
            Kind::Text if !streamed => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                if !text.is_empty() {
                    out.push(ProviderEvent::Content(ContentDelta::TextDelta {
                        index,
                        delta: text,
                    }));
                }
            }
            Kind::Thinking => {
                if !streamed {
                    let parts: Vec<&str> = item
                        .get("summary")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect();
                    let text = parts.join("\n\n");
                    if !text.is_empty() {
                        out.push(ProviderEvent::Content(ContentDelta::ThinkingDelta {
                            index,
                            delta: text,
                        }));
                    }
                }
                // The whole item is the signature: sent back exactly on the next request.
                out.push(ProviderEvent::Content(ContentDelta::ThinkingSignature {
                    index,
                    signature: item.to_string(),
                }));
            }
            Kind::Call if !streamed => {
                if let Some(args) = item.get("arguments").and_then(Value::as_str)
                    && !args.is_empty()
                {
                    out.push(ProviderEvent::Content(ContentDelta::ToolCallDelta {
                        index,
                        delta: args.to_string(),
                    }));
                }
            }
            _ => {}
        }
        self.complete_call |= kind == Kind::Call;
        self.close(key, out);
    }

    fn delta(&mut self, key: u64, kind: Kind, delta: &str, out: &mut Vec<ProviderEvent>) {
        if delta.is_empty() {
            return;
        }
        let Some(item) = self.item(key, kind, out) else { return };
        item.streamed = true;
        let index = item.index;
        let delta = delta.to_string();
        out.push(ProviderEvent::Content(match kind {
            Kind::Text => ContentDelta::TextDelta { index, delta },
            Kind::Thinking => ContentDelta::ThinkingDelta { index, delta },
            Kind::Call => ContentDelta::ToolCallDelta { index, delta },
        }));
    }
}

impl ResponsesDecoder {
    /// The terminal event of a `response.completed` or `response.incomplete` event (`kind`)
    /// carrying `response`.
    ///
    /// The status is the response's `status`, or the event's (`incomplete` for
    /// `response.incomplete` whatever the field says). `completed` ends normally (`tool_use` with
    /// function calls, else `stop`). `incomplete` with `incomplete_details.reason`
    /// `max_output_tokens` (or none) is `length`, with `content_filter` an error naming it.
    /// `failed` and `cancelled` are errors. A reason or status Weft does not know (one added after
    /// this was written) does not throw a complete answer away: with a complete function call the
    /// call ends as `tool_use` (the calls run); without, the content is kept and the call ends as
    /// an error naming it.
    fn end_event(&self, kind: &str, response: &Value) -> ProviderEvent {
        let error = |message: String| ProviderEvent::Error { reason: StopReason::Error, message };
        let reason = response.pointer("/incomplete_details/reason").and_then(Value::as_str);
        let status = match response.get("status").and_then(Value::as_str) {
            _ if kind == "response.incomplete" => "incomplete",
            Some(status) => status,
            None => "completed",
        };
        match (status, reason) {
            ("completed", _) if self.saw_call => {
                ProviderEvent::Done { stop_reason: StopReason::ToolUse }
            }
            ("completed", _) => ProviderEvent::Done { stop_reason: StopReason::Stop },
            ("incomplete", Some("max_output_tokens") | None) => {
                ProviderEvent::Done { stop_reason: StopReason::Length }
            }
            ("incomplete", Some("content_filter")) => {
                error("the provider stopped the response: content_filter".to_string())
            }
            ("failed" | "cancelled", _) => {
                let detail = match response.get("error").filter(|e| !e.is_null()) {
                    Some(e) => format!(": {}", error_text(Some(e))),
                    None => String::new(),
                };
                error(format!("the provider ended the response as {status}{detail}"))
            }
            _ if self.complete_call => ProviderEvent::Done { stop_reason: StopReason::ToolUse },
            ("incomplete", Some(other)) => error(format!(
                "the provider stopped the response for a reason Weft does not know: {other}"
            )),
            (other, _) => error(format!(
                "the provider ended the response with a status Weft does not know: {other}"
            )),
        }
    }
}

/// The readable text of an error object (`{"code","message"}`).
fn error_text(error: Option<&Value>) -> String {
    let Some(error) = error.filter(|e| !e.is_null()) else { return "unknown error".to_string() };
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let code =
        error.get("code").or_else(|| error.get("type")).and_then(Value::as_str).unwrap_or("");
    match (message.is_empty(), code.is_empty()) {
        (false, false) if !message.contains(code) => format!("{message} ({code})"),
        (false, _) => message.to_string(),
        (true, false) => code.to_string(),
        (true, true) => http::error_detail(&error.to_string()),
    }
}

impl SseDecoder for ResponsesDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        if self.done {
            return Ok(());
        }
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            DecodeFailure::fatal(format!("the provider sent malformed JSON in its stream: {e}"))
        })?;
        let kind = v.get("type").and_then(Value::as_str).or(event.event.as_deref()).unwrap_or("");
        let key = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let delta = v.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.output_item.added" => {
                if let Some(item) = v.get("item") {
                    self.output_item_added(key, item, out);
                }
            }
            "response.output_item.done" => {
                if let Some(item) = v.get("item") {
                    self.output_item_done(key, item, out);
                }
            }
            "response.output_text.delta" => self.delta(key, Kind::Text, delta, out),
            "response.refusal.delta" => {
                self.refusal.push_str(delta);
                self.delta(key, Kind::Text, delta, out);
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let part = v.get("summary_index").and_then(Value::as_u64);
                self.reasoning_delta(key, part, delta, out);
            }
            "response.function_call_arguments.delta" => self.delta(key, Kind::Call, delta, out),
            "response.function_call_arguments.done" => {
                let streamed = self.items.get(&key).is_some_and(|i| i.streamed);
                if !streamed && let Some(args) = v.get("arguments").and_then(Value::as_str) {
                    self.delta(key, Kind::Call, args, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = v.get("response").cloned().unwrap_or(Value::Null);
                Self::usage(&response, out);
                let event = if !self.refusal.is_empty() {
                    ProviderEvent::Error {
                        reason: StopReason::Error,
                        message: format!("the model refused: {}", self.refusal),
                    }
                } else {
                    self.end_event(kind, &response)
                };
                self.terminal(event, out);
            }
            "response.failed" => {
                let response = v.get("response").cloned().unwrap_or(Value::Null);
                Self::usage(&response, out);
                let message = format!(
                    "the provider reported an error: {}",
                    error_text(response.get("error"))
                );
                self.terminal(ProviderEvent::Error { reason: StopReason::Error, message }, out);
            }
            "error" => return self.stream_error(&v, out),
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.done {
            return;
        }
        let message =
            "the model's stream ended before it finished (no response.completed)".to_string();
        self.terminal(ProviderEvent::Error { reason: StopReason::Error, message }, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(d: &mut ResponsesDecoder, data: &str, out: &mut Vec<ProviderEvent>) -> bool {
        let event = SseEvent { data: data.to_string(), ..SseEvent::default() };
        d.event(&event, out).is_ok()
    }

    #[test]
    fn arguments_only_in_the_done_item_still_arrive() {
        let mut d = ResponsesDecoder::new();
        let mut out = Vec::new();
        let added = r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":""}}"#;
        let done = r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}}"#;
        assert!(feed(&mut d, added, &mut out) && feed(&mut d, done, &mut out));
        assert!(feed(
            &mut d,
            r#"{"type":"response.completed","response":{"status":"completed"}}"#,
            &mut out
        ));
        assert_eq!(
            out,
            vec![
                ProviderEvent::Content(ContentDelta::ToolCallStart {
                    index: 0,
                    id: "call_1|fc_1".into(),
                    name: "f".into()
                }),
                ProviderEvent::Content(ContentDelta::ToolCallDelta {
                    index: 0,
                    delta: "{\"a\":1}".into()
                }),
                ProviderEvent::Content(ContentDelta::ToolCallEnd { index: 0 }),
                ProviderEvent::Done { stop_reason: StopReason::ToolUse },
            ]
        );
    }

    #[test]
    fn overloaded_before_content_is_retryable_after_content_an_error() {
        let error = r#"{"type":"error","code":"server_is_overloaded","message":"Overloaded"}"#;
        let mut d = ResponsesDecoder::new();
        let mut out = Vec::new();
        let event = SseEvent { data: error.to_string(), ..SseEvent::default() };
        assert!(d.event(&event, &mut out).is_err_and(|f| f.retryable));
        let mut d = ResponsesDecoder::new();
        let delta = r#"{"type":"response.output_text.delta","output_index":0,"delta":"Hi"}"#;
        assert!(feed(&mut d, delta, &mut out) && feed(&mut d, error, &mut out));
        assert!(matches!(out.last(), Some(ProviderEvent::Error { .. })));
        assert!(out.contains(&ProviderEvent::Content(ContentDelta::TextEnd { index: 0 })));
    }

    #[test]
    fn call_ids_split() {
        assert_eq!(split_call_id("call_1|fc_2"), ("call_1", Some("fc_2")));
        assert_eq!(split_call_id("call_1"), ("call_1", None));
        assert!(is_reasoning_model("o4-mini") && is_reasoning_model("gpt-5.1"));
        assert!(!is_reasoning_model("gpt-4o") && !is_reasoning_model("omni"));
    }
}
