//! The OpenAI Responses adapter against byte-exact SSE streams served over real HTTP on
//! 127.0.0.1: canonical events, final messages, failures, and the requests it sends (reasoning
//! items sent back exactly).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{MockResponse, MockServer, Part, collect_stream, fixture, test_client};
use futures::StreamExt;
use serde_json::{Value, json};
use weft_core::{
    AssistantContent, AssistantMessage, Message, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, ToolSpec, Usage, UserMessage,
};
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_llm::providers::ProviderSettings;
use weft_llm::providers::openai_responses::OpenAiResponses;
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, Provider, StreamEvent};

const KEY: &str = "sk-test-DO-NOT-LEAK-4b1e77";

fn settings(server: &MockServer) -> ProviderSettings {
    ProviderSettings {
        api_key: Some(KEY.to_string()),
        base_url: format!("{}/v1", server.url()),
        extra_headers: vec![("openai-organization".to_string(), "org-test".to_string())],
        models: Arc::new(ModelRegistry::empty()),
    }
}

fn provider(server: &MockServer) -> OpenAiResponses {
    OpenAiResponses::new(settings(server), test_client())
}

fn request(model: &str, text: &str) -> ModelRequest {
    ModelRequest {
        model: model.to_string(),
        messages: vec![Message::User(UserMessage::text(text))].into(),
        ..ModelRequest::default()
    }
}

/// Runs one call, checking the key appears nowhere.
async fn run(
    provider: &OpenAiResponses,
    request: ModelRequest,
) -> (Vec<ContentDelta>, Result<AssistantMessage, AssistantMessage>) {
    common::run_call(provider, request, KEY).await
}

async fn serve(name: &str) -> MockServer {
    MockServer::start(vec![MockResponse::sse(&fixture(&format!("openai_responses/{name}")))]).await
}

fn text(s: &str) -> AssistantContent {
    AssistantContent::Text(TextContent { text: s.to_string() })
}

#[tokio::test]
async fn plain_text() {
    let server = serve("text.sse").await;
    let mut req = request("gpt-4o", "Hi");
    req.system_prompt = Some("You are terse.".into());
    req.max_tokens = Some(300);
    req.temperature = Some(0.2);
    let (deltas, message) = run(&provider(&server), req).await;
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
    assert_eq!((message.provider.as_str(), message.model.as_str()), ("openai-responses", "gpt-4o"));
    let mut usage = Usage::new(37, 11, 0, 0);
    usage.reasoning = Some(0);
    assert_eq!(message.usage, usage);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.path, "/v1/responses");
    assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(r.header("openai-organization"), Some("org-test"));
    let body = r.json();
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["instructions"], "You are terse.");
    assert_eq!(body["stream"], true);
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["max_output_tokens"], 300);
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert!(body.get("reasoning").is_none(), "gpt-4o takes no reasoning options");
    assert_eq!(
        body["input"],
        json!([{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}])
    );
}

#[tokio::test]
async fn thinking_then_text_and_the_reasoning_item_goes_back_exactly() {
    let server = serve("reasoning.sse").await;
    let p = provider(&server);
    let (deltas, message) = run(&p, request("o4-mini", "Hi")).await;
    let message = message.unwrap();
    let item: Value =
        serde_json::from_str(&fixture("openai_responses/reasoning_item.json")).unwrap();
    let summary = "**Greeting**\n\nThe user says hi.\n\nReply briefly.";
    assert_eq!(deltas[0], ContentDelta::ThinkingStart { index: 0 });
    assert_eq!(deltas.last(), Some(&ContentDelta::TextEnd { index: 1 }));
    let ends: Vec<&ContentDelta> = deltas
        .iter()
        .filter(|d| matches!(d, ContentDelta::ThinkingEnd { .. } | ContentDelta::TextStart { .. }))
        .collect();
    assert_eq!(
        ends,
        vec![&ContentDelta::ThinkingEnd { index: 0 }, &ContentDelta::TextStart { index: 1 }]
    );
    assert_eq!(message.content.len(), 2);
    let AssistantContent::Thinking(thinking) = &message.content[0] else { panic!("not thinking") };
    assert_eq!(thinking.thinking, summary);
    let signature: Value = serde_json::from_str(thinking.signature.as_deref().unwrap()).unwrap();
    assert_eq!(signature, item);
    assert_eq!(message.content[1], text("Hi!"));
    assert_eq!(message.usage.reasoning, Some(128));
    assert_eq!(server.requests()[0].json()["reasoning"], json!({"summary": "auto"}));

    // The next request to the same model sends the reasoning item back as it came.
    let server2 = serve("text.sse").await;
    let mut next = request("o4-mini", "Hi");
    next.messages.push(Message::Assistant(message));
    next.messages.push(Message::User(UserMessage::text("And?")));
    run(&provider(&server2), next).await.1.unwrap();
    let input = server2.requests()[0].json()["input"].clone();
    assert_eq!(input[1], item, "reasoning item sent back exactly");
    assert_eq!(input[2]["type"], "message");
    assert_eq!(input[2]["role"], "assistant");
    assert_eq!(
        input[2]["content"],
        json!([{"type": "output_text", "text": "Hi!", "annotations": []}])
    );

    // Another model gets neither the item nor the signature: the summary becomes text.
    let server3 = serve("text.sse").await;
    let mut other = request("gpt-4o", "Hi");
    let mut foreign = AssistantMessage::empty("openai-responses", "o4-mini");
    foreign.content.push(AssistantContent::Thinking(ThinkingContent {
        thinking: "secret plan".into(),
        signature: Some(item.to_string()),
    }));
    other.messages.push(Message::Assistant(foreign));
    run(&provider(&server3), other).await.1.unwrap();
    let body = server3.requests()[0].json();
    assert!(!body.to_string().contains("encrypted_content\":\"gAAAA"), "{body}");
}

