//! Google Gemini: `POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`.
//!
//! The API key travels in the `x-goog-api-key` header, never in the URL. Each SSE `data:` line
//! is a whole `GenerateContentResponse`; the stream has no end marker, so the call is complete
//! when the body ends after a chunk carrying a `finishReason`.
//!
//! # Thought signatures
//!
//! Gemini attaches an opaque `thoughtSignature` to some parts (thought parts, the last text part
//! of an answer, the first `functionCall` part of each step) and requires it back, unchanged, on
//! the same part when the history is sent again to the same model. The canonical message keeps
//! them as follows:
//!
//! - on a **thought** part: the signature of the thinking block that part belongs to (a thought
//!   part carrying a signature when its block already has one starts a new block);
//! - on a **text** or **`functionCall`** part: a *signature carrier*, a thinking block with empty
//!   text and that signature, placed **right after** the text or tool-call block it belongs to
//!   (the text block is closed there; more text starts a new block).
//!
//! When building a request, a carrier puts its signature back on the part just before it (the
//! text part or the `functionCall` part); a carrier with no such part before it (or whose part
//! already carries one) is sent as `{"text": "", "thoughtSignature": …}`, the shape Gemini sends
//! signatures alone in. A thinking block with text is sent as a thought part
//! (`{"thought": true, "text", "thoughtSignature"?}`).
//!
//! Conversations made by another provider or model are first converted by
//! [`replay::prepare`](crate::replay), which drops signatures Gemini did not make.
//!
//! # Tool calls
//!
//! Gemini sends each `functionCall` whole; it becomes a tool-call start, one argument delta (the
//! `args` JSON) and an end. Its id is the call's `id` when Gemini sends one, else
//! `call_{responseId}_{n}` (`call_{n}` without a response id): deterministic for a given stream.
//! Tool results go back as `functionResponse` parts (`{"name", "response": {"output"}}`, or
//! `{"error"}` for a failed call) in one `user` content per run of consecutive results.
//!
//! An id Gemini gave is echoed back, as its API documents (`FunctionCall.id`: "return the
//! response with the matching id"; `FunctionResponse.id`: "the id of the function call this
//! response is for"): on the `functionCall` part of the model turn when the history is sent
//! again, and as `functionResponse.id` on its result. No other id is sent: not one Weft made
//! for a call Gemini sent without one (recognised by its shape, `call_…_{n}` or `call_{n}`),
//! nor one another provider made. The model never gave those, and Google's own Agent
//! Development Kit strips the ids it makes itself before a request in the same way; without
//! ids Gemini matches results to calls by name and order.
//!
//! # Usage
//!
//! `input` = `promptTokenCount` − `cachedContentTokenCount` + `toolUsePromptTokenCount`,
//! `cache_read` = `cachedContentTokenCount`, `output` = `candidatesTokenCount` +
//! `thoughtsTokenCount`, `reasoning` = `thoughtsTokenCount`. Every chunk's `usageMetadata` is the
//! running total and replaces the previous one.

use serde_json::{Map, Value, json};
use weft_core::{
    AssistantContent, AssistantMessage, ImageContent, Message, StopReason, ToolCall,
    ToolResultMessage, ToolSpec, Usage, UserContent,
};

use crate::CancellationToken;
use crate::dialect::{DecodeFailure, SseDecoder};
use crate::event::{ContentDelta, ProviderEvent};
use crate::http::{self, HttpClient, HttpRequest};
use crate::provider::{ModelRequest, Provider};
use crate::providers::ProviderSettings;
use crate::sse::SseEvent;
use crate::stream::ProviderStream;

/// The provider's name.
const NAME: &str = "gemini";

/// The Gemini adapter. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Gemini {
    settings: ProviderSettings,
    client: HttpClient,
    thinking: Option<Thinking>,
}

/// How much the model may think.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Thinking {
    budget: Option<u32>,
}

