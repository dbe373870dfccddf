//! The Anthropic Messages adapter against byte-exact SSE streams, as Anthropic documents them,
//! served over real HTTP on 127.0.0.1; and the requests it sends, as the server recorded them.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{MockResponse, MockServer, Part, collect_stream, fixture, split_parts, test_client};
use futures::StreamExt;
use serde_json::{Value, json};
use weft_core::{
    AssistantContent, AssistantMessage, ImageContent, Message, Prices, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, ToolSpec, Usage, UserContent, UserMessage,
};
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_llm::providers::ProviderSettings;
use weft_llm::providers::anthropic::{Anthropic, REDACTED_THINKING_MARKER};
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, Provider, StreamEvent};

const KEY: &str = "sk-ant-api03-TEST-SECRET-never-printed";
const MODEL: &str = "claude-sonnet-4-5";

fn settings(url: &str) -> ProviderSettings {
    ProviderSettings {
        api_key: Some(KEY.into()),
        base_url: url.into(),
        extra_headers: vec![("x-extra".into(), "yes".into())],
        models: Arc::new(ModelRegistry::empty()),
    }
}

fn adapter(server: &MockServer) -> Anthropic {
    Anthropic::new(settings(&server.url()), test_client())
}

fn request() -> ModelRequest {
    ModelRequest {
        model: MODEL.into(),
        messages: vec![Message::User(UserMessage::text("Hello"))].into(),
        ..ModelRequest::default()
    }
}

/// Streams `request` through `provider`, checks that the API key appears nowhere in what came
/// out, and returns the deltas and the terminal event.
async fn run(provider: &Anthropic, request: ModelRequest) -> (Vec<ContentDelta>, StreamEvent) {
    let (deltas, terminal) =
        collect_stream(provider.stream(request, CancellationToken::new())).await;
    let shown = format!("{deltas:?} {terminal:?}");
    assert!(!shown.contains(KEY), "the API key leaked: {shown}");
    (deltas, terminal)
}

/// Serves `responses` and streams the default request through a fresh adapter.
async fn serve(responses: Vec<MockResponse>) -> (Vec<ContentDelta>, StreamEvent, MockServer) {
    let server = MockServer::start(responses).await;
    let (deltas, terminal) = run(&adapter(&server), request()).await;
    (deltas, terminal, server)
}

fn done(event: StreamEvent) -> AssistantMessage {
    match event {
        StreamEvent::Done(m) => *m,
        other => panic!("expected Done, got {other:?}"),
    }
}

fn failed(event: StreamEvent) -> AssistantMessage {
    match event {
        StreamEvent::Error(m) => *m,
        other => panic!("expected Error, got {other:?}"),
    }
}

fn thinking(m: &AssistantMessage, i: usize) -> &ThinkingContent {
    match &m.content[i] {
        AssistantContent::Thinking(t) => t,
        other => panic!("block {i} is not thinking: {other:?}"),
    }
}

fn tool_call(m: &AssistantMessage, i: usize) -> &ToolCall {
    match &m.content[i] {
        AssistantContent::ToolCall(c) => c,
        other => panic!("block {i} is not a tool call: {other:?}"),
    }
}

#[tokio::test]
async fn plain_text_in_small_chunks_and_the_request_line_and_headers() {
    let body = fixture("anthropic/text.sse");
    let (deltas, terminal, server) =
        serve(vec![MockResponse::sse_parts(split_parts(body.as_bytes(), 7))]).await;
    assert_eq!(
        deltas,
        vec![
            ContentDelta::TextStart { index: 0 },
            ContentDelta::TextDelta { index: 0, delta: "Hello".into() },
            ContentDelta::TextDelta { index: 0, delta: "!".into() },
            ContentDelta::TextEnd { index: 0 },
        ]
    );
    let m = done(terminal);
    assert_eq!(m.text(), "Hello!");
    assert_eq!(m.stop_reason, StopReason::Stop);
    assert_eq!(m.usage, Usage::new(25, 15, 0, 0));
    assert_eq!((m.provider.as_str(), m.model.as_str()), ("anthropic", MODEL));
    // An unknown model costs 0 (with a warning), never a failure.
    assert_eq!(m.cost.map(|c| c.total), Some(0.0), "no prices known");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("x-extra"), Some("yes"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.header("authorization").is_none());
    assert_eq!(
        r.json(),
        json!({
            "model": MODEL,
            "max_tokens": 8192,
            "stream": true,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        })
    );
}

