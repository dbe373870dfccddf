//! The OpenAI Chat Completions adapter against byte-exact SSE streams served over real HTTP on
//! 127.0.0.1: canonical events, final messages, failures, and the requests it sends.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{MockResponse, MockServer, Part, collect_stream, fixture, test_client};
use futures::StreamExt;
use serde_json::json;
use weft_core::{
    AssistantContent, AssistantMessage, Message, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, ToolSpec, Usage, UserMessage,
};
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_llm::providers::ProviderSettings;
use weft_llm::providers::openai_chat::{ChatCompat, MaxTokensField, OpenAiChat, ReasoningField};
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, Provider, StreamEvent};

const KEY: &str = "sk-test-DO-NOT-LEAK-7f3a9c";

fn settings(server: &MockServer) -> ProviderSettings {
    ProviderSettings {
        api_key: Some(KEY.to_string()),
        base_url: format!("{}/v1", server.url()),
        extra_headers: vec![("x-extra".to_string(), "yes".to_string())],
        models: Arc::new(ModelRegistry::empty()),
    }
}

fn provider(server: &MockServer) -> OpenAiChat {
    OpenAiChat::new(settings(server), test_client())
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        model: "gpt-4o".to_string(),
        messages: vec![Message::User(UserMessage::text(text))].into(),
        ..ModelRequest::default()
    }
}

/// Runs one call, checking the key appears nowhere.
async fn run(
    provider: &OpenAiChat,
    request: ModelRequest,
) -> (Vec<ContentDelta>, Result<AssistantMessage, AssistantMessage>) {
    common::run_call(provider, request, KEY).await
}

async fn serve(name: &str) -> MockServer {
    MockServer::start(vec![MockResponse::sse(&fixture(&format!("openai_chat/{name}")))]).await
}

fn text(s: &str) -> AssistantContent {
    AssistantContent::Text(TextContent { text: s.to_string() })
}

#[tokio::test]
async fn plain_text() {
    let server = serve("text.sse").await;
    let (deltas, message) = run(&provider(&server), request("Hi")).await;
    let message = message.unwrap();
    assert_eq!(
        deltas,
        vec![
            ContentDelta::TextStart { index: 0 },
            ContentDelta::TextDelta { index: 0, delta: "Hello".into() },
            ContentDelta::TextDelta { index: 0, delta: ", world".into() },
            ContentDelta::TextDelta { index: 0, delta: "!".into() },
            ContentDelta::TextEnd { index: 0 },
        ]
    );
    assert_eq!(message.content, vec![text("Hello, world!")]);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.error_message, None);
    assert_eq!((message.provider.as_str(), message.model.as_str()), ("openai", "gpt-4o"));
    let mut usage = Usage::new(19, 10, 0, 0);
    usage.reasoning = Some(0);
    assert_eq!(message.usage, usage);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(r.header("x-extra"), Some("yes"));
    let body = r.json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "Hi"}]));
}

#[tokio::test]
async fn thinking_then_text_from_reasoning_content() {
    let server = serve("reasoning.sse").await;
    let (deltas, message) = run(&provider(&server), request("Hi")).await;
    let message = message.unwrap();
    assert_eq!(
        deltas,
        vec![
            ContentDelta::ThinkingStart { index: 0 },
            ContentDelta::ThinkingDelta { index: 0, delta: "The user".into() },
            ContentDelta::ThinkingDelta { index: 0, delta: " greets me.".into() },
            ContentDelta::ThinkingEnd { index: 0 },
            ContentDelta::TextStart { index: 1 },
            ContentDelta::TextDelta { index: 1, delta: "Hi".into() },
            ContentDelta::TextDelta { index: 1, delta: " there.".into() },
            ContentDelta::TextEnd { index: 1 },
        ]
    );
    assert_eq!(
        message.content,
        vec![
            AssistantContent::Thinking(ThinkingContent {
                thinking: "The user greets me.".into(),
                signature: None
            }),
            text("Hi there."),
        ]
    );
    assert_eq!(message.usage.output, 25);
    assert_eq!(message.usage.reasoning, Some(20));
    assert_eq!(message.usage.total, 35);
}

