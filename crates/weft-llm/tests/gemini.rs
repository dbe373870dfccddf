//! The Gemini adapter over real HTTP on 127.0.0.1: byte-exact `streamGenerateContent?alt=sse`
//! streams (fixtures under `tests/fixtures/gemini/`) driven through `Provider::stream`, the
//! request it sends, and failure handling (cut, malformed chunk, 429 then success, 500 retries
//! exhausted, abort). One `#[ignore]`d test talks to the real service when `GEMINI_API_KEY` is set.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{MockResponse, MockServer, Part, collect_stream, fixture, split_parts, test_client};
use futures::StreamExt;
use serde_json::{Value, json};
use weft_core::{
    AssistantContent, AssistantMessage, ImageContent, Message, Prices, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, ToolSpec, UserContent, UserMessage,
};
use weft_llm::dialect::SseDecoder;
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_llm::providers::ProviderSettings;
use weft_llm::providers::gemini::{Gemini, GeminiDecoder};
use weft_llm::sse::SseEvent;
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, Provider, StreamEvent};

const KEY: &str = "AIzaSy-test-SECRET-key";
const MODEL: &str = "gemini-2.5-flash";

fn settings(base_url: String) -> ProviderSettings {
    ProviderSettings {
        api_key: Some(KEY.to_string()),
        base_url,
        extra_headers: vec![("x-extra".to_string(), "yes".to_string())],
        models: Arc::new(ModelRegistry::empty()),
    }
}

fn gemini(server: &MockServer) -> Gemini {
    Gemini::new(settings(server.url()), test_client())
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        model: MODEL.into(),
        messages: vec![Message::User(UserMessage::text(text))].into(),
        ..ModelRequest::default()
    }
}

/// Runs one call against a server playing `responses`; the deltas, the terminal event, and the
/// server (to look at the requests).
async fn run(
    responses: Vec<MockResponse>,
    provider: impl FnOnce(&MockServer) -> Gemini,
    request: ModelRequest,
) -> (Vec<ContentDelta>, StreamEvent, MockServer) {
    let server = MockServer::start(responses).await;
    let provider = provider(&server);
    assert_eq!(provider.name(), "gemini");
    let (deltas, terminal) =
        collect_stream(provider.stream(request, CancellationToken::new())).await;
    assert_no_key(&deltas, &terminal);
    (deltas, terminal, server)
}

fn assert_no_key(deltas: &[ContentDelta], terminal: &StreamEvent) {
    let shown = format!("{deltas:?} {terminal:?}");
    assert!(!shown.contains(KEY), "the API key leaked: {shown}");
}

fn done(event: StreamEvent) -> AssistantMessage {
    match event {
        StreamEvent::Done(m) => *m,
        StreamEvent::Error(m) => panic!("expected Done, got an error: {:?}", m.error_message),
        other => panic!("expected Done, got {other:?}"),
    }
}

fn failed(event: StreamEvent) -> AssistantMessage {
    match event {
        StreamEvent::Error(m) => *m,
        other => panic!("expected Error, got {other:?}"),
    }
}

fn text(t: &str) -> AssistantContent {
    AssistantContent::Text(TextContent { text: t.into() })
}

fn thinking(t: &str, signature: Option<&str>) -> AssistantContent {
    AssistantContent::Thinking(ThinkingContent {
        thinking: t.into(),
        signature: signature.map(str::to_string),
    })
}

fn call(id: &str, name: &str, arguments: Value) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    })
}

/// The `data:` lines of a fixture, each as a whole SSE event with its CRLF separator.
fn fixture_events(path: &str) -> Vec<String> {
    fixture(path).split_inclusive("\r\n\r\n").map(str::to_string).collect()
}

