//! # weft-protocol
//!
//! Wire formats. Weft's runs emit one canonical stream of [`AgentEvent`]s; each format here is a
//! projection of it, rendered by a streaming [`Encoder`] that keeps per-stream state:
//!
//! | [`Protocol`] | module | what |
//! | --- | --- | --- |
//! | `native` | [`native`] | the agent plan's events, then `execute_complete` |
//! | `loom` | [`loom`] | the Loom stream protocol's NDJSON frames with envelope and the final `reply` |
//! | `loom-export` | [`loom`] | the same, in the single-key export form |
//! | `aceai` | [`aceai`] | `agent.*` step events |
//! | `ag-ui` | [`agui`] | AG-UI events |
//! | `vercel` | [`vercel`] | the Vercel AI SDK UI message stream v1 |
//!
//! Encoders are transport-free: they produce [`Frame`]s (one JSON document each), and
//! [`framing`] writes frames as SSE or NDJSON. Decoders turn frames back into a
//! [`Transcript`](transcript::Transcript) (native, AceAI) or merge Loom streams
//! ([`loom::LoomReceiver`]).
//!
//! This crate depends on `weft-core` only: it never runs agents, never does IO.

pub mod aceai;
pub mod agui;
pub mod framing;
pub mod loom;
pub mod native;
pub mod transcript;
pub mod vercel;

use weft_core::AgentEvent;

pub use framing::Framing;

/// One wire message: a single JSON document (or a format's terminal marker such as `[DONE]`),
/// with the session sequence number of the event it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The sequence number of the canonical event this frame renders (the SSE `id:`, the resume
    /// cursor). Set by [`encode`] on the last frame an event produces, so a client resuming
    /// after it never misses part of an event.
    pub id: Option<u64>,
    /// The frame's JSON text, compact (no raw newline).
    pub data: String,
}

impl Frame {
    /// A frame of `value`'s compact JSON.
    pub fn json(value: &impl serde::Serialize) -> Self {
        // Serializing plain data structures (strings, numbers, maps with string keys) cannot
        // fail; should it ever, the frame says so instead of panicking.
        let data = serde_json::to_string(value)
            .unwrap_or_else(|e| format!("{{\"error\":\"unserializable frame: {e}\"}}"));
        Self { id: None, data }
    }

    /// A frame of raw text (a terminal marker such as `[DONE]`).
    pub fn raw(data: impl Into<String>) -> Self {
        Self { id: None, data: data.into() }
    }

    /// Whether the frame is a JSON object (terminal markers are not).
    pub fn is_json(&self) -> bool {
        self.data.starts_with('{')
    }
}

/// A streaming projection of the canonical events into one wire format. One encoder serves one
/// stream (one run, or one session's runs in order); it keeps what the format needs to remember
/// (open messages, counters, ids).
pub trait Encoder: Send {
    /// Renders one event, appending zero or more frames to `out`.
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>);

    /// The node run the next event belongs to, as the session's log records it
    /// ([`EventRecord::node_id`](weft_core::EventRecord::node_id)); callers that have records
    /// call it before each [`encode`](Self::encode). Formats with a node envelope (Loom) use
    /// it, so concurrent node runs keep their own events; others ignore it. Without it, an
    /// event belongs to the innermost open node run.
    fn set_node(&mut self, node: Option<&std::sync::Arc<str>>) {
        let _ = node;
    }

    /// Frames to send after the stream's last event, if the format has a terminator.
    fn finish(&mut self, out: &mut Vec<Frame>) {
        let _ = out;
    }

    /// Renders one event (sequence number `seq`) straight into `out` as `framing`'s bytes: the
    /// same bytes as [`encode`] followed by [`Framing::write`] of each frame. Formats whose
    /// events come once per token write their JSON in place (no frame, no intermediate string);
    /// the others go through their frames.
    fn encode_to(&mut self, seq: u64, event: &AgentEvent, framing: Framing, out: &mut Vec<u8>) {
        encode_via_frames(self, seq, event, framing, out);
    }

    /// [`finish`](Self::finish), written as `framing`'s bytes.
    fn finish_to(&mut self, framing: Framing, out: &mut Vec<u8>) {
        let mut frames = Vec::new();
        self.finish(&mut frames);
        for frame in &frames {
            framing.write(frame, out);
        }
    }
}

/// `text` as a JSON string (quoted, escaped), appended to `out`.
pub(crate) fn write_str(text: &str, out: &mut Vec<u8>) {
    // Most text (a token) needs no escape: one copy, no per-byte writes. JSON escapes only `"`,
    // `\` and control characters; serde_json writes every other character as it is.
    if !text.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        return;
    }
    // Writing a string into a Vec cannot fail.
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