#[tokio::test]
async fn two_parallel_tool_calls_with_interleaved_arguments() {
    let server = serve("parallel_tools.sse").await;
    let (deltas, message) = run(&provider(&server), request("gpt-4o", "Weather and time?")).await;
    let message = message.unwrap();
    let id1 = "call_unLAR8MvFNptuiZK6K6HCy5k|fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0";
    let id2 = "call_9rL2a7kZsQ0bX1cVd4eFh6gT|fc_67ca09c6c0e081909b8e0f7d6a1ff9f1096610f474011cc0";
    assert_eq!(
        deltas,
        vec![
            ContentDelta::ToolCallStart { index: 0, id: id1.into(), name: "get_weather".into() },
            ContentDelta::ToolCallDelta { index: 0, delta: "{\"lo".into() },
            ContentDelta::ToolCallStart { index: 1, id: id2.into(), name: "get_time".into() },
            ContentDelta::ToolCallDelta { index: 1, delta: "{\"zone\"".into() },
            ContentDelta::ToolCallDelta { index: 0, delta: "cation\":\"Par".into() },
            ContentDelta::ToolCallDelta { index: 1, delta: ":\"CET\"}".into() },
            ContentDelta::ToolCallDelta { index: 0, delta: "is\"}".into() },
            ContentDelta::ToolCallEnd { index: 0 },
            ContentDelta::ToolCallEnd { index: 1 },
        ]
    );
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    assert_eq!(calls[0].arguments, json!({"location": "Paris"}).into());
    assert_eq!(calls[1].arguments, json!({"zone": "CET"}).into());
    // Usage with cached tokens: input is the non-cached part.
    let mut usage = Usage::new(2100 - 1920, 40, 1920, 0);
    usage.reasoning = Some(0);
    assert_eq!(message.usage, usage);

    // Sent back: the calls with their call and item ids, then their results.
    let server2 = serve("text.sse").await;
    let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
    let mut next = request("gpt-4o", "Weather and time?");
    next.messages.push(Message::Assistant(message));
    next.messages.push(Message::ToolResult(ToolResultMessage::ok(&calls[0], "18°C")));
    next.messages.push(Message::ToolResult(ToolResultMessage::error(&calls[1], "no clock")));
    next.tools = vec![ToolSpec::new(
        "get_weather",
        "Weather for a place",
        json!({"type": "object", "properties": {"location": {"type": "string"}}}),
    )];
    run(&provider(&server2), next).await.1.unwrap();
    let body = server2.requests()[0].json();
    assert_eq!(
        body["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "Weather and time?"}]},
            {"type": "function_call", "id": "fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0",
             "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k", "name": "get_weather",
             "arguments": "{\"location\":\"Paris\"}"},
            {"type": "function_call", "id": "fc_67ca09c6c0e081909b8e0f7d6a1ff9f1096610f474011cc0",
             "call_id": "call_9rL2a7kZsQ0bX1cVd4eFh6gT", "name": "get_time",
             "arguments": "{\"zone\":\"CET\"}"},
            {"type": "function_call_output", "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
             "output": "18°C"},
            {"type": "function_call_output", "call_id": "call_9rL2a7kZsQ0bX1cVd4eFh6gT",
             "output": "no clock"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "Weather for a place",
                "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
                "strict": false}])
    );
}

