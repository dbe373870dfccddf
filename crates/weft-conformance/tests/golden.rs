//! Every scenario rendered in every wire format, checked against golden files a reviewer can
//! read (`tests/snapshots/`). After an intended change, review and update them with
//! `INSTA_UPDATE=always cargo test -p weft-conformance --test golden` (or `cargo insta review`).

use weft_conformance::{render, scenarios};
use weft_protocol::{Protocol, framing};

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