#[tokio::test]
async fn plain_text_streams_as_one_block_with_usage_and_cost() {
    let mut request = ask("What is the capital of France?");
    request.prices = Some(Prices { input: 1.0, output: 2.0, cache_read: 0.25, cache_write: 0.0 });
    let (deltas, terminal, server) =
        run(vec![MockResponse::sse(&fixture("gemini/text.sse"))], gemini, request).await;
    assert_eq!(
        deltas,
        vec![
            ContentDelta::TextStart { index: 0 },
            ContentDelta::TextDelta { index: 0, delta: "The capital".into() },
            ContentDelta::TextDelta { index: 0, delta: " of France is".into() },
            ContentDelta::TextDelta { index: 0, delta: " Paris.".into() },
            ContentDelta::TextEnd { index: 0 },
        ]
    );
    let message = done(terminal);
    assert_eq!(message.content, vec![text("The capital of France is Paris.")]);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!((message.provider.as_str(), message.model.as_str()), ("gemini", MODEL));
    let u = message.usage;
    assert_eq!((u.input, u.output, u.cache_read, u.cache_write, u.total), (9, 7, 0, 0, 16));
    assert_eq!(u.reasoning, None);
    let cost = message.cost.unwrap();
    assert!((cost.total - (9.0 + 14.0) / 1e6).abs() < 1e-12, "{cost:?}");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, format!("/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"));
    assert_eq!(r.header("x-goog-api-key"), Some(KEY));
    assert_eq!(r.header("x-extra"), Some("yes"));
    assert!(!r.path.contains(KEY) && !r.path.contains("key="), "key in the URL: {}", r.path);
    assert_eq!(
        r.json(),
        json!({"contents": [{"role": "user", "parts": [{"text": "What is the capital of France?"}]}]})
    );
}

#[tokio::test]
async fn thinking_with_signatures_then_text() {
    let (deltas, terminal, server) = run(
        vec![MockResponse::sse(&fixture("gemini/thinking.sse"))],
        |s| gemini(s).with_thinking(Some(1024)),
        ask("What is the capital of France?"),
    )
    .await;
    assert_eq!(
        deltas,
        vec![
            ContentDelta::ThinkingStart { index: 0 },
            ContentDelta::ThinkingDelta {
                index: 0,
                delta: "**Recalling the capital**\n\nThe user asks about France.".into()
            },
            ContentDelta::ThinkingDelta { index: 0, delta: " Its capital is Paris.".into() },
            ContentDelta::ThinkingSignature {
                index: 0,
                signature: "CiQB0e2Kb7sigTHOUGHT+/=".into()
            },
            ContentDelta::ThinkingEnd { index: 0 },
            ContentDelta::TextStart { index: 1 },
            ContentDelta::TextDelta { index: 1, delta: "Paris".into() },
            ContentDelta::TextDelta { index: 1, delta: " is the capital of France.".into() },
            ContentDelta::TextEnd { index: 1 },
            ContentDelta::ThinkingStart { index: 2 },
            ContentDelta::ThinkingSignature { index: 2, signature: "EjQKMgEMsigTEXT/9a==".into() },
            ContentDelta::ThinkingEnd { index: 2 },
        ]
    );
    let message = done(terminal);
    assert_eq!(
        message.content,
        vec![
            thinking(
                "**Recalling the capital**\n\nThe user asks about France. Its capital is Paris.",
                Some("CiQB0e2Kb7sigTHOUGHT+/=")
            ),
            text("Paris is the capital of France."),
            thinking("", Some("EjQKMgEMsigTEXT/9a==")),
        ]
    );
    assert_eq!(message.stop_reason, StopReason::Stop);
    let u = message.usage;
    assert_eq!((u.input, u.output, u.reasoning, u.total), (9, 93, Some(86), 102));
    let body = server.requests()[0].json();
    assert_eq!(
        body["generationConfig"],
        json!({"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 1024}})
    );

    // The message sent back to the same model carries every signature on its own part.
    let mut next = ask("And of Italy?");
    let question = next.messages.to_vec();
    next.messages =
        [UserMessage::text("What is the capital of France?").into(), Message::Assistant(message)]
            .into_iter()
            .chain(question)
            .collect();
    let provider = Gemini::new(settings("http://127.0.0.1:1".into()), test_client());
    let prepared = weft_llm::replay::prepare(next.messages.shared(), "gemini", MODEL);
    next.messages = prepared.into();
    let body = provider.request_body(&next);
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"thought": true,
             "text": "**Recalling the capital**\n\nThe user asks about France. Its capital is Paris.",
             "thoughtSignature": "CiQB0e2Kb7sigTHOUGHT+/="},
            {"text": "Paris is the capital of France.", "thoughtSignature": "EjQKMgEMsigTEXT/9a=="},
        ]})
    );
}

fn weather_calls(first: &str, second: AssistantContent) -> Vec<AssistantContent> {
    vec![
        call(first, "get_weather", json!({"city": "Paris"})),
        thinking("", Some("CsigFC1paris==")),
        second,
    ]
}

