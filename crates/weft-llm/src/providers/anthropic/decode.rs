//! The Anthropic Messages stream decoder (see [`AnthropicDecoder`]).

use std::collections::HashMap;

use serde_json::Value;
use weft_core::{StopReason, Usage};

use crate::dialect::{DecodeFailure, SseDecoder};
use crate::event::{ContentDelta, ProviderEvent};
use crate::sse::SseEvent;

/// The prefix marking a redacted thinking block kept on a [`ThinkingContent`]: such a block has
/// an empty `thinking` and `signature` = this prefix followed by Anthropic's opaque `data`. The
/// request builder turns it back into `{"type":"redacted_thinking","data":…}` for the model that
/// made it; other models never see it (a thinking block with no text is dropped on replay).
///
/// [`ThinkingContent`]: weft_core::ThinkingContent
pub const REDACTED_THINKING_MARKER: &str = "anthropic-redacted-thinking:";

/// What a started Anthropic block is.
#[derive(Debug)]
enum Kind {
    Text,
    Thinking,
    /// A tool call; `initial` holds a non-empty `input` given at the start, sent at the stop if
    /// no `input_json_delta` came.
    ToolCall {
        initial: Option<String>,
        streamed: bool,
    },
    /// A block kind Weft does not model; its deltas are skipped.
    Skipped,
}

#[derive(Debug)]
struct Block {
    /// The canonical content index (unused for skipped blocks).
    index: u32,
    kind: Kind,
    open: bool,
}

/// The decoder of one Anthropic Messages call: a pure state machine from SSE events to
/// [`ProviderEvent`]s.
///
/// The documented sequence is `message_start` (usage: input and cache tokens), then for each
/// content block `content_block_start` / `content_block_delta`* / `content_block_stop`, then
/// `message_delta` (stop reason, cumulative usage) and `message_stop`; `ping` may come anywhere
/// and `error` may replace the rest. Anthropic's block `index` is mapped to the canonical content
/// index (each block starts at the next free index), so deltas of several blocks may interleave.
/// Open blocks are closed before the terminal event.
///
/// Blocks of kinds Weft does not model (server tool use, search results …) and deltas it does not
/// model (`citations_delta` …) are skipped, and so are unknown event types, as the API's
/// versioning policy asks. An `overloaded_error` or `api_error` event before any content is a
/// retryable [`DecodeFailure`]; after content, or any other `error` event, ends the call with
/// stop reason `error` and the provider's message. Data that is not JSON is a fatal failure.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    /// Anthropic's block index → the block.
    blocks: HashMap<u64, Block>,
    /// The next free canonical content index.
    next_index: u32,
    usage: Usage,
    stop_reason: Option<String>,
    /// A tool call block was complete (its `content_block_stop` came).
    complete_call: bool,
    /// Any content event emitted (after which nothing is retried).
    content: bool,
    /// Any event seen at all.
    seen: bool,
    finished: bool,
}