#[tokio::test]
async fn length_stop() {
    let server = serve("length.sse").await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "Story")).await;
    let message = message.unwrap();
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(message.content, vec![text("Once upon a")]);
    assert_eq!(message.usage.output, 3);
}

#[tokio::test]
async fn content_filter_is_an_error_with_the_reason() {
    let server = serve("content_filter.sse").await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.as_deref().unwrap().contains("content_filter"));
    assert_eq!(message.content, vec![text("I can")]);
    assert_eq!(message.usage.output, 2);
}

#[tokio::test]
async fn empty_response() {
    let server = serve("empty.sse").await;
    let (deltas, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    let message = message.unwrap();
    assert!(deltas.is_empty());
    assert!(message.content.is_empty());
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.usage.input, 8);
}

#[tokio::test]
async fn malformed_line_is_an_error_and_keeps_the_partial() {
    let server = serve("malformed.sse").await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    let message = message.unwrap_err();
    assert!(message.error_message.as_deref().unwrap().contains("malformed JSON"));
    assert_eq!(message.content, vec![text("Partial")]);
}

#[tokio::test]
async fn failed_response_is_an_error_with_its_message() {
    let server = serve("failed.sse").await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    let message = message.unwrap_err();
    let error = message.error_message.unwrap();
    assert!(
        error.contains("The model failed to generate a response") && error.contains("server_error")
    );
    assert_eq!(message.content, vec![text("Part")]);
}

#[tokio::test]
async fn an_error_event_before_content_is_retried() {
    let overloaded = fixture("openai_responses/error_overloaded.sse");
    let server = MockServer::start(vec![
        MockResponse::sse(&overloaded),
        MockResponse::sse(&fixture("openai_responses/text.sse")),
    ])
    .await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    assert!(message.is_ok(), "{message:?}");
    assert_eq!(server.requests().len(), 2, "retried once");

    // When every try fails the same way, the last error is reported with the retries made.
    let server = MockServer::start(vec![MockResponse::sse(&overloaded); 4]).await;
    let (deltas, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    let message = message.unwrap_err();
    assert!(deltas.is_empty());
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.unwrap();
    assert!(
        error.contains("Rate limit reached") && error.contains("rate_limit_exceeded"),
        "{error}"
    );
    assert!(error.contains("after 3 retries"), "{error}");
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn connection_cut_mid_stream_keeps_the_partial() {
    let server =
        MockServer::start(vec![MockResponse::sse(&fixture("openai_responses/cut.sse")).cut()])
            .await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "…")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.content, vec![text("Hello, wor")]);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let server = MockServer::start(vec![
        MockResponse::status(
            429,
            r#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        )
        .with_header("retry-after", "1"),
        MockResponse::sse(&fixture("openai_responses/text.sse")),
    ])
    .await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "Hi")).await;
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
        MockResponse::sse(&fixture("openai_responses/text.sse")),
    ])
    .await;
    let retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(10),
        ..RetryPolicy::default()
    };
    let client = HttpClient::new(Timeouts::default(), retry).unwrap();
    let (deltas, message) =
        run(&OpenAiResponses::new(settings(&server), client), request("gpt-4o", "Hi")).await;
    let message = message.unwrap_err();
    assert!(deltas.is_empty());
    let error = message.error_message.unwrap();
    assert!(error.contains("500") && error.contains("server had an error"), "{error}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn abort_mid_stream_keeps_the_partial() {
    let server = MockServer::start(vec![MockResponse::sse_parts(vec![
        Part::text(&fixture("openai_responses/abort_head.sse")),
        Part::Stall,
    ])])
    .await;
    let cancel = CancellationToken::new();
    let mut stream = provider(&server).stream(request("gpt-4o", "Hi"), cancel.clone());
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
}

