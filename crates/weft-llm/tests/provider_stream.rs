//! The faux provider through `ProviderStream`: what each script produces, and how the stream
//! enforces the provider contract.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use weft_core::{AssistantContent, StopReason, Usage};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_llm::scope::in_scope;
use weft_llm::{
    CancellationToken, ContentDelta, ModelRequest, Provider, ProviderEvent, ProviderStream,
    StreamEvent,
};

fn request() -> ModelRequest {
    ModelRequest { model: "m1".into(), ..Default::default() }
}

async fn collect(mut stream: ProviderStream) -> (Vec<ContentDelta>, StreamEvent) {
    let mut deltas = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Content(d) => deltas.push(d),
            terminal => {
                assert!(stream.next().await.is_none(), "nothing after the terminal event");
                return (deltas, terminal);
            }
        }
    }
    panic!("no terminal event")
}

#[tokio::test]
async fn a_full_turn_streams_thinking_text_and_calls_in_order() {
    let turn = FauxTurn::text("Grüße, 世界!")
        .with_thinking("hmm")
        .with_tool_call_id("c1", "get_weather", json!({"city": "Paris"}))
        .with_chunk_size(2)
        .with_usage(10, 5);
    let turn = FauxTurn { signature: Some("sig-1".into()), ..turn };
    let provider = FauxProvider::new(FauxScript::new([turn]));
    let (deltas, terminal) = collect(provider.stream(request(), CancellationToken::new())).await;

    use ContentDelta::*;
    assert_eq!(deltas[0], ThinkingStart { index: 0 });
    assert_eq!(deltas[1], ThinkingDelta { index: 0, delta: "hm".into() });
    assert_eq!(deltas[2], ThinkingDelta { index: 0, delta: "m".into() });
    assert_eq!(deltas[3], ThinkingSignature { index: 0, signature: "sig-1".into() });
    assert_eq!(deltas[4], ThinkingEnd { index: 0 });
    assert_eq!(deltas[5], TextStart { index: 1 });
    // Chunks are counted in characters, never splitting one.
    let text: Vec<_> = deltas
        .iter()
        .filter_map(|d| match d {
            TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, ["Gr", "üß", "e,", " 世", "界!"]);
    assert!(deltas.contains(&ToolCallStart {
        index: 2,
        id: "c1".into(),
        name: "get_weather".into()
    }));
    let args: String = deltas
        .iter()
        .filter_map(|d| match d {
            ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"city":"Paris"}"#);
    assert_eq!(deltas.last(), Some(&ToolCallEnd { index: 2 }));

    let StreamEvent::Done(message) = terminal else { panic!("{terminal:?}") };
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!((message.provider.as_str(), message.model.as_str()), ("faux", "m1"));
    assert_eq!(message.usage, Usage::new(10, 5, 0, 0));
    assert!(matches!(&message.content[0],
        AssistantContent::Thinking(t) if t.thinking == "hmm" && t.signature.as_deref() == Some("sig-1")));
    assert_eq!(message.text(), "Grüße, 世界!");
    let call = message.tool_calls().next().unwrap();
    assert_eq!(call.arguments, json!({"city": "Paris"}).into());
}

#[tokio::test]
async fn each_session_has_its_own_cursor_and_running_out_is_an_error() {
    let provider =
        FauxProvider::new(FauxScript::new([FauxTurn::text("one"), FauxTurn::text("two")]));
    let text = |e: StreamEvent| match e {
        StreamEvent::Done(m) => m.text(),
        other => panic!("{other:?}"),
    };
    let c = CancellationToken::new;
    // Each scope (an agent's session) has a cursor of its own.
    let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
    let open = |scope: &Arc<str>| in_scope(scope, || provider.stream(request(), c()));
    assert_eq!(text(collect(open(&a)).await.1), "one");
    assert_eq!(text(collect(open(&b)).await.1), "one");
    assert_eq!(text(collect(open(&a)).await.1), "two");
    let (_, end) = collect(open(&a)).await;
    let StreamEvent::Error(m) = end else { panic!("{end:?}") };
    assert_eq!(m.stop_reason, StopReason::Error);
    assert_eq!(
        m.error_message.as_deref(),
        Some("the faux script has no turn left: all 2 turns were played")
    );
    assert_eq!(provider.turns_played("a"), 3);
}

#[tokio::test]
async fn an_error_turn_cuts_the_stream_mid_block_and_keeps_the_partial() {
    let turn =
        FauxTurn::text("abcdef").with_chunk_size(4).with_usage(3, 2).with_error("overloaded");
    let provider = FauxProvider::new(FauxScript::new([turn]));
    let (deltas, end) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert!(
        !deltas.iter().any(|d| matches!(d, ContentDelta::TextEnd { .. })),
        "cut before the end"
    );
    let StreamEvent::Error(m) = end else { panic!("{end:?}") };
    assert_eq!((m.text().as_str(), m.error_message.as_deref()), ("abcdef", Some("overloaded")));
    assert_eq!(m.usage.total, 5, "usage already sent is kept");
}

/// A stream that said "partial" and now hangs until `cancel` fires.
async fn stalled_after_partial(cancel: CancellationToken) -> ProviderStream {
    let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("partial")
        .with_chunk_size(100)
        .stalled()]));
    let mut stream = provider.stream(request(), cancel);
    for _ in 0..2 {
        assert!(matches!(stream.next().await, Some(StreamEvent::Content(_))));
    }
    assert_eq!(stream.partial().text(), "partial");
    assert!(tokio::time::timeout(Duration::from_millis(30), stream.next()).await.is_err());
    stream
}