impl AnthropicDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn emit(&mut self, out: &mut Vec<ProviderEvent>, delta: ContentDelta) {
        self.content = true;
        out.push(ProviderEvent::Content(delta));
    }

    /// Closes every open block (in canonical order), emitting its end event.
    fn close_all(&mut self, out: &mut Vec<ProviderEvent>) {
        let mut open: Vec<u64> =
            self.blocks.iter().filter(|(_, b)| b.open).map(|(&k, _)| k).collect();
        open.sort_by_key(|k| self.blocks.get(k).map(|b| b.index).unwrap_or(0));
        for key in open {
            self.close(key, out);
        }
    }

    fn close(&mut self, key: u64, out: &mut Vec<ProviderEvent>) {
        let Some(block) = self.blocks.get_mut(&key) else { return };
        if !block.open {
            return;
        }
        block.open = false;
        let index = block.index;
        let events = match &mut block.kind {
            Kind::Text => vec![ContentDelta::TextEnd { index }],
            Kind::Thinking => vec![ContentDelta::ThinkingEnd { index }],
            Kind::ToolCall { initial, streamed } => {
                let mut events = Vec::new();
                if let Some(input) = initial.take()
                    && !*streamed
                {
                    events.push(ContentDelta::ToolCallDelta { index, delta: input });
                }
                events.push(ContentDelta::ToolCallEnd { index });
                events
            }
            Kind::Skipped => Vec::new(),
        };
        for e in events {
            self.emit(out, e);
        }
    }

    fn usage_from(&mut self, usage: &Value) {
        let get = |name: &str| usage.get(name).and_then(crate::providers::token_count);
        // The counts of `message_delta` are cumulative; some servers send zeros for the fields
        // they do not repeat, so a count never goes down.
        if let Some(n) = get("input_tokens") {
            self.usage.input = self.usage.input.max(n);
        }
        if let Some(n) = get("cache_read_input_tokens") {
            self.usage.cache_read = self.usage.cache_read.max(n);
        }
        if let Some(n) = get("cache_creation_input_tokens") {
            self.usage.cache_write = self.usage.cache_write.max(n);
        }
        if let Some(n) = get("output_tokens") {
            self.usage.output = self.usage.output.max(n);
        }
        self.usage = self.usage.with_total();
    }

    fn block_start(
        &mut self,
        data: &Value,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        let key = block_key(data)?;
        if self.blocks.contains_key(&key) {
            return Err(DecodeFailure::fatal(format!(
                "Anthropic started content block {key} twice"
            )));
        }
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let str_field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
        let kind = match str_field("type") {
            "text" => Kind::Text,
            "thinking" | "redacted_thinking" => Kind::Thinking,
            "tool_use" => {
                let initial = match block.get("input") {
                    Some(Value::Object(map)) if !map.is_empty() => {
                        Some(Value::Object(map.clone()).to_string())
                    }
                    _ => None,
                };
                Kind::ToolCall { initial, streamed: false }
            }
            _ => Kind::Skipped,
        };
        if matches!(kind, Kind::Skipped) {
            self.blocks.insert(key, Block { index: u32::MAX, kind, open: false });
            return Ok(());
        }
        let index = self.next_index;
        self.next_index += 1;
        match str_field("type") {
            "text" => {
                self.emit(out, ContentDelta::TextStart { index });
                let text = str_field("text");
                if !text.is_empty() {
                    self.emit(out, ContentDelta::TextDelta { index, delta: text.to_string() });
                }
            }
            "thinking" => {
                self.emit(out, ContentDelta::ThinkingStart { index });
                let thinking = str_field("thinking");
                if !thinking.is_empty() {
                    let delta = thinking.to_string();
                    self.emit(out, ContentDelta::ThinkingDelta { index, delta });
                }
                let signature = str_field("signature");
                if !signature.is_empty() {
                    let signature = signature.to_string();
                    self.emit(out, ContentDelta::ThinkingSignature { index, signature });
                }
            }
            "redacted_thinking" => {
                self.emit(out, ContentDelta::ThinkingStart { index });
                let signature = format!("{REDACTED_THINKING_MARKER}{}", str_field("data"));
                self.emit(out, ContentDelta::ThinkingSignature { index, signature });
            }
            _ => {
                let (id, name) = (str_field("id").to_string(), str_field("name").to_string());
                self.emit(out, ContentDelta::ToolCallStart { index, id, name });
            }
        }
        self.blocks.insert(key, Block { index, kind, open: true });
        Ok(())
    }

    fn block_delta(
        &mut self,
        data: &Value,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        let key = block_key(data)?;
        let Some(block) = self.blocks.get_mut(&key) else {
            return Err(DecodeFailure::fatal(format!(
                "Anthropic sent a delta for content block {key}, which was not started"
            )));
        };
        if matches!(block.kind, Kind::Skipped) {
            return Ok(());
        }
        if !block.open {
            return Err(DecodeFailure::fatal(format!(
                "Anthropic sent a delta for content block {key} after it stopped"
            )));
        }
        let index = block.index;
        let delta = data.get("delta").unwrap_or(&Value::Null);
        let text = |name: &str| delta.get(name).and_then(Value::as_str).unwrap_or("").to_string();
        let kind_name = match block.kind {
            Kind::Text => "text",
            Kind::Thinking => "thinking",
            Kind::ToolCall { .. } => "tool_use",
            Kind::Skipped => "",
        };
        let mismatch = |delta_type: &str| {
            DecodeFailure::fatal(format!(
                "Anthropic sent a {delta_type} for content block {key}, which is {kind_name}"
            ))
        };
        let event = match delta.get("type").and_then(Value::as_str).unwrap_or("") {
            "text_delta" => match block.kind {
                Kind::Text => ContentDelta::TextDelta { index, delta: text("text") },
                _ => return Err(mismatch("text_delta")),
            },
            "thinking_delta" => match block.kind {
                Kind::Thinking => ContentDelta::ThinkingDelta { index, delta: text("thinking") },
                _ => return Err(mismatch("thinking_delta")),
            },
            "signature_delta" => match block.kind {
                Kind::Thinking => {
                    ContentDelta::ThinkingSignature { index, signature: text("signature") }
                }
                _ => return Err(mismatch("signature_delta")),
            },
            "input_json_delta" => match &mut block.kind {
                Kind::ToolCall { streamed, .. } => {
                    let partial = text("partial_json");
                    if partial.is_empty() {
                        return Ok(());
                    }
                    *streamed = true;
                    ContentDelta::ToolCallDelta { index, delta: partial }
                }
                _ => return Err(mismatch("input_json_delta")),
            },
            // `citations_delta` and anything newer: not modelled.
            _ => return Ok(()),
        };
        self.emit(out, event);
        Ok(())
    }

    /// `message_stop`: closes open blocks and ends the call per the stop reason.
    fn message_stop(&mut self, out: &mut Vec<ProviderEvent>) {
        self.close_all(out);
        self.finished = true;
        let reason = self.stop_reason.take();
        out.push(match stop_reason(reason.as_deref(), self.complete_call) {
            Ok(stop_reason) => ProviderEvent::Done { stop_reason },
            Err(message) => ProviderEvent::Error { reason: StopReason::Error, message },
        });
    }

    fn error_event(
        &mut self,
        data: &Value,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        let error = data.get("error").unwrap_or(data);
        let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
        let detail = error.get("message").and_then(Value::as_str).unwrap_or("no details");
        let message = format!("Anthropic error: {detail} ({kind})");
        if !self.content && matches!(kind, "overloaded_error" | "api_error") {
            self.finished = true;
            return Err(DecodeFailure::retryable(message));
        }
        self.close_all(out);
        self.finished = true;
        out.push(ProviderEvent::Error { reason: StopReason::Error, message });
        Ok(())
    }
}

