//! Streaming through the provider adapters (`cargo bench -p weft-llm --bench adapters`).
//!
//! For each dialect (`openai`, `openai-responses`, `anthropic`, `gemini`) the benchmark builds,
//! in the dialect's exact SSE format (the shapes of `tests/fixtures/<dialect>/`):
//!
//! * `text`: a 1 MiB text answer in deltas of 8 bytes (131,072 deltas), with the dialect's
//!   opening events, terminal events and usage;
//! * `tool`: one tool call whose JSON arguments (a `{"path","content"}` object of 1,000,000
//!   bytes) arrive in 100,000 chunks of 10 bytes. Gemini sends function calls whole, so for
//!   Gemini the same arguments arrive as one `functionCall` part.
//!
//! Each body is served by the test kit's `MockServer` on `127.0.0.1` (one 200 SSE response, the
//! body in HTTP chunks of 64 KiB) from its own one-worker Tokio runtime, and read by the adapter
//! (`Provider::stream`) on a `current_thread` runtime that consumes every `StreamEvent`. Wall time
//! runs from `stream()` to the terminal event; the finished message is checked afterwards. Every
//! case also runs at 1/10 of the size (1/10 MiB of text, 10,000 argument chunks) to show that the
//! cost is linear. Three reference figures per case: `transport`, the same body read by the same
//! reqwest client from the same server with no decoding; `SSE+JSON`, the SSE parser plus
//! `serde_json::from_str::<Value>` of every event over the body in memory; `decode`, the SSE
//! parser and the dialect's decoder over the body in memory (no HTTP, no `ProviderStream`).
//!
//! Arguments pick dialects (`-- openai anthropic`); `WEFT_BENCH_RUNS` sets the runs per figure
//! (default 5, twice that for cases below full size; best reported); `WEFT_BENCH_SCALES` the
//! sizes relative to the full one (comma-separated, default `0.1,1`). `×` is the time ratio to
//! the row above (the next smaller size), in parentheses per payload byte (1.00 = linear). No
//! traffic leaves 127.0.0.1.

#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{MockResponse, MockServer, split_parts};
use futures::StreamExt;
use serde_json::Value;
use weft_core::{AssistantContent, AssistantMessage, Message, StopReason, UserMessage};
use weft_llm::dialect::SseDecoder;
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_llm::providers::ProviderSettings;
use weft_llm::providers::anthropic::{Anthropic, AnthropicDecoder};
use weft_llm::providers::gemini::{Gemini, GeminiDecoder};
use weft_llm::providers::openai_chat::{ChatDecoder, OpenAiChat, ReasoningField};
use weft_llm::providers::openai_responses::{OpenAiResponses, ResponsesDecoder};
use weft_llm::sse::SseParser;
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, Provider, StreamEvent};

/// Bytes per text delta.
const TEXT_CHUNK: usize = 8;
/// The full text answer: 1 MiB.
const TEXT_BYTES: usize = 1 << 20;
/// Bytes per argument chunk.
const ARGS_CHUNK: usize = 10;
/// Argument chunks of the full tool call.
const ARGS_CHUNKS: usize = 100_000;
/// The size of the HTTP chunks the server sends.
const PART: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Responses,
    Anthropic,
    Gemini,
}

impl Dialect {
    const ALL: [Dialect; 4] =
        [Dialect::OpenAi, Dialect::Responses, Dialect::Anthropic, Dialect::Gemini];

    fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Responses => "openai-responses",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
        }
    }

    fn model(self) -> &'static str {
        match self {
            Dialect::OpenAi | Dialect::Responses => "gpt-4o-2024-08-06",
            Dialect::Anthropic => "claude-sonnet-4-5",
            Dialect::Gemini => "gemini-2.5-flash",
        }
    }

    fn provider(self, url: String, client: HttpClient) -> Box<dyn Provider> {
        let settings = ProviderSettings {
            api_key: Some("bench-key".to_string()),
            base_url: url,
            extra_headers: Vec::new(),
            models: Arc::new(ModelRegistry::empty()),
        };
        match self {
            Dialect::OpenAi => Box::new(OpenAiChat::new(settings, client)),
            Dialect::Responses => Box::new(OpenAiResponses::new(settings, client)),
            Dialect::Anthropic => Box::new(Anthropic::new(settings, client)),
            Dialect::Gemini => Box::new(Gemini::new(settings, client)),
        }
    }

    /// Parses and decodes `body` in memory (fed in `PART`-byte pieces); the content events.
    fn decode(self, body: &[u8]) -> usize {
        match self {
            Dialect::OpenAi => decode_with(ChatDecoder::new(ReasoningField::Auto), body),
            Dialect::Responses => decode_with(ResponsesDecoder::new(), body),
            Dialect::Anthropic => decode_with(AnthropicDecoder::new(), body),
            Dialect::Gemini => decode_with(GeminiDecoder::new(), body),
        }
    }
}

fn decode_with(mut decoder: impl SseDecoder, body: &[u8]) -> usize {
    let mut parser = SseParser::new();
    let (mut events, mut out) = (Vec::new(), Vec::new());
    let mut content = 0;
    for piece in body.chunks(PART) {
        parser.push(piece, &mut events).unwrap();
        for event in events.drain(..) {
            decoder.event(&event, &mut out).unwrap();
            for e in out.drain(..) {
                content += usize::from(matches!(e, weft_llm::ProviderEvent::Content(_)));
                black_box(e);
            }
        }
    }
    parser.finish();
    decoder.end(&mut out);
    content + out.len()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
}

/// What the finished message must hold.
enum Expect {
    Text(String),
    Arguments(Value),
}