#[tokio::test]
async fn thinking_with_a_signature_then_text_and_the_signature_round_trips_exactly() {
    let server = MockServer::start(vec![
        MockResponse::sse(&fixture("anthropic/thinking.sse")),
        MockResponse::sse(&fixture("anthropic/text.sse")),
    ])
    .await;
    let provider = adapter(&server).with_thinking(2048);
    let mut first = request();
    first.temperature = Some(0.5);
    let (deltas, terminal) = run(&provider, first.clone()).await;
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/p4qWKtbZ4Tb+O9hdt7TNSf1ZD5r6nK0uDl8mOvp5gwvIrOP3ctn5kt7Y+/iIPvA4fAFuAHnSVZaEHpDxMhA==";
    assert_eq!(deltas[0], ContentDelta::ThinkingStart { index: 0 });
    assert_eq!(
        deltas[3],
        ContentDelta::ThinkingSignature { index: 0, signature: signature.into() }
    );
    assert_eq!(deltas[4], ContentDelta::ThinkingEnd { index: 0 });
    assert_eq!(deltas[5], ContentDelta::TextStart { index: 1 });
    let m = done(terminal);
    let t = thinking(&m, 0);
    assert_eq!(
        t.thinking,
        "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\n\nSo GCD(1071, 462) = 21"
    );
    assert_eq!(t.signature.as_deref(), Some(signature));
    assert_eq!(m.text(), "The greatest common divisor of 1071 and 462 is **21**.");
    assert_eq!(m.usage, Usage::new(42, 98, 0, 0));

    // The next turn sends the thinking back, signature and text byte for byte.
    let mut second = first.clone();
    second.messages.push(m.clone().into());
    second.messages.push(UserMessage::text("Thanks").into());
    done(run(&provider, second).await.1);
    let requests = server.requests();
    let body = requests[0].json();
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert!(body.get("temperature").is_none(), "temperature is not sent with thinking");
    let body = requests[1].json();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": t.thinking, "signature": signature},
            {"type": "text", "text": "The greatest common divisor of 1071 and 462 is **21**."},
        ]})
    );
    assert!(requests[1].text().contains(&format!("\"signature\":\"{signature}\"")));
}

#[tokio::test]
async fn redacted_thinking_is_kept_and_sent_back_only_to_the_same_model() {
    let server = MockServer::start(vec![
        MockResponse::sse(&fixture("anthropic/redacted_thinking.sse")),
        MockResponse::sse(&fixture("anthropic/text.sse")),
        MockResponse::sse(&fixture("anthropic/text.sse")),
    ])
    .await;
    let provider = adapter(&server);
    let (deltas, terminal) = run(&provider, request()).await;
    let data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pLmN9kLp3qGTHcA8UEaJ3ZhEC+4A2eGqpkCn5zN3tkhjxvOkmILQ8XgpoFSrK9zr7E=";
    assert_eq!(
        deltas[..3],
        [
            ContentDelta::ThinkingStart { index: 0 },
            ContentDelta::ThinkingSignature {
                index: 0,
                signature: format!("{REDACTED_THINKING_MARKER}{data}")
            },
            ContentDelta::ThinkingEnd { index: 0 },
        ]
    );
    let m = done(terminal);
    assert_eq!(thinking(&m, 0).thinking, "");
    assert_eq!(thinking(&m, 1).thinking, "The user wants a short answer.");
    assert_eq!(m.text(), "Here is my answer.");

    let mut next = request();
    next.messages.push(m.clone().into());
    next.messages.push(UserMessage::text("More").into());
    done(run(&provider, next.clone()).await.1);
    next.model = "claude-opus-4-1".into();
    done(run(&provider, next).await.1);
    let requests = server.requests();
    assert_eq!(
        requests[1].json()["messages"][1]["content"],
        json!([
            {"type": "redacted_thinking", "data": data},
            {"type": "thinking", "thinking": "The user wants a short answer.",
             "signature": "ErUBCkYIARgCIkAhTH4tMM3JyhKuQSOkX9L1MJ9BfDh0cJlC"},
            {"type": "text", "text": "Here is my answer."},
        ])
    );
    // Another model gets no signature and no redacted data.
    let other = requests[2].text();
    assert!(!other.contains(data) && !other.contains("signature"), "{other}");
    assert_eq!(
        requests[2].json()["messages"][1]["content"],
        json!([
            {"type": "text", "text": "<thinking>\nThe user wants a short answer.\n</thinking>"},
            {"type": "text", "text": "Here is my answer."},
        ])
    );
}