impl SseDecoder for AnthropicDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        if self.finished {
            return Ok(());
        }
        self.seen = true;
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            self.finished = true;
            DecodeFailure::fatal(format!("Anthropic sent an event that is not valid JSON ({e})"))
        })?;
        let kind = data.get("type").and_then(Value::as_str).or(event.event.as_deref());
        let result = match kind.unwrap_or("") {
            "message_start" => {
                if let Some(usage) = data.get("message").and_then(|m| m.get("usage")) {
                    self.usage_from(usage);
                    out.push(ProviderEvent::Usage(self.usage));
                }
                Ok(())
            }
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out),
            "content_block_stop" => {
                let key = block_key(&data)?;
                self.complete_call |= self
                    .blocks
                    .get(&key)
                    .is_some_and(|b| b.open && matches!(b.kind, Kind::ToolCall { .. }));
                self.close(key, out);
                Ok(())
            }
            "message_delta" => {
                if let Some(reason) =
                    data.get("delta").and_then(|d| d.get("stop_reason")).and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = data.get("usage") {
                    self.usage_from(usage);
                    out.push(ProviderEvent::Usage(self.usage));
                }
                Ok(())
            }
            "message_stop" => {
                self.message_stop(out);
                Ok(())
            }
            "error" => self.error_event(&data, out),
            // `ping` and event types added later.
            _ => Ok(()),
        };
        if result.is_err() {
            self.finished = true;
        }
        result
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.close_all(out);
        let message = if self.seen {
            "the Anthropic stream ended before message_stop (the connection was cut?)"
        } else {
            "Anthropic sent an empty response (no events)"
        };
        out.push(ProviderEvent::Error { reason: StopReason::Error, message: message.to_string() });
    }
}

/// A block event's `index`.
fn block_key(data: &Value) -> Result<u64, DecodeFailure> {
    data.get("index").and_then(Value::as_u64).ok_or_else(|| {
        DecodeFailure::fatal("Anthropic sent a content block event without an index")
    })
}