impl Gemini {
    /// An adapter with these settings, sending through `client`. Without an API key every call
    /// fails at once with a one-line error; an empty key sends no `x-goog-api-key` header (for a
    /// local server or proxy that needs none).
    pub fn new(settings: ProviderSettings, client: HttpClient) -> Self {
        Self { settings, client, thinking: None }
    }

    /// The same adapter asking for thoughts (`thinkingConfig.includeThoughts`), with a thinking
    /// token budget (`thinkingBudget`) or, with `None`, the model's own choice.
    pub fn with_thinking(mut self, budget: Option<u32>) -> Self {
        self.thinking = Some(Thinking { budget });
        self
    }

    /// The URL of a streamed call to `model`.
    pub fn url(&self, model: &str) -> String {
        let base = self.settings.base_url.trim_end_matches('/');
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!("{base}/v1beta/models/{}:streamGenerateContent?alt=sse", encode_path(model))
    }

    /// The JSON body sent for `request` (its messages taken as they are: [`Provider::stream`]
    /// first passes them through [`replay::prepare`](crate::replay)).
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = Map::new();
        if let Some(system) = request.system_prompt.as_deref().filter(|s| !s.is_empty()) {
            body.insert("systemInstruction".into(), json!({ "parts": [{ "text": system }] }));
        }
        body.insert("contents".into(), Value::Array(contents(&request.messages)));
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request.tools.iter().map(declaration).collect();
            body.insert("tools".into(), json!([{ "functionDeclarations": declarations }]));
        }
        let mut config = Map::new();
        if let Some(t) = request.temperature {
            // Through its shortest decimal form, so 0.7f32 is sent as 0.7.
            let t = t.to_string().parse::<f64>().unwrap_or(f64::from(t));
            config.insert("temperature".into(), json!(t));
        }
        if let Some(max) = request.max_tokens {
            config.insert("maxOutputTokens".into(), json!(max));
        }
        if let Some(thinking) = self.thinking {
            let mut t = Map::new();
            t.insert("includeThoughts".into(), Value::Bool(true));
            if let Some(budget) = thinking.budget {
                t.insert("thinkingBudget".into(), json!(budget));
            }
            config.insert("thinkingConfig".into(), Value::Object(t));
        }
        if !config.is_empty() {
            body.insert("generationConfig".into(), Value::Object(config));
        }
        Value::Object(body)
    }
}

impl Provider for Gemini {
    fn name(&self) -> &str {
        NAME
    }

    fn stream(&self, mut request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let model = request.model.clone();
        let Some(key) = self.settings.api_key.clone() else {
            return ProviderStream::failed(
                NAME,
                &model,
                "no Gemini API key: set GEMINI_API_KEY or configure one",
            );
        };
        request.messages = crate::replay::prepare(request.messages.shared(), NAME, &model).into();
        let mut headers = Vec::with_capacity(1 + self.settings.extra_headers.len());
        if !key.is_empty() {
            headers.push(("x-goog-api-key".to_string(), key));
        }
        headers.extend(self.settings.extra_headers.iter().cloned());
        let http_request =
            HttpRequest { url: self.url(&model), headers, body: self.request_body(&request) };
        let prices = self.settings.prices_for(NAME, &model, request.prices);
        let inner = http::sse_call(self.client.clone(), http_request, GeminiDecoder::new);
        ProviderStream::new(NAME, &model, prices, cancel, inner)
    }
}

/// Percent-encodes a model id for a URL path segment (ids are normally safe as they are).
fn encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A tool's `functionDeclaration`. The schema goes in `parametersJsonSchema`, which takes JSON
/// Schema (including `additionalProperties`); only the `$schema` keyword is removed.
fn declaration(tool: &ToolSpec) -> Value {
    let mut schema = tool.parameters.clone();
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
    }
    let mut d = Map::new();
    d.insert("name".into(), Value::String(tool.name.clone()));
    if !tool.description.is_empty() {
        d.insert("description".into(), Value::String(tool.description.clone()));
    }
    d.insert("parametersJsonSchema".into(), schema);
    Value::Object(d)
}