#[tokio::test]
async fn two_parallel_tool_calls_with_interleaved_argument_chunks() {
    let (deltas, terminal, _server) =
        serve(vec![MockResponse::sse(&fixture("anthropic/parallel_tools.sse"))]).await;
    let tool_deltas: Vec<&ContentDelta> = deltas
        .iter()
        .filter(|d| {
            matches!(d, ContentDelta::ToolCallDelta { .. } | ContentDelta::ToolCallEnd { .. })
        })
        .collect();
    assert_eq!(
        tool_deltas,
        vec![
            &ContentDelta::ToolCallDelta { index: 2, delta: "{\"locat".into() },
            &ContentDelta::ToolCallDelta { index: 1, delta: "{\"location\":".into() },
            &ContentDelta::ToolCallDelta { index: 2, delta: "ion\": \"Paris, Fr".into() },
            &ContentDelta::ToolCallDelta {
                index: 1,
                delta: " \"San Francisco, CA\", \"unit\": \"fahrenheit\"}".into()
            },
            &ContentDelta::ToolCallEnd { index: 1 },
            &ContentDelta::ToolCallDelta { index: 2, delta: "ance\"}".into() },
            &ContentDelta::ToolCallEnd { index: 2 },
        ]
    );
    let m = done(terminal);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.text(), "I'll check the weather in both cities.");
    let first = tool_call(&m, 1);
    assert_eq!(first.id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(first.name, "get_weather");
    assert_eq!(
        first.arguments,
        json!({"location": "San Francisco, CA", "unit": "fahrenheit"}).into()
    );
    let second = tool_call(&m, 2);
    assert_eq!(second.id, "toolu_01BAWvDCDEm5MH7b5Ad9NpC1");
    assert_eq!(second.arguments, json!({"location": "Paris, France"}).into());
    assert_eq!(m.usage, Usage::new(472, 89, 0, 0));
}

#[tokio::test]
async fn usage_with_cache_reads_and_writes_and_its_cost() {
    let server =
        MockServer::start(vec![MockResponse::sse(&fixture("anthropic/cache_usage.sse"))]).await;
    let mut req = request();
    req.prices = Some(Prices { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 });
    let m = done(run(&adapter(&server), req).await.1);
    assert_eq!(m.usage, Usage::new(12, 40, 30_000, 2_048));
    assert_eq!(m.usage.total, 12 + 40 + 30_000 + 2_048);
    let cost = m.cost.unwrap();
    let expected = (12.0 * 3.0 + 40.0 * 15.0 + 30_000.0 * 0.3 + 2_048.0 * 3.75) / 1e6;
    assert!((cost.total - expected).abs() < 1e-12, "{cost:?}");
}

#[tokio::test]
async fn each_stop_reason() {
    for (file, reason) in [
        ("text.sse", StopReason::Stop),
        ("stop_sequence.sse", StopReason::Stop),
        ("max_tokens.sse", StopReason::Length),
        ("parallel_tools.sse", StopReason::ToolUse),
    ] {
        let (_, terminal, _server) =
            serve(vec![MockResponse::sse(&fixture(&format!("anthropic/{file}")))]).await;
        let m = done(terminal);
        assert_eq!(m.stop_reason, reason, "{file}");
        assert_eq!(m.error_message, None, "{file}");
    }
    let (_, terminal, _server) =
        serve(vec![MockResponse::sse(&fixture("anthropic/refusal.sse"))]).await;
    let m = failed(terminal);
    assert_eq!(m.stop_reason, StopReason::Error);
    assert!(m.error_message.as_deref().unwrap().contains("refusal"), "{m:?}");
    assert_eq!(m.text(), "I can", "the partial is kept");
    assert_eq!(m.usage, Usage::new(20, 3, 0, 0));
}

#[tokio::test]
async fn an_empty_turn_and_an_empty_body() {
    let (deltas, terminal, _server) =
        serve(vec![MockResponse::sse(&fixture("anthropic/empty.sse"))]).await;
    assert!(deltas.is_empty());
    let m = done(terminal);
    assert!(m.content.is_empty());
    assert_eq!(m.stop_reason, StopReason::Stop);
    assert_eq!(m.usage, Usage::new(30, 1, 0, 0));

    let (deltas, terminal, _server) = serve(vec![MockResponse::sse("")]).await;
    assert!(deltas.is_empty());
    let m = failed(terminal);
    assert!(m.error_message.as_deref().unwrap().contains("empty response"), "{m:?}");
}