/// Anthropic's stop reason → the canonical one, or the error message for the reasons that mean
/// the model did not finish normally; `complete_call` tells whether the message holds a complete
/// tool call.
///
/// `end_turn`, `stop_sequence` → stop; `max_tokens` and `model_context_window_exceeded` →
/// length; `tool_use` → tool use; `refusal` and `pause_turn` (a server-tool turn paused
/// unfinished) → an error naming the reason. No reason (a proxy that drops it) is stop, or tool
/// use with a complete call. A reason Weft does not know (one added after this was written)
/// does not throw a complete answer away: with a complete tool call it is tool use (the calls
/// run); without, the content is kept and the call ends as an error naming the reason, since it
/// may mean the turn is unfinished (as `pause_turn` does).
pub(crate) fn stop_reason(reason: Option<&str>, complete_call: bool) -> Result<StopReason, String> {
    match reason {
        None if complete_call => Ok(StopReason::ToolUse),
        None | Some("end_turn") | Some("stop_sequence") => Ok(StopReason::Stop),
        Some("max_tokens") | Some("model_context_window_exceeded") => Ok(StopReason::Length),
        Some("tool_use") => Ok(StopReason::ToolUse),
        Some("refusal") => {
            Err("Anthropic refused to answer: the model stopped for safety (refusal)".to_string())
        }
        Some("pause_turn") => {
            Err("Anthropic paused the turn before it was complete (pause_turn)".to_string())
        }
        Some(_) if complete_call => Ok(StopReason::ToolUse),
        Some(other) => Err(format!("Anthropic stopped for a reason Weft does not know: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(body: &str) -> Vec<ProviderEvent> {
        let mut parser = crate::sse::SseParser::new();
        let mut events = Vec::new();
        parser.push(body.as_bytes(), &mut events).unwrap_or_default();
        let mut decoder = AnthropicDecoder::new();
        let mut out = Vec::new();
        for e in &events {
            if let Err(f) = decoder.event(e, &mut out) {
                out.push(ProviderEvent::Error { reason: StopReason::Error, message: f.message });
                return out;
            }
        }
        decoder.end(&mut out);
        out
    }

    #[test]
    fn interleaved_blocks_get_canonical_indices_and_are_closed_before_the_end() {
        let body = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":5,\"content_block\":{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":7,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":5,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":9}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let out = run(body);
        let c = |d| ProviderEvent::Content(d);
        assert_eq!(
            out,
            vec![
                ProviderEvent::Usage(Usage::new(3, 1, 0, 0)),
                c(ContentDelta::ToolCallStart { index: 0, id: "a".into(), name: "f".into() }),
                c(ContentDelta::TextStart { index: 1 }),
                c(ContentDelta::ToolCallDelta { index: 0, delta: "{}".into() }),
                ProviderEvent::Usage(Usage::new(3, 9, 0, 0)),
                c(ContentDelta::ToolCallEnd { index: 0 }),
                c(ContentDelta::TextEnd { index: 1 }),
                ProviderEvent::Done { stop_reason: StopReason::Length },
            ]
        );
    }

    #[test]
    fn a_tool_input_given_whole_at_the_start_is_kept() {
        let body = concat!(
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{\"x\":1}}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let out = run(body);
        assert!(out.contains(&ProviderEvent::Content(ContentDelta::ToolCallDelta {
            index: 0,
            delta: "{\"x\":1}".into()
        })));
    }

    #[test]
    fn stop_reasons() {
        for calls in [false, true] {
            assert_eq!(stop_reason(Some("stop_sequence"), calls), Ok(StopReason::Stop));
            assert_eq!(stop_reason(Some("end_turn"), calls), Ok(StopReason::Stop));
            assert_eq!(stop_reason(Some("max_tokens"), calls), Ok(StopReason::Length));
            assert_eq!(
                stop_reason(Some("model_context_window_exceeded"), calls),
                Ok(StopReason::Length)
            );
            assert_eq!(stop_reason(Some("tool_use"), calls), Ok(StopReason::ToolUse));
            // Documented failures stay failures, calls or not.
            assert!(stop_reason(Some("refusal"), calls).unwrap_err().contains("refusal"));
            assert!(stop_reason(Some("pause_turn"), calls).unwrap_err().contains("pause_turn"));
        }
        assert!(stop_reason(Some("new_reason"), false).unwrap_err().contains("new_reason"));
        assert_eq!(stop_reason(Some("new_reason"), true), Ok(StopReason::ToolUse));
        assert_eq!(stop_reason(None, false), Ok(StopReason::Stop));
        assert_eq!(stop_reason(None, true), Ok(StopReason::ToolUse));
    }

    #[test]
    fn overloaded_before_content_is_retryable_after_content_an_error() {
        let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let mut decoder = AnthropicDecoder::new();
        let event = SseEvent {
            event: Some("error".into()),
            data: overloaded.lines().nth(1).unwrap_or("").trim_start_matches("data: ").into(),
            id: None,
        };
        let failure = decoder.event(&event, &mut Vec::new()).unwrap_err();
        assert!(failure.retryable && failure.message.contains("Overloaded"), "{failure:?}");

        let body = format!(
            "data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n{overloaded}"
        );
        let out = run(&body);
        assert_eq!(out[1], ProviderEvent::Content(ContentDelta::TextEnd { index: 0 }));
        let ProviderEvent::Error { message, .. } = &out[2] else { panic!("{out:?}") };
        assert!(message.contains("overloaded_error"), "{message}");
    }
}