#[tokio::test]
async fn two_parallel_calls_in_one_chunk() {
    let (deltas, terminal, _server) = run(
        vec![MockResponse::sse(&fixture("gemini/parallel_calls_one_chunk.sse"))],
        gemini,
        ask("Weather in Paris and London?"),
    )
    .await;
    assert_eq!(
        deltas,
        vec![
            ContentDelta::ToolCallStart {
                index: 0,
                id: "call_rsp3Fc_0".into(),
                name: "get_weather".into()
            },
            ContentDelta::ToolCallDelta { index: 0, delta: r#"{"city":"Paris"}"#.into() },
            ContentDelta::ToolCallEnd { index: 0 },
            ContentDelta::ThinkingStart { index: 1 },
            ContentDelta::ThinkingSignature { index: 1, signature: "CsigFC1paris==".into() },
            ContentDelta::ThinkingEnd { index: 1 },
            ContentDelta::ToolCallStart {
                index: 2,
                id: "call_rsp3Fc_1".into(),
                name: "get_weather".into()
            },
            ContentDelta::ToolCallDelta {
                index: 2,
                delta: r#"{"city":"London","units":"celsius"}"#.into()
            },
            ContentDelta::ToolCallEnd { index: 2 },
        ]
    );
    let message = done(terminal);
    assert_eq!(
        message.content,
        weather_calls(
            "call_rsp3Fc_0",
            call("call_rsp3Fc_1", "get_weather", json!({"city": "London", "units": "celsius"}))
        )
    );
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let u = message.usage;
    assert_eq!((u.input, u.output, u.reasoning, u.total), (71, 80, Some(50), 151));
}

#[tokio::test]
async fn two_parallel_calls_in_separate_chunks_split_anywhere() {
    let body = fixture("gemini/parallel_calls_separate_chunks.sse");
    for size in [7, 64, body.len()] {
        let (_deltas, terminal, _server) = run(
            vec![MockResponse::sse_parts(split_parts(body.as_bytes(), size))],
            gemini,
            ask("Weather and time?"),
        )
        .await;
        let message = done(terminal);
        let mut expected = vec![text("Let me check both cities.")];
        expected
            .extend(weather_calls("call_rsp4Fc_0", call("call_rsp4Fc_1", "get_time", json!({}))));
        assert_eq!(message.content, expected, "split at {size}");
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        assert_eq!((message.usage.input, message.usage.output), (71, 40));
    }
}

/// Plays two turns over one server: `fixture` answers "Weather in Paris and London?" with two
/// calls, each call gets a result (the second a failure), and `gemini/text.sse` answers the
/// second request. The first turn's message and the second request's `contents`.
async fn two_turns_with_calls(fixture_path: &str) -> (AssistantMessage, Value) {
    let server = MockServer::start(vec![
        MockResponse::sse(&fixture(fixture_path)),
        MockResponse::sse(&fixture("gemini/text.sse")),
    ])
    .await;
    let provider = gemini(&server);
    let question = ask("Weather in Paris and London?");
    let (_, terminal) =
        collect_stream(provider.stream(question.clone(), CancellationToken::new())).await;
    let calls = done(terminal);
    assert_eq!(calls.stop_reason, StopReason::ToolUse);
    let ids: Vec<String> = calls.tool_calls().map(|c| c.id.clone()).collect();
    let mut next = question;
    next.messages = [
        UserMessage::text("Weather in Paris and London?").into(),
        Message::Assistant(calls.clone()),
        ToolResultMessage::new(&ids[0], "get_weather", "18C, sunny", false).into(),
        ToolResultMessage::new(&ids[1], "get_weather", "weather service down", true).into(),
    ]
    .into_iter()
    .collect();
    let (_, terminal) = collect_stream(provider.stream(next, CancellationToken::new())).await;
    done(terminal);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    (calls, requests[1].json()["contents"].clone())
}

#[tokio::test]
async fn ids_gemini_gave_its_calls_go_back_on_the_calls_and_their_results() {
    let (calls, contents) = two_turns_with_calls("gemini/parallel_calls_with_ids.sse").await;
    assert_eq!(
        calls.content,
        weather_calls(
            "k2x9qv7m",
            call("p0r4tz1c", "get_weather", json!({"city": "London", "units": "celsius"}))
        )
    );
    assert_eq!(
        contents,
        json!([
            {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "k2x9qv7m", "name": "get_weather", "args": {"city": "Paris"}},
                 "thoughtSignature": "CsigFC1paris=="},
                {"functionCall": {"id": "p0r4tz1c", "name": "get_weather",
                                  "args": {"city": "London", "units": "celsius"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "k2x9qv7m", "name": "get_weather",
                                      "response": {"output": "18C, sunny"}}},
                {"functionResponse": {"id": "p0r4tz1c", "name": "get_weather",
                                      "response": {"error": "weather service down"}}}
            ]}
        ])
    );
}