/// The `contents` of a history. Each run of consecutive tool results becomes one `user` content:
/// all its `functionResponse` parts in order, then the results' images.
///
/// A result carries its call's id when the model turn before it sent that id back (see the
/// [module docs](self)): [`replay::prepare`](crate::replay) puts every result right after the
/// message of its call.
fn contents(messages: &[std::sync::Arc<Message>]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // The ids the last model turn sent back.
    let mut echoed: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            Message::User(user) => {
                let parts = user_parts(&user.content);
                if !parts.is_empty() {
                    out.push(json!({ "role": "user", "parts": parts }));
                }
            }
            Message::Assistant(assistant) => {
                echoed = assistant.tool_calls().filter_map(|c| gemini_id(assistant, c)).collect();
                let parts = model_parts(assistant);
                if !parts.is_empty() {
                    out.push(json!({ "role": "model", "parts": parts }));
                }
            }
            Message::ToolResult(_) => {
                let (mut parts, mut images) = (Vec::new(), Vec::new());
                while let Some(Message::ToolResult(result)) = messages.get(i).map(|m| &**m) {
                    let id = echoed.iter().copied().find(|&id| id == result.tool_call_id);
                    parts.push(function_response(result, id));
                    images.extend(result.content.iter().filter_map(|block| match block {
                        UserContent::Image(image) => Some(image_part(image)),
                        UserContent::Text(_) => None,
                    }));
                    i += 1;
                }
                parts.append(&mut images);
                out.push(json!({ "role": "user", "parts": parts }));
                continue;
            }
        }
        i += 1;
    }
    out
}

fn image_part(image: &ImageContent) -> Value {
    json!({ "inlineData": { "mimeType": image.mime_type, "data": image.data } })
}

fn user_parts(content: &[UserContent]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|block| match block {
            UserContent::Text(t) if t.text.is_empty() => None,
            UserContent::Text(t) => Some(json!({ "text": t.text })),
            UserContent::Image(image) => Some(image_part(image)),
        })
        .collect()
}

/// A tool result's `functionResponse` part: its text as `output`, or as `error` for a failed call,
/// with `id` when its call's id was Gemini's.
fn function_response(result: &ToolResultMessage, id: Option<&str>) -> Value {
    let key = if result.is_error { "error" } else { "output" };
    let mut response = Map::new();
    if let Some(id) = id {
        response.insert("id".into(), Value::String(id.into()));
    }
    response.insert("name".into(), Value::String(result.tool_name.clone()));
    response.insert("response".into(), json!({ key: result.text_content() }));
    json!({ "functionResponse": response })
}

/// The id of `call` that goes back to Gemini: the one Gemini gave it, when `message` is Gemini's
/// and the id is not one Weft made (see the [module docs](self)).
fn gemini_id<'a>(message: &AssistantMessage, call: &'a ToolCall) -> Option<&'a str> {
    (message.provider == NAME && !call.id.is_empty() && !made_by_weft(&call.id))
        .then_some(call.id.as_str())
}

/// Whether `id` has the shape of the ids [`GeminiDecoder`] makes for calls Gemini sent without
/// one: `call_{responseId}_{n}` or `call_{n}`.
fn made_by_weft(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("call_") else {
        return false;
    };
    let n = rest.rsplit('_').next().unwrap_or(rest);
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
}