#[tokio::test]
async fn two_parallel_tool_calls_with_interleaved_arguments() {
    let server = serve("parallel_tools.sse").await;
    let (deltas, message) = run(&provider(&server), request("Weather and time?")).await;
    let message = message.unwrap();
    assert_eq!(
        deltas,
        vec![
            ContentDelta::ToolCallStart {
                index: 0,
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "get_weather".into()
            },
            ContentDelta::ToolCallDelta { index: 0, delta: "{\"lo".into() },
            ContentDelta::ToolCallStart {
                index: 1,
                id: "call_ABCDEFGHIJKLMNOPQRSTUVWX".into(),
                name: "get_time".into()
            },
            ContentDelta::ToolCallDelta { index: 1, delta: "{\"zone\"".into() },
            ContentDelta::ToolCallDelta { index: 0, delta: "cation\": \"Par".into() },
            ContentDelta::ToolCallDelta { index: 1, delta: ": \"CET\"}".into() },
            ContentDelta::ToolCallDelta { index: 0, delta: "is\"}".into() },
            ContentDelta::ToolCallEnd { index: 0 },
            ContentDelta::ToolCallEnd { index: 1 },
        ]
    );
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].arguments, json!({"location": "Paris"}).into());
    assert_eq!(calls[1].arguments, json!({"zone": "CET"}).into());
    assert_eq!((message.usage.input, message.usage.cache_read), (18, 64));
}

#[tokio::test]
async fn usage_with_cached_tokens_and_cost() {
    let server = serve("cached_usage.sse").await;
    let mut req = request("Hi");
    req.prices =
        Some(weft_core::Prices { input: 2.5, output: 10.0, cache_read: 1.25, cache_write: 0.0 });
    let (_, message) = run(&provider(&server), req).await;
    let message = message.unwrap();
    let mut usage = Usage::new(2006 - 1920, 300, 1920, 0);
    usage.reasoning = Some(64);
    assert_eq!(message.usage, usage);
    assert_eq!(message.usage.total, 2306);
    let cost = message.cost.unwrap();
    assert!((cost.input - 86.0 * 2.5 / 1e6).abs() < 1e-12);
    assert!((cost.cache_read - 1920.0 * 1.25 / 1e6).abs() < 1e-12);
}

#[tokio::test]
async fn length_stop() {
    let server = serve("length.sse").await;
    let (_, message) = run(&provider(&server), request("Story")).await;
    let message = message.unwrap();
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(message.content, vec![text("Once upon a")]);
}

#[tokio::test]
async fn content_filter_is_an_error_with_the_reason() {
    let server = serve("content_filter.sse").await;
    let (_, message) = run(&provider(&server), request("…")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.as_deref().unwrap().contains("content_filter"));
    assert_eq!(message.content, vec![text("I can")], "partial kept");
    assert_eq!(message.usage.output, 2, "usage kept");
}

#[tokio::test]
async fn refusal_is_an_error_with_the_refusal_text() {
    let server = serve("refusal.sse").await;
    let (deltas, message) = run(&provider(&server), request("…")).await;
    let message = message.unwrap_err();
    assert!(deltas.is_empty());
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("the model refused: I'm sorry, I can't help with that.")
    );
    assert_eq!(message.usage.input, 15);
}

#[tokio::test]
async fn empty_response() {
    let server = serve("empty.sse").await;
    let (deltas, message) = run(&provider(&server), request("…")).await;
    let message = message.unwrap();
    assert!(deltas.is_empty());
    assert!(message.content.is_empty());
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.usage.input, 8);
}

#[tokio::test]
async fn malformed_line_is_an_error_and_keeps_the_partial() {
    let server = serve("malformed.sse").await;
    let (_, message) = run(&provider(&server), request("…")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.as_deref().unwrap().contains("malformed JSON"));
    assert_eq!(message.content, vec![text("Partial")]);
}