#[tokio::test]
async fn cancelling_a_stalled_stream_ends_it_aborted_with_the_partial() {
    let cancel = CancellationToken::new();
    let mut stream = stalled_after_partial(cancel.clone()).await;
    cancel.cancel();
    let Some(StreamEvent::Error(m)) = stream.next().await else { panic!("not aborted") };
    assert_eq!(m.stop_reason, StopReason::Aborted);
    assert_eq!(m.text(), "partial");
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn a_cancel_stops_a_stream_whose_next_deltas_are_already_there() {
    let provider =
        FauxProvider::new(FauxScript::new([FauxTurn::text("abcdefghij").with_chunk_size(1)]));
    let cancel = CancellationToken::new();
    let mut stream = provider.stream(request(), cancel.clone());
    while stream.partial().text().is_empty() {
        assert!(matches!(stream.next().await, Some(StreamEvent::Content(_))));
    }
    cancel.cancel();
    // Nine more deltas are ready at once; none is handed on after the cancellation.
    let Some(StreamEvent::Error(m)) = stream.next().await else { panic!("not aborted") };
    assert_eq!((m.stop_reason, m.text().as_str()), (StopReason::Aborted, "a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_wakes_the_task_waiting_on_a_stalled_stream_after_the_stream_moved() {
    let parent = CancellationToken::new();
    let mut stream = stalled_after_partial(parent.child_token()).await;
    // Another task now waits on it (a new waker); only the cancellation can wake it.
    let waiting = tokio::spawn(async move { stream.next().await });
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!waiting.is_finished(), "a stalled stream waits");
    tokio::spawn(async move { parent.cancel() });
    let woken = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    let Ok(Ok(Some(StreamEvent::Error(m)))) = woken else { panic!("not woken: {woken:?}") };
    assert_eq!((m.stop_reason, m.text().as_str()), (StopReason::Aborted, "partial"));
}

#[tokio::test(start_paused = true)]
async fn delays_apply_before_each_delta() {
    let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("abcdefgh")
        .with_chunk_size(2)
        .with_delay_ms(100)]));
    let start = tokio::time::Instant::now();
    let (deltas, _) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert_eq!(deltas.len(), 6);
    assert_eq!(start.elapsed(), Duration::from_millis(400), "four deltas, 100ms each");
}

#[tokio::test]
async fn invalid_argument_json_is_kept_as_raw_text() {
    let turn = FauxTurn::tool_call("f", json!("{\"a\": tru"));
    let provider = FauxProvider::new(FauxScript::new([turn]));
    let (_, end) = collect(provider.stream(request(), CancellationToken::new())).await;
    let StreamEvent::Done(m) = end else { panic!() };
    assert_eq!(m.tool_calls().next().unwrap().arguments, json!("{\"a\": tru").into());
}

