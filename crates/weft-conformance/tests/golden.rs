//! Every scenario rendered in every wire format, checked against golden files a reviewer can
//! read (`tests/snapshots/`). After an intended change, review and update them with
//! `INSTA_UPDATE=always cargo test -p weft-conformance --test golden` (or `cargo insta review`).

use weft_conformance::{frames_to, render, render_to, scenarios};
use weft_core::AgentEvent;
use weft_protocol::{Framing, Protocol, framing};

/// How a format travels: SSE for the browser-facing formats, NDJSON for Loom.
fn wire_text(protocol: Protocol, frames: &[weft_protocol::Frame]) -> String {
    let mut text = String::new();
    for frame in frames {
        match protocol {
            Protocol::Loom | Protocol::LoomExport => framing::write_ndjson(frame, &mut text),
            _ => framing::write_sse(frame, &mut text),
        }
    }
    text
}

#[test]
fn every_scenario_in_every_format() {
    for name in scenarios::ALL {
        let events = scenarios::scenario_blocking(name);
        let canonical: String =
            events.iter().map(|e| serde_json::to_string(e).unwrap_or_default() + "\n").collect();
        insta::assert_snapshot!(format!("{name}__canonical"), canonical);
        for protocol in Protocol::ALL {
            let frames = render(protocol, &events);
            insta::assert_snapshot!(format!("{name}__{protocol}"), wire_text(protocol, &frames));
        }
    }
}

/// Encoders that write in place (`encode_to`) write exactly the golden frames' bytes, in both
/// framings, for every scenario and format.
#[test]
fn writing_in_place_gives_the_frames_bytes() {
    for name in scenarios::ALL {
        assert_in_place_matches_frames(name, &scenarios::scenario_blocking(name));
    }
}

/// `encode_to` writes what the frames of `render` say, in every format and framing.
fn assert_in_place_matches_frames(name: &str, events: &[AgentEvent]) {
    for protocol in Protocol::ALL {
        let frames = render(protocol, events);
        for framing in [Framing::Sse, Framing::Ndjson] {
            let direct =
                String::from_utf8_lossy(&render_to(protocol, events, framing)).into_owned();
            let framed = String::from_utf8_lossy(&frames_to(&frames, framing)).into_owned();
            assert_eq!(direct, framed, "{name} in {protocol}, {framing:?}");
        }
    }
}

/// A block whose end restates text its deltas did not say (a provider's correction), text with
/// characters JSON escapes, and deltas outside any node: the in-place path agrees there too.
#[test]
fn writing_in_place_agrees_on_odd_blocks() {
    let text = |index, delta: &str| AgentEvent::TextDelta { index, delta: delta.into() };
    let events = vec![
        AgentEvent::TextStart { index: 0 },
        text(0, "quote \" back\\slash \u{1} ünï"),
        AgentEvent::TextEnd { index: 0, text: "quote \" back\\slash \u{1} ünï and more".into() },
        AgentEvent::SessionStart {
            session_id: "s\"1".into(),
            run_id: "r".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::NodeEnter { name: "think".into(), node_id: "think-\n0".into() },
        AgentEvent::ThinkingStart { index: 0 },
        AgentEvent::ThinkingDelta { index: 0, delta: "hmm".into() },
        AgentEvent::ThinkingEnd { index: 0, thinking: "something else".into(), signature: None },
        AgentEvent::TextStart { index: 1 },
        text(1, ""),
        text(1, "ab"),
        text(1, "c"),
        AgentEvent::TextEnd { index: 1, text: "abc".into() },
    ];
    assert_in_place_matches_frames("odd blocks", &events);
}