/// One generated response.
struct Case {
    dialect: Dialect,
    kind: Kind,
    /// Payload deltas in the body (text deltas or argument chunks).
    deltas: usize,
    /// Payload bytes (text or argument JSON).
    content_bytes: usize,
    body: Vec<u8>,
    expect: Expect,
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Appends one SSE event.
fn sse(out: &mut String, event: Option<&str>, data: &str) {
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// `bytes` of prose-like ASCII with a newline about every 64 characters and a quote now and
/// then (so the JSON carries escapes).
fn text(bytes: usize) -> String {
    const WORDS: [&str; 12] = [
        "stream",
        "the",
        "answer",
        "token",
        "\"quoted\"",
        "delta",
        "of",
        "a",
        "model",
        "weft",
        "runtime",
        "agent",
    ];
    let mut out = String::with_capacity(bytes + 16);
    let (mut i, mut line) = (0usize, 0usize);
    while out.len() < bytes {
        let word = WORDS[(i * 7 + i / 5) % WORDS.len()];
        out.push_str(word);
        line += word.len() + 1;
        if line >= 64 {
            out.push('\n');
            line = 0;
        } else {
            out.push(' ');
        }
        i += 1;
    }
    out.truncate(bytes);
    out
}

/// A tool call's arguments, exactly `bytes` of JSON: `{"path":…,"content":"…"}`, the string with
/// `\n` escapes.
fn arguments(bytes: usize) -> String {
    let prefix = r#"{"path":"notes/bench.txt","content":""#;
    let suffix = r#""}"#;
    let body = text(bytes - prefix.len() - suffix.len()).replace(['"', '\n'], "_");
    let mut body = body.into_bytes();
    // Turn a few characters into the two-character escape `\n` (never at the end).
    let mut i = 63;
    while i + 2 < body.len() {
        body[i] = b'\\';
        body[i + 1] = b'n';
        i += 64;
    }
    let out = format!("{prefix}{}{suffix}", String::from_utf8(body).unwrap());
    assert_eq!(out.len(), bytes);
    out
}

fn chunks(s: &str, size: usize) -> Vec<&str> {
    // ASCII only: byte boundaries are char boundaries.
    s.as_bytes().chunks(size).map(|c| std::str::from_utf8(c).unwrap()).collect()
}

const CHAT_HEAD: &str = r#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":"#;
const RESP_META: &str = r#""parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled""#;
const RESP_ID: &str = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b";
const MSG_ID: &str = "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b";
const FC_ID: &str = "fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0";
const CALL_ID: &str = "call_unLAR8MvFNptuiZK6K6HCy5k";
const GEMINI_TAIL: &str = r#""modelVersion": "gemini-2.5-flash","responseId": "rsp1TxT"}"#;

fn responses_envelope(status: &str, output: &str, usage: &str) -> String {
    format!(
        r#"{{"id":"{RESP_ID}","object":"response","created_at":1741476542,"status":"{status}","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4o-2024-08-06","output":[{output}],{RESP_META},"usage":{usage},"user":null,"metadata":{{}}}}"#
    )
}

fn responses_open(out: &mut String) {
    let created = responses_envelope("in_progress", "", "null");
    sse(
        out,
        Some("response.created"),
        &format!(r#"{{"type":"response.created","response":{created},"sequence_number":0}}"#),
    );
    sse(
        out,
        Some("response.in_progress"),
        &format!(r#"{{"type":"response.in_progress","response":{created},"sequence_number":1}}"#),
    );
}

fn responses_usage(output_tokens: usize) -> String {
    format!(
        r#"{{"input_tokens":37,"input_tokens_details":{{"cached_tokens":0}},"output_tokens":{output_tokens},"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":{}}}"#,
        37 + output_tokens
    )
}

fn text_body(dialect: Dialect, full: &str, deltas: &[&str]) -> String {
    let mut out = String::with_capacity(full.len() * 40);
    let tokens = deltas.len();
    match dialect {
        Dialect::OpenAi => {
            sse(
                &mut out,
                None,
                &format!(
                    r#"{CHAT_HEAD}[{{"index":0,"delta":{{"role":"assistant","content":"","refusal":null}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
                ),
            );
            for d in deltas {
                let d = js(d);
                sse(
                    &mut out,
                    None,
                    &format!(
                        r#"{CHAT_HEAD}[{{"index":0,"delta":{{"content":{d}}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
                    ),
                );
            }
            chat_tail(&mut out, "stop", tokens);
        }
        Dialect::Responses => {
            responses_open(&mut out);
            sse(
                &mut out,
                Some("response.output_item.added"),
                &format!(
                    r#"{{"type":"response.output_item.added","output_index":0,"item":{{"id":"{MSG_ID}","type":"message","status":"in_progress","role":"assistant","content":[]}},"sequence_number":2}}"#
                ),
            );
            sse(
                &mut out,
                Some("response.content_part.added"),
                &format!(
                    r#"{{"type":"response.content_part.added","item_id":"{MSG_ID}","output_index":0,"content_index":0,"part":{{"type":"output_text","text":"","annotations":[]}},"sequence_number":3}}"#
                ),
            );
            let mut seq = 4;
            for d in deltas {
                let d = js(d);
                sse(
                    &mut out,
                    Some("response.output_text.delta"),
                    &format!(
                        r#"{{"type":"response.output_text.delta","item_id":"{MSG_ID}","output_index":0,"content_index":0,"delta":{d},"logprobs":[],"sequence_number":{seq}}}"#
                    ),
                );
                seq += 1;
            }
            let t = js(full);
            sse(
                &mut out,
                Some("response.output_text.done"),
                &format!(
                    r#"{{"type":"response.output_text.done","item_id":"{MSG_ID}","output_index":0,"content_index":0,"text":{t},"logprobs":[],"sequence_number":{seq}}}"#
                ),
            );
            sse(
                &mut out,
                Some("response.content_part.done"),
                &format!(
                    r#"{{"type":"response.content_part.done","item_id":"{MSG_ID}","output_index":0,"content_index":0,"part":{{"type":"output_text","text":{t},"annotations":[]}},"sequence_number":{}}}"#,
                    seq + 1
                ),
            );
            let item = format!(
                r#"{{"id":"{MSG_ID}","type":"message","status":"completed","role":"assistant","content":[{{"type":"output_text","text":{t},"annotations":[]}}]}}"#
            );
            sse(
                &mut out,
                Some("response.output_item.done"),
                &format!(
                    r#"{{"type":"response.output_item.done","output_index":0,"item":{item},"sequence_number":{}}}"#,
                    seq + 2
                ),
            );
            let done = responses_envelope("completed", &item, &responses_usage(tokens));
            sse(
                &mut out,
                Some("response.completed"),
                &format!(
                    r#"{{"type":"response.completed","response":{done},"sequence_number":{}}}"#,
                    seq + 3
                ),
            );
        }
        Dialect::Anthropic => {
            anthropic_open(&mut out);
            sse(
                &mut out,
                Some("content_block_start"),
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            );
            sse(&mut out, Some("ping"), r#"{"type": "ping"}"#);
            for d in deltas {
                let d = js(d);
                sse(
                    &mut out,
                    Some("content_block_delta"),
                    &format!(
                        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{d}}}}}"#
                    ),
                );
            }
            anthropic_tail(&mut out, "end_turn", tokens);
        }
        Dialect::Gemini => {
            let last = deltas.len() - 1;
            for (i, d) in deltas.iter().enumerate() {
                let d = js(d);
                let data = if i < last {
                    format!(
                        r#"{{"candidates": [{{"content": {{"parts": [{{"text": {d}}}],"role": "model"}},"index": 0}}],"usageMetadata": {{"promptTokenCount": 9,"totalTokenCount": 9,"promptTokensDetails": [{{"modality": "TEXT","tokenCount": 9}}]}},{GEMINI_TAIL}"#
                    )
                } else {
                    format!(
                        r#"{{"candidates": [{{"content": {{"parts": [{{"text": {d}}}],"role": "model"}},"finishReason": "STOP","index": 0}}],"usageMetadata": {{"promptTokenCount": 9,"candidatesTokenCount": {tokens},"totalTokenCount": {},"promptTokensDetails": [{{"modality": "TEXT","tokenCount": 9}}]}},{GEMINI_TAIL}"#,
                        tokens + 9
                    )
                };
                sse(&mut out, None, &data);
            }
        }
    }
    out
}

fn chat_tail(out: &mut String, finish: &str, tokens: usize) {
    sse(
        out,
        None,
        &format!(
            r#"{CHAT_HEAD}[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"{finish}"}}],"usage":null}}"#
        ),
    );
    sse(
        out,
        None,
        &format!(
            r#"{CHAT_HEAD}[],"usage":{{"prompt_tokens":19,"completion_tokens":{tokens},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":0,"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}}}"#,
            tokens + 19
        ),
    );
    sse(out, None, "[DONE]");
}

fn anthropic_open(out: &mut String) {
    sse(
        out,
        Some("message_start"),
        r#"{"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2},"content":[],"stop_reason":null}}"#,
    );
}

fn anthropic_tail(out: &mut String, stop: &str, tokens: usize) {
    sse(out, Some("content_block_stop"), r#"{"type":"content_block_stop","index":0}"#);
    sse(
        out,
        Some("message_delta"),
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop}","stop_sequence":null}},"usage":{{"output_tokens":{tokens}}}}}"#
        ),
    );
    sse(out, Some("message_stop"), r#"{"type":"message_stop"}"#);
}

fn tool_body(dialect: Dialect, args: &str, pieces: &[&str]) -> String {
    let mut out = String::with_capacity(args.len() * 30);
    let tokens = pieces.len();
    match dialect {
        Dialect::OpenAi => {
            sse(
                &mut out,
                None,
                &format!(
                    r#"{CHAT_HEAD}[{{"index":0,"delta":{{"role":"assistant","content":null}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
                ),
            );
            sse(
                &mut out,
                None,
                &format!(
                    r#"{CHAT_HEAD}[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{{"name":"write_file","arguments":""}}}}]}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
                ),
            );
            for p in pieces {
                let p = js(p);
                sse(
                    &mut out,
                    None,
                    &format!(
                        r#"{CHAT_HEAD}[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{p}}}}}]}},"logprobs":null,"finish_reason":null}}],"usage":null}}"#
                    ),
                );
            }
            chat_tail(&mut out, "tool_calls", tokens);
        }
        Dialect::Responses => {
            responses_open(&mut out);
            sse(
                &mut out,
                Some("response.output_item.added"),
                &format!(
                    r#"{{"type":"response.output_item.added","output_index":0,"item":{{"type":"function_call","id":"{FC_ID}","call_id":"{CALL_ID}","name":"write_file","arguments":"","status":"in_progress"}},"sequence_number":2}}"#
                ),
            );
            let mut seq = 3;
            for p in pieces {
                let p = js(p);
                sse(
                    &mut out,
                    Some("response.function_call_arguments.delta"),
                    &format!(
                        r#"{{"type":"response.function_call_arguments.delta","item_id":"{FC_ID}","output_index":0,"delta":{p},"sequence_number":{seq}}}"#
                    ),
                );
                seq += 1;
            }
            let a = js(args);
            sse(
                &mut out,
                Some("response.function_call_arguments.done"),
                &format!(
                    r#"{{"type":"response.function_call_arguments.done","item_id":"{FC_ID}","output_index":0,"arguments":{a},"sequence_number":{seq}}}"#
                ),
            );
            let item = format!(
                r#"{{"type":"function_call","id":"{FC_ID}","call_id":"{CALL_ID}","name":"write_file","arguments":{a},"status":"completed"}}"#
            );
            sse(
                &mut out,
                Some("response.output_item.done"),
                &format!(
                    r#"{{"type":"response.output_item.done","output_index":0,"item":{item},"sequence_number":{}}}"#,
                    seq + 1
                ),
            );
            let done = responses_envelope("completed", &item, &responses_usage(tokens));
            sse(
                &mut out,
                Some("response.completed"),
                &format!(
                    r#"{{"type":"response.completed","response":{done},"sequence_number":{}}}"#,
                    seq + 2
                ),
            );
        }
        Dialect::Anthropic => {
            anthropic_open(&mut out);
            sse(
                &mut out,
                Some("content_block_start"),
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"write_file","input":{}}}"#,
            );
            sse(
                &mut out,
                Some("content_block_delta"),
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            );
            for p in pieces {
                let p = js(p);
                sse(
                    &mut out,
                    Some("content_block_delta"),
                    &format!(
                        r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{p}}}}}"#
                    ),
                );
            }
            anthropic_tail(&mut out, "tool_use", tokens);
        }
        Dialect::Gemini => {
            // The whole call in one part: Gemini does not stream function-call arguments.
            sse(
                &mut out,
                None,
                &format!(
                    r#"{{"candidates": [{{"content": {{"parts": [{{"functionCall": {{"name": "write_file","args": {args}}}}}],"role": "model"}},"index": 0}}],"usageMetadata": {{"promptTokenCount": 71,"totalTokenCount": 71}},{GEMINI_TAIL}"#
                ),
            );
            sse(
                &mut out,
                None,
                &format!(
                    r#"{{"candidates": [{{"content": {{"parts": [{{"text": ""}}],"role": "model"}},"finishReason": "STOP","index": 0}}],"usageMetadata": {{"promptTokenCount": 71,"candidatesTokenCount": {tokens},"totalTokenCount": {}}},{GEMINI_TAIL}"#,
                    tokens + 71
                ),
            );
        }
    }
    out
}