/// [`Encoder::encode_to`] through the encoder's frames: [`encode`], then [`Framing::write`].
pub(crate) fn encode_via_frames<E: Encoder + ?Sized>(
    encoder: &mut E,
    seq: u64,
    event: &AgentEvent,
    framing: Framing,
    out: &mut Vec<u8>,
) {
    let mut frames = Vec::new();
    encoder.encode(event, &mut frames);
    if let Some(last) = frames.last_mut() {
        last.id = Some(seq);
    }
    for frame in &frames {
        framing.write(frame, out);
    }
}

/// Writes `value`'s compact JSON into `out`, as one frame of `framing` with `id`. Should
/// serialization fail (it cannot for the plain data Weft writes), what was written is taken back
/// and the frame says so instead.
pub(crate) fn write_json_frame(
    framing: Framing,
    id: Option<u64>,
    value: &impl serde::Serialize,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    framing.open(id, out);
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        out.truncate(start);
        framing.write(
            &Frame {
                id,
                ..Frame::json(&serde_json::json!({ "error": format!("unserializable frame: {e}") }))
            },
            out,
        );
        return;
    }
    framing.close(out);
}

/// The error the last failed assistant message among `messages` gave, if it gave one (a run's
/// closing events name why it failed).
pub(crate) fn last_error_message(
    messages: &[std::sync::Arc<weft_core::Message>],
) -> Option<String> {
    messages.iter().rev().find_map(|m| match &**m {
        weft_core::Message::Assistant(a) if a.stop_reason.is_failure() => {
            a.error_message.as_deref().map(String::from)
        }
        _ => None,
    })
}

/// The event's JSON fields, without its `type` tag (for formats that carry a canonical event's
/// payload under their own tag).
pub(crate) fn event_fields(event: &AgentEvent) -> serde_json::Value {
    let mut value = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(map) = &mut value {
        map.remove("type");
        if let AgentEvent::Progress(_) = event {
            map.remove("kind");
        }
    }
    value
}

/// Renders `event` (sequence number `seq`) with `encoder`, setting `seq` as the id of the last
/// frame it produced.
pub fn encode(encoder: &mut dyn Encoder, seq: u64, event: &AgentEvent, out: &mut Vec<Frame>) {
    let start = out.len();
    encoder.encode(event, out);
    if out.len() > start
        && let Some(last) = out.last_mut()
    {
        last.id = Some(seq);
    }
}

/// A wire format, named as in `?protocol=` and `weft run --protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The agent plan's events (`native`).
    Native,
    /// Loom NDJSON, type + payload with envelope (`loom`).
    Loom,
    /// Loom NDJSON in the single-key export form (`loom-export`).
    LoomExport,
    /// AceAI `agent.*` step events (`aceai`).
    Aceai,
    /// AG-UI events (`ag-ui`).
    AgUi,
    /// Vercel AI SDK UI message stream v1 (`vercel`).
    Vercel,
}

impl Protocol {
    /// Every format.
    pub const ALL: [Protocol; 6] = [
        Protocol::Native,
        Protocol::Loom,
        Protocol::LoomExport,
        Protocol::Aceai,
        Protocol::AgUi,
        Protocol::Vercel,
    ];

    /// The format's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Native => "native",
            Protocol::Loom => "loom",
            Protocol::LoomExport => "loom-export",
            Protocol::Aceai => "aceai",
            Protocol::AgUi => "ag-ui",
            Protocol::Vercel => "vercel",
        }
    }

    /// A fresh encoder for one stream.
    pub fn encoder(self) -> Box<dyn Encoder> {
        match self {
            Protocol::Native => Box::new(native::NativeEncoder::new()),
            Protocol::Loom => Box::new(loom::LoomEncoder::new()),
            Protocol::LoomExport => Box::new(loom::LoomEncoder::export()),
            Protocol::Aceai => Box::new(aceai::AceaiEncoder::new()),
            Protocol::AgUi => Box::new(agui::AgUiEncoder::new()),
            Protocol::Vercel => Box::new(vercel::VercelEncoder::new()),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol {0:?}: expected native, loom, loom-export, aceai, ag-ui or vercel")]
pub struct UnknownProtocol(pub String);

impl std::str::FromStr for Protocol {
    type Err = UnknownProtocol;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProtocol(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::write_str;

    fn written(text: &str) -> String {
        let mut out = b"prefix".to_vec();
        write_str(text, &mut out);
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    #[test]
    fn plain_and_escaped_text_is_written_as_serde_json_writes_it() {
        for text in [
            "",
            "abcd",
            "é ü 中文 🦀",
            "a\"b",
            "back\\slash",
            "line\nbreak",
            "\u{1}\u{1f}\u{7f}",
            "</script>",
        ] {
            let expected = serde_json::to_string(text).expect("a string serializes");
            assert_eq!(written(text), format!("prefix{expected}"), "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn any_text_is_written_as_serde_json_writes_it(text in any::<String>()) {
            let expected = serde_json::to_string(&text).expect("a string serializes");
            prop_assert_eq!(written(&text), format!("prefix{expected}"));
        }
    }
}