#[tokio::test]
async fn error_object_in_the_stream() {
    let server = serve("error_chunk.sse").await;
    let (_, message) = run(&provider(&server), request("…")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.unwrap();
    assert!(error.contains("The server had an error"), "{error}");
    assert_eq!(message.content, vec![text("Part")]);
}

#[tokio::test]
async fn connection_cut_mid_stream_keeps_the_partial() {
    let server =
        MockServer::start(vec![MockResponse::sse(&fixture("openai_chat/cut.sse")).cut()]).await;
    let (_, message) = run(&provider(&server), request("…")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.content, vec![text("Hello, wor")]);
    assert!(message.error_message.is_some());
    assert_eq!(server.requests().len(), 1, "nothing is retried once content streamed");
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let server = MockServer::start(vec![
        MockResponse::status(
            429,
            r#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        )
        .with_header("retry-after", "1"),
        MockResponse::sse(&fixture("openai_chat/text.sse")),
    ])
    .await;
    let (_, message) = run(&provider(&server), request("Hi")).await;
    assert_eq!(message.unwrap().text(), "Hello, world!");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_secs(1), "waited only {waited:?}");
}

#[tokio::test]
async fn server_error_exhausts_retries() {
    let body = r#"{"error":{"message":"The server had an error processing your request.","type":"server_error"}}"#;
    let server = MockServer::start(vec![
        MockResponse::status(500, body),
        MockResponse::status(500, body),
        MockResponse::status(500, body),
        MockResponse::sse(&fixture("openai_chat/text.sse")),
    ])
    .await;
    let retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(10),
        ..RetryPolicy::default()
    };
    let client = HttpClient::new(Timeouts::default(), retry).unwrap();
    let p = OpenAiChat::new(settings(&server), client);
    let (deltas, message) = run(&p, request("Hi")).await;
    let message = message.unwrap_err();
    assert!(deltas.is_empty());
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.unwrap();
    assert!(error.contains("500") && error.contains("server had an error"), "{error}");
    assert_eq!(server.requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn abort_mid_stream_keeps_partial_and_usage() {
    let server = MockServer::start(vec![MockResponse::sse_parts(vec![
        Part::text(&fixture("openai_chat/abort_head.sse")),
        Part::Stall,
    ])])
    .await;
    let cancel = CancellationToken::new();
    let mut stream = provider(&server).stream(request("Hi"), cancel.clone());
    let run = async {
        let mut seen = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                StreamEvent::Content(d) => {
                    if matches!(d, ContentDelta::TextDelta { .. }) {
                        cancel.cancel();
                    }
                    seen.push(d);
                }
                terminal => return (seen, terminal),
            }
        }
        panic!("no terminal event");
    };
    let (seen, terminal) = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap();
    assert_eq!(seen.len(), 2);
    let StreamEvent::Error(message) = terminal else { panic!("not an error: {terminal:?}") };
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.content, vec![text("Thinking about it")]);
    assert_eq!((message.usage.input, message.usage.output), (30, 4), "usage already sent kept");
}

#[tokio::test]
async fn compatible_server_quirks() {
    // Ollama-style: `reasoning` deltas, a whole tool call in one chunk without an id, no usage.
    let server = serve("one_piece_no_ids.sse").await;
    let compat = ChatCompat {
        stream_options: false,
        reasoning_field: ReasoningField::Named("reasoning".into()),
        max_tokens_field: MaxTokensField::MaxTokens,
        send_reasoning_as: Some("reasoning_content".into()),
    };
    let p = provider(&server).with_compat(compat);
    let mut req = request("Weather?");
    req.max_tokens = Some(100);
    req.messages.push(Message::Assistant(AssistantMessage {
        content: vec![
            AssistantContent::Thinking(ThinkingContent {
                thinking: "Earlier.".into(),
                signature: None,
            }),
            text("Sure."),
        ],
        ..AssistantMessage::empty("openai", "gpt-4o")
    }));
    req.messages.push(Message::User(UserMessage::text("Now?")));
    let (_, message) = run(&p, req).await;
    let message = message.unwrap();
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(
        message.content,
        vec![
            AssistantContent::Thinking(ThinkingContent {
                thinking: "Need the weather.".into(),
                signature: None
            }),
            AssistantContent::ToolCall(ToolCall {
                id: "call_chatcmpl412_1".into(),
                name: "get_weather".into(),
                arguments: json!({"location": "Paris"}).into(),
            }),
        ]
    );
    assert_eq!(message.usage, Usage::default());
    let body = server.requests()[0].json();
    assert!(body.get("stream_options").is_none());
    assert_eq!(body["max_tokens"], 100);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Sure.", "reasoning_content": "Earlier."})
    );
}