/// The case at `scale` (1 = full size, 0.1 = a tenth).
fn case(dialect: Dialect, kind: Kind, scale: f64) -> Case {
    match kind {
        Kind::Text => {
            let full = text((TEXT_BYTES as f64 * scale) as usize);
            let deltas = chunks(&full, TEXT_CHUNK);
            let body = text_body(dialect, &full, &deltas);
            Case {
                dialect,
                kind,
                deltas: deltas.len(),
                content_bytes: full.len(),
                body: body.into_bytes(),
                expect: Expect::Text(full),
            }
        }
        Kind::Tool => {
            let args = arguments(ARGS_CHUNK * (ARGS_CHUNKS as f64 * scale) as usize);
            let pieces = chunks(&args, ARGS_CHUNK);
            let body = tool_body(dialect, &args, &pieces);
            let deltas = if dialect == Dialect::Gemini { 1 } else { pieces.len() };
            Case {
                dialect,
                kind,
                deltas,
                content_bytes: args.len(),
                body: body.into_bytes(),
                expect: Expect::Arguments(serde_json::from_str(&args).unwrap()),
            }
        }
    }
}

fn check(case: &Case, message: &AssistantMessage, payload: usize) {
    assert_eq!(payload, case.deltas, "{} {:?}: payload deltas", case.dialect.name(), case.kind);
    match &case.expect {
        Expect::Text(t) => {
            assert_eq!(message.stop_reason, StopReason::Stop);
            assert!(message.text() == *t, "{}: the text differs", case.dialect.name());
        }
        Expect::Arguments(args) => {
            assert_eq!(message.stop_reason, StopReason::ToolUse);
            let calls: Vec<_> = message.tool_calls().collect();
            assert_eq!(calls.len(), 1);
            assert!(*calls[0].arguments == *args, "{}: the arguments differ", case.dialect.name());
            assert!(message.content.iter().all(|c| matches!(c, AssistantContent::ToolCall(_))));
        }
    }
    assert!(message.usage.output > 0, "{}: no usage", case.dialect.name());
}