#[tokio::test]
async fn partial_arguments_are_visible_while_a_call_streams() {
    let turn = FauxTurn::tool_call("f", json!({"path": "/a/long/path"})).with_chunk_size(6);
    let provider = FauxProvider::new(FauxScript::new([turn]));
    let mut stream = provider.stream(request(), CancellationToken::new());
    let mut snapshots = Vec::new();
    while let Some(StreamEvent::Content(d)) = stream.next().await {
        if let ContentDelta::ToolCallDelta { index, .. } = d {
            snapshots.push(stream.tool_call_arguments(index).cloned());
        }
    }
    assert_eq!(snapshots.first(), Some(&Some(json!({}))));
    assert_eq!(
        snapshots[1..],
        [
            Some(json!({"path": "/a/"})),
            Some(json!({"path": "/a/long/p"})),
            Some(json!({"path": "/a/long/path"}))
        ]
    );
}

fn scripted(events: Vec<ProviderEvent>) -> ProviderStream {
    ProviderStream::new("test", "m", None, CancellationToken::new(), futures::stream::iter(events))
}

#[tokio::test]
async fn the_stream_enforces_the_provider_contract() {
    use ContentDelta::*;
    // An adapter that stops without a terminal event.
    let (_, end) = collect(scripted(vec![
        ProviderEvent::Content(TextStart { index: 0 }),
        ProviderEvent::Content(TextDelta { index: 0, delta: "half".into() }),
    ]))
    .await;
    let StreamEvent::Error(m) = end else { panic!() };
    assert_eq!(m.text(), "half");
    assert!(m.error_message.unwrap().contains("ended before the call was complete"));

    // A delta for a block that was never started.
    let (_, end) = collect(scripted(vec![
        ProviderEvent::Content(TextStart { index: 0 }),
        ProviderEvent::Content(TextDelta { index: 3, delta: "x".into() }),
    ]))
    .await;
    let StreamEvent::Error(m) = end else { panic!() };
    assert_eq!(
        m.error_message.as_deref(),
        Some("provider protocol violation: block 3 is not open")
    );

    // A block started out of order.
    let (_, end) = collect(scripted(vec![ProviderEvent::Content(ToolCallStart {
        index: 1,
        id: "c".into(),
        name: "f".into(),
    })]))
    .await;
    assert!(matches!(end, StreamEvent::Error(_)));

    // A failure event with a non-failure reason still ends as an error.
    let (_, end) = collect(scripted(vec![ProviderEvent::Error {
        reason: StopReason::Stop,
        message: "boom".into(),
    }]))
    .await;
    let StreamEvent::Error(m) = end else { panic!() };
    assert_eq!((m.stop_reason, m.error_message.as_deref()), (StopReason::Error, Some("boom")));
}

#[tokio::test]
async fn cost_is_computed_from_prices() {
    let provider =
        FauxProvider::new(FauxScript::new([FauxTurn::text("x").with_usage(1_000_000, 1_000_000)]));
    let mut req = request();
    req.prices = Some(weft_core::Prices { input: 1.0, output: 4.0, ..Default::default() });
    let (_, end) = collect(provider.stream(req, CancellationToken::new())).await;
    let StreamEvent::Done(m) = end else { panic!() };
    assert_eq!(m.cost.unwrap().total, 5.0);
}

#[tokio::test]
async fn scripted_usage_near_u64_max_saturates_instead_of_panicking() {
    let script = FauxScript::from_json(
        r#"{"turns":[{"text":"big","usage":{"input":18446744073709551615,"output":18446744073709551615,"cacheRead":5,"reasoning":18446744073709551615}}]}"#,
    )
    .unwrap();
    let provider = FauxProvider::new(script);
    let mut req = request();
    req.prices =
        Some(weft_core::Prices { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 0.0 });
    let (_, end) = collect(provider.stream(req, CancellationToken::new())).await;
    let StreamEvent::Done(m) = end else { panic!("{end:?}") };
    let mut expected = Usage::new(u64::MAX, u64::MAX, 5, 0);
    expected.reasoning = Some(u64::MAX);
    assert_eq!(m.usage, expected);
    assert_eq!(m.usage.total, u64::MAX);
    let cost = m.cost.unwrap();
    assert!(cost.total.is_finite() && cost.output > cost.input, "{cost:?}");
}

