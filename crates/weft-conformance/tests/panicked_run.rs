//! A run whose task panics (a provider or hook breaking its contract) still ends the way every
//! run ends: each wire format writes its closing frame, and sequence numbers go on after the
//! events already given out.

#![allow(clippy::unwrap_used)]

use futures::StreamExt;
use weft_agent::{Agent, SessionOptions};
use weft_core::{AgentEvent, Input, SessionStatus};
use weft_llm::{
    CancellationToken, ContentDelta, ModelRequest, Provider, ProviderEvent, ProviderStream,
};
use weft_protocol::{Frame, Protocol, encode};

/// Streams the start of an answer, then panics while the text block is still open.
struct PanicsMidStream;

impl Provider for PanicsMidStream {
    fn name(&self) -> &str {
        "panics"
    }

    fn stream(&self, _request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let events = futures::stream::iter(0..3).map(|i| match i {
            0 => ProviderEvent::Content(ContentDelta::TextStart { index: 0 }),
            1 => ProviderEvent::Content(ContentDelta::TextDelta {
                index: 0,
                delta: "Half an ans".into(),
            }),
            _ => panic!("provider bug"),
        });
        ProviderStream::new("panics", "panics-1", None, cancel, events)
    }
}

/// The last JSON frame's tag, or the raw terminator.
fn closing(protocol: Protocol, frames: &[Frame]) -> String {
    let last = frames.last().unwrap();
    if !last.is_json() {
        return last.data.clone();
    }
    let value: serde_json::Value = serde_json::from_str(&last.data).unwrap();
    match protocol {
        Protocol::Loom | Protocol::LoomExport => {
            assert!(value.get("reply").is_some(), "{}", last.data);
            format!("reply/{}", value["status"].as_str().unwrap())
        }
        Protocol::Aceai => value["event_type"].as_str().unwrap().to_string(),
        _ => value["type"].as_str().unwrap().to_string(),
    }
}

#[tokio::test]
async fn a_panicking_run_ends_every_stream_with_its_closing_frame() {
    let agent = Agent::builder(PanicsMidStream).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let events: Vec<(u64, AgentEvent)> =
        agent.execute(&session, Input::text("go")).await.unwrap().sequenced().collect().await;
    let kinds: Vec<&str> = events.iter().map(|(_, e)| e.kind()).collect();
    assert_eq!(kinds.first(), Some(&"session_start"));
    assert!(kinds.contains(&"text_delta"), "events before the panic are delivered: {kinds:?}");
    let [
        ..,
        (_, AgentEvent::Error { error, .. }),
        (last_seq, AgentEvent::SessionEnd { status, .. }),
    ] = events.as_slice()
    else {
        panic!("the stream must end with error then session_end: {kinds:?}")
    };
    assert_eq!(error, "the run stopped unexpectedly: provider bug");
    assert_eq!(*status, SessionStatus::Error);
    let seqs: Vec<u64> = events.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (1..=*last_seq).collect::<Vec<_>>(), "numbered without gaps");
    assert_eq!(session.status(), SessionStatus::Error);

    let expected = [
        (Protocol::Native, "execute_complete"),
        (Protocol::Loom, "reply/error"),
        (Protocol::LoomExport, "reply/error"),
        (Protocol::Aceai, "agent.run.completed"),
        (Protocol::AgUi, "RUN_ERROR"),
        (Protocol::Vercel, "[DONE]"),
    ];
    for (protocol, tag) in expected {
        let mut encoder = protocol.encoder();
        let mut frames = Vec::new();
        for (seq, event) in &events {
            encode(encoder.as_mut(), *seq, event, &mut frames);
        }
        encoder.finish(&mut frames);
        assert_eq!(closing(protocol, &frames), tag, "{protocol}");
    }

    // The next run numbers its events after the panicked run's: no id is given out twice.
    let next: Vec<(u64, AgentEvent)> =
        agent.execute(&session, Input::text("again")).await.unwrap().sequenced().collect().await;
    assert_eq!(next.first().map(|(s, _)| *s), Some(last_seq + 1));
}