fn client() -> HttpClient {
    let timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(30),
        idle: Duration::from_secs(30),
    };
    HttpClient::new(timeouts, RetryPolicy::none()).unwrap()
}

/// The best wall time of the adapter over `runs` runs (a fresh server each run).
fn adapter_runs(
    server_rt: &tokio::runtime::Runtime,
    client_rt: &tokio::runtime::Runtime,
    case: &Case,
    response: &MockResponse,
    runs: usize,
) -> Duration {
    let client = client();
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let server = server_rt.block_on(MockServer::start(vec![response.clone()]));
        let provider = case.dialect.provider(server.url(), client.clone());
        let request = ModelRequest {
            model: case.dialect.model().into(),
            messages: [Message::User(UserMessage::text("Write the answer."))].into_iter().collect(),
            ..ModelRequest::default()
        };
        let (elapsed, message, payload) = client_rt.block_on(async {
            let start = Instant::now();
            let mut stream = provider.stream(request, CancellationToken::new());
            let mut payload = 0usize;
            while let Some(event) = stream.next().await {
                match event {
                    StreamEvent::Content(delta) => {
                        payload += usize::from(matches!(
                            delta,
                            ContentDelta::TextDelta { .. } | ContentDelta::ToolCallDelta { .. }
                        ));
                        black_box(delta);
                    }
                    StreamEvent::Done(message) => return (start.elapsed(), message, payload),
                    StreamEvent::Error(message) => {
                        panic!("{}: {:?}", case.dialect.name(), message.error_message)
                    }
                }
            }
            panic!("{}: no terminal event", case.dialect.name());
        });
        check(case, &message, payload);
        best = best.min(elapsed);
        drop(message);
        drop(server);
    }
    best
}