/// The parts of an assistant message, with signatures put back where they came from (see the
/// [module docs](self)).
fn model_parts(message: &AssistantMessage) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::new();
    for block in &message.content {
        match block {
            AssistantContent::Text(t) => {
                if !t.text.is_empty() {
                    parts.push(json!({ "text": t.text }));
                }
            }
            AssistantContent::ToolCall(call) => {
                let args = match &*call.arguments {
                    Value::Object(_) => Value::clone(&call.arguments),
                    Value::Null => json!({}),
                    // Arguments that were not an object (or not JSON) are sent so the model sees
                    // what it said.
                    other => json!({ "value": other }),
                };
                let mut function_call = Map::new();
                if let Some(id) = gemini_id(message, call) {
                    function_call.insert("id".into(), Value::String(id.into()));
                }
                function_call.insert("name".into(), Value::String(call.name.clone()));
                function_call.insert("args".into(), args);
                parts.push(json!({ "functionCall": function_call }));
            }
            AssistantContent::Thinking(t) if t.thinking.is_empty() => {
                let Some(signature) = t.signature.as_deref().filter(|s| !s.is_empty()) else {
                    continue;
                };
                let carrier = parts.last_mut().filter(|p| {
                    (p.get("text").is_some() && p.get("thought").is_none()
                        || p.get("functionCall").is_some())
                        && p.get("thoughtSignature").is_none()
                });
                match carrier {
                    Some(Value::Object(part)) => {
                        part.insert("thoughtSignature".into(), Value::String(signature.into()));
                    }
                    _ => parts.push(json!({ "text": "", "thoughtSignature": signature })),
                }
            }
            AssistantContent::Thinking(t) => {
                let mut part = Map::new();
                part.insert("thought".into(), Value::Bool(true));
                part.insert("text".into(), Value::String(t.thinking.clone()));
                if let Some(signature) = t.signature.as_deref().filter(|s| !s.is_empty()) {
                    part.insert("thoughtSignature".into(), Value::String(signature.into()));
                }
                parts.push(Value::Object(part));
            }
        }
    }
    parts
}

/// The block being streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text(u32),
    Thinking { index: u32, signed: bool },
}

/// The decoder of Gemini's SSE stream (pure: no IO). See the [module docs](self).
#[derive(Debug, Default)]
pub struct GeminiDecoder {
    open: Option<Open>,
    next_index: u32,
    calls: u32,
    response_id: Option<String>,
    /// The `finishReason` and `finishMessage` seen.
    finish: Option<(String, Option<String>)>,
    usage: Option<Usage>,
    /// A terminal event was emitted.
    done: bool,
}