#[tokio::test]
async fn ids_weft_made_for_calls_without_one_are_not_sent() {
    let (calls, contents) = two_turns_with_calls("gemini/parallel_calls_one_chunk.sse").await;
    let ids: Vec<&str> = calls.tool_calls().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_rsp3Fc_0", "call_rsp3Fc_1"]);
    assert_eq!(
        contents,
        json!([
            {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                 "thoughtSignature": "CsigFC1paris=="},
                {"functionCall": {"name": "get_weather",
                                  "args": {"city": "London", "units": "celsius"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C, sunny"}}},
                {"functionResponse": {"name": "get_weather",
                                      "response": {"error": "weather service down"}}}
            ]}
        ])
    );
}

#[test]
fn only_ids_gemini_made_are_sent_back() {
    // A Gemini id survives a replay to Gemini; ids of another provider's calls, and ids shaped
    // like the ones Weft makes, are not sent, and neither are their results'.
    let mut gemini_turn = AssistantMessage::empty("gemini", "gemini-2.5-pro");
    gemini_turn.stop_reason = StopReason::ToolUse;
    gemini_turn.content = vec![
        call("k2x9qv7m", "f", json!({})),
        call("call_7", "f", json!({})),
        call("call_r_1_2", "f", json!({})),
        call("call_abc", "f", json!({})),
    ];
    let mut other = AssistantMessage::empty("anthropic", "claude-sonnet-4-20250514");
    other.stop_reason = StopReason::ToolUse;
    other.content = vec![call("toolu_01", "f", json!({}))];
    let mut messages: Vec<Message> = vec![UserMessage::text("go").into(), other.into()];
    messages.push(ToolResultMessage::new("toolu_01", "f", "a", false).into());
    messages.push(gemini_turn.into());
    for id in ["k2x9qv7m", "call_7", "call_r_1_2", "call_abc"] {
        messages.push(ToolResultMessage::new(id, "f", "ok", false).into());
    }
    let mut request = ask("…");
    request.messages = weft_llm::replay::prepare(&messages, "gemini", MODEL).into();
    let body =
        Gemini::new(settings("http://127.0.0.1:1".into()), test_client()).request_body(&request);
    let sent = |turn: usize, key: &str| -> Vec<Option<String>> {
        body["contents"][turn]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[key]["id"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(sent(1, "functionCall"), [None]);
    assert_eq!(sent(2, "functionResponse"), [None]);
    let echoed = [Some("k2x9qv7m".to_string()), None, None, Some("call_abc".to_string())];
    assert_eq!(sent(3, "functionCall"), echoed);
    assert_eq!(sent(4, "functionResponse"), echoed);
}

#[tokio::test]
async fn usage_with_cached_and_thought_tokens() {
    let mut request = ask("Summarise the contract.");
    request.prices = Some(Prices { input: 0.3, output: 2.5, cache_read: 0.075, cache_write: 0.0 });
    let (_, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/cached_usage.sse"))], gemini, request).await;
    let message = done(terminal);
    let u = message.usage;
    assert_eq!(
        (u.input, u.cache_read, u.cache_write, u.output, u.reasoning, u.total),
        (40, 12000, 0, 129, Some(120), 12169)
    );
    let cost = message.cost.unwrap();
    let expected = (40.0 * 0.3 + 129.0 * 2.5 + 12000.0 * 0.075) / 1e6;
    assert!((cost.total - expected).abs() < 1e-12, "{cost:?}");
}

#[tokio::test]
async fn max_tokens_is_length() {
    let (_, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/max_tokens.sse"))], gemini, ask("A story"))
            .await;
    let message = done(terminal);
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(message.text(), "Once upon a time, in a kingdom");
    assert_eq!(message.usage.output, 8);
}

#[tokio::test]
async fn safety_stop_is_an_error_with_the_reason_and_the_partial() {
    let (deltas, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/safety.sse"))], gemini, ask("How do I …"))
            .await;
    assert_eq!(deltas.last(), Some(&ContentDelta::TextEnd { index: 0 }));
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.as_deref().unwrap().contains("SAFETY"), "{message:?}");
    assert_eq!(message.content, vec![text("Here is how")]);
    assert_eq!((message.usage.input, message.usage.output), (11, 3));
}

#[tokio::test]
async fn a_blocked_prompt_is_an_error() {
    let (deltas, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/prompt_blocked.sse"))], gemini, ask("…")).await;
    assert!(deltas.is_empty());
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.unwrap();
    assert!(
        error.contains("blocked the prompt") && error.contains("PROHIBITED_CONTENT"),
        "{error}"
    );
    assert_eq!(message.usage.input, 20);
}

#[tokio::test]
async fn an_empty_answer_and_an_empty_body() {
    let (deltas, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/empty_answer.sse"))], gemini, ask("…")).await;
    assert!(deltas.is_empty());
    let message = done(terminal);
    assert!(message.content.is_empty());
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.usage.input, 4);

    let (deltas, terminal, _server) = run(vec![MockResponse::sse("")], gemini, ask("…")).await;
    assert!(deltas.is_empty());
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.unwrap().contains("ended before the model finished"));
}

#[tokio::test]
async fn a_malformed_chunk_ends_with_an_error_and_keeps_the_partial() {
    let (deltas, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/malformed.sse"))], gemini, ask("…")).await;
    assert_eq!(deltas.last(), Some(&ContentDelta::TextEnd { index: 0 }));
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.unwrap().contains("not valid JSON"));
    assert_eq!(message.content, vec![text("Partial answer")]);
    assert_eq!(message.usage.input, 6);
}

#[tokio::test]
async fn an_error_chunk_mid_stream_ends_with_its_message() {
    let (_, terminal, _server) =
        run(vec![MockResponse::sse(&fixture("gemini/error_chunk.sse"))], gemini, ask("…")).await;
    let message = failed(terminal);
    let error = message.error_message.unwrap();
    assert!(
        error.contains("An internal error has occurred") && error.contains("INTERNAL"),
        "{error}"
    );
    assert_eq!(message.content, vec![text("Started")]);
}

#[tokio::test]
async fn a_connection_cut_mid_stream_keeps_the_partial() {
    let events = fixture_events("gemini/text.sse");
    let parts = vec![Part::text(&events[0]), Part::text(&events[1])];
    let (_, terminal, _server) =
        run(vec![MockResponse::sse_parts(parts).cut()], gemini, ask("…")).await;
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.is_some());
    assert_eq!(message.content, vec![text("The capital of France is")]);
    assert_eq!(message.usage.input, 9);
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_waiting() {
    let limited = MockResponse::status(
        429,
        r#"{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}"#,
    )
    .with_header("retry-after", "1");
    let (_, terminal, server) =
        run(vec![limited, MockResponse::sse(&fixture("gemini/text.sse"))], gemini, ask("…")).await;
    let message = done(terminal);
    assert_eq!(message.text(), "The capital of France is Paris.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    assert_eq!(requests[0].body, requests[1].body);
}

#[tokio::test]
async fn a_500_exhausts_the_retries() {
    let body = r#"{"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}"#;
    let retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(10),
        ..RetryPolicy::default()
    };
    let client = HttpClient::new(Timeouts::default(), retry).unwrap();
    let (deltas, terminal, server) = run(
        vec![MockResponse::status(500, body); 3],
        |s| Gemini::new(settings(s.url()), client),
        ask("…"),
    )
    .await;
    assert!(deltas.is_empty());
    let message = failed(terminal);
    let error = message.error_message.unwrap();
    assert!(error.contains("500") && error.contains("An internal error has occurred"), "{error}");
    assert!(error.contains("after 2 retries"), "{error}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn abort_mid_stream_keeps_the_partial_and_the_usage() {
    let events = fixture_events("gemini/text.sse");
    let server =
        MockServer::start(vec![MockResponse::sse_parts(vec![Part::text(&events[0]), Part::Stall])])
            .await;
    let cancel = CancellationToken::new();
    let mut stream = gemini(&server).stream(ask("…"), cancel.clone());
    let run = async {
        loop {
            match stream.next().await {
                Some(StreamEvent::Content(ContentDelta::TextDelta { .. })) => cancel.cancel(),
                Some(StreamEvent::Content(_)) => {}
                Some(terminal) => break terminal,
                None => panic!("no terminal event"),
            }
        }
    };
    let terminal = tokio::time::timeout(Duration::from_secs(10), run).await.unwrap();
    assert!(stream.next().await.is_none());
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.content, vec![text("The capital")]);
    assert_eq!(message.usage.input, 9);
    drop(stream);
    assert!(server.wait_hangups(1, Duration::from_secs(5)).await, "the connection was not closed");
}

fn png() -> UserContent {
    UserContent::Image(ImageContent { data: "iVBORw0KGgo=".into(), mime_type: "image/png".into() })
}

fn history() -> Vec<Message> {
    let mut calls = AssistantMessage::empty("gemini", MODEL);
    calls.stop_reason = StopReason::ToolUse;
    calls.content = vec![
        thinking("Both cities at once.", Some("sigThought")),
        call("call_r1_0", "get_weather", json!({"city": "Paris"})),
        thinking("", Some("sigCall")),
        call("call_r1_1", "get_weather", json!({"city": "London"})),
    ];
    let mut answer = AssistantMessage::empty("gemini", MODEL);
    answer.content =
        vec![text("Paris is sunny; London's service is down."), thinking("", Some("sigText"))];
    vec![
        UserMessage::text("Weather in Paris and London?").into(),
        calls.into(),
        ToolResultMessage {
            content: vec![UserContent::text("18C, sunny"), png()],
            ..ToolResultMessage::new("call_r1_0", "get_weather", "", false)
        }
        .into(),
        ToolResultMessage::new("call_r1_1", "get_weather", "weather service down", true).into(),
        answer.into(),
        UserMessage {
            content: vec![UserContent::text("Thanks! And this?"), png()],
            timestamp: 0,
            id: None,
        }
        .into(),
    ]
}

#[tokio::test]
async fn the_request_carries_history_signatures_tools_and_config() {
    let request = ModelRequest {
        model: MODEL.into(),
        system_prompt: Some("You are terse.".into()),
        messages: history().into(),
        tools: vec![ToolSpec::new(
            "get_weather",
            "The weather in a city.",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"city": {"type": "string"}, "units": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["city"],
                "additionalProperties": false
            }),
        )],
        temperature: Some(0.7),
        max_tokens: Some(256),
        prices: None,
    };
    let (_, terminal, server) =
        run(vec![MockResponse::sse(&fixture("gemini/text.sse"))], gemini, request).await;
    done(terminal);
    let body = server.requests()[0].json();
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]},
                {"role": "model", "parts": [
                    {"thought": true, "text": "Both cities at once.", "thoughtSignature": "sigThought"},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                     "thoughtSignature": "sigCall"},
                    {"functionCall": {"name": "get_weather", "args": {"city": "London"}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"output": "18C, sunny"}}},
                    {"functionResponse": {"name": "get_weather",
                                          "response": {"error": "weather service down"}}},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
                ]},
                {"role": "model", "parts": [
                    {"text": "Paris is sunny; London's service is down.", "thoughtSignature": "sigText"}
                ]},
                {"role": "user", "parts": [
                    {"text": "Thanks! And this?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
                ]}
            ],
            "tools": [{"functionDeclarations": [{
                "name": "get_weather",
                "description": "The weather in a city.",
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"},
                                   "units": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city"],
                    "additionalProperties": false
                }
            }]}],
            "generationConfig": {"temperature": 0.7, "maxOutputTokens": 256}
        })
    );
}