#[tokio::test]
async fn request_carries_system_history_tools_and_results() {
    let server = serve("text.sse").await;
    let call_a = ToolCall {
        id: "call_a".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Paris"}).into(),
    };
    let call_b =
        ToolCall { id: "call_b".into(), name: "get_time".into(), arguments: json!({}).into() };
    let assistant = AssistantMessage {
        content: vec![
            AssistantContent::Thinking(ThinkingContent {
                thinking: "Two calls.".into(),
                signature: None,
            }),
            text("Checking."),
            AssistantContent::ToolCall(call_a.clone()),
            AssistantContent::ToolCall(call_b.clone()),
        ],
        stop_reason: StopReason::ToolUse,
        ..AssistantMessage::empty("openai", "gpt-4o")
    };
    let mut image = UserMessage::text("Look:");
    image.content.push(weft_core::UserContent::Image(weft_core::ImageContent {
        data: "iVBORw0KGgo=".into(),
        mime_type: "image/png".into(),
    }));
    let req = ModelRequest {
        model: "gpt-4o".into(),
        system_prompt: Some("You are terse.".into()),
        messages: vec![
            Message::User(image),
            Message::Assistant(assistant),
            Message::ToolResult(ToolResultMessage::ok(&call_a, "18°C")),
            Message::ToolResult(ToolResultMessage::error(&call_b, "clock broken")),
            Message::User(UserMessage::text("Thanks")),
        ]
        .into(),
        tools: vec![ToolSpec::new(
            "get_weather",
            "Weather for a place",
            json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        )],
        temperature: Some(0.5),
        max_tokens: Some(256),
        ..ModelRequest::default()
    };
    let (_, message) = run(&provider(&server), req).await;
    message.unwrap();
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "get_time", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "18°C"},
            {"role": "tool", "tool_call_id": "call_b", "content": "clock broken"},
            {"role": "user", "content": "Thanks"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "Weather for a place",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        }}])
    );
    assert_eq!(body["max_completion_tokens"], 256);
    assert_eq!(body["temperature"], 0.5);
    assert!(!body.to_string().contains(KEY));
}

#[tokio::test]
async fn api_key_absent_means_no_authorization_header() {
    let server = serve("text.sse").await;
    let mut s = settings(&server);
    s.api_key = None;
    let (_, message) = run(&OpenAiChat::new(s, test_client()), request("Hi")).await;
    message.unwrap();
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn byte_boundaries_do_not_matter() {
    // Every fixture, served whole and in 3-byte HTTP chunks, decodes to the same message.
    for file in ["text.sse", "reasoning.sse", "parallel_tools.sse", "length.sse"] {
        let body = fixture(&format!("openai_chat/{file}"));
        let whole = MockServer::start(vec![MockResponse::sse(&body)]).await;
        let split = MockServer::start(vec![MockResponse::sse_parts(common::split_parts(
            body.as_bytes(),
            3,
        ))])
        .await;
        let (d1, m1) = run(&provider(&whole), request("Hi")).await;
        let (d2, m2) = run(&provider(&split), request("Hi")).await;
        assert_eq!(d1, d2, "{file}");
        let (mut m1, mut m2) = (m1.unwrap(), m2.unwrap());
        m2.timestamp = m1.timestamp;
        m1.cost = None;
        m2.cost = None;
        assert_eq!(m1, m2, "{file}");
    }
}

/// Against the real service; runs only with `OPENAI_API_KEY` set (`cargo test -- --ignored`).
#[tokio::test]
#[ignore = "needs OPENAI_API_KEY and the network"]
async fn real_service() {
    let Ok(key) = std::env::var("OPENAI_API_KEY") else { return };
    let base_url =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".into());
    let settings = ProviderSettings {
        api_key: Some(key.clone()),
        base_url,
        extra_headers: Vec::new(),
        models: ModelRegistry::builtin(),
    };
    let p = OpenAiChat::new(
        settings,
        HttpClient::new(Timeouts::default(), RetryPolicy::default()).unwrap(),
    );
    let mut req = request("Say hello in one word.");
    req.model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let (deltas, terminal) = collect_stream(p.stream(req, CancellationToken::new())).await;
    assert!(!format!("{deltas:?} {terminal:?}").contains(&key));
    let StreamEvent::Done(message) = terminal else { panic!("{terminal:?}") };
    assert!(!message.text().is_empty());
    assert!(message.usage.input > 0 && message.usage.output > 0);
}

const MAX: u64 = u64::MAX;

#[tokio::test]
async fn usage_near_u64_max_saturates_instead_of_panicking() {
    let server = serve("huge_usage.sse").await;
    let mut request = request("Count");
    request.prices =
        Some(weft_core::Prices { input: 2.5, output: 10.0, cache_read: 1.25, cache_write: 0.0 });
    let (_, message) = run(&provider(&server), request).await;
    let message = message.unwrap();
    assert_eq!(message.content, vec![text("Big")]);
    assert_eq!(message.stop_reason, StopReason::Stop);
    // prompt − cached = 10; a completion count beyond u64 (1e20) saturates; the total too.
    let u = message.usage;
    assert_eq!((u.input, u.output, u.cache_read, u.cache_write), (10, MAX, MAX - 10, 0));
    assert_eq!((u.reasoning, u.total), (Some(MAX), MAX));
    let cost = message.cost.unwrap();
    for x in [cost.input, cost.output, cost.cache_read, cost.cache_write, cost.total] {
        assert!(x.is_finite(), "{cost:?}");
    }
}

#[tokio::test]
async fn an_unknown_finish_reason_after_tool_calls_is_tool_use() {
    let server = serve("unknown_reason_tools.sse").await;
    let (_, message) = run(&provider(&server), request("Weather?")).await;
    let message = message.unwrap();
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.error_message, None);
    assert_eq!(
        message.content,
        vec![AssistantContent::ToolCall(ToolCall {
            id: "call_Kx1".into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}).into(),
        })]
    );
}