impl GeminiDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn close(&mut self, out: &mut Vec<ProviderEvent>) {
        match self.open.take() {
            Some(Open::Text(index)) => {
                out.push(ProviderEvent::Content(ContentDelta::TextEnd { index }))
            }
            Some(Open::Thinking { index, .. }) => {
                out.push(ProviderEvent::Content(ContentDelta::ThinkingEnd { index }))
            }
            None => {}
        }
    }

    fn next(&mut self) -> u32 {
        let index = self.next_index;
        self.next_index += 1;
        index
    }

    /// A signature carrier: an empty thinking block holding `signature`.
    fn carrier(&mut self, signature: &str, out: &mut Vec<ProviderEvent>) {
        self.close(out);
        let index = self.next();
        out.push(ProviderEvent::Content(ContentDelta::ThinkingStart { index }));
        out.push(ProviderEvent::Content(ContentDelta::ThinkingSignature {
            index,
            signature: signature.to_string(),
        }));
        out.push(ProviderEvent::Content(ContentDelta::ThinkingEnd { index }));
    }

    fn part(&mut self, part: &Value, out: &mut Vec<ProviderEvent>) {
        let signature =
            part.get("thoughtSignature").and_then(Value::as_str).filter(|s| !s.is_empty());
        let text = part.get("text").and_then(Value::as_str);
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            let text = text.unwrap_or("");
            if text.is_empty() && signature.is_none() {
                return;
            }
            let index = match self.open {
                Some(Open::Thinking { index, signed: false }) => index,
                _ => {
                    self.close(out);
                    let index = self.next();
                    out.push(ProviderEvent::Content(ContentDelta::ThinkingStart { index }));
                    self.open = Some(Open::Thinking { index, signed: false });
                    index
                }
            };
            if !text.is_empty() {
                out.push(ProviderEvent::Content(ContentDelta::ThinkingDelta {
                    index,
                    delta: text.to_string(),
                }));
            }
            if let Some(signature) = signature {
                out.push(ProviderEvent::Content(ContentDelta::ThinkingSignature {
                    index,
                    signature: signature.to_string(),
                }));
                self.open = Some(Open::Thinking { index, signed: true });
            }
        } else if let Some(call) = part.get("functionCall") {
            self.close(out);
            let name = call.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let id = match call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                Some(id) => id.to_string(),
                None => match &self.response_id {
                    Some(rid) => format!("call_{rid}_{}", self.calls),
                    None => format!("call_{}", self.calls),
                },
            };
            self.calls += 1;
            let args = match call.get("args") {
                None | Some(Value::Null) => "{}".to_string(),
                Some(args) => args.to_string(),
            };
            let index = self.next();
            out.push(ProviderEvent::Content(ContentDelta::ToolCallStart { index, id, name }));
            out.push(ProviderEvent::Content(ContentDelta::ToolCallDelta { index, delta: args }));
            out.push(ProviderEvent::Content(ContentDelta::ToolCallEnd { index }));
            if let Some(signature) = signature {
                self.carrier(signature, out);
            }
        } else if let Some(text) = text {
            if !text.is_empty() {
                let index = match self.open {
                    Some(Open::Text(index)) => index,
                    _ => {
                        self.close(out);
                        let index = self.next();
                        out.push(ProviderEvent::Content(ContentDelta::TextStart { index }));
                        self.open = Some(Open::Text(index));
                        index
                    }
                };
                out.push(ProviderEvent::Content(ContentDelta::TextDelta {
                    index,
                    delta: text.to_string(),
                }));
            }
            if let Some(signature) = signature {
                self.carrier(signature, out);
            }
        }
        // Other parts (inline data, executable code …) are not part of the canonical model.
    }

    fn usage(&mut self, meta: &Value, out: &mut Vec<ProviderEvent>) {
        let count = |key: &str| meta.get(key).and_then(super::token_count);
        let prompt = count("promptTokenCount");
        let candidates = count("candidatesTokenCount");
        let thoughts = count("thoughtsTokenCount");
        if prompt.is_none() && candidates.is_none() && thoughts.is_none() {
            return;
        }
        let cached = count("cachedContentTokenCount").unwrap_or(0);
        let tool_prompt = count("toolUsePromptTokenCount").unwrap_or(0);
        // Saturating: counts come from the network and must never panic a run.
        let input = prompt.unwrap_or(0).saturating_sub(cached).saturating_add(tool_prompt);
        let output = candidates.unwrap_or(0).saturating_add(thoughts.unwrap_or(0));
        let mut usage = Usage::new(input, output, cached, 0);
        usage.reasoning = thoughts;
        if self.usage != Some(usage) {
            self.usage = Some(usage);
            out.push(ProviderEvent::Usage(usage));
        }
    }

    fn fail(&mut self, message: String, out: &mut Vec<ProviderEvent>) {
        self.close(out);
        self.done = true;
        out.push(ProviderEvent::Error { reason: StopReason::Error, message });
    }
}