#[tokio::test]
async fn signatures_are_not_sent_to_another_model() {
    let request = ModelRequest {
        model: "gemini-2.5-pro".into(),
        messages: history().into(),
        ..ModelRequest::default()
    };
    let (_, terminal, server) =
        run(vec![MockResponse::sse(&fixture("gemini/text.sse"))], gemini, request).await;
    done(terminal);
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse");
    let body = r.text();
    assert!(!body.contains("thoughtSignature") && !body.contains("sig"), "{body}");
    assert_eq!(r.json()["contents"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn a_missing_key_is_a_one_line_error() {
    let mut s = settings("http://127.0.0.1:1".into());
    s.api_key = None;
    let provider = Gemini::new(s, test_client());
    let (_, terminal) = collect_stream(provider.stream(ask("…"), CancellationToken::new())).await;
    let error = failed(terminal).error_message.unwrap();
    assert!(error.contains("GEMINI_API_KEY") && !error.contains('\n'), "{error}");
}

fn decode(chunks: &[&str]) -> (Vec<weft_llm::ProviderEvent>, Result<(), String>) {
    let mut decoder = GeminiDecoder::new();
    let mut out = Vec::new();
    for data in chunks {
        let event = SseEvent { event: None, data: data.to_string(), id: None };
        if let Err(failure) = decoder.event(&event, &mut out) {
            return (out, Err(format!("{}:{}", failure.retryable, failure.message)));
        }
    }
    decoder.end(&mut out);
    (out, Ok(()))
}

#[test]
fn an_overload_error_before_content_is_retryable_and_after_it_is_not() {
    let overloaded = r#"{"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}"#;
    let (out, result) = decode(&[overloaded]);
    assert!(out.is_empty());
    assert_eq!(result, Err("true:Gemini error: The model is overloaded. (UNAVAILABLE)".into()));
    let text = r#"{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"}}]}"#;
    let (out, result) = decode(&[text, overloaded]);
    assert_eq!(out.len(), 3, "start, delta, end: {out:?}");
    assert!(result.unwrap_err().starts_with("false:"));
}

#[test]
fn a_second_signed_thought_starts_a_new_thinking_block() {
    let a = r#"{"candidates": [{"content": {"parts": [{"text": "A","thought": true,"thoughtSignature": "s1"},{"text": "B","thought": true,"thoughtSignature": "s2"}],"role": "model"},"finishReason": "STOP"}]}"#;
    let (out, result) = decode(&[a]);
    result.unwrap();
    let starts = out
        .iter()
        .filter(|e| {
            matches!(e, weft_llm::ProviderEvent::Content(ContentDelta::ThinkingStart { .. }))
        })
        .count();
    assert_eq!(starts, 2, "{out:?}");
    assert_eq!(out.last(), Some(&weft_llm::ProviderEvent::Done { stop_reason: StopReason::Stop }));
}

#[test]
fn every_other_finish_reason_is_an_error_naming_it() {
    for reason in ["RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "OTHER", "LANGUAGE"] {
        let chunk = format!(
            r#"{{"candidates": [{{"content": {{"role": "model"}},"finishReason": "{reason}"}}]}}"#
        );
        let (out, result) = decode(&[&chunk]);
        result.unwrap();
        match out.last() {
            Some(weft_llm::ProviderEvent::Error { reason: StopReason::Error, message }) => {
                assert!(message.contains(reason), "{message}")
            }
            other => panic!("{reason}: {other:?}"),
        }
    }
    let chunk = r#"{"candidates": [{"content": {"role": "model"},"finishReason": "MALFORMED_FUNCTION_CALL","finishMessage": "Malformed function call: print(default_api.get_weather(city=))"}]}"#;
    let (out, _) = decode(&[chunk]);
    match out.last() {
        Some(weft_llm::ProviderEvent::Error { message, .. }) => assert_eq!(
            message,
            "Gemini stopped the response (MALFORMED_FUNCTION_CALL): Malformed function call: \
             print(default_api.get_weather(city=))"
        ),
        other => panic!("{other:?}"),
    }
}

/// Runs against the real service; only when `GEMINI_API_KEY` is set (`GEMINI_BASE_URL` and
/// `GEMINI_MODEL` optional).
#[tokio::test]
#[ignore = "talks to the real Gemini API; needs GEMINI_API_KEY"]
async fn live_gemini_answers() {
    let Ok(key) = std::env::var("GEMINI_API_KEY") else {
        eprintln!("GEMINI_API_KEY is not set: skipped");
        return;
    };
    let base_url = std::env::var("GEMINI_BASE_URL")
        .unwrap_or_else(|_| "https://generativelanguage.googleapis.com".into());
    let model = std::env::var("GEMINI_MODEL").unwrap_or_else(|_| MODEL.into());
    let settings = ProviderSettings {
        api_key: Some(key.clone()),
        base_url,
        extra_headers: Vec::new(),
        models: ModelRegistry::builtin(),
    };
    let client = HttpClient::new(Timeouts::default(), RetryPolicy::default()).unwrap();
    let provider = Gemini::new(settings, client).with_thinking(None);
    let mut request = ask("Reply with the single word: pong");
    request.model = model;
    let (_, terminal) = collect_stream(provider.stream(request, CancellationToken::new())).await;
    let shown = format!("{terminal:?}");
    assert!(!shown.contains(&key), "the API key leaked");
    let message = done(terminal);
    assert!(message.text().to_lowercase().contains("pong"), "{message:?}");
    assert!(message.usage.input > 0 && message.usage.output > 0, "{:?}", message.usage);
}

#[tokio::test]
async fn usage_near_u64_max_saturates_instead_of_panicking() {
    let mut request = ask("Count");
    request.prices = Some(Prices { input: 1.0, output: 2.0, cache_read: 0.25, cache_write: 0.0 });
    let (_, terminal, _) =
        run(vec![MockResponse::sse(&fixture("gemini/huge_usage.sse"))], gemini, request).await;
    let message = done(terminal);
    assert_eq!(message.content, vec![text("Big")]);
    let max = u64::MAX;
    let u = message.usage;
    // (prompt − cached) + tool prompt, candidates + thoughts: each saturates.
    assert_eq!((u.input, u.output, u.cache_read, u.total), (max, max, 5, max));
    assert_eq!(u.reasoning, Some(max));
    assert!(message.cost.unwrap().total.is_finite());
}

#[tokio::test]
async fn an_unknown_finish_reason_with_function_calls_is_tool_use() {
    let (_, terminal, _) = run(
        vec![MockResponse::sse(&fixture("gemini/unknown_reason_calls.sse"))],
        gemini,
        ask("Weather in Paris?"),
    )
    .await;
    let message = done(terminal);
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.error_message, None);
    assert_eq!(
        message.content,
        vec![
            call("call_rspUnk1_0", "get_weather", json!({"city": "Paris"})),
            thinking("", Some("CsigUnk==")),
        ]
    );
}

#[tokio::test]
async fn an_unknown_finish_reason_without_calls_keeps_the_text_and_names_it() {
    let (_, terminal, _) = run(
        vec![MockResponse::sse(&fixture("gemini/unknown_reason_text.sse"))],
        gemini,
        ask("Tell me"),
    )
    .await;
    let message = failed(terminal);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.content, vec![text("Here is a partial answer")]);
    assert_eq!(
        message.error_message.as_deref(),
        Some(
            "Gemini stopped the response for a reason Weft does not know (NEW_KIND_OF_STOP): \
             Stopped for a new reason."
        )
    );
    assert_eq!(message.usage.output, 4);
}

#[test]
fn documented_failure_reasons_stay_errors_even_with_calls() {
    for reason in [
        "SAFETY",
        "IMAGE_SAFETY",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MALFORMED_FUNCTION_CALL",
        "FINISH_REASON_UNSPECIFIED",
    ] {
        let chunk = format!(
            r#"{{"candidates": [{{"content": {{"parts": [{{"functionCall": {{"name": "f","args": {{}}}}}}],"role": "model"}},"finishReason": "{reason}"}}]}}"#
        );
        let (out, result) = decode(&[&chunk]);
        result.unwrap();
        match out.last() {
            Some(weft_llm::ProviderEvent::Error { reason: StopReason::Error, message }) => {
                assert_eq!(message, &format!("Gemini stopped the response ({reason})"))
            }
            other => panic!("{reason}: {other:?}"),
        }
    }
    // STOP with calls is tool use, MAX_TOKENS is length.
    let chunk = r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f"}}],"role": "model"},"finishReason": "MAX_TOKENS"}]}"#;
    let (out, _) = decode(&[chunk]);
    assert_eq!(
        out.last(),
        Some(&weft_llm::ProviderEvent::Done { stop_reason: StopReason::Length })
    );
}

#[tokio::test]
async fn a_404_names_the_url_without_its_query() {
    let body = r#"{"error": {"code": 404, "message": "models/gemini-9 is not found for API version v1beta", "status": "NOT_FOUND"}}"#;
    let mut request = ask("Hi");
    request.model = "gemini-9".into();
    let (_, terminal, server) = run(vec![MockResponse::status(404, body)], gemini, request).await;
    let error = String::from(failed(terminal).error_message.unwrap());
    assert_eq!(
        error,
        format!(
            "the provider answered HTTP 404 Not Found for POST \
             {}/v1beta/models/gemini-9:streamGenerateContent: models/gemini-9 is not found for \
             API version v1beta (NOT_FOUND)",
            server.url()
        )
    );
    assert!(!error.contains("alt=sse"), "{error}");
    assert_eq!(server.requests()[0].path, "/v1beta/models/gemini-9:streamGenerateContent?alt=sse");
}
