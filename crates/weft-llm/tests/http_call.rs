//! `http::sse_call` over real HTTP on 127.0.0.1, through the shared mock server: streaming,
//! retries (status, `Retry-After`, connect errors), timeouts, cuts, cancellation, and that
//! credentials never leak into messages.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{MockResponse, MockServer, Part};
use futures::StreamExt;
use serde_json::json;
use weft_core::{AssistantContent, StopReason};
use weft_llm::dialect::{DecodeFailure, SseDecoder};
use weft_llm::http::{HttpClient, HttpRequest, RetryPolicy, Timeouts, sse_call};
use weft_llm::sse::SseEvent;
use weft_llm::{CancellationToken, ContentDelta, ProviderEvent, ProviderStream, StreamEvent};

const SECRET: &str = "sk-secret";

/// Each event's data becomes a text delta of block 0; `[DONE]` (or the end of the body) ends
/// the call.
#[derive(Default)]
struct Echo {
    started: bool,
    done: bool,
}

impl SseDecoder for Echo {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), DecodeFailure> {
        if event.data == "[DONE]" {
            if self.started {
                out.push(ProviderEvent::Content(ContentDelta::TextEnd { index: 0 }));
            }
            out.push(ProviderEvent::Done { stop_reason: StopReason::Stop });
            self.done = true;
            return Ok(());
        }
        if !self.started {
            self.started = true;
            out.push(ProviderEvent::Content(ContentDelta::TextStart { index: 0 }));
        }
        out.push(ProviderEvent::Content(ContentDelta::TextDelta {
            index: 0,
            delta: event.data.clone(),
        }));
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) {
        if !self.done {
            self.done = true;
            out.push(ProviderEvent::Done { stop_reason: StopReason::Stop });
        }
    }
}

fn request(base: &str) -> HttpRequest {
    HttpRequest {
        url: format!("{base}/v1/chat?stream=1"),
        headers: vec![
            ("authorization".into(), format!("Bearer {SECRET}")),
            ("x-extra".into(), "yes".into()),
        ],
        body: json!({"model": "m1", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
    }
}

fn policy(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(5),
        max_total_delay: Duration::from_secs(10),
    }
}

fn timeouts(first_byte_ms: u64, idle_ms: u64) -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_millis(first_byte_ms),
        idle: Duration::from_millis(idle_ms),
    }
}

fn client() -> HttpClient {
    HttpClient::new(timeouts(5000, 5000), policy(3)).unwrap()
}

/// Runs one call, asserting that nothing the client emits contains the credential.
async fn call(client: HttpClient, base: &str) -> Vec<ProviderEvent> {
    let events = common::collect_events(sse_call(client, request(base), Echo::default)).await;
    let shown = format!("{events:?}");
    assert!(!shown.contains(SECRET), "the credential leaked: {shown}");
    events
}

fn text(delta: &str) -> ProviderEvent {
    ProviderEvent::Content(ContentDelta::TextDelta { index: 0, delta: delta.into() })
}

fn start() -> ProviderEvent {
    ProviderEvent::Content(ContentDelta::TextStart { index: 0 })
}

fn end() -> ProviderEvent {
    ProviderEvent::Content(ContentDelta::TextEnd { index: 0 })
}

fn done() -> ProviderEvent {
    ProviderEvent::Done { stop_reason: StopReason::Stop }
}

