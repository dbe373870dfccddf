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
use weft_protocol::{Frame, Protocol, encode};

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