impl SseDecoder for GeminiDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        let data = event.data.trim();
        if self.done || data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => {
                self.close(out);
                self.done = true;
                return Err(DecodeFailure::fatal(format!(
                    "Gemini sent a chunk that is not valid JSON: {e}"
                )));
            }
        };
        if let Some(error) = chunk.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            let status = error.get("status").and_then(Value::as_str).unwrap_or_default();
            let code = error.get("code").and_then(Value::as_u64).unwrap_or(0);
            let text = match (status.is_empty(), code) {
                (false, _) => format!("Gemini error: {message} ({status})"),
                (true, 0) => format!("Gemini error: {message}"),
                (true, code) => format!("Gemini error: {message} (code {code})"),
            };
            let untouched = self.next_index == 0;
            self.close(out);
            self.done = true;
            let transient =
                matches!(status, "RESOURCE_EXHAUSTED" | "UNAVAILABLE") || matches!(code, 429 | 503);
            return Err(if transient && untouched {
                DecodeFailure::retryable(text)
            } else {
                DecodeFailure::fatal(text)
            });
        }
        if let Some(id) = chunk.get("responseId").and_then(Value::as_str)
            && self.response_id.is_none()
        {
            self.response_id = Some(id.to_string());
        }
        // Usage first: a call aborted while this chunk's content streams keeps it.
        if let Some(meta) = chunk.get("usageMetadata") {
            self.usage(meta, out);
        }
        if let Some(candidate) = chunk.get("candidates").and_then(|c| c.get(0)) {
            if let Some(parts) = candidate.pointer("/content/parts").and_then(Value::as_array) {
                for part in parts {
                    self.part(part, out);
                }
            }
            if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
                let message =
                    candidate.get("finishMessage").and_then(Value::as_str).map(str::to_string);
                self.finish = Some((reason.to_string(), message));
            }
        }
        if let Some(reason) = chunk.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
            let detail = chunk
                .pointer("/promptFeedback/blockReasonMessage")
                .and_then(Value::as_str)
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            self.fail(format!("Gemini blocked the prompt ({reason}){detail}"), out);
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.done {
            return;
        }
        self.close(out);
        self.done = true;
        let event = match self.finish.take() {
            None => ProviderEvent::Error {
                reason: StopReason::Error,
                message: "the Gemini stream ended before the model finished".to_string(),
            },
            Some((reason, message)) => finish_event(&reason, message.as_deref(), self.calls > 0),
        };
        out.push(event);
    }
}

/// Gemini's documented `FinishReason`s that mean the response did not end normally (all but
/// `STOP` and `MAX_TOKENS`): each ends the call with stop reason `error` naming it, the partial
/// content kept.
const FAILURE_REASONS: [&str; 18] = [
    "FINISH_REASON_UNSPECIFIED",
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_OTHER",
    "IMAGE_RECITATION",
    "NO_IMAGE",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "MISSING_THOUGHT_SIGNATURE",
    "MALFORMED_RESPONSE",
];

/// The terminal event for a candidate's `finishReason` (and `finishMessage`), `calls` telling
/// whether it holds function calls (Gemini sends each one whole, so they are complete).
///
/// `STOP` ends normally (`tool_use` with calls, else `stop`), `MAX_TOKENS` is `length`, the
/// documented failures ([`FAILURE_REASONS`]) are errors naming the reason. A reason Weft does not
/// know (one added after this was written) does not throw a complete answer away: with function
/// calls the call ends as `tool_use` (the calls run); without, the content is kept and the call
/// ends as `error` naming the reason, since it may be a new kind of block or cut.
fn finish_event(reason: &str, message: Option<&str>, calls: bool) -> ProviderEvent {
    let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
    match reason {
        "STOP" => ProviderEvent::Done {
            stop_reason: if calls { StopReason::ToolUse } else { StopReason::Stop },
        },
        "MAX_TOKENS" => ProviderEvent::Done { stop_reason: StopReason::Length },
        known if FAILURE_REASONS.contains(&known) => ProviderEvent::Error {
            reason: StopReason::Error,
            message: format!("Gemini stopped the response ({reason}){detail}"),
        },
        _ if calls => ProviderEvent::Done { stop_reason: StopReason::ToolUse },
        _ => ProviderEvent::Error {
            reason: StopReason::Error,
            message: format!(
                "Gemini stopped the response for a reason Weft does not know ({reason}){detail}"
            ),
        },
    }
}
