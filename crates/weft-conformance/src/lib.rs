//! # weft-conformance
//!
//! Checks that cross layers: real agent runs on the faux provider ([`scenarios`]), normalized so
//! they are reproducible ([`normalize`]), rendered in every wire format by the tests (golden files
//! and Loom invariants), and random runs ([`random`]) decoded back for round-trip properties.
//! Nothing here ships: it is a test crate with a library so its tests share the scenarios.

pub mod normalize;
pub mod random;
pub mod scenarios;

use weft_core::AgentEvent;
use weft_protocol::{Frame, Framing, Protocol, encode};

/// Renders `events` (numbered 1, 2, … as a session's first events are) in `protocol`.
pub fn render(protocol: Protocol, events: &[AgentEvent]) -> Vec<Frame> {
    let mut encoder = protocol.encoder();
    let mut frames = Vec::new();
    for (i, event) in events.iter().enumerate() {
        encode(encoder.as_mut(), i as u64 + 1, event, &mut frames);
    }
    encoder.finish(&mut frames);
    frames
}

/// Renders `events` like [`render`], straight into bytes with
/// [`Encoder::encode_to`](weft_protocol::Encoder::encode_to)
/// in `framing`.
pub fn render_to(protocol: Protocol, events: &[AgentEvent], framing: Framing) -> Vec<u8> {
    let mut encoder = protocol.encoder();
    let mut out = Vec::new();
    for (i, event) in events.iter().enumerate() {
        encoder.encode_to(i as u64 + 1, event, framing, &mut out);
    }
    encoder.finish_to(framing, &mut out);
    out
}

/// The bytes of `frames` in `framing`.
pub fn frames_to(frames: &[Frame], framing: Framing) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        framing.write(frame, &mut out);
    }
    out
}