#[tokio::test]
async fn a_malformed_line_ends_the_call_with_the_partial_kept() {
    let (_, terminal, _server) =
        serve(vec![MockResponse::sse(&fixture("anthropic/malformed.sse"))]).await;
    let m = failed(terminal);
    assert_eq!(m.stop_reason, StopReason::Error);
    assert_eq!(m.text(), "Partial");
    assert!(m.error_message.as_deref().unwrap().contains("not valid JSON"), "{m:?}");
    assert_eq!(m.usage, Usage::new(10, 1, 0, 0));
}

#[tokio::test]
async fn a_connection_cut_mid_stream_keeps_the_partial() {
    let body = fixture("anthropic/text.sse");
    let cut_at = body.find("event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"!\"").unwrap();
    let (deltas, terminal, _server) = serve(vec![MockResponse::sse(&body[..cut_at]).cut()]).await;
    assert_eq!(deltas.last(), Some(&ContentDelta::TextDelta { index: 0, delta: "Hello".into() }));
    let m = failed(terminal);
    assert_eq!(m.stop_reason, StopReason::Error);
    assert_eq!(m.text(), "Hello");
    assert_eq!(m.usage, Usage::new(25, 1, 0, 0));
    assert!(m.error_message.is_some());
}

#[tokio::test]
async fn an_overloaded_error_event_before_content_is_retried() {
    let (_, terminal, server) = serve(vec![
        MockResponse::sse(&fixture("anthropic/overloaded.sse")),
        MockResponse::sse(&fixture("anthropic/text.sse")),
    ])
    .await;
    let m = done(terminal);
    assert_eq!(m.text(), "Hello!");
    assert_eq!(m.usage, Usage::new(25, 15, 0, 0));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn an_error_event_after_content_is_not_retried() {
    let (_, terminal, server) = serve(vec![
        MockResponse::sse(&fixture("anthropic/error_after_content.sse")),
        MockResponse::sse(&fixture("anthropic/text.sse")),
    ])
    .await;
    let m = failed(terminal);
    assert_eq!(m.text(), "Half an ans");
    let error = m.error_message.unwrap();
    assert!(error.contains("Overloaded") && error.contains("overloaded_error"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn overloaded_events_that_exhaust_the_retries() {
    let overloaded = MockResponse::sse(&fixture("anthropic/overloaded.sse"));
    let (_, terminal, server) = serve(vec![overloaded; 5]).await;
    let error = failed(terminal).error_message.unwrap();
    assert!(error.contains("overloaded_error") && error.contains("after 3 retries"), "{error}");
    assert_eq!(server.requests().len(), 4, "the test client retries 3 times");
}

#[tokio::test]
async fn a_429_with_retry_after_then_success_waits_as_told() {
    let limited = MockResponse::status(
        429,
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
    )
    .with_header("retry-after", "1");
    let (_, terminal, server) =
        serve(vec![limited, MockResponse::sse(&fixture("anthropic/text.sse"))]).await;
    assert_eq!(done(terminal).text(), "Hello!");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_secs(1), "waited only {waited:?}");
}

#[tokio::test]
async fn a_500_that_exhausts_the_retries() {
    let error =
        r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#;
    let server = MockServer::start(vec![MockResponse::status(500, error); 4]).await;
    let retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(10),
        ..RetryPolicy::default()
    };
    let client = HttpClient::new(Timeouts::default(), retry).unwrap();
    let provider = Anthropic::new(settings(&server.url()), client);
    let m = failed(run(&provider, request()).await.1);
    assert_eq!(m.stop_reason, StopReason::Error);
    let message = m.error_message.unwrap();
    assert!(message.contains("500") && message.contains("Internal server error"), "{message}");
    assert!(message.contains("after 2 retries"), "{message}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_401_is_readable_and_does_not_show_the_key() {
    let body =
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let (_, terminal, server) = serve(vec![MockResponse::status(401, body)]).await;
    let message = failed(terminal).error_message.unwrap();
    assert!(message.contains("401") && message.contains("invalid x-api-key"), "{message}");
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn abort_mid_stream_keeps_the_partial_and_the_usage() {
    let body = fixture("anthropic/text.sse");
    let cut_at = body.find("event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"!\"").unwrap();
    let server = MockServer::start(vec![MockResponse::sse_parts(vec![
        Part::text(&body[..cut_at]),
        Part::Stall,
    ])])
    .await;
    let cancel = CancellationToken::new();
    let mut stream = adapter(&server).stream(request(), cancel.clone());
    let run = async {
        while let Some(event) = stream.next().await {
            match event {
                StreamEvent::Content(ContentDelta::TextDelta { .. }) => cancel.cancel(),
                StreamEvent::Content(_) => {}
                terminal => return terminal,
            }
        }
        panic!("no terminal event");
    };
    let terminal = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap();
    let m = failed(terminal);
    assert_eq!(m.stop_reason, StopReason::Aborted);
    assert_eq!(m.text(), "Hello");
    assert_eq!(m.usage, Usage::new(25, 1, 0, 0));
    assert!(stream.next().await.is_none());
    drop(stream);
    assert!(server.wait_hangups(1, Duration::from_secs(5)).await, "the connection was closed");
}

/// A history with a system prompt, tools, an image, an Anthropic turn with thinking, text and two
/// tool calls, and their results (one an error) followed by more user text.
#[tokio::test]
async fn the_request_carries_system_messages_tools_thinking_and_merged_tool_results() {
    let server = MockServer::start(vec![MockResponse::sse(&fixture("anthropic/text.sse"))]).await;
    let mut turn = AssistantMessage::empty("anthropic", MODEL);
    turn.stop_reason = StopReason::ToolUse;
    turn.content = vec![
        AssistantContent::Thinking(ThinkingContent {
            thinking: "Two cities: two calls.".into(),
            signature: Some("EqQBCgIYAhIMsig+/=".into()),
        }),
        AssistantContent::Text(TextContent { text: "Checking both.".into() }),
        AssistantContent::ToolCall(ToolCall {
            id: "toolu_01A".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Paris"}).into(),
        }),
        AssistantContent::ToolCall(ToolCall {
            id: "toolu_01B".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Oslo"}).into(),
        }),
    ];
    let mut aborted = AssistantMessage::empty("anthropic", MODEL);
    aborted.stop_reason = StopReason::Aborted;
    aborted.content = vec![AssistantContent::Text(TextContent { text: "half".into() })];
    let req = ModelRequest {
        model: MODEL.into(),
        system_prompt: Some("You are terse.".into()),
        messages: vec![
            Message::User(UserMessage {
                content: vec![
                    UserContent::text("Weather in Paris and Oslo? See the map."),
                    UserContent::Image(ImageContent {
                        data: "iVBORw0KGgo=".into(),
                        mime_type: "image/png".into(),
                    }),
                ],
                timestamp: 1,
                id: None,
            }),
            turn.into(),
            ToolResultMessage::new("toolu_01A", "get_weather", "18°C, sunny", false).into(),
            ToolResultMessage::new("toolu_01B", "get_weather", "timeout", true).into(),
            UserMessage::text("And tomorrow?").into(),
            aborted.into(),
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            label: String::new(),
            description: "Current weather for a city".into(),
            parameters: json!({
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            }),
            requires_approval: false,
        }],
        temperature: Some(0.25),
        max_tokens: Some(1000),
        ..ModelRequest::default()
    };
    done(run(&adapter(&server), req).await.1);
    let body = server.requests()[0].json();
    let expected = json!({
        "model": MODEL,
        "max_tokens": 1000,
        "stream": true,
        "system": "You are terse.",
        "temperature": 0.25,
        "tools": [{
            "name": "get_weather",
            "description": "Current weather for a city",
            "input_schema": {
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            },
        }],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris and Oslo? See the map."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Two cities: two calls.", "signature": "EqQBCgIYAhIMsig+/="},
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"location": "Paris"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {"location": "Oslo"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": [{"type": "text", "text": "18°C, sunny"}]},
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": [{"type": "text", "text": "timeout"}], "is_error": true},
                {"type": "text", "text": "And tomorrow?"},
            ]},
        ],
    });
    // f32 0.25 is exact in JSON; compare the whole body.
    assert_eq!(body, expected, "{body:#}");
}

