//! The model layer's readers: the SSE parser, the partial-JSON parser and each provider's
//! decoder.

use futures::StreamExt;
use serde_json::Value;
use weft_core::Prices;
use weft_llm::dialect::SseDecoder;
use weft_llm::partial_json::PartialJson;
use weft_llm::providers::anthropic::AnthropicDecoder;
use weft_llm::providers::gemini::GeminiDecoder;
use weft_llm::providers::openai_chat::{ChatDecoder, ReasoningField};
use weft_llm::providers::openai_responses::ResponsesDecoder;
use weft_llm::sse::{SseError, SseEvent, SseParser};
use weft_llm::{CancellationToken, ProviderEvent, ProviderStream, StreamEvent};

use crate::chunks;

/// The SSE parser: the events of `data` in pieces equal those of `data` in one piece, and one
/// byte at a time.
pub fn sse(data: &[u8]) {
    let whole = parse_sse(&[data]);
    assert_eq!(parse_sse(&chunks::bytes(data)), whole, "cut into pieces");
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(parse_sse(&bytes), whole, "one byte at a time");
}

/// The events, and the error that stopped the parser if one did.
fn parse_sse(pieces: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>) {
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for piece in pieces {
        if let Err(error) = parser.push(piece, &mut events) {
            return (events, Some(error));
        }
    }
    parser.finish();
    (events, None)
}

/// The partial-JSON parser: `data` (as text) pushed in pieces, reading the best-effort value
/// after each, finishes exactly as `serde_json::from_str` parses it whole.
pub fn partial_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let expected = serde_json::from_str::<Value>(&text);
    let mut parser = PartialJson::new();
    for piece in chunks::text(&text) {
        let _ = parser.push(piece);
        let _ = parser.value();
    }
    assert_eq!(parser.text(), text, "the text pushed is kept verbatim");
    let raw = parser.clone().finish_or_text();
    match (parser.finish(), expected) {
        (Ok(got), Ok(expected)) => {
            assert_eq!(got, expected, "a value other than serde_json's");
            assert_eq!(raw, Ok(expected));
        }
        (Err(_), Err(_)) => assert_eq!(raw, Err(text.into_owned())),
        (got, expected) => panic!("partial JSON says {got:?}, serde_json says {expected:?}"),
    }
}

/// OpenAI Chat Completions' decoder (reasoning fields read as by default).
pub fn openai_chat(data: &[u8]) {
    decoder(data, || ChatDecoder::new(ReasoningField::Auto));
}

/// OpenAI Responses' decoder.
pub fn openai_responses(data: &[u8]) {
    decoder(data, ResponsesDecoder::new);
}

/// Anthropic Messages' decoder.
pub fn anthropic(data: &[u8]) {
    decoder(data, AnthropicDecoder::new);
}

/// Gemini's decoder.
pub fn gemini(data: &[u8]) {
    decoder(data, GeminiDecoder::new);
}

/// A provider's body through its decoder, as `weft_llm::http::sse_call` reads it, then through
/// the `ProviderStream` every adapter's events go through.
fn decoder<D: SseDecoder>(data: &[u8], make: impl Fn() -> D) {
    let events = decode_body(&chunks::bytes(data), make());
    assert_eq!(decode_body(&[data], make()), events, "cut into pieces");
    let prices = Prices { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 };
    let stream = ProviderStream::new(
        "fuzz",
        "fuzz-1",
        Some(prices),
        CancellationToken::new(),
        futures::stream::iter(events),
    );
    let out: Vec<StreamEvent> = futures::executor::block_on(stream.collect());
    let terminals = out.iter().filter(|e| !matches!(e, StreamEvent::Content(_))).count();
    assert_eq!(terminals, 1, "one terminal event: {out:?}");
    match out.last() {
        Some(StreamEvent::Done(message) | StreamEvent::Error(message)) => {
            if let Some(cost) = &message.cost {
                assert!(cost.total.is_finite() && cost.total >= 0.0, "cost {cost:?}");
            }
        }
        other => panic!("the last event is not terminal: {other:?}"),
    }
}

/// The provider events of an SSE body arriving in `pieces`: what `sse_call` yields for it (a
/// retryable failure is not retried here: it ends the call as it does once retries are spent).
fn decode_body<D: SseDecoder>(pieces: &[&[u8]], mut decoder: D) -> Vec<ProviderEvent> {
    let mut parser = SseParser::new();
    let (mut events, mut out, mut yielded) = (Vec::new(), Vec::new(), Vec::new());
    let failed =
        |message: String| ProviderEvent::Error { reason: weft_core::StopReason::Error, message };
    for piece in pieces {
        let pushed = parser.push(piece, &mut events);
        for event in events.drain(..) {
            let result = decoder.event(&event, &mut out);
            for e in out.drain(..) {
                let terminal =
                    matches!(e, ProviderEvent::Done { .. } | ProviderEvent::Error { .. });
                yielded.push(e);
                if terminal {
                    return yielded;
                }
            }
            if let Err(failure) = result {
                yielded.push(failed(failure.message));
                return yielded;
            }
        }
        if let Err(e) = pushed {
            yielded.push(failed(e.to_string()));
            return yielded;
        }
    }
    parser.finish();
    decoder.end(&mut out);
    yielded.append(&mut out);
    yielded
}