#[tokio::test]
async fn an_unknown_finish_reason_after_text_keeps_it_and_names_the_reason() {
    let server = serve("unknown_reason_text.sse").await;
    let (_, message) = run(&provider(&server), request("?")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.content, vec![text("The answer is")], "the content is kept");
    assert_eq!(
        message.error_message.as_deref(),
        Some(
            "the provider stopped the response for a reason Weft does not know: guardrail_intervened"
        )
    );
}

#[tokio::test]
async fn finish_reasons_of_compatible_servers() {
    let chunk = |delta: &str, reason: &str| {
        format!(
            "data: {{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":\"{reason}\"}}]}}\n\n"
        )
    };
    let call = r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#;
    let words = r#"{"content":"Hi"}"#;
    for (delta, reason, expected) in [
        (words, "eos", Ok(StopReason::Stop)),
        (words, "eos_token", Ok(StopReason::Stop)),
        (words, "stop_sequence", Ok(StopReason::Stop)),
        (words, "end_turn", Ok(StopReason::Stop)),
        (words, "max_tokens", Ok(StopReason::Length)),
        (call, "function_call", Ok(StopReason::ToolUse)),
        (call, "tool_use", Ok(StopReason::ToolUse)),
        // `stop` on a turn with tool calls (Gemini's OpenAI-compatible endpoint): tool use.
        (call, "stop", Ok(StopReason::ToolUse)),
        (call, "something_new", Ok(StopReason::ToolUse)),
        // Documented failures stay failures, calls or not.
        (call, "content_filter", Err("content_filter")),
        (words, "safety", Err("safety")),
        (words, "something_new", Err("something_new")),
    ] {
        let body = format!("{}data: [DONE]\n\n", chunk(delta, reason));
        let server = MockServer::start(vec![MockResponse::sse(&body)]).await;
        let (_, message) = run(&provider(&server), request("?")).await;
        match (expected, message) {
            (Ok(stop), Ok(m)) => assert_eq!(m.stop_reason, stop, "{reason}"),
            (Err(word), Err(m)) => {
                assert_eq!(m.stop_reason, StopReason::Error, "{reason}");
                assert!(m.error_message.as_deref().unwrap().contains(word), "{reason}: {m:?}");
                assert!(!m.content.is_empty(), "{reason}: the content is kept");
            }
            (expected, got) => panic!("{reason}: expected {expected:?}, got {got:?}"),
        }
    }
}

#[tokio::test]
async fn a_json_answer_from_a_server_that_does_not_stream_is_named_as_such() {
    let json = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}"#;
    let server = MockServer::start(vec![MockResponse {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        parts: vec![Part::text(json)],
        ..MockResponse::default()
    }])
    .await;
    let (deltas, message) = run(&provider(&server), request("Hi")).await;
    assert!(deltas.is_empty());
    let message = message.unwrap_err();
    let error = message.error_message.unwrap();
    assert!(
        error.starts_with(
            "the provider did not answer with an event stream (content type application/json; \
             body: {\"id\":\"chatcmpl-1\""
        ),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1, "not retried");
}

#[tokio::test]
async fn a_404_names_the_url_asked() {
    let server = MockServer::start(vec![MockResponse::status(
        404,
        r#"{"error":{"message":"The model `gpt-4o` does not exist","type":"invalid_request_error"}}"#,
    )])
    .await;
    let (_, message) = run(&provider(&server), request("Hi")).await;
    let error = String::from(message.unwrap_err().error_message.unwrap());
    assert_eq!(
        error,
        format!(
            "the provider answered HTTP 404 Not Found for POST {}/v1/chat/completions: The model \
             `gpt-4o` does not exist (invalid_request_error)",
            server.url()
        )
    );
}