/// The best time to read the body with the same client from the same server, undecoded.
fn transport_runs(
    server_rt: &tokio::runtime::Runtime,
    client_rt: &tokio::runtime::Runtime,
    case: &Case,
    response: &MockResponse,
    runs: usize,
) -> Duration {
    let client = client();
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let server = server_rt.block_on(MockServer::start(vec![response.clone()]));
        let url = server.url();
        let (elapsed, bytes) = client_rt.block_on(async {
            let start = Instant::now();
            let response = client
                .reqwest()
                .post(format!("{url}/bench"))
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            let mut body = response.bytes_stream();
            let mut bytes = 0usize;
            while let Some(chunk) = body.next().await {
                bytes += chunk.unwrap().len();
            }
            (start.elapsed(), bytes)
        });
        assert_eq!(bytes, case.body.len());
        best = best.min(elapsed);
        drop(server);
    }
    best
}

/// The best time of the SSE parser plus `serde_json::from_str::<Value>` of every event's data
/// (what each decoder does first), over the body in memory.
fn json_runs(case: &Case, runs: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in case.body.chunks(PART) {
            parser.push(piece, &mut events).unwrap();
            for event in events.drain(..) {
                if event.data != "[DONE]" {
                    black_box(serde_json::from_str::<Value>(&event.data).unwrap());
                }
            }
        }
        best = best.min(start.elapsed());
    }
    best
}