#[tokio::test]
async fn calls_from_another_provider_get_valid_ids_and_results() {
    let server = MockServer::start(vec![MockResponse::sse(&fixture("anthropic/text.sse"))]).await;
    let mut turn = AssistantMessage::empty("openai", "gpt-4o");
    turn.stop_reason = StopReason::ToolUse;
    turn.content = vec![AssistantContent::ToolCall(ToolCall {
        id: "call_abc|fc_1".into(),
        name: "f".into(),
        arguments: json!({}).into(),
    })];
    let mut req = request();
    req.messages.push(turn.into());
    done(run(&adapter(&server), req).await.1);
    let body = server.requests()[0].json();
    let id = body["messages"][1]["content"][0]["id"].as_str().unwrap().to_string();
    assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{id}");
    assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], json!(id));
    assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
}

/// Against the real service; runs only when `ANTHROPIC_API_KEY` is set (and `--ignored`).
/// `ANTHROPIC_MODEL` picks the model and `ANTHROPIC_BASE_URL` the endpoint.
#[tokio::test]
#[ignore = "needs ANTHROPIC_API_KEY and the internet"]
async fn real_service_streams_text() {
    let Ok(key) = std::env::var("ANTHROPIC_API_KEY") else {
        eprintln!("ANTHROPIC_API_KEY is not set: skipped");
        return;
    };
    let model = std::env::var("ANTHROPIC_MODEL").unwrap_or_else(|_| "claude-haiku-4-5".into());
    let base_url =
        std::env::var("ANTHROPIC_BASE_URL").unwrap_or_else(|_| "https://api.anthropic.com".into());
    let settings = ProviderSettings {
        api_key: Some(key.clone()),
        base_url,
        extra_headers: Vec::new(),
        models: ModelRegistry::builtin(),
    };
    let client = HttpClient::new(Timeouts::default(), RetryPolicy::default()).unwrap();
    let provider = Anthropic::new(settings, client);
    let req = ModelRequest {
        model: model.clone(),
        messages: vec![Message::User(UserMessage::text("Reply with the single word: pong"))].into(),
        max_tokens: Some(20),
        ..ModelRequest::default()
    };
    let stream = provider.stream(req, CancellationToken::new());
    let (_, terminal) = collect_stream(stream).await;
    assert!(!format!("{terminal:?}").contains(&key));
    let m = done(terminal);
    assert!(m.text().to_lowercase().contains("pong"), "{m:?}");
    assert!(m.usage.input > 0 && m.usage.output > 0, "{:?}", m.usage);
    let _: Value = serde_json::to_value(&m).unwrap();
}