/// The single terminal error of a call that failed before streaming anything.
fn only_error(events: &[ProviderEvent]) -> String {
    assert_eq!(events.len(), 1, "{events:?}");
    match &events[0] {
        ProviderEvent::Error { reason: StopReason::Error, message } => message.clone(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_response_yields_its_events_in_order() {
    let server = MockServer::start(vec![MockResponse::sse_parts(vec![
        Part::text("data: Hel"),
        Part::text("lo\n\n: comment\n\ndata: , wor"),
        Part::Delay(Duration::from_millis(20)),
        Part::text("ld\r\n\r\ndata: [DONE]\n\n"),
    ])])
    .await;
    let events = call(client(), &server.url()).await;
    assert_eq!(events, vec![start(), text("Hello"), text(", world"), end(), done()]);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat?stream=1");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("Accept"), Some("text/event-stream"));
    assert_eq!(r.header("authorization"), Some("Bearer sk-secret"));
    assert_eq!(r.header("x-extra"), Some("yes"));
    assert_eq!(r.json(), request("").body);
}

#[tokio::test]
async fn a_body_ending_without_the_end_marker_ends_through_the_decoder() {
    let server =
        MockServer::start(vec![MockResponse::sse("data: a\n\ndata: b\n\ndata: incompl")]).await;
    let events = call(client(), &server.url()).await;
    assert_eq!(events, vec![start(), text("a"), text("b"), done()], "half an event is dropped");
}

#[tokio::test]
async fn retry_after_seconds_is_honoured() {
    let server = MockServer::start(vec![
        MockResponse::status(429, r#"{"error":{"message":"Slow down","type":"rate_limit"}}"#)
            .with_header("Retry-After", "1"),
        MockResponse::sse("data: ok\n\ndata: [DONE]\n\n"),
    ])
    .await;
    let events = call(client(), &server.url()).await;
    assert_eq!(events, vec![start(), text("ok"), end(), done()]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].at - requests[0].at;
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    assert!(gap < Duration::from_secs(3), "retried after {gap:?}");
}

#[tokio::test]
async fn retry_after_ms_is_honoured() {
    let server = MockServer::start(vec![
        MockResponse::status(503, r#"{"error":"busy"}"#).with_header("retry-after-ms", "300"),
        MockResponse::sse("data: ok\n\n"),
    ])
    .await;
    let events = call(client(), &server.url()).await;
    assert_eq!(events, vec![start(), text("ok"), done()]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].at - requests[0].at;
    assert!(gap >= Duration::from_millis(300), "retried after {gap:?}");
    assert!(gap < Duration::from_millis(2000), "retried after {gap:?}");
}

#[tokio::test]
async fn a_retry_after_beyond_max_delay_is_not_waited_for() {
    let server = MockServer::start(vec![
        MockResponse::status(429, r#"{"error":{"message":"Quota exhausted"}}"#)
            .with_header("retry-after", "120"),
    ])
    .await;
    let started = Instant::now();
    let message = only_error(&call(client(), &server.url()).await);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.requests().len(), 1);
    assert!(message.contains("429") && message.contains("Quota exhausted"), "{message}");
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let body = r#"{"error":{"message":"Internal meltdown","type":"server_error"}}"#;
    let server = MockServer::start(vec![MockResponse::status(500, body); 4]).await;
    let message = only_error(&call(client(), &server.url()).await);
    assert_eq!(server.requests().len(), 4);
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(message.contains("Internal meltdown (server_error)"), "{message}");
    assert!(message.contains("after 3 retries"), "{message}");
    assert!(!message.contains(SECRET));
}

#[tokio::test]
async fn a_later_success_ends_the_retries() {
    let server = MockServer::start(vec![
        MockResponse::status(502, "<html>\n  Bad gateway\n</html>"),
        MockResponse::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        MockResponse::sse("data: fine\n\n"),
    ])
    .await;
    let events = call(client(), &server.url()).await;
    assert_eq!(events, vec![start(), text("fine"), done()]);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let body = r#"{"error":{"message":"Invalid model m1","type":"invalid_request_error"}}"#;
    let server = MockServer::start(vec![
        MockResponse::status(400, body),
        MockResponse::sse("data: never\n\n"),
    ])
    .await;
    let message = only_error(&call(client(), &server.url()).await);
    assert_eq!(server.requests().len(), 1);
    assert!(message.contains("HTTP 400"), "{message}");
    assert!(message.contains("Invalid model m1 (invalid_request_error)"), "{message}");
    assert!(!message.contains("retries"), "{message}");
}

#[tokio::test]
async fn an_unreachable_provider_is_retried_then_reported() {
    let port = common::refused_port();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let message = only_error(&call(client(), &base).await);
    // Backoff 10 + 20 + 40 ms (plus jitter) between the four attempts.
    assert!(started.elapsed() >= Duration::from_millis(70), "{:?}", started.elapsed());
    assert!(message.starts_with("cannot reach the provider"), "{message}");
    assert!(message.contains("after 3 retries"), "{message}");
    assert!(!message.contains("/v1/chat"), "no URL in the message: {message}");
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_an_error_and_not_retried() {
    let server = MockServer::start(vec![
        MockResponse::sse_parts(vec![
            Part::text("data: one\n\n"),
            Part::Delay(Duration::from_millis(20)),
            Part::text("data: two\n\ndata: thr"),
        ])
        .cut(),
        MockResponse::sse("data: never\n\n"),
    ])
    .await;
    let events = call(client(), &server.url()).await;
    assert_eq!(&events[..3], &[start(), text("one"), text("two")], "{events:?}");
    assert_eq!(events.len(), 4, "{events:?}");
    let message = common::error_message(&events);
    assert!(message.contains("broke mid-stream"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_silent_stream_hits_the_idle_timeout() {
    let server = MockServer::start(vec![MockResponse::sse_parts(vec![
        Part::text("data: one\n\n"),
        Part::Stall,
    ])])
    .await;
    let client = HttpClient::new(timeouts(5000, 200), policy(3)).unwrap();
    let started = Instant::now();
    let events = call(client, &server.url()).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
    assert_eq!(&events[..2], &[start(), text("one")]);
    assert_eq!(events.len(), 3, "{events:?}");
    let message = common::error_message(&events);
    assert!(message.contains("idle timeout"), "{message}");
    assert!(message.contains("0.2s"), "{message}");
    assert_eq!(server.requests().len(), 1, "not retried");
    assert!(server.wait_hangups(1, Duration::from_secs(2)).await, "the connection was closed");
}

#[tokio::test]
async fn slow_headers_hit_the_first_byte_timeout_and_are_retried() {
    let slow = MockResponse::sse("data: late\n\n").delay_headers(Duration::from_secs(10));
    let server = MockServer::start(vec![slow.clone(), slow]).await;
    let client = HttpClient::new(timeouts(150, 5000), policy(1)).unwrap();
    let started = Instant::now();
    let message = only_error(&call(client, &server.url()).await);
    // Two timeouts and a retry's back-off, well before either answer would have come.
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
    assert!(message.contains("first-byte timeout"), "{message}");
    assert!(message.contains("0.15s"), "{message}");
    assert!(message.contains("after 1 retry)"), "{message}");
}

#[tokio::test]
async fn a_first_byte_timeout_then_a_prompt_answer_succeeds() {
    let server = MockServer::start(vec![
        MockResponse::sse("data: late\n\n").delay_headers(Duration::from_secs(10)),
        MockResponse::sse("data: prompt\n\n"),
    ])
    .await;
    // A second of first-byte timeout: the prompt answer comes within it on a busy machine.
    let client = HttpClient::new(timeouts(1000, 5000), policy(3)).unwrap();
    let events = call(client, &server.url()).await;
    assert_eq!(events, vec![start(), text("prompt"), done()]);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn cancelling_mid_stream_aborts_with_the_partial_kept() {
    let server = MockServer::start(vec![MockResponse::sse_parts(vec![
        Part::text("data: partial \n\ndata: text\n\n"),
        Part::Stall,
    ])])
    .await;
    let cancel = CancellationToken::new();
    let inner = sse_call(client(), request(&server.url()), Echo::default);
    let mut stream = ProviderStream::new("test", "m1", None, cancel.clone(), inner);
    let guard = Duration::from_secs(5);
    let first = tokio::time::timeout(guard, stream.next()).await.unwrap();
    assert_eq!(first, Some(StreamEvent::Content(ContentDelta::TextStart { index: 0 })));
    let mut deltas = 0;
    while deltas < 2 {
        match tokio::time::timeout(guard, stream.next()).await.unwrap() {
            Some(StreamEvent::Content(ContentDelta::TextDelta { .. })) => deltas += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    // The server now stalls; cancel while the stream waits.
    let canceller = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        }
    });
    let terminal = tokio::time::timeout(guard, stream.next()).await.unwrap();
    canceller.await.unwrap();
    let Some(StreamEvent::Error(message)) = terminal else { panic!("{terminal:?}") };
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("aborted"));
    assert_eq!(
        message.content,
        vec![AssistantContent::Text(weft_core::TextContent { text: "partial text".into() })]
    );
    assert!(stream.next().await.is_none());
    assert!(
        server.wait_hangups(1, Duration::from_secs(2)).await,
        "the server saw the connection closed"
    );
}

#[tokio::test]
async fn the_kit_answers_unscripted_requests_with_500() {
    let server = MockServer::start(vec![]).await;
    let client = HttpClient::new(timeouts(5000, 5000), RetryPolicy::none()).unwrap();
    let message = only_error(&call(client, &server.url()).await);
    assert!(message.contains("HTTP 500") && message.contains("no scripted response"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

/// A 200 that is not an event stream: the single error of the call, and the server.
async fn not_a_stream(response: MockResponse) -> String {
    let server = MockServer::start(vec![response, MockResponse::sse("data: never\n\n")]).await;
    let message = only_error(&call(client(), &server.url()).await);
    assert_eq!(server.requests().len(), 1, "not retried");
    assert!(!message.contains('\n') && !message.contains('\r'), "one line: {message}");
    message
}

#[tokio::test]
async fn a_json_200_is_not_an_event_stream() {
    let json =
        "{\n  \"id\": \"chatcmpl-9\",\n  \"object\": \"chat.completion\",\n  \"choices\": []\n}";
    let message = not_a_stream(MockResponse::ok(Some("application/json"), json)).await;
    assert_eq!(
        message,
        "the provider did not answer with an event stream (content type application/json; body: \
         { \"id\": \"chatcmpl-9\", \"object\": \"chat.completion\", \"choices\": [] }); check the \
         base URL and that the server supports streaming"
    );
}

#[tokio::test]
async fn an_html_200_is_not_an_event_stream_and_its_start_is_quoted() {
    let html = format!(
        "<!doctype html>\r\n<html>\r\n<body>\r\n<p>{}</p>\r\n</body>\r\n</html>\r\n",
        "Lorem ipsum dolor sit amet. ".repeat(40)
    );
    let parts = common::split_parts(html.as_bytes(), 100);
    let response = MockResponse { parts, ..MockResponse::ok(Some("text/html"), "") };
    let message = not_a_stream(response).await;
    let (head, body) = message.split_once("; body: ").unwrap();
    assert_eq!(head, "the provider did not answer with an event stream (content type text/html");
    let excerpt = body.strip_suffix("); check the base URL and that the server supports streaming");
    let excerpt = excerpt.unwrap();
    assert!(excerpt.starts_with("<!doctype html> <html> <body> <p>Lorem ipsum"), "{excerpt}");
    assert_eq!(excerpt.chars().count(), 201, "200 characters and an ellipsis: {excerpt}");
    assert!(excerpt.ends_with('…'));
}

#[tokio::test]
async fn a_body_that_is_neither_labelled_nor_shaped_as_an_event_stream() {
    let message = not_a_stream(MockResponse::ok(None, "OK")).await;
    assert!(message.contains("(no content type; body: OK)"), "{message}");
    let message = not_a_stream(MockResponse::ok(Some("application/json"), "")).await;
    assert!(message.contains("(content type application/json; an empty body)"), "{message}");
}

#[tokio::test]
async fn event_streams_are_read_liberally() {
    let sse = "data: one\n\ndata: [DONE]\n\n";
    let expected = vec![start(), text("one"), end(), done()];
    for response in [
        MockResponse::ok(Some("text/event-stream; charset=utf-8"), sse),
        MockResponse::ok(Some("Text/Event-Stream"), sse),
        // No content type, or a wrong one, but a body shaped like SSE.
        MockResponse::ok(None, sse),
        MockResponse::ok(Some("text/plain"), sse),
        MockResponse::ok(None, &format!(": keep-alive\n\n{sse}")),
        MockResponse::ok(None, &format!("\u{feff}\r\n{sse}")),
        MockResponse::ok(None, "event: message\ndata: one\n\ndata: [DONE]\n\n"),
        MockResponse {
            parts: common::split_parts(sse.as_bytes(), 1),
            ..MockResponse::ok(None, "")
        },
        MockResponse {
            parts: vec![
                Part::text("da"),
                Part::Delay(Duration::from_millis(20)),
                Part::text(&sse[2..]),
            ],
            ..MockResponse::ok(Some("application/octet-stream"), "")
        },
    ] {
        let shown = format!("{response:?}");
        let server = MockServer::start(vec![response]).await;
        assert_eq!(call(client(), &server.url()).await, expected, "{shown}");
    }
    // An empty body without a content type is left to the decoder.
    let server = MockServer::start(vec![MockResponse::ok(None, "")]).await;
    assert_eq!(call(client(), &server.url()).await, vec![done()]);
}

#[tokio::test]
async fn a_404_names_the_url_asked_without_its_query() {
    let server = MockServer::start(vec![MockResponse::status(
        404,
        r#"{"error":{"message":"Not found","type":"invalid_request_error"}}"#,
    )])
    .await;
    let message = only_error(&call(client(), &server.url()).await);
    assert_eq!(
        message,
        format!(
            "the provider answered HTTP 404 Not Found for POST {}/v1/chat: Not found \
             (invalid_request_error)",
            server.url()
        )
    );
    assert_eq!(server.requests().len(), 1);
    // Other statuses do not repeat the URL.
    let server = MockServer::start(vec![MockResponse::status(400, "{}")]).await;
    let message = only_error(&call(client(), &server.url()).await);
    assert!(!message.contains("127.0.0.1"), "{message}");
}

#[tokio::test]
async fn absurd_retry_after_values_neither_panic_nor_wait() {
    for (header, value) in
        [("retry-after", "1e30"), ("retry-after", "inf"), ("retry-after-ms", "1e300")]
    {
        let server = MockServer::start(vec![
            MockResponse::status(429, r#"{"error":"slow down"}"#).with_header(header, value),
            MockResponse::sse("data: never\n\n"),
        ])
        .await;
        let started = Instant::now();
        let message = only_error(&call(client(), &server.url()).await);
        assert!(started.elapsed() < Duration::from_secs(2), "{header}: {value}");
        assert_eq!(server.requests().len(), 1, "{header}: {value} is beyond max_delay");
        assert!(message.contains("HTTP 429"), "{message}");
    }
    // Not a number at all: ignored, so the usual backoff applies.
    let server = MockServer::start(vec![
        MockResponse::status(429, r#"{"error":"slow down"}"#).with_header("retry-after", "NaN"),
        MockResponse::sse("data: ok\n\n"),
    ])
    .await;
    assert_eq!(call(client(), &server.url()).await, vec![start(), text("ok"), done()]);
}

#[tokio::test]
async fn the_sum_of_the_waits_stays_within_max_total_delay() {
    let busy = MockResponse::status(503, r#"{"error":"busy"}"#).with_header("retry-after", "0.4");
    let server = MockServer::start(vec![busy; 10]).await;
    let policy = RetryPolicy {
        max_retries: 10,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(5),
        max_total_delay: Duration::from_millis(1000),
    };
    let client = HttpClient::new(timeouts(5000, 5000), policy).unwrap();
    let started = Instant::now();
    let message = only_error(&call(client, &server.url()).await);
    // 0.4 s + 0.4 s; a third wait would make 1.2 s > 1 s, so it gives up instead.
    assert_eq!(server.requests().len(), 3);
    assert!(message.ends_with("(after 2 retries)"), "{message}");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(800) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
}

/// Found by fuzzing (`fuzz/regressions/*/non-utf8-line-*`): the events completed before a line
/// that is not UTF-8 were dropped when they arrived in the same chunk as that line, so the
/// partial message depended on how the network cut the body.
#[tokio::test]
async fn events_before_a_line_that_is_not_utf8_are_kept_however_the_body_is_cut() {
    let mut body = b"data: one\n\ndata: two\n\ndata: \xff\xfe\n\n".to_vec();
    body.extend_from_slice(b"data: [DONE]\n\n");
    for parts in [vec![Part::Bytes(body.clone())], common::split_parts(&body, 1)] {
        let server = MockServer::start(vec![MockResponse {
            parts,
            ..MockResponse::ok(Some("text/event-stream"), "")
        }])
        .await;
        let events = call(client(), &server.url()).await;
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(events[..3], [start(), text("one"), text("two")]);
        let error = only_error(&events[3..]);
        assert!(error.contains("not UTF-8 (line 5)"), "{error}");
    }
}