fn decode_runs(case: &Case, runs: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        black_box(case.dialect.decode(black_box(&case.body)));
        best = best.min(start.elapsed());
    }
    best
}

struct Row {
    dialect: Dialect,
    kind: Kind,
    deltas: usize,
    content_bytes: usize,
    body_bytes: usize,
    wall: Duration,
    transport: Duration,
    json: Duration,
    decode: Duration,
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn mbs(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let dialects: Vec<Dialect> = Dialect::ALL
        .into_iter()
        .filter(|d| filters.is_empty() || filters.iter().any(|f| f == d.name()))
        .collect();
    let runs: usize =
        std::env::var("WEFT_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let scales: Vec<f64> = std::env::var("WEFT_BENCH_SCALES")
        .ok()
        .map(|v| v.split(',').map(|x| x.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![0.1, 1.0]);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mock-server")
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let started = Instant::now();
    let mut rows = Vec::new();
    for &dialect in &dialects {
        for kind in [Kind::Text, Kind::Tool] {
            for &scale in &scales {
                let case = case(dialect, kind, scale);
                let response = MockResponse::sse_parts(split_parts(&case.body, PART));
                // One unmeasured warm-up run (allocator, connection setup, page faults).
                adapter_runs(&server_rt, &client_rt, &case, &response, 1);
                // The small cases are short and noisier: twice the runs.
                let n = if scale < 1.0 { 2 * runs } else { runs };
                let wall = adapter_runs(&server_rt, &client_rt, &case, &response, n);
                let transport = transport_runs(&server_rt, &client_rt, &case, &response, n);
                let json = json_runs(&case, n);
                let decode = decode_runs(&case, n);
                eprintln!(
                    "{} {:?} ×{scale}: {} (transport {}, json {}, decode {})",
                    dialect.name(),
                    kind,
                    ms(wall),
                    ms(transport),
                    ms(json),
                    ms(decode)
                );
                rows.push(Row {
                    dialect,
                    kind,
                    deltas: case.deltas,
                    content_bytes: case.content_bytes,
                    body_bytes: case.body.len(),
                    wall,
                    transport,
                    json,
                    decode,
                });
            }
        }
    }
    println!();
    println!(
        "best of {runs} runs (smaller sizes: {}); total benchmark time {:.1} s",
        2 * runs,
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| dialect | case | deltas | content | SSE body | wall | content MB/s | body MB/s | ns/delta | × | transport | SSE+JSON | decode |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, row) in rows.iter().enumerate() {
        let ratio = match i.checked_sub(1).map(|j| &rows[j]) {
            Some(small) if small.dialect == row.dialect && small.kind == row.kind => format!(
                "{:.1}× ({:.2})",
                row.wall.as_secs_f64() / small.wall.as_secs_f64(),
                (row.wall.as_secs_f64() / row.content_bytes as f64)
                    / (small.wall.as_secs_f64() / small.content_bytes as f64)
            ),
            _ => "–".to_string(),
        };
        let case = match (row.kind, row.dialect) {
            (Kind::Text, _) => "text",
            (Kind::Tool, Dialect::Gemini) => "tool (one part)",
            (Kind::Tool, _) => "tool",
        };
        // One delta (Gemini's whole call): a time per delta says nothing.
        let per_delta = match row.deltas {
            1 => "–".to_string(),
            n => format!("{:.0}", row.wall.as_secs_f64() * 1e9 / n as f64),
        };
        println!(
            "| {} | {case} | {} | {} | {} | {} | {:.1} | {:.1} | {per_delta} | {ratio} | {} | {} | {} |",
            row.dialect.name(),
            thousands(row.deltas),
            thousands(row.content_bytes),
            thousands(row.body_bytes),
            ms(row.wall),
            mbs(row.content_bytes, row.wall),
            mbs(row.body_bytes, row.wall),
            ms(row.transport),
            ms(row.json),
            ms(row.decode),
        );
    }
}