#[tokio::test]
async fn history_from_another_provider_is_sent_as_plain_items() {
    let server = serve("text.sse").await;
    let call = ToolCall {
        id: "toolu_01A09q90qw90lq917835lq9".into(),
        name: "get_weather".into(),
        arguments: json!({"location": "Paris"}).into(),
    };
    let mut assistant = AssistantMessage::empty("anthropic", "claude-sonnet-4-5");
    assistant.stop_reason = StopReason::ToolUse;
    assistant.content = vec![
        AssistantContent::Thinking(ThinkingContent {
            thinking: "Check weather.".into(),
            signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3h".into()),
        }),
        text("Let me check."),
        AssistantContent::ToolCall(call.clone()),
    ];
    let mut req = request("gpt-4o", "Weather?");
    req.messages.push(Message::Assistant(assistant));
    req.messages.push(Message::ToolResult(ToolResultMessage::ok(&call, "18°C")));
    run(&provider(&server), req).await.1.unwrap();
    let input = server.requests()[0].json()["input"].clone();
    let items = input.as_array().unwrap();
    assert_eq!(items.len(), 5);
    assert_eq!(items[1]["content"][0]["text"], "<thinking>\nCheck weather.\n</thinking>");
    assert_eq!(items[2]["content"][0]["text"], "Let me check.");
    assert_eq!(items[3]["type"], "function_call");
    assert!(items[3].get("id").is_none(), "no item id for a foreign call");
    assert_eq!(items[3]["call_id"], items[4]["call_id"]);
    assert_eq!(items[4]["type"], "function_call_output");
    assert!(!input.to_string().contains("EqQBCgIYAhIM"), "foreign signatures are not sent");
}

#[tokio::test]
async fn byte_boundaries_do_not_matter() {
    // Every fixture, served whole and in 3-byte HTTP chunks, decodes to the same message.
    for file in ["text.sse", "reasoning.sse", "parallel_tools.sse", "length.sse"] {
        let body = fixture(&format!("openai_responses/{file}"));
        let whole = MockServer::start(vec![MockResponse::sse(&body)]).await;
        let split = MockServer::start(vec![MockResponse::sse_parts(common::split_parts(
            body.as_bytes(),
            3,
        ))])
        .await;
        let (d1, m1) = run(&provider(&whole), request("o4-mini", "Hi")).await;
        let (d2, m2) = run(&provider(&split), request("o4-mini", "Hi")).await;
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
    let client = HttpClient::new(Timeouts::default(), RetryPolicy::default()).unwrap();
    let p = OpenAiResponses::new(settings, client);
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "o4-mini".into());
    let (deltas, terminal) =
        collect_stream(p.stream(request(&model, "What is 17 * 23?"), CancellationToken::new()))
            .await;
    assert!(!format!("{deltas:?} {terminal:?}").contains(&key));
    let StreamEvent::Done(message) = terminal else { panic!("{terminal:?}") };
    assert!(!message.text().is_empty());
    // The reasoning (if any) goes back on the next turn.
    let mut next = request(&model, "What is 17 * 23?");
    next.messages.push(Message::Assistant(*message));
    next.messages.push(Message::User(UserMessage::text("And times 2?")));
    let (_, terminal) = collect_stream(p.stream(next, CancellationToken::new())).await;
    assert!(matches!(terminal, StreamEvent::Done(_)), "{terminal:?}");
}

#[tokio::test]
async fn usage_near_u64_max_saturates_instead_of_panicking() {
    let server = serve("huge_usage.sse").await;
    let mut request = request("gpt-4o", "Count");
    request.prices =
        Some(weft_core::Prices { input: 2.5, output: 10.0, cache_read: 1.25, cache_write: 0.0 });
    let (_, message) = run(&provider(&server), request).await;
    let message = message.unwrap();
    assert_eq!(message.content, vec![text("Big")]);
    let u = message.usage;
    assert_eq!((u.input, u.output, u.cache_read), (u64::MAX - 7, u64::MAX, 7));
    assert_eq!((u.reasoning, u.total), (Some(u64::MAX), u64::MAX));
    assert!(message.cost.unwrap().total.is_finite());
}

#[tokio::test]
async fn an_unknown_incomplete_reason_after_a_complete_call_is_tool_use() {
    let server = serve("incomplete_unknown_reason_call.sse").await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "Weather?")).await;
    let message = message.unwrap();
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(
        message.content,
        vec![AssistantContent::ToolCall(ToolCall {
            id: "call_Zq81LmN0pQr2StU3vWx4YzA5|fc_68a1c0ffee6c8190a7abfec07b1a1332096610f474011cc0"
                .into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}).into(),
        })]
    );
    assert_eq!(message.usage.output, 18);
}

#[tokio::test]
async fn an_unknown_status_without_calls_keeps_the_text_and_names_it() {
    let server = serve("unknown_status.sse").await;
    let (_, message) = run(&provider(&server), request("gpt-4o", "?")).await;
    let message = message.unwrap_err();
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.content, vec![text("So far")]);
    assert_eq!(
        message.error_message.as_deref(),
        Some("the provider ended the response with a status Weft does not know: paused")
    );
    assert_eq!(message.usage.input, 50, "usage kept");
}