#[tokio::test]
async fn a_scripted_error_stop_reason_says_where_it_comes_from_once() {
    let script = FauxScript::from_json(
        r#"{"turns":[{"text":"ok"},{"text":"partial","stopReason":"error"},{"stopReason":"aborted"}]}"#,
    )
    .unwrap();
    let provider = FauxProvider::new(script);
    let (_, end) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert!(matches!(end, StreamEvent::Done(_)));
    let (_, end) = collect(provider.stream(request(), CancellationToken::new())).await;
    let StreamEvent::Error(m) = end else { panic!("{end:?}") };
    assert_eq!(m.stop_reason, StopReason::Error);
    assert_eq!(m.text(), "partial");
    // What a consumer shows after its own "the model call failed: ".
    assert_eq!(
        m.error_message.as_deref(),
        Some("the faux script's turn 2 ends with stopReason \"error\"")
    );
    let (_, end) = collect(provider.stream(request(), CancellationToken::new())).await;
    let StreamEvent::Error(m) = end else { panic!("{end:?}") };
    assert_eq!(m.stop_reason, StopReason::Aborted);
    assert_eq!(
        m.error_message.as_deref(),
        Some("the faux script's turn 3 ends with stopReason \"aborted\"")
    );
}

#[tokio::test]
async fn a_provider_failure_without_a_message_is_not_described_as_the_call_failing() {
    let (_, end) =
        collect(scripted(vec![ProviderEvent::Done { stop_reason: StopReason::Error }])).await;
    let StreamEvent::Error(m) = end else { panic!("{end:?}") };
    let message = m.error_message.unwrap();
    assert!(!message.contains("the model call failed"), "{message}");
    assert_eq!(&*message, "the provider ended the call with stop reason error and no message");
}

fn registry() -> std::sync::Arc<weft_llm::models::ModelRegistry> {
    let json = r#"[{"provider":"faux","id":"faux-priced","prices":{"input":2,"output":8,"cacheRead":0.5}},
                   {"provider":"openai","id":"faux","prices":{"input":100,"output":100}}]"#;
    std::sync::Arc::new(weft_llm::models::ModelRegistry::from_json(json).unwrap())
}

#[tokio::test]
async fn costs_come_from_a_registry_given_to_the_provider() {
    let turn = || FauxTurn::text("x").with_usage(1_000_000, 500_000);
    let provider = FauxProvider::new(FauxScript::new([turn(), turn(), turn(), turn(), turn()]))
        .with_registry(registry());
    let call = |model: &str, prices: Option<weft_core::Prices>| {
        let req = ModelRequest { model: model.into(), prices, ..request() };
        let stream = provider.stream(req, CancellationToken::new());
        async move {
            match collect(stream).await.1 {
                StreamEvent::Done(m) => *m,
                other => panic!("{other:?}"),
            }
        }
    };
    // A model the registry knows for the provider `faux`: its prices.
    let m = call("faux-priced", None).await;
    assert_eq!(m.cost.map(|c| (c.input, c.output, c.total)), Some((2.0, 4.0, 6.0)));
    // The request's own prices win.
    let own = weft_core::Prices { input: 1.0, ..Default::default() };
    assert_eq!(call("faux-priced", Some(own)).await.cost.unwrap().total, 1.0);
    // The default model id without an entry (another provider's `faux` does not count): a cost
    // of zero, as without a registry, and no warning.
    let zero = Some(Box::new(weft_core::Cost::default()));
    let m = call("", None).await;
    assert_eq!((m.model.as_str(), &m.cost), ("faux", &zero));
    assert_eq!(call("faux", None).await.cost, zero);
    // Another unknown model: zero, as the real adapters count unknown models.
    assert_eq!(call("faux-unknown", None).await.cost, zero);
    // Without a registry nothing changes.
    let plain = FauxProvider::new(FauxScript::new([turn()]));
    let req = ModelRequest { model: "faux-priced".into(), ..request() };
    let StreamEvent::Done(m) = collect(plain.stream(req, CancellationToken::new())).await.1 else {
        panic!()
    };
    assert_eq!(m.cost, zero, "every assistant message carries its cost");
}