#[tokio::test]
async fn usage_near_u64_max_saturates_instead_of_panicking() {
    let server =
        MockServer::start(vec![MockResponse::sse(&fixture("anthropic/huge_usage.sse"))]).await;
    let mut request = request();
    request.prices = Some(Prices { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 });
    let (_, terminal) = run(&adapter(&server), request).await;
    let message = done(terminal);
    assert_eq!(message.text(), "Big");
    let max = u64::MAX;
    let u = message.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write, u.total),
        (max, max, max, max, max)
    );
    let cost = message.cost.unwrap();
    assert!(cost.total.is_finite() && cost.total > 0.0, "{cost:?}");
}

#[tokio::test]
async fn an_unknown_stop_reason_after_a_complete_tool_call_is_tool_use() {
    let (_, terminal, _) =
        serve(vec![MockResponse::sse(&fixture("anthropic/unknown_reason_tool.sse"))]).await;
    let message = done(terminal);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.error_message, None);
    assert_eq!(tool_call(&message, 1).arguments, json!({"city": "Paris"}).into());
    assert_eq!(message.text(), "Checking.");
}

#[tokio::test]
async fn an_unknown_stop_reason_without_calls_keeps_the_text_and_names_it() {
    let (_, terminal, _) =
        serve(vec![MockResponse::sse(&fixture("anthropic/unknown_reason_text.sse"))]).await;
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.text(), "Partly");
    assert_eq!(
        message.error_message.as_deref(),
        Some("Anthropic stopped for a reason Weft does not know: compaction_needed")
    );
}

#[tokio::test]
async fn an_html_page_from_a_wrong_url_is_named_as_such() {
    let html = "<!DOCTYPE html>\n<html>\n  <head><title>Welcome to nginx!</title></head>\n  <body>\n\t<h1>Welcome</h1>\n  </body>\n</html>\n";
    let (deltas, terminal, server) = serve(vec![MockResponse {
        status: 200,
        headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
        parts: vec![Part::text(html)],
        ..MockResponse::default()
    }])
    .await;
    assert!(deltas.is_empty());
    let error = String::from(failed(terminal).error_message.unwrap());
    assert_eq!(
        error,
        "the provider did not answer with an event stream (content type text/html; \
         charset=utf-8; body: <!DOCTYPE html> <html> <head><title>Welcome to nginx!</title></head> \
         <body> <h1>Welcome</h1> </body> </html>); check the base URL and that the server \
         supports streaming"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}
